// How signals, rank lists, wait statuses and durations read in gnio-run's messages. Separate so
// that the exec-failure summary (rank_spawn.cpp) and the supervision's reports (launcher.cpp:
// a rank's death, a forwarded signal, the timeout) word them the same way.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace gnio::run {

/// The short name of a signal gnio-run forwards ("INT"), for messages.
const char* signal_abbrev(int sig);

/// "rank" or "ranks" after a count.
const char* ranks_word(std::size_t n);

/// A compact list of rank numbers: "0-3", "1,4,6-7".
std::string rank_ranges(const std::vector<int>& ranks);

/// How a wait status reads in a message: "exited with code 3", "was killed by signal 9 (Killed)".
std::string describe_status(int status);

/// Seconds as a short human string ("5", "0.5").
std::string seconds_text(double s);

}  // namespace gnio::run
