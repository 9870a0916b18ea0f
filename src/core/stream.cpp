// gnio::Stream: a stream of a communicator's backend, owned (created and destroyed with it).
#include "gnio/stream.hpp"

#include <utility>

#include "core/comm_impl.hpp"
#include "gnio/comm.hpp"

namespace gnio {

Stream::Stream(const Comm& comm) : comm_(comm.impl()) {
  comm_->backend->create_stream(&cuda_, &host_);
}
Stream::~Stream() {
  if (comm_) comm_->backend->destroy_stream(cuda_, host_);
}
Stream::Stream(Stream&& o) noexcept : comm_(std::move(o.comm_)), cuda_(o.cuda_), host_(o.host_) {
  o.cuda_ = nullptr;
  o.host_ = nullptr;
}
Stream& Stream::operator=(Stream&& o) noexcept {
  if (this != &o) {
    if (comm_) comm_->backend->destroy_stream(cuda_, host_);
    comm_ = std::move(o.comm_);
    cuda_ = o.cuda_;
    host_ = o.host_;
    o.cuda_ = nullptr;
    o.host_ = nullptr;
  }
  return *this;
}
void Stream::synchronize() const {
  comm_->backend->stream_synchronize(*this);
}

}  // namespace gnio
