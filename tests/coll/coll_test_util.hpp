// Shared pieces of the collective tests: the exact inputs and expected results (in
// perf/harness/coll_data.hpp, shared with gnio-perf coll: every partial result of every reduction
// order is exact, so every algorithm must produce the expected bits), poisoned outputs and #wrong
// counts reported as test failures.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "harness/coll_data.hpp"
#include "common/gnio_test.hpp"
#include "gnio/coll.hpp"

namespace coll_test {

using gnio::CollAlgo;
using gnio::CollKind;
using gnio::DataType;
using gnio::RedOp;
using gnio_bench::encode;
using gnio_bench::encode_bits;
using gnio_bench::expected_reduction;
using gnio_bench::input_bits;
using gnio_bench::input_element;
using gnio_bench::input_value;
using gnio_bench::is_signed;
using gnio_bench::kAllTypes;
using gnio_bench::kArithOps;
using gnio_bench::kBitOps;
using gnio_bench::kPoison;
using gnio_bench::mix;

/// Counts elements of `got` (es bytes each) that differ from `want`; reports the first few.
inline std::size_t count_wrong(const std::vector<std::uint8_t>& got,
                               const std::vector<std::uint8_t>& want, std::size_t es,
                               const std::string& what) {
  return gnio_bench::count_wrong_elements(
      got.data(), want.data(), got.size(), es, 4, [&](std::size_t e) {
        std::string g, w;
        char buf[8];
        for (std::size_t b = 0; b < es; ++b) {
          std::snprintf(buf, sizeof(buf), "%02x", got[e * es + es - 1 - b]);
          g += buf;
          std::snprintf(buf, sizeof(buf), "%02x", want[e * es + es - 1 - b]);
          w += buf;
        }
        ADD_FAILURE() << what << ": element " << e << " is 0x" << g << ", expected 0x" << w;
      });
}

}  // namespace coll_test
