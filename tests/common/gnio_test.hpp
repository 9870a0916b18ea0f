// Shared helpers of gnio's multi-rank tests: one communicator per test process (created from the
// launcher's environment on first use), exact data patterns, and kernel-launch shorthands that
// work on both backends.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "gnio/comm.hpp"
#include "gnio/device.hpp"
#include "gnio/launch.hpp"

/// TEST(suite, name) whose body is a free function: nvcc refuses extended __host__ __device__
/// lambdas inside gtest's private TestBody, so tests that launch lambdas and are also built as GPU
/// variants use this. Use it in a named namespace (the body needs external linkage).
#define GNIO_KERNEL_TEST(suite, name) \
  void suite##_##name##_body();       \
  TEST(suite, name) {                 \
    suite##_##name##_body();          \
  }                                   \
  void suite##_##name##_body()

namespace gnio_test {

/// The process's communicator and stream: created on first use, destroyed (collectively) after
/// the last test, so no thread or mapping outlives the test program.
struct TestState {
  std::unique_ptr<gnio::Comm> comm;
  std::unique_ptr<gnio::Stream> stream;
};
inline TestState& state() {
  static TestState s;
  return s;
}

/// The process's communicator; created on first use from gnio-run's environment.
inline gnio::Comm& comm() {
  if (!state().comm) state().comm = std::make_unique<gnio::Comm>(gnio::Comm::from_env());
  return *state().comm;
}

/// The process's stream on the communicator's backend.
inline gnio::Stream& stream() {
  if (!state().stream) state().stream = std::make_unique<gnio::Stream>(comm());
  return *state().stream;
}

/// Destroys the stream and the communicator after the last test (every rank runs the same tests
/// in the same order, so every rank gets here and the collective teardown meets).
class CommTeardown : public ::testing::Environment {
 public:
  void TearDown() override {
    state().stream.reset();
    state().comm.reset();
  }
};
inline const bool kCommTeardownRegistered =
    (::testing::AddGlobalTestEnvironment(new CommTeardown), true);

/// A byte that depends on who wrote it and where; never constant over a buffer and never the
/// poison value 0xA5 for small i ranges checked together.
GNIO_HD_INLINE std::uint8_t pattern_byte(int rank, std::size_t i, unsigned salt = 0) {
  std::uint32_t v = static_cast<std::uint32_t>(i) * 2654435761u +
                    static_cast<std::uint32_t>(rank + 1) * 40503u + salt * 97u;
  std::uint8_t b = static_cast<std::uint8_t>(v >> 13);
  return b == 0xA5 ? 0x5A : b;
}

inline constexpr std::uint8_t kPoison = 0xA5;

/// Threads per block that make cooperation group `Coop` one whole group (Block: 128).
template <class Coop>
unsigned group_threads() {
  if constexpr (std::is_same_v<Coop, gnio::Thread>)
    return 1;
  else if constexpr (std::is_same_v<Coop, gnio::Block>)
    return 128;
  else
    return Coop::size();
}

/// Host-side copy helpers (device memory on the cuda backend).
inline void to_device(void* dst, const void* src, std::size_t n) {
  comm().copy(dst, src, n, stream());
  comm().synchronize(stream());
}
inline void to_host(void* dst, const void* src, std::size_t n) {
  comm().copy(dst, src, n, stream());
  comm().synchronize(stream());
}

/// Counts positions where `got` differs from `expected` and reports the first few.
inline std::size_t count_wrong(const std::vector<std::uint8_t>& got,
                               const std::vector<std::uint8_t>& expected, const std::string& what) {
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (got[i] != expected[i]) {
      if (wrong < 5)
        ADD_FAILURE() << what << ": byte " << i << " is " << int(got[i]) << ", expected "
                      << int(expected[i]);
      ++wrong;
    }
  }
  return wrong;
}

}  // namespace gnio_test
