#include "transport/proxy/staging.hpp"

#include <algorithm>

#include "base/fail.hpp"
#include "gnio/device/atomic.hpp"
#include "platform/word_op.hpp"

namespace gnio::proxy {

Staging::Staging(platform::Backend& backend, bool direct, std::size_t chunk)
    : backend_(backend), direct_(direct), chunk_(chunk) {
  if (direct_) return;
  GNIO_REQUIRE(chunk_ > 0, "GNIO_PROXY_CHUNK must be positive");
  try {
    for (int i = 0; i < 2; ++i) {
      bounce_[i] = static_cast<char*>(backend_.alloc_host_mapped(chunk_));
      backend_.create_stream(&cuda_[i], &host_[i]);
    }
    old_ = static_cast<std::uint64_t*>(backend_.alloc_host_mapped(sizeof(std::uint64_t)));
  } catch (...) {
    release();
    throw;
  }
}

Staging::~Staging() {
  release();
}

void Staging::release() noexcept {
  for (int i = 0; i < 2; ++i) {
    if (cuda_[i] || host_[i]) {
      try {
        backend_.stream_synchronize(stream(i));
      } catch (...) {
        // A failed copy was reported when it happened; the buffers go either way.
      }
      backend_.destroy_stream(cuda_[i], host_[i]);
      cuda_[i] = nullptr;
      host_[i] = nullptr;
    }
    backend_.free_host_mapped(bounce_[i]);
    bounce_[i] = nullptr;
  }
  backend_.free_host_mapped(old_);
  old_ = nullptr;
}

bootstrap::IoStatus Staging::send(int fd, const void* head, std::size_t head_bytes, const void* src,
                                  std::size_t bytes, const Deadline& deadline, int* err) {
  if (direct_ || bytes == 0)
    return bootstrap::send_all(fd, head, head_bytes, src, bytes, deadline, err);
  const char* from = static_cast<const char*>(src);
  const std::size_t chunks = (bytes + chunk_ - 1) / chunk_;
  auto length = [&](std::size_t k) { return std::min(chunk_, bytes - k * chunk_); };
  auto fetch = [&](std::size_t k) {
    backend_.copy(bounce_[k % 2], from + k * chunk_, length(k), stream(static_cast<int>(k % 2)));
  };
  fetch(0);
  // The header goes out while the first chunk is being copied.
  bootstrap::IoStatus st = bootstrap::send_all(fd, head, head_bytes, nullptr, 0, deadline, err);
  for (std::size_t k = 0; k < chunks && st == bootstrap::IoStatus::Ok; ++k) {
    // Buffer (k+1)%2 held chunk k-1, which send_all has handed to the socket already.
    if (k + 1 < chunks) fetch(k + 1);
    backend_.stream_synchronize(stream(static_cast<int>(k % 2)));
    st = bootstrap::send_all(fd, bounce_[k % 2], length(k), nullptr, 0, deadline, err);
  }
  if (st != bootstrap::IoStatus::Ok)
    for (int i = 0; i < 2; ++i) backend_.stream_synchronize(stream(i));
  return st;
}

bootstrap::IoStatus Staging::receive(int fd, void* dst, std::size_t bytes, const Deadline& deadline,
                                     int* err) {
  if (direct_ || bytes == 0) return bootstrap::recv_all(fd, dst, bytes, deadline, err);
  char* to = static_cast<char*>(dst);
  bool pending[2] = {false, false};
  bootstrap::IoStatus st = bootstrap::IoStatus::Ok;
  for (std::size_t at = 0, k = 0; at < bytes && st == bootstrap::IoStatus::Ok; at += chunk_, ++k) {
    const int b = static_cast<int>(k % 2);
    const std::size_t n = std::min(chunk_, bytes - at);
    // The copy out of this buffer two chunks ago must be over before the socket refills it.
    if (pending[b]) backend_.stream_synchronize(stream(b));
    pending[b] = false;
    st = bootstrap::recv_all(fd, bounce_[b], n, deadline, err);
    if (st != bootstrap::IoStatus::Ok) break;
    backend_.copy(to + at, bounce_[b], n, stream(b));
    pending[b] = true;
  }
  for (int i = 0; i < 2; ++i)
    if (pending[i]) backend_.stream_synchronize(stream(i));
  return st;
}

std::uint64_t Staging::word_atomic(void* word, unsigned width, platform::WordOp op,
                                   std::uint64_t operand, std::uint64_t expected) {
  if (direct_)
    return platform::apply_word_op(word, width, op, operand, expected, dev::Order::AcqRel);
  backend_.word_atomic(word, width, op, operand, expected, old_, stream(0));
  backend_.stream_synchronize(stream(0));
  return dev::atomic_load(old_, dev::Order::Acquire);
}

}  // namespace gnio::proxy
