// The table of every GNIO_* environment variable: one place that both parsing and gnio-info use.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace gnio {

/// How a configuration variable's text is read.
enum class ConfigType {
  Int,      ///< decimal integer
  Size,     ///< byte count with an optional K, M, G or T suffix (powers of 1024)
  Seconds,  ///< decimal seconds, fractions allowed
  Bool,     ///< 0/1, true/false, yes/no, on/off
  String,   ///< free text
  Enum,     ///< one of the words listed in the description's braces
};

/// One GNIO_* variable: its name, type, default text and what it does.
struct ConfigVar {
  const char* name;
  ConfigType type;
  const char* default_value;
  const char* description;
};

/// Every variable gnio reads, in the order gnio-info prints them.
std::span<const ConfigVar> config_vars() noexcept;

/// The variable's current text: the environment's value if set, else its default. Throws
/// Error(Internal) if `name` is not in the table (every variable read must be documented).
std::string config_text(const char* name);
/// True when the variable is set in the environment.
bool config_is_set(const char* name);

/// Typed reads; a value that does not parse throws Error(InvalidArgument) naming the variable.
long long config_int(const char* name);
unsigned long long config_size(const char* name);
double config_seconds(const char* name);
bool config_bool(const char* name);

/// Parses a byte count as every gnio size setting and tool option takes it: decimal digits, then
/// optionally K, M, G or T (powers of 1024, either case), an `i` after that suffix and a final
/// `B` (8, 64K, 64KiB, 1M, 2G, 4096B). nullopt for anything else: empty, a sign, other characters,
/// or a value that does not fit 64 bits.
std::optional<std::uint64_t> parse_byte_count(std::string_view text) noexcept;

/// Name of a ConfigType as gnio-info prints it.
const char* to_string(ConfigType t) noexcept;

}  // namespace gnio
