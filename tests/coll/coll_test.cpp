// Host (stream-ordered) collectives, run on 2, 3, 4, 5 and 8 ranks and on both backends: every
// collective x type x operator x in/out of place x algorithm, sizes 0, 1, odd and large, buffers
// in the symmetric heap (zero-copy) and outside it (staged), mixed across ranks. Every element of
// every output (and a guard behind it) is checked exactly; inputs are chosen so that every result
// is exactly representable.
#include <malloc.h>

#include <algorithm>
#include <cstdlib>
#include <numeric>
#include <string>
#include <vector>

#include "coll/coll_test_util.hpp"
#include "gnio/config.hpp"
#include "gnio/error.hpp"

namespace coll_test {
namespace {

using gnio_test::comm;
using gnio_test::stream;

// Large cases build four host vectors of up to 64 MiB each. glibc maps each afresh and unmaps it
// when it is freed, so every case paid page faults on ~256 MiB per rank (a third of coll_test_8's
// time); kept in the heap instead, they are reused from case to case.
[[maybe_unused]] const bool kHostMemoryReused = [] {
#ifdef __GLIBC__
  mallopt(M_MMAP_MAX, 0);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
#endif
  return true;
}();

/// Buffers reused by every case: private device memory and symmetric-heap memory, two of each.
struct Pool {
  char* priv[2] = {};
  gnio::SymPtr<char> sym[2];
};
/// Bytes of each pool buffer: the largest gathered output the suite makes (65537 elements of 8
/// bytes from every rank) plus guards, and at least 6 MiB. (A fixed 6 MiB, sized for 8 ranks, let
/// the 16-rank allgathers write past it into the channels' control words.)
std::size_t pool_bytes() {
  return std::max<std::size_t>(
      6u << 20, std::size_t{65537} * 8 * static_cast<std::size_t>(comm().size()) + 4096);
}

Pool& pool() {
  static Pool* p = [] {
    auto* q = new Pool;
    for (int i = 0; i < 2; ++i) {
      q->priv[i] = static_cast<char*>(comm().alloc_device(pool_bytes()));
      q->sym[i] = comm().alloc_bytes(pool_bytes());
    }
    return q;
  }();
  return *p;
}

struct Case {
  CollKind kind = CollKind::AllReduce;
  DataType type = DataType::F32;
  RedOp op = RedOp::Sum;
  std::size_t count = 0;
  int root = 0;
  bool in_place = false;
  bool symmetric = false;  ///< this rank's buffers are in the symmetric heap
  std::string algo = "auto";
};

std::string describe(const Case& c) {
  std::string s = std::string(gnio::to_string(c.kind)) + " " + gnio::to_string(c.type);
  if (gnio_bench::is_reducing(c.kind)) s += std::string(" ") + gnio::to_string(c.op);
  s += " count " + std::to_string(c.count);
  if (c.kind == CollKind::Broadcast || c.kind == CollKind::Reduce)
    s += " root " + std::to_string(c.root);
  s += c.in_place ? " in-place" : " out-of-place";
  s += c.symmetric ? " symmetric" : " private";
  s += " algo " + c.algo + " rank " + std::to_string(comm().rank()) + "/" +
       std::to_string(comm().size());
  return s;
}

constexpr std::size_t kGuard = 16;  // poisoned elements behind every output

void call(const Case& c, const void* send, void* recv) {
  gnio::Comm& cm = comm();
  switch (c.kind) {
    case CollKind::AllReduce:
      gnio::allreduce(cm, send, recv, c.count, c.type, c.op, stream());
      break;
    case CollKind::ReduceScatter:
      gnio::reduce_scatter(cm, send, recv, c.count, c.type, c.op, stream());
      break;
    case CollKind::AllGather: gnio::allgather(cm, send, recv, c.count, c.type, stream()); break;
    case CollKind::Broadcast:
      gnio::broadcast(cm, send, recv, c.count, c.type, c.root, stream());
      break;
    case CollKind::Reduce:
      gnio::reduce(cm, send, recv, c.count, c.type, c.op, c.root, stream());
      break;
    case CollKind::AllToAll: gnio::alltoall(cm, send, recv, c.count, c.type, stream()); break;
    default: FAIL() << "no alltoallv here";
  }
}

/// Runs one case and returns the number of wrong elements on this rank. Inputs, the poisoned
/// initial buffer and the expected one come from gnio_bench's generators, which build one period
/// of each sequence and copy it out (64 MiB cases on 8 ranks spent most of their time here when
/// every element of every rank's input was computed one by one).
std::size_t run_case(const Case& c, char* send_base, char* recv_base, std::size_t capacity) {
  gnio::Comm& cm = comm();
  gnio_bench::CollCall call_of;
  call_of.kind = c.kind;
  call_of.type = c.type;
  call_of.op = c.op;
  call_of.ranks = cm.size();
  call_of.rank = cm.rank();
  call_of.count = c.count;
  call_of.root = c.root;
  call_of.in_place = c.in_place;
  const std::size_t es = gnio::size_of(c.type);

  // The buffer whose every byte is checked afterwards (the output, or the shared in-place buffer,
  // plus a guard) starts as `init`; send and recv point into it in place (NCCL's layout).
  const std::vector<std::uint8_t> input = gnio_bench::make_input(call_of);
  const std::vector<std::uint8_t> init = gnio_bench::make_initial(call_of, input, kGuard);
  if (init.size() > capacity || input.size() > capacity) {
    ADD_FAILURE() << describe(c) << ": needs " << std::max(init.size(), input.size())
                  << " bytes, the test's buffers hold " << capacity;
    return 1;
  }
  char* checked = recv_base;
  const char* send = send_base;
  char* recv = recv_base;
  if (c.in_place) {
    send = recv_base + gnio_bench::in_place_send_at(call_of) * es;
    recv = recv_base + gnio_bench::in_place_recv_at(call_of) * es;
  } else {
    gnio_test::to_device(send_base, input.data(), input.size());
  }
  gnio_test::to_device(checked, init.data(), init.size());
  const std::vector<std::uint8_t> want = gnio_bench::make_expected(call_of, init);

  gnio::coll_set_algorithm(cm, c.algo);
  call(c, send, recv);
  cm.synchronize(stream());
  std::vector<std::uint8_t> got(want.size());
  gnio_test::to_host(got.data(), checked, got.size());
  return count_wrong(got, want, es, describe(c));
}

std::size_t run_case(const Case& c) {
  Pool& p = pool();
  gnio::Comm& cm = comm();
  return c.symmetric ? run_case(c, cm.local(p.sym[0]), cm.local(p.sym[1]), pool_bytes())
                     : run_case(c, p.priv[0], p.priv[1], pool_bytes());
}

/// Algorithms a collective has ("auto" first). Across nodes oneshot runs through the pipes and
/// ring as everywhere (ll and twoshot give way to ring), so only those are worth the time there.
std::vector<std::string> algorithms(CollKind k) {
  if (comm().nodes() > 1) return {"auto", "oneshot", "ring"};
  std::vector<std::string> a = {"auto", "ll", "oneshot"};
  if (k != CollKind::ReduceScatter) a.push_back("twoshot");
  a.push_back("ring");
  return a;
}

#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif

/// How much of the matrix this rank count runs (8 ranks on 2 cores are slow).
bool full() {
  return comm().size() <= 2;
}
bool medium() {
  return comm().size() <= 5;
}

std::vector<std::size_t> matrix_counts() {
  if (full()) return {1, 7, 1023};
  return {7, 1023};
}

std::vector<DataType> matrix_types() {
  if (medium()) return {std::begin(kAllTypes), std::end(kAllTypes)};
  return {DataType::F32, DataType::BF16, DataType::I64, DataType::U8, DataType::F8E5M2};
}

/// Every (type, operator) pair a reducing collective accepts.
std::vector<std::pair<DataType, RedOp>> type_ops() {
  std::vector<std::pair<DataType, RedOp>> v;
  for (DataType t : matrix_types()) {
    for (RedOp op : kArithOps) v.push_back({t, op});
    if (gnio::is_integer(t))
      for (RedOp op : kBitOps) v.push_back({t, op});
  }
  return v;
}

void reduction_matrix(CollKind kind) {
  std::size_t wrong = 0, cases = 0;
  const int n = comm().size();
  for (const auto& [type, op] : type_ops())
    for (std::size_t count : matrix_counts())
      for (const std::string& algo : algorithms(kind))
        for (int in_place = 0; in_place < 2; ++in_place) {
          if (!medium() && ((cases + in_place) % 2)) continue;  // 8 ranks: half of the in/out mix
          Case c;
          c.kind = kind;
          c.type = type;
          c.op = op;
          c.count = count;
          c.in_place = in_place;
          c.root = static_cast<int>(cases % static_cast<std::size_t>(n));
          c.symmetric =
              (cases + static_cast<std::size_t>(comm().rank())) % 3 != 0;  // mixed across ranks
          c.algo = algo;
          wrong += run_case(c);
          ++cases;
        }
  EXPECT_EQ(wrong, 0u) << wrong << " wrong elements in " << cases << " " << gnio::to_string(kind)
                       << " cases";
}

TEST(Coll, AllReduceMatrix) {
  reduction_matrix(CollKind::AllReduce);
}
TEST(Coll, ReduceScatterMatrix) {
  reduction_matrix(CollKind::ReduceScatter);
}
TEST(Coll, ReduceMatrix) {
  reduction_matrix(CollKind::Reduce);
}

void copy_matrix(CollKind kind) {
  std::size_t wrong = 0, cases = 0;
  const int n = comm().size();
  std::vector<DataType> types =
      full() ? std::vector<DataType>{std::begin(kAllTypes), std::end(kAllTypes)}
             : std::vector<DataType>{DataType::U8, DataType::F16, DataType::F64};
  std::vector<std::size_t> counts = full()     ? std::vector<std::size_t>{1, 7, 1023, 65537}
                                    : medium() ? std::vector<std::size_t>{1, 1023, 65537}
                                               : std::vector<std::size_t>{7, 1023};
  for (DataType type : types)
    for (std::size_t count : counts)
      for (const std::string& algo : algorithms(kind))
        for (int in_place = 0; in_place < (kind == CollKind::AllToAll ? 1 : 2); ++in_place) {
          // The big count only with a few types (the data path does not depend on the type).
          if (count == 65537 && type != DataType::F64 && type != DataType::U8) continue;
          Case c;
          c.kind = kind;
          c.type = type;
          c.count = count;
          c.in_place = in_place;
          c.root = static_cast<int>((cases * 7 + 1) % static_cast<std::size_t>(n));
          c.symmetric = (cases + static_cast<std::size_t>(comm().rank())) % 3 != 1;
          c.algo = algo;
          wrong += run_case(c);
          ++cases;
        }
  EXPECT_EQ(wrong, 0u) << wrong << " wrong elements in " << cases << " " << gnio::to_string(kind)
                       << " cases";
}

TEST(Coll, AllGatherMatrix) {
  copy_matrix(CollKind::AllGather);
}
TEST(Coll, BroadcastMatrix) {
  copy_matrix(CollKind::Broadcast);
}
TEST(Coll, AllToAllMatrix) {
  copy_matrix(CollKind::AllToAll);
}

TEST(Coll, EveryRootEveryAlgorithm) {
  std::size_t wrong = 0;
  for (int root = 0; root < comm().size(); ++root)
    for (CollKind kind : {CollKind::Broadcast, CollKind::Reduce})
      for (const std::string& algo : algorithms(kind)) {
        Case c;
        c.kind = kind;
        c.type = DataType::I32;
        c.op = RedOp::Max;
        c.count = 333;
        c.root = root;
        c.symmetric = (root + comm().rank()) % 2;
        c.algo = algo;
        wrong += run_case(c);
      }
  EXPECT_EQ(wrong, 0u);
}

// Count 0 is a no-op: nothing is written, nothing fails.
TEST(Coll, ZeroCountIsNoOp) {
  std::size_t wrong = 0;
  for (CollKind kind : {CollKind::AllReduce, CollKind::ReduceScatter, CollKind::AllGather,
                        CollKind::Broadcast, CollKind::Reduce, CollKind::AllToAll})
    for (const std::string& algo : algorithms(kind)) {
      Case c;
      c.kind = kind;
      c.count = 0;
      c.algo = algo;
      wrong += run_case(c);  // checks that the guard stayed poisoned
    }
  EXPECT_EQ(wrong, 0u);
}

// Large messages: staged and chunked (private buffers), zero-copy (symmetric), ring.
TEST(Coll, LargeMessages) {
  gnio::Comm& cm = comm();
  const int n = cm.size();
  std::size_t bytes = 64u << 20;  // at every rank count
  // Sanitized builds check the protocol, not the volume: a few pieces of each algorithm suffice
  // (64 MiB under ThreadSanitizer takes most of CI's time).
  if (kSanitized) bytes = 2u << 20;
  const std::size_t total = bytes + kGuard * 8;
  char* priv[2] = {static_cast<char*>(cm.alloc_device(total)),
                   static_cast<char*>(cm.alloc_device(total))};
  gnio::SymPtr<char> sym[2] = {cm.alloc_bytes(total), cm.alloc_bytes(total)};
  std::size_t wrong = 0;
  struct Big {
    CollKind kind;
    DataType type;
    RedOp op;
    const char* algo;
    bool symmetric;
    bool in_place;
  };
  const Big bigs[] = {
      {CollKind::AllReduce, DataType::F32, RedOp::Sum, "twoshot", false, false},  // staged, chunked
      {CollKind::AllReduce, DataType::F32, RedOp::Sum, "auto", true, true},       // zero-copy
      {CollKind::AllReduce, DataType::BF16, RedOp::Max, "ring", false, true},
      {CollKind::AllReduce, DataType::I32, RedOp::BitXor, "oneshot", true, false},
      {CollKind::AllReduce, DataType::F16, RedOp::Sum, "ll", true, false},  // LL in pieces
      {CollKind::ReduceScatter, DataType::F64, RedOp::Min, "auto", false, false},
      {CollKind::AllGather, DataType::U8, RedOp::Sum, "auto", true, true},
      {CollKind::AllGather, DataType::F32, RedOp::Sum, "ring", false, false},
      {CollKind::AllGather, DataType::I32, RedOp::Sum, "twoshot", false, true},  // push, staged
      {CollKind::AllGather, DataType::F16, RedOp::Sum, "twoshot", true, false},  // push, zero-copy
      {CollKind::Broadcast, DataType::F32, RedOp::Sum, "twoshot", false, false},
      {CollKind::Broadcast, DataType::I64, RedOp::Sum, "ring", true, false},
      {CollKind::Reduce, DataType::I32, RedOp::Sum, "twoshot", true, false},
      {CollKind::AllToAll, DataType::F64, RedOp::Sum, "auto", false, false},
      {CollKind::AllToAll, DataType::U8, RedOp::Sum, "ring", true, false},
      {CollKind::AllToAll, DataType::F32, RedOp::Sum, "twoshot", false, false},  // push, staged
  };
  for (const Big& b : bigs) {
    Case c;
    c.kind = b.kind;
    c.type = b.type;
    c.op = b.op;
    c.algo = b.algo;
    c.symmetric = b.symmetric;
    c.in_place = b.in_place;
    c.root = n - 1;
    const bool gathered = b.kind == CollKind::ReduceScatter || b.kind == CollKind::AllGather ||
                          b.kind == CollKind::AllToAll;
    // Gathered collectives: the whole buffer is `bytes`; the count is per rank.
    c.count = bytes / gnio::size_of(b.type) / (gathered ? static_cast<std::size_t>(n) : 1) - 3;
    wrong += b.symmetric ? run_case(c, cm.local(sym[0]), cm.local(sym[1]), total)
                         : run_case(c, priv[0], priv[1], total);
  }
  EXPECT_EQ(wrong, 0u);
  cm.free_device(priv[0]);
  cm.free_device(priv[1]);
  cm.free(sym[0]);
  cm.free(sym[1]);
}

/// The largest of each rank's `values` (every rank passes as many).
std::vector<std::int32_t> max_over_ranks(std::vector<std::int32_t> values) {
  gnio::Comm& cm = comm();
  const std::size_t bytes = values.size() * sizeof(std::int32_t);
  auto* d = static_cast<std::int32_t*>(cm.alloc_device(bytes));
  gnio_test::to_device(d, values.data(), bytes);
  gnio::allreduce(cm, d, d, values.size(), DataType::I32, RedOp::Max, stream());
  gnio_test::to_host(values.data(), d, bytes);
  cm.free_device(d);
  return values;
}

/// The hierarchical collectives' job shape: at least 2 nodes, each with the same number (at least
/// 2) of ranks. `consecutive`: each node's ranks are also consecutive (the allgather's condition).
bool equal_nodes(bool consecutive) {
  gnio::Comm& cm = comm();
  const std::int32_t local = cm.local_size();
  const std::int32_t in_order = cm.rank() == cm.node() * cm.local_size() + cm.local_rank();
  const std::vector<std::int32_t> most = max_over_ranks({local, -local, in_order ? 0 : 1});
  const bool equal = cm.nodes() >= 2 && local >= 2 && most[0] == -most[1];
  return equal && (!consecutive || most[2] == 0);
}

/// Runs `c` out of place and in place, its buffers in the heap or private by turns (alternating
/// with the case count and the rank, so that ranks mix both); counts the cases in `*cases`.
std::size_t run_in_and_out_of_place(Case c, std::size_t* cases) {
  std::size_t wrong = 0;
  for (int in_place = 0; in_place < 2; ++in_place) {
    c.in_place = in_place;
    c.symmetric = (*cases + static_cast<std::size_t>(comm().rank())) % 2 == 0;
    wrong += run_case(c);
    ++*cases;
  }
  return wrong;
}

// Allreduce counts around the ranks per node (the hierarchical allreduce's block size: counts
// below it, exact multiples and remainders), in and out of place, heap and private buffers. On
// a job of equal nodes with GNIO_COLL_HIER=on (coll_test_4_2nodes_hier) every count from one
// block up must run hierarchically, and below it flat; on any other job this is one more
// allreduce test, and nothing may run hierarchically where the shape forbids it.
TEST(Coll, AllReduceAroundNodeSize) {
  gnio::Comm& cm = comm();
  const std::size_t per_node = static_cast<std::size_t>(cm.local_size());
  const bool even_nodes = equal_nodes(false);
  const char* hier = std::getenv("GNIO_COLL_HIER");
  const bool forced_on = hier && std::string(hier) == "on";
  std::size_t wrong = 0, cases = 0;
  const std::size_t counts[] = {1,
                                per_node - 1,
                                per_node,
                                per_node + 1,
                                2 * per_node,
                                64 * per_node,
                                1000 * per_node + per_node - 1};
  const std::pair<DataType, RedOp> type_ops[] = {
      {DataType::F32, RedOp::Sum}, {DataType::BF16, RedOp::Max}, {DataType::I64, RedOp::BitXor}};
  for (const auto& [type, op] : type_ops)
    for (std::size_t count : counts) {
      if (count == 0) continue;
      const bool hierarchical = gnio::coll_hierarchical(cm, CollKind::AllReduce, count, type);
      if (!even_nodes || count < per_node) {
        EXPECT_FALSE(hierarchical) << "count " << count;
      } else if (forced_on) {
        EXPECT_TRUE(hierarchical) << "count " << count;
      }
      Case c;
      c.kind = CollKind::AllReduce;
      c.type = type;
      c.op = op;
      c.count = count;
      wrong += run_in_and_out_of_place(c, &cases);
    }
  EXPECT_EQ(wrong, 0u) << wrong << " wrong elements in " << cases << " allreduce cases";
}

// Allgather on a job of equal nodes with consecutive ranks: with GNIO_COLL_HIER=on
// (coll_test_4_2nodes_hier) every count runs hierarchically (between the nodes, then inside each,
// blocks written into place), in and out of place, heap and private buffers; on any other job
// (ranks dealt round-robin over the nodes too) it runs flat. The collectives without a
// hierarchical form never claim one.
TEST(Coll, AllGatherAcrossEqualNodes) {
  gnio::Comm& cm = comm();
  // Each node's ranks consecutive, on every rank (a launcher may deal them round-robin instead).
  const bool even_nodes = equal_nodes(true);
  const char* hier = std::getenv("GNIO_COLL_HIER");
  const bool forced_on = hier && std::string(hier) == "on";
  std::size_t wrong = 0, cases = 0;
  for (DataType type : {DataType::U8, DataType::F16, DataType::F64})
    for (std::size_t count :
         {std::size_t{1}, std::size_t{3}, std::size_t{1000}, std::size_t{65537}}) {
      const bool hierarchical = gnio::coll_hierarchical(cm, CollKind::AllGather, count, type);
      if (!even_nodes) {
        EXPECT_FALSE(hierarchical) << "count " << count;
      } else if (forced_on) {
        EXPECT_TRUE(hierarchical) << "count " << count;
      }
      for (CollKind flat : {CollKind::ReduceScatter, CollKind::Broadcast, CollKind::AllToAll})
        EXPECT_FALSE(gnio::coll_hierarchical(cm, flat, count, type)) << gnio::to_string(flat);
      Case c;
      c.kind = CollKind::AllGather;
      c.type = type;
      c.count = count;
      wrong += run_in_and_out_of_place(c, &cases);
    }
  EXPECT_EQ(wrong, 0u) << wrong << " wrong elements in " << cases << " allgather cases";
}

// Alltoallv with uneven counts (zeros included) and gaps between the blocks.
TEST(Coll, AllToAllV) {
  gnio::Comm& cm = comm();
  const int n = cm.size(), me = cm.rank();
  Pool& p = pool();
  std::size_t wrong = 0;
  for (DataType type : {DataType::U8, DataType::F32, DataType::F64, DataType::BF16})
    for (int scale : {1, 37, 3001}) {
      const std::size_t es = gnio::size_of(type);
      auto pair_count = [&](int from, int to) {
        return static_cast<std::size_t>(((from * 3 + to * 5 + scale) % 4) * scale +
                                        (from + to) % 3);
      };
      std::vector<std::size_t> sc(n), sd(n), rc(n), rd(n);
      std::size_t s_total = 0, r_total = 0;
      for (int q = 0; q < n; ++q) {
        sc[q] = pair_count(me, q);
        sd[q] = s_total;
        s_total += sc[q] + 1;  // a gap element between blocks
        rc[q] = pair_count(q, me);
        rd[q] = r_total;
        r_total += rc[q] + 2;
      }
      // Element k of the block from rank a to rank b.
      auto value = [&](int a, int b, std::size_t k, void* dst) {
        input_element(type, RedOp::Sum, a, static_cast<std::size_t>(b) * 100003 + k, dst);
      };
      std::vector<std::uint8_t> in(s_total * es, 0x11), init((r_total + kGuard) * es, kPoison);
      for (int q = 0; q < n; ++q)
        for (std::size_t k = 0; k < sc[q]; ++k) value(me, q, k, in.data() + (sd[q] + k) * es);
      std::vector<std::uint8_t> want = init;
      for (int q = 0; q < n; ++q)
        for (std::size_t k = 0; k < rc[q]; ++k) value(q, me, k, want.data() + (rd[q] + k) * es);
      const bool symmetric = (scale + me) % 2;
      char* send = symmetric ? cm.local(p.sym[0]) : p.priv[0];
      char* recv = symmetric ? cm.local(p.sym[1]) : p.priv[1];
      gnio_test::to_device(send, in.data(), in.size());
      gnio_test::to_device(recv, init.data(), init.size());
      gnio::alltoallv(cm, send, sc, sd, recv, rc, rd, type, stream());
      cm.synchronize(stream());
      std::vector<std::uint8_t> got(want.size());
      gnio_test::to_host(got.data(), recv, got.size());
      wrong += count_wrong(
          got, want, es,
          std::string("alltoallv ") + gnio::to_string(type) + " scale " + std::to_string(scale));
    }
  EXPECT_EQ(wrong, 0u);
}

// Bad arguments throw InvalidArgument before anything is enqueued; the communicator still works.
TEST(Coll, BadArgumentsAreInvalidAndHarmless) {
  gnio::Comm& cm = comm();
  const int n = cm.size();
  Pool& p = pool();
  void* a = p.priv[0];
  void* b = p.priv[1];
  auto expect_invalid = [&](const char* what, auto&& f) {
    try {
      f();
      ADD_FAILURE() << what << ": no error";
    } catch (const gnio::Error& e) {
      EXPECT_EQ(e.error_class(), gnio::ErrorClass::InvalidArgument) << what << ": " << e.what();
    }
  };
  auto& s = stream();
  expect_invalid("xor on f32",
                 [&] { gnio::allreduce(cm, a, b, 8, DataType::F32, RedOp::BitXor, s); });
  expect_invalid("and on bf16",
                 [&] { gnio::reduce(cm, a, b, 8, DataType::BF16, RedOp::BitAnd, 0, s); });
  expect_invalid("or on fp8",
                 [&] { gnio::reduce_scatter(cm, a, b, 8, DataType::F8E4M3, RedOp::BitOr, s); });
  expect_invalid("null send",
                 [&] { gnio::allreduce(cm, nullptr, b, 8, DataType::F32, RedOp::Sum, s); });
  expect_invalid("null recv", [&] { gnio::allgather(cm, a, nullptr, 8, DataType::F32, s); });
  expect_invalid("root -1", [&] { gnio::broadcast(cm, a, b, 8, DataType::F32, -1, s); });
  expect_invalid("root n", [&] { gnio::reduce(cm, a, b, 8, DataType::F32, RedOp::Sum, n, s); });
  expect_invalid("bad type",
                 [&] { gnio::allreduce(cm, a, b, 8, static_cast<DataType>(42), RedOp::Sum, s); });
  expect_invalid("bad op",
                 [&] { gnio::allreduce(cm, a, b, 8, DataType::F32, static_cast<RedOp>(42), s); });
  expect_invalid("count overflow", [&] {
    gnio::allreduce(cm, a, b, ~std::size_t{0} / 2, DataType::F64, RedOp::Sum, s);
  });
  expect_invalid("gathered overflow", [&] {
    gnio::allgather(cm, a, b, (std::size_t{1} << 62) / static_cast<std::size_t>(n), DataType::F32,
                    s);
  });
  expect_invalid("alltoall in place", [&] { gnio::alltoall(cm, a, a, 8, DataType::F32, s); });
  std::vector<std::size_t> ok(n, 1), shorter(n > 1 ? n - 1 : 0, 1);
  expect_invalid("alltoallv short spans",
                 [&] { gnio::alltoallv(cm, a, shorter, ok, b, ok, ok, DataType::U8, s); });
  expect_invalid("bad algorithm", [&] { gnio::coll_set_algorithm(cm, "fastest"); });
  expect_invalid("bad collective", [&] { gnio::coll_set_algorithm(cm, "allsum:ring"); });
  expect_invalid("algorithm the collective lacks",
                 [&] { gnio::coll_set_algorithm(cm, "reduce_scatter:twoshot"); });
  // Still works, every algorithm.
  std::size_t wrong = 0;
  for (const std::string& algo : algorithms(CollKind::AllReduce)) {
    Case c;
    c.count = 1000;
    c.algo = algo;
    wrong += run_case(c);
  }
  EXPECT_EQ(wrong, 0u);
}

// Collectives on two streams at once: each stream has its own channel.
TEST(Coll, TwoStreamsConcurrently) {
  gnio::Comm& cm = comm();
  const int n = cm.size(), me = cm.rank();
  gnio::Stream second(cm);
  gnio::coll_set_algorithm(cm, "auto");
  const std::size_t count = 4099;
  const std::size_t bytes = count * sizeof(float);
  Pool& p = pool();
  // Stream 1 works on the private pool, stream 2 on the symmetric one.
  float* x = reinterpret_cast<float*>(p.priv[0]);
  float* y = reinterpret_cast<float*>(cm.local(p.sym[0]));
  std::vector<float> in(count);
  for (std::size_t i = 0; i < count; ++i)
    in[i] = static_cast<float>(input_value(DataType::F32, RedOp::Sum, me, i));
  gnio_test::to_device(x, in.data(), bytes);
  gnio_test::to_device(y, in.data(), bytes);
  const int rounds = 3;  // values stay below 2^24: exact in f32
  for (int k = 0; k < rounds; ++k) {
    gnio::allreduce(cm, x, x, count, DataType::F32, RedOp::Sum, stream());
    gnio::allreduce(cm, y, y, count, DataType::F32, RedOp::Sum, second);
    if (k + 1 < rounds) {  // interleaved with other collectives (equal values: no change)
      gnio::allreduce(cm, x, x, count, DataType::F32, RedOp::Max, stream());
      gnio::allreduce(cm, y, y, count, DataType::F32, RedOp::Min, second);
    }
  }
  cm.synchronize(stream());
  cm.synchronize(second);
  // After round 1 every rank holds S = sum of inputs; max/min of equal values is S; each further
  // round multiplies by n.
  std::vector<float> gx(count), gy(count);
  gnio_test::to_host(gx.data(), x, bytes);
  gnio_test::to_host(gy.data(), y, bytes);
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < count; ++i) {
    double s = 0;
    for (int r = 0; r < n; ++r) s += input_value(DataType::F32, RedOp::Sum, r, i);
    double want = s;
    for (int k = 1; k < rounds; ++k) want *= n;
    wrong += gx[i] != static_cast<float>(want);
    wrong += gy[i] != static_cast<float>(want);
  }
  EXPECT_EQ(wrong, 0u);
}

// The algorithm named by GNIO_ALGO (set by the test registration) is the one that runs.
TEST(CollEnv, ForcedAlgorithmRuns) {
  const char* env = std::getenv("GNIO_ALGO");
  if (!env) GTEST_SKIP() << "GNIO_ALGO not set";
  const std::string forced = env;
  std::size_t wrong = 0;
  for (CollKind kind : {CollKind::AllReduce, CollKind::ReduceScatter, CollKind::AllGather,
                        CollKind::Broadcast, CollKind::Reduce, CollKind::AllToAll}) {
    for (std::size_t count : {std::size_t{1}, std::size_t{1023}, std::size_t{65537}}) {
      const CollAlgo a = gnio::coll_algorithm(comm(), kind, count, DataType::F32);
      const auto names = algorithms(kind);
      if (std::find(names.begin(), names.end(), forced) != names.end()) {
        EXPECT_EQ(gnio::to_string(a), forced) << gnio::to_string(kind) << " count " << count;
      }
      Case c;
      c.kind = kind;
      c.count = count;
      c.type = count == 1023 ? DataType::BF16 : DataType::F32;
      c.op = RedOp::Max;
      c.symmetric = (count + static_cast<std::size_t>(comm().rank())) % 2;
      c.algo = forced;
      wrong += run_case(c);
    }
  }
  EXPECT_EQ(wrong, 0u);
}

#if defined(__CUDACC__)
// CUDA graphs: collectives captured once and replayed many times (the call counters live in device
// memory), including staged buffers (copies inside the graph); a stream's first collective cannot
// be captured without coll_prepare.
TEST(CollGraph, CapturedCollectivesReplay) {
  gnio::Comm& c = comm();
  if (c.backend() != gnio::Backend::Cuda) GTEST_SKIP() << "CUDA graphs need the cuda backend";
  const int n = c.size(), me = c.rank();
  gnio::Stream gs(c);
  cudaStream_t s = gs.cuda();
  {  // Not prepared: the first collective on a stream refuses to be captured, with no effect.
    gnio::Stream fresh(c);
    float* p = static_cast<float*>(c.alloc_device(64));
    cudaGraph_t g = nullptr;
    ASSERT_EQ(cudaStreamBeginCapture(fresh.cuda(), cudaStreamCaptureModeThreadLocal), cudaSuccess);
    try {
      gnio::allreduce(c, p, p, 16, DataType::F32, RedOp::Sum, fresh);
      ADD_FAILURE() << "captured the first collective of a stream";
    } catch (const gnio::Error& e) {
      EXPECT_EQ(e.error_class(), gnio::ErrorClass::InvalidArgument) << e.what();
    }
    ASSERT_EQ(cudaStreamEndCapture(fresh.cuda(), &g), cudaSuccess);
    if (g) cudaGraphDestroy(g);
    c.free_device(p);
  }
  gnio::coll_prepare(c, gs);
  gnio::coll_set_algorithm(c, "auto");
  const std::size_t small = 1000, big = (4u << 20) + 3;  // LL; twoshot (staged: private memory)
  float* x = static_cast<float*>(c.alloc_device(small * 4));
  float* y = static_cast<float*>(c.alloc_device(big * 4));
  float* z = static_cast<float*>(c.alloc_device(big * 4));
  gnio::SymPtr<float> u = c.alloc<float>(big);
  std::vector<float> in(big);
  for (std::size_t i = 0; i < big; ++i)
    in[i] = static_cast<float>(input_value(DataType::F32, RedOp::Sum, me, i));
  gnio_test::to_device(x, in.data(), small * 4);
  gnio_test::to_device(y, in.data(), big * 4);
  gnio_test::to_device(c.local(u), in.data(), big * 4);
  cudaGraph_t g = nullptr;
  cudaGraphExec_t ge = nullptr;
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  // Idempotent after the first replay: max of equal values; sums of unchanged inputs.
  gnio::allreduce(c, x, x, small, DataType::F32, RedOp::Max, gs);
  gnio::allreduce(c, y, z, big, DataType::F32, RedOp::Sum, gs);
  gnio::allreduce(c, c.local(u), c.local(u), big, DataType::F32, RedOp::Min, gs);
  ASSERT_EQ(cudaStreamEndCapture(s, &g), cudaSuccess);
  ASSERT_EQ(cudaGraphInstantiate(&ge, g, 0), cudaSuccess);
  for (int k = 0; k < 7; ++k) ASSERT_EQ(cudaGraphLaunch(ge, s), cudaSuccess);
  c.synchronize(gs);
  std::vector<float> gx(small), gz(big), gu(big);
  gnio_test::to_host(gx.data(), x, small * 4);
  gnio_test::to_host(gz.data(), z, big * 4);
  gnio_test::to_host(gu.data(), c.local(u), big * 4);
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < big; ++i) {
    double mx = -1e30, sum = 0, mn = 1e30;
    for (int r = 0; r < n; ++r) {
      const double v = input_value(DataType::F32, RedOp::Sum, r, i);
      mx = std::max(mx, v);
      mn = std::min(mn, v);
      sum += v;
    }
    if (i < small) wrong += gx[i] != static_cast<float>(mx);
    wrong += gz[i] != static_cast<float>(sum);
    wrong += gu[i] != static_cast<float>(mn);
  }
  EXPECT_EQ(wrong, 0u);
  cudaGraphExecDestroy(ge);
  cudaGraphDestroy(g);
  c.free(u);
  c.free_device(x);
  c.free_device(y);
  c.free_device(z);
}
#endif

}  // namespace
}  // namespace coll_test
