// libgnio_nccl: NCCL's host API (nccl.h of NCCL 2.28) carried by gnio, so that NCCL programs
// and PyTorch run on gnio unchanged (linked against it, or with LD_PRELOAD). Built only on gnio's
// public API. This header is the drop-in's own: the communicator object behind ncclComm_t, the
// per-thread group state and the error plumbing every entry point shares.
#pragma once

#include <nccl.h>

#include <cstdarg>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "gnio/channel.hpp"
#include "gnio/coll.hpp"
#include "gnio/comm.hpp"
#include "gnio/error.hpp"

/// What ncclComm_t points to: a gnio communicator, the stream calls run on when the caller's
/// cannot be used (the host backend has no CUDA streams), and the channels that carry send/recv.
struct ncclComm {
  gnio::Comm comm;
  gnio::Stream own_stream;
  std::unique_ptr<gnio::Channels> channels;
  int splits = 0;  ///< ncclCommSplit calls so far: each one's bootstrap tag

  explicit ncclComm(gnio::Comm c);
};

namespace gnio_nccl {

/// Records `message` as this thread's last error (ncclGetLastError) and returns `result`.
ncclResult_t fail(ncclResult_t result, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

/// Runs `body` for entry point `call`: ncclSuccess, or the gnio::Error it threw as the NCCL
/// result of its class, its message kept for ncclGetLastError.
template <class Body>
ncclResult_t guarded(const char* call, Body&& body) {
  try {
    return body();
  } catch (const gnio::Error& e) {
    ncclResult_t r = ncclInternalError;
    switch (e.error_class()) {
      case gnio::ErrorClass::InvalidArgument: r = ncclInvalidArgument; break;
      case gnio::ErrorClass::Timeout:
      case gnio::ErrorClass::RemoteError: r = ncclRemoteError; break;
      case gnio::ErrorClass::SystemError: r = ncclSystemError; break;
      case gnio::ErrorClass::Unsupported: r = ncclInvalidUsage; break;
      case gnio::ErrorClass::Internal: r = ncclInternalError; break;
    }
    return fail(r, "%s: %s", call, e.what());
  } catch (const std::exception& e) {
    return fail(ncclInternalError, "%s: %s", call, e.what());
  }
}

/// The stream a call on `comm` runs on, and whether the call waits for it before returning
/// (the host backend: its own stream, always waited for; NCCL's NULL stream on GPUs is CUDA's
/// default stream).
gnio::StreamRef stream_of(ncclComm* comm, cudaStream_t stream, bool* wait);

/// The number a caller passed for an NCCL enum, read without assuming it names an enumerator: a C
/// caller may pass any int, and loading one outside the enum's range as the enum is undefined.
template <class Enum>
int raw(const Enum& e) {
  static_assert(sizeof(Enum) == sizeof(int), "NCCL's enums are ints");
  int v;
  std::memcpy(&v, &e, sizeof(v));
  return v;
}

/// Bytes per element of an NCCL type (raw() of an ncclDataType_t); 0 for a value that names none.
inline std::size_t bytes_of(int t) {
  switch (t) {
    case ncclInt8:
    case ncclUint8:
    case ncclFloat8e4m3:
    case ncclFloat8e5m2: return 1;
    case ncclFloat16:
    case ncclBfloat16: return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32: return 4;
    case ncclInt64:
    case ncclUint64:
    case ncclFloat64: return 8;
    default: return 0;
  }
}

/// True inside ncclGroupStart/ncclGroupEnd on this thread.
bool in_group();

}  // namespace gnio_nccl
