// 1-D halo exchange (a stencil): each rank owns `cells` cells of a periodic line and, every
// iteration, sends its edge cells to its neighbours' halos with put_signal, computes the interior
// while they travel, then waits for its own halos and computes the two edge cells. Integer
// arithmetic makes the result exact, so every rank checks its cells against a serial run.
//
//   gnio-run -n 4 ./halo_exchange [cells_per_rank] [iterations]
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "gnio/comm.hpp"
#include "gnio/device.hpp"
#include "gnio/launch.hpp"

namespace {

/// One stencil step: new[i] = u[i-1] + 2 u[i] + u[i+1] (mod 2^32).
GNIO_HD_INLINE std::uint32_t stencil(const std::uint32_t* u, int i) { return u[i - 1] + 2 * u[i] + u[i + 1]; }

std::uint32_t initial_value(long global_index) { return static_cast<std::uint32_t>(global_index * 7 + 3); }

}  // namespace

int main(int argc, char** argv) {
  const int cells = argc > 1 ? std::atoi(argv[1]) : 1 << 14;
  const int iterations = argc > 2 ? std::atoi(argv[2]) : 50;
  gnio::Comm comm = gnio::Comm::from_env();
  gnio::Stream stream(comm);
  const int me = comm.rank(), n = comm.size();
  // Two generations of [left halo | cells | right halo]; iteration t reads generation t % 2.
  const int width = cells + 2;
  gnio::SymPtr<std::uint32_t> grid = comm.alloc<std::uint32_t>(2 * width);
  // halo_arrived[0]: my left halo came (from my left neighbour); [1]: my right halo came.
  gnio::SymPtr<std::uint64_t> halo_arrived = comm.alloc<std::uint64_t>(2);
  std::vector<std::uint32_t> start(2 * width, 0);
  for (int i = 0; i < cells; ++i) start[1 + i] = initial_value(static_cast<long>(me) * cells + i);
  comm.copy(comm.local(grid), start.data(), start.size() * sizeof(std::uint32_t), stream);
  comm.fill(comm.local(halo_arrived), 0, 2 * sizeof(std::uint64_t), stream);
  comm.synchronize(stream);
  comm.bootstrap().barrier();

  gnio::DeviceComm dc = comm.device_handle();
  gnio::launch(stream, {.grid = 1, .block = 256}, [=] GNIO_HD() {
    const gnio::Block block;
    const int left = (dc.rank() + dc.size() - 1) % dc.size(), right = (dc.rank() + 1) % dc.size();
    for (int t = 0; t < iterations; ++t) {
      gnio::SymPtr<std::uint32_t> cur = grid + (t % 2) * width, nxt = grid + ((t + 1) % 2) * width;
      std::uint32_t* u = dc.local(cur);
      std::uint32_t* v = dc.local(nxt);
      const std::uint64_t generation = static_cast<std::uint64_t>(t) + 1;
      // 1. Send my edges: my first cell is my left neighbour's right halo and vice versa.
      if (block.rank() == 0)
        dc.put_signal(cur + (width - 1), u + 1, 1, halo_arrived + 1, generation, gnio::SignalOp::Set, left);
      if (block.rank() == 1 % block.size())
        dc.put_signal(cur + 0, u + cells, 1, halo_arrived + 0, generation, gnio::SignalOp::Set, right);
      // 2. The interior needs no halo: compute it while the edges travel.
      for (int i = 2 + static_cast<int>(block.rank()); i <= cells - 1; i += static_cast<int>(block.size()))
        v[i] = stencil(u, i);
      // 3. Wait for both halos, then the two edge cells.
      if (dc.wait_signal<gnio::Block>(halo_arrived + 0, gnio::Cmp::Ge, generation) != gnio::Status::Ok) return;
      if (dc.wait_signal<gnio::Block>(halo_arrived + 1, gnio::Cmp::Ge, generation) != gnio::Status::Ok) return;
      if (block.rank() == 0) v[1] = stencil(u, 1);
      if (block.rank() == 1 % block.size() && cells > 1) v[cells] = stencil(u, cells);
      block.sync();
    }
  });
  comm.synchronize(stream);

  // Serial reference over the whole periodic line.
  const long total = static_cast<long>(cells) * n;
  std::vector<std::uint32_t> ref(total), tmp(total);
  for (long i = 0; i < total; ++i) ref[i] = initial_value(i);
  for (int t = 0; t < iterations; ++t) {
    for (long i = 0; i < total; ++i) tmp[i] = ref[(i + total - 1) % total] + 2 * ref[i] + ref[(i + 1) % total];
    ref.swap(tmp);
  }
  std::vector<std::uint32_t> out(width);
  comm.copy(out.data(), comm.local(grid + (iterations % 2) * width), width * sizeof(std::uint32_t), stream);
  comm.synchronize(stream);
  long wrong = 0;
  for (int i = 0; i < cells; ++i) wrong += out[1 + i] != ref[static_cast<long>(me) * cells + i];
  std::vector<long> all(n);
  all[me] = wrong;
  comm.bootstrap().allgather(all.data(), sizeof(long));
  long total_wrong = 0;
  for (long w : all) total_wrong += w;
  if (me == 0)
    std::printf("halo_exchange: %d ranks x %d cells, %d iterations: %ld wrong cells\n", n, cells,
                iterations, total_wrong);
  return total_wrong ? 1 : 0;
}
