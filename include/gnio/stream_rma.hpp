// One-sided operations started by the host on a stream (NVSHMEM's *_on_stream): each call queues
// a small kernel that runs the device API's operation, so it is ordered with the stream's other
// work, is captured by CUDA graphs, and needs no kernel of the application.
//
//   gnio::put_on_stream(comm, dst, src, bytes, peer, stream);        // dst: symmetric
//   gnio::signal_on_stream(comm, flag, 1, gnio::SignalOp::Add, peer, stream);
//   gnio::wait_signal_on_stream(comm, flag, gnio::Cmp::Ge, 1, stream);
//
// Completion: when the queued operation has run, a put's or get's data is in place at its
// destination (the kernel completes it with quiet()), so the stream's next work, or a peer that
// sees a signal sent after it, sees the data. Arguments are checked before anything is queued
// (Error(InvalidArgument), no effect): a peer outside the communicator, a SymPtr of another
// communicator. What only the device can see (an offset past the heap) is reported like every
// device error, from Comm::synchronize/check.
#pragma once

#include <cstddef>
#include <cstdint>

#include "gnio/comm.hpp"
#include "gnio/device/device_comm.hpp"
#include "gnio/stream.hpp"

namespace gnio {

/// Copies `bytes` from `src` (memory this rank's device reads) to `dst` on `peer`.
void put_on_stream(Comm& comm, SymPtr<char> dst, const void* src, std::size_t bytes, int peer,
                   StreamRef stream);
/// Copies `bytes` of `src` on `peer` into `dst` (this rank's device memory).
void get_on_stream(Comm& comm, void* dst, SymPtr<char> src, std::size_t bytes, int peer,
                   StreamRef stream);
/// put_on_stream(), then updates `sig` on `peer` (Set or Add `value`): a peer that sees the new
/// value sees the data.
void put_signal_on_stream(Comm& comm, SymPtr<char> dst, const void* src, std::size_t bytes,
                          SymPtr<std::uint64_t> sig, std::uint64_t value, SignalOp op, int peer,
                          StreamRef stream);
/// Updates `sig` on `peer` (Set or Add `value`), after this stream's earlier operations.
void signal_on_stream(Comm& comm, SymPtr<std::uint64_t> sig, std::uint64_t value, SignalOp op,
                      int peer, StreamRef stream);
/// Holds the stream until this rank's `sig` compares true against `value` (bounded by
/// GNIO_TIMEOUT: a timeout is reported from Comm::synchronize/check, naming the word).
void wait_signal_on_stream(Comm& comm, SymPtr<std::uint64_t> sig, Cmp cmp, std::uint64_t value,
                           StreamRef stream);

}  // namespace gnio
