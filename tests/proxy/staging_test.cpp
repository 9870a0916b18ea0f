// Staging on the host backend, direct and through bounce buffers (the GPUs' path): every byte of
// a header + data stream arrives in place whatever the chunk size, sizes around chunk boundaries
// included, with its signal applied once and its mark completed; many deliveries queued without
// waiting wrap the inbound ring and all land; read() and receive() from memory move every byte
// too; small deliveries batched together still land in their order; word_atomic gives each WordOp's
// result and old value on 4- and 8-byte words; a connection that closes mid-transfer is reported,
// not hung on.
#include "transport/proxy/staging.hpp"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "base/deadline.hpp"
#include "common/socket_pair.hpp"
#include "platform/backend.hpp"

namespace {

using gnio::Deadline;
using gnio::bootstrap::IoStatus;
using gnio::platform::WordOp;
using gnio::proxy::Staging;
constexpr auto kOut = Staging::Direction::Outbound;
constexpr auto kIn = Staging::Direction::Inbound;

using gnio_test::SocketPair;

std::uint8_t pattern(std::size_t i) {
  return static_cast<std::uint8_t>((i * 131 + 7) % 251 + 1);  // never 0, never the poison
}
constexpr std::uint8_t kPoison = 0;

struct Param {
  bool direct;
  std::size_t chunk;
  bool agent;  // inbound deliveries through the delivery agent (else a launch per batch)
};

/// Transfer sizes around the chunk boundaries, and past a megabyte unless `chunk` is tiny (then a
/// megabyte would be 100 000 stream round trips).
std::vector<std::size_t> sizes_around(std::size_t chunk) {
  std::vector<std::size_t> sizes = {0, 1, chunk - 1, chunk, chunk + 1, 2 * chunk, 3 * chunk + 5};
  if ((1u << 20) + 3 <= 64 * chunk) sizes.push_back((1u << 20) + 3);
  return sizes;
}

class StagingTest : public ::testing::TestWithParam<Param> {
 protected:
  std::unique_ptr<gnio::platform::Backend> backend = gnio::platform::make_host_backend();
};

TEST_P(StagingTest, HeaderAndDataArriveInPlace) {
  const Param p = GetParam();
  Staging sender(*backend, kOut, p.direct, p.chunk),
      receiver(*backend, kIn, p.direct, p.chunk, p.agent);
  const std::size_t chunk = p.chunk;
  auto* sig = static_cast<std::uint64_t*>(backend->alloc_device(sizeof(std::uint64_t)));
  *sig = 100;
  std::uint64_t added = 0;
  for (std::size_t bytes : sizes_around(chunk)) {
    SocketPair sp;
    auto* src = static_cast<std::uint8_t*>(backend->alloc_device(bytes + 1));
    auto* dst = static_cast<std::uint8_t*>(backend->alloc_device(bytes + 64));
    for (std::size_t i = 0; i < bytes; ++i) src[i] = pattern(i);
    std::memset(dst, kPoison, bytes + 64);
    const std::uint64_t header[2] = {0x1234, bytes};
    IoStatus sent = IoStatus::Error;
    std::thread t([&] {
      int err = 0;
      sent = sender.send(sp.fd[0], header, sizeof(header), src, bytes, Deadline::after(30), &err);
    });
    std::uint64_t got[2] = {0, 0};
    int err = 0;
    ASSERT_EQ(gnio::bootstrap::recv_all(sp.fd[1], got, sizeof(got), Deadline::after(30), &err),
              IoStatus::Ok);
    EXPECT_EQ(got[0], 0x1234u);
    EXPECT_EQ(got[1], bytes);
    const Staging::Signal signal{sig, WordOp::Add, bytes + 1};
    std::uint64_t mark = 0;
    gnio::net::SocketReader reader;
    EXPECT_EQ(
        receiver.receive(reader, sp.fd[1], dst, bytes, &signal, Deadline::after(30), &err, &mark),
        IoStatus::Ok);
    added += bytes + 1;
    EXPECT_TRUE(receiver.settle(Deadline::after(30)));
    EXPECT_GE(receiver.completed(), mark);
    EXPECT_EQ(*sig, 100 + added) << bytes << " bytes: the signal is applied exactly once";
    t.join();
    EXPECT_EQ(sent, IoStatus::Ok);
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < bytes; ++i) wrong += dst[i] != pattern(i);
    for (std::size_t i = bytes; i < bytes + 64; ++i) wrong += dst[i] != kPoison;
    EXPECT_EQ(wrong, 0u) << bytes << " bytes, chunk " << chunk;
    backend->free_device(src);
    backend->free_device(dst);
  }
  backend->free_device(sig);
}

TEST_P(StagingTest, ReadAndReceiveFromMemoryMoveEveryByte) {
  // What networks that carry whole messages use (ucx without CUDA): read() copies a source out
  // into host memory, receive() from memory lands a message's bytes, then its signal, once.
  const Param p = GetParam();
  Staging out(*backend, kOut, p.direct, p.chunk), in(*backend, kIn, p.direct, p.chunk);
  const std::size_t chunk = p.chunk;
  auto* sig = static_cast<std::uint64_t*>(backend->alloc_device(sizeof(std::uint64_t)));
  *sig = 7;
  std::uint64_t added = 0;
  for (std::size_t bytes : sizes_around(chunk)) {
    auto* src = static_cast<std::uint8_t*>(backend->alloc_device(bytes + 1));
    auto* dst = static_cast<std::uint8_t*>(backend->alloc_device(bytes + 64));
    for (std::size_t i = 0; i < bytes; ++i) src[i] = pattern(i);
    std::memset(dst, kPoison, bytes + 64);
    std::vector<std::uint8_t> host(bytes + 64, kPoison);
    out.read(host.data(), src, bytes);
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < bytes; ++i) wrong += host[i] != pattern(i);
    for (std::size_t i = bytes; i < bytes + 64; ++i) wrong += host[i] != kPoison;
    EXPECT_EQ(wrong, 0u) << "read: " << bytes << " bytes, chunk " << chunk;
    const Staging::Signal signal{sig, WordOp::Add, bytes + 1};
    std::uint64_t mark = 0;
    ASSERT_TRUE(in.receive(host.data(), dst, bytes, &signal, Deadline::after(30), &mark));
    added += bytes + 1;
    ASSERT_TRUE(in.settle(Deadline::after(30)));
    EXPECT_GE(in.completed(), mark);
    EXPECT_EQ(*sig, 7 + added) << bytes << " bytes: the signal is applied exactly once";
    wrong = 0;
    for (std::size_t i = 0; i < bytes; ++i) wrong += dst[i] != pattern(i);
    for (std::size_t i = bytes; i < bytes + 64; ++i) wrong += dst[i] != kPoison;
    EXPECT_EQ(wrong, 0u) << "receive: " << bytes << " bytes, chunk " << chunk;
    backend->free_device(src);
    backend->free_device(dst);
  }
  backend->free_device(sig);
}

TEST_P(StagingTest, ManyDeliveriesInFlightAllLand) {
  // Pieces of a third of a chunk (and odd sizes), queued back to back without settling: the
  // inbound ring wraps many times, and reserve() must wait for completed pieces, never overwrite
  // a live one.
  const Param p = GetParam();
  Staging receiver(*backend, kIn, p.direct, p.chunk, p.agent);
  const std::size_t piece = p.chunk / 3 + 1, count = 200, stride = piece + 5;
  auto* dst = static_cast<std::uint8_t*>(backend->alloc_device(count * stride));
  auto* sig = static_cast<std::uint64_t*>(backend->alloc_device(sizeof(std::uint64_t)));
  std::memset(dst, kPoison, count * stride);
  *sig = 0;
  SocketPair sp;
  std::thread peer([&] {
    std::vector<std::uint8_t> data(count * piece);
    for (std::size_t i = 0; i < data.size(); ++i) data[i] = pattern(i);
    int err = 0;
    EXPECT_EQ(gnio::bootstrap::send_all(sp.fd[0], data.data(), data.size(), nullptr, 0,
                                        Deadline::after(30), &err),
              IoStatus::Ok);
  });
  std::uint64_t last = 0;
  gnio::net::SocketReader reader;  // one for the stream of pieces, as a proxy's connection has
  for (std::size_t k = 0; k < count; ++k) {
    const Staging::Signal signal{sig, WordOp::Store, k + 1};
    int err = 0;
    std::uint64_t mark = 0;
    ASSERT_EQ(receiver.receive(reader, sp.fd[1], dst + k * stride, piece, &signal,
                               Deadline::after(30), &err, &mark),
              IoStatus::Ok);
    EXPECT_GT(mark, last);  // marks grow
    last = mark;
  }
  peer.join();
  ASSERT_TRUE(receiver.settle(Deadline::after(30)));
  EXPECT_EQ(receiver.completed(), last);
  EXPECT_EQ(*sig, count);  // the last signal is the one in place
  std::size_t wrong = 0;
  for (std::size_t k = 0; k < count; ++k)
    for (std::size_t i = 0; i < stride; ++i)
      wrong += dst[k * stride + i] != (i < piece ? pattern(k * piece + i) : kPoison);
  EXPECT_EQ(wrong, 0u);
  backend->free_device(dst);
  backend->free_device(sig);
}

TEST_P(StagingTest, SmallDeliveriesLandInTheOrderTheyCame) {
  // Small deliveries travel in batches whose data lands before any of their signals: a later
  // put onto an earlier signal's word, and later puts onto the same bytes, must still win; a
  // signal onto data put just before it comes after that data. flush() alone completes them
  // (what the proxy's receiver relies on between turns).
  const Param p = GetParam();
  Staging receiver(*backend, kIn, p.direct, p.chunk, p.agent);
  constexpr std::size_t kSlots = 10, kRounds = 300;
  auto* slots = static_cast<std::uint64_t*>(backend->alloc_device(kSlots * sizeof(std::uint64_t)));
  auto* words = static_cast<std::uint64_t*>(backend->alloc_device(3 * sizeof(std::uint64_t)));
  for (std::size_t i = 0; i < kSlots; ++i) slots[i] = kPoison;
  std::uint64_t* count = &words[0];  // counts every round's signal
  std::uint64_t* signal_then_put = &words[1];
  std::uint64_t* put_then_signal = &words[2];
  *count = *signal_then_put = *put_then_signal = 0;
  auto put = [&](std::uint64_t* dst, std::uint64_t value, const Staging::Signal* signal) {
    std::uint64_t mark = 0;
    ASSERT_TRUE(
        receiver.receive(&value, dst, dst ? sizeof(value) : 0, signal, Deadline::after(30), &mark));
  };
  for (std::size_t k = 0; k < kRounds; ++k) {
    const Staging::Signal counted{count, WordOp::Add, 1};
    put(&slots[k % kSlots], 1000 + k, &counted);
    if (k % 7 == 3) {
      const Staging::Signal store{signal_then_put, WordOp::Store, 5000 + k};
      put(nullptr, 0, &store);
      put(signal_then_put, 9000 + k, nullptr);  // lands after the signal before it
      put(put_then_signal, 7000 + k, nullptr);
      const Staging::Signal after{put_then_signal, WordOp::Add, 1};
      put(nullptr, 0, &after);  // applies to the data put just before
    }
    // Handed over mid-batch now and then (the agent may take entries of two hand-overs at once).
    if (k % 5 == 2) receiver.flush();
  }
  receiver.flush();
  const Deadline deadline = Deadline::after(30);
  while (receiver.completed() < receiver.issued() && !deadline.expired()) std::this_thread::yield();
  EXPECT_EQ(receiver.completed(), receiver.issued()) << "flush() did not complete the batch";
  EXPECT_EQ(*count, kRounds);
  for (std::size_t i = 0; i < kSlots; ++i) {
    const std::size_t last = (kRounds - 1) / kSlots * kSlots + i;  // the last round writing slot i
    EXPECT_EQ(slots[i], 1000 + (last < kRounds ? last : last - kSlots)) << "slot " << i;
  }
  const std::size_t last7 = (kRounds - 1 - 3) / 7 * 7 + 3;
  EXPECT_EQ(*signal_then_put, 9000 + last7);
  EXPECT_EQ(*put_then_signal, 7000 + last7 + 1);
  backend->free_device(slots);
  backend->free_device(words);
}

TEST_P(StagingTest, MoreSmallDeliveriesThanTheAgentRingHoldsAllLand) {
  // Eight times the delivery agent's ring without a pause: the publisher must find room again
  // each time the ring fills (it reads the agent's progress only then) and never overwrite an
  // entry the agent has not taken.
  const Param p = GetParam();
  Staging receiver(*backend, kIn, p.direct, p.chunk, p.agent);
  const std::size_t count = 8 * gnio::platform::kAgentSlots + 5;
  auto* slots = static_cast<std::uint64_t*>(backend->alloc_device(count * sizeof(std::uint64_t)));
  auto* counted = static_cast<std::uint64_t*>(backend->alloc_device(sizeof(std::uint64_t)));
  for (std::size_t i = 0; i < count; ++i) slots[i] = kPoison;
  *counted = 0;
  for (std::size_t k = 0; k < count; ++k) {
    const std::uint64_t value = 3 * k + 1;
    const Staging::Signal signal{counted, WordOp::Add, 1};
    std::uint64_t mark = 0;
    ASSERT_TRUE(
        receiver.receive(&value, &slots[k], sizeof(value), &signal, Deadline::after(30), &mark));
  }
  ASSERT_TRUE(receiver.settle(Deadline::after(30)));
  EXPECT_EQ(*counted, count);
  std::size_t wrong = 0;
  for (std::size_t k = 0; k < count; ++k) wrong += slots[k] != 3 * k + 1;
  EXPECT_EQ(wrong, 0u);
  backend->free_device(slots);
  backend->free_device(counted);
}

template <class T>
void check_word_ops(Staging& s, T* w) {
  const T big = static_cast<T>(~T{0} - 5);  // exercises the full width
  *w = big;
  EXPECT_EQ(s.word_atomic(w, sizeof(T), WordOp::Load, 0, 0), static_cast<std::uint64_t>(big));
  EXPECT_EQ(s.word_atomic(w, sizeof(T), WordOp::Add, 7, 0), static_cast<std::uint64_t>(big));
  EXPECT_EQ(*w, static_cast<T>(big + 7));  // wraps at the word's width
  EXPECT_EQ(s.word_atomic(w, sizeof(T), WordOp::Store, 42, 0),
            static_cast<std::uint64_t>(T(big + 7)));
  EXPECT_EQ(*w, T{42});
  EXPECT_EQ(s.word_atomic(w, sizeof(T), WordOp::Exchange, 9, 0), 42u);
  EXPECT_EQ(*w, T{9});
  EXPECT_EQ(s.word_atomic(w, sizeof(T), WordOp::CompareSwap, 11, 8), 9u);  // fails: 9 != 8
  EXPECT_EQ(*w, T{9});
  EXPECT_EQ(s.word_atomic(w, sizeof(T), WordOp::CompareSwap, 11, 9), 9u);  // succeeds
  EXPECT_EQ(*w, T{11});
}

TEST_P(StagingTest, WordAtomicsGiveResultAndOldValue) {
  const Param p = GetParam();
  Staging s(*backend, kIn, p.direct, p.chunk, p.agent);
  auto* words = static_cast<std::uint64_t*>(backend->alloc_device(2 * sizeof(std::uint64_t)));
  check_word_ops(s, reinterpret_cast<std::uint32_t*>(words));
  check_word_ops(s, words + 1);
  backend->free_device(words);
}

TEST_P(StagingTest, ConnectionClosedMidDataIsReported) {
  const Param p = GetParam();
  Staging receiver(*backend, kIn, p.direct, p.chunk, p.agent);
  SocketPair sp;
  const std::size_t bytes = 4 * p.chunk + 3;
  // More than a chunk arrives (so a copy is pending when the connection ends), then the peer
  // closes; from a thread, as the socket buffer may hold less than a chunk.
  std::thread peer([&] {
    std::vector<std::uint8_t> part(p.chunk + 1, 0x5a);
    int err = 0;
    EXPECT_EQ(gnio::bootstrap::send_all(sp.fd[0], part.data(), part.size(), nullptr, 0,
                                        Deadline::after(30), &err),
              IoStatus::Ok);
    ::close(sp.fd[0]);
    sp.fd[0] = -1;
  });
  int err = 0;
  auto* dst = static_cast<std::uint8_t*>(backend->alloc_device(bytes));
  std::uint64_t mark = 0;
  gnio::net::SocketReader reader;
  EXPECT_EQ(
      receiver.receive(reader, sp.fd[1], dst, bytes, nullptr, Deadline::after(30), &err, &mark),
      IoStatus::Closed);
  peer.join();
  EXPECT_TRUE(receiver.settle(Deadline::after(30)));  // what was queued still lands
  backend->free_device(dst);
}

TEST_P(StagingTest, LargeAndSmallDeliveriesKeepTheirOrder) {
  // Large pieces go through a stream (the copy engine on GPUs), small ones in batches (through the
  // delivery agent, or a launch each): a small put onto bytes a large one wrote just before must
  // land after it, a large one after a small one too, and each large put's signal after its data.
  const Param p = GetParam();
  Staging receiver(*backend, kIn, p.direct, p.chunk, p.agent);
  constexpr std::size_t kWords = 2048, kRounds = 40;  // 16 KiB: past a batch's 4 KiB
  auto* buf = static_cast<std::uint64_t*>(backend->alloc_device(kWords * sizeof(std::uint64_t)));
  auto* count = static_cast<std::uint64_t*>(backend->alloc_device(sizeof(std::uint64_t)));
  for (std::size_t i = 0; i < kWords; ++i) buf[i] = kPoison;
  *count = 0;
  std::vector<std::uint64_t> large(kWords);
  for (std::size_t k = 0; k < kRounds; ++k) {
    for (std::size_t i = 0; i < kWords; ++i) large[i] = k * 100000 + i + 1;
    const Staging::Signal counted{count, WordOp::Add, 1};
    std::uint64_t mark = 0;
    ASSERT_TRUE(receiver.receive(large.data(), buf, sizeof(std::uint64_t) * kWords, &counted,
                                 Deadline::after(30), &mark));
    if (k % 2 == 0) {  // a small put onto the first word, after the large one
      const std::uint64_t small = 900000 + k;
      ASSERT_TRUE(
          receiver.receive(&small, buf, sizeof(small), nullptr, Deadline::after(30), &mark));
    }
  }
  ASSERT_TRUE(receiver.settle(Deadline::after(30)));
  EXPECT_EQ(*count, kRounds);
  const std::size_t last = kRounds - 1;  // odd: its large put is the last writer of every word
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < kWords; ++i) wrong += buf[i] != last * 100000 + i + 1;
  EXPECT_EQ(wrong, 0u);
  // One more small put last: it wins over the large put before it.
  const std::uint64_t small = 424242;
  std::uint64_t mark = 0;
  ASSERT_TRUE(receiver.receive(&small, buf, sizeof(small), nullptr, Deadline::after(30), &mark));
  ASSERT_TRUE(receiver.settle(Deadline::after(30)));
  EXPECT_EQ(buf[0], small);
  EXPECT_EQ(buf[1], last * 100000 + 2);
  backend->free_device(buf);
  backend->free_device(count);
}

TEST_P(StagingTest, AgentStopsWhenIdleAndStartsAgain) {
  // idle() stops the delivery agent only once everything landed and its idle spell passed; a
  // delivery after that starts it again (and lands).
  const Param p = GetParam();
  Staging receiver(*backend, kIn, p.direct, p.chunk, p.agent);
  auto* words = static_cast<std::uint64_t*>(backend->alloc_device(2 * sizeof(std::uint64_t)));
  words[0] = words[1] = 0;
  for (int round = 0; round < 3; ++round) {
    const std::uint64_t v = 77 + round;
    const Staging::Signal counted{&words[1], WordOp::Add, 1};
    std::uint64_t mark = 0;
    ASSERT_TRUE(receiver.receive(&v, &words[0], sizeof(v), &counted, Deadline::after(30), &mark));
    receiver.idle();  // too early: in flight or within the spell; must not lose the delivery
    ASSERT_TRUE(receiver.settle(Deadline::after(30)));
    EXPECT_EQ(words[0], v);
    EXPECT_EQ(words[1], static_cast<std::uint64_t>(round + 1));
    std::this_thread::sleep_for(Staging::kAgentIdleSpell + std::chrono::milliseconds(5));
    receiver.idle();  // stops it
  }
  backend->free_device(words);
}

INSTANTIATE_TEST_SUITE_P(Paths, StagingTest,
                         ::testing::Values(Param{true, 4096, false}, Param{false, 8, false},
                                           Param{false, 4096, false},
                                           Param{false, 256 * 1024, false}, Param{false, 8, true},
                                           Param{false, 4096, true},
                                           Param{false, 256 * 1024, true}),
                         [](const ::testing::TestParamInfo<Param>& i) {
                           return std::string(i.param.direct ? "Direct" : "Staged") +
                                  std::to_string(i.param.chunk) + (i.param.agent ? "Agent" : "");
                         });

}  // namespace
