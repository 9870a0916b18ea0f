// gnio-coresidency-probe: which kernels a GPU still starts beside a persistent kernel that holds
// blocks on every SM, measured with raw CUDA (no gnio). The proxy's deliveries into GPU memory are
// kernels (a launch per batch, or the resident delivery agent) and must find room beside an
// application kernel that waits for them; a block needs threads, registers and shared memory on
// one SM, and an SM's split between L1 and shared memory is set by the kernels already on it.
//
//   holder  HB blocks per SM of 128 threads with HS bytes of dynamic shared memory, spinning on a
//           flag in host memory (bounded by a clock: it never outlives 3 s)
//   guest   one block of GT threads with GS bytes of dynamic shared memory, launched on another
//           stream once every holder block runs; it writes a flag in host memory
//
// For each combination: "started" with the time from the guest's launch to its flag, or "no"
// when the flag stayed unset for 200 ms (then the holder is released and the guest runs after it).
// Then the other order: a guest that stays resident (polling, as the agent does) first, then the
// holder: "holder complete" when all its blocks run beside the guest within 200 ms.
//
//   gnio-coresidency-probe        (GPU 0)
#include <cuda_runtime.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <thread>

namespace {

#define CHECK(call)                                                                              \
  do {                                                                                           \
    cudaError_t err_ = (call);                                                                   \
    if (err_ != cudaSuccess) {                                                                   \
      std::fprintf(stderr, "gnio-coresidency-probe: %s: %s\n", #call, cudaGetErrorString(err_)); \
      std::exit(1);                                                                              \
    }                                                                                            \
  } while (0)

struct Flags {
  unsigned running;  // holder blocks that started
  unsigned stop;     // host: release the holder (and a resident guest)
  unsigned guest;    // guest: started
};

__device__ unsigned load_volatile(const unsigned* p) {
  return *reinterpret_cast<const volatile unsigned*>(p);
}

// Spins until `stop`, at most about 3 s of the SM clock (~1.5-2 GHz), so no run can hang.
__device__ void spin_until_stop(Flags* f) {
  const long long begin = clock64();
  while (load_volatile(&f->stop) == 0 && clock64() - begin < 6'000'000'000LL) {
  }
}

// The dynamic shared memory is asked for at launch and left unused: only its size matters here.
__global__ void holder(Flags* f) {
  if (threadIdx.x == 0) atomicAdd_system(&f->running, 1u);
  spin_until_stop(f);
}

__global__ void guest(Flags* f, int resident) {
  if (threadIdx.x == 0) {
    __threadfence_system();
    atomicExch_system(&f->guest, 1u);
  }
  if (resident) spin_until_stop(f);
}

template <class Done>
bool wait_for(Done done, double* us) {
  const auto t0 = std::chrono::steady_clock::now();
  for (;;) {
    const double e =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
    if (done()) {
      *us = e;
      return true;
    }
    if (e > 200'000) return false;
  }
}

unsigned load_acquire(const unsigned* p) {
  return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}

}  // namespace

int main() {
  int sms = 0;
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  cudaDeviceProp prop{};
  CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("# %s, %d SMs, %zu KB shared per SM, %d registers per SM\n", prop.name, sms,
              prop.sharedMemPerMultiprocessor / 1024, prop.regsPerMultiprocessor);
  Flags* f = nullptr;
  CHECK(cudaHostAlloc(&f, sizeof(Flags), cudaHostAllocMapped));
  CHECK(cudaFuncSetAttribute(guest, cudaFuncAttributeMaxDynamicSharedMemorySize, 64 << 10));
  CHECK(cudaFuncSetAttribute(holder, cudaFuncAttributeMaxDynamicSharedMemorySize, 64 << 10));
  cudaStream_t a, b;
  CHECK(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
  CHECK(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
  const int holder_blocks[] = {1, 2};
  const int holder_smem[] = {0, 4096};
  const int guest_threads[] = {32, 128};
  const int guest_smem[] = {0, 1024, 2048, 4096, 6144, 8208, 16384};
  std::printf("holder_blocks_per_sm holder_smem guest_threads guest_smem guest_started us\n");
  for (int hb : holder_blocks)
    for (int hs : holder_smem)
      for (int gt : guest_threads)
        for (int gs : guest_smem) {
          *f = Flags{};
          holder<<<hb * sms, 128, hs, a>>>(f);
          CHECK(cudaGetLastError());
          double us = 0;
          const auto grid = static_cast<unsigned>(hb * sms);
          if (!wait_for([&] { return load_acquire(&f->running) == grid; }, &us)) {
            std::printf("%d %d - - holder-incomplete(%u/%u) -\n", hb, hs, load_acquire(&f->running),
                        grid);
            __atomic_store_n(&f->stop, 1u, __ATOMIC_RELEASE);
            CHECK(cudaDeviceSynchronize());
            continue;
          }
          guest<<<1, gt, gs, b>>>(f, 0);
          CHECK(cudaGetLastError());
          const bool ran = wait_for([&] { return load_acquire(&f->guest) != 0; }, &us);
          std::printf("%d %d %d %d %s %.1f\n", hb, hs, gt, gs, ran ? "started" : "no",
                      ran ? us : -1.0);
          __atomic_store_n(&f->stop, 1u, __ATOMIC_RELEASE);
          CHECK(cudaDeviceSynchronize());
        }
  std::printf("# resident guest first, then the holder\n");
  std::printf("guest_threads guest_smem holder_blocks_per_sm holder_smem holder_complete us\n");
  for (int gt : guest_threads)
    for (int gs : guest_smem)
      for (int hb : holder_blocks)
        for (int hs : holder_smem) {
          *f = Flags{};
          guest<<<1, gt, gs, b>>>(f, 1);
          CHECK(cudaGetLastError());
          double us = 0;
          if (!wait_for([&] { return load_acquire(&f->guest) != 0; }, &us)) {
            std::printf("%d %d - - guest-not-started -\n", gt, gs);
            __atomic_store_n(&f->stop, 1u, __ATOMIC_RELEASE);
            CHECK(cudaDeviceSynchronize());
            continue;
          }
          const auto grid = static_cast<unsigned>(hb * sms);
          holder<<<grid, 128, hs, a>>>(f);
          CHECK(cudaGetLastError());
          const bool all = wait_for([&] { return load_acquire(&f->running) == grid; }, &us);
          std::printf("%d %d %d %d %s %.1f\n", gt, gs, hb, hs, all ? "yes" : "no", all ? us : -1.0);
          __atomic_store_n(&f->stop, 1u, __ATOMIC_RELEASE);
          CHECK(cudaDeviceSynchronize());
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
  CHECK(cudaFreeHost(f));
  return 0;
}
