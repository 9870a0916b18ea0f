// Every collective, one after the other, in one kernel that never returns to the host between
// them: one kernel per algorithm, passed as a compile-time tag (gnio::algo::*), so each kernel
// compiles one algorithm of each collective.
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

struct SeqLayout {
  std::size_t count;  // elements per rank block
  int n;
  // Element offsets inside one symmetric int32 buffer.
  std::size_t ar_in, ar_out, rs_in, rs_out, ag_in, ag_out, bc, red_in, red_out, a2a_in, a2a_out,
      a2av_in, a2av_out, total;
  SeqLayout(std::size_t c, int ranks) : count(c), n(ranks) {
    const std::size_t nn = static_cast<std::size_t>(ranks);
    std::size_t at = 0;
    auto take = [&](std::size_t elems) {
      const std::size_t here = at;
      at += elems + 5;  // unaligned gaps between buffers
      return here;
    };
    ar_in = take(c);
    ar_out = take(c);
    rs_in = take(nn * c);
    rs_out = take(c);
    ag_in = take(c);
    ag_out = take(nn * c);
    bc = take(c);
    red_in = take(c);
    red_out = take(c);
    a2a_in = take(nn * c);
    a2a_out = take(nn * c);
    a2av_in = take(nn * c);
    a2av_out = take(nn * c);
    total = at;
  }
};

// Values: rank r's element i of buffer b is base(b) + (i * 7 + r * 3) % 50 (small: sums exact).
std::int32_t val(int b, int r, std::size_t i) {
  return b * 1000 + static_cast<std::int32_t>((i * 7 + static_cast<std::size_t>(r) * 3) % 50);
}

/// The algorithm tag of reduce_scatter in the kernel of tag Tag: OneShot where Tag is TwoShot,
/// which reduce_scatter lacks.
template <class Tag>
using RsTag =
    std::conditional_t<Tag::value == CollAlgo::TwoShot, gnio::AlgoTag<CollAlgo::OneShot>, Tag>;

/// Every collective in one kernel with algorithm tag Tag (reduce_scatter: RsTag; alltoallv always
/// Ring, its only algorithm).
template <class Tag>
void sequence_kernel(CollComm cc, std::int32_t* base, SeqLayout L, int root,
                     const std::uint64_t* table, Tag algo, unsigned threads, std::uint32_t* bad) {
  const RsTag<Tag> rs_algo{};
  gnio::launch(stream(), {.grid = 1, .block = threads}, [=] GNIO_HD() {
    using gnio::Block;
    std::uint32_t fails = 0;
    fails += cc.allreduce<Block>(base + L.ar_in, base + L.ar_out, L.count, gnio::op::Sum{}, algo) !=
             Status::Ok;
    fails += cc.reduce_scatter<Block>(base + L.rs_in, base + L.rs_out, L.count, gnio::op::Max{},
                                      rs_algo) != Status::Ok;
    fails += cc.allgather<Block>(base + L.ag_in, base + L.ag_out, L.count, algo) != Status::Ok;
    fails += cc.broadcast<Block>(base + L.bc, base + L.bc, L.count, root, algo) != Status::Ok;
    fails += cc.reduce<Block>(base + L.red_in, base + L.red_out, L.count, gnio::op::Sum{}, root,
                              algo) != Status::Ok;
    fails += cc.alltoall<Block>(base + L.a2a_in, base + L.a2a_out, L.count, algo) != Status::Ok;
    fails += cc.alltoallv<Block>(base + L.a2av_in, base + L.a2av_out, table, gnio::algo::ring) !=
             Status::Ok;
    if (gnio::dev::thread() == 0)
      gnio::dev::atomic_fetch_add(bad, fails, gnio::dev::Order::Relaxed);
  });
}

TEST(CollDevice, EveryCollectiveInOneKernel) {
  gnio::Comm& c = comm();
  const int n = c.size(), me = c.rank();
  const std::size_t nn = static_cast<std::size_t>(n);
  const SeqLayout L(517, n);
  SymPtr<std::int32_t> buf = c.alloc<std::int32_t>(L.total);
  auto* table = static_cast<std::uint64_t*>(c.alloc_device(4 * nn * sizeof(std::uint64_t)));
  auto* bad = static_cast<std::uint32_t*>(c.alloc_device(4));
  std::size_t wrong = 0;
  // Alltoallv: rank a sends (a + b) % 4 * 100 + 1 elements to b, packed.
  auto pair = [&](int a, int b) { return static_cast<std::uint64_t>(((a + b) % 4) * 100 + 1); };
  std::vector<std::uint64_t> t(4 * nn);
  std::uint64_t sd = 0, rd = 0;
  for (int q = 0; q < n; ++q) {
    t[q] = pair(me, q);
    t[nn + q] = sd;
    sd += t[q];
    t[2 * nn + q] = pair(q, me);
    t[3 * nn + q] = rd;
    rd += t[2 * nn + q];
  }
  gnio_test::to_device(table, t.data(), t.size() * sizeof(std::uint64_t));
  int round = 0;
  for_each_algorithm_tag([&](auto tag) {
    const CollAlgo algo = tag;
    const int root = (round++ + 1) % n;
    std::vector<std::int32_t> h(L.total, -7);
    for (std::size_t i = 0; i < L.count; ++i) {
      h[L.ar_in + i] = val(1, me, i);
      h[L.ag_in + i] = val(3, me, i);
      h[L.bc + i] = me == root ? val(4, me, i) : -1;
      h[L.red_in + i] = val(5, me, i);
    }
    for (std::size_t i = 0; i < nn * L.count; ++i) {
      h[L.rs_in + i] = val(2, me, i);
      h[L.a2a_in + i] = val(6, me, i);
    }
    for (int q = 0; q < n; ++q)
      for (std::uint64_t k = 0; k < t[q]; ++k)
        h[L.a2av_in + t[nn + q] + k] = val(7, me, static_cast<std::size_t>(q) * 1000 + k);
    gnio_test::to_device(c.local(buf), h.data(), h.size() * sizeof(std::int32_t));
    std::uint32_t zero = 0;
    gnio_test::to_device(bad, &zero, 4);
    c.bootstrap().barrier();
    sequence_kernel(gnio::coll_comm(c, stream()), c.local(buf), L, root, table, tag,
                    host() ? 8 : 256, bad);
    c.synchronize(stream());
    std::uint32_t fails = 1;
    gnio_test::to_host(&fails, bad, 4);
    EXPECT_EQ(fails, 0u) << gnio::to_string(algo);
    std::vector<std::int32_t> g(L.total);
    gnio_test::to_host(g.data(), c.local(buf), g.size() * sizeof(std::int32_t));
    std::vector<std::int32_t> w = h;
    for (std::size_t i = 0; i < L.count; ++i) {
      std::int32_t sum_ar = 0, max_rs = -1, sum_red = 0;
      for (int r = 0; r < n; ++r) {
        sum_ar += val(1, r, i);
        max_rs = std::max(max_rs, val(2, r, static_cast<std::size_t>(me) * L.count + i));
        sum_red += val(5, r, i);
      }
      w[L.ar_out + i] = sum_ar;
      w[L.rs_out + i] = max_rs;
      w[L.bc + i] = val(4, root, i);
      if (me == root) w[L.red_out + i] = sum_red;
      for (int m = 0; m < n; ++m) {
        w[L.ag_out + static_cast<std::size_t>(m) * L.count + i] = val(3, m, i);
        w[L.a2a_out + static_cast<std::size_t>(m) * L.count + i] =
            val(6, m, static_cast<std::size_t>(me) * L.count + i);
      }
    }
    for (int q = 0; q < n; ++q)
      for (std::uint64_t k = 0; k < t[2 * nn + q]; ++k)
        w[L.a2av_out + t[3 * nn + q] + k] = val(7, q, static_cast<std::size_t>(me) * 1000 + k);
    for (std::size_t i = 0; i < L.total; ++i)
      if (g[i] != w[i]) {
        if (wrong < 6)
          ADD_FAILURE() << gnio::to_string(algo) << ": element " << i << " is " << g[i]
                        << ", expected " << w[i];
        ++wrong;
      }
    c.bootstrap().barrier();
  });
  EXPECT_EQ(wrong, 0u);
  c.free_device(bad);
  c.free_device(table);
  c.free(buf);
}

}  // namespace
}  // namespace coll_device_test
