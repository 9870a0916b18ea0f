// Host-started one-sided operations on streams: one small kernel per call running the device
// API. Compiled by nvcc when the cuda backend is built (the kernels run on GPUs), else by the C++
// compiler (host streams only).
#include "gnio/stream_rma.hpp"

#include "base/fail.hpp"
#include "gnio/launch.hpp"

namespace gnio {

namespace {

enum class Kind : std::uint32_t { Put, Get, PutSignal, Signal, Wait };

/// One operation, run by one block (a GPU block of 256 threads copies at the link's speed; the
/// host backend's block is one CPU thread).
struct RmaKernel {
  DeviceComm dc;
  Kind kind;
  SymPtr<char> remote;  ///< put/put_signal: destination; get: source
  char* local;          ///< put/put_signal: source; get: destination
  std::size_t bytes;
  SymPtr<std::uint64_t> sig;
  std::uint64_t value;
  SignalOp op;
  Cmp cmp;
  int peer;

  GNIO_HD_INLINE void operator()() const {
    switch (kind) {
      case Kind::Put: dc.put<Block>(remote, local, bytes, peer); break;
      case Kind::Get: dc.get<Block>(local, remote, bytes, peer); break;
      case Kind::PutSignal: dc.put_signal<Block>(remote, local, bytes, sig, value, op, peer); break;
      case Kind::Signal:
        if (dev::thread() == 0) dc.signal(sig, value, op, peer);
        break;
      case Kind::Wait: (void)dc.wait_signal<Block>(sig, cmp, value); return;
    }
    dc.quiet();  // the data is in place when the stream moves on
  }
};

void check_peer(const Comm& comm, int peer, const char* what) {
  GNIO_REQUIRE(peer >= 0 && peer < comm.size(),
               "%s: peer %d is not a rank of the communicator (0..%d)", what, peer,
               comm.size() - 1);
}

void run(const RmaKernel& k, StreamRef stream) {
  gnio::launch(stream, {.grid = 1, .block = stream.is_host() ? 1u : 256u}, k);
}

RmaKernel make(Comm& comm, Kind kind) {
  RmaKernel k{};
  k.dc = comm.device_handle();  // fetched per call: the heap may have grown
  k.kind = kind;
  return k;
}

}  // namespace

void put_on_stream(Comm& comm, SymPtr<char> dst, const void* src, std::size_t bytes, int peer,
                   StreamRef stream) {
  check_peer(comm, peer, "put_on_stream");
  GNIO_REQUIRE(src != nullptr || bytes == 0, "put_on_stream: src is null");
  RmaKernel k = make(comm, Kind::Put);
  k.remote = dst;
  k.local = const_cast<char*>(static_cast<const char*>(src));
  k.bytes = bytes;
  k.peer = peer;
  run(k, stream);
}

void get_on_stream(Comm& comm, void* dst, SymPtr<char> src, std::size_t bytes, int peer,
                   StreamRef stream) {
  check_peer(comm, peer, "get_on_stream");
  GNIO_REQUIRE(dst != nullptr || bytes == 0, "get_on_stream: dst is null");
  RmaKernel k = make(comm, Kind::Get);
  k.remote = src;
  k.local = static_cast<char*>(dst);
  k.bytes = bytes;
  k.peer = peer;
  run(k, stream);
}

void put_signal_on_stream(Comm& comm, SymPtr<char> dst, const void* src, std::size_t bytes,
                          SymPtr<std::uint64_t> sig, std::uint64_t value, SignalOp op, int peer,
                          StreamRef stream) {
  check_peer(comm, peer, "put_signal_on_stream");
  GNIO_REQUIRE(src != nullptr || bytes == 0, "put_signal_on_stream: src is null");
  GNIO_REQUIRE(op == SignalOp::Set || op == SignalOp::Add, "put_signal_on_stream: bad SignalOp");
  RmaKernel k = make(comm, Kind::PutSignal);
  k.remote = dst;
  k.local = const_cast<char*>(static_cast<const char*>(src));
  k.bytes = bytes;
  k.sig = sig;
  k.value = value;
  k.op = op;
  k.peer = peer;
  run(k, stream);
}

void signal_on_stream(Comm& comm, SymPtr<std::uint64_t> sig, std::uint64_t value, SignalOp op,
                      int peer, StreamRef stream) {
  check_peer(comm, peer, "signal_on_stream");
  GNIO_REQUIRE(op == SignalOp::Set || op == SignalOp::Add, "signal_on_stream: bad SignalOp");
  RmaKernel k = make(comm, Kind::Signal);
  k.sig = sig;
  k.value = value;
  k.op = op;
  k.peer = peer;
  run(k, stream);
}

void wait_signal_on_stream(Comm& comm, SymPtr<std::uint64_t> sig, Cmp cmp, std::uint64_t value,
                           StreamRef stream) {
  GNIO_REQUIRE(static_cast<std::uint32_t>(cmp) <= static_cast<std::uint32_t>(Cmp::Le),
               "wait_signal_on_stream: bad Cmp");
  RmaKernel k = make(comm, Kind::Wait);
  k.sig = sig;
  k.cmp = cmp;
  k.value = value;
  run(k, stream);
}

}  // namespace gnio
