// gnio::Channels: two-sided messages between ranks, a channel per (peer, tag). Kernels send and
// receive through the device handle (<gnio/device/channel.hpp>); the host queues the same
// operations on streams (send/recv, and groups of them that progress together), which CUDA graphs
// capture like any kernel.
//
//   gnio::Channels ch(comm, {.tags = 2, .depth = 4, .max_message = 64 << 10});   // collective
//   ch.send(buf, bytes, peer, stream);                  // stream-ordered
//   ch.recv(out, capacity, peer, stream, 0, count);     // count: where the size lands
//   ch.group_start(); ch.send(...); ch.recv(...); ch.group_end(stream);   // together
//   gnio::launch(stream, dims, [d = ch.device_handle()] GNIO_HD () { gnio::send(d.channel(1, 0),
//   ...); });
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "gnio/comm.hpp"
#include "gnio/device/channel.hpp"
#include "gnio/stream.hpp"

namespace gnio {

/// The shape of a Channels set; every rank passes the same.
struct ChannelOptions {
  int tags = 1;                        ///< channels per peer pair (1..1024)
  std::uint32_t depth = 4;             ///< slots per channel: messages in flight (1..4096,
                                       ///< rounded up to a power of two)
  std::size_t max_message = 64 << 10;  ///< bytes per slot (1 B..1 GiB); larger messages take
                                       ///< several slots
  /// ll_max's default: kPacketsOnGpu bytes on the cuda backend, kPacketsOnHost on the host
  /// backend. Where packets stop paying (2 ranks on one H100, 2026-12-06, one way, packets /
  /// a copy through the ring: 4 KiB 2.70 / 3.86 us, 8 KiB 3.60 / 4.28, 16 KiB 5.38 / 4.05;
  /// 2 ranks on 2 CPU cores: 64 B even, 4 KiB 4x slower, a cell per CPU atomic).
  static constexpr std::size_t kPacketsAuto = ~std::size_t{0};
  static constexpr std::size_t kPacketsOnGpu = 8 << 10;
  static constexpr std::size_t kPacketsOnHost = 64;
  /// Messages (and the last slot of larger ones) of at most this many bytes to peers on this
  /// node travel as low-latency packets: 4 data bytes per 8-byte store, no fence (twice the
  /// bytes stored, about one fence less per message). 0..1 MiB, at most max_message (larger
  /// values are cut to it); 0: never; kPacketsAuto: by backend (above). Costs 2 x ll_max bytes
  /// per slot.
  std::size_t ll_max = kPacketsAuto;
};

/// A set of channels between every pair of ranks (and each rank and itself), in the symmetric
/// heap: each rank holds, per (peer, tag), `depth` slots of `max_message` bytes that the peer
/// sends into, and a few counters.
class Channels {
 public:
  /// Collective over all ranks, with the same options (checked: mismatches throw
  /// InvalidArgument everywhere, nothing allocated). Throws InvalidArgument for options outside
  /// their ranges.
  Channels(Comm& comm, const ChannelOptions& options = {});
  /// Frees the set's memory: collective, in the same order on every rank (close() does it
  /// earlier). Waits for this rank's queued operations first.
  ~Channels();
  Channels(const Channels&) = delete;
  Channels& operator=(const Channels&) = delete;

  /// The handle kernels take by value.
  const DeviceChannels& device_handle() const { return device_; }
  /// Same as device_handle() (its name before the convention; kept for existing code).
  const DeviceChannels& device() const { return device_; }
  /// The options in effect: as given, with ll_max resolved (never kPacketsAuto) and cut to
  /// max_message.
  const ChannelOptions& options() const { return options_; }

  /// Queues on `stream` the send of `bytes` from `buf` (device memory of this rank on GPUs, or
  /// memory any thread of this rank reads on the host backend) to `peer` on channel `tag`.
  /// Throws InvalidArgument at once for a bad peer or tag; device-side failures (a full ring that
  /// never drains, a lost peer) surface from Comm::synchronize/check.
  void send(const void* buf, std::size_t bytes, int peer, StreamRef stream, int tag = 0);
  /// Queues on `stream` the receipt of the next message from `peer` on `tag` into `buf` (at most
  /// `capacity` bytes). `received` (optional; memory the device writes: device or host-mapped)
  /// gets its size. A message larger than `capacity` is InvalidArgument from synchronize(),
  /// naming both sizes, with nothing written past `capacity`.
  void recv(void* buf, std::size_t capacity, int peer, StreamRef stream, int tag = 0,
            std::size_t* received = nullptr);
  /// Starts collecting send()/recv() calls instead of queueing each: group_end() queues them as
  /// one kernel where each runs in a block of its own, so a rank's sends and receives progress
  /// together (two ranks that send each other more than a ring holds before receiving do not
  /// deadlock). At most kMaxGroup operations per group. Not nested.
  void group_start();
  /// Queues the collected operations on `stream` (nothing when none).
  void group_end(StreamRef stream);
  /// Frees the memory now (collective); the set cannot be used afterwards. After the
  /// communicator aborted it frees nothing (the memory goes with the communicator).
  void close();

  static constexpr std::size_t kMaxGroup = 64;

  /// One queued operation (internal; what the host kernels run).
  struct Op {
    const void* src = nullptr;  ///< send: the data
    void* dst = nullptr;        ///< recv: the buffer
    std::size_t bytes = 0;      ///< send: size; recv: capacity
    std::size_t* received = nullptr;
    int peer = -1;
    int tag = 0;
    bool is_send = false;
  };

 private:
  void queue(const Op& op, StreamRef stream);
  void launch(const Op* ops, std::size_t count, StreamRef stream);

  Comm comm_;
  ChannelOptions options_;
  SymPtr<char> memory_;
  bool open_ = false;
  DeviceChannels device_;
  bool grouping_ = false;
  std::vector<Op> group_;
};

}  // namespace gnio
