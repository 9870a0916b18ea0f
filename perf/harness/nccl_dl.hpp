// NCCL, loaded at run time, for side-by-side benchmarks: gnio's benchmarks compare against the
// machine's libnccl without needing NCCL at build time. Only the entry points the benchmarks
// use are declared, with NCCL's ABI (nccl.h of NCCL 2.x).
#pragma once

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace gnio_bench {

/// The subset of nccl.h the benchmarks need (ABI-compatible declarations).
struct NcclUniqueId {
  char internal[128];
};
using NcclComm = struct NcclCommOpaque*;
using NcclResult = int;

/// nccl.h's ncclDataType_t values (the fp8 types exist from NCCL 2.24 on).
enum NcclDataType : int {
  kNcclInt8 = 0,
  kNcclUint8 = 1,
  kNcclInt32 = 2,
  kNcclUint32 = 3,
  kNcclInt64 = 4,
  kNcclUint64 = 5,
  kNcclFloat16 = 6,
  kNcclFloat32 = 7,
  kNcclFloat64 = 8,
  kNcclBfloat16 = 9,
  kNcclFloat8e4m3 = 10,
  kNcclFloat8e5m2 = 11,
};
/// nccl.h's built-in ncclRedOp_t values (NCCL has no bitwise operators).
enum NcclRedOp : int { kNcclSum = 0, kNcclProd = 1, kNcclMax = 2, kNcclMin = 3 };

class Nccl {
 public:
  /// Loads libnccl: $GNIO_BENCH_NCCL_LIB, then the NCCL shipped with the Python environment's
  /// nvidia-nccl package, then the system's libnccl.so.2. `error()` says why when not loaded.
  Nccl() {
    std::vector<std::string> candidates;
    if (const char* p = std::getenv("GNIO_BENCH_NCCL_LIB")) candidates.push_back(p);
    candidates.push_back("libnccl.so.2");
    for (const std::string& c : candidates) {
      handle_ = dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (handle_) {
        path_ = c;
        break;
      }
      error_ += c + ": " + dlerror() + "; ";
    }
    if (!handle_) return;
    get_version = load<NcclResult (*)(int*)>("ncclGetVersion");
    get_unique_id = load<NcclResult (*)(NcclUniqueId*)>("ncclGetUniqueId");
    comm_init_rank = load<NcclResult (*)(NcclComm*, int, NcclUniqueId, int)>("ncclCommInitRank");
    comm_destroy = load<NcclResult (*)(NcclComm)>("ncclCommDestroy");
    get_error_string = load<const char* (*)(NcclResult)>("ncclGetErrorString");
    all_reduce = load<NcclResult (*)(const void*, void*, size_t, int, int, NcclComm, void*)>(
        "ncclAllReduce");
    all_gather =
        load<NcclResult (*)(const void*, void*, size_t, int, NcclComm, void*)>("ncclAllGather");
    reduce_scatter = load<NcclResult (*)(const void*, void*, size_t, int, int, NcclComm, void*)>(
        "ncclReduceScatter");
    broadcast = load<NcclResult (*)(const void*, void*, size_t, int, int, NcclComm, void*)>(
        "ncclBroadcast");
    reduce = load<NcclResult (*)(const void*, void*, size_t, int, int, int, NcclComm, void*)>(
        "ncclReduce");
    send = load<NcclResult (*)(const void*, size_t, int, int, NcclComm, void*)>("ncclSend");
    recv = load<NcclResult (*)(void*, size_t, int, int, NcclComm, void*)>("ncclRecv");
    group_start = load<NcclResult (*)()>("ncclGroupStart");
    group_end = load<NcclResult (*)()>("ncclGroupEnd");
  }
  ~Nccl() = default;  // never dlclose: NCCL's threads may outlive the benchmark's objects

  bool ok() const { return handle_ && get_version && comm_init_rank; }
  const std::string& error() const { return error_; }
  const std::string& path() const { return path_; }
  /// NCCL's version as one number (22809 for 2.28.9), or 0 when not loaded.
  int version_code() const {
    int v = 0;
    if (!get_version || get_version(&v) != 0) return 0;
    return v;
  }
  /// NCCL's message for `r` ("unknown" when not loaded).
  std::string describe(NcclResult r) const {
    const char* s = get_error_string ? get_error_string(r) : nullptr;
    return s ? s : "unknown NCCL error " + std::to_string(r);
  }
  /// Joins a communicator of `size` ranks as `rank`: rank 0 creates the unique id and
  /// `share(void* data, std::size_t bytes)` (a broadcast from rank 0 of the caller's own, e.g.
  /// over gnio's bootstrap) hands it to every rank, then every rank calls ncclCommInitRank.
  /// Collective.
  template <class Share>
  NcclResult init_rank(NcclComm* comm, int rank, int size, Share share) const {
    NcclUniqueId id{};
    NcclResult r = rank == 0 ? get_unique_id(&id) : 0;
    // Every rank learns whether rank 0 could create the id, so none waits for an id that never
    // comes.
    share(&r, sizeof r);
    if (r != 0) return r;
    share(&id, sizeof id);
    return comm_init_rank(comm, size, id, rank);
  }
  /// "2.28.9", or "" when not loaded.
  std::string version() const {
    int v = 0;
    if (!get_version || get_version(&v) != 0) return "";
    return std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." +
           std::to_string(v % 100);
  }
  /// Aborts the benchmark with NCCL's message when a call failed.
  void check(NcclResult r, const char* what) const {
    if (r != 0) {
      std::fprintf(stderr, "NCCL %s failed: %s\n", what,
                   get_error_string ? get_error_string(r) : "?");
      std::exit(3);
    }
  }

  NcclResult (*get_version)(int*) = nullptr;
  NcclResult (*get_unique_id)(NcclUniqueId*) = nullptr;
  NcclResult (*comm_init_rank)(NcclComm*, int, NcclUniqueId, int) = nullptr;
  NcclResult (*comm_destroy)(NcclComm) = nullptr;
  const char* (*get_error_string)(NcclResult) = nullptr;
  NcclResult (*all_reduce)(const void*, void*, size_t, int, int, NcclComm, void*) = nullptr;
  NcclResult (*all_gather)(const void*, void*, size_t, int, NcclComm, void*) = nullptr;
  NcclResult (*reduce_scatter)(const void*, void*, size_t, int, int, NcclComm, void*) = nullptr;
  NcclResult (*broadcast)(const void*, void*, size_t, int, int, NcclComm, void*) = nullptr;
  NcclResult (*reduce)(const void*, void*, size_t, int, int, int, NcclComm, void*) = nullptr;
  NcclResult (*send)(const void*, size_t, int, int, NcclComm, void*) = nullptr;
  NcclResult (*recv)(void*, size_t, int, int, NcclComm, void*) = nullptr;
  NcclResult (*group_start)() = nullptr;
  NcclResult (*group_end)() = nullptr;

 private:
  template <class F>
  F load(const char* name) {
    return reinterpret_cast<F>(dlsym(handle_, name));
  }
  void* handle_ = nullptr;
  std::string path_, error_;
};

}  // namespace gnio_bench
