// Communicators: version, unique id, init, split, finalize, destroy, abort, queries, errors, and
// the memory calls.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <vector>

#include "dropin.hpp"

#if GNIO_NCCL_CUDA
#include <cuda_runtime.h>
#endif

namespace {

thread_local std::string last_error;

constexpr unsigned kConfigMagic = 0xcafebeef;

/// gnio's options for a communicator NCCL's caller creates: on the current CUDA device, as NCCL
/// does (the host backend has none).
gnio::CommOptions options_here() {
  gnio::CommOptions options;
#if GNIO_NCCL_CUDA
  int device = -1;
  if (cudaGetDevice(&device) == cudaSuccess) options.device = device;
#endif
  return options;
}

ncclResult_t init(ncclComm_t* out, int nranks, const ncclUniqueId& id, int rank,
                  const ncclConfig_t* config, const char* call) {
  if (out == nullptr) return gnio_nccl::fail(ncclInvalidArgument, "%s: comm is NULL", call);
  *out = nullptr;
  if (config != nullptr && config->magic != kConfigMagic)
    return gnio_nccl::fail(ncclInvalidArgument,
                           "%s: the config was not initialised with NCCL_CONFIG_INITIALIZER", call);
  return gnio_nccl::guarded(call, [&] {
    gnio::UniqueId u{};
    static_assert(sizeof(u.bytes) == sizeof(id.internal), "unique ids of one size");
    std::memcpy(u.bytes, id.internal, sizeof(u.bytes));
    *out = new ncclComm(gnio::Comm::from_unique_id(u, rank, nranks, options_here()));
    return ncclSuccess;
  });
}

}  // namespace

ncclComm::ncclComm(gnio::Comm c)
    : comm(std::move(c)),
      own_stream(comm),
      channels(std::make_unique<gnio::Channels>(comm, gnio::ChannelOptions{})) {}

namespace gnio_nccl {

ncclResult_t fail(ncclResult_t result, const char* fmt, ...) {
  char text[1024];
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(text, sizeof(text), fmt, args);
  va_end(args);
  last_error = text;
  return result;
}

gnio::StreamRef stream_of(ncclComm* comm, cudaStream_t stream, bool* wait) {
  if (comm->comm.backend() == gnio::Backend::Host) {
    if (stream != nullptr)
      throw gnio::Error(gnio::ErrorClass::InvalidArgument,
                        "the host backend has no CUDA streams: pass NULL as the stream");
    *wait = true;
    return gnio::StreamRef(comm->own_stream);
  }
  *wait = false;
  return gnio::StreamRef(stream);
}

}  // namespace gnio_nccl

extern "C" {

ncclResult_t ncclGetVersion(int* version) {
  if (version == nullptr) return gnio_nccl::fail(ncclInvalidArgument, "ncclGetVersion: NULL");
  *version = NCCL_VERSION_CODE;  // the API this library implements
  return ncclSuccess;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId* unique_id) {
  if (unique_id == nullptr) return gnio_nccl::fail(ncclInvalidArgument, "ncclGetUniqueId: NULL");
  return gnio_nccl::guarded("ncclGetUniqueId", [&] {
    const gnio::UniqueId u = gnio::create_unique_id();
    std::memcpy(unique_id->internal, u.bytes, sizeof(unique_id->internal));
    return ncclSuccess;
  });
}

ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank) {
  return init(comm, nranks, id, rank, nullptr, "ncclCommInitRank");
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank,
                                    ncclConfig_t* config) {
  return init(comm, nranks, id, rank, config, "ncclCommInitRankConfig");
}

ncclResult_t ncclCommInitRankScalable(ncclComm_t* comm, int nranks, int rank, int n_ids,
                                      ncclUniqueId* ids, ncclConfig_t* config) {
  if (n_ids < 1 || ids == nullptr)
    return gnio_nccl::fail(ncclInvalidArgument, "ncclCommInitRankScalable: no unique id given");
  // gnio's bootstrap needs one root: the first id's.
  return init(comm, nranks, ids[0], rank, config, "ncclCommInitRankScalable");
}

ncclResult_t ncclCommInitAll(ncclComm_t* comms, int ndev, const int* /*devlist*/) {
  if (comms != nullptr)
    for (int i = 0; i < ndev; ++i) comms[i] = nullptr;
  return gnio_nccl::fail(ncclInvalidUsage,
                         "ncclCommInitAll: gnio runs one rank per process (launch one process per "
                         "GPU and use ncclCommInitRank)");
}

ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm,
                           ncclConfig_t* config) {
  if (comm == nullptr || newcomm == nullptr)
    return gnio_nccl::fail(ncclInvalidArgument, "ncclCommSplit: comm or newcomm is NULL");
  if (config != nullptr && config->magic != kConfigMagic)
    return gnio_nccl::fail(ncclInvalidArgument,
                           "ncclCommSplit: the config was not initialised with "
                           "NCCL_CONFIG_INITIALIZER");
  *newcomm = nullptr;
  return gnio_nccl::guarded("ncclCommSplit", [&] {
    gnio::Bootstrap& bs = comm->comm.bootstrap();
    const int me = bs.rank(), size = bs.size();
    // Every rank's (color, key); members of a color ordered by (key, rank); the first creates
    // the new communicator's unique id and sends it to the others.
    std::vector<int> all(2 * static_cast<std::size_t>(size));
    all[2 * me] = color;
    all[2 * me + 1] = key;
    bs.allgather(all.data(), 2 * sizeof(int));
    const int tag = 0x6e630000 + comm->splits++;
    if (color == NCCL_SPLIT_NOCOLOR) return ncclSuccess;
    std::vector<int> members;
    for (int r = 0; r < size; ++r)
      if (all[2 * r] == color) members.push_back(r);
    std::stable_sort(members.begin(), members.end(),
                     [&](int a, int b) { return all[2 * a + 1] < all[2 * b + 1]; });
    const int index =
        static_cast<int>(std::find(members.begin(), members.end(), me) - members.begin());
    gnio::UniqueId id{};
    if (index == 0) {
      id = gnio::create_unique_id();
      for (std::size_t i = 1; i < members.size(); ++i) bs.send(members[i], tag, &id, sizeof(id));
    } else {
      bs.recv(members[0], tag, &id, sizeof(id));
    }
    *newcomm = new ncclComm(
        gnio::Comm::from_unique_id(id, index, static_cast<int>(members.size()), options_here()));
    return ncclSuccess;
  });
}

ncclResult_t ncclCommShrink(ncclComm_t, int*, int, ncclComm_t* newcomm, ncclConfig_t*, int) {
  if (newcomm != nullptr) *newcomm = nullptr;
  return gnio_nccl::fail(ncclInvalidUsage,
                         "ncclCommShrink: not carried by gnio yet (use ncclCommSplit with the "
                         "excluded ranks passing NCCL_SPLIT_NOCOLOR)");
}

ncclResult_t ncclCommRevoke(ncclComm_t, int) {
  return gnio_nccl::fail(ncclInvalidUsage, "ncclCommRevoke: not carried by gnio yet");
}

ncclResult_t ncclCommFinalize(ncclComm_t comm) {
  if (comm == nullptr) return gnio_nccl::fail(ncclInvalidArgument, "ncclCommFinalize: NULL");
  return gnio_nccl::guarded("ncclCommFinalize", [&] {
    comm->comm.synchronize(comm->own_stream);
    comm->comm.check();
    return ncclSuccess;
  });
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  if (comm == nullptr) return ncclSuccess;
  return gnio_nccl::guarded("ncclCommDestroy", [&] {
    delete comm;  // collective, as in NCCL
    return ncclSuccess;
  });
}

ncclResult_t ncclCommAbort(ncclComm_t comm) {
  if (comm == nullptr) return ncclSuccess;
  comm->comm.abort();  // every wait of this rank ends; the teardown skips the final barrier
  return gnio_nccl::guarded("ncclCommAbort", [&] {
    delete comm;
    return ncclSuccess;
  });
}

const char* ncclGetErrorString(ncclResult_t result) {
  switch (result) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError:
      return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError:
      return "internal error - please report this issue to the gnio developers";
    case ncclInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "unknown result code";
  }
}

const char* ncclGetLastError(ncclComm_t /*comm*/) {
  return last_error.c_str();
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* async_error) {
  if (comm == nullptr || async_error == nullptr)
    return gnio_nccl::fail(ncclInvalidArgument, "ncclCommGetAsyncError: NULL argument");
  *async_error = gnio_nccl::guarded("ncclCommGetAsyncError", [&] {
    comm->comm.check();
    return ncclSuccess;
  });
  return ncclSuccess;
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) {
  if (comm == nullptr || count == nullptr)
    return gnio_nccl::fail(ncclInvalidArgument, "ncclCommCount: NULL argument");
  *count = comm->comm.size();
  return ncclSuccess;
}

ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device) {
  if (comm == nullptr || device == nullptr)
    return gnio_nccl::fail(ncclInvalidArgument, "ncclCommCuDevice: NULL argument");
  *device = comm->comm.device();
  return ncclSuccess;
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) {
  if (comm == nullptr || rank == nullptr)
    return gnio_nccl::fail(ncclInvalidArgument, "ncclCommUserRank: NULL argument");
  *rank = comm->comm.rank();
  return ncclSuccess;
}

ncclResult_t ncclMemAlloc(void** ptr, size_t size) {
  if (ptr == nullptr) return gnio_nccl::fail(ncclInvalidArgument, "ncclMemAlloc: ptr is NULL");
#if GNIO_NCCL_CUDA
  if (cudaMalloc(ptr, size) != cudaSuccess)
    return gnio_nccl::fail(ncclUnhandledCudaError, "ncclMemAlloc: cudaMalloc of %zu bytes failed",
                           size);
  return ncclSuccess;
#else
  *ptr = std::malloc(size == 0 ? 1 : size);  // host backend: any memory of the process
  return *ptr ? ncclSuccess
              : gnio_nccl::fail(ncclSystemError, "ncclMemAlloc: %zu bytes not available", size);
#endif
}

ncclResult_t ncclMemFree(void* ptr) {
#if GNIO_NCCL_CUDA
  return cudaFree(ptr) == cudaSuccess
             ? ncclSuccess
             : gnio_nccl::fail(ncclUnhandledCudaError, "ncclMemFree failed");
#else
  std::free(ptr);
  return ncclSuccess;
#endif
}

// Registration is an optimisation hint in NCCL; gnio's collectives stage or map buffers on
// their own, so a handle that names the buffer is all there is to keep.
ncclResult_t ncclCommRegister(const ncclComm_t comm, void* buff, size_t /*size*/, void** handle) {
  if (comm == nullptr || handle == nullptr)
    return gnio_nccl::fail(ncclInvalidArgument, "ncclCommRegister: NULL argument");
  *handle = buff;
  return ncclSuccess;
}

ncclResult_t ncclCommDeregister(const ncclComm_t comm, void* /*handle*/) {
  if (comm == nullptr) return gnio_nccl::fail(ncclInvalidArgument, "ncclCommDeregister: NULL");
  return ncclSuccess;
}

ncclResult_t ncclCommWindowRegister(ncclComm_t, void*, size_t, ncclWindow_t* win, int) {
  if (win != nullptr) *win = nullptr;
  return gnio_nccl::fail(ncclInvalidUsage,
                         "ncclCommWindowRegister: NCCL's device API windows are not carried by "
                         "gnio (use gnio's own device API)");
}

ncclResult_t ncclCommWindowDeregister(ncclComm_t, ncclWindow_t) {
  return gnio_nccl::fail(ncclInvalidUsage, "ncclCommWindowDeregister: not carried by gnio");
}

}  // extern "C"
