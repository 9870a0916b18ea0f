// How a proxy thread moves bytes between a socket and memory of this rank: directly where the
// thread can address that memory (the host backend's heap and buffers), and otherwise (GPU
// memory, no GPUDirect) through two page-locked bounce buffers, chunk by chunk, so that the copy
// of one chunk overlaps the socket transfer of the other. Signals and remote atomics go through
// Backend::word_atomic, ordered after the data copies. Each proxy thread owns one Staging (it is
// not thread-safe); the protocol above it is the same on both backends.
#pragma once

#include <cstddef>
#include <cstdint>

#include "base/deadline.hpp"
#include "bootstrap/socket.hpp"
#include "platform/backend.hpp"

namespace gnio::proxy {

class Staging {
 public:
  /// `direct`: the calling thread addresses every source and target itself (host backend);
  /// otherwise copies go through two bounce buffers of `chunk` bytes on two streams of
  /// `backend`, created here.
  Staging(platform::Backend& backend, bool direct, std::size_t chunk);
  ~Staging();
  Staging(const Staging&) = delete;
  Staging& operator=(const Staging&) = delete;

  bool direct() const { return direct_; }

  /// Writes the frame header `head` and then `bytes` read from `src` (memory of this rank) to
  /// `fd`. *err as bootstrap::send_all.
  bootstrap::IoStatus send(int fd, const void* head, std::size_t head_bytes, const void* src,
                           std::size_t bytes, const Deadline& deadline, int* err);
  /// Reads `bytes` from `fd` into `dst` (memory of this rank); on Ok every byte is in place
  /// (the copies finished), so a signal applied next is seen after them.
  bootstrap::IoStatus receive(int fd, void* dst, std::size_t bytes, const Deadline& deadline,
                              int* err);
  /// Applies `op` to the word at `word` of this rank's memory (atomic with respect to device
  /// code, with acquire-release order) and returns the old value; waits for it.
  std::uint64_t word_atomic(void* word, unsigned width, platform::WordOp op, std::uint64_t operand,
                            std::uint64_t expected);

 private:
  platform::Backend& backend_;
  bool direct_;
  std::size_t chunk_;
  char* bounce_[2] = {nullptr, nullptr};  // page-locked
  CUstream_st* cuda_[2] = {nullptr, nullptr};
  detail::HostStream* host_[2] = {nullptr, nullptr};
  std::uint64_t* old_ = nullptr;  // host-mapped: where word_atomic's kernel leaves the old value

  /// Waits for and frees what the constructor made (whatever part of it exists).
  void release() noexcept;
  StreamRef stream(int i) const { return host_[i] ? StreamRef(host_[i]) : StreamRef(cuda_[i]); }
};

}  // namespace gnio::proxy
