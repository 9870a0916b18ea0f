// Registered user buffers (Comm::register_buffer, gnio::Window, DeviceWindow) across 2..4
// processes on both backends: every rank registers a buffer of its own size, kernels read every
// node peer's buffer and write every node peer's buffer through DeviceWindow::peer_ptr, all data
// checked exactly; memory that cannot be registered is rejected on every rank with no effect;
// deregistering and registering again; windows of VMM and symmetric-heap memory on the GPU.
#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "common/gnio_test.hpp"

#if defined(__CUDACC__)
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>
#endif

namespace window_test {

using gnio::DeviceWindow;
using gnio_test::comm;
using gnio_test::kPoison;
using gnio_test::pattern_byte;
using gnio_test::stream;

// ---- buffer layout ----------------------------------------------------------------------------
// Rank r's registered buffer is [r's pattern: pattern_bytes(r)] followed by one slot per rank of
// its node, in ascending world-rank order, each holding pattern_bytes(q) bytes of q's pattern.
// Sizes differ between ranks and are odd, so every rank's window has a size of its own.

GNIO_HD_INLINE std::size_t pattern_bytes(int rank, std::size_t scale) {
  return scale * (1000 + 4099 * static_cast<std::size_t>(rank)) + 17 * (rank % 3) + rank;
}

/// Bytes of the slots of this rank's node (the same on every rank of a node).
std::size_t slots_bytes(std::size_t scale) {
  std::size_t n = 0;
  for (int q : comm().node_ranks()) n += pattern_bytes(q, scale);
  return n;
}

std::size_t window_bytes(std::size_t scale) {
  return pattern_bytes(comm().rank(), scale) + slots_bytes(scale);
}

/// Writes this rank's pattern and poisons its slots.
void fill_own(void* buf, std::size_t scale, unsigned salt) {
  const std::size_t own = pattern_bytes(comm().rank(), scale);
  std::vector<std::uint8_t> host(window_bytes(scale), kPoison);
  for (std::size_t i = 0; i < own; ++i) host[i] = pattern_byte(comm().rank(), i, salt);
  gnio_test::to_device(buf, host.data(), host.size());
}

/// Checks the whole buffer: own pattern, then every node rank's pattern in its slot.
std::size_t check_own(const void* buf, std::size_t scale, unsigned salt, const std::string& what) {
  std::vector<std::uint8_t> expected;
  for (std::size_t i = 0; i < pattern_bytes(comm().rank(), scale); ++i)
    expected.push_back(pattern_byte(comm().rank(), i, salt));
  for (int q : comm().node_ranks())
    for (std::size_t i = 0; i < pattern_bytes(q, scale); ++i)
      expected.push_back(pattern_byte(q, i, salt));
  std::vector<std::uint8_t> got(expected.size());
  gnio_test::to_host(got.data(), buf, got.size());
  return gnio_test::count_wrong(got, expected, what);
}

// ---- kernels (namespace scope: extended lambdas may not live in TEST bodies) -------------------

/// Pull: every node peer's pattern is read through peer_ptr and written into this rank's slots.
/// Also records, per rank, the size the device handle reports.
void pull_kernel(DeviceWindow dw, std::size_t scale, std::uint64_t* sizes) {
  gnio::launch(stream(), {.grid = 2, .block = 64}, [=] GNIO_HD() {
    const std::size_t t = gnio::dev::global_thread();
    const std::size_t n = gnio::dev::global_threads();
    std::uint8_t* own = dw.local<std::uint8_t>();
    std::size_t at = pattern_bytes(dw.rank(), scale);
    for (int p = 0; p < dw.size(); ++p) {
      if (t == 0) sizes[p] = dw.bytes(p);
      const std::uint8_t* src = dw.peer_ptr<const std::uint8_t>(p);
      if (!src) continue;
      const std::size_t len = pattern_bytes(p, scale);
      for (std::size_t i = t; i < len; i += n) own[at + i] = src[i];
      at += len;
    }
  });
  comm().synchronize(stream());
}

/// Push: this rank's pattern is written into its slot of every node peer's buffer.
void push_kernel(DeviceWindow dw, std::size_t scale) {
  gnio::launch(stream(), {.grid = 2, .block = 64}, [=] GNIO_HD() {
    const std::size_t t = gnio::dev::global_thread();
    const std::size_t n = gnio::dev::global_threads();
    const std::uint8_t* mine = dw.local<const std::uint8_t>();
    const std::size_t len = pattern_bytes(dw.rank(), scale);
    // My slot's offset: the patterns of the node ranks before me (all node ranks are reachable).
    std::size_t slot = 0;
    for (int q = 0; q < dw.rank(); ++q)
      if (dw.peer_ptr<void>(q)) slot += pattern_bytes(q, scale);
    for (int p = 0; p < dw.size(); ++p) {
      std::uint8_t* dst = dw.peer_ptr<std::uint8_t>(p, pattern_bytes(p, scale) + slot);
      if (!dst) continue;
      for (std::size_t i = t; i < len; i += n) dst[i] = mine[i];
    }
  });
  comm().synchronize(stream());
}

/// Registers `buf` (window_bytes(scale) bytes) and checks pull and push, all data exactly.
void check_window(void* buf, std::size_t scale, unsigned salt, const char* what) {
  gnio::Comm& c = comm();
  const std::size_t before = c.memory_stats().windows;
  fill_own(buf, scale, salt);
  gnio::Window w = c.register_buffer(buf, window_bytes(scale));
  ASSERT_TRUE(w.valid());
  EXPECT_EQ(c.memory_stats().windows, before + 1);
  EXPECT_EQ(w.local(), buf);
  EXPECT_EQ(w.size(), c.size());
  // Every rank's size is known on the host; only node peers are reachable.
  const std::vector<int>& node = c.node_ranks();
  for (int p = 0; p < c.size(); ++p) {
    const bool same_node = std::find(node.begin(), node.end(), p) != node.end();
    if (same_node)
      EXPECT_EQ(w.bytes(p), pattern_bytes(p, scale) + slots_bytes(scale)) << "rank " << p;
    else
      EXPECT_GT(w.bytes(p), pattern_bytes(p, scale)) << "rank " << p;
    EXPECT_EQ(w.reachable(p), same_node) << "rank " << p;
  }
  c.bootstrap().barrier();

  auto* sizes = static_cast<std::uint64_t*>(c.alloc_device(sizeof(std::uint64_t) * c.size()));
  pull_kernel(w.device_handle(), scale, sizes);
  c.bootstrap().barrier();
  EXPECT_EQ(check_own(buf, scale, salt, std::string(what) + " pull"), 0u);
  std::vector<std::uint64_t> got(c.size());
  gnio_test::to_host(got.data(), sizes, sizeof(std::uint64_t) * c.size());
  for (int p = 0; p < c.size(); ++p)
    EXPECT_EQ(got[p], w.reachable(p) ? w.bytes(p) : 0u) << "rank " << p;

  // Push into poisoned slots everywhere.
  fill_own(buf, scale, salt);
  c.bootstrap().barrier();
  push_kernel(w.device_handle(), scale);
  c.bootstrap().barrier();
  EXPECT_EQ(check_own(buf, scale, salt, std::string(what) + " push"), 0u);
  c.free_device(sizes);
  c.deregister(w);
  EXPECT_FALSE(w.valid());
  EXPECT_EQ(c.memory_stats().windows, before);
}

// ---- tests ------------------------------------------------------------------------------------

TEST(Window, NodePeersReadAndWriteEachOthersBuffers) {
  for (std::size_t scale : {std::size_t{1}, std::size_t{64}}) {
    void* buf = comm().alloc_device(window_bytes(scale));
    check_window(buf, scale, static_cast<unsigned>(scale), "alloc_device");
    comm().free_device(buf);
  }
}

TEST(Window, UnalignedRangeInsideAnAllocation) {
  // The registered range starts 13 bytes into its allocation: peers must see that address.
  gnio::Comm& c = comm();
  char* block = static_cast<char*>(c.alloc_device(window_bytes(1) + 64));
  check_window(block + 13, 1, 5, "offset 13");
  c.free_device(block);
}

TEST(Window, ZeroBytesOnSomeRanks) {
  gnio::Comm& c = comm();
  const bool empty = c.rank() % 2 == 1;
  const std::size_t bytes = empty ? 0 : 4096 + 8 * c.rank();
  void* buf = empty ? nullptr : c.alloc_device(bytes);
  std::vector<std::uint8_t> host(bytes);
  for (std::size_t i = 0; i < bytes; ++i) host[i] = pattern_byte(c.rank(), i, 9);
  if (bytes) gnio_test::to_device(buf, host.data(), bytes);
  gnio::Window w = c.register_buffer(buf, bytes);
  for (int p = 0; p < c.size(); ++p) {
    EXPECT_EQ(w.bytes(p), p % 2 == 1 ? 0u : 4096u + 8 * p);
    if (p % 2 == 1) {
      EXPECT_FALSE(w.reachable(p));
    }
  }
  c.bootstrap().barrier();
  // Each non-empty node peer's data is readable on the host through the peer address.
  for (int p : c.node_ranks()) {
    if (!w.reachable(p)) continue;
    std::vector<std::uint8_t> got(w.bytes(p)), expected(w.bytes(p));
    for (std::size_t i = 0; i < expected.size(); ++i) expected[i] = pattern_byte(p, i, 9);
    gnio_test::to_host(got.data(), w.peer(p), got.size());
    EXPECT_EQ(gnio_test::count_wrong(got, expected, "peer " + std::to_string(p)), 0u);
  }
  c.deregister(w);
  if (buf) c.free_device(buf);
}

/// Expects register_buffer to throw InvalidArgument on this rank; returns the message.
std::string expect_rejected(void* ptr, std::size_t bytes) {
  try {
    gnio::Window w = comm().register_buffer(ptr, bytes);
    ADD_FAILURE() << "register_buffer of bad memory succeeded on rank " << comm().rank();
  } catch (const gnio::Error& e) {
    EXPECT_EQ(e.error_class(), gnio::ErrorClass::InvalidArgument) << e.what();
    EXPECT_NE(std::string(e.what()).find("register_buffer"), std::string::npos) << e.what();
    return e.what();
  }
  return {};
}

TEST(Window, InvalidBuffersAreRejectedOnEveryRankWithNoEffect) {
  gnio::Comm& c = comm();
  const gnio::MemoryStats before = c.memory_stats();
  const std::size_t bytes = 1 << 16;
  void* good = c.alloc_device(bytes);
  const int bad_rank = c.size() - 1;

  // Plain host memory (malloc) on one rank: neither backend accepts it.
  void* host = std::malloc(bytes);
  std::string msg = expect_rejected(c.rank() == bad_rank ? host : good, bytes);
  if (c.rank() == bad_rank) {
    EXPECT_TRUE(msg.find("alloc_device") != std::string::npos ||
                msg.find("cudaMalloc") != std::string::npos)
        << msg;
  } else {
    EXPECT_NE(msg.find("rank " + std::to_string(bad_rank)), std::string::npos) << msg;
  }
  std::free(host);

  // A range running past the end of its allocation.
  msg = expect_rejected(good, c.rank() == 0 ? bytes * 64 : bytes);
  if (c.rank() == 0) {
    EXPECT_NE(msg.find("past the end"), std::string::npos) << msg;
  }

  // A null pointer with a size.
  (void)expect_rejected(c.rank() == 0 ? nullptr : good, bytes);

  // No effect anywhere, and the communicator still works.
  const gnio::MemoryStats after = c.memory_stats();
  EXPECT_EQ(after.windows, before.windows);
  EXPECT_EQ(after.window_bytes, before.window_bytes);
  EXPECT_EQ(after.window_peer_mapped, before.window_peer_mapped);
  EXPECT_EQ(after.device_tables, before.device_tables);
  c.free_device(good);
  void* buf = c.alloc_device(window_bytes(1));
  check_window(buf, 1, 11, "after rejections");
  c.free_device(buf);
  auto sym = c.alloc<std::uint8_t>(256);
  c.free(sym);
}

TEST(Window, DeregisterThenRegisterAgain) {
  gnio::Comm& c = comm();
  const gnio::MemoryStats before = c.memory_stats();
  void* buf = c.alloc_device(window_bytes(2));
  {
    fill_own(buf, 2, 21);
    gnio::Window w = c.register_buffer(buf, window_bytes(2));
    gnio::Window copy = w;
    EXPECT_GT(c.memory_stats().window_bytes, before.window_bytes);
    c.deregister(w);
    EXPECT_FALSE(w.valid());
    EXPECT_FALSE(copy.valid());  // copies share the registration
    EXPECT_THROW((void)copy.device_handle(), gnio::Error);
    EXPECT_THROW((void)w.bytes(0), gnio::Error);
    c.deregister(copy);  // already deregistered: nothing happens (no collective)
    c.deregister(w);     // empty: nothing happens
  }
  EXPECT_EQ(c.memory_stats().windows, before.windows);
  EXPECT_EQ(c.memory_stats().window_bytes, before.window_bytes);
  // The same memory again, then a different size, then deregistration by the destructor.
  check_window(buf, 2, 22, "registered again");
  {
    gnio::Window w = c.register_buffer(buf, window_bytes(1));
    EXPECT_EQ(w.bytes(c.rank()), window_bytes(1));
  }  // the last copy deregisters (collectively) here
  EXPECT_EQ(c.memory_stats().windows, before.windows);
  EXPECT_EQ(c.memory_stats().window_peer_mapped, before.window_peer_mapped);
  check_window(buf, 1, 23, "after destructor");
  c.free_device(buf);
}

TEST(Window, MismatchedDeregisterIsRejectedEverywhere) {
  gnio::Comm& c = comm();
  if (c.size() < 2) GTEST_SKIP() << "needs two ranks";
  void* a = c.alloc_device(4096);
  void* b = c.alloc_device(8192);
  gnio::Window wa = c.register_buffer(a, 4096);
  gnio::Window wb = c.register_buffer(b, 8192);
  try {
    c.deregister(c.rank() == 0 ? wa : wb);
    ADD_FAILURE() << "deregistering different windows succeeded";
  } catch (const gnio::Error& e) {
    EXPECT_EQ(e.error_class(), gnio::ErrorClass::InvalidArgument) << e.what();
  }
  EXPECT_TRUE(wa.valid());
  EXPECT_TRUE(wb.valid());
  c.deregister(wa);
  c.deregister(wb);
  c.free_device(a);
  c.free_device(b);
}

TEST(Window, SymmetricHeapMemory) {
  // Memory inside the symmetric heap registers on every backend and heap layout: node peers have
  // the heap mapped already, so only the offset travels.
  gnio::Comm& c = comm();
  // The same size on every rank (alloc is collective), enough for any rank's window.
  std::size_t most = pattern_bytes(c.size() - 1, 1);
  for (int r = 0; r < c.size(); ++r) most += pattern_bytes(r, 1);
  auto sym = c.alloc<std::uint8_t>(most);
  check_window(c.local(sym), 1, 31, "heap memory");
  c.free(sym);
}

#if defined(__CUDACC__)
/// A buffer from the CUDA VMM API, created fd-exportable, mapped read/write for this GPU.
struct VmmBuffer {
  CUdeviceptr va = 0;
  std::size_t reserved = 0;  ///< bytes of address space at va
  bool mapped = false;
  std::size_t size = 0;  ///< usable bytes; 0 when something failed
  CUmemGenericAllocationHandle handle = 0;
};

template <class Fn>
Fn driver_entry(const char* name) {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult q{};
  if (cudaGetDriverEntryPointByVersion(name, &p, 12000, cudaEnableDefault, &q) != cudaSuccess ||
      q != cudaDriverEntryPointSuccess)
    return nullptr;
  return reinterpret_cast<Fn>(p);
}

/// Empty `size` on failure (the caller agrees with the other ranks before using it).
VmmBuffer vmm_alloc(std::size_t bytes, int device) {
  auto create = driver_entry<PFN_cuMemCreate_v10020>("cuMemCreate");
  auto granularity =
      driver_entry<PFN_cuMemGetAllocationGranularity_v10020>("cuMemGetAllocationGranularity");
  auto reserve = driver_entry<PFN_cuMemAddressReserve_v10020>("cuMemAddressReserve");
  auto map = driver_entry<PFN_cuMemMap_v10020>("cuMemMap");
  auto access = driver_entry<PFN_cuMemSetAccess_v10020>("cuMemSetAccess");
  VmmBuffer b;
  if (!create || !granularity || !reserve || !map || !access) return b;
  CUmemAllocationProp prop = {};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device;
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  std::size_t gran = 0;
  if (granularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) != CUDA_SUCCESS || !gran)
    return b;
  const std::size_t size = (bytes + gran - 1) / gran * gran;
  if (create(&b.handle, size, &prop, 0) != CUDA_SUCCESS) {
    b.handle = 0;
    return b;
  }
  if (reserve(&b.va, size, 0, 0, 0) != CUDA_SUCCESS) {
    b.va = 0;
    return b;
  }
  b.reserved = size;
  if (map(b.va, size, 0, b.handle, 0) != CUDA_SUCCESS) return b;
  b.mapped = true;
  CUmemAccessDesc a = {};
  a.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  a.location.id = device;
  a.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  if (access(b.va, size, &a, 1) != CUDA_SUCCESS) return b;
  b.size = size;
  return b;
}

void vmm_free(VmmBuffer& b) {
  auto unmap = driver_entry<PFN_cuMemUnmap_v10020>("cuMemUnmap");
  auto address_free = driver_entry<PFN_cuMemAddressFree_v10020>("cuMemAddressFree");
  auto release = driver_entry<PFN_cuMemRelease_v10020>("cuMemRelease");
  if (b.mapped) unmap(b.va, b.reserved);
  if (b.va) address_free(b.va, b.reserved);
  if (b.handle) release(b.handle);
  b = VmmBuffer{};
}

TEST(Window, CudaVmmMemory) {
  gnio::Comm& c = comm();
  if (c.backend() != gnio::Backend::Cuda) GTEST_SKIP() << "cuda backend only";
  VmmBuffer b = vmm_alloc(window_bytes(3) + 4096, c.device());
  // Every rank must take the same path: skip together when any rank could not create the memory.
  std::vector<int> ok(c.size());
  ok[c.rank()] = b.size != 0;
  c.bootstrap().allgather(ok.data(), sizeof(int));
  if (std::find(ok.begin(), ok.end(), 0) != ok.end()) {
    vmm_free(b);
    GTEST_SKIP() << "fd-exportable CUDA VMM memory is not available on every rank";
  }
  // 100 bytes into the mapping, so the offset inside the allocation matters.
  check_window(reinterpret_cast<char*>(b.va) + 100, 3, 41, "cuMemCreate");
  vmm_free(b);
}
#endif

}  // namespace window_test
