// Printable names of enumerations whose values run 0, 1, 2, ...: a table of names in the
// enumeration's order stands in for a switch per to_string().
#pragma once

#include <cstddef>
#include <type_traits>

namespace gnio {

/// The name of `value` in `names` (the enumeration's values in order, from 0); "?" for a value
/// outside the table, as a corrupted or newer value would be.
template <class Enum, std::size_t N>
constexpr const char* enum_name(Enum value, const char* const (&names)[N]) noexcept {
  // A negative value of a signed enumeration becomes too large an index here, so one comparison
  // covers both ends.
  const auto index = static_cast<std::make_unsigned_t<std::underlying_type_t<Enum>>>(value);
  return index < N ? names[index] : "?";
}

}  // namespace gnio
