"""The Python package with torch CUDA tensors on the cuda backend: every collective, type and
operator checked element by element against results computed here from every rank's (known)
input, outputs poisoned first; calls on torch's current stream and on a side stream; CUDA graph
capture; symmetric buffers as tensors; one-sided calls; bad arguments. Skipped where torch or a
GPU is missing (CI's host backend runs test_gnio.py instead).

    gnio-run -n 2 -- python -m pytest -q python/tests/test_torch.py
    torchrun --nproc-per-node 2 -m pytest -q python/tests/test_torch.py
"""

import time

import pytest

torch = pytest.importorskip("torch")

import gnio  # noqa: E402

N = 1031  # odd: no size is a multiple of a block or a rank count by luck
DTYPES = ["float32", "float64", "float16", "bfloat16", "int32", "int64", "uint8"]
INTEGER = {"int32", "int64", "uint8"}
OPS = ["sum", "prod", "min", "max"]
BITWISE = ["band", "bor", "bxor"]


@pytest.fixture(scope="module", autouse=True)
def cuda_only(comm):
    if comm.backend != "cuda" or not torch.cuda.is_available():
        pytest.skip("needs the cuda backend and torch with CUDA")
    torch.cuda.set_device(comm.device)


def dev(comm):
    return torch.device("cuda", comm.device)


@pytest.fixture(scope="module")
def side(comm):
    """One side stream for every test: each stream a rank uses for collectives takes one of the
    communicator's channels (GNIO_COLL_CHANNELS, 4), set up collectively on first use."""
    return torch.cuda.Stream(dev(comm))


def contribution(rank, n, dtype, op, device):
    """Rank `rank`'s input: small integers, so every result is exact in every type (bfloat16
    holds integers up to 256 exactly; sums of 2 or 3 ranks of values <= 11 stay below)."""
    i = torch.arange(n, dtype=torch.int64)
    if op == "prod":
        v = 1 + (i + rank) % 2
    elif op in BITWISE:
        v = (i * 37 + rank * 11 + 5) % 256
    else:
        v = (i * (rank + 3) + rank) % 11 + 1
    return v.to(getattr(torch, dtype)).to(device)


def expected(comm, n, dtype, op):
    parts = [contribution(r, n, dtype, op, "cpu").to(torch.int64) for r in range(comm.size)]
    out = parts[0].clone()
    for p in parts[1:]:
        if op == "sum":
            out = out + p
        elif op == "prod":
            out = out * p
        elif op == "min":
            out = torch.minimum(out, p)
        elif op == "max":
            out = torch.maximum(out, p)
        elif op == "band":
            out = out & p
        elif op == "bor":
            out = out | p
        else:
            out = out ^ p
    return out.to(getattr(torch, dtype))


def poison(n, dtype, device):
    return torch.full((n,), 251 if dtype == "uint8" else -77, dtype=getattr(torch, dtype),
                      device=device)


def same(got, want):
    got = got.cpu()
    assert got.dtype == want.dtype
    bad = (got.to(torch.float64) != want.to(torch.float64)).nonzero()
    assert bad.numel() == 0, f"{bad.numel()} wrong elements, first at {bad[0].item()}: " \
        f"{got[bad[0]].item()} != {want[bad[0]].item()}"


def test_facts(comm):
    assert comm.backend == "cuda"
    assert comm.device == torch.cuda.current_device()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", OPS + BITWISE)
def test_all_reduce(comm, dtype, op):
    d = dev(comm)
    if op in BITWISE and dtype not in INTEGER:
        with pytest.raises(gnio.InvalidArgument):
            comm.all_reduce(contribution(comm.rank, N, dtype, op, d), op)
        return
    want = expected(comm, N, dtype, op)
    out = poison(N, dtype, d)
    x = contribution(comm.rank, N, dtype, op, d)
    assert comm.all_reduce(x, op, out=out) is out  # on torch's current stream, returns at once
    same(out, want)  # .cpu() waits for the current stream
    comm.all_reduce(x, op)  # in place
    same(x, want)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "int64"])
def test_all_gather_reduce_scatter(comm, dtype):
    d = dev(comm)
    n = comm.size
    mine = contribution(comm.rank, N, dtype, "sum", d)
    gathered = poison(N * n, dtype, d)
    comm.all_gather(mine, gathered)
    same(gathered, torch.cat([contribution(r, N, dtype, "sum", "cpu") for r in range(n)]))

    big = contribution(comm.rank, N * n, dtype, "sum", d)
    out = poison(N, dtype, d)
    comm.reduce_scatter(big, out)
    full = expected(comm, N * n, dtype, "sum")
    same(out, full[comm.rank * N:(comm.rank + 1) * N])


def test_broadcast_reduce_all_to_all(comm):
    d = dev(comm)
    n = comm.size
    root = n - 1
    x = contribution(comm.rank, N, "float32", "sum", d)
    comm.broadcast(x, root)
    same(x, contribution(root, N, "float32", "sum", "cpu"))

    x = contribution(comm.rank, N, "int32", "max", d)
    out = poison(N, "int32", d)
    comm.reduce(x, 0, "max", out=out)
    if comm.rank == 0:
        same(out, expected(comm, N, "int32", "max"))
    else:
        same(out, poison(N, "int32", "cpu"))  # left alone off the root

    block = 257
    x = torch.arange(block * n, dtype=torch.int32, device=d) + 1000 * comm.rank
    out = poison(block * n, "int32", d)
    comm.all_to_all(x, out)
    want = torch.cat([torch.arange(block, dtype=torch.int32) + comm.rank * block + 1000 * r
                      for r in range(n)])
    same(out, want)


def test_default_stream_call_is_queued_not_waited_for(comm):
    """On torch's default stream (CUDA's legacy default stream, handle 0) a call is queued after
    the stream's earlier work and returns at once, as torch.distributed's do."""
    d = dev(comm)
    torch.cuda.synchronize(d)
    comm.barrier()
    x = torch.zeros(N, dtype=torch.float32, device=d)
    mine = contribution(comm.rank, N, "float32", "sum", d)
    torch.cuda._sleep(200_000_000)  # ~0.1 s of GPU time before the fill below
    x.add_(mine)  # queued behind the sleep; the host does not wait
    t0 = time.perf_counter()
    comm.all_reduce(x)
    queued = time.perf_counter() - t0
    same(x, expected(comm, N, "float32", "sum"))  # ordered after the sleep and the fill
    assert queued < 0.05, f"the call took {queued * 1e3:.1f} ms: it waited for the GPU"


def test_side_stream_orders_after_its_own_work(comm, side):
    """A call on a side stream runs after what that stream queued before it, and the caller
    orders the default stream after it as torch does for its own kernels."""
    d = dev(comm)
    want = expected(comm, 1 << 20, "float32", "sum")
    x = torch.empty(1 << 20, dtype=torch.float32, device=d)
    with torch.cuda.stream(side):
        torch.cuda._sleep(1_000_000)  # the fill below lands well after the call is queued
        x.copy_(contribution(comm.rank, 1 << 20, "float32", "sum", "cpu").to(d, non_blocking=False))
        comm.all_reduce(x)  # picks up `side` as the current stream
    torch.cuda.current_stream(d).wait_stream(side)
    same(x, want)
    y = contribution(comm.rank, N, "float32", "sum", d)
    side.wait_stream(torch.cuda.current_stream(d))
    comm.all_reduce(y, stream=side)  # an explicit stream
    side.synchronize()
    same(y, expected(comm, N, "float32", "sum"))


def test_cuda_graph_capture(comm, side):
    """all_reduce captured in a torch CUDA graph; every replay reduces afresh. The capture stream
    ran a collective before (its channel is set up outside the capture, as the guide says)."""
    d = dev(comm)
    src = contribution(comm.rank, N, "float32", "sum", d)
    buf = poison(N, "float32", d)
    scale = torch.ones(1, dtype=torch.float32, device=d)
    side.wait_stream(torch.cuda.current_stream(d))
    with torch.cuda.stream(side):  # warm up outside the capture, as torch asks
        buf.copy_(src)
        comm.all_reduce(buf)
    torch.cuda.current_stream(d).wait_stream(side)
    torch.cuda.synchronize(d)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=side):
        buf.copy_(src * scale)
        comm.all_reduce(buf)
    want = expected(comm, N, "float32", "sum")
    for k in (1, 2, 3):
        scale.fill_(float(k))
        buf.fill_(-77)
        graph.replay()
        same(buf, want * k)


def test_symmetric_buffers_and_peers(comm):
    d = dev(comm)
    buf = comm.zeros((4, 8), torch.int32)
    assert isinstance(buf, torch.Tensor) and buf.is_cuda and buf.shape == (4, 8)
    assert int(buf.abs().sum()) == 0
    buf.fill_(comm.rank + 7)
    torch.cuda.synchronize(d)
    comm.barrier()
    right = (comm.rank + 1) % comm.size
    view = comm.peer(buf, right)
    if comm.nodes == 1:
        assert view is not None and view.is_cuda and view.shape == (4, 8)
        assert (view.cpu() == right + 7).all()
    comm.barrier()
    # Collectives on symmetric buffers (the zero-copy path) in place and with out=.
    x = comm.empty(N, "float32")
    x.copy_(contribution(comm.rank, N, "float32", "sum", d))
    out = comm.empty(N, "float32")
    out.fill_(-77)
    comm.all_reduce(x, out=out)
    same(out, expected(comm, N, "float32", "sum"))
    del buf, view, x, out


def test_one_sided_ring(comm):
    d = dev(comm)
    n = comm.size
    right, left = (comm.rank + 1) % n, (comm.rank - 1) % n
    dst = comm.zeros(N + 1, torch.float32)
    sig = comm.zeros(1, torch.uint64) if hasattr(torch, "uint64") else comm.zeros(1, "uint64")
    src = contribution(comm.rank, N, "float32", "sum", d)
    torch.cuda.synchronize(d)
    comm.barrier()
    comm.put_signal(dst[1:], src, sig, 5, right)  # a view at an offset
    comm.wait_signal(sig, "eq", 5)
    got = dst.cpu()
    comm.barrier()  # every rank's put has landed: `right` holds this rank's data
    assert got[0] == 0, "the element before the view was written"
    same(got[1:], contribution(left, N, "float32", "sum", "cpu"))
    back = poison(N, "float32", d)
    comm.get(back, dst[1:], right)  # right's copy holds what this rank put
    same(back, contribution(comm.rank, N, "float32", "sum", "cpu"))
    torch.cuda.synchronize(d)
    comm.barrier()
    comm.signal(sig, 3, right, "add")
    comm.wait_signal(sig, "eq", 8)
    torch.cuda.synchronize(d)
    comm.barrier()
    del dst, sig


def test_bad_arguments_leave_the_communicator_usable(comm):
    d = dev(comm)
    with pytest.raises(gnio.InvalidArgument, match="cuda backend"):
        comm.all_reduce(torch.ones(8))  # a host tensor
    with pytest.raises(gnio.InvalidArgument):
        comm.all_reduce(torch.ones(8, device=d), out=torch.ones(9, device=d))
    with pytest.raises(gnio.InvalidArgument):
        comm.all_reduce(torch.ones(8, device=d), out=torch.ones(8, device=d, dtype=torch.int32))
    with pytest.raises(gnio.InvalidArgument):
        comm.all_reduce(torch.ones(8, 8, device=d).t())  # not contiguous
    with pytest.raises(gnio.InvalidArgument):
        comm.all_reduce(torch.ones(8, device=d), op="avg")
    x = contribution(comm.rank, N, "float32", "sum", d)
    comm.all_reduce(x)
    same(x, expected(comm, N, "float32", "sum"))
