// gnio::Semaphore: the memory behind a SemaphoreView (<gnio/device/semaphore.hpp>): `items`
// status words and info records in page-locked host memory that kernels on the communicator's
// device and CPU threads both reach at the same address. Every item starts Free.
//
//   gnio::Semaphore sem(comm, 64, sizeof(Report));
//   launch a kernel with sem.device_handle() ...;  CPU: sem.device_handle().wait(i,
//   ItemStatus::Ready, ...)
#pragma once

#include <cstdint>
#include <memory>

#include "gnio/comm.hpp"
#include "gnio/device/semaphore.hpp"

namespace gnio {

class Semaphore {
 public:
  /// `items` (1..65536) items of `info_bytes` (0..65536) each. Throws InvalidArgument outside
  /// those ranges.
  Semaphore(Comm& comm, std::uint32_t items, std::uint32_t info_bytes);
  ~Semaphore();
  Semaphore(const Semaphore&) = delete;
  Semaphore& operator=(const Semaphore&) = delete;

  /// The view for kernels and host threads (valid while this object lives).
  SemaphoreView device_handle() const { return view_; }
  /// Same as device_handle() (its name before the convention; kept for existing code).
  SemaphoreView view() const { return view_; }

 private:
  std::shared_ptr<detail::CommImpl> comm_;
  void* memory_ = nullptr;
  SemaphoreView view_;
};

}  // namespace gnio
