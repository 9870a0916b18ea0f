// Device-API tests over peer memory, run on 2..8 ranks and on both backends: every operation,
// every cooperation group, sizes from 1 byte to 16 MiB with odd sizes and unaligned offsets, all
// data checked exactly.
#include <algorithm>
#include <numeric>

#include "common/gnio_test.hpp"

namespace rma_test {

using gnio::Block;
using gnio::Cmp;
using gnio::DeviceComm;
using gnio::SignalOp;
using gnio::SymPtr;
using gnio::Thread;
using gnio::Tile;
using gnio::Warp;
using gnio_test::comm;
using gnio_test::group_threads;
using gnio_test::kPoison;
using gnio_test::pattern_byte;
using gnio_test::stream;

enum class Op { Put, PutNbi, Get, GetNbi, PutSignal };

const char* op_name(Op op) {
  switch (op) {
    case Op::Put: return "put";
    case Op::PutNbi: return "put_nbi";
    case Op::Get: return "get";
    case Op::GetNbi: return "get_nbi";
    default: return "put_signal";
  }
}

#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
// Sanitized builds check the protocol, not bandwidth: every byte they touch costs tens of times
// more, so they stop at 1 MiB (+ odd offsets).
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
constexpr std::size_t kMaxBytes = (kSanitized ? (1u << 20) + 5 : 16u << 20) + 64;

template <class Coop>
void launch_rma(Op op, DeviceComm dc, SymPtr<std::uint8_t> sym, std::uint8_t* priv,
                std::size_t offset, std::size_t n, int peer, SymPtr<std::uint64_t> sig,
                std::uint64_t expect_sig) {
  gnio::launch(stream(), {.grid = 1, .block = group_threads<Coop>()}, [=] GNIO_HD() {
    switch (op) {
      case Op::Put: dc.put<Coop>(sym + offset, priv + offset, n, peer); break;
      case Op::PutNbi:
        dc.put_nbi<Coop>(sym + offset, priv + offset, n, peer);
        dc.quiet();
        break;
      case Op::Get: dc.get<Coop>(priv + offset, sym + offset, n, peer); break;
      case Op::GetNbi:
        dc.get_nbi<Coop>(priv + offset, sym + offset, n, peer);
        dc.quiet();
        break;
      case Op::PutSignal:
        dc.put_signal<Coop>(sym + offset, priv + offset, n, sig, 1, SignalOp::Add, peer);
        (void)dc.wait_signal<Coop>(sig, Cmp::Ge, expect_sig);
        break;
    }
    (void)dc.barrier<Coop>(dc.world());
  });
  comm().synchronize(stream());
}

/// Runs one operation for every size on the ring (each rank targets rank+1) and checks all data.
template <class Coop>
void check_op(Op op, const char* coop_name) {
  gnio::Comm& c = comm();
  const int me = c.rank(), n = c.size();
  const int right = (me + 1) % n, left = (me + n - 1) % n;
  SymPtr<std::uint8_t> sym = c.alloc<std::uint8_t>(kMaxBytes);
  SymPtr<std::uint64_t> sig = c.alloc<std::uint64_t>(1);
  auto* priv = static_cast<std::uint8_t*>(c.alloc_device(kMaxBytes));
  std::uint64_t zero = 0;
  gnio_test::to_device(c.local(sig), &zero, sizeof(zero));
  c.bootstrap().barrier();
  const std::size_t sizes[] = {
      1, 3, 8, 13, 255, 4096, 65537, (1u << 20) + 5, kSanitized ? 0 : 16u << 20};
  const std::size_t offsets[] = {0, 1, 7, 16};
  std::uint64_t signals = 0;
  int round = 0;
  for (std::size_t bytes : sizes) {
    if (bytes == 0) continue;
    const std::size_t off = offsets[round % 4];
    const bool is_get = op == Op::Get || op == Op::GetNbi;
    // The window this round touches, with a 64-byte margin that must stay poisoned.
    const std::size_t window = std::min(kMaxBytes, off + bytes + 64);
    std::vector<std::uint8_t> host(window), expected(window);
    // Source: my pattern (puts: private buffer; gets: my symmetric copy that the left peer reads).
    // Destination poisoned over the whole window.
    for (std::size_t i = 0; i < window; ++i) host[i] = pattern_byte(me, i, round);
    std::vector<std::uint8_t> poison(window, kPoison);
    if (is_get) {
      gnio_test::to_device(c.local(sym), host.data(), window);
      gnio_test::to_device(priv, poison.data(), window);
    } else {
      gnio_test::to_device(priv, host.data(), window);
      gnio_test::to_device(c.local(sym), poison.data(), window);
    }
    c.bootstrap().barrier();
    ++signals;
    launch_rma<Coop>(op, c.device_handle(), sym, priv, off, bytes, is_get ? right : right, sig,
                     signals);
    // Puts land in my symmetric buffer from my left neighbour; gets land in my private buffer
    // from my right neighbour's symmetric buffer.
    const int writer = is_get ? right : left;
    gnio_test::to_host(host.data(), is_get ? static_cast<const void*>(priv) : c.local(sym), window);
    std::fill(expected.begin(), expected.end(), kPoison);
    for (std::size_t i = off; i < off + bytes; ++i) expected[i] = pattern_byte(writer, i, round);
    std::size_t wrong =
        gnio_test::count_wrong(host, expected,
                               std::string(op_name(op)) + "<" + coop_name + "> " +
                                   std::to_string(bytes) + " B at +" + std::to_string(off));
    EXPECT_EQ(wrong, 0u) << op_name(op) << "<" << coop_name << "> size " << bytes << " offset "
                         << off;
    ++round;
    c.bootstrap().barrier();
  }
  c.free_device(priv);
  c.free(sig);
  c.free(sym);
}

#define GNIO_RMA_TESTS(OP)                \
  TEST(Rma, OP##Thread) {                 \
    check_op<Thread>(Op::OP, "Thread");   \
  }                                       \
  TEST(Rma, OP##Tile4) {                  \
    check_op<Tile<4>>(Op::OP, "Tile<4>"); \
  }                                       \
  TEST(Rma, OP##Warp) {                   \
    check_op<Warp>(Op::OP, "Warp");       \
  }                                       \
  TEST(Rma, OP##Block) {                  \
    check_op<Block>(Op::OP, "Block");     \
  }

GNIO_RMA_TESTS(Put)
GNIO_RMA_TESTS(PutNbi)
GNIO_RMA_TESTS(Get)
GNIO_RMA_TESTS(GetNbi)
GNIO_RMA_TESTS(PutSignal)

// ---------------------------------------------------------------------------------------------

void signal_kernel(DeviceComm dc, SymPtr<std::uint64_t> sig, std::uint64_t* results, int peer) {
  gnio::launch(stream(), {.grid = 1, .block = 1}, [=] GNIO_HD() {
    // Set, then Add twice: the peer sees 100, then 102 in its slot for me.
    dc.signal(sig + dc.rank(), 100, SignalOp::Set, peer);
    dc.signal(sig + dc.rank(), 1, SignalOp::Add, peer);
    dc.signal(sig + dc.rank(), 1, SignalOp::Add, peer);
    const int from = (dc.rank() + dc.size() - 1) % dc.size();
    SymPtr<std::uint64_t> mine = sig + from;
    std::uint64_t ok = 0;
    ok += dc.wait_signal(mine, Cmp::Eq, 102) == gnio::Status::Ok;
    ok += dc.wait_signal(mine, Cmp::Ge, 102) == gnio::Status::Ok;
    ok += dc.wait_signal(mine, Cmp::Gt, 101) == gnio::Status::Ok;
    ok += dc.wait_signal(mine, Cmp::Le, 102) == gnio::Status::Ok;
    ok += dc.wait_signal(mine, Cmp::Lt, 103) == gnio::Status::Ok;
    ok += dc.wait_signal(mine, Cmp::Ne, 0) == gnio::Status::Ok;
    ok += dc.test(mine, Cmp::Eq, 102);
    ok += !dc.test(mine, Cmp::Lt, 102);
    ok += dc.signal_read(mine) == 102;
    results[0] = ok;
    (void)dc.barrier(dc.world());
  });
  comm().synchronize(stream());
}

TEST(Rma, SignalsAndComparisons) {
  gnio::Comm& c = comm();
  SymPtr<std::uint64_t> sig = c.alloc<std::uint64_t>(c.size());
  std::vector<std::uint64_t> zero(c.size(), 0);
  gnio_test::to_device(c.local(sig), zero.data(), zero.size() * 8);
  auto* results = static_cast<std::uint64_t*>(c.alloc_device(8));
  c.bootstrap().barrier();
  signal_kernel(c.device_handle(), sig, results, (c.rank() + 1) % c.size());
  std::uint64_t ok = 0;
  gnio_test::to_host(&ok, results, 8);
  EXPECT_EQ(ok, 9u);
  c.free_device(results);
  c.free(sig);
}

// ---------------------------------------------------------------------------------------------

template <class T>
void atomic_kernel(DeviceComm dc, SymPtr<T> words, T* out, unsigned threads, unsigned adds) {
  gnio::launch(stream(), {.grid = 1, .block = threads}, [=] GNIO_HD() {
    const int n = dc.size();
    const unsigned t = gnio::dev::thread();
    // words[0] on rank 0: every thread of every rank adds 1, `adds` times (fetch_add and add).
    for (unsigned k = 0; k < adds; ++k) {
      if (k % 2)
        dc.atomic_add(words, T(1), 0);
      else
        (void)dc.atomic_fetch_add(words, T(1), 0);
    }
    // words[1] on rank 0: a compare-and-swap increment loop.
    for (unsigned k = 0; k < adds; ++k) {
      T seen = dc.atomic_fetch(words + 1, 0);
      while (true) {
        T old = dc.atomic_compare_swap(words + 1, seen, T(seen + 1), 0);
        if (old == seen) break;
        seen = old;
      }
    }
    // words[2 + rank] on the right peer: swap then set.
    if (t == 0) {
      const int right = (dc.rank() + 1) % n;
      T old = dc.atomic_swap(words + 2 + dc.rank(), T(dc.rank() + 7), right);
      out[0] = old;
      dc.atomic_set(words + 2 + dc.size() + dc.rank(), T(dc.rank() + 1000), right);
    }
    (void)dc.barrier<Block>(dc.world());
  });
  comm().synchronize(stream());
}

template <class T>
void check_atomics() {
  gnio::Comm& c = comm();
  const int n = c.size();
  SymPtr<T> words = c.alloc<T>(2 + 2 * n);
  std::vector<T> init(2 + 2 * n);
  for (int i = 0; i < 2 + 2 * n; ++i) init[i] = T(3 + i);  // non-zero start values
  gnio_test::to_device(c.local(words), init.data(), init.size() * sizeof(T));
  T* out = static_cast<T*>(c.alloc_device(sizeof(T)));
  c.bootstrap().barrier();
  // Fewer contending threads across nodes and in sanitized builds: there every atomic is a round
  // trip through two proxy threads (or a slowed-down CPU), and the compare-and-swap loop's
  // retries grow with the square of the contenders.
  const bool slow = kSanitized || c.nodes() > 1;
  const unsigned threads = slow ? 16 : 64, adds = kSanitized ? 4 : 8;
  atomic_kernel<T>(c.device_handle(), words, out, threads, adds);
  std::vector<T> got(init.size());
  gnio_test::to_host(got.data(), c.local(words), got.size() * sizeof(T));
  T swapped;
  gnio_test::to_host(&swapped, out, sizeof(T));
  const int left = (c.rank() + n - 1) % n;
  if (c.rank() == 0) {
    EXPECT_EQ(got[0], T(3 + n * threads * adds));
    EXPECT_EQ(got[1], T(4 + n * threads * adds));
  }
  EXPECT_EQ(got[2 + left], T(left + 7));         // swapped in by my left neighbour
  EXPECT_EQ(got[2 + n + left], T(left + 1000));  // set by my left neighbour
  EXPECT_EQ(swapped, T(3 + 2 + c.rank()));       // the right peer's initial value
  c.free_device(out);
  c.free(words);
}

TEST(Rma, AtomicsInt32) {
  check_atomics<std::int32_t>();
}
TEST(Rma, AtomicsUint32) {
  check_atomics<std::uint32_t>();
}
TEST(Rma, AtomicsInt64) {
  check_atomics<std::int64_t>();
}
TEST(Rma, AtomicsUint64) {
  check_atomics<std::uint64_t>();
}

// ---------------------------------------------------------------------------------------------

template <class Coop>
void barrier_kernel(DeviceComm dc, gnio::Team team, SymPtr<std::uint32_t> slots, int rounds,
                    std::uint32_t* errors) {
  gnio::launch(stream(), {.grid = 1, .block = group_threads<Coop>()}, [=] GNIO_HD() {
    const Coop g{};
    std::uint32_t bad = 0;
    for (int k = 1; k <= rounds; ++k) {
      // Write round k into my slot on every member, then after the barrier every slot holds k.
      for (int i = static_cast<int>(g.rank()); i < team.size; i += static_cast<int>(g.size())) {
        std::uint32_t v = static_cast<std::uint32_t>(k);
        dc.put<Thread>(slots + team.index, &v, 1, team.world_rank(i));
      }
      (void)dc.barrier<Coop>(team);
      for (int i = static_cast<int>(g.rank()); i < team.size; i += static_cast<int>(g.size()))
        bad += gnio::dev::atomic_load(dc.local(slots + i), gnio::dev::Order::Relaxed) !=
               static_cast<std::uint32_t>(k);
      (void)dc.sync<Coop>(team);
    }
    gnio::dev::atomic_fetch_add(errors, bad, gnio::dev::Order::Relaxed);
  });
  comm().synchronize(stream());
}

template <class Coop>
void check_barrier(const gnio::Team& team, int rounds) {
  gnio::Comm& c = comm();
  SymPtr<std::uint32_t> slots = c.alloc<std::uint32_t>(c.size());
  auto* errors = static_cast<std::uint32_t*>(c.alloc_device(4));
  std::uint32_t zero = 0;
  gnio_test::to_device(errors, &zero, 4);
  c.bootstrap().barrier();
  if (team.contains_me()) barrier_kernel<Coop>(c.device_handle(), team, slots, rounds, errors);
  std::uint32_t bad = 1;
  gnio_test::to_host(&bad, errors, 4);
  EXPECT_EQ(bad, 0u);
  c.bootstrap().barrier();
  c.free_device(errors);
  c.free(slots);
}

TEST(Rma, BarrierWorldThread) {
  check_barrier<Thread>(comm().world(), 50);
}
TEST(Rma, BarrierWorldWarp) {
  check_barrier<Warp>(comm().world(), 50);
}
TEST(Rma, BarrierWorldBlock) {
  check_barrier<Block>(comm().world(), 50);
}
TEST(Rma, BarrierNodeTeam) {
  check_barrier<Thread>(comm().node_team(), 20);
}
TEST(Rma, BarrierSplitTeams) {
  gnio::Team odd_even = comm().split(comm().world(), comm().rank() % 2, -comm().rank());
  EXPECT_EQ(odd_even.size, (comm().size() + 1 - comm().rank() % 2) / 2);
  // Keys are -rank: members are ordered by descending rank. Host code reads the members from the
  // team's host copy of its table (the heap table is GPU memory on GPUs).
  if (odd_even.size > 1) {
    ASSERT_EQ(odd_even.stride, 0);
    ASSERT_NE(odd_even.host_members_table, nullptr);
    EXPECT_GT(odd_even.world_rank(0), odd_even.world_rank(1));
    for (int i = 0; i < odd_even.size; ++i)
      EXPECT_EQ(odd_even.world_rank(i) % 2, comm().rank() % 2) << "member " << i;
  }
  check_barrier<Warp>(odd_even, 20);
}
TEST(Rma, BarrierStridedTeam) {
  gnio::Team evens = comm().split_strided(comm().world(), 0, 2, (comm().size() + 1) / 2);
  EXPECT_EQ(evens.contains_me(), comm().rank() % 2 == 0);
  check_barrier<Block>(evens, 20);
}

TEST(Rma, HandleReportsIdentity) {
  DeviceComm dc = comm().device_handle();
  EXPECT_EQ(dc.rank(), comm().rank());
  EXPECT_EQ(dc.size(), comm().size());
  EXPECT_EQ(dc.local_size(), comm().local_size());
  for (int p = 0; p < comm().size(); ++p) EXPECT_TRUE(dc.is_p2p(p));
}

}  // namespace rma_test
