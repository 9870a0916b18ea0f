// A PyTorch C++/CUDA extension whose kernel calls gnio's device API: each rank's block puts a
// tensor into its right neighbour's symmetric buffer and signals, then waits for its left
// neighbour's data, all inside one kernel launched on torch's current stream. Built by
// ring_shift.py with torch.utils.cpp_extension.load against gnio's headers and libgnio.
#include <ATen/cuda/CUDAContext.h>
#include <torch/extension.h>

#include <cstring>
#include <string>

#include "gnio/device.hpp"
#include "gnio/version.hpp"

namespace {

/// A value of a trivially copyable device type from the bytes Python handed over
/// (Comm.device_handle(), Comm.sym_ptr()), checked for size.
template <class T>
T from_bytes(const std::string& bytes, const char* what) {
  TORCH_CHECK(bytes.size() == sizeof(T), what, ": expected ", sizeof(T), " bytes, got ",
              bytes.size(), " (a handle from another gnio version?)");
  T value;
  std::memcpy(&value, bytes.data(), sizeof(T));
  return value;
}

__global__ void ring_shift_kernel(gnio::DeviceComm dc, gnio::SymPtr<float> dst, const float* src,
                                  std::size_t count, gnio::SymPtr<std::uint64_t> arrived,
                                  std::uint64_t round, gnio::Status* status) {
  const int right = (dc.rank() + 1) % dc.size();
  // The whole block copies; the call synchronizes the block, so the signal covers every
  // thread's part of the data.
  dc.put_signal<gnio::Block>(dst, src, count, arrived, round, gnio::SignalOp::Set, right);
  const gnio::Status s = dc.wait_signal<gnio::Block>(arrived, gnio::Cmp::Ge, round);
  if (threadIdx.x == 0) *status = s;
}

/// Launches the ring shift on torch's current stream; returns a one-element int32 tensor with
/// the kernel's gnio::Status (0 = Ok), which the caller reads after the stream is done.
torch::Tensor ring_shift(const std::string& device_comm, const std::string& dst, torch::Tensor src,
                         const std::string& arrived, int64_t round) {
  TORCH_CHECK(src.is_cuda() && src.scalar_type() == torch::kFloat32 && src.is_contiguous(),
              "src must be a contiguous float32 CUDA tensor");
  const auto dc = from_bytes<gnio::DeviceComm>(device_comm, "device_comm");
  const auto to = from_bytes<gnio::SymPtr<float>>(dst, "dst");
  const auto signal = from_bytes<gnio::SymPtr<std::uint64_t>>(arrived, "arrived");
  auto status = torch::full({1}, -1, src.options().dtype(torch::kInt32));
  ring_shift_kernel<<<1, 256, 0, at::cuda::getCurrentCUDAStream()>>>(
      dc, to, src.data_ptr<float>(), static_cast<std::size_t>(src.numel()), signal,
      static_cast<std::uint64_t>(round), reinterpret_cast<gnio::Status*>(status.data_ptr<int>()));
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return status;
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  // The handles' layout is that of these headers: the libgnio that Python loaded must be the
  // same version (its bytes would otherwise be read with another layout).
  TORCH_CHECK(std::strcmp(gnio::version_string(), GNIO_VERSION_STRING) == 0, "gnio headers ",
              GNIO_VERSION_STRING, " but libgnio ", gnio::version_string(),
              ": rebuild the extension against the installed gnio");
  m.def("ring_shift", &ring_shift,
        "put src into the right neighbour's dst, signal, wait for the left neighbour's signal");
}
