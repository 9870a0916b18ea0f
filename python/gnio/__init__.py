"""gnio from Python: communicators, collectives on arrays and tensors, symmetric buffers.

    import numpy as np, gnio
    with gnio.Comm.from_env() as comm:          # under gnio-run, torchrun or mpirun
        x = np.full(1024, comm.rank + 1, dtype=np.float32)
        comm.all_reduce(x)                      # in place; out= for another array

Arrays are NumPy arrays on the host backend and CUDA tensors (torch, CuPy: anything with
DLPack) on GPUs. Every call checks its arguments first: a bad one raises gnio.InvalidArgument
and changes nothing. See docs/guide/python.md.
"""

from __future__ import annotations

import math
import sys
from typing import Any, Iterable, Optional, Union

from . import _gnio
from ._errors import (
    Error,
    Internal,
    InvalidArgument,
    RemoteError,
    SystemError,
    Timeout,
    Unsupported,
)

__version__: str = _gnio.__version__
__all__ = [
    "Comm",
    "create_unique_id",
    "get_include",
    "get_library_dir",
    "Error",
    "InvalidArgument",
    "Timeout",
    "RemoteError",
    "SystemError",
    "Unsupported",
    "Internal",
    "__version__",
]

_OPS = ("sum", "prod", "min", "max", "band", "bor", "bxor")


def create_unique_id() -> bytes:
    """A new unique id (128 bytes) and the rendezvous service for it in this process; hand it to
    every rank (a file, MPI, torch.distributed) and call Comm.from_unique_id there."""
    return _gnio.create_unique_id()


def get_include() -> str:
    """The directory of gnio's C++ headers, for extensions whose kernels call the device API."""
    import os

    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "include")


def get_library_dir() -> str:
    """The directory holding libgnio.so, for extensions that link against it (-L, rpath)."""
    import os

    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib")


class _Torch:
    """What the calls need from torch, looked up once torch is loaded (gnio never imports it):
    its tensor type, the DLPack (type code, bits) of each dtype gnio has, and its current stream.
    Torch tensors reach the C++ side as a description (Array in gnio_module.cpp) instead of
    through DLPack, whose conversion costs microseconds per tensor, more than a whole call may
    add to a collective."""

    tensor: Any = None
    codes: dict = {}
    current_stream: Any = None

    @classmethod
    def ready(cls) -> bool:
        if cls.tensor is None:
            torch = sys.modules.get("torch")
            if torch is None:
                return False
            int_, uint, float_, bfloat = 0, 1, 2, 4  # DLPack's type codes
            cls.codes = {
                torch.float32: (float_, 32), torch.float64: (float_, 64),
                torch.float16: (float_, 16), torch.bfloat16: (bfloat, 16),
                torch.int32: (int_, 32), torch.int64: (int_, 64), torch.uint8: (uint, 8)}
            if hasattr(torch, "uint64"):
                cls.codes[torch.uint64] = (uint, 64)
            raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)  # no Stream object
            cls.current_stream = raw or (lambda d: torch.cuda.current_stream(d).cuda_stream)
            cls.tensor = torch.Tensor
        return True


_DESCRIPTION_TAG = _gnio._description_tag  # marks a tuple as a tensor description for the C++ side


def _arg(x: Any) -> Any:
    """`x` as the C++ side takes it: a torch tensor as (tag, address, elements, type code, bits,
    device type, contiguous); anything else, and torch types gnio lacks, as is (DLPack)."""
    if _Torch.tensor is None and not _Torch.ready():
        return x  # torch is not loaded: x is no tensor of it
    if not isinstance(x, _Torch.tensor):
        return x
    code = _Torch.codes.get(x.dtype)
    if code is None:
        return x
    device = 2 if x.is_cuda else 1 if x.is_cpu else 0  # DLPack's kDLCUDA, kDLCPU, unknown
    return (_DESCRIPTION_TAG, x.data_ptr(), x.numel(), *code, device, x.is_contiguous())


_NO_STREAM = -1  # the communicator's own stream, waited for (kNoStream in gnio_module.cpp)


def _stream_handle(x: Any, stream: Any) -> int:
    """The CUDA stream a call runs on: `stream` (an int, torch.cuda.Stream or cupy Stream), else
    torch's current stream for a torch CUDA tensor (its handle is 0 for torch's default stream,
    CUDA's legacy default stream), else _NO_STREAM: the communicator's own stream, and the call
    waits for it."""
    if stream is not None:
        for attr in ("cuda_stream", "ptr"):
            if hasattr(stream, attr):
                return int(getattr(stream, attr))
        return int(stream)
    if _Torch.tensor is not None and isinstance(x, _Torch.tensor) and x.is_cuda:
        return _Torch.current_stream(x.get_device())
    return _NO_STREAM


def _op(op: str) -> str:
    if op in _OPS:
        return op
    if not isinstance(op, str) or op.lower() not in _OPS:
        raise InvalidArgument(f"op {op!r} is not one of {', '.join(_OPS)}")
    return op.lower()


class Comm:
    """A communicator: the ranks of one job. Create it with from_env() or from_unique_id();
    close() it (or use it as a context manager) on every rank: creation and close are
    collective."""

    def __init__(self, impl: Any):
        self._c = impl

    @classmethod
    def from_env(cls) -> "Comm":
        """Joins the job the launcher describes: gnio-run, torchrun, mpirun (PMIx), srun, PMI."""
        return cls(_gnio._Comm.from_env())

    @classmethod
    def from_unique_id(cls, uid: bytes, rank: int, size: int) -> "Comm":
        """Joins the job named by a create_unique_id() value as `rank` of `size`."""
        return cls(_gnio._Comm.from_unique_id(bytes(uid), rank, size))

    # -- facts ----------------------------------------------------------------------------
    @property
    def rank(self) -> int:
        return self._c.rank

    @property
    def size(self) -> int:
        return self._c.size

    @property
    def local_rank(self) -> int:
        """Index among the ranks of this node."""
        return self._c.local_rank

    @property
    def local_size(self) -> int:
        return self._c.local_size

    @property
    def nodes(self) -> int:
        return self._c.nodes

    @property
    def backend(self) -> str:
        """"host" (CPU threads run the kernels) or "cuda"."""
        return self._c.backend

    @property
    def device(self) -> int:
        """This rank's GPU ordinal (-1 on the host backend)."""
        return self._c.device

    @property
    def launcher(self) -> str:
        """Where rank and size came from: "gnio-run", "torchrun", "openmpi", "unique-id", ..."""
        return self._c.launcher

    @property
    def closed(self) -> bool:
        return self._c.closed

    # -- lifetime -------------------------------------------------------------------------
    def close(self) -> None:
        """Destroys the communicator (collective; again is a no-op). Raises InvalidArgument, with
        nothing closed, while buffers from empty()/zeros() are still referenced."""
        self._c.close()

    def abort(self) -> None:
        """Ends every wait of this communicator on this rank with an error (not collective)."""
        self._c.abort()

    def check(self) -> None:
        """Raises the error a kernel recorded (Timeout, RemoteError, ...), if any."""
        self._c.check()

    def __enter__(self) -> "Comm":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close()
        else:
            # Do not hide the error in flight behind one from close().
            try:
                self.close()
            except Error:
                pass

    # -- symmetric buffers ----------------------------------------------------------------
    def empty(self, shape: Union[int, Iterable[int]], dtype: Any = "float32"):
        """A symmetric buffer: the same allocation on every rank (collective: every rank asks for
        the same shape and dtype, in the same order). NumPy array on the host backend, torch
        tensor on GPUs. Its memory lives until close()."""
        return self._buffer(shape, dtype, zero=False)

    def zeros(self, shape: Union[int, Iterable[int]], dtype: Any = "float32"):
        """empty(), filled with zeros."""
        return self._buffer(shape, dtype, zero=True)

    def peer(self, buffer: Any, rank: int):
        """Rank `rank`'s copy of a buffer from empty()/zeros() (the whole buffer) as an array
        this rank reads and writes directly, or None when that rank's memory is not mapped here
        (another node)."""
        address, nbytes, shape, dtype = _describe(buffer)
        raw = self._c.peer(address, nbytes, int(rank))
        return None if raw is None else _view(raw, shape, dtype)

    def _buffer(self, shape, dtype, zero):
        shape = (int(shape),) if isinstance(shape, int) else tuple(int(s) for s in shape)
        if any(s < 0 for s in shape):
            raise InvalidArgument(f"empty: negative extent in shape {shape}")
        dtype = _dtype(dtype, self.backend)
        nbytes = math.prod(shape) * _itemsize(dtype)
        return _view(self._c.empty(nbytes, zero), shape, dtype)

    # -- collectives (NCCL semantics; in place unless out= is given) -----------------------
    def all_reduce(self, x, op: str = "sum", *, out=None, stream=None):
        """out[i] = op over ranks of x[i]. Returns out (x when in place)."""
        a = _arg(x)
        self._c.all_reduce(a, a if out is None else _arg(out), _op(op), _stream_handle(x, stream))
        return x if out is None else out

    def all_gather(self, x, out, *, stream=None):
        """out holds every rank's x, in rank order (out has size * x.size elements)."""
        self._c.all_gather(_arg(x), _arg(out), _stream_handle(x, stream))
        return out

    def reduce_scatter(self, x, out, op: str = "sum", *, stream=None):
        """out = op over ranks of this rank's block of x (x has size * out.size elements)."""
        self._c.reduce_scatter(_arg(x), _arg(out), _op(op), _stream_handle(x, stream))
        return out

    def broadcast(self, x, root: int = 0, *, stream=None):
        """x on every rank = x on `root` (in place)."""
        self._c.broadcast(_arg(x), int(root), _stream_handle(x, stream))
        return x

    def reduce(self, x, root: int = 0, op: str = "sum", *, out=None, stream=None):
        """out on `root` = op over ranks of x; out elsewhere is left alone."""
        a = _arg(x)
        self._c.reduce(a, a if out is None else _arg(out), int(root), _op(op),
                       _stream_handle(x, stream))
        return x if out is None else out

    def all_to_all(self, x, out, *, stream=None):
        """Block j of x goes to rank j, landing as block (this rank) of its out."""
        self._c.all_to_all(_arg(x), _arg(out), _stream_handle(x, stream))
        return out

    def barrier(self) -> None:
        """Returns once every rank called it, after this rank's queued work finished: the
        communicator's own stream and, on GPUs with torch loaded, this process's work on the
        device (torch's streams included)."""
        if self.backend == "cuda" and "torch" in sys.modules:
            sys.modules["torch"].cuda.synchronize(self.device)
        self._c.barrier()

    # -- one-sided operations started by this rank (on a stream; eager on the host backend) ----
    # `dst`, `src` or `sig` on the peer's side are (views of) buffers from empty()/zeros(); the
    # data is in place at the destination when the call (or its stream) is done.
    def put(self, dst, src, peer: int, *, stream=None) -> None:
        """Copies `src` (this rank's array) into `dst` (a symmetric buffer or view) on `peer`."""
        self._c.put(_arg(dst), _arg(src), int(peer), _stream_handle(src, stream))

    def get(self, dst, src, peer: int, *, stream=None) -> None:
        """Copies `src` (a symmetric buffer or view) on `peer` into `dst` (this rank's array)."""
        self._c.get(_arg(dst), _arg(src), int(peer), _stream_handle(dst, stream))

    def put_signal(self, dst, src, sig, value: int, peer: int, op: str = "set", *,
                   stream=None) -> None:
        """put(), then sets (op="set") or adds to (op="add") `sig` (one uint64 element of a
        symmetric buffer) on `peer`: a peer that sees the new value sees the data."""
        self._c.put_signal(_arg(dst), _arg(src), _arg(sig), int(value), int(peer), op,
                           _stream_handle(src, stream))

    def signal(self, sig, value: int, peer: int, op: str = "set", *, stream=None) -> None:
        """Sets or adds to `sig` on `peer`, after this rank's earlier operations."""
        self._c.signal(_arg(sig), int(value), int(peer), op, _stream_handle(sig, stream))

    def wait_signal(self, sig, cmp: str, value: int, *, stream=None) -> None:
        """Returns (or holds the stream) until this rank's `sig` compares true against `value`
        (cmp: eq, ne, gt, ge, lt, le); bounded by GNIO_TIMEOUT (then gnio.Timeout)."""
        self._c.wait_signal(_arg(sig), cmp, int(value), _stream_handle(sig, stream))

    def sym_ptr(self, buffer) -> bytes:
        """The gnio::SymPtr<T> naming `buffer`, (a view of) a buffer from empty()/zeros(), as
        its 16 bytes (heap id, reserved, byte offset: the same on every rank), for custom
        kernels: memcpy it into a gnio::SymPtr<T> and pass that by value with device_handle()."""
        return self._c.sym_ptr(_arg(buffer))

    def device_handle(self) -> bytes:
        """This rank's gnio::DeviceComm, the handle a custom kernel takes by value, as bytes
        (fetch it again after allocating: the heap may have grown)."""
        return self._c.device_comm()

    def device_comm(self) -> bytes:
        """Same as device_handle() (its name before the convention; kept for existing code)."""
        return self.device_handle()

    def __repr__(self) -> str:
        if self.closed:
            return "<gnio.Comm closed>"
        return f"<gnio.Comm rank {self.rank} of {self.size}, {self.backend}, {self.launcher}>"


# -- array helpers ----------------------------------------------------------------------------
def _dtype(dtype, backend):
    if backend == "host" or not _is_torch_dtype(dtype):
        import numpy as np

        return np.dtype(dtype)
    return dtype


def _is_torch_dtype(dtype) -> bool:
    return type(dtype).__module__.startswith("torch")


def _itemsize(dtype) -> int:
    return dtype.itemsize


def _view(raw, shape, dtype):
    """A flat uint8 buffer (NumPy, or DLPack on GPUs) seen with `shape` and `dtype`."""
    import numpy as np

    if isinstance(raw, np.ndarray):
        return raw.view(np.dtype(dtype)).reshape(shape)
    import torch

    flat = torch.from_dlpack(raw)
    torch_dtype = dtype if _is_torch_dtype(dtype) else getattr(torch, np.dtype(dtype).name)
    return flat.view(torch_dtype).reshape(shape)


def _describe(buffer):
    import numpy as np

    if isinstance(buffer, np.ndarray):
        return buffer.__array_interface__["data"][0], buffer.nbytes, buffer.shape, buffer.dtype
    return buffer.data_ptr(), buffer.numel() * buffer.element_size(), tuple(buffer.shape), buffer.dtype
