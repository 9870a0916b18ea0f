// The table of every GNIO_* environment variable: one place that both parsing and gnio-info use.
#pragma once

#include <span>
#include <string>

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

/// Name of a ConfigType as gnio-info prints it.
const char* to_string(ConfigType t) noexcept;

}  // namespace gnio
