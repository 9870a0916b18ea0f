// Soak: a long random mix of device-API RMA operations and host collectives on one communicator,
// every result checked exactly. A PRNG seeded the same on every rank draws the whole plan, so
// each rank knows what every other rank does and can compute exactly what must land in its own
// memory.
//
// RMA rounds: every rank issues kOpsPerRound random operations (put, get, put_signal, remote
// fetch_add, compare_swap) on random peers (itself included), 1 B..64 KiB at unaligned source and
// destination offsets, as Thread, Warp or Block groups, each its own gnio::launch. Every
// (sender, slot) pair has its own landing area on each peer, so the round's puts never overlap;
// the bytes around each window must stay poisoned. Collectives: random kind, type, operator,
// count, root, algorithm, in/out of place, symmetric or private buffers, with exactly
// representable inputs (coll_test_util.hpp) shifted by a random index so no two calls see the
// same data. RMA rounds and collectives are interleaved in a random order.
//
// Test-only environment (not library configuration):
//   GNIO_SOAK_RMA_OPS  RMA operations over all ranks (default: small, sized for CI)
//   GNIO_SOAK_COLLS    collectives (default: small, sized for CI)
//   GNIO_SOAK_SEED     PRNG seed (default: fixed; the seed is printed)
// The full soak on GPUs (see docs/reliability.md):
//   GNIO_SOAK_RMA_OPS=100000 GNIO_SOAK_COLLS=10000 gnio-run -n 2 -- soak_test_gpu
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <string>
#include <vector>

#if GNIO_SOAK_COLL
#include "coll/coll_test_util.hpp"
#endif
#include "common/gnio_test.hpp"
#include "gnio/bootstrap.hpp"

// A named namespace, not an anonymous one: nvcc wants the functions that hold extended
// __host__ __device__ lambdas to have external linkage.
namespace soak_test {

using gnio::Block;
using gnio::Cmp;
using gnio::DeviceComm;
using gnio::SignalOp;
using gnio::SymPtr;
using gnio::Thread;
using gnio::Warp;
using gnio_test::comm;
using gnio_test::kPoison;
using gnio_test::pattern_byte;
using gnio_test::stream;

#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
// Sanitized builds check the protocols, not endurance: every access costs tens of times more.
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
// CI defaults: a few minutes at most on two slow cores with 4 ranks.
constexpr unsigned long long kDefaultRmaOps = kSanitized ? 1200 : 4000;
constexpr unsigned long long kDefaultColls = kSanitized ? 120 : 400;

constexpr int kOpsPerRound = 4;               // per rank
constexpr std::size_t kMaxBytes = 64u << 10;  // largest RMA transfer
constexpr std::size_t kMaxOffset = 64;        // offsets are < this
constexpr std::size_t kMargin = 64;           // poisoned bytes checked past a window
constexpr std::size_t kArea = kMaxBytes + kMaxOffset + kMargin;
constexpr double kProgressSeconds = 10;

unsigned long long env_count(const char* name, unsigned long long fallback) {
  const char* v = std::getenv(name);  // test-only variable, not library configuration
  return v && *v ? std::strtoull(v, nullptr, 0) : fallback;
}

/// splitmix64: tiny, fast, and identical on every rank for the same seed.
class Rng {
 public:
  explicit Rng(std::uint64_t seed) : s_(seed) {}
  std::uint64_t next() {
    std::uint64_t z = (s_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  /// Uniform in [0, n).
  std::uint64_t below(std::uint64_t n) { return next() % n; }
  /// Log-uniform in [1, max]: small sizes as often as large ones.
  std::uint64_t size_up_to(std::uint64_t max) {
    int bits = 0;
    while ((std::uint64_t{1} << (bits + 1)) <= max) ++bits;
    const std::uint64_t top =
        std::min<std::uint64_t>(max, (std::uint64_t{2} << below(bits + 1)) - 1);
    return 1 + below(top);
  }

 private:
  std::uint64_t s_;
};

// ---------------------------------------------------------------------------------------------
// RMA

enum class Kind { Put, Get, PutSignal, FetchAdd, CompareSwap };
enum class Coop { Thread, Warp, Block };
constexpr int kAtomicTypes = 4;  // u32, i32, u64, i64

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::Put: return "put";
    case Kind::Get: return "get";
    case Kind::PutSignal: return "put_signal";
    case Kind::FetchAdd: return "fetch_add";
    default: return "compare_swap";
  }
}
const char* coop_name(Coop c) {
  return c == Coop::Thread ? "Thread" : c == Coop::Warp ? "Warp" : "Block";
}

struct RmaOp {
  Kind kind = Kind::Put;
  int peer = 0;
  Coop coop = Coop::Thread;
  unsigned block = 1;  // threads of a Block group
  std::size_t bytes = 0, src_off = 0, dst_off = 0;
  int type = 0;             // atomics: index into the atomic types
  std::uint64_t value = 0;  // put_signal / fetch_add addend; compare_swap: desired
  bool hit = false;         // compare_swap: pass the current value (else a stale one)
};

RmaOp draw_op(Rng& rng, int n) {
  RmaOp op;
  const std::uint64_t k = rng.below(100);
  op.kind = k < 30   ? Kind::Put
            : k < 55 ? Kind::Get
            : k < 75 ? Kind::PutSignal
            : k < 90 ? Kind::FetchAdd
                     : Kind::CompareSwap;
  op.peer = static_cast<int>(rng.below(static_cast<std::uint64_t>(n)));
  op.coop = static_cast<Coop>(rng.below(3));
  op.block = 32u * static_cast<unsigned>(1 + rng.below(4));
  op.bytes = rng.size_up_to(kMaxBytes);
  op.src_off = rng.below(kMaxOffset);
  op.dst_off = rng.below(kMaxOffset);
  op.type = static_cast<int>(rng.below(kAtomicTypes));
  op.value = 1 + rng.below(1000);
  op.hit = rng.below(4) != 0;
  return op;
}

/// Salt of the pattern a put/put_signal sends: unique per round and slot.
unsigned put_salt(std::uint64_t round, int slot) {
  return static_cast<unsigned>(round * kOpsPerRound + static_cast<std::uint64_t>(slot) + 1);
}
/// Salt of every rank's get source area in a round.
unsigned source_salt(std::uint64_t round) {
  return static_cast<unsigned>(round * 7919u + 3u);
}

/// Symmetric and private memory of the RMA rounds, and the model of every atomic word.
struct RmaState {
  int n = 0;
  SymPtr<std::uint8_t> land;    // n * kOpsPerRound areas: sender r, slot k
  SymPtr<std::uint8_t> source;  // read by peers' gets
  SymPtr<std::uint64_t> sig;    // one word per sender
  // Per atomic type: n exclusive fetch_add words (one per sender), n compare_swap words, one word
  // every rank adds to. Stored in 8-byte slots whatever the type.
  SymPtr<std::uint64_t> words[kAtomicTypes];
  std::uint8_t* psrc = nullptr;      // kOpsPerRound put sources
  std::uint8_t* pdst = nullptr;      // kOpsPerRound get destinations
  std::uint64_t* results = nullptr;  // atomic return values, one per slot
  // Model: value of words[t][w] on rank p, and of sig[r] on rank p.
  std::vector<std::uint64_t> model;      // [t][p][2n+1]
  std::vector<std::uint64_t> sig_model;  // [p][r]

  std::size_t word_count() const { return 2 * static_cast<std::size_t>(n) + 1; }
  std::uint64_t& word(int t, int p, std::size_t w) {
    return model[(static_cast<std::size_t>(t) * static_cast<std::size_t>(n) +
                  static_cast<std::size_t>(p)) *
                     word_count() +
                 w];
  }
};

/// Truncates to the atomic type's width (and sign), as the device stores it.
std::uint64_t as_type(int t, std::uint64_t v) {
  switch (t) {
    case 0: return static_cast<std::uint32_t>(v);
    case 1:
      return static_cast<std::uint64_t>(static_cast<std::int64_t>(static_cast<std::int32_t>(v)));
    default: return v;
  }
}

template <class Co>
void launch_data_op(const RmaOp& op, DeviceComm dc, const RmaState& s, int slot) {
  const int me = dc.rank();
  const unsigned threads = std::is_same_v<Co, Thread>  ? 1u
                           : std::is_same_v<Co, Block> ? op.block
                                                       : static_cast<unsigned>(Warp::size());
  const std::size_t area = static_cast<std::size_t>(me * kOpsPerRound + slot) * kArea;
  const SymPtr<std::uint8_t> land = s.land + (area + op.dst_off);
  const SymPtr<std::uint8_t> src = s.source + op.src_off;
  const std::uint8_t* psrc = s.psrc + static_cast<std::size_t>(slot) * kArea + op.src_off;
  std::uint8_t* pdst = s.pdst + static_cast<std::size_t>(slot) * kArea + op.dst_off;
  const SymPtr<std::uint64_t> sig = s.sig + me;
  const Kind kind = op.kind;
  const std::size_t bytes = op.bytes;
  const std::uint64_t value = op.value;
  const int peer = op.peer;
  gnio::launch(stream(), {.grid = 1, .block = threads}, [=] GNIO_HD() {
    switch (kind) {
      case Kind::Put: dc.put<Co>(land, psrc, bytes, peer); break;
      case Kind::Get: dc.get<Co>(pdst, src, bytes, peer); break;
      default: dc.put_signal<Co>(land, psrc, bytes, sig, value, SignalOp::Add, peer); break;
    }
    dc.quiet();
  });
}

template <class T>
void launch_atomic(const RmaOp& op, DeviceComm dc, SymPtr<std::uint64_t> words,
                   std::uint64_t expected, std::uint64_t* result, int n) {
  const int me = dc.rank(), peer = op.peer;
  // The T word in the low bytes of each 8-byte slot (little endian).
  constexpr int kStride = static_cast<int>(sizeof(std::uint64_t) / sizeof(T));
  const SymPtr<T> exclusive = words.cast<T>() + me * kStride;
  const SymPtr<T> cas = words.cast<T>() + (n + me) * kStride;
  const SymPtr<T> shared = words.cast<T>() + 2 * n * kStride;
  const bool add = op.kind == Kind::FetchAdd;
  const T value = static_cast<T>(op.value), exp = static_cast<T>(expected);
  gnio::launch(stream(), {.grid = 1, .block = 1}, [=] GNIO_HD() {
    T old;
    if (add) {
      old = dc.atomic_fetch_add(exclusive, value, peer);
      dc.atomic_add(shared, value, peer);
    } else {
      old = dc.atomic_compare_swap(cas, exp, value, peer);
    }
    *result = static_cast<std::uint64_t>(static_cast<std::int64_t>(old));
    dc.quiet();
  });
}

/// Round end: wait for the signals of the first 8 senders (the barrier covers the others), then
/// a world barrier.
void launch_round_end(DeviceComm dc, SymPtr<std::uint64_t> sig,
                      const std::vector<std::uint64_t>& expect, std::uint64_t* status) {
  const int n = dc.size();
  std::uint64_t want[8] = {};
  for (int r = 0; r < n && r < 8; ++r) want[r] = expect[static_cast<std::size_t>(r)];
  gnio::launch(stream(), {.grid = 1, .block = 1}, [=] GNIO_HD() {
    std::uint64_t bad = 0;
    for (int r = 0; r < n && r < 8; ++r)
      bad += dc.wait_signal(sig + r, Cmp::Ge, want[r]) != gnio::Status::Ok;
    bad += dc.barrier(dc.world()) != gnio::Status::Ok;
    *status = bad;
  });
}

void launch_barrier(DeviceComm dc) {
  gnio::launch(stream(), {.grid = 1, .block = 1}, [=] GNIO_HD() { (void)dc.barrier(dc.world()); });
}

/// Allocates and initialises the RMA memory and model (collective).
void rma_setup(RmaState& s) {
  gnio::Comm& c = comm();
  const int n = c.size();
  s.n = n;
  s.land = c.alloc<std::uint8_t>(static_cast<std::size_t>(n) * kOpsPerRound * kArea);
  s.source = c.alloc<std::uint8_t>(kArea);
  s.sig = c.alloc<std::uint64_t>(static_cast<std::size_t>(n));
  for (auto& w : s.words) w = c.alloc<std::uint64_t>(s.word_count());
  s.psrc = static_cast<std::uint8_t*>(c.alloc_device(kOpsPerRound * kArea));
  s.pdst = static_cast<std::uint8_t*>(c.alloc_device(kOpsPerRound * kArea));
  s.results =
      static_cast<std::uint64_t*>(c.alloc_device((kOpsPerRound + 1) * sizeof(std::uint64_t)));
  s.model.assign(static_cast<std::size_t>(kAtomicTypes * n) * s.word_count(), 0);
  s.sig_model.assign(static_cast<std::size_t>(n * n), 0);
  // Non-zero starting values, different per word and rank.
  for (int t = 0; t < kAtomicTypes; ++t)
    for (int p = 0; p < n; ++p)
      for (std::size_t w = 0; w < s.word_count(); ++w)
        s.word(t, p, w) = as_type(t, 1000u * static_cast<std::uint64_t>(p) + 17u * w + 5u);
  for (int t = 0; t < kAtomicTypes; ++t) {
    std::vector<std::uint64_t> init(s.word_count());
    for (std::size_t w = 0; w < init.size(); ++w) init[w] = s.word(t, c.rank(), w);
    gnio_test::to_device(c.local(s.words[t]), init.data(), init.size() * 8);
  }
  std::vector<std::uint64_t> zero(static_cast<std::size_t>(n), 0);
  gnio_test::to_device(c.local(s.sig), zero.data(), zero.size() * 8);
  c.bootstrap().barrier();
}

void rma_teardown(RmaState& s) {
  gnio::Comm& c = comm();
  c.bootstrap().barrier();
  c.free_device(s.results);
  c.free_device(s.pdst);
  c.free_device(s.psrc);
  for (auto& w : s.words) c.free(w);
  c.free(s.sig);
  c.free(s.source);
  c.free(s.land);
}

std::string describe(const RmaOp& op, int from, std::uint64_t round, int slot) {
  char buf[200];
  std::snprintf(buf, sizeof(buf),
                "round %llu slot %d: rank %d %s<%s> to rank %d, %zu B, src +%zu, dst +%zu",
                static_cast<unsigned long long>(round), slot, from, kind_name(op.kind),
                coop_name(op.coop), op.peer, op.bytes, op.src_off, op.dst_off);
  return buf;
}

/// Bytes [0, off + bytes + margin) of an area: poison, then the pattern from `writer`.
std::vector<std::uint8_t> expected_window(const RmaOp& op, int writer, unsigned salt) {
  std::vector<std::uint8_t> w(op.dst_off + op.bytes + kMargin, kPoison);
  for (std::size_t i = 0; i < op.bytes; ++i)
    w[op.dst_off + i] = pattern_byte(writer, op.src_off + i, salt);
  return w;
}

/// One RMA round: every rank runs its kOpsPerRound operations; returns this rank's failed checks.
std::size_t rma_round(RmaState& s, const std::vector<RmaOp>& plan, std::uint64_t round) {
  gnio::Comm& c = comm();
  const int n = c.size(), me = c.rank();
  const DeviceComm dc = c.device_handle();
  auto op_of = [&](int r, int k) -> const RmaOp& {
    return plan[static_cast<std::size_t>(r * kOpsPerRound + k)];
  };
  // Preparation, all on this rank's own memory: the get source (when someone reads it), put
  // sources, poisoned get destinations and landing windows.
  bool read_from_me = false;
  for (const RmaOp& op : plan) read_from_me |= op.kind == Kind::Get && op.peer == me;
  if (read_from_me) {
    std::vector<std::uint8_t> src(kArea);
    for (std::size_t i = 0; i < kArea; ++i) src[i] = pattern_byte(me, i, source_salt(round));
    gnio_test::to_device(c.local(s.source), src.data(), src.size());
  }
  for (int k = 0; k < kOpsPerRound; ++k) {
    const RmaOp& op = op_of(me, k);
    std::uint8_t* area = nullptr;
    std::vector<std::uint8_t> bytes;
    if (op.kind == Kind::Put || op.kind == Kind::PutSignal) {
      bytes.resize(op.src_off + op.bytes);
      for (std::size_t i = 0; i < bytes.size(); ++i)
        bytes[i] = pattern_byte(me, i, put_salt(round, k));
      area = s.psrc;
    } else if (op.kind == Kind::Get) {
      bytes.assign(op.dst_off + op.bytes + kMargin, kPoison);
      area = s.pdst;
    }
    if (area)
      gnio_test::to_device(area + static_cast<std::size_t>(k) * kArea, bytes.data(), bytes.size());
  }
  for (int r = 0; r < n; ++r)
    for (int k = 0; k < kOpsPerRound; ++k) {
      const RmaOp& op = op_of(r, k);
      if (op.peer != me || (op.kind != Kind::Put && op.kind != Kind::PutSignal)) continue;
      std::vector<std::uint8_t> poison(op.dst_off + op.bytes + kMargin, kPoison);
      gnio_test::to_device(c.local(s.land) + static_cast<std::size_t>(r * kOpsPerRound + k) * kArea,
                           poison.data(), poison.size());
    }

  // The model after the round, in the plan's order (only the exclusive and compare_swap words
  // depend on order, and only their sender touches them), and what my atomics must return.
  std::vector<std::uint64_t> expected_result(kOpsPerRound, 0), passed(kOpsPerRound, 0);
  for (int r = 0; r < n; ++r)
    for (int k = 0; k < kOpsPerRound; ++k) {
      const RmaOp& op = op_of(r, k);
      const std::size_t ku = static_cast<std::size_t>(k);
      if (op.kind == Kind::PutSignal)
        s.sig_model[static_cast<std::size_t>(op.peer * n + r)] += op.value;
      if (op.kind == Kind::FetchAdd) {
        std::uint64_t& ex = s.word(op.type, op.peer, static_cast<std::size_t>(r));
        if (r == me) expected_result[ku] = ex;
        ex = as_type(op.type, ex + op.value);
        std::uint64_t& sh = s.word(op.type, op.peer, 2 * static_cast<std::size_t>(n));
        sh = as_type(op.type, sh + op.value);
      }
      if (op.kind == Kind::CompareSwap) {
        std::uint64_t& w = s.word(op.type, op.peer, static_cast<std::size_t>(n + r));
        if (r == me) {
          expected_result[ku] = w;
          passed[ku] = op.hit ? w : as_type(op.type, w + 1);
        }
        if (op.hit) w = as_type(op.type, op.value);
      }
    }

  // The operations, stream-ordered between two world barriers.
  launch_barrier(dc);
  for (int k = 0; k < kOpsPerRound; ++k) {
    const RmaOp& op = op_of(me, k);
    if (op.kind == Kind::FetchAdd || op.kind == Kind::CompareSwap) {
      const std::uint64_t pass = passed[static_cast<std::size_t>(k)];
      std::uint64_t* result = s.results + k;
      switch (op.type) {
        case 0: launch_atomic<std::uint32_t>(op, dc, s.words[0], pass, result, n); break;
        case 1: launch_atomic<std::int32_t>(op, dc, s.words[1], pass, result, n); break;
        case 2: launch_atomic<std::uint64_t>(op, dc, s.words[2], pass, result, n); break;
        default: launch_atomic<std::int64_t>(op, dc, s.words[3], pass, result, n); break;
      }
      continue;
    }
    switch (op.coop) {
      case Coop::Thread: launch_data_op<Thread>(op, dc, s, k); break;
      case Coop::Warp: launch_data_op<Warp>(op, dc, s, k); break;
      default: launch_data_op<Block>(op, dc, s, k); break;
    }
  }
  std::vector<std::uint64_t> sig_expect(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r)
    sig_expect[static_cast<std::size_t>(r)] = s.sig_model[static_cast<std::size_t>(me * n + r)];
  launch_round_end(dc, s.sig, sig_expect, s.results + kOpsPerRound);
  c.synchronize(stream());

  // Checks: landing windows, get results, atomic results, my words.
  std::size_t failed = 0;
  for (int r = 0; r < n; ++r)
    for (int k = 0; k < kOpsPerRound; ++k) {
      const RmaOp& op = op_of(r, k);
      if (op.peer != me || (op.kind != Kind::Put && op.kind != Kind::PutSignal)) continue;
      const std::vector<std::uint8_t> want = expected_window(op, r, put_salt(round, k));
      std::vector<std::uint8_t> got(want.size());
      gnio_test::to_host(got.data(),
                         c.local(s.land) + static_cast<std::size_t>(r * kOpsPerRound + k) * kArea,
                         got.size());
      failed += gnio_test::count_wrong(got, want, describe(op, r, round, k)) != 0;
    }
  std::uint64_t results[kOpsPerRound + 1];
  gnio_test::to_host(results, s.results, sizeof(results));
  EXPECT_EQ(results[kOpsPerRound], 0u) << "round " << round << ": a signal wait or barrier failed";
  failed += results[kOpsPerRound] != 0;
  for (int k = 0; k < kOpsPerRound; ++k) {
    const RmaOp& op = op_of(me, k);
    if (op.kind == Kind::Get) {
      std::vector<std::uint8_t> want(op.dst_off + op.bytes + kMargin, kPoison);
      for (std::size_t i = 0; i < op.bytes; ++i)
        want[op.dst_off + i] = pattern_byte(op.peer, op.src_off + i, source_salt(round));
      std::vector<std::uint8_t> got(want.size());
      gnio_test::to_host(got.data(), s.pdst + static_cast<std::size_t>(k) * kArea, got.size());
      failed += gnio_test::count_wrong(got, want, describe(op, me, round, k)) != 0;
    } else if (op.kind == Kind::FetchAdd || op.kind == Kind::CompareSwap) {
      const std::uint64_t got = as_type(op.type, results[k]);
      EXPECT_EQ(got, expected_result[static_cast<std::size_t>(k)]) << describe(op, me, round, k);
      failed += got != expected_result[static_cast<std::size_t>(k)];
    }
  }
  for (int t = 0; t < kAtomicTypes; ++t) {
    std::vector<std::uint64_t> got(s.word_count());
    gnio_test::to_host(got.data(), c.local(s.words[t]), got.size() * 8);
    for (std::size_t w = 0; w < got.size(); ++w) {
      const std::uint64_t g = as_type(t, got[w]), want = s.word(t, me, w);
      EXPECT_EQ(g, want) << "round " << round << ": atomic word " << w << " of type " << t;
      failed += g != want;
    }
  }
  std::vector<std::uint64_t> sig(static_cast<std::size_t>(n));
  gnio_test::to_host(sig.data(), c.local(s.sig), sig.size() * 8);
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(sig[static_cast<std::size_t>(r)], sig_expect[static_cast<std::size_t>(r)])
        << "round " << round << ": signal from rank " << r;
    failed += sig[static_cast<std::size_t>(r)] != sig_expect[static_cast<std::size_t>(r)];
  }
  return failed;
}

// ---------------------------------------------------------------------------------------------
// Collectives

#if GNIO_SOAK_COLL
using coll_test::CollKind;
using coll_test::DataType;
using coll_test::RedOp;

constexpr std::size_t kMaxCount = kSanitized ? 4096 : 65536;  // elements per rank
constexpr std::size_t kGuard = 16;                            // poisoned elements behind

struct CollCase {
  CollKind kind = CollKind::AllReduce;
  DataType type = DataType::F32;
  RedOp op = RedOp::Sum;
  std::size_t count = 1, shift = 0;
  int root = 0;
  bool in_place = false, symmetric = false;
  std::string algo = "auto";
};

bool reducing(CollKind k) {
  return k == CollKind::AllReduce || k == CollKind::ReduceScatter || k == CollKind::Reduce;
}

CollCase draw_coll(Rng& rng, int n, int me) {
  static const CollKind kKinds[] = {CollKind::AllReduce, CollKind::ReduceScatter,
                                    CollKind::AllGather, CollKind::Broadcast,
                                    CollKind::Reduce,    CollKind::AllToAll};
  CollCase c;
  c.kind = kKinds[rng.below(6)];
  c.type = coll_test::kAllTypes[rng.below(std::size(coll_test::kAllTypes))];
  const bool bits = gnio::is_integer(c.type) && rng.below(3) == 0;
  c.op = bits ? coll_test::kBitOps[rng.below(3)] : coll_test::kArithOps[rng.below(4)];
  c.count = rng.size_up_to(kMaxCount);
  c.shift = rng.below(1u << 20);
  c.root = static_cast<int>(rng.below(static_cast<std::uint64_t>(n)));
  c.in_place = c.kind != CollKind::AllToAll && rng.below(2);
  std::vector<std::string> algos = {"auto", "ll", "oneshot", "ring"};
  if (c.kind == CollKind::AllReduce || c.kind == CollKind::Broadcast || c.kind == CollKind::Reduce)
    algos.push_back("twoshot");
  c.algo = algos[rng.below(algos.size())];
  // Per rank (drawn by every rank for every rank, so the stream stays shared).
  for (int r = 0; r < n; ++r) {
    const bool sym = rng.below(2);
    if (r == me) c.symmetric = sym;
  }
  return c;
}

std::string describe(const CollCase& c, std::uint64_t index) {
  std::string s = "collective " + std::to_string(index) + ": " + gnio::to_string(c.kind) + " " +
                  gnio::to_string(c.type);
  if (reducing(c.kind)) s += std::string(" ") + gnio::to_string(c.op);
  s += " count " + std::to_string(c.count) + " root " + std::to_string(c.root) +
       (c.in_place ? " in-place" : " out-of-place") + (c.symmetric ? " symmetric" : " private") +
       " algo " + c.algo + " rank " + std::to_string(comm().rank());
  return s;
}

struct CollBuffers {
  std::size_t bytes = 0;
  char* priv[2] = {};
  SymPtr<char> sym[2];
};

void coll_setup(CollBuffers& b) {
  gnio::Comm& c = comm();
  b.bytes = (static_cast<std::size_t>(c.size()) * kMaxCount + kGuard) * 8;
  for (int i = 0; i < 2; ++i) {
    b.priv[i] = static_cast<char*>(c.alloc_device(b.bytes));
    b.sym[i] = c.alloc_bytes(b.bytes);
  }
}

void coll_teardown(CollBuffers& b) {
  gnio::Comm& c = comm();
  for (int i = 0; i < 2; ++i) {
    c.free_device(b.priv[i]);
    c.free(b.sym[i]);
  }
}

/// Runs one collective; returns 1 when any element of the checked buffer is wrong.
std::size_t run_coll(const CollCase& cc, CollBuffers& b, std::uint64_t index) {
  gnio::Comm& c = comm();
  const int n = c.size(), me = c.rank();
  const std::size_t es = gnio::size_of(cc.type), nn = static_cast<std::size_t>(n);
  const std::size_t cnt = cc.count, sh = cc.shift;
  const bool rs = cc.kind == CollKind::ReduceScatter, ag = cc.kind == CollKind::AllGather;
  const bool a2a = cc.kind == CollKind::AllToAll;
  const std::size_t in_elems = rs || a2a ? nn * cnt : cnt, out_elems = ag || a2a ? nn * cnt : cnt;
  const RedOp gen = reducing(cc.kind) ? cc.op : RedOp::Sum;
  char* send_base = cc.symmetric ? c.local(b.sym[0]) : b.priv[0];
  char* recv_base = cc.symmetric ? c.local(b.sym[1]) : b.priv[1];

  std::vector<std::uint8_t> input(in_elems * es);
  for (std::size_t i = 0; i < in_elems; ++i)
    coll_test::input_element(cc.type, gen, me, sh + i, input.data() + i * es);
  const char* send = send_base;
  char* recv = recv_base;
  std::size_t out_at = 0;
  std::vector<std::uint8_t> init;
  if (!cc.in_place) {
    gnio_test::to_device(send_base, input.data(), input.size());
    init.assign((out_elems + kGuard) * es, kPoison);
  } else {
    init.assign((std::max(in_elems, out_elems) + kGuard) * es, kPoison);
    const std::size_t mine = static_cast<std::size_t>(me) * cnt;
    if (ag) {
      std::copy(input.begin(), input.end(), init.begin() + static_cast<std::ptrdiff_t>(mine * es));
      send = recv_base + mine * es;
    } else {
      std::copy(input.begin(), input.end(), init.begin());
      send = recv_base;
      recv = recv_base + (rs ? mine * es : 0);
      out_at = rs ? mine : 0;
    }
  }
  gnio_test::to_device(recv_base, init.data(), init.size());
  std::vector<std::uint8_t> want = init;
  std::uint8_t* o = want.data() + out_at * es;
  for (std::size_t i = 0; i < cnt; ++i) {
    switch (cc.kind) {
      case CollKind::AllReduce:
        coll_test::expected_reduction(cc.type, cc.op, n, sh + i, o + i * es);
        break;
      case CollKind::ReduceScatter:
        coll_test::expected_reduction(cc.type, cc.op, n,
                                      sh + static_cast<std::size_t>(me) * cnt + i, o + i * es);
        break;
      case CollKind::Reduce:
        if (me == cc.root) coll_test::expected_reduction(cc.type, cc.op, n, sh + i, o + i * es);
        break;
      case CollKind::Broadcast:
        coll_test::input_element(cc.type, gen, cc.root, sh + i, o + i * es);
        break;
      case CollKind::AllGather:
        for (int m = 0; m < n; ++m)
          coll_test::input_element(cc.type, gen, m, sh + i,
                                   o + (static_cast<std::size_t>(m) * cnt + i) * es);
        break;
      default:
        for (int m = 0; m < n; ++m)
          coll_test::input_element(cc.type, gen, m, sh + static_cast<std::size_t>(me) * cnt + i,
                                   o + (static_cast<std::size_t>(m) * cnt + i) * es);
        break;
    }
  }
  gnio::coll_set_algorithm(c, cc.algo);
  switch (cc.kind) {
    case CollKind::AllReduce: gnio::allreduce(c, send, recv, cnt, cc.type, cc.op, stream()); break;
    case CollKind::ReduceScatter:
      gnio::reduce_scatter(c, send, recv, cnt, cc.type, cc.op, stream());
      break;
    case CollKind::AllGather: gnio::allgather(c, send, recv, cnt, cc.type, stream()); break;
    case CollKind::Broadcast:
      gnio::broadcast(c, send, recv, cnt, cc.type, cc.root, stream());
      break;
    case CollKind::Reduce:
      gnio::reduce(c, send, recv, cnt, cc.type, cc.op, cc.root, stream());
      break;
    default: gnio::alltoall(c, send, recv, cnt, cc.type, stream()); break;
  }
  c.synchronize(stream());
  std::vector<std::uint8_t> got(want.size());
  gnio_test::to_host(got.data(), recv_base, got.size());
  return coll_test::count_wrong(got, want, es, describe(cc, index)) != 0;
}
#endif  // GNIO_SOAK_COLL

// ---------------------------------------------------------------------------------------------

TEST(Soak, RandomRmaAndCollectives) {
  gnio::Comm& c = comm();
  const int n = c.size(), me = c.rank();
  const unsigned long long rma_ops = env_count("GNIO_SOAK_RMA_OPS", kDefaultRmaOps);
#if GNIO_SOAK_COLL
  const unsigned long long colls = env_count("GNIO_SOAK_COLLS", kDefaultColls);
#else
  const unsigned long long colls = 0;  // built without collectives (GNIO_COLL=OFF)
#endif
  const std::uint64_t seed = env_count("GNIO_SOAK_SEED", 20250101);
  const std::uint64_t per_round = static_cast<std::uint64_t>(n) * kOpsPerRound;
  const std::uint64_t rounds = (rma_ops + per_round - 1) / per_round;
  if (me == 0)
    std::printf(
        "soak: seed %llu, %llu RMA ops (%llu rounds of %d per rank), %llu collectives, %d ranks\n",
        static_cast<unsigned long long>(seed), static_cast<unsigned long long>(rounds * per_round),
        static_cast<unsigned long long>(rounds), kOpsPerRound, colls, n);
  Rng rng(seed);
  RmaState rs;
  rma_setup(rs);
#if GNIO_SOAK_COLL
  CollBuffers cb;
  coll_setup(cb);
#endif
  const auto start = std::chrono::steady_clock::now();
  auto last_report = start;
  std::uint64_t rounds_done = 0, colls_done = 0;
  std::size_t rma_failed = 0, coll_failed = 0;
  while (rounds_done < rounds || colls_done < colls) {
    // Interleave in proportion to what is left (the same choice on every rank).
    const std::uint64_t left_r = rounds - rounds_done, left_c = colls - colls_done;
    if (rng.below(left_r + left_c) < left_r) {
      std::vector<RmaOp> plan;
      for (int i = 0; i < n * kOpsPerRound; ++i) plan.push_back(draw_op(rng, n));
      rma_failed += rma_round(rs, plan, rounds_done);
      ++rounds_done;
    } else {
#if GNIO_SOAK_COLL
      const CollCase cc = draw_coll(rng, n, me);
      coll_failed += run_coll(cc, cb, colls_done);
#endif
      ++colls_done;
    }
    const auto now = std::chrono::steady_clock::now();
    if (me == 0 && std::chrono::duration<double>(now - last_report).count() >= kProgressSeconds) {
      last_report = now;
      std::printf("soak: %llu/%llu RMA ops, %llu/%llu collectives, %zu errors on rank 0, %.0f s\n",
                  static_cast<unsigned long long>(rounds_done * per_round),
                  static_cast<unsigned long long>(rounds * per_round),
                  static_cast<unsigned long long>(colls_done), colls, rma_failed + coll_failed,
                  std::chrono::duration<double>(now - start).count());
      std::fflush(stdout);
    }
  }
#if GNIO_SOAK_COLL
  coll_teardown(cb);
#endif
  rma_teardown(rs);
  // Every rank's failures, so every rank reports the job's total.
  std::vector<std::uint64_t> failed(2 * static_cast<std::size_t>(n));
  failed[2 * static_cast<std::size_t>(me)] = rma_failed;
  failed[2 * static_cast<std::size_t>(me) + 1] = coll_failed;
  c.bootstrap().allgather(failed.data(), 2 * sizeof(std::uint64_t));
  std::uint64_t total_rma = 0, total_coll = 0;
  for (int r = 0; r < n; ++r) {
    total_rma += failed[2 * static_cast<std::size_t>(r)];
    total_coll += failed[2 * static_cast<std::size_t>(r) + 1];
  }
  if (me == 0)
    std::printf(
        "soak: done: %llu RMA ops, %llu collectives in %.1f s; %llu RMA and %llu collective "
        "checks failed (seed %llu)\n",
        static_cast<unsigned long long>(rounds * per_round), colls,
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
        static_cast<unsigned long long>(total_rma), static_cast<unsigned long long>(total_coll),
        static_cast<unsigned long long>(seed));
  EXPECT_EQ(total_rma, 0u) << "failed RMA checks over all ranks (seed " << seed << ")";
  EXPECT_EQ(total_coll, 0u) << "failed collective checks over all ranks (seed " << seed << ")";
}

}  // namespace soak_test
