// gnio-p2p-probe: what the hardware charges for the building blocks of put_signal/wait_signal and
// of small puts/gets between two GPUs of one machine, measured with raw CUDA (and gnio's
// header-only device API for comparison; no NVSHMEM). It separates the costs that gnio-perf rma's
// figures add up: the NVLink flight time of a flag, the system-scope fence that orders data before
// a signal, acquire vs relaxed polling, and the per-iteration issue cost of a copy loop.
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
// Call-cost variants (one block on GPU 0, calls issued back to back, ns per call): a raw PTX
// load/store against gnio::detail::group_copy and DeviceComm::put/get on the same bytes, through
// a DeviceComm filled by hand (GPU 1's buffer as peer 1's heap): where a small put's time goes.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "gnio/device.hpp"

namespace {

#define CHECK(call)                                                                             \
  do {                                                                                          \
    cudaError_t err_ = (call);                                                                  \
    if (err_ != cudaSuccess) {                                                                  \
      std::fprintf(stderr, "gnio-p2p-probe: %s failed: %s\n", #call, cudaGetErrorString(err_)); \
      std::exit(1);                                                                             \
    }                                                                                           \
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
__device__ __forceinline__ void ld_v2_relaxed(const std::uint64_t* p, std::uint64_t& a,
                                              std::uint64_t& b) {
  asm volatile("ld.relaxed.sys.global.v2.u64 {%0, %1}, [%2];"
               : "=l"(a), "=l"(b)
               : "l"(p)
               : "memory");
}

/// One direction's landing zone, in the receiver's memory.
struct alignas(256) Mailbox {
  std::uint64_t data[2];  // [0] payload; ll16 uses [0] payload, [1] flag
  std::uint64_t pad[14];
  std::uint64_t flag;
};

enum Variant {
  kFlagRelaxed,
  kFlagRelAcq,
  kFenceSys,
  kFenceSysRelaxedPoll,
  kFenceGpu,
  kLL16,
  kVariants
};
const char* const kNames[] = {"flag relaxed",    "flag release/acquire",    "data+fence.sys+flag",
                              "...relaxed poll", "data+fence.gpu+flag (*)", "ll16 (data|flag)"};

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
    while (ld_relaxed(&box->flag) < i) {
    }
    return 0;
  } else if constexpr (V == kFlagRelAcq) {
    while (ld_acquire(&box->flag) < i) {
    }
    return 0;
  } else if constexpr (V == kFenceSysRelaxedPoll) {
    while (ld_relaxed(&box->flag) < i) {
    }
    asm volatile("fence.acq_rel.sys;" ::: "memory");
    return ld_relaxed(&box->data[0]) != i * 7;
  } else if constexpr (V == kLL16) {
    std::uint64_t d, f;
    do {
      ld_v2_relaxed(box->data, d, f);
    } while (f < i);
    return d != i * 7;
  } else {
    while (ld_acquire(&box->flag) < i) {
    }
    return ld_relaxed(&box->data[0]) != i * 7;
  }
}

template <int V>
__global__ void ping_pong(Mailbox* mine, Mailbox* peer, int iters, bool initiator,
                          std::uint64_t base, unsigned long long* ns, unsigned long long* wrong) {
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

/// Copy-loop variants: what one call costs when it is issued back to back (no fences).
enum CopyVariant {
  kRawPut8,         // one 8-byte remote store fed by a local load (inline PTX: nothing elided)
  kGroupCopyPut8,   // gnio::detail::group_copy<Thread>(remote, local, 8)
  kCommPut8,        // DeviceComm::put<Thread>(8 bytes)
  kRawPut16x512,    // 512 threads, one 16-byte remote store each
  kGroupCopyPut8K,  // group_copy<Block>(remote, local, 8 KiB), 512 threads
  kCommPut8K,       // DeviceComm::put<Block>(8 KiB), 512 threads
  kRawGet8,         // one 8-byte remote load into a local store, from a fresh window each time
  kCommGet8,        // DeviceComm::get<Thread>(8 bytes), same windows
  kCopyVariants
};
const char* const kCopyNames[] = {"raw put 8 B",
                                  "group_copy<Thread> 8 B",
                                  "DeviceComm::put<Thread> 8 B",
                                  "raw put 16 B x 512 thr",
                                  "group_copy<Block> 8 KiB",
                                  "DeviceComm::put<Block> 8 KiB",
                                  "raw get 8 B",
                                  "DeviceComm::get<Thread> 8 B"};
constexpr std::uint64_t kWindow = 16384;  // get windows: far apart, so no cache line is reused

template <int V>
__global__ void copy_loop(gnio::DeviceComm dc, std::uint8_t* remote, std::uint8_t* local, int iters,
                          unsigned long long* ns) {
  const unsigned t = threadIdx.x;
  const gnio::SymPtr<std::uint8_t> sym{1, 0,
                                       0};  // offset 0 of the hand-made heap (= `remote` on peer 1)
  __syncthreads();
  const std::uint64_t t0 = now_ns();
  for (int k = 0; k < iters; ++k) {
    const std::uint64_t w = static_cast<std::uint64_t>(k & 1023) * kWindow;
    if constexpr (V == kRawPut8) {
      std::uint64_t v;
      asm volatile("ld.global.u64 %0, [%1];" : "=l"(v) : "l"(local));
      asm volatile("st.global.u64 [%0], %1;" ::"l"(remote), "l"(v) : "memory");
    } else if constexpr (V == kGroupCopyPut8) {
      gnio::detail::group_copy(remote, local, 8, gnio::Thread{});
    } else if constexpr (V == kCommPut8) {
      dc.put<gnio::Thread>(sym, local, 8, 1);
    } else if constexpr (V == kRawPut16x512) {
      int4 v;
      asm volatile("ld.global.v4.s32 {%0, %1, %2, %3}, [%4];"
                   : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                   : "l"(local + 16 * t));
      asm volatile("st.global.v4.s32 [%0], {%1, %2, %3, %4};" ::"l"(remote + 16 * t), "r"(v.x),
                   "r"(v.y), "r"(v.z), "r"(v.w)
                   : "memory");
    } else if constexpr (V == kGroupCopyPut8K) {
      gnio::detail::group_copy(remote, local, 8192, gnio::Block{});
    } else if constexpr (V == kCommPut8K) {
      dc.put<gnio::Block>(sym, local, 8192, 1);
    } else if constexpr (V == kRawGet8) {
      std::uint64_t v;
      asm volatile("ld.global.u64 %0, [%1];" : "=l"(v) : "l"(remote + w) : "memory");
      asm volatile("st.global.u64 [%0], %1;" ::"l"(local), "l"(v) : "memory");
    } else {
      dc.get<gnio::Thread>(local, sym + static_cast<std::ptrdiff_t>(w), 8, 1);
    }
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
void run_copy(Gpu* g, const gnio::DeviceComm& dc, std::uint8_t* remote, std::uint8_t* local,
              int threads, int iters) {
  CHECK(cudaSetDevice(g[0].dev));
  copy_loop<V><<<1, threads, 0, g[0].stream>>>(dc, remote, local, iters, g[0].words);  // warm-up
  copy_loop<V><<<1, threads, 0, g[0].stream>>>(dc, remote, local, iters, g[0].words);
  CHECK(cudaGetLastError());
  unsigned long long ns = 0;
  CHECK(cudaMemcpyAsync(&ns, g[0].words, 8, cudaMemcpyDeviceToHost, g[0].stream));
  CHECK(cudaStreamSynchronize(g[0].stream));
  std::printf("  %-30s %4d threads %8.1f ns per call\n", kCopyNames[V], threads,
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

  // GPU 1's buffer seen from GPU 0 through a hand-made DeviceComm: rank 0 of 2 on one "node",
  // whose heap starts at `local` (GPU 0) and whose peer heap is `remote` (GPU 1) one stride away.
  const int copy_iters = 20000;
  const std::size_t bytes = 1024 * kWindow + 65536;
  std::uint8_t* remote = nullptr;
  std::uint8_t* local = nullptr;
  CHECK(cudaSetDevice(1));
  CHECK(cudaMalloc(&remote, bytes));
  CHECK(cudaMemset(remote, 1, bytes));
  CHECK(cudaSetDevice(0));
  CHECK(cudaMalloc(&local, bytes));
  CHECK(cudaMemset(local, 2, bytes));
  // A handle made by hand over two plain allocations (no communicator): the port fills it.
  gnio::DeviceComm dc{};
  gnio::detail::DeviceCommState& st = gnio::detail::DeviceCommPort::state(dc);
  st.rank_ = 0;
  st.size_ = 2;
  st.local_rank_ = 0;
  st.local_size_ = 2;
  st.heap_id_ = 1;
  st.heap_base_ = reinterpret_cast<char*>(local);
  st.heap_stride_ =
      reinterpret_cast<std::uintptr_t>(remote) - reinterpret_cast<std::uintptr_t>(local);
  st.heap_bytes_ = bytes;
  std::printf("calls issued back to back on GPU 0 (no fence between them), %d calls:\n",
              copy_iters);
  run_copy<kRawPut8>(g, dc, remote, local, 1, copy_iters);
  run_copy<kGroupCopyPut8>(g, dc, remote, local, 1, copy_iters);
  run_copy<kCommPut8>(g, dc, remote, local, 1, copy_iters);
  run_copy<kRawPut16x512>(g, dc, remote, local, 512, copy_iters);
  run_copy<kGroupCopyPut8K>(g, dc, remote, local, 512, copy_iters);
  run_copy<kCommPut8K>(g, dc, remote, local, 512, copy_iters);
  run_copy<kRawGet8>(g, dc, remote, local, 1, copy_iters / 10);
  run_copy<kCommGet8>(g, dc, remote, local, 1, copy_iters / 10);
  return 0;
}
