#include "gnio/rank_ranges.hpp"

#include <cstddef>
#include <string>
#include <vector>

namespace gnio {

std::string rank_ranges(const std::vector<int>& ranks) {
  std::string out;
  for (std::size_t i = 0; i < ranks.size();) {
    std::size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(ranks[i]);
    if (j >= i + 2)
      out += "-" + std::to_string(ranks[j]);
    else if (j == i + 1)
      out += "," + std::to_string(ranks[j]);
    i = j + 1;
  }
  return out;
}

}  // namespace gnio
