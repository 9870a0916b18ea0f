"""gnio's collectives on torch CUDA tensors: calls queue on torch's current stream and return at
once, as torch.distributed's do, so torch's next kernels on that stream see the results; a
symmetric tensor that the other ranks of the node read directly; an all_reduce captured in a
CUDA graph.

    pip install .
    torchrun --nproc-per-node 2 examples/python/torch_allreduce.py
    gnio-run -n 2 python examples/python/torch_allreduce.py
"""

import torch

import gnio

with gnio.Comm.from_env() as comm:
    torch.cuda.set_device(comm.device)
    n, size = 1 << 20, comm.size
    total = size * (size + 1) / 2

    x = torch.full((n,), comm.rank + 1.0, device="cuda")
    comm.all_reduce(x)  # on torch.cuda.current_stream()
    y = x * 2  # ordered after the all_reduce by the stream
    assert bool((y == 2 * total).all()), f"rank {comm.rank}: all_reduce gave {x[:4].tolist()}"

    everyone = torch.empty(size * 4, dtype=torch.int64, device="cuda")
    comm.all_gather(torch.arange(4, device="cuda") + 100 * comm.rank, everyone)

    # A symmetric tensor: the same allocation on every rank; peers on this node map it.
    buf = comm.zeros(8, torch.int32)
    buf.fill_(comm.rank)
    comm.barrier()  # waits for this rank's GPU work, then for every rank
    right = comm.peer(buf, (comm.rank + 1) % size)
    seen = None if right is None else int(right[0])

    # CUDA graphs: run one collective on the capture stream first (sets its channel up).
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        z = torch.ones(1024, device="cuda")
        comm.all_reduce(z)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=side):
        z.fill_(comm.rank + 1.0)
        comm.all_reduce(z)
    for _ in range(3):
        graph.replay()
    assert bool((z == total).all()), f"rank {comm.rank}: the graph's all_reduce gave {z[:4].tolist()}"
    comm.barrier()
    del buf, right
    print(f"rank {comm.rank}/{size}: all_reduce {total:g}, gathered {everyone.tolist()}, "
          f"right neighbour's tensor holds {seen}, graph replays ok")
