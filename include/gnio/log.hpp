// Logging: GNIO_DEBUG=WARN|INFO|TRACE selects the level, GNIO_DEBUG_SUBSYS a comma list of
// subsystems (prefix one with ^ to exclude it), GNIO_DEBUG_FILE a file name where %h is the
// host name and %p the process id. Lines read `host:pid:tid [rank] gnio LEVEL subsys: text`.
#pragma once

#include <cstdarg>

namespace gnio {

enum class LogLevel { None = 0, Warn = 1, Info = 2, Trace = 3 };

/// Subsystems a log line belongs to; GNIO_DEBUG_SUBSYS filters on their names.
enum class LogSubsys { Init, Bootstrap, Memory, Transport, Proxy, Coll, Device, Net, Eth, Tool };

/// True when a line at this level and subsystem would be written (cheap; checked before
/// formatting).
bool log_enabled(LogLevel level, LogSubsys subsys) noexcept;

/// Writes one log line if enabled. printf-style format.
void log(LogLevel level, LogSubsys subsys, const char* fmt, ...) noexcept
    __attribute__((format(printf, 3, 4)));

/// Sets the rank shown in this process's log lines (-1: none). Comm initialisation calls it.
void set_log_rank(int rank) noexcept;

/// Re-reads GNIO_DEBUG, GNIO_DEBUG_SUBSYS and GNIO_DEBUG_FILE (they are read once on first use).
void reload_log_config() noexcept;

}  // namespace gnio

#define GNIO_LOG(level, subsys, ...)                                                    \
  do {                                                                                  \
    if (::gnio::log_enabled(::gnio::LogLevel::level, ::gnio::LogSubsys::subsys))        \
      ::gnio::log(::gnio::LogLevel::level, ::gnio::LogSubsys::subsys, __VA_ARGS__);     \
  } while (0)
#define GNIO_WARN(subsys, ...) GNIO_LOG(Warn, subsys, __VA_ARGS__)
#define GNIO_INFO(subsys, ...) GNIO_LOG(Info, subsys, __VA_ARGS__)
#define GNIO_TRACE(subsys, ...) GNIO_LOG(Trace, subsys, __VA_ARGS__)
