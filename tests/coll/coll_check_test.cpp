// GNIO_CHECK=1 (set by the test registration): every host collective compares its arguments
// across ranks before enqueuing anything. Each test makes one rank disagree (count, operator,
// type, root, a skipped call, alltoallv pairs, an argument only that rank rejects), checks that
// every rank throws InvalidArgument naming the ranks and fields, that nothing was written, and
// that the communicator still runs a correct allreduce afterwards. Runs on 2 and 3 ranks.
#include <cstdio>
#include <string>
#include <vector>

#include "coll/coll_test_util.hpp"
#include "gnio/bootstrap.hpp"
#include "gnio/error.hpp"

namespace coll_test {
namespace {

using gnio_test::comm;
using gnio_test::stream;

constexpr std::size_t kCount = 1000;
constexpr std::size_t kBytes = 8 * kCount * 8;  // f64/i64 x count x up to 8 ranks

/// Two private buffers, poisoned before every call.
struct Buffers {
  char* send = nullptr;
  char* recv = nullptr;
  Buffers() {
    send = static_cast<char*>(comm().alloc_device(kBytes));
    recv = static_cast<char*>(comm().alloc_device(kBytes));
    poison();
  }
  ~Buffers() {
    comm().free_device(send);
    comm().free_device(recv);
  }
  void poison() {
    const std::vector<std::uint8_t> p(kBytes, kPoison);
    gnio_test::to_device(send, p.data(), kBytes);
    gnio_test::to_device(recv, p.data(), kBytes);
  }
  /// True when recv still holds nothing but the poison (the rejected call wrote nothing).
  bool recv_untouched() {
    comm().synchronize(stream());
    std::vector<std::uint8_t> got(kBytes);
    gnio_test::to_host(got.data(), recv, kBytes);
    for (std::uint8_t b : got)
      if (b != kPoison) return false;
    return true;
  }
};

/// Runs `call`, which must throw InvalidArgument on this rank; returns the message ("" and a
/// failure when it did not throw).
template <class F>
std::string expect_rejected(const char* what, F&& call) {
  try {
    call();
    ADD_FAILURE() << what << ": no error on rank " << comm().rank();
  } catch (const gnio::Error& e) {
    EXPECT_EQ(e.error_class(), gnio::ErrorClass::InvalidArgument) << what << ": " << e.what();
    std::printf("%s: %s\n", what, e.message().c_str());  // the message users would see
    return e.message();
  }
  return "";
}

/// The call number "#N" a GNIO_CHECK message names (0 when it names none).
unsigned long long call_number(const std::string& message) {
  const std::size_t at = message.find('#');
  return at == std::string::npos ? 0 : std::stoull(message.substr(at + 1));
}

/// Every rank whose message names a call number ("#N") names the same one: the ranks failed at
/// the same exchange and stayed aligned. Collective.
void expect_same_call_number(const std::string& message) {
  const int n = comm().size();
  std::vector<unsigned long long> numbers(static_cast<std::size_t>(n));
  numbers[static_cast<std::size_t>(comm().rank())] = call_number(message);
  comm().bootstrap().allgather(numbers.data(), sizeof(unsigned long long));
  unsigned long long seen = 0;
  for (int r = 0; r < n; ++r) {
    const unsigned long long x = numbers[static_cast<std::size_t>(r)];
    if (x == 0) continue;
    if (seen == 0) seen = x;
    EXPECT_EQ(x, seen) << "rank " << r << " reported another call number";
  }
  EXPECT_GT(seen, 0u) << message;
}

void expect_contains(const std::string& message, const std::string& part) {
  EXPECT_NE(message.find(part), std::string::npos)
      << "rank " << comm().rank() << ": '" << part << "' is not in: " << message;
}

/// A correct allreduce after the rejected call: exact results on every rank.
void expect_allreduce_works(Buffers& b) {
  const int n = comm().size(), me = comm().rank();
  const DataType t = DataType::I32;
  const std::size_t es = gnio::size_of(t);
  std::vector<std::uint8_t> in(kCount * es), want(kCount * es), got(kCount * es);
  for (std::size_t i = 0; i < kCount; ++i) {
    input_element(t, RedOp::Sum, me, i, in.data() + i * es);
    expected_reduction(t, RedOp::Sum, n, i, want.data() + i * es);
  }
  gnio_test::to_device(b.send, in.data(), in.size());
  gnio::allreduce(comm(), b.send, b.recv, kCount, t, RedOp::Sum, stream());
  comm().synchronize(stream());
  gnio_test::to_host(got.data(), b.recv, got.size());
  EXPECT_EQ(count_wrong(got, want, es, "allreduce after a rejected call"), 0u);
}

int last() {
  return comm().size() - 1;
}
std::string rank_str(int r) {
  return "rank " + std::to_string(r);
}

TEST(CollCheck, CorrectCallsPass) {
  Buffers b;
  const int n = comm().size();
  for (int k = 0; k < 3; ++k) expect_allreduce_works(b);
  // Every collective, including a count-0 call, goes through the check.
  gnio::reduce_scatter(comm(), b.send, b.recv, 10, DataType::F32, RedOp::Max, stream());
  gnio::allgather(comm(), b.send, b.recv, 10, DataType::U8, stream());
  gnio::broadcast(comm(), b.send, b.recv, 10, DataType::F64, n - 1, stream());
  gnio::reduce(comm(), b.send, b.recv, 10, DataType::I64, RedOp::BitOr, 0, stream());
  gnio::alltoall(comm(), b.send, b.recv, 10, DataType::BF16, stream());
  gnio::allreduce(comm(), b.send, b.recv, 0, DataType::F32, RedOp::Sum, stream());
  std::vector<std::size_t> counts(static_cast<std::size_t>(n), 3),
      displs(static_cast<std::size_t>(n));
  for (int q = 0; q < n; ++q) displs[static_cast<std::size_t>(q)] = static_cast<std::size_t>(q) * 4;
  gnio::alltoallv(comm(), b.send, counts, displs, b.recv, counts, displs, DataType::F32, stream());
  comm().synchronize(stream());
  expect_allreduce_works(b);
}

TEST(CollCheck, MismatchedCount) {
  Buffers b;
  const std::size_t count = comm().rank() == last() ? kCount + 1 : kCount;
  const std::string m = expect_rejected("count", [&] {
    gnio::allreduce(comm(), b.send, b.recv, count, DataType::F32, RedOp::Sum, stream());
  });
  expect_contains(m, "allreduce #");
  expect_contains(m, rank_str(last()) + " passed count 1001");
  expect_contains(m, "passed count 1000");
  expect_contains(m, "nothing was enqueued");
  if (comm().size() == 3)
    expect_contains(m, "rank 2 passed count 1001, ranks 0,1 passed count 1000");
  expect_same_call_number(m);
  EXPECT_TRUE(b.recv_untouched());
  expect_allreduce_works(b);
}

TEST(CollCheck, MismatchedOperator) {
  Buffers b;
  const RedOp op = comm().rank() == 0 ? RedOp::Max : RedOp::Sum;
  const std::string m = expect_rejected("operator", [&] {
    gnio::reduce_scatter(comm(), b.send, b.recv, 100, DataType::F32, op, stream());
  });
  expect_contains(m, "reduce_scatter #");
  expect_contains(m, "rank 0 passed max");
  expect_contains(m, "passed sum");
  expect_same_call_number(m);
  EXPECT_TRUE(b.recv_untouched());
  expect_allreduce_works(b);
}

// Same element size: without the check this would run and produce wrong data silently.
TEST(CollCheck, MismatchedType) {
  Buffers b;
  const DataType t = comm().rank() == last() ? DataType::I32 : DataType::F32;
  const std::string m =
      expect_rejected("type", [&] { gnio::allgather(comm(), b.send, b.recv, 100, t, stream()); });
  expect_contains(m, "allgather #");
  expect_contains(m, rank_str(last()) + " passed i32");
  expect_contains(m, "passed f32");
  expect_same_call_number(m);
  EXPECT_TRUE(b.recv_untouched());
  expect_allreduce_works(b);
}

TEST(CollCheck, MismatchedRoot) {
  Buffers b;
  const int root = comm().rank() == 0 ? last() : 0;
  const std::string m = expect_rejected(
      "root", [&] { gnio::broadcast(comm(), b.send, b.recv, 100, DataType::U8, root, stream()); });
  expect_contains(m, "broadcast #");
  expect_contains(m, "rank 0 passed root " + std::to_string(last()));
  expect_contains(m, "passed root 0");
  expect_same_call_number(m);
  EXPECT_TRUE(b.recv_untouched());
  expect_allreduce_works(b);
}

// The last rank skips an allreduce: its next call (a broadcast) meets the others' allreduce. Every
// rank throws at that exchange, and the calls after it line up again.
TEST(CollCheck, SkippedCall) {
  Buffers b;
  const std::string m = expect_rejected("skipped call", [&] {
    if (comm().rank() != last())
      gnio::allreduce(comm(), b.send, b.recv, kCount, DataType::F32, RedOp::Sum, stream());
    gnio::broadcast(comm(), b.send, b.recv, kCount, DataType::F32, 0, stream());
  });
  expect_contains(m, rank_str(last()) + " called broadcast");
  expect_contains(m, "called allreduce");
  expect_contains(m, "skip");
  expect_same_call_number(m);
  EXPECT_TRUE(b.recv_untouched());
  expect_allreduce_works(b);
}

// An argument only one rank rejects (a null buffer): that rank throws its own error, the others
// throw naming it, at the same call.
TEST(CollCheck, OneRankRejectsItsArguments) {
  Buffers b;
  const char* send = comm().rank() == last() ? nullptr : b.send;
  const std::string m = expect_rejected("null send on one rank", [&] {
    gnio::allreduce(comm(), send, b.recv, kCount, DataType::F32, RedOp::Sum, stream());
  });
  if (comm().rank() == last())
    expect_contains(m, "send is null");
  else
    expect_contains(m, rank_str(last()) + " rejected its own arguments");
  expect_same_call_number(m);  // the rejecting rank's own message names no call number
  EXPECT_TRUE(b.recv_untouched());
  expect_allreduce_works(b);
}

TEST(CollCheck, AlltoallvCountsDisagree) {
  Buffers b;
  const int n = comm().size(), me = comm().rank();
  std::vector<std::size_t> sc(static_cast<std::size_t>(n), 5), rc(sc), displs(sc);
  for (int q = 0; q < n; ++q) displs[static_cast<std::size_t>(q)] = static_cast<std::size_t>(q) * 8;
  if (me == 0) sc[1] = 6;  // rank 1 expects 5 from rank 0
  const std::string m = expect_rejected("alltoallv counts", [&] {
    gnio::alltoallv(comm(), b.send, sc, displs, b.recv, rc, displs, DataType::F32, stream());
  });
  expect_contains(m, "alltoallv #");
  expect_contains(m, "rank 0 sends 6 elements to rank 1, which expects 5 from it");
  expect_same_call_number(m);
  EXPECT_TRUE(b.recv_untouched());
  expect_allreduce_works(b);
}

}  // namespace
}  // namespace coll_test
