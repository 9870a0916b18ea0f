// How signals, wait statuses and durations read in gnio-run's messages. Separate so that the
// exec-failure summary (rank_spawn.cpp) and the supervision's reports (launcher.cpp: a rank's
// death, a forwarded signal, the timeout) word them the same way. Rank lists read as the
// library's messages write them (gnio::rank_ranges, <gnio/rank_ranges.hpp>).
#pragma once

#include <cstddef>
#include <string>

namespace gnio::run {

/// The short name of a signal gnio-run forwards ("INT"), for messages.
const char* signal_abbrev(int sig);

/// "rank" or "ranks" after a count.
const char* ranks_word(std::size_t n);

/// How a wait status reads in a message: "exited with code 3", "was killed by signal 9 (Killed)".
std::string describe_status(int status);

/// Seconds as a short human string ("5", "0.5").
std::string seconds_text(double s);

}  // namespace gnio::run
