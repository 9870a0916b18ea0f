// Host-backend kernel execution: the process-wide pool of kernel threads, the dispatch of one
// grid onto it, and the dev:: cooperation functions (block/warp barriers, warp broadcast, shared
// memory) that kernels call through gnio/device/thread.hpp.
//
// Design:
// * A worker is a detached pthread that sleeps on its own 32-bit sequence word (a futex, see
//   base/futex.hpp). To give it a job the dispatcher writes the job, then increments the word
//   with release and wakes it; the worker acquires the word, reads the job, runs one kernel thread.
// * A launch takes all grid x block workers from the pool in one step under the pool lock, and
//   only then wakes them. So every thread of a launch is guaranteed to be running before any of
//   them can wait at a barrier that needs the others: the pool never deadlocks on barriers, no
//   matter how many launches run at the same time on different streams.
// * The pool grows on demand up to a limit (4 x GNIO_HOST_MAX_THREADS, at least 4096), and
//   shrinks again: a worker idle for kIdleRetire exits while more than kKeepThreads remain. So
//   one big launch does not leave thousands of threads behind for the rest of the process: their
//   stacks cost memory, and under GCC 12's ThreadSanitizer every synchronisation costs time in
//   proportion to the number of live threads (measured: 44 ms per 512-thread launch with a
//   512-thread pool, 101 ms with 2048).
// * The dispatcher (the stream's worker thread) sleeps until the last kernel thread finishes and
//   then returns all workers to the pool at once, so the pool lock is taken twice per launch, not
//   once per thread.
#include "platform/host/host_launch.hpp"

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <new>
#include <vector>

#include "base/fail.hpp"
#include "base/futex.hpp"
#include "gnio/config.hpp"
#include "gnio/log.hpp"
#include "platform/host/host_stream.hpp"

namespace gnio::detail {

thread_local HostThreadContext* t_host_thread = nullptr;

}  // namespace gnio::detail

namespace gnio::platform::host {
namespace {

/// Stack of each kernel thread. GPU threads have KiB-sized stacks, so kernel code does not put
/// large arrays on the stack; 1 MiB leaves room for sanitizer instrumentation and gtest asserts
/// while keeping 4096 threads at 4 GiB of (lazily committed) address space instead of 32 GiB.
constexpr std::size_t kWorkerStackBytes = std::size_t{1} << 20;
/// Lower bound of the pool's thread limit: room for four maximal (1024-thread) launches in flight
/// at once on different streams.
constexpr std::size_t kMinPoolLimit = 4096;
/// A worker without work for this long exits (see kKeepThreads). Long enough that a test or
/// application launching now and then reuses its threads rather than recreating them.
constexpr std::chrono::seconds kIdleRetire{3};
/// Idle workers never retire below this pool size: small launches always find threads ready.
constexpr std::size_t kKeepThreads = 64;

struct Launch;

/// What one worker does next: kernel thread `index` (block = index / block size) of `launch`.
struct Job {
  Launch* launch = nullptr;
  std::size_t index = 0;
};

/// A pooled kernel thread and its mailbox.
struct Worker {
  /// Bumped (release) by the dispatcher after writing `job`; the worker sleeps while it is
  /// unchanged.
  std::atomic<std::uint32_t> sequence{0};
  Job job;
};

/// One kernel launch in flight. Lives on the dispatcher's stack until every thread finished.
struct Launch {
  const std::function<void()>* body = nullptr;
  /// The workers running this launch, worker i running kernel thread i.
  Worker* const* workers = nullptr;
  unsigned grid = 0;
  unsigned block = 0;
  detail::HostStream* stream = nullptr;
  std::unique_ptr<detail::HostBlock[]> blocks;
  /// Shared memory of all blocks (calloc: zeroed, 16-byte aligned; large sizes are mmap-backed
  /// so untouched shared memory costs nothing).
  std::unique_ptr<unsigned char, decltype(&std::free)> shared{nullptr, &std::free};

  /// Threads that have not returned yet.
  std::atomic<std::size_t> remaining{0};
  /// The first exception a thread threw; `error_claimed` elects which thread stores it.
  std::atomic<bool> error_claimed{false};
  std::exception_ptr error;

  /// Completion: the last thread sets `done` under `done_mu`. A mutex and condition variable
  /// (not an atomic wait) because the dispatcher destroys this object as soon as it wakes, and
  /// the notifier must not touch it after that; unlock is its last access.
  std::mutex done_mu;
  std::condition_variable done_cv;
  bool done = false;
};

/// Hands worker `i` of `launch` its job and wakes it. The release increment publishes the job
/// and everything the dispatcher prepared (blocks, barriers, shared memory) to the worker.
void start_worker(Launch& launch, std::size_t i) {
  Worker* w = launch.workers[i];
  w->job = Job{&launch, i};
  w->sequence.fetch_add(1, std::memory_order_release);
  futex_wake_one(w->sequence);
}

/// Runs one kernel thread, then leaves its barriers and reports completion.
void run_kernel_thread(const Job& job) {
  Launch& launch = *job.launch;
  const unsigned block = static_cast<unsigned>(job.index / launch.block);
  const unsigned thread = static_cast<unsigned>(job.index % launch.block);
  detail::HostBlock& blk = launch.blocks[block];
  detail::HostThreadContext ctx{thread, block, launch.block, launch.grid, &blk};
  detail::t_host_thread = &ctx;
  detail::t_running_stream = launch.stream;
  try {
    (*launch.body)();
  } catch (...) {
    if (!launch.error_claimed.exchange(true, std::memory_order_acq_rel))
      launch.error = std::current_exception();
  }
  detail::t_host_thread = nullptr;
  detail::t_running_stream = nullptr;
  // A returned GPU thread no longer holds up __syncthreads/__syncwarp; the same here, so a thread
  // that exits early (or throws) does not leave the rest of its block stuck at a barrier.
  blk.warp_barriers[thread / kWarpSize].arrive_and_drop();
  blk.block_barrier.arrive_and_drop();
  if (launch.remaining.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    std::lock_guard<std::mutex> lock(launch.done_mu);
    launch.done = true;
    launch.done_cv.notify_one();
  }
  // `launch` may be gone from here on.
}

/// The process-wide pool of kernel threads. Created on first use and never destroyed: workers
/// are detached and may still be asleep on their mailboxes while static destructors run.
class WorkerPool {
 public:
  static WorkerPool& instance() {
    static WorkerPool* pool = [] {
      auto* p = new WorkerPool();
      instance_unchecked() = p;  // before the handlers below can run
      // A forked child has none of the parent's threads; without this it would hand jobs to
      // workers that do not exist and wait forever. The lock is held across fork() so the child
      // never inherits the bookkeeping half-updated.
      pthread_atfork([] { instance_unchecked()->mu_.lock(); },
                     [] { instance_unchecked()->mu_.unlock(); },
                     [] {
                       WorkerPool* self = instance_unchecked();
                       self->idle_.clear();  // the Worker objects are leaked on purpose: their
                       self->threads_ = 0;   // threads are gone and nobody can reach them
                       self->mu_.unlock();
                     });
      return p;
    }();
    return *pool;
  }

  /// Takes `n` workers, creating threads as needed; all-or-nothing. Waits (warning every few
  /// seconds) while the pool is at its limit and other launches hold the workers it needs.
  void acquire(std::size_t n, std::vector<Worker*>& out) {
    out.clear();
    out.reserve(n);
    std::unique_lock<std::mutex> lock(mu_);
    const auto start = std::chrono::steady_clock::now();
    auto warn_after = std::chrono::seconds(5);
    // With no other launch holding workers, one launch always runs, even above the limit.
    while (idle_.size() + (limit_ > threads_ ? limit_ - threads_ : 0) < n &&
           threads_ != idle_.size()) {
      if (returned_cv_.wait_for(lock, std::chrono::milliseconds(500)) == std::cv_status::timeout &&
          std::chrono::steady_clock::now() - start > warn_after) {
        GNIO_WARN(Device,
                  "host kernel of %zu threads waits for the kernel thread pool: %zu of %zu "
                  "threads busy in other launches; if those wait for this one, raise "
                  "GNIO_HOST_MAX_THREADS (the pool holds 4x that) or launch smaller grids",
                  n, threads_ - idle_.size(), limit_);
        warn_after *= 2;
      }
    }
    // Last in, first out: the most recently used workers are reused, so the rest stay idle long
    // enough to retire when the pool is bigger than the load needs.
    const std::size_t reuse = std::min(n, idle_.size());
    out.assign(idle_.end() - static_cast<std::ptrdiff_t>(reuse), idle_.end());
    idle_.resize(idle_.size() - reuse);
    while (out.size() < n) {
      Worker* w = spawn_locked();
      if (!w) {
        const int err = last_spawn_error_;
        const std::size_t started = out.size();
        idle_.insert(idle_.end(), out.begin(), out.end());
        out.clear();
        fail(ErrorClass::SystemError,
             "host backend: cannot start kernel thread %zu of a %zu-thread launch (%zu threads "
             "alive): %s; launch a smaller grid or block, or raise the thread limit (ulimit -u)",
             started + 1, n, threads_, std::strerror(err));
      }
      out.push_back(w);
    }
  }

  /// Returns workers whose jobs have all finished.
  void release(const std::vector<Worker*>& workers) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      idle_.insert(idle_.end(), workers.begin(), workers.end());
    }
    returned_cv_.notify_all();
  }

  HostPoolStats stats() {
    std::lock_guard<std::mutex> lock(mu_);
    return {threads_, idle_.size(), limit_};
  }

 private:
  WorkerPool() {
    const long long per_launch = config_int("GNIO_HOST_MAX_THREADS");
    limit_ = std::max<std::size_t>(kMinPoolLimit,
                                   4 * static_cast<std::size_t>(std::max(per_launch, 1LL)));
  }

  static WorkerPool*& instance_unchecked() {
    static WorkerPool* p = nullptr;
    return p;
  }

  /// Starts one worker thread; nullptr (and last_spawn_error_) when the system refuses.
  Worker* spawn_locked() {
    auto* w = new Worker();
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, kWorkerStackBytes);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_t tid;
    const int rc = pthread_create(&tid, &attr, &WorkerPool::worker_main, w);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
      delete w;
      last_spawn_error_ = rc;
      return nullptr;
    }
    ++threads_;
    return w;
  }

  /// Removes an idle worker from the pool so its thread can exit. False when the pool is small
  /// enough already, or when a launch has just taken the worker (its job is on the way).
  bool retire(Worker* w) {
    std::lock_guard<std::mutex> lock(mu_);
    if (threads_ <= kKeepThreads) return false;
    auto it = std::find(idle_.begin(), idle_.end(), w);
    if (it == idle_.end()) return false;
    idle_.erase(it);
    --threads_;
    return true;
  }

  static void* worker_main(void* arg) {
    auto* w = static_cast<Worker*>(arg);
    pthread_setname_np(pthread_self(), "gnio-kernel");
    std::uint32_t seen = 0;
    for (;;) {
      if (!futex_wait_while_for(w->sequence, seen, kIdleRetire)) {
        // Nobody can reach a worker that is no longer in the idle list: safe to delete.
        if (instance().retire(w)) {
          delete w;
          return nullptr;
        }
        continue;
      }
      seen = w->sequence.load(std::memory_order_acquire);
      // Copy the job: once this thread reports completion the dispatcher may reuse the mailbox.
      const Job job = w->job;
      run_kernel_thread(job);
    }
    return nullptr;
  }

  std::mutex mu_;
  /// Signalled when workers come back; launches waiting for the limit re-check.
  std::condition_variable returned_cv_;
  std::vector<Worker*> idle_;
  std::size_t threads_ = 0;
  std::size_t limit_ = kMinPoolLimit;
  int last_spawn_error_ = 0;
};

}  // namespace

void run_host_kernel(const detail::HostTask& task, detail::HostStream* stream) {
  const unsigned grid = task.dims.grid;
  const unsigned block = task.dims.block;
  const std::size_t threads = static_cast<std::size_t>(grid) * block;
  GNIO_ASSERT(grid >= 1 && block >= 1);

  Launch launch;
  launch.body = &task.body;
  launch.grid = grid;
  launch.block = block;
  launch.stream = stream;
  launch.remaining.store(threads, std::memory_order_relaxed);

  // Every block gets at least 16 bytes so shared_memory() is a valid, distinct pointer even for
  // shared_bytes == 0 (as on the GPU); 64-byte stride keeps blocks off each other's cache lines.
  const std::size_t stride =
      (std::max<std::size_t>(task.dims.shared_bytes, 16) + 63) & ~std::size_t{63};
  launch.shared.reset(static_cast<unsigned char*>(std::calloc(grid, stride)));
  if (!launch.shared) throw std::bad_alloc();

  const unsigned warps = (block + kWarpSize - 1) / kWarpSize;
  launch.blocks = std::make_unique<detail::HostBlock[]>(grid);
  for (unsigned b = 0; b < grid; ++b) {
    detail::HostBlock& blk = launch.blocks[b];
    blk.threads = block;
    blk.shared = launch.shared.get() + b * stride;
    blk.block_barrier.init(block);
    blk.warp_barriers = std::make_unique<HostBarrier[]>(warps);
    for (unsigned w = 0; w < warps; ++w) blk.warp_barriers[w].init(blk.lanes_in_warp(w));
    blk.broadcast_slots = std::make_unique<std::uint64_t[]>(2 * warps);
    blk.broadcast_rounds = std::make_unique<std::uint32_t[]>(block);
    blk.warp_votes = std::make_unique<std::atomic<std::uint32_t>[]>(3 * warps);
    blk.block_vote_rounds = std::make_unique<std::uint32_t[]>(block);
    blk.warp_vote_rounds = std::make_unique<std::uint32_t[]>(block);
  }

  // All workers are taken before any is woken (see the design note at the top).
  thread_local std::vector<Worker*> workers;
  WorkerPool& pool = WorkerPool::instance();
  pool.acquire(threads, workers);
  launch.workers = workers.data();
  // One by one from here. A wake tree (each woken worker waking two more) was tried: on 2
  // oversubscribed cores it cost more CPU time per launch, not less (more threads awake at once
  // competing with the ones that have work), so the simple loop stays.
  for (std::size_t i = 0; i < threads; ++i) start_worker(launch, i);
  {
    std::unique_lock<std::mutex> lock(launch.done_mu);
    launch.done_cv.wait(lock, [&] { return launch.done; });
  }
  pool.release(workers);
  if (launch.error) std::rethrow_exception(launch.error);
}

HostPoolStats host_pool_stats() {
  return WorkerPool::instance().stats();
}

}  // namespace gnio::platform::host

namespace gnio::detail {

void host_block_sync(HostBlock* b) {
  b->block_barrier.arrive_and_wait();
}

void host_warp_sync(HostBlock* b, unsigned warp) {
  b->warp_barriers[warp].arrive_and_wait();
}

void* host_block_shared(HostBlock* b) {
  return b->shared;
}

std::uint64_t host_warp_broadcast(HostBlock* b, unsigned warp, unsigned lane, std::uint64_t v,
                                  unsigned src_lane) {
  // __shfl_sync reads lane (src % width); a lane beyond a partial warp does not exist on the GPU
  // (undefined result) - here every lane of the warp gets the same clear error instead.
  src_lane %= kWarpSize;
  const unsigned lanes = b->lanes_in_warp(warp);
  GNIO_REQUIRE(src_lane < lanes,
               "dev::warp_broadcast: source lane %u is not in warp %u, which has %u lanes (block "
               "of %u threads); broadcast from a lane that exists",
               src_lane, warp, lanes, b->threads);
  const unsigned t = warp * kWarpSize + lane;
  std::uint64_t& slot = b->broadcast_slots[2 * warp + (b->broadcast_rounds[t]++ & 1)];
  if (lane == src_lane) slot = v;
  // The barrier orders the source lane's write before every lane's read below.
  b->warp_barriers[warp].arrive_and_wait();
  return slot;
}

namespace {

/// One vote of a group (see HostBlock's votes): ORs `bit` into the vote's slot when `p` holds,
/// meets the group at `barrier`, reads what every member voted; `clears` (one member of the
/// group) empties the slot vote k + 2 will use.
std::uint32_t host_vote(std::atomic<std::uint32_t>* slots, std::uint32_t* rounds, std::uint32_t bit,
                        bool p, platform::host::HostBarrier& barrier, bool clears) {
  const std::uint32_t k = (*rounds)++;
  if (p) slots[k % 3].fetch_or(bit, std::memory_order_relaxed);
  barrier.arrive_and_wait();  // orders every vote before every read (and like a group barrier)
  const std::uint32_t votes = slots[k % 3].load(std::memory_order_relaxed);
  if (clears) slots[(k + 2) % 3].store(0, std::memory_order_relaxed);
  return votes;
}

}  // namespace

bool host_block_any(HostBlock* b, unsigned thread, bool p) {
  return host_vote(b->block_votes, &b->block_vote_rounds[thread], 1u, p, b->block_barrier,
                   thread == 0) != 0;
}

std::uint32_t host_warp_ballot(HostBlock* b, unsigned warp, unsigned lane, bool p) {
  return host_vote(&b->warp_votes[3 * warp], &b->warp_vote_rounds[warp * kWarpSize + lane],
                   1u << lane, p, b->warp_barriers[warp], lane == 0);
}

}  // namespace gnio::detail
