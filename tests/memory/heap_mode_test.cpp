// How node peers map the symmetric heap (GNIO_MEM_MAP): the layout the communicator reports,
// kernels and host agreeing on every peer address (flat layout and CUDA IPC's per-peer table),
// the fixed size of the CUDA IPC heap, and bad GNIO_MEM_MAP values rejected on every rank.
#include <cstdlib>
#include <string>
#include <vector>

#include "common/gnio_test.hpp"

namespace heap_mode_test {

using gnio::DeviceComm;
using gnio::SymPtr;
using gnio_test::comm;
using gnio_test::pattern_byte;
using gnio_test::stream;

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

TEST(HeapMode, MappingFollowsBackendAndEnvironment) {
  if (env("GNIO_MEM_MAP") == "bogus") GTEST_SKIP() << "run for HeapModeEnv only";
  const std::string mapping = comm().heap_mapping();
  if (comm().backend() == gnio::Backend::Host) {
    EXPECT_EQ(mapping, "memfd");  // GNIO_MEM_MAP=ipc is ignored (INFO line) on the host backend
  } else if (env("GNIO_MEM_MAP") == "ipc") {
    EXPECT_EQ(mapping, "ipc");
  } else if (env("GNIO_MEM_MAP") == "vmm") {
    EXPECT_EQ(mapping, "vmm");
  } else {
    EXPECT_TRUE(mapping == "vmm" || mapping == "ipc") << mapping;
  }
  const gnio::MemoryStats s = comm().memory_stats();
  EXPECT_EQ(s.device_tables > 0, mapping == "ipc" || s.windows > 0);
}

/// Thread 0 writes local(p) and peer_ptr(p, q) for every rank q as the device computes them.
void address_kernel(DeviceComm dc, SymPtr<std::uint8_t> p, std::uint64_t* out) {
  gnio::launch(stream(), {.grid = 1, .block = 1}, [=] GNIO_HD() {
    out[0] = reinterpret_cast<std::uintptr_t>(dc.local(p));
    for (int q = 0; q < dc.size(); ++q)
      out[1 + q] = reinterpret_cast<std::uintptr_t>(dc.peer_ptr(p, q));
  });
  comm().synchronize(stream());
}

/// Every thread reads node peers' copies of `p` through peer_ptr and writes them, one after the
/// other, into `dst` (bytes per rank); unreachable ranks' parts are left alone.
void gather_kernel(DeviceComm dc, SymPtr<std::uint8_t> p, std::size_t bytes, std::uint8_t* dst) {
  gnio::launch(stream(), {.grid = 2, .block = 64}, [=] GNIO_HD() {
    const std::size_t t = gnio::dev::global_thread(), n = gnio::dev::global_threads();
    for (int q = 0; q < dc.size(); ++q) {
      const std::uint8_t* src = dc.peer_ptr(p, q);
      if (!src) continue;
      for (std::size_t i = t; i < bytes; i += n) dst[q * bytes + i] = src[i];
    }
  });
  comm().synchronize(stream());
}

TEST(HeapMode, KernelsAndHostAgreeOnEveryPeerAddress) {
  if (env("GNIO_MEM_MAP") == "bogus") GTEST_SKIP() << "run for HeapModeEnv only";
  gnio::Comm& c = comm();
  auto p = c.alloc<std::uint8_t>(4096 + 100);
  const SymPtr<std::uint8_t> q = p + 100;  // not at an allocation start
  auto* out = static_cast<std::uint64_t*>(c.alloc_device(sizeof(std::uint64_t) * (c.size() + 1)));
  address_kernel(c.device_handle(), q, out);
  std::vector<std::uint64_t> got(c.size() + 1);
  gnio_test::to_host(got.data(), out, got.size() * sizeof(std::uint64_t));
  EXPECT_EQ(got[0], reinterpret_cast<std::uintptr_t>(c.local(q)));
  for (int r = 0; r < c.size(); ++r)
    EXPECT_EQ(got[1 + r], reinterpret_cast<std::uintptr_t>(c.peer(q, r))) << "peer " << r;
  EXPECT_EQ(c.peer(q, c.rank()), c.local(q));

  // And the data behind those addresses: every node peer's pattern, read in a kernel.
  const std::size_t bytes = 4096;
  std::vector<std::uint8_t> mine(bytes);
  for (std::size_t i = 0; i < bytes; ++i) mine[i] = pattern_byte(c.rank(), i, 3);
  gnio_test::to_device(c.local(q), mine.data(), bytes);
  auto* dst = static_cast<std::uint8_t*>(c.alloc_device(bytes * c.size()));
  std::vector<std::uint8_t> poison(bytes * c.size(), gnio_test::kPoison);
  gnio_test::to_device(dst, poison.data(), poison.size());
  c.bootstrap().barrier();
  gather_kernel(c.device_handle(), q, bytes, dst);
  std::vector<std::uint8_t> all(bytes * c.size()), expected(poison);
  gnio_test::to_host(all.data(), dst, all.size());
  for (int r : c.node_ranks())
    for (std::size_t i = 0; i < bytes; ++i) expected[r * bytes + i] = pattern_byte(r, i, 3);
  EXPECT_EQ(gnio_test::count_wrong(all, expected, "gathered"), 0u);
  c.bootstrap().barrier();
  c.free_device(dst);
  c.free_device(out);
  c.free(p);
}

TEST(HeapMode, IpcHeapHasAFixedSize) {
  if (env("GNIO_MEM_MAP") == "bogus") GTEST_SKIP() << "run for HeapModeEnv only";
  gnio::Comm& c = comm();
  if (std::string(c.heap_mapping()) != "ipc")
    GTEST_SKIP() << "heap mapping is " << c.heap_mapping();
  const gnio::MemoryStats before = c.memory_stats();
  EXPECT_EQ(before.heap_reserved_va, before.heap_mapped * c.local_size());
  EXPECT_EQ(before.device_tables, sizeof(std::uint64_t) * c.local_size());
  try {
    c.alloc<std::uint8_t>(before.heap_mapped + 1);
    ADD_FAILURE() << "allocating past the CUDA IPC heap succeeded";
  } catch (const gnio::Error& e) {
    EXPECT_EQ(e.error_class(), gnio::ErrorClass::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find("GNIO_HEAP_SIZE"), std::string::npos) << e.what();
  }
  const gnio::MemoryStats after = c.memory_stats();
  EXPECT_EQ(after.heap_mapped, before.heap_mapped);
  EXPECT_EQ(after.heap_in_use, before.heap_in_use);
  // What fits still works.
  auto p = c.alloc<std::uint8_t>(1 << 20);
  c.free(p);
}

TEST(HeapModeEnv, BadValueIsRejectedOnEveryRank) {
  if (env("GNIO_MEM_MAP") != "bogus") GTEST_SKIP() << "runs with GNIO_MEM_MAP=bogus only";
  try {
    gnio::Comm c = gnio::Comm::from_env();
    ADD_FAILURE() << "a communicator was created with GNIO_MEM_MAP=bogus";
  } catch (const gnio::Error& e) {
    EXPECT_EQ(e.error_class(), gnio::ErrorClass::InvalidArgument) << e.what();
    EXPECT_NE(std::string(e.what()).find("GNIO_MEM_MAP"), std::string::npos) << e.what();
  }
}

}  // namespace heap_mode_test
