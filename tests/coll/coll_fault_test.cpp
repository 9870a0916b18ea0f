// A collective that fails on one rank must not finish on another with wrong data. One rank (the
// last) starts each call later than GNIO_TIMEOUT, so the others time out in it; the late rank
// then runs the call against ranks that have given up. Every collective, every algorithm, each
// in a communicator of its own (made from a unique id shared through the test's main
// communicator, aborted on every rank at the end):
//  * every rank that returns Ok has exactly the right result;
//  * the ranks that did not wait for the late one fail (Timeout);
//  * on one node, with oneshot and twoshot (whose ranks read or write each other's buffers and
//    end with a "done" handshake), the late rank fails too: RemoteError naming a failed rank
//    (its failure mark), instead of finishing with a missing chunk or a departed rank's input.
//    LL packets and pipe messages (ring; oneshot across nodes) vouch for themselves as they are
//    sent, so a late rank that got messages sent before its peers failed holds the exact result
//    and may return Ok (a message a failed rank did not send arrives as its failure mark).
// GNIO_TIMEOUT is set short by the test registration; LATE_FACTOR x it is the delay.
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "common/gnio_test.hpp"
#include "gnio/bootstrap.hpp"
#include "gnio/coll.hpp"
#include "gnio/error.hpp"

namespace coll_fault_test {
namespace {

using gnio::CollAlgo;
using gnio::CollKind;
using gnio::DataType;
using gnio::RedOp;

constexpr double kLateFactor = 2.5;

/// What a rank saw of one call.
struct Outcome {
  std::int32_t ok = 0;          ///< synchronize returned
  std::int32_t wrong = 0;       ///< elements of an Ok result that differ from the exact one
  std::int32_t error = 0;       ///< gnio::ErrorClass of the failure (when !ok)
  std::int32_t named_rank = 0;  ///< the message names a rank ("rank N failed this call")
};

double timeout_seconds() {
  const char* t = std::getenv("GNIO_TIMEOUT");
  return t ? std::atof(t) : 120.0;
}

const char* algo_name(CollAlgo a) {
  return gnio::to_string(a);
}

/// Element i of rank r's input block b (small integers: every sum is exact in float).
float value(int r, std::size_t b, std::size_t i) {
  return static_cast<float>((r + 1) * 3 + static_cast<int>((b * 7 + i) % 11));
}

/// Runs `kind` with `algo` once on a fresh communicator, the last rank `late_s` late.
Outcome run_case(CollKind kind, CollAlgo algo, std::size_t count, double late_s) {
  gnio::Comm& world = gnio_test::comm();
  const int n = world.size(), me = world.rank(), late_rank = n - 1, root = 0;
  gnio::UniqueId id{};
  if (me == 0) id = gnio::create_unique_id();
  world.bootstrap().broadcast(&id, sizeof(id), 0);
  Outcome out;
  {
    gnio::Comm c = gnio::Comm::from_unique_id(id, me, n);
    gnio::Stream s(c);
    gnio::coll_set_algorithm(c, algo_name(algo));
    const std::size_t nn = static_cast<std::size_t>(n);
    const std::size_t in_elems = (kind == CollKind::ReduceScatter || kind == CollKind::AllToAll ||
                                  kind == CollKind::AllToAllV)
                                     ? nn * count
                                     : count;
    const std::size_t out_elems =
        (kind == CollKind::AllGather || kind == CollKind::AllToAll || kind == CollKind::AllToAllV)
            ? nn * count
            : count;
    gnio::SymPtr<float> in = c.alloc<float>(in_elems), outp = c.alloc<float>(out_elems);
    std::vector<float> h_in(in_elems), h_out(out_elems, -1.0f);
    for (std::size_t i = 0; i < in_elems; ++i) h_in[i] = value(me, i / count, i % count);
    c.copy(c.local(in), h_in.data(), in_elems * sizeof(float), s);
    c.copy(c.local(outp), h_out.data(), out_elems * sizeof(float), s);
    c.synchronize(s);
    gnio::coll_prepare(c, s);
    world.bootstrap().barrier();
    if (me == late_rank) std::this_thread::sleep_for(std::chrono::duration<double>(late_s));
    std::vector<std::size_t> counts(nn, count), displs(nn);
    for (std::size_t r = 0; r < nn; ++r) displs[r] = r * count;
    try {
      switch (kind) {
        case CollKind::AllReduce:
          gnio::allreduce(c, c.local(in), c.local(outp), count, DataType::F32, RedOp::Sum, s);
          break;
        case CollKind::ReduceScatter:
          gnio::reduce_scatter(c, c.local(in), c.local(outp), count, DataType::F32, RedOp::Sum, s);
          break;
        case CollKind::AllGather:
          gnio::allgather(c, c.local(in), c.local(outp), count, DataType::F32, s);
          break;
        case CollKind::Broadcast:
          gnio::broadcast(c, c.local(in), c.local(outp), count, DataType::F32, root, s);
          break;
        case CollKind::Reduce:
          gnio::reduce(c, c.local(in), c.local(outp), count, DataType::F32, RedOp::Sum, root, s);
          break;
        case CollKind::AllToAll:
          gnio::alltoall(c, c.local(in), c.local(outp), count, DataType::F32, s);
          break;
        case CollKind::AllToAllV:
          gnio::alltoallv(c, c.local(in), counts, displs, c.local(outp), counts, displs,
                          DataType::F32, s);
          break;
      }
      c.synchronize(s);
      out.ok = 1;
    } catch (const gnio::Error& e) {
      out.error = static_cast<std::int32_t>(e.error_class());
      const std::string m = e.what();
      out.named_rank = m.find("failed this call") != std::string::npos;
    }
    if (out.ok) {
      c.copy(h_out.data(), c.local(outp), out_elems * sizeof(float), s);
      c.synchronize(s);
      for (std::size_t i = 0; i < out_elems; ++i) {
        const std::size_t b = i / count, k = i % count;
        float want = 0;
        switch (kind) {
          case CollKind::AllReduce:
            for (int r = 0; r < n; ++r) want += value(r, 0, k);
            break;
          case CollKind::ReduceScatter:
            for (int r = 0; r < n; ++r) want += value(r, static_cast<std::size_t>(me), k);
            break;
          case CollKind::AllGather: want = value(static_cast<int>(b), 0, k); break;
          case CollKind::Broadcast: want = value(root, 0, k); break;
          case CollKind::Reduce:
            if (me == root)
              for (int r = 0; r < n; ++r) want += value(r, 0, k);
            else
              want = -1.0f;  // not written off the root
            break;
          default: want = value(static_cast<int>(b), static_cast<std::size_t>(me), k); break;
        }
        out.wrong += h_out[i] != want;
      }
    }
    // Every rank ends the case aborted, so that no teardown waits for a rank that gave up.
    world.bootstrap().barrier();
    c.abort();
  }
  world.bootstrap().barrier();
  return out;
}

/// True when the ranks lie on several nodes (the registration's --nodes): then only oneshot
/// (through the pipes) and ring run.
bool across_nodes() {
  return gnio_test::comm().nodes() > 1;
}

void check_every_collective(CollAlgo algo, std::size_t count) {
  gnio::Comm& world = gnio_test::comm();
  const int n = world.size(), late_rank = n - 1;
  const double late_s = kLateFactor * timeout_seconds();
  for (CollKind kind :
       {CollKind::AllReduce, CollKind::ReduceScatter, CollKind::AllGather, CollKind::Broadcast,
        CollKind::Reduce, CollKind::AllToAll, CollKind::AllToAllV}) {
    if (kind == CollKind::AllToAllV && algo != CollAlgo::Ring) continue;         // ring only
    if (kind == CollKind::ReduceScatter && algo == CollAlgo::TwoShot) continue;  // not offered
    const Outcome mine = run_case(kind, algo, count, late_s);
    std::vector<Outcome> all(static_cast<std::size_t>(n));
    all[static_cast<std::size_t>(world.rank())] = mine;
    world.bootstrap().allgather(all.data(), sizeof(Outcome));
    const std::string what = std::string(gnio::to_string(kind)) + "/" + algo_name(algo);
    // Ranks that need the late rank's data: everyone but a broadcast's root.
    const bool needs_late = kind != CollKind::Broadcast;
    // Single node, OneShot and TwoShot end with a "done" handshake that the failed ranks answer
    // with the failure mark. The pipes (ring, and oneshot across nodes) and LL vouch for each
    // message as it is sent, so a late rank that received messages sent before its peers failed
    // has the exact result (checked) and may return Ok.
    const bool late_must_fail =
        !across_nodes() && (algo == CollAlgo::OneShot || algo == CollAlgo::TwoShot);
    for (int r = 0; r < n; ++r) {
      const Outcome& o = all[static_cast<std::size_t>(r)];
      // Never a wrong result reported as done.
      EXPECT_EQ(o.wrong, 0) << what << ": rank " << r << " returned Ok with wrong data";
      if (r != late_rank && needs_late) {
        EXPECT_FALSE(o.ok) << what << ": rank " << r << " returned Ok without the late rank";
      }
      if (r == late_rank && late_must_fail) {
        EXPECT_FALSE(o.ok) << what << ": the late rank returned Ok after its peers had failed";
        EXPECT_TRUE(o.ok || o.named_rank)
            << what << ": the late rank's error (class " << o.error << ") names no failed rank";
      }
    }
  }
}

TEST(CollFault, LateRankLL) {
  if (across_nodes()) GTEST_SKIP() << "LL needs every rank on one node";
  check_every_collective(CollAlgo::LL, 256);
}
TEST(CollFault, LateRankOneShot) {
  check_every_collective(CollAlgo::OneShot, 4096);
}
TEST(CollFault, LateRankTwoShot) {
  if (across_nodes()) GTEST_SKIP() << "TwoShot needs every rank on one node";
  check_every_collective(CollAlgo::TwoShot, 4096);
}
TEST(CollFault, LateRankRing) {
  check_every_collective(CollAlgo::Ring, 40000);
}

}  // namespace
}  // namespace coll_fault_test
