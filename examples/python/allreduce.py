"""Allreduce from Python, checked on every rank.

    pip install .
    gnio-run -n 2 python examples/python/allreduce.py     (or torchrun / mpirun)
"""

import numpy as np

import gnio

with gnio.Comm.from_env() as comm:
    x = np.full(1 << 20, comm.rank + 1, dtype=np.float32)
    comm.all_reduce(x)
    expected = comm.size * (comm.size + 1) / 2
    assert (x == expected).all(), f"rank {comm.rank}: got {x[:4]}..., expected {expected}"

    # Every rank's block, gathered in rank order.
    mine = np.arange(4, dtype=np.int64) + 100 * comm.rank
    everyone = np.empty(4 * comm.size, dtype=np.int64)
    comm.all_gather(mine, everyone)

    # A symmetric buffer: on one machine every peer's copy is directly readable.
    buf = comm.zeros(8, "int32")
    buf[:] = comm.rank
    comm.barrier()
    right = comm.peer(buf, (comm.rank + 1) % comm.size)
    seen = None if right is None else int(right[0])
    comm.barrier()
    del buf, right  # symmetric memory ends with the communicator: release it before close
    print(f"rank {comm.rank}/{comm.size}: allreduce ok ({expected:g}), gathered {everyone.tolist()}, "
          f"right neighbour's buffer holds {seen}")
