// gnio-p2p-probe: what the hardware charges for the building blocks of put_signal/wait_signal and
// of small puts/gets between two GPUs of one machine, measured with raw CUDA (no gnio, no
// NVSHMEM). It separates the costs that gnio-perf rma's figures add up: the NVLink flight time of
// a flag, the system-scope fence that orders data before a signal, acquire vs relaxed polling,
// and the per-iteration issue cost of a copy loop.
//
//   gnio-p2p-probe [ITERS]        (GPUs 0 and 1; one process; peer access enabled)
//
// Ping-pong variants (one way = round trip / 2, GPU 0's kernel times ITERS round trips with the
// global timer; GPU 1's kernel answers):
//   flag relaxed          st.relaxed.sys flag / poll ld.relaxed.sys: the link's floor
//   flag release/acquire  st.release.sys flag / poll ld.acquire.sys
//   data+fence.sys+flag   8 B data store, fence.acq_rel.sys, relaxed flag store / acquire poll:
//                         the shape of put_signal + wait_signal (gnio and NVSHMEM)
//   ...relaxed poll       the same, polling relaxed and fencing once after the flag is seen
//   data+fence.gpu+flag   GPU-scope fence instead (NOT guaranteed by the PTX memory model across
//                         GPUs; shows what the system-scope fence costs)
//   ll16 (data|flag)      8 B data and 8 B flag in one 16-byte store, polled as one 16-byte load
//                         (NCCL's LL idea): no fence at all
// Copy-loop variants (one thread block on GPU 0, 16 bytes per thread per iteration, ns per
// iteration): remote stores fed by plain loads, by read-only (ld.global.nc) loads, or from a
// register; remote loads into local stores.
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

namespace {

#define CHECK(call)                                                                        \
  do {                                                                                     \
    cudaError_t err_ = (call);                                                             \
    if (err_ != cudaSuccess) {                                                             \
      std::fprintf(stderr, "gnio-p2p-probe: %s failed: %s\n", #call, cudaGetErrorString(err_)); \
      std::exit(1);                                                                        \
    }                                                                                      \
  } while (0)

__device__ __forceinline__ std::uint64_t now_ns() {
  std::uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
__device__ __forceinline__ void st_relaxed(std::uint64_t* p, std::uint64_t v) {
  asm volatile("st.relaxed.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
__device__ __forceinline__ void st_release(std::uint64_t* p, std::uint64_t v) {
  asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
__device__ __forceinline__ std::uint64_t ld_relaxed(const std::uint64_t* p) {
  std::uint64_t v;
  asm volatile("ld.relaxed.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ std::uint64_t ld_acquire(const std::uint64_t* p) {
  std::uint64_t v;
  asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void st_v2_relaxed(std::uint64_t* p, std::uint64_t a, std::uint64_t b) {
  asm volatile("st.relaxed.sys.global.v2.u64 [%0], {%1, %2};" ::"l"(p), "l"(a), "l"(b) : "memory");
}
__device__ __forceinline__ void ld_v2_relaxed(const std::uint64_t* p, std::uint64_t& a, std::uint64_t& b) {
  asm volatile("ld.relaxed.sys.global.v2.u64 {%0, %1}, [%2];" : "=l"(a), "=l"(b) : "l"(p) : "memory");
}

/// One direction's landing zone, in the receiver's memory.
struct alignas(256) Mailbox {
  std::uint64_t data[2];  // [0] payload; ll16 uses [0] payload, [1] flag
  std::uint64_t pad[14];
  std::uint64_t flag;
};

enum Variant { kFlagRelaxed, kFlagRelAcq, kFenceSys, kFenceSysRelaxedPoll, kFenceGpu, kLL16, kVariants };
const char* const kNames[] = {"flag relaxed",        "flag release/acquire",   "data+fence.sys+flag",
                              "...relaxed poll",     "data+fence.gpu+flag (*)", "ll16 (data|flag)"};

template <int V>
__device__ __forceinline__ void send(Mailbox* to, std::uint64_t i) {
  if constexpr (V == kFlagRelaxed) {
    st_relaxed(&to->flag, i);
  } else if constexpr (V == kFlagRelAcq) {
    st_release(&to->flag, i);
  } else if constexpr (V == kFenceSys || V == kFenceSysRelaxedPoll) {
    to->data[0] = i * 7;
    asm volatile("fence.acq_rel.sys;" ::: "memory");
    st_relaxed(&to->flag, i);
  } else if constexpr (V == kFenceGpu) {
    to->data[0] = i * 7;
    asm volatile("fence.acq_rel.gpu;" ::: "memory");
    st_relaxed(&to->flag, i);
  } else {
    st_v2_relaxed(to->data, i * 7, i);
  }
}

/// Waits for message i; returns 1 if its payload was wrong.
template <int V>
__device__ __forceinline__ int receive(Mailbox* box, std::uint64_t i) {
  if constexpr (V == kFlagRelaxed) {
    while (ld_relaxed(&box->flag) < i) {}
    return 0;
  } else if constexpr (V == kFlagRelAcq) {
    while (ld_acquire(&box->flag) < i) {}
    return 0;
  } else if constexpr (V == kFenceSysRelaxedPoll) {
    while (ld_relaxed(&box->flag) < i) {}
    asm volatile("fence.acq_rel.sys;" ::: "memory");
    return ld_relaxed(&box->data[0]) != i * 7;
  } else if constexpr (V == kLL16) {
    std::uint64_t d, f;
    do {
      ld_v2_relaxed(box->data, d, f);
    } while (f < i);
    return d != i * 7;
  } else {
    while (ld_acquire(&box->flag) < i) {}
    return ld_relaxed(&box->data[0]) != i * 7;
  }
}

template <int V>
__global__ void ping_pong(Mailbox* mine, Mailbox* peer, int iters, bool initiator, std::uint64_t base,
                          unsigned long long* ns, unsigned long long* wrong) {
  int bad = 0;
  const std::uint64_t t0 = now_ns();
  for (int k = 1; k <= iters; ++k) {
    const std::uint64_t i = base + k;
    if (initiator) {
      send<V>(peer, i);
      bad += receive<V>(mine, i);
    } else {
      bad += receive<V>(mine, i);
      send<V>(peer, i);
    }
  }
  if (initiator) *ns = now_ns() - t0;
  if (bad) atomicAdd(wrong, static_cast<unsigned long long>(bad));
}

enum CopyVariant { kStorePlain, kStoreNc, kStoreReg, kGetPlain, kCopyVariants };
const char* const kCopyNames[] = {"remote st <- plain ld", "remote st <- ld.global.nc", "remote st <- register",
                                  "local st <- remote ld"};

template <int V>
__global__ void copy_loop(int4* remote, int4* local, int iters, unsigned long long* ns) {
  const unsigned t = threadIdx.x;
  int4 reg = local[t];
  __syncthreads();
  const std::uint64_t t0 = now_ns();
  for (int k = 0; k < iters; ++k) {
    if constexpr (V == kStorePlain) remote[t] = local[t];
    else if constexpr (V == kStoreNc) remote[t] = __ldg(local + t);
    else if constexpr (V == kStoreReg) remote[t] = reg;
    else local[t] = remote[(k & 1023) * 1024 + t];  // a fresh 16 KiB window: no L1 reuse
  }
  asm volatile("fence.acq_rel.sys;" ::: "memory");
  __syncthreads();
  if (t == 0) *ns = now_ns() - t0;
}

struct Gpu {
  int dev;
  cudaStream_t stream;
  Mailbox* box;
  unsigned long long* words;  // [0] ns, [1] wrong
};

template <int V>
void run_ping_pong(Gpu* g, int iters, std::uint64_t& base) {
  for (int d = 0; d < 2; ++d) {
    CHECK(cudaSetDevice(g[d].dev));
    CHECK(cudaMemsetAsync(g[d].words, 0, 16, g[d].stream));
  }
  // The responder first, so the initiator never waits for a launch.
  for (int d = 1; d >= 0; --d) {
    CHECK(cudaSetDevice(g[d].dev));
    ping_pong<V><<<1, 1, 0, g[d].stream>>>(g[d].box, g[1 - d].box, iters, d == 0, base, g[d].words,
                                           g[d].words + 1);
    CHECK(cudaGetLastError());
  }
  unsigned long long host[2][2];
  for (int d = 0; d < 2; ++d) {
    CHECK(cudaSetDevice(g[d].dev));
    CHECK(cudaMemcpyAsync(host[d], g[d].words, 16, cudaMemcpyDeviceToHost, g[d].stream));
    CHECK(cudaStreamSynchronize(g[d].stream));
  }
  base += static_cast<std::uint64_t>(iters);
  std::printf("  %-26s %8.3f us one way   (wrong payloads: %llu)\n", kNames[V],
              host[0][0] / 1e3 / iters / 2, host[0][1] + host[1][1]);
}

template <int V>
void run_copy(Gpu* g, int4* remote, int4* local, int threads, int iters) {
  CHECK(cudaSetDevice(g[0].dev));
  copy_loop<V><<<1, threads, 0, g[0].stream>>>(remote, local, iters, g[0].words);  // warm-up
  copy_loop<V><<<1, threads, 0, g[0].stream>>>(remote, local, iters, g[0].words);
  CHECK(cudaGetLastError());
  unsigned long long ns = 0;
  CHECK(cudaMemcpyAsync(&ns, g[0].words, 8, cudaMemcpyDeviceToHost, g[0].stream));
  CHECK(cudaStreamSynchronize(g[0].stream));
  std::printf("  %-26s %4d threads %8.1f ns per iteration\n", kCopyNames[V], threads,
              static_cast<double>(ns) / iters);
}

}  // namespace

int main(int argc, char** argv) {
  const int iters = argc > 1 ? std::atoi(argv[1]) : 20000;
  int count = 0;
  CHECK(cudaGetDeviceCount(&count));
  if (count < 2) {
    std::fprintf(stderr, "gnio-p2p-probe: needs 2 GPUs, found %d\n", count);
    return 2;
  }
  Gpu g[2];
  for (int d = 0; d < 2; ++d) {
    int ok = 0;
    CHECK(cudaDeviceCanAccessPeer(&ok, d, 1 - d));
    if (!ok) {
      std::fprintf(stderr, "gnio-p2p-probe: GPU %d cannot access GPU %d\n", d, 1 - d);
      return 2;
    }
    g[d].dev = d;
    CHECK(cudaSetDevice(d));
    CHECK(cudaDeviceEnablePeerAccess(1 - d, 0));
    CHECK(cudaStreamCreateWithFlags(&g[d].stream, cudaStreamNonBlocking));
    CHECK(cudaMalloc(&g[d].box, sizeof(Mailbox)));
    CHECK(cudaMemset(g[d].box, 0, sizeof(Mailbox)));
    CHECK(cudaMalloc(&g[d].words, 16));
  }
  cudaDeviceProp prop{};
  CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("gnio-p2p-probe: %s x2, %d round trips per ping-pong\n", prop.name, iters);
  std::printf("ping-pong between GPU 0 and GPU 1 (one thread each):\n");
  std::uint64_t base = 0;
  run_ping_pong<kFlagRelaxed>(g, iters, base);
  run_ping_pong<kFlagRelAcq>(g, iters, base);
  run_ping_pong<kFenceSys>(g, iters, base);
  run_ping_pong<kFenceSysRelaxedPoll>(g, iters, base);
  run_ping_pong<kFenceGpu>(g, iters, base);
  run_ping_pong<kLL16>(g, iters, base);
  std::printf("  (*) not ordered by the PTX memory model across GPUs: shown for its cost only\n");

  const int copy_iters = 20000;
  const std::size_t remote_bytes = std::size_t{1024} * 1024 * sizeof(int4) + 1024 * sizeof(int4);
  int4* remote = nullptr;  // on GPU 1, written/read by GPU 0
  int4* local = nullptr;   // on GPU 0
  CHECK(cudaSetDevice(1));
  CHECK(cudaMalloc(&remote, remote_bytes));
  CHECK(cudaMemset(remote, 1, remote_bytes));
  CHECK(cudaSetDevice(0));
  CHECK(cudaMalloc(&local, 1024 * sizeof(int4)));
  CHECK(cudaMemset(local, 2, 1024 * sizeof(int4)));
  std::printf("copy loops on GPU 0, 16 B per thread per iteration, %d iterations:\n", copy_iters);
  for (int threads : {1, 32, 512}) {
    run_copy<kStorePlain>(g, remote, local, threads, copy_iters);
    run_copy<kStoreNc>(g, remote, local, threads, copy_iters);
    run_copy<kStoreReg>(g, remote, local, threads, copy_iters);
    run_copy<kGetPlain>(g, remote, local, threads, copy_iters / 10);
  }
  return 0;
}
