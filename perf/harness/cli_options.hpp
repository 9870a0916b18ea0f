// A subcommand's command-line options (what its add_options fills) and the helpers that add them:
// options whose values go through the driver's parse_count, parse_size and name lists, so that
// every bad value is a UsageError that names its option (exit status 2). The options are plain
// data that the driver hands to CLI11 (driver.cpp, the one file of a program that includes it):
// CLI11's header costs seconds and hundreds of MB per file that includes it, and four builds of
// the test suite compile these files.
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "driver.hpp"

namespace gnio::perf {

/// One option of a command line.
struct CommandOption {
  std::string flags;      ///< CLI11's spelling: "-x,--long" (one or more names)
  std::string help;       ///< its line(s) in the help
  std::string type_name;  ///< what the help shows for its value (N, SIZE, a|b|c)
  /// Parses and stores one value; throws UsageError naming the option. Unset for a flag.
  std::function<void(const std::string&)> take;
  bool* flag = nullptr;  ///< a flag without a value: set to true when given

  /// Sets what the help shows for the value (the chain CLI11 users know).
  CommandOption& value_name(std::string name) {
    type_name = std::move(name);
    return *this;
  }
};

/// The options a subcommand adds and the notes at the end of its help.
struct OptionList {
  std::deque<CommandOption> options;  ///< a deque: add's reference stays valid as more are added
  std::string footer;

  /// Adds an option with a value that `take` parses and stores.
  CommandOption& add(std::string flags, std::function<void(const std::string&)> take,
                     std::string help, std::string type_name) {
    return options.emplace_back(CommandOption{std::move(flags), std::move(help),
                                              std::move(type_name), std::move(take), nullptr});
  }
  /// Adds a flag that sets `out`.
  CommandOption& add_flag(std::string flags, bool& out, std::string help) {
    return options.emplace_back(CommandOption{std::move(flags), std::move(help), "", {}, &out});
  }
};

/// A name on the command line and the values it stands for ("atomic": fetch_add, compare_swap).
template <class T>
struct Named {
  const char* name;
  std::vector<T> values;
};

/// The names of `names` as "a|b|c" (messages and help).
template <class T>
std::string choice_list(const std::vector<Named<T>>& names) {
  std::string choices;
  for (const Named<T>& n : names) choices += std::string(choices.empty() ? "" : "|") + n.name;
  return choices;
}

/// The entry of `names` called `word`. Throws UsageError "OPTION: 'word' is not one of a|b|c".
template <class T>
const Named<T>& find_name(const std::string& word, const std::string& option,
                          const std::vector<Named<T>>& names) {
  const auto it =
      std::find_if(names.begin(), names.end(), [&](const Named<T>& n) { return word == n.name; });
  if (it == names.end())
    throw UsageError{option + ": '" + word + "' is not one of " + choice_list(names)};
  return *it;
}

/// Parses a comma-separated list of names into values (duplicates dropped, order kept).
template <class T>
std::vector<T> parse_names(const std::string& text, const std::string& option,
                           const std::vector<Named<T>>& names) {
  std::vector<T> out;
  std::size_t pos = 0;
  while (true) {
    const std::size_t comma = text.find(',', pos);
    const std::string word =
        text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    for (T v : find_name(word, option, names).values)
      if (std::find(out.begin(), out.end(), v) == out.end()) out.push_back(v);
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return out;
}

/// Adds `flags` (CLI11's "-x,--long"), a comma-separated LIST of `names` into `out`; `what` names
/// it in messages.
template <class T>
CommandOption& add_names_option(OptionList& list, const std::string& flags, const std::string& what,
                                std::vector<T>& out, std::vector<Named<T>> names,
                                const std::string& help) {
  return list.add(
      flags,
      [&out, what, names = std::move(names)](const std::string& v) {
        out = parse_names(v, what, names);
      },
      help, "LIST");
}

/// Adds `flags`, one of `names` (each standing for one value) into `out`.
template <class T>
CommandOption& add_choice_option(OptionList& list, const std::string& flags,
                                 const std::string& what, T& out, std::vector<Named<T>> names,
                                 const std::string& help) {
  std::string choices = choice_list(names);
  return list.add(
      flags,
      [&out, what, names = std::move(names)](const std::string& v) {
        out = find_name(v, what, names).values.front();
      },
      help, std::move(choices));
}

/// The value an option stores into `out` (an optional one's value type).
template <class T>
struct OptionValue {
  using type = T;
};
template <class T>
struct OptionValue<std::optional<T>> {
  using type = T;
};

/// Adds `flags`, a whole number from `min` to `max` into `out` (parse_count's check, then
/// "WHAT must be at least MIN").
template <class T>
CommandOption& add_count_option(OptionList& list, const std::string& flags, const std::string& what,
                                T& out, std::uint64_t min, std::uint64_t max,
                                const std::string& help) {
  return list.add(
      flags,
      [&out, what, min, max](const std::string& v) {
        const std::uint64_t n = parse_count(v, what.c_str(), max);
        if (n < min) throw UsageError{what + " must be at least " + std::to_string(min)};
        out = static_cast<typename OptionValue<T>::type>(n);
      },
      help, "N");
}

/// Adds `flags`, a byte count (parse_size: 8, 64K, 1M) from `min` to `max` into `out`; `refusal`
/// is the message for one outside.
inline CommandOption& add_size_option(OptionList& list, const std::string& flags,
                                      const std::string& what, std::uint64_t& out,
                                      std::uint64_t min, std::uint64_t max,
                                      const std::string& refusal, const std::string& help) {
  return list.add(
      flags,
      [&out, what, min, max, refusal](const std::string& v) {
        const std::uint64_t n = parse_size(v, what.c_str());
        if (n < min || n > max) throw UsageError{refusal};
        out = n;
      },
      help, "SIZE");
}

}  // namespace gnio::perf
