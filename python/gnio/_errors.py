"""The exceptions gnio raises: one per gnio::ErrorClass, all under gnio.Error.

Each carries the C++ message: what failed, where, on which rank, and for timeouts who stalled.
"""


class Error(RuntimeError):
    """Any gnio failure."""


class InvalidArgument(Error, ValueError):
    """A bad argument. The call had no effect; the communicator is still fully usable."""


class Timeout(Error, TimeoutError):
    """A bounded wait expired (bootstrap, device wait, proxy). The message names who stalled."""


class RemoteError(Error):
    """A peer failed: it exited, was killed, or its link broke. The message names the rank."""


class SystemError(Error, OSError):  # noqa: A001 - gnio.SystemError, as in the C++ API
    """A system call or the CUDA driver/runtime failed."""


class Unsupported(Error, NotImplementedError):
    """The request is valid but this build, backend or transport cannot do it."""


class Internal(Error):
    """A gnio bug: an invariant did not hold. Please report it."""
