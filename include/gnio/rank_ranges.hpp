// Rank numbers as gnio's messages print them: a compact list ("0-3,5,6"), the same in the
// library's errors (GNIO_CHECK's report of disagreeing ranks) and gnio-run's reports.
#pragma once

#include <string>
#include <vector>

namespace gnio {

/// A list of ascending rank numbers for a message: each run of three or more consecutive ranks as
/// a range, shorter runs rank by rank, all separated by commas ({0, 1, 2, 3, 5, 6} reads
/// "0-3,5,6"; {3, 4} reads "3,4"). Empty for no ranks.
std::string rank_ranges(const std::vector<int>& ranks);

}  // namespace gnio
