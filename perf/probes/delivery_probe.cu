// gnio-delivery-probe: what a proxy thread pays to hand a received signal to its GPU, measured with
// raw CUDA (no gnio). Without GPUDirect the host cannot update a word of device memory atomically
// with respect to kernels, so something on the GPU must apply a remote `signal(Add)`:
//
//   launch      a one-thread kernel per signal (what Backend::deliver does today)
//   writevalue  cuStreamWriteValue64 on a stream: no SM at all, but a store (Set), not an Add
//   agent       a resident one-warp kernel that polls a ring of descriptors in page-locked host
//               memory and applies each with a system-scope atomic: no launch per signal
//
// each on an otherwise idle GPU ("idle") and beside a resident kernel that polls the signal word
// the way DeviceComm::wait_signal does ("waiter": one block; "full": two blocks of 1024 threads
// per SM, so no other block finds room). Figures per variant and condition:
//
//   latency  host posts one signal and spins until the GPU reports it applied (a completion word
//            in host memory written after the signal); median of ITERS, in us
//   rate     host posts ITERS signals back to back, then waits for the last; signals per us
//
//   gnio-delivery-probe [ITERS]      (default 2000; GPU 0)
//
// Run it once plainly and once as a client of an MPS daemon: both ranks of a one-GPU job run
// under MPS, and kernel launches beside a resident kernel are what the proxy's deliveries meet.
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cuda/atomic>
#include <vector>

namespace {

#define CHECK(call)                                                                           \
  do {                                                                                        \
    cudaError_t err_ = (call);                                                                \
    if (err_ != cudaSuccess) {                                                                \
      std::fprintf(stderr, "gnio-delivery-probe: %s: %s\n", #call, cudaGetErrorString(err_)); \
      std::exit(1);                                                                           \
    }                                                                                         \
  } while (0)
#define CHECK_CU(call)                                                             \
  do {                                                                             \
    CUresult err_ = (call);                                                        \
    if (err_ != CUDA_SUCCESS) {                                                    \
      const char* s_ = nullptr;                                                    \
      cuGetErrorString(err_, &s_);                                                 \
      std::fprintf(stderr, "gnio-delivery-probe: %s: %s\n", #call, s_ ? s_ : "?"); \
      std::exit(1);                                                                \
    }                                                                              \
  } while (0)

using Clock = std::chrono::steady_clock;
using SysWord = cuda::atomic_ref<unsigned long long, cuda::thread_scope_system>;

/// A signal for the agent: add `operand` to `*word`; `seq` = ticket + 1 once the slot is filled.
struct alignas(32) Desc {
  unsigned long long* word;
  unsigned long long operand;
  unsigned long long seq;
};

/// What host and GPU share, in page-locked host memory.
struct Shared {
  unsigned long long done;  // the last signal applied (1-based)
  unsigned long long stop;  // host -> resident kernels: end now
};

constexpr unsigned kRing = 1024;

__global__ void apply_one(unsigned long long* word, unsigned long long* done,
                          unsigned long long ticket) {
  SysWord(*word).fetch_add(1, cuda::memory_order_acq_rel);
  SysWord(*done).store(ticket, cuda::memory_order_release);
}

/// One warp: lane i looks at slot next + i; the ready prefix is applied, one lane each, and the
/// completion word moves past it.
__global__ void agent(Desc* ring, Shared* sh) {
  const unsigned lane = threadIdx.x;
  unsigned long long next = 0;
  unsigned idle = 0;
  for (;;) {
    Desc* d = ring + ((next + lane) % kRing);
    const bool ready = SysWord(d->seq).load(cuda::memory_order_acquire) == next + lane + 1;
    const unsigned mask = __ballot_sync(~0u, ready);
    const unsigned count = __ffs(~mask) ? __ffs(~mask) - 1 : 32;  // ready slots in a row
    if (count == 0) {
      if (++idle % 1024 == 0 && SysWord(sh->stop).load(cuda::memory_order_relaxed) != 0) return;
      continue;
    }
    idle = 0;
    if (lane < count) SysWord(*d->word).fetch_add(d->operand, cuda::memory_order_acq_rel);
    __syncwarp();
    next += count;
    if (lane == 0) SysWord(sh->done).store(next, cuda::memory_order_release);
  }
}

/// DeviceComm::wait_signal's shape: thread 0 of each block polls with acquire loads, sleeping
/// 100 ns per poll after 1024; the block's other threads wait at the barrier.
__global__ void waiter(unsigned long long* word, unsigned long long target, Shared* sh) {
  if (threadIdx.x == 0)
    for (unsigned it = 0; SysWord(*word).load(cuda::memory_order_acquire) < target; ++it) {
      if (it % 1024 == 1023 && SysWord(sh->stop).load(cuda::memory_order_relaxed)) break;
      if (it > 1024) __nanosleep(100);
    }
  __syncthreads();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

/// Spins until *done >= ticket; false after 2 s without it.
bool await(const unsigned long long* done, unsigned long long ticket) {
  const auto until = Clock::now() + std::chrono::seconds(2);
  while (std::atomic_ref<unsigned long long>(*const_cast<unsigned long long*>(done))
             .load(std::memory_order_acquire) < ticket)
    if (Clock::now() > until) return false;
  return true;
}

enum class Variant { Launch, WriteValue, Agent };
const char* name(Variant v) {
  return v == Variant::Launch ? "launch" : v == Variant::WriteValue ? "writevalue" : "agent";
}

struct Rig {
  int sms = 0;
  unsigned long long* word = nullptr;  // device memory: the signal
  Shared* sh = nullptr;                // host memory
  Desc* ring = nullptr;                // host memory
  cudaStream_t post = nullptr, resident = nullptr, agent_stream = nullptr;
};

/// Posts signal `ticket` (1-based) by `v`.
void post(const Rig& g, Variant v, unsigned long long ticket) {
  switch (v) {
    case Variant::Launch: apply_one<<<1, 1, 0, g.post>>>(g.word, &g.sh->done, ticket); break;
    case Variant::WriteValue:
      CHECK_CU(cuStreamWriteValue64(g.post, reinterpret_cast<CUdeviceptr>(g.word), ticket, 0));
      CHECK_CU(cuStreamWriteValue64(g.post, reinterpret_cast<CUdeviceptr>(&g.sh->done), ticket, 0));
      break;
    case Variant::Agent: {
      // Ring space: ticket - kRing was applied.
      if (ticket > kRing) (void)await(&g.sh->done, ticket - kRing);
      Desc& d = g.ring[(ticket - 1) % kRing];
      d.word = g.word;
      d.operand = 1;
      std::atomic_ref<unsigned long long>(d.seq).store(ticket, std::memory_order_release);
      break;
    }
  }
}

void run(Rig& g, Variant v, const char* condition, unsigned iters) {
  CHECK(cudaMemset(g.word, 0, sizeof(*g.word)));
  CHECK(cudaDeviceSynchronize());
  g.sh->done = 0;
  g.sh->stop = 0;
  for (unsigned i = 0; i < kRing; ++i) g.ring[i].seq = 0;
  std::atomic_thread_fence(std::memory_order_seq_cst);
  // Two passes of `iters` signals: latency (one at a time), then rate (back to back).
  const unsigned long long total = 2ull * iters;
  const bool full = condition[0] == 'f';
  // The agent is resident first, as it would be from the communicator's creation on.
  if (v == Variant::Agent) {
    agent<<<1, 32, 0, g.agent_stream>>>(g.ring, g.sh);
    CHECK(cudaGetLastError());
  }
  if (condition[0] != 'i') {
    // The resident kernel waits for the last signal (the writevalue variant stores, so the word
    // holds the last ticket; the others add 1 each: also the ticket count).
    waiter<<<full ? 2 * g.sms : 1, full ? 1024 : 32, 0, g.resident>>>(g.word, total, g.sh);
    CHECK(cudaGetLastError());
  }
  std::vector<double> lat;
  bool stalled = false;
  unsigned long long t = 0;
  for (unsigned i = 0; i < iters && !stalled; ++i) {
    const auto t0 = Clock::now();
    post(g, v, ++t);
    stalled = !await(&g.sh->done, t);
    lat.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
  double rate = 0;
  if (!stalled) {
    const auto t0 = Clock::now();
    for (unsigned i = 0; i < iters; ++i) post(g, v, ++t);
    stalled = !await(&g.sh->done, t);
    rate = iters / std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
  }
  std::atomic_ref<unsigned long long>(g.sh->stop).store(1, std::memory_order_release);
  CHECK(cudaDeviceSynchronize());
  unsigned long long word = 0;
  CHECK(cudaMemcpy(&word, g.word, sizeof(word), cudaMemcpyDeviceToHost));
  const bool right = stalled || word == t;
  if (stalled)
    std::printf("%-11s %-7s  stalled: no signal applied within 2 s (at %llu of %llu)\n", name(v),
                condition, g.sh->done, t);
  else
    std::printf("%-11s %-7s  %8.2f us  %8.3f /us  %s\n", name(v), condition, median(lat), rate,
                right ? "ok" : "WRONG");
  if (!right) std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  const unsigned iters = argc > 1 ? static_cast<unsigned>(std::atoi(argv[1])) : 2000;
  if (iters == 0) {
    std::fprintf(stderr, "usage: gnio-delivery-probe [ITERS > 0]\n");
    return 2;
  }
  Rig g;
  CHECK(cudaSetDevice(0));
  cudaDeviceProp prop{};
  CHECK(cudaGetDeviceProperties(&prop, 0));
  g.sms = prop.multiProcessorCount;
  CHECK(cudaMalloc(&g.word, sizeof(*g.word)));
  CHECK(cudaHostAlloc(&g.sh, sizeof(Shared), cudaHostAllocMapped));
  CHECK(cudaHostAlloc(&g.ring, kRing * sizeof(Desc), cudaHostAllocMapped));
  CHECK(cudaStreamCreateWithFlags(&g.post, cudaStreamNonBlocking));
  CHECK(cudaStreamCreateWithFlags(&g.resident, cudaStreamNonBlocking));
  CHECK(cudaStreamCreateWithFlags(&g.agent_stream, cudaStreamNonBlocking));
  // Load every kernel now (lazy loading would wait for the resident kernels).
  cudaFuncAttributes attr{};
  CHECK(cudaFuncGetAttributes(&attr, apply_one));
  CHECK(cudaFuncGetAttributes(&attr, agent));
  CHECK(cudaFuncGetAttributes(&attr, waiter));
  std::printf(
      "# gnio-delivery-probe: %s, %d SMs, %u signals per figure; latency = post to the "
      "GPU's completion word (median), rate = back to back\n",
      prop.name, g.sms, iters);
  std::printf("# variant    beside   latency      rate      check\n");
  for (Variant v : {Variant::Launch, Variant::WriteValue, Variant::Agent})
    for (const char* condition : {"idle", "waiter", "full"}) run(g, v, condition, iters);
  return 0;
}
