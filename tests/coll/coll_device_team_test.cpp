// Sub-teams: even and odd ranks reduce among themselves, concurrently, in one kernel each, while
// world collectives on the same channel interleave with theirs; one kernel per algorithm
// (compile-time tags).
#include <algorithm>
#include <vector>

#include "coll/coll_device_util.hpp"

namespace coll_device_test {
namespace {

using gnio::CollAlgo;
using gnio::CollComm;
using gnio::Status;
using gnio::SymPtr;
using gnio_test::comm;
using gnio_test::stream;

template <class Tag>
void team_kernel(CollComm cc, std::int64_t* buf, std::size_t count, Tag algo, unsigned threads,
                 std::uint32_t* bad) {
  gnio::launch(stream(), {.grid = 1, .block = threads}, [=] GNIO_HD() {
    std::uint32_t fails = 0;
    fails += cc.allreduce<gnio::Block>(buf, buf, count, gnio::op::Sum{}, algo) != Status::Ok;
    fails += cc.allreduce<gnio::Block>(buf, buf, count, gnio::op::Min{}, algo) != Status::Ok;
    if (gnio::dev::thread() == 0)
      gnio::dev::atomic_fetch_add(bad, fails, gnio::dev::Order::Relaxed);
  });
}

TEST(CollDevice, SubTeams) {
  gnio::Comm& c = comm();
  const int n = c.size(), me = c.rank();
  gnio::Team team = c.split(c.world(), me % 2, me);
  const std::size_t count = 1234;
  SymPtr<std::int64_t> buf = c.alloc<std::int64_t>(count);
  auto* bad = static_cast<std::uint32_t*>(c.alloc_device(4));
  std::size_t wrong = 0;
  for_each_algorithm_tag([&](auto tag) {
    const CollAlgo algo = tag;
    std::vector<std::int64_t> h(count);
    for (std::size_t i = 0; i < count; ++i)
      h[i] = static_cast<std::int64_t>(i * 3 + static_cast<std::size_t>(me) * 11);
    gnio_test::to_device(c.local(buf), h.data(), count * 8);
    std::uint32_t zero = 0;
    gnio_test::to_device(bad, &zero, 4);
    team_kernel(gnio::coll_comm(c, stream(), team), c.local(buf), count, tag, host() ? 8 : 256,
                bad);
    // World collectives on the same channel interleave with the team's.
    gnio::allreduce(c, c.local(buf), c.local(buf), count, gnio::DataType::I64, gnio::RedOp::Max,
                    stream());
    c.synchronize(stream());
    std::uint32_t fails = 1;
    gnio_test::to_host(&fails, bad, 4);
    EXPECT_EQ(fails, 0u) << gnio::to_string(algo);
    gnio_test::to_host(h.data(), c.local(buf), count * 8);
    // Team sums, then max over the world of the two team sums.
    for (std::size_t i = 0; i < count; ++i) {
      std::int64_t best = 0;
      for (int parity = 0; parity < 2 && parity < n; ++parity) {
        std::int64_t s = 0;
        for (int r = parity; r < n; r += 2)
          s += static_cast<std::int64_t>(i * 3 + static_cast<std::size_t>(r) * 11);
        best = std::max(best, s);
      }
      if (h[i] != best) {
        if (wrong < 4)
          ADD_FAILURE() << gnio::to_string(algo) << " element " << i << ": " << h[i]
                        << " != " << best;
        ++wrong;
      }
    }
  });
  EXPECT_EQ(wrong, 0u);
  c.free_device(bad);
  c.free(buf);
}

}  // namespace
}  // namespace coll_device_test
