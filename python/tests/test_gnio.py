"""The Python package on the host backend: every collective, type and operator checked element
by element against sums computed here from every rank's (known) input, outputs poisoned first;
symmetric buffers; bad arguments raise the right exception and leave the communicator usable.

    gnio-run -n 2 -- python -m pytest -q python/tests
"""

import numpy as np
import pytest

import gnio

N = 1031  # odd: no size is a multiple of a block or a rank count by luck
DTYPES = ["float32", "float64", "float16", "int32", "int64", "uint8"]
INTEGER = {"int32", "int64", "uint8"}
OPS = ["sum", "prod", "min", "max"]
BITWISE = ["band", "bor", "bxor"]


def contribution(rank, n, dtype, op):
    """Rank `rank`'s input: small integers, so that every result is exact in every type."""
    i = np.arange(n)
    if op == "prod":
        v = 1 + (i + rank) % 2  # products of 1s and 2s: at most 2**ranks
    elif op in BITWISE:
        v = (i * 37 + rank * 11 + 5) % 256
    else:
        v = (i * (rank + 3) + rank) % 11 + 1
    return v.astype(dtype)


def expected(comm, n, dtype, op):
    parts = [contribution(r, n, dtype, op) for r in range(comm.size)]
    combine = {
        "sum": np.add,
        "prod": np.multiply,
        "min": np.minimum,
        "max": np.maximum,
        "band": np.bitwise_and,
        "bor": np.bitwise_or,
        "bxor": np.bitwise_xor,
    }[op]
    out = parts[0].copy()
    for p in parts[1:]:
        out = combine(out, p).astype(dtype)
    return out


def poison(n, dtype):
    """A value no test's result can have."""
    return np.full(n, 251 if dtype == "uint8" else -77, dtype=dtype)


@pytest.fixture(scope="module", autouse=True)
def host_only(comm):
    if comm.backend != "host":
        pytest.skip("NumPy arrays need the host backend (test_torch.py covers GPUs)")


def test_acceptance_snippet(comm):
    x = np.full(1024, comm.rank + 1, dtype=np.float32)
    comm.all_reduce(x)
    assert (x == comm.size * (comm.size + 1) / 2).all()


def test_facts(comm):
    assert 0 <= comm.rank < comm.size
    assert comm.backend == "host"
    assert comm.launcher == "gnio-run"
    assert isinstance(gnio.__version__, str) and gnio.__version__.count(".") == 2
    assert len(comm.device_handle()) > 0
    assert comm.device_comm() == comm.device_handle()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", OPS + BITWISE)
def test_all_reduce(comm, dtype, op):
    if op in BITWISE and dtype not in INTEGER:
        with pytest.raises(gnio.InvalidArgument):
            comm.all_reduce(contribution(comm.rank, N, dtype, op), op)
        return
    want = expected(comm, N, dtype, op)
    out = poison(N, dtype)
    x = contribution(comm.rank, N, dtype, op)
    assert comm.all_reduce(x, op, out=out) is out
    np.testing.assert_array_equal(out, want)
    np.testing.assert_array_equal(x, contribution(comm.rank, N, dtype, op))  # input untouched
    comm.all_reduce(x, op)  # in place
    np.testing.assert_array_equal(x, want)


@pytest.mark.parametrize("dtype", DTYPES)
def test_all_gather(comm, dtype):
    x = contribution(comm.rank, N, dtype, "sum")
    out = poison(N * comm.size, dtype)
    comm.all_gather(x, out)
    want = np.concatenate([contribution(r, N, dtype, "sum") for r in range(comm.size)])
    np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", ["sum", "max"])
def test_reduce_scatter(comm, dtype, op):
    x = contribution(comm.rank, N * comm.size, dtype, op)
    out = poison(N, dtype)
    comm.reduce_scatter(x, out, op)
    want = expected(comm, N * comm.size, dtype, op)[comm.rank * N : (comm.rank + 1) * N]
    np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize("dtype", DTYPES)
def test_broadcast_from_every_root(comm, dtype):
    for root in range(comm.size):
        x = contribution(comm.rank, N, dtype, "sum") if comm.rank == root else poison(N, dtype)
        comm.broadcast(x, root)
        np.testing.assert_array_equal(x, contribution(root, N, dtype, "sum"))


@pytest.mark.parametrize("dtype", DTYPES)
def test_reduce(comm, dtype):
    root = comm.size - 1
    x = contribution(comm.rank, N, dtype, "sum")
    out = poison(N, dtype)
    comm.reduce(x, root, "sum", out=out)
    if comm.rank == root:
        np.testing.assert_array_equal(out, expected(comm, N, dtype, "sum"))
    else:
        np.testing.assert_array_equal(out, poison(N, dtype))  # written on the root only


@pytest.mark.parametrize("dtype", DTYPES)
def test_all_to_all(comm, dtype):
    def block_input(r):
        return contribution(r, N * comm.size, dtype, "sum")

    out = poison(N * comm.size, dtype)
    comm.all_to_all(block_input(comm.rank), out)
    me = comm.rank
    want = np.concatenate([block_input(r)[me * N : (me + 1) * N] for r in range(comm.size)])
    np.testing.assert_array_equal(out, want)


def test_shapes_are_flattened(comm):
    x = np.full((4, 5, 3), comm.rank + 1, dtype=np.int32)
    comm.all_reduce(x)
    assert x.shape == (4, 5, 3)
    assert (x == comm.size * (comm.size + 1) // 2).all()


def usable(comm):
    x = np.full(7, 2, dtype=np.int64)
    comm.all_reduce(x)
    assert (x == 2 * comm.size).all()


BAD_CALLS = {
    "unknown op": lambda c: c.all_reduce(np.ones(8, np.float32), "mean"),
    "dtype gnio lacks": lambda c: c.all_reduce(np.ones(8, np.int8)),
    "x and out differ in dtype": lambda c: c.all_reduce(
        np.ones(8, np.float32), out=np.ones(8, np.float64)
    ),
    "out too small": lambda c: c.all_reduce(np.ones(8, np.float32), out=np.ones(7, np.float32)),
    "not contiguous": lambda c: c.all_reduce(np.ones(16, np.float32)[::2]),
    "all_gather out size": lambda c: c.all_gather(np.ones(8, np.float32), np.ones(8, np.float32)),
    "reduce_scatter size": lambda c: c.reduce_scatter(
        np.ones(8 * c.size + 1, np.float32), np.ones(8, np.float32)
    ),
    "root out of range": lambda c: c.broadcast(np.ones(8, np.float32), c.size),
    "negative root": lambda c: c.reduce(np.ones(8, np.float32), -1),
    "all_to_all in place": lambda c: (lambda x: c.all_to_all(x, x))(np.ones(8 * c.size, np.float32)),
    "stream on the host backend": lambda c: c.all_reduce(np.ones(8, np.float32), stream=12345),
    "negative stream": lambda c: c.all_reduce(np.ones(8, np.float32), stream=-5),
    "negative shape": lambda c: c.empty((-1, 2)),
}


@pytest.mark.parametrize("what", sorted(BAD_CALLS))
def test_bad_arguments_raise_and_leave_comm_usable(comm, what):
    with pytest.raises(gnio.InvalidArgument) as info:
        BAD_CALLS[what](comm)
    assert isinstance(info.value, ValueError)  # also catchable as the Python kind it is
    assert isinstance(info.value, gnio.Error)
    assert str(info.value)  # carries the message
    usable(comm)


def test_symmetric_buffers_and_peers():
    with gnio.Comm.from_env() as c:
        buf = c.zeros((4, 8), "int64")
        assert buf.shape == (4, 8) and buf.dtype == np.int64 and (buf == 0).all()
        buf[:] = np.arange(32).reshape(4, 8) + 1000 * c.rank
        c.barrier()
        right = (c.rank + 1) % c.size
        theirs = c.peer(buf, right)  # one host: every peer's memory is mapped here
        assert theirs is not None
        np.testing.assert_array_equal(theirs, np.arange(32).reshape(4, 8) + 1000 * right)
        c.barrier()
        with pytest.raises(gnio.InvalidArgument, match="still referenced"):
            c.close()  # refused: buf lives on
        assert not c.closed
        usable(c)
        del buf, theirs
    assert c.closed
    with pytest.raises(gnio.InvalidArgument, match="closed"):
        c.all_reduce(np.ones(4, np.float32))


def test_unique_id_is_bytes():
    uid = gnio.create_unique_id()
    assert isinstance(uid, bytes) and len(uid) == 128
    with pytest.raises(gnio.InvalidArgument):
        gnio.Comm.from_unique_id(b"short", 0, 1)


def test_one_sided_operations():
    with gnio.Comm.from_env() as c:
        n = 1001
        me, size = c.rank, c.size
        right, left = (me + 1) % size, (me - 1) % size
        dst = c.empty(n + 1, "int32")
        dst[:] = -5
        flags = c.zeros(4, "uint64")
        back = np.full(n, -9, dtype=np.int32)
        mine = (np.arange(n, dtype=np.int32) * 3 + me * 1000)
        c.barrier()
        c.put_signal(dst[1:], mine, flags[0:1], 7, right)  # a view: offset 4 bytes
        c.wait_signal(flags[0:1], "eq", 7)
        np.testing.assert_array_equal(dst[1:], np.arange(n, dtype=np.int32) * 3 + left * 1000)
        assert dst[0] == -5  # nothing before the view was touched
        for p in range(size):
            c.signal(flags[1:2], me + 1, p, "add")
        c.barrier()
        assert int(flags[1]) == size * (size + 1) // 2
        c.get(back, dst[1:], right)  # the right neighbour holds this rank's data
        np.testing.assert_array_equal(back, mine)
        extra = np.arange(n, dtype=np.int32)
        c.barrier()
        c.put(dst[1:], extra, right)
        c.barrier()
        np.testing.assert_array_equal(dst[1:], extra)
        # Bad arguments: nothing happens, the communicator goes on.
        with pytest.raises(gnio.InvalidArgument, match="empty"):
            c.put(back, mine, right)  # not a symmetric buffer
        with pytest.raises(gnio.InvalidArgument, match="fit"):
            c.put(dst[2:], mine, right)  # one element too many
        with pytest.raises(gnio.InvalidArgument):
            c.put(dst[1:], mine, size)  # no such peer
        with pytest.raises(gnio.InvalidArgument, match="uint64"):
            c.signal(dst[0:1], 1, right)
        with pytest.raises(gnio.InvalidArgument, match="cmp"):
            c.wait_signal(flags[2:3], "about", 1)
        usable(c)
        c.barrier()
        del dst, flags


def test_sym_ptr_names_a_buffer_for_custom_kernels():
    with gnio.Comm.from_env() as c:
        a = c.zeros(16, "int32")
        b = c.zeros(16, "int64")
        pa, pb = c.sym_ptr(a), c.sym_ptr(b)
        assert isinstance(pa, bytes) and len(pa) == 16
        heap = int.from_bytes(pa[:4], "little")  # SymPtr: heap id, reserved, byte offset
        offset = int.from_bytes(pa[8:], "little")
        assert heap != 0  # 0 is the null SymPtr
        assert pa[:4] == pb[:4] and int.from_bytes(pb[8:], "little") != offset
        assert int.from_bytes(c.sym_ptr(a[3:])[8:], "little") == offset + 12  # a view
        everyone = np.empty(c.size * 2, dtype=np.int64)
        c.all_gather(np.array([offset, int.from_bytes(pb[8:], "little")], dtype=np.int64),
                     everyone)
        assert (everyone.reshape(c.size, 2) == everyone[:2]).all()  # the same on every rank
        with pytest.raises(gnio.InvalidArgument, match="empty"):
            c.sym_ptr(np.zeros(4, np.int32))  # not a symmetric buffer
        c.barrier()
        del a, b


def test_torch_cpu_tensors(comm):
    """torch tensors reach the C++ side as a description, not through DLPack (gnio/__init__.py's
    _arg): the same results and the same refusals as NumPy arrays."""
    torch = pytest.importorskip("torch")
    want = torch.from_numpy(expected(comm, N, "int64", "sum"))
    x = torch.from_numpy(contribution(comm.rank, N, "int64", "sum"))
    out = torch.full((N,), -77, dtype=torch.int64)
    assert comm.all_reduce(x, out=out) is out
    assert torch.equal(out, want)
    comm.all_reduce(x)
    assert torch.equal(x, want)
    mine = torch.arange(N, dtype=torch.float32) + comm.rank
    everyone = torch.full((N * comm.size,), -1.0)
    comm.all_gather(mine[:], everyone)
    assert torch.equal(everyone, torch.cat([torch.arange(N, dtype=torch.float32) + r
                                            for r in range(comm.size)]))
    with pytest.raises(gnio.InvalidArgument, match="contiguous"):
        comm.all_reduce(torch.ones(8, 8).t())
    with pytest.raises(gnio.InvalidArgument, match="element type"):
        comm.all_reduce(torch.ones(8, dtype=torch.int16))  # a type gnio lacks: DLPack's path
    with pytest.raises(gnio.InvalidArgument, match="differ in dtype"):
        comm.all_reduce(torch.ones(8), out=torch.ones(8, dtype=torch.float64))
    usable(comm)


def test_a_tuple_is_not_an_address(comm):
    """Only the package's own tensor descriptions (tagged) are read as addresses: a user's tuple of
    integers is refused, not dereferenced."""
    with pytest.raises((TypeError, gnio.InvalidArgument)):
        comm.all_reduce((0, 12345, 8, 2, 32, 1, True))
    with pytest.raises((TypeError, gnio.InvalidArgument)):
        comm.all_reduce((12345, 8, 2, 32, 1, True))
    usable(comm)
