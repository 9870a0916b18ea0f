// Communicators: version, unique id, init, split, shrink, finalize, destroy, abort, queries,
// errors, the memory calls, and NCCL's device-API calls (the real NCCL's, when one is loaded).
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

/// Bootstrap tag of ncclCommShrink's unique ids. One tag for every shrink: messages of a pair and
/// tag arrive in order, and a member receives from the first member exactly the ids of the shrinks
/// both take part in (an excluded rank does not call).
constexpr int kShrinkTag = 0x6e640000;

constexpr const char* kNoDeviceApi =
    "NCCL's device API (windows, ncclDevComm) is not carried by gnio (gnio has its own)";

/// ncclInvalidArgument when `config` was not made with NCCL_CONFIG_INITIALIZER, else ncclSuccess.
ncclResult_t check_config(const ncclConfig_t* config, const char* call) {
  if (config != nullptr && config->magic != kConfigMagic)
    return gnio_nccl::fail(ncclInvalidArgument,
                           "%s: the config was not initialised with NCCL_CONFIG_INITIALIZER", call);
  return ncclSuccess;
}

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
  if (const ncclResult_t r = check_config(config, call); r != ncclSuccess) return r;
  return gnio_nccl::guarded(call, [&] {
    // Before any collective step: a fallback that cannot load fails every rank alike.
    const gnio_nccl::Fallback* fallback = gnio_nccl::load_fallback();
    gnio::UniqueId u{};
    static_assert(sizeof(u.bytes) == sizeof(id.internal), "unique ids of one size");
    std::memcpy(u.bytes, id.internal, sizeof(u.bytes));
    *out =
        gnio_nccl::make_comm(gnio::Comm::from_unique_id(u, rank, nranks, options_here()), fallback);
    return ncclSuccess;
  });
}

/// This rank's communicator among `members` (ranks of `parent`'s bootstrap, in their new order),
/// beside a real NCCL one when `parent` has a fallback: the first member creates the unique id
/// and sends it to the others with `tag`.
ncclComm* member_comm(ncclComm& parent, const std::vector<int>& members, int tag) {
  gnio::Bootstrap& bs = parent.comm.bootstrap();
  const auto index = static_cast<std::size_t>(
      std::find(members.begin(), members.end(), parent.comm.rank()) - members.begin());
  gnio::UniqueId id{};
  if (index == 0) {
    id = gnio::create_unique_id();
    for (std::size_t i = 1; i < members.size(); ++i) bs.send(members[i], tag, &id, sizeof(id));
  } else {
    bs.recv(members[0], tag, &id, sizeof(id));
  }
  return gnio_nccl::make_comm(
      gnio::Comm::from_unique_id(id, static_cast<int>(index), static_cast<int>(members.size()),
                                 options_here()),
      parent.fallback);
}

/// Tears down `comm`'s real NCCL communicator, if any, with the fallback's `teardown` (its
/// ncclCommDestroy or ncclCommAbort), then deletes `comm`: the first failure of the two, else
/// ncclSuccess.
ncclResult_t end_comm(ncclComm_t comm, const char* call,
                      decltype(&::ncclCommDestroy) gnio_nccl::Fallback::*teardown) {
  const ncclResult_t real =
      comm->real == nullptr
          ? ncclSuccess
          : gnio_nccl::forwarded(*comm, call, (comm->fallback->*teardown)(comm->real));
  const ncclResult_t r = gnio_nccl::guarded(call, [&] {
    delete comm;  // collective unless aborted, as in NCCL
    return ncclSuccess;
  });
  return r != ncclSuccess ? r : real;
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
  if (const ncclResult_t r = check_config(config, "ncclCommSplit"); r != ncclSuccess) return r;
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
    *newcomm = member_comm(*comm, members, tag);
    return ncclSuccess;
  });
}

// The members (the ranks not excluded) meet over the parent's bootstrap, point to point: excluded
// ranks do not call, as in NCCL.
ncclResult_t ncclCommShrink(ncclComm_t comm, int* exclude_ranks, int exclude_count,
                            ncclComm_t* newcomm, ncclConfig_t* config, int flags) {
  if (comm == nullptr || newcomm == nullptr || exclude_count < 0 ||
      (exclude_count > 0 && exclude_ranks == nullptr))
    return gnio_nccl::fail(ncclInvalidArgument,
                           "ncclCommShrink: comm, newcomm or the exclusion list is NULL, or the "
                           "exclusion count is negative");
  if (const ncclResult_t r = check_config(config, "ncclCommShrink"); r != ncclSuccess) return r;
  *newcomm = nullptr;
  if (flags != NCCL_SHRINK_DEFAULT)
    return gnio_nccl::fail(ncclInvalidUsage,
                           "ncclCommShrink: NCCL_SHRINK_ABORT is not carried by gnio (an aborted "
                           "gnio communicator makes no other: create a new one from a new unique "
                           "id)");
  return gnio_nccl::guarded("ncclCommShrink", [&] {
    const int me = comm->comm.rank(), size = comm->comm.size();
    std::vector<bool> excluded(static_cast<std::size_t>(size));
    for (int i = 0; i < exclude_count; ++i) {
      const int r = exclude_ranks[i];
      if (r < 0 || r >= size)
        throw gnio::Error(gnio::ErrorClass::InvalidArgument,
                          "excluded rank " + std::to_string(r) +
                              " is not a rank of the communicator (0.." + std::to_string(size - 1) +
                              ")");
      excluded[static_cast<std::size_t>(r)] = true;
    }
    if (excluded[static_cast<std::size_t>(me)])
      throw gnio::Error(gnio::ErrorClass::InvalidArgument,
                        "rank " + std::to_string(me) +
                            " is in the exclusion list: excluded ranks do not call it");
    std::vector<int> members;
    for (int r = 0; r < size; ++r)
      if (!excluded[static_cast<std::size_t>(r)]) members.push_back(r);
    *newcomm = member_comm(*comm, members, kShrinkTag);
    return ncclSuccess;
  });
}

ncclResult_t ncclCommRevoke(ncclComm_t, int) {
  return gnio_nccl::fail(ncclInvalidUsage, "ncclCommRevoke: not carried by gnio yet");
}

ncclResult_t ncclCommFinalize(ncclComm_t comm) {
  if (comm == nullptr) return gnio_nccl::fail(ncclInvalidArgument, "ncclCommFinalize: NULL");
  const ncclResult_t r = gnio_nccl::guarded("ncclCommFinalize", [&] {
    comm->comm.synchronize(comm->own_stream);
    comm->comm.check();
    return ncclSuccess;
  });
  if (r != ncclSuccess || comm->real == nullptr) return r;
  return gnio_nccl::forwarded(*comm, "ncclCommFinalize", comm->fallback->CommFinalize(comm->real));
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  if (comm == nullptr) return ncclSuccess;
  return end_comm(comm, "ncclCommDestroy", &gnio_nccl::Fallback::CommDestroy);
}

ncclResult_t ncclCommAbort(ncclComm_t comm) {
  if (comm == nullptr) return ncclSuccess;
  comm->comm.abort();  // every wait of this rank ends; the teardown skips the final barrier
  return end_comm(comm, "ncclCommAbort", &gnio_nccl::Fallback::CommAbort);
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
  if (*async_error == ncclSuccess && comm->real != nullptr) {
    ncclResult_t real = ncclSuccess;
    const ncclResult_t r = comm->fallback->CommGetAsyncError(comm->real, &real);
    *async_error =
        gnio_nccl::forwarded(*comm, "ncclCommGetAsyncError", r != ncclSuccess ? r : real);
  }
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

ncclResult_t ncclCommWindowRegister(ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win,
                                    int win_flags) {
  if (comm == nullptr || win == nullptr)
    return gnio_nccl::fail(ncclInvalidArgument, "ncclCommWindowRegister: comm or win is NULL");
  *win = nullptr;
  return gnio_nccl::fall_back(comm, "ncclCommWindowRegister", kNoDeviceApi,
                              [&](const gnio_nccl::Fallback& f, ncclComm_t real) {
                                return f.CommWindowRegister(real, buff, size, win, win_flags);
                              });
}

ncclResult_t ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win) {
  if (comm == nullptr)
    return gnio_nccl::fail(ncclInvalidArgument, "ncclCommWindowDeregister: comm is NULL");
  return gnio_nccl::fall_back(comm, "ncclCommWindowDeregister", kNoDeviceApi,
                              [&](const gnio_nccl::Fallback& f, ncclComm_t real) {
                                return f.CommWindowDeregister(real, win);
                              });
}

// PyTorch imports these two; without them here its calls would reach the real NCCL with a
// drop-in communicator.
ncclResult_t ncclDevCommCreate(ncclComm_t comm, const ncclDevCommRequirements* reqs,
                               ncclDevComm* out_dev_comm) {
  if (comm == nullptr || out_dev_comm == nullptr)
    return gnio_nccl::fail(ncclInvalidArgument, "ncclDevCommCreate: comm or outDevComm is NULL");
  return gnio_nccl::fall_back(comm, "ncclDevCommCreate", kNoDeviceApi,
                              [&](const gnio_nccl::Fallback& f, ncclComm_t real) {
                                return f.DevCommCreate(real, reqs, out_dev_comm);
                              });
}

ncclResult_t ncclDevCommDestroy(ncclComm_t comm, const ncclDevComm* dev_comm) {
  if (comm == nullptr || dev_comm == nullptr)
    return gnio_nccl::fail(ncclInvalidArgument, "ncclDevCommDestroy: comm or devComm is NULL");
  return gnio_nccl::fall_back(comm, "ncclDevCommDestroy", kNoDeviceApi,
                              [&](const gnio_nccl::Fallback& f, ncclComm_t real) {
                                return f.DevCommDestroy(real, dev_comm);
                              });
}

}  // extern "C"
