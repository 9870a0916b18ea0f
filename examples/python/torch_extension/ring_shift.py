"""A custom CUDA kernel that calls gnio's device API from PyTorch: every rank puts a tensor into
its right neighbour's symmetric buffer and signals it, inside one kernel (ring_shift.cu), built
on the fly with torch.utils.cpp_extension against gnio's headers and library.

    pip install .            # gnio with the cuda backend
    torchrun --nproc-per-node 2 examples/python/torch_extension/ring_shift.py
    gnio-run -n 2 python examples/python/torch_extension/ring_shift.py
"""

import os

import torch
from torch.utils.cpp_extension import load

import gnio

comm = gnio.Comm.from_env()
torch.cuda.set_device(comm.device)
ext = load(
    name="gnio_ring_shift",
    sources=[os.path.join(os.path.dirname(os.path.abspath(__file__)), "ring_shift.cu")],
    extra_include_paths=[gnio.get_include()],
    # gnio's device API is C++20 and uses device lambdas; GNIO_HAVE_CUDA selects its GPU side.
    extra_cuda_cflags=["-std=c++20", "--extended-lambda", "--expt-relaxed-constexpr",
                       "-DGNIO_HAVE_CUDA=1"],
    extra_cflags=["-std=c++20", "-DGNIO_HAVE_CUDA=1"],
    extra_ldflags=[f"-L{gnio.get_library_dir()}", "-lgnio",
                   f"-Wl,-rpath,{gnio.get_library_dir()}"],
    verbose=os.environ.get("GNIO_EXAMPLE_VERBOSE") == "1",
)

n = 1 << 20
left = (comm.rank - 1) % comm.size
dst = comm.zeros(n, torch.float32)        # symmetric: the same offset on every rank
arrived = comm.zeros(1, torch.uint64)
handle = comm.device_handle()             # after the allocations: the heap may have grown
for round in (1, 2, 3):
    src = torch.arange(n, dtype=torch.float32, device="cuda") + 1000 * comm.rank + round
    torch.cuda.synchronize()
    comm.barrier()                        # every rank has read the previous round's data
    status = ext.ring_shift(handle, comm.sym_ptr(dst), src, comm.sym_ptr(arrived), round)
    if int(status.item()) != 0:           # .item() waits for torch's stream
        comm.check()                      # raises what the kernel recorded (Timeout, ...)
        raise RuntimeError(f"rank {comm.rank}: the kernel returned status {int(status.item())}")
    want = torch.arange(n, dtype=torch.float32, device="cuda") + 1000 * left + round
    wrong = int((dst != want).sum())
    assert wrong == 0, f"rank {comm.rank}, round {round}: {wrong} wrong elements"
torch.cuda.synchronize()
comm.barrier()
print(f"rank {comm.rank}/{comm.size}: ring shift from a custom kernel ok "
      f"(3 rounds of {n} floats from rank {left})")
del dst, arrived
comm.close()
