// Helpers shared by the host-backend unit tests: a backend with one stream, and error-class
// assertions.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "gnio/error.hpp"
#include "gnio/stream.hpp"
#include "platform/backend.hpp"

namespace gnio_host_test {

/// The class of the gnio::Error that `f` throws; fails the test if it throws nothing or
/// something else. `message` (if given) receives the error text.
template <class F>
gnio::ErrorClass error_class_of(F&& f, std::string* message = nullptr) {
  try {
    f();
  } catch (const gnio::Error& e) {
    if (message) *message = e.what();
    return e.error_class();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected a gnio::Error, got: " << e.what();
    return gnio::ErrorClass::Internal;
  }
  ADD_FAILURE() << "expected a gnio::Error, nothing was thrown";
  return gnio::ErrorClass::Internal;
}

/// A host backend and one stream on it; the stream is destroyed (drained) before the backend.
class HostBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    backend_ = gnio::platform::make_host_backend();
    CUstream_st* cuda = nullptr;
    backend_->create_stream(&cuda, &host_);
    ASSERT_EQ(cuda, nullptr);
    ASSERT_NE(host_, nullptr);
  }
  void TearDown() override {
    if (host_) backend_->destroy_stream(nullptr, host_);
    backend_.reset();
  }

  /// The test's stream as the launch API takes it.
  gnio::StreamRef stream() const { return gnio::StreamRef(host_); }
  /// Waits for the stream; rethrows a task's error.
  void sync() { backend_->stream_synchronize(stream()); }

  std::unique_ptr<gnio::platform::Backend> backend_;
  gnio::detail::HostStream* host_ = nullptr;
};

}  // namespace gnio_host_test
