// The CUDA IPC layout of the symmetric heap (GNIO_MEM_MAP=ipc, or auto where the driver refuses
// fd-shared VMM memory): one cudaMalloc of GNIO_HEAP_SIZE per rank, its legacy IPC handle
// allgathered through the bootstrap, and node peers' heaps opened wherever the driver maps them.
// Kernels find a peer's heap through a device-memory table (DeviceComm::heap_peer_base_). The
// heap cannot grow: cudaMalloc'ed memory cannot be extended in place.
#include <cstring>
#include <utility>

#include "base/fail.hpp"
#include "gnio/log.hpp"
#include "memory/symmetric_heap.hpp"

namespace gnio {

namespace {

class IpcLayout final : public HeapLayout {
 public:
  IpcLayout(platform::Backend& backend, Bootstrap& bootstrap, const std::vector<int>& node_ranks,
            int local_index, std::size_t bytes)
      : backend_(backend),
        bootstrap_(bootstrap),
        local_index_(local_index),
        bases_(node_ranks.size(), nullptr) {
    const std::size_t gran = backend_.granularity();
    bytes_ = (bytes + gran - 1) / gran * gran;

    // 1. This rank's heap.
    std::exception_ptr err;
    platform::IpcAllocation own;
    try {
      own = backend_.ipc_alloc(bytes_);
    } catch (...) {
      err = std::current_exception();
    }
    agree_step(bootstrap_, err, "allocating the CUDA IPC symmetric heap",
               [&] { backend_.ipc_free(own.ptr); });
    own_ = own.ptr;
    bases_[local_index_] = static_cast<char*>(own_);

    // 2. Every rank's handle (only node peers' are used; the bootstrap has no node-only
    // allgather, and 64 bytes per rank once per communicator is nothing).
    std::vector<platform::IpcHandle> handles(bootstrap_.size());
    handles[bootstrap_.rank()] = own.handle;
    try {
      bootstrap_.allgather(handles.data(), sizeof(platform::IpcHandle));
    } catch (...) {
      backend_.ipc_free(own_);
      throw;
    }

    // 3. Open the node peers' heaps and publish their bases to kernels.
    try {
      for (std::size_t i = 0; i < node_ranks.size(); ++i)
        if (static_cast<int>(i) != local_index_)
          bases_[i] = static_cast<char*>(backend_.ipc_open(handles[node_ranks[i]]));
      std::vector<std::uint64_t> table(bases_.size());
      for (std::size_t i = 0; i < bases_.size(); ++i)
        table[i] = reinterpret_cast<std::uintptr_t>(bases_[i]);
      table_ =
          static_cast<std::uint64_t*>(backend_.alloc_device(sizeof(std::uint64_t) * table.size()));
      CUstream_st* stream = nullptr;
      backend_.create_stream(&stream, nullptr);
      try {
        backend_.copy(table_, table.data(), sizeof(std::uint64_t) * table.size(),
                      StreamRef(stream));
        backend_.stream_synchronize(StreamRef(stream));
      } catch (...) {
        backend_.destroy_stream(stream, nullptr);
        throw;
      }
      backend_.destroy_stream(stream, nullptr);
    } catch (...) {
      err = std::current_exception();
    }
    agree_step(bootstrap_, err, "opening node peers' CUDA IPC heaps", [&] { release(true); });
    GNIO_INFO(Memory,
              "symmetric heap (ipc): %zu MiB per rank at %p, %zu node peers opened through CUDA "
              "IPC; fixed size (GNIO_HEAP_SIZE)",
              bytes_ >> 20, own_, bases_.size() - 1);
  }

  ~IpcLayout() override { teardown(false); }

  HeapMapping mapping() const noexcept override { return HeapMapping::Ipc; }
  std::size_t mapped() const noexcept override { return own_ ? bytes_ : 0; }
  std::size_t limit() const noexcept override { return bytes_; }
  std::size_t reserved_va() const noexcept override { return own_ ? bytes_ * bases_.size() : 0; }
  char* peer_base(int local_index) const noexcept override { return bases_[local_index]; }
  char* base() const noexcept override { return bases_[local_index_]; }
  std::uint64_t stride() const noexcept override { return 0; }
  const std::uint64_t* peer_base_table() const noexcept override { return table_; }

  void grow(std::size_t at_least) override {
    // allocate() refuses anything beyond limit() on every rank first; reaching this is a bug.
    fail(ErrorClass::Internal,
         "the CUDA IPC symmetric heap cannot grow (asked for %zu more bytes); please report this",
         at_least);
  }

  void teardown(bool peers_alive) noexcept override {
    if (!own_) return;
    release(peers_alive);
  }

 private:
  /// Closes the peers' heaps, waits (when everyone is tearing down) until every peer closed
  /// this rank's, then frees it: freeing memory a peer still has open is undefined in CUDA IPC.
  void release(bool peers_alive) noexcept {
    for (std::size_t i = 0; i < bases_.size(); ++i)
      if (static_cast<int>(i) != local_index_ && bases_[i]) backend_.ipc_close(bases_[i]);
    if (peers_alive) {
      try {
        bootstrap_.barrier();
      } catch (const std::exception& e) {
        GNIO_WARN(Memory, "CUDA IPC heap teardown: not every rank closed this rank's heap (%s)",
                  e.what());
      }
    }
    if (table_) backend_.free_device(table_);
    backend_.ipc_free(own_);
    table_ = nullptr;
    own_ = nullptr;
    for (char*& b : bases_) b = nullptr;
  }

  platform::Backend& backend_;
  Bootstrap& bootstrap_;
  int local_index_;
  std::size_t bytes_ = 0;
  void* own_ = nullptr;
  std::vector<char*> bases_;        // by node-local index; [local_index_] is own_
  std::uint64_t* table_ = nullptr;  // bases_ in device memory
};

}  // namespace

std::unique_ptr<HeapLayout> make_ipc_layout(platform::Backend& backend, Bootstrap& bootstrap,
                                            const std::vector<int>& node_ranks, int local_index,
                                            std::size_t bytes) {
  if (backend.kind() != platform::BackendKind::Cuda)
    fail(ErrorClass::Unsupported,
         "the CUDA IPC symmetric heap needs the cuda backend (this rank runs the %s backend)",
         platform::to_string(backend.kind()));
  return std::make_unique<IpcLayout>(backend, bootstrap, node_ranks, local_index, bytes);
}

}  // namespace gnio
