// libgnio_nccl: NCCL's host API (nccl.h of NCCL 2.28) carried by gnio, so that NCCL programs
// and PyTorch run on gnio unchanged (linked against it, or with LD_PRELOAD). Built only on gnio's
// public API. This header is the drop-in's own: the communicator object behind ncclComm_t, the
// per-thread group state, the error plumbing every entry point shares, and the real NCCL that
// carries what gnio does not (GNIO_NCCL_FALLBACK).
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

// NCCL's device-API communicator calls (nccl_device/core.h, which needs CUDA's compiler): the
// drop-in only passes their structures on, so it declares them opaque.
struct ncclDevCommRequirements;
struct ncclDevComm;
extern "C" {
/// NCCL's ncclDevCommCreate: forwarded to the real NCCL when one is loaded, else refused.
ncclResult_t ncclDevCommCreate(ncclComm_t comm, const ncclDevCommRequirements* reqs,
                               ncclDevComm* out_dev_comm);
/// NCCL's ncclDevCommDestroy: forwarded to the real NCCL when one is loaded, else refused.
ncclResult_t ncclDevCommDestroy(ncclComm_t comm, const ncclDevComm* dev_comm);
}

namespace gnio_nccl {

/// A real NCCL library (GNIO_NCCL_FALLBACK) and the entry points the drop-in forwards to. The
/// communicators they take are that library's, which the drop-in never dereferences.
struct Fallback {
  std::string path;
  void* handle = nullptr;
  int version = 0;
  decltype(&::ncclGetVersion) GetVersion = nullptr;
  decltype(&::ncclGetUniqueId) GetUniqueId = nullptr;
  decltype(&::ncclCommInitRank) CommInitRank = nullptr;
  decltype(&::ncclCommFinalize) CommFinalize = nullptr;
  decltype(&::ncclCommDestroy) CommDestroy = nullptr;
  decltype(&::ncclCommAbort) CommAbort = nullptr;
  decltype(&::ncclCommGetAsyncError) CommGetAsyncError = nullptr;
  decltype(&::ncclGetLastError) GetLastError = nullptr;
  decltype(&::ncclAllReduce) AllReduce = nullptr;
  decltype(&::ncclReduce) Reduce = nullptr;
  decltype(&::ncclReduceScatter) ReduceScatter = nullptr;
  decltype(&::ncclRedOpCreatePreMulSum) RedOpCreatePreMulSum = nullptr;
  decltype(&::ncclRedOpDestroy) RedOpDestroy = nullptr;
  decltype(&::ncclCommWindowRegister) CommWindowRegister = nullptr;
  decltype(&::ncclCommWindowDeregister) CommWindowDeregister = nullptr;
  decltype(&::ncclDevCommCreate) DevCommCreate = nullptr;
  decltype(&::ncclDevCommDestroy) DevCommDestroy = nullptr;
};

}  // namespace gnio_nccl

/// What ncclComm_t points to: a gnio communicator, the stream calls run on when the caller's
/// cannot be used (the host backend has no CUDA streams), the channels that carry send/recv, and,
/// with a real NCCL loaded, that library's communicator of the same ranks.
struct ncclComm {
  gnio::Comm comm;
  gnio::Stream own_stream;
  std::unique_ptr<gnio::Channels> channels;
  int splits = 0;  ///< ncclCommSplit calls so far: each one's bootstrap tag
  const gnio_nccl::Fallback* fallback = nullptr;  ///< the real NCCL, or null
  ncclComm_t real = nullptr;  ///< the real NCCL's communicator (its pointer, not an ncclComm)

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

/// The real NCCL GNIO_NCCL_FALLBACK names, loaded (RTLD_LOCAL, its own symbols bound first) by
/// the first call that succeeds and kept; null when the variable is empty. Throws
/// Error(InvalidArgument) naming the path and what is wrong when it cannot be the fallback: a file
/// dlopen refuses, a missing entry point, a version other than 2.28.x, libgnio_nccl itself, or a
/// library the process has loaded already.
const Fallback* load_fallback();

/// The drop-in communicator for `c`, with a communicator of `fallback` (when not null) of the same
/// ranks beside it: rank 0 gets the real unique id and broadcasts it over c's bootstrap.
/// Collective over c's ranks; when any rank cannot create the real one, every rank throws and
/// nothing is left: Error(SystemError) with the real NCCL's reason where it failed,
/// Error(RemoteError) naming that rank elsewhere.
ncclComm* make_comm(gnio::Comm c, const Fallback* fallback);

/// For a call gnio does not carry (`why`): ncclInvalidUsage with the reason, which names
/// GNIO_NCCL_FALLBACK, when `comm` has no real NCCL beside it.
ncclResult_t refuse(const char* call, const char* why);

/// Writes, the first time in this process only, the one log line that says `call` runs on the
/// real NCCL because of `why`.
void note_fallback(const ncclComm& comm, const char* call, const char* why);

/// `result` of `call` on the real NCCL, its message kept for ncclGetLastError when it failed.
ncclResult_t forwarded(const ncclComm& comm, const char* call, ncclResult_t result);

/// Runs a call gnio does not carry (`why`) on `comm`'s real NCCL communicator:
/// `forward(fallback, real_comm)`, with one log line for the first such call; without a real NCCL,
/// ncclInvalidUsage and the reason.
template <class Forward>
ncclResult_t fall_back(ncclComm* comm, const char* call, const char* why, Forward&& forward) {
  if (comm->real == nullptr) return refuse(call, why);
  note_fallback(*comm, call, why);
  return forwarded(*comm, call, forward(*comm->fallback, comm->real));
}

}  // namespace gnio_nccl
