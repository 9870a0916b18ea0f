// How gnio-run writes its own text: printf into strings, whole writes that survive EINTR and
// non-blocking descriptors, and one-line "gnio-run: " diagnostics. Separate because the command
// line, the job environment, the launcher and the ranks' forwarded output all write through it,
// and a diagnostic must never land inside a rank's line.
#pragma once

#include <string>
#include <string_view>

namespace gnio::run {

/// printf into a std::string.
std::string strf(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

/// Writes all of `data` to `fd`, retrying short writes and EINTR, and waiting for POLLOUT when
/// the descriptor is non-blocking. Gives up silently on other errors (a closed stdout must not
/// stop the job: the ranks' output is then discarded).
void write_all(int fd, std::string_view data);

/// Prints one diagnostic line "gnio-run: <text>" to stderr with a single write, so it never
/// lands inside a rank's line.
void say(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

}  // namespace gnio::run
