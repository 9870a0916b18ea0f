#include "coll/coll_config.hpp"

#include <algorithm>

#include "base/fail.hpp"
#include "gnio/config.hpp"

namespace gnio::detail {
namespace {

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t") - b + 1);
}

}  // namespace

AlgoTable parse_algorithms(const std::string& spec, const char* source) {
  AlgoTable t;
  std::size_t pos = 0;
  while (pos <= spec.size()) {
    const std::size_t comma = std::min(spec.find(',', pos), spec.size());
    const std::string item = trim(spec.substr(pos, comma - pos));
    pos = comma + 1;
    if (item.empty()) continue;
    const std::size_t colon = item.find(':');
    const std::string kind_name = colon == std::string::npos ? "" : trim(item.substr(0, colon));
    const std::string algo_name = trim(colon == std::string::npos ? item : item.substr(colon + 1));
    int algo = -1;
    for (int i = 0; i < kCollAlgoCount; ++i)
      if (algo_name == to_string(static_cast<CollAlgo>(i))) algo = i;
    GNIO_REQUIRE(algo >= 0,
                 "%s: '%s' is not an algorithm; use auto, ll, oneshot, twoshot or ring (optionally "
                 "as collective:algorithm, comma-separated)",
                 source, algo_name.c_str());
    const CollAlgo a = static_cast<CollAlgo>(algo);
    if (colon == std::string::npos) {
      for (int k = 0; k < kCollKindCount; ++k)
        if (kind_has(static_cast<CollKind>(k), a)) t.forced[k] = a;
      continue;
    }
    int kind = -1;
    for (int i = 0; i < kCollKindCount; ++i)
      if (kind_name == to_string(static_cast<CollKind>(i))) kind = i;
    GNIO_REQUIRE(
        kind >= 0,
        "%s: '%s' is not a collective; use allreduce, reduce_scatter, allgather, broadcast, "
        "reduce, alltoall or alltoallv",
        source, kind_name.c_str());
    GNIO_REQUIRE(kind_has(static_cast<CollKind>(kind), a),
                 "%s: %s has no %s algorithm (twoshot: allreduce, broadcast, reduce; alltoallv: "
                 "ring only)",
                 source, to_string(static_cast<CollKind>(kind)),
                 to_string(static_cast<CollAlgo>(algo)));
    t.forced[kind] = a;
  }
  return t;
}

CollConfig read_config() {
  CollConfig c;
  c.scratch = config_size("GNIO_COLL_SCRATCH");
  c.staging = config_size("GNIO_COLL_STAGING");
  const long long depth = config_int("GNIO_COLL_PIPE_DEPTH");
  const long long channels = config_int("GNIO_COLL_CHANNELS");
  const long long blocks = config_int("GNIO_COLL_BLOCKS");
  const long long threads = config_int("GNIO_COLL_THREADS");
  c.ll_max = config_size("GNIO_COLL_LL_MAX");
  c.oneshot_max = config_size("GNIO_COLL_ONESHOT_MAX");
  c.remote_oneshot_max = config_size("GNIO_COLL_REMOTE_ONESHOT_MAX");
  const std::string hier = config_text("GNIO_COLL_HIER");
  GNIO_REQUIRE(hier == "auto" || hier == "on" || hier == "off",
               "GNIO_COLL_HIER='%s' is not one of auto, on, off", hier.c_str());
  c.hier = hier == "on"    ? CollConfig::Hier::On
           : hier == "off" ? CollConfig::Hier::Off
                           : CollConfig::Hier::Auto;
  c.hier_min = config_size("GNIO_COLL_HIER_MIN");
  GNIO_REQUIRE(c.scratch >= (64u << 10),
               "GNIO_COLL_SCRATCH=%zu: collectives need at least 64K of scratch", c.scratch);
  GNIO_REQUIRE(c.staging == 0 || c.staging >= (64u << 10),
               "GNIO_COLL_STAGING=%zu: collectives need at least 64K of staging (0: by backend)",
               c.staging);
  GNIO_REQUIRE(depth >= 2 && depth <= 64, "GNIO_COLL_PIPE_DEPTH=%lld is not in [2, 64]", depth);
  GNIO_REQUIRE(channels >= 1 && channels <= 64, "GNIO_COLL_CHANNELS=%lld is not in [1, 64]",
               channels);
  GNIO_REQUIRE(blocks >= 0 && blocks <= static_cast<long long>(kCollMaxBlocks),
               "GNIO_COLL_BLOCKS=%lld is not in [0, %u]", blocks, kCollMaxBlocks);
  GNIO_REQUIRE(threads == 0 || (threads >= 32 && threads <= 1024 && threads % 32 == 0),
               "GNIO_COLL_THREADS=%lld is not 0 or a multiple of 32 in [32, 1024]", threads);
  c.depth = static_cast<unsigned>(depth);
  c.channels = static_cast<unsigned>(channels);
  c.blocks = static_cast<unsigned>(blocks);
  c.threads = static_cast<unsigned>(threads);
  return c;
}

}  // namespace gnio::detail
