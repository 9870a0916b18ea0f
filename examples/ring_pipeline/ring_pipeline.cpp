// Ring pipeline: a message of many chunks travels once around the ring of ranks. Each rank adds
// its rank number to every element of a chunk as soon as that chunk arrives and forwards it to
// the next rank with put_signal, so all ranks work on different chunks at the same time. The
// signal counts chunks: chunk k is complete when the signal reaches k + 1.
//
//   gnio-run -n 4 ./ring_pipeline [chunks] [chunk_elements]
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "gnio/comm.hpp"
#include "gnio/device.hpp"
#include "gnio/launch.hpp"

int main(int argc, char** argv) {
  const int chunks = argc > 1 ? std::atoi(argv[1]) : 64;
  const int chunk_elems = argc > 2 ? std::atoi(argv[2]) : 4096;
  gnio::Comm comm = gnio::Comm::from_env();
  gnio::Stream stream(comm);
  const std::size_t total = static_cast<std::size_t>(chunks) * chunk_elems;
  gnio::SymPtr<std::uint32_t> inbox = comm.alloc<std::uint32_t>(total);
  gnio::SymPtr<std::uint64_t> chunks_in = comm.alloc<std::uint64_t>(1);
  auto* staging = static_cast<std::uint32_t*>(comm.alloc_device(total * sizeof(std::uint32_t)));
  comm.fill(comm.local(chunks_in), 0, sizeof(std::uint64_t), stream);
  // Rank 0 starts the message: element i holds i + 1.
  if (comm.rank() == 0) {
    std::vector<std::uint32_t> start(total);
    for (std::size_t i = 0; i < total; ++i) start[i] = static_cast<std::uint32_t>(i + 1);
    comm.copy(comm.local(inbox), start.data(), total * sizeof(std::uint32_t), stream);
  }
  comm.synchronize(stream);
  comm.bootstrap().barrier();

  gnio::DeviceComm dc = comm.device_handle();
  gnio::launch(stream, {.grid = 1, .block = 256}, [=] GNIO_HD() {
    const gnio::Block block;
    const int me = dc.rank(), n = dc.size();
    const int next = (me + 1) % n;
    std::uint32_t* mine = dc.local(inbox);
    for (int k = 0; k < chunks; ++k) {
      // Rank 0 owns the message; everyone else waits for chunk k from the previous rank.
      if (me != 0 && dc.wait_signal<gnio::Block>(chunks_in, gnio::Cmp::Ge, k + 1) != gnio::Status::Ok) return;
      const std::size_t base = static_cast<std::size_t>(k) * chunk_elems;
      for (int i = static_cast<int>(block.rank()); i < chunk_elems; i += static_cast<int>(block.size()))
        staging[base + i] = mine[base + i] + static_cast<std::uint32_t>(me);
      block.sync();
      if (n > 1 && next != 0)
        dc.put_signal<gnio::Block>(inbox + base, staging + base, chunk_elems, chunks_in, 1,
                                   gnio::SignalOp::Add, next);
    }
  });
  comm.synchronize(stream);
  comm.bootstrap().barrier();

  // The last rank holds the finished message: element i = i + 1 + (0 + 1 + ... + n-1).
  int wrong = 0;
  if (comm.rank() == comm.size() - 1) {
    std::vector<std::uint32_t> out(total);
    comm.copy(out.data(), staging, total * sizeof(std::uint32_t), stream);
    comm.synchronize(stream);
    const std::uint32_t sum = static_cast<std::uint32_t>(comm.size() * (comm.size() - 1) / 2);
    for (std::size_t i = 0; i < total; ++i) wrong += out[i] != static_cast<std::uint32_t>(i + 1) + sum;
    std::printf("ring_pipeline: %d chunks x %d elements through %d ranks: %d wrong\n", chunks,
                chunk_elems, comm.size(), wrong);
  }
  comm.free_device(staging);
  return wrong ? 1 : 0;
}
