// Two-sided messages (gnio::Channels): messages arrive whole, in order per channel, with their
// sizes, for every cooperation group, sizes from 0 B to past the slot size (several slots), depth
// 1 and many, many channels at once, from kernels and from streams (single and grouped), over
// peer memory and (registered with NODES 2) through the proxy. Every destination is poisoned
// first and every byte checked, the bytes after each message included. The failure scenarios
// (ChannelFault.*) run in process pairs of their own: a failure leaves the communicator aborted.
#include "gnio/channel.hpp"

#include <chrono>
#include <cstring>
#include <vector>

#include "common/gnio_test.hpp"

namespace channel_test {

using gnio::Block;
using gnio::Channel;
using gnio::Channels;
using gnio::DeviceChannels;
using gnio::Received;
using gnio::Status;
using gnio::Thread;
using gnio::Warp;
using gnio_test::comm;
using gnio_test::group_threads;
using gnio_test::kPoison;
using gnio_test::pattern_byte;
using gnio_test::stream;

#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
constexpr std::size_t kLarge = std::size_t{1} << 20;
#else
constexpr std::size_t kLarge = std::size_t{64} << 20;
#endif

/// The message sizes of a run: empty, tiny, around a slot of `slot` bytes, several slots.
std::vector<std::size_t> sizes_for(std::size_t slot) {
  return {0, 1, 8, 255, 256, 4097, slot - 1, slot, slot + 1, 3 * slot + 17};
}

/// Message m of `rank`: its bytes are pattern_byte(rank, i, m).
void fill_messages(std::vector<std::uint8_t>& all, const std::vector<std::size_t>& sizes,
                   const std::vector<std::size_t>& at, int rank) {
  for (std::size_t m = 0; m < sizes.size(); ++m)
    for (std::size_t i = 0; i < sizes[m]; ++i)
      all[at[m] + i] = pattern_byte(rank, i, static_cast<unsigned>(m));
}

/// Sets every channel's counters of this rank (slots sent, slots consumed, credits received) to
/// `start`, as if that many slots had gone both ways already; then every rank is ready.
void start_counters_at(gnio::Comm& c, const Channels& set, std::uint64_t start) {
  const DeviceChannels d = set.device_handle();
  const std::uint64_t pairs = static_cast<std::uint64_t>(c.size()) * d.tags;
  gnio::launch(stream(), {.grid = 1, .block = 1}, [=] GNIO_HD() {
    for (std::uint64_t i = 0; i < pairs; ++i) {
      *d.comm.local(d.sent + i) = start;
      *d.comm.local(d.consumed + i) = start;
      *d.comm.local(d.credits + i) = start;
    }
  });
  c.synchronize(stream());
  c.bootstrap().barrier();
}

/// Ring exchange inside one kernel: block 0 sends every message to the next rank, block 1
/// receives every message from the previous one into its own region (each followed by a poisoned
/// guard of 64 bytes), recording each size. `start`: the channels' counters begin there.
template <class Coop>
void exchange_in_kernel(const gnio::ChannelOptions& o, std::uint64_t start = 0) {
  gnio::Comm& c = comm();
  const int n = c.size(), me = c.rank();
  const int next = (me + 1) % n, prev = (me + n - 1) % n;
  Channels set(c, o);
  if (start) start_counters_at(c, set, start);
  const std::vector<std::size_t> sizes = sizes_for(o.max_message);
  std::vector<std::size_t> at(sizes.size());
  std::size_t total = 0;
  for (std::size_t m = 0; m < sizes.size(); ++m) {
    at[m] = total;
    total += sizes[m] + 64;  // a guard after each message
  }
  std::vector<std::uint8_t> out(total, 0), expected(total, kPoison), in(total, kPoison);
  fill_messages(out, sizes, at, me);
  fill_messages(expected, sizes, at, prev);
  auto* src = static_cast<std::uint8_t*>(c.alloc_device(total));
  auto* dst = static_cast<std::uint8_t*>(c.alloc_device(total));
  const std::size_t count = sizes.size();
  auto* meta = static_cast<std::uint64_t*>(c.alloc_device(2 * count * sizeof(std::uint64_t)));
  gnio_test::to_device(src, out.data(), total);
  gnio_test::to_device(dst, in.data(), total);
  std::vector<std::uint64_t> meta_host(2 * count, ~0ull);
  gnio_test::to_device(meta, meta_host.data(), meta_host.size() * sizeof(std::uint64_t));
  std::uint64_t* sizes_dev = meta;
  std::uint64_t* got = meta + count;
  for (std::size_t m = 0; m < count; ++m) meta_host[m] = sizes[m];
  gnio_test::to_device(sizes_dev, meta_host.data(), count * sizeof(std::uint64_t));
  std::vector<std::uint64_t> offsets(at.begin(), at.end());
  auto* offsets_dev = static_cast<std::uint64_t*>(c.alloc_device(count * sizeof(std::uint64_t)));
  gnio_test::to_device(offsets_dev, offsets.data(), count * sizeof(std::uint64_t));

  const DeviceChannels d = set.device_handle();
  gnio::launch(stream(), {.grid = 2, .block = group_threads<Coop>()}, [=] GNIO_HD() {
    if (gnio::dev::block() == 0) {
      for (std::size_t m = 0; m < count; ++m)
        if (gnio::send<Coop>(d.channel(next, 0), src + offsets_dev[m], sizes_dev[m]) != Status::Ok)
          return;
    } else {
      for (std::size_t m = 0; m < count; ++m) {
        // Capacity: the message and its guard; the guard must stay poisoned.
        const Received r =
            gnio::recv<Coop>(d.channel(prev, 0), dst + offsets_dev[m], sizes_dev[m] + 64);
        if (Coop{}.leader()) got[m] = r.status == Status::Ok ? r.bytes : ~0ull - 1;
        if (r.status != Status::Ok) return;
      }
    }
  });
  c.synchronize(stream());
  gnio_test::to_host(in.data(), dst, total);
  gnio_test::to_host(meta_host.data(), got, count * sizeof(std::uint64_t));
  for (std::size_t m = 0; m < count; ++m)
    EXPECT_EQ(meta_host[m], sizes[m]) << "size of message " << m;
  EXPECT_EQ(gnio_test::count_wrong(in, expected, "received"), 0u);
  c.free_device(src);
  c.free_device(dst);
  c.free_device(meta);
  c.free_device(offsets_dev);
}

GNIO_KERNEL_TEST(Channel, ThreadDepth1) {
  exchange_in_kernel<Thread>({.tags = 1, .depth = 1, .max_message = 4096});
}
GNIO_KERNEL_TEST(Channel, WarpDepth4) {
  exchange_in_kernel<Warp>({.tags = 1, .depth = 4, .max_message = 64 << 10});
}
GNIO_KERNEL_TEST(Channel, BlockDepth8) {
  exchange_in_kernel<Block>({.tags = 1, .depth = 8, .max_message = 64 << 10});
}
// A depth that is not a power of two is rounded up to one (the rings are indexed by a mask).
GNIO_KERNEL_TEST(Channel, BlockDepth3SmallSlots) {
  exchange_in_kernel<Block>({.tags = 1, .depth = 3, .max_message = 1000});
}
// Low-latency packets for every slot that can take them (ll_max = the slot: every single-slot
// message and the last slot of every larger one, interleaved with full put_signal slots), and
// for none (ll_max = 0). Over the proxy (NODES 2) no slot travels as packets either way.
GNIO_KERNEL_TEST(Channel, WarpEverySlotAsPackets) {
  exchange_in_kernel<Warp>({.tags = 1, .depth = 2, .max_message = 4096, .ll_max = 4096});
}
GNIO_KERNEL_TEST(Channel, BlockNoPackets) {
  exchange_in_kernel<Block>({.tags = 1, .depth = 4, .max_message = 4096, .ll_max = 0});
}
GNIO_KERNEL_TEST(Channel, ThreadPacketsDepth1) {
  exchange_in_kernel<Thread>({.tags = 1, .depth = 1, .max_message = 300, .ll_max = 300});
}
// Slot numbers wrap: the counters start 5 slots before 2^32 (the 31-bit sequence numbers of flags
// and packets wrap there too), and every message of the run (packets, put_signal slots, messages
// of several slots) crosses it. A flag that carried (n + 1) << 32 overflowed there, and a stale
// flag then passed for the new one.
GNIO_KERNEL_TEST(Channel, SlotNumbersWrap) {
  exchange_in_kernel<Warp>({.tags = 1, .depth = 4, .max_message = 4096, .ll_max = 1024},
                           (std::uint64_t{1} << 32) - 5);
}

/// Many channels at once: kTags senders and kTags receivers (groups of type Coop, two per warp
/// for Tile<16>: both tiles of a warp call together, each on its own tag, so the credit waits of
/// the two differ), each on its own tag, kPerTag messages each; every message carries (tag,
/// index) in its bytes and its size varies.
template <class Coop>
void many_channels_at_once() {
  gnio::Comm& c = comm();
  const int n = c.size(), me = c.rank();
  const int next = (me + 1) % n, prev = (me + n - 1) % n;
  constexpr int kTags = 16;
  constexpr int kPerTag = 24;
  constexpr std::size_t kMax = 512;
  Channels set(c, {.tags = kTags, .depth = 2, .max_message = kMax});
  auto* src = static_cast<std::uint8_t*>(c.alloc_device(kTags * kMax));
  auto* dst = static_cast<std::uint8_t*>(c.alloc_device(kTags * kMax));
  auto* bad = static_cast<unsigned long long*>(c.alloc_device(sizeof(unsigned long long)));
  c.fill(bad, 0, sizeof(unsigned long long), stream());
  c.synchronize(stream());
  const DeviceChannels d = set.device_handle();
  constexpr int kGroupsPerBlock = static_cast<int>(gnio::kWarpSize / Coop::size());
  constexpr int kBlocks = kTags / kGroupsPerBlock;
  gnio::launch(stream(), {.grid = 2 * kBlocks, .block = gnio::kWarpSize}, [=] GNIO_HD() {
    const int group = static_cast<int>(gnio::dev::thread() / Coop::size());
    const int tag = static_cast<int>(gnio::dev::block()) % kBlocks * kGroupsPerBlock + group;
    const bool sender = gnio::dev::block() < static_cast<unsigned>(kBlocks);
    std::uint8_t* mine = (sender ? src : dst) + tag * kMax;
    const Coop w;
    for (int k = 0; k < kPerTag; ++k) {
      const std::size_t bytes = 1 + (static_cast<std::size_t>(k) * 37 + tag * 11) % kMax;
      if (sender) {
        for (std::size_t i = w.rank(); i < bytes; i += w.size())
          mine[i] = pattern_byte(me, i, static_cast<unsigned>(tag * 1000 + k));
        w.sync();
        if (gnio::send<Coop>(d.channel(next, tag), mine, bytes) != Status::Ok) return;
      } else {
        const Received r = gnio::recv<Coop>(d.channel(prev, tag), mine, kMax);
        unsigned long long wrong = r.status != Status::Ok || r.bytes != bytes;
        for (std::size_t i = w.rank(); !wrong && i < bytes; i += w.size())
          wrong += mine[i] != pattern_byte(prev, i, static_cast<unsigned>(tag * 1000 + k));
        if (w.any(wrong != 0) && w.leader())
          gnio::dev::atomic_fetch_add(bad, 1ull, gnio::dev::Order::Relaxed);
        if (r.status != Status::Ok) return;
        w.sync();  // every lane checked before the next message lands in the buffer
      }
    }
  });
  c.synchronize(stream());
  unsigned long long wrong = 1;
  gnio_test::to_host(&wrong, bad, sizeof(wrong));
  EXPECT_EQ(wrong, 0u) << "messages with a wrong size or wrong bytes";
  c.free_device(src);
  c.free_device(dst);
  c.free_device(bad);
}

GNIO_KERNEL_TEST(Channel, ManyChannelsAtOnce) {
  many_channels_at_once<Warp>();
}
// Two tiles per warp, each with its own channel (on the host backend they share the warp's
// barrier: every send must cost both the same number of barriers, whatever credit each saw).
GNIO_KERNEL_TEST(Channel, ManyChannelsTwoTilesPerWarp) {
  many_channels_at_once<gnio::Tile<16>>();
}

/// try_recv: nothing there gives arrived == false (no wait); a sent message is then taken whole.
GNIO_KERNEL_TEST(Channel, TryRecv) {
  gnio::Comm& c = comm();
  const int n = c.size(), me = c.rank();
  const int next = (me + 1) % n, prev = (me + n - 1) % n;
  Channels set(c, {.tags = 1, .depth = 2, .max_message = 64});
  auto* words = static_cast<std::uint64_t*>(c.alloc_device(4 * sizeof(std::uint64_t)));
  const DeviceChannels d = set.device_handle();
  gnio::launch(stream(), {.grid = 1, .block = 1}, [=] GNIO_HD() {
    std::uint64_t none = 0xABCD;
    const Received early = gnio::try_recv(d.channel(prev, 0), &none, sizeof(none));
    words[0] = early.arrived ? 1 : 0;
  });
  c.synchronize(stream());
  c.bootstrap().barrier();  // every rank tried before any sends
  gnio::launch(stream(), {.grid = 1, .block = 1}, [=] GNIO_HD() {
    const std::uint64_t v = 0x1000 + static_cast<std::uint64_t>(me);
    std::uint64_t* staged = words + 3;
    *staged = v;
    (void)gnio::send(d.channel(next, 0), staged, sizeof(v));
    Received r;
    std::uint64_t got = 0;
    while (!(r = gnio::try_recv(d.channel(prev, 0), &got, sizeof(got))).arrived &&
           r.status == Status::Ok) {
    }
    words[1] = r.bytes;
    words[2] = got;
  });
  c.synchronize(stream());
  std::uint64_t host[3] = {};
  gnio_test::to_host(host, words, sizeof(host));
  EXPECT_EQ(host[0], 0u) << "try_recv took a message nobody sent";
  EXPECT_EQ(host[1], sizeof(std::uint64_t));
  EXPECT_EQ(host[2], 0x1000u + static_cast<unsigned>(prev));
  c.free_device(words);
}

/// The host's stream operations: each rank sends sizes 0 B .. kLarge to the next rank and
/// receives from the previous one, as a group (the large messages exceed the ring many times
/// over: without the group both ranks would wait in their sends); then the same one at a time,
/// receives queued on a second stream. Received sizes land in device memory.
TEST(Channel, StreamSendRecvGrouped) {
  gnio::Comm& c = comm();
  const int n = c.size(), me = c.rank();
  const int next = (me + 1) % n, prev = (me + n - 1) % n;
  Channels set(c, {.tags = 1, .depth = 4, .max_message = 256 << 10});
  const std::vector<std::size_t> sizes = {0, 1, 4097, std::size_t{1} << 20, kLarge};
  auto* sizes_dev = static_cast<std::size_t*>(c.alloc_device(sizes.size() * sizeof(std::size_t)));
  for (std::size_t k = 0; k < sizes.size(); ++k) {
    const std::size_t bytes = sizes[k];
    std::vector<std::uint8_t> out(bytes), in(bytes + 64, kPoison), expected(bytes + 64, kPoison);
    for (std::size_t i = 0; i < bytes; ++i) {
      out[i] = pattern_byte(me, i, static_cast<unsigned>(k));
      expected[i] = pattern_byte(prev, i, static_cast<unsigned>(k));
    }
    auto* src = static_cast<std::uint8_t*>(c.alloc_device(bytes + 1));
    auto* dst = static_cast<std::uint8_t*>(c.alloc_device(bytes + 64));
    gnio_test::to_device(src, out.data(), bytes);
    gnio_test::to_device(dst, in.data(), bytes + 64);
    set.group_start();
    set.send(src, bytes, next, stream());
    set.recv(dst, bytes + 64, prev, stream(), 0, sizes_dev + k);
    set.group_end(stream());
    c.synchronize(stream());
    gnio_test::to_host(in.data(), dst, bytes + 64);
    EXPECT_EQ(gnio_test::count_wrong(in, expected, "grouped message of " + std::to_string(bytes)),
              0u);
    c.free_device(src);
    c.free_device(dst);
  }
  std::vector<std::size_t> got(sizes.size(), 0);
  gnio_test::to_host(got.data(), sizes_dev, got.size() * sizeof(std::size_t));
  EXPECT_EQ(got, sizes);

  // One at a time: receives on their own stream, sends of what fits the ring (no group needed).
  gnio::Stream rx(c);
  std::vector<std::uint8_t> out(1000), in(1000 + 64, kPoison), expected(1000 + 64, kPoison);
  for (std::size_t i = 0; i < 1000; ++i) {
    out[i] = pattern_byte(me, i, 77);
    expected[i] = pattern_byte(prev, i, 77);
  }
  auto* src = static_cast<std::uint8_t*>(c.alloc_device(1000));
  auto* dst = static_cast<std::uint8_t*>(c.alloc_device(1064));
  gnio_test::to_device(src, out.data(), 1000);
  gnio_test::to_device(dst, in.data(), 1064);
  set.recv(dst, 1064, prev, rx);
  set.send(src, 1000, next, stream());
  c.synchronize(stream());
  c.synchronize(rx);
  gnio_test::to_host(in.data(), dst, 1064);
  EXPECT_EQ(gnio_test::count_wrong(in, expected, "single message"), 0u);
  c.free_device(src);
  c.free_device(dst);
  c.free_device(sizes_dev);
}

/// Host-side bad input is refused at once, with nothing queued and the set still usable.
TEST(Channel, HostBadInputIsInvalidArgument) {
  gnio::Comm& c = comm();
  Channels set(c, {.tags = 2, .depth = 2, .max_message = 64});
  auto* buf = static_cast<std::uint8_t*>(c.alloc_device(64));
  auto expect_invalid = [](auto fn, const char* what) {
    try {
      fn();
      ADD_FAILURE() << what << ": no error";
    } catch (const gnio::Error& e) {
      EXPECT_EQ(e.error_class(), gnio::ErrorClass::InvalidArgument) << e.what();
    }
  };
  expect_invalid([&] { set.send(buf, 8, c.size(), stream()); }, "peer == size");
  expect_invalid([&] { set.send(buf, 8, -1, stream()); }, "peer -1");
  expect_invalid([&] { set.recv(buf, 8, 0, stream(), 2); }, "tag == tags");
  expect_invalid([&] { set.send(nullptr, 8, 0, stream()); }, "null source");
  expect_invalid([&] { set.group_end(stream()); }, "group_end without a group");
  set.group_start();
  expect_invalid([&] { set.group_start(); }, "nested group");
  for (std::size_t k = 0; k < Channels::kMaxGroup; ++k) set.recv(buf, 8, 0, stream());
  expect_invalid([&] { set.recv(buf, 8, 0, stream()); }, "a group past its limit");
  // A refused operation drops its group: nothing of it was queued, and no group is open.
  expect_invalid([&] { set.group_end(stream()); }, "group_end after a dropped group");
  set.group_start();
  expect_invalid([&] { set.send(buf, 8, 0, stream(), 5); }, "bad tag inside a group");
  expect_invalid([&] { set.group_end(stream()); }, "group_end after a dropped group (2)");
  expect_invalid([&] { Channels bad(c, {.tags = 0}); }, "tags = 0");
  expect_invalid([&] { Channels bad(c, {.depth = 0}); }, "depth = 0");
  c.free_device(buf);
}

// ---- failure scenarios (own processes) ----

/// A message larger than the receiver's buffer: InvalidArgument naming both sizes, nothing written
/// past the buffer.
GNIO_KERNEL_TEST(ChannelFault, MessageLargerThanBuffer) {
  gnio::Comm& c = comm();
  const int me = c.rank();
  Channels set(c, {.tags = 1, .depth = 2, .max_message = 256});
  auto* buf = static_cast<std::uint8_t*>(c.alloc_device(1024));
  std::vector<std::uint8_t> poison(1024, kPoison);
  gnio_test::to_device(buf, poison.data(), poison.size());
  const DeviceChannels d = set.device_handle();
  std::string message;
  try {
    gnio::launch(stream(), {.grid = 1, .block = 32}, [=] GNIO_HD() {
      if (me == 0)
        (void)gnio::send<Warp>(d.channel(1, 0), buf, 600);  // three slots
      else if (me == 1)
        (void)gnio::recv<Warp>(d.channel(0, 0), buf, 300);
    });
    c.synchronize(stream());
    if (me == 1) ADD_FAILURE() << "no error for a 600-byte message into 300 bytes";
  } catch (const gnio::Error& e) {
    EXPECT_EQ(e.error_class(), gnio::ErrorClass::InvalidArgument) << e.what();
    message = e.what();
  }
  if (me == 1) {
    EXPECT_NE(message.find("300"), std::string::npos) << message;
    EXPECT_NE(message.find("512"), std::string::npos) << message;  // the size when it overflowed
    EXPECT_NE(message.find("recv"), std::string::npos) << message;
    // The communicator failed: synchronize throws again, after the copy ran.
    std::vector<std::uint8_t> after(1024, 0);
    c.copy(after.data(), buf, after.size(), stream());
    try {
      c.synchronize(stream());
    } catch (const gnio::Error&) {
    }
    for (std::size_t i = 300; i < after.size(); ++i)
      if (after[i] != kPoison) {
        ADD_FAILURE() << "byte " << i << " written past the 300-byte buffer";
        break;
      }
  }
}

/// A receive nobody sends to (an unmatched tag or peer) ends with Timeout within GNIO_TIMEOUT,
/// naming recv and the peer it waited for.
GNIO_KERNEL_TEST(ChannelFault, UnmatchedReceiveTimesOut) {
  gnio::Comm& c = comm();
  const int me = c.rank();
  Channels set(c, {.tags = 2, .depth = 2, .max_message = 64});
  auto* buf = static_cast<std::uint8_t*>(c.alloc_device(64));
  const DeviceChannels d = set.device_handle();
  const auto start = std::chrono::steady_clock::now();
  std::string message;
  try {
    gnio::launch(stream(), {.grid = 1, .block = 1}, [=] GNIO_HD() {
      if (me == 0) (void)gnio::send(d.channel(1, 0), buf, 8);   // tag 0
      if (me == 1) (void)gnio::recv(d.channel(0, 1), buf, 64);  // tag 1: never comes
    });
    c.synchronize(stream());
  } catch (const gnio::Error& e) {
    message = e.what();
  }
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (me == 1) {
    EXPECT_NE(message.find("Timeout"), std::string::npos) << message;
    EXPECT_NE(message.find("recv"), std::string::npos) << message;
    EXPECT_LT(took, 30.0);
  }
}

}  // namespace channel_test
