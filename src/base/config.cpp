#include "gnio/config.hpp"

#include <strings.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>

#include "base/fail.hpp"

namespace gnio {
namespace {

// The rows are in config_vars.def, where the comment says how to add one.
constexpr ConfigVar kVars[] = {
#define GNIO_CONFIG_VAR(name, type, default_value, description) \
  {name, ConfigType::type, default_value, description},
#include "base/config_vars.def"
#undef GNIO_CONFIG_VAR
};

bool parse_bool(const std::string& s, bool* out) {
  const char* t = s.c_str();
  if (!strcasecmp(t, "1") || !strcasecmp(t, "true") || !strcasecmp(t, "yes") ||
      !strcasecmp(t, "on")) {
    *out = true;
    return true;
  }
  if (!strcasecmp(t, "0") || !strcasecmp(t, "false") || !strcasecmp(t, "no") ||
      !strcasecmp(t, "off") || s.empty()) {
    *out = false;
    return true;
  }
  return false;
}

const ConfigVar* find(const char* name) {
  for (const ConfigVar& v : kVars)
    if (!std::strcmp(v.name, name)) return &v;
  return nullptr;
}

[[noreturn]] void bad_value(const char* name, const std::string& text, const char* expected) {
  fail(ErrorClass::InvalidArgument, "environment variable %s='%s' is not %s; unset it or fix it",
       name, text.c_str(), expected);
}

}  // namespace

std::span<const ConfigVar> config_vars() noexcept {
  return kVars;
}

std::string config_text(const char* name) {
  const ConfigVar* v = find(name);
  if (!v) fail(ErrorClass::Internal, "configuration variable %s is not in gnio's table", name);
  const char* e = std::getenv(name);
  return e ? std::string(e) : std::string(v->default_value);
}

bool config_is_set(const char* name) {
  if (!find(name))
    fail(ErrorClass::Internal, "configuration variable %s is not in gnio's table", name);
  return std::getenv(name) != nullptr;
}

long long config_int(const char* name) {
  std::string t = config_text(name);
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(t.c_str(), &end, 10);
  if (t.empty() || errno || *end) bad_value(name, t, "an integer");
  return v;
}

std::optional<std::uint64_t> parse_byte_count(std::string_view text) noexcept {
  std::size_t i = 0;
  std::uint64_t v = 0;
  for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i) {
    const std::uint64_t digit = static_cast<std::uint64_t>(text[i] - '0');
    if (v > (~std::uint64_t{0} - digit) / 10) return std::nullopt;
    v = v * 10 + digit;
  }
  if (i == 0) return std::nullopt;
  unsigned shift = 0;
  if (i < text.size()) {
    switch (text[i]) {
      case 'k':
      case 'K': shift = 10; break;
      case 'm':
      case 'M': shift = 20; break;
      case 'g':
      case 'G': shift = 30; break;
      case 't':
      case 'T': shift = 40; break;
      default: break;
    }
    if (shift) ++i;
  }
  if (shift && i < text.size() && (text[i] == 'i' || text[i] == 'I')) ++i;
  if (i < text.size() && (text[i] == 'b' || text[i] == 'B')) ++i;
  if (i != text.size() || (shift && v > (~std::uint64_t{0} >> shift))) return std::nullopt;
  return v << shift;
}

unsigned long long config_size(const char* name) {
  const std::string t = config_text(name);
  const std::optional<std::uint64_t> v = parse_byte_count(t);
  if (!v) bad_value(name, t, "a byte count like 4096, 64K, 256M, 2G");
  return *v;
}

double config_seconds(const char* name) {
  std::string t = config_text(name);
  char* end = nullptr;
  double v = std::strtod(t.c_str(), &end);
  if (t.empty() || *end || !std::isfinite(v) || v < 0)
    bad_value(name, t, "a non-negative number of seconds");
  return v;
}

bool config_bool(const char* name) {
  std::string t = config_text(name);
  bool v = false;
  if (!parse_bool(t, &v)) bad_value(name, t, "a boolean (1/0, true/false, yes/no, on/off)");
  return v;
}

const char* to_string(ConfigType t) noexcept {
  switch (t) {
    case ConfigType::Int: return "int";
    case ConfigType::Size: return "size";
    case ConfigType::Seconds: return "seconds";
    case ConfigType::Bool: return "bool";
    case ConfigType::String: return "string";
    case ConfigType::Enum: return "enum";
  }
  return "?";
}

}  // namespace gnio
