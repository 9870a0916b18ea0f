"""Console scripts: the gnio-run and gnio-info executables bundled in the wheel."""

import os
import sys

_BIN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin")


def _exec(name):
    path = os.path.join(_BIN, name)
    if not os.path.exists(path):
        sys.exit(f"gnio: {name} is not in this installation ({path})")
    os.execv(path, [name] + sys.argv[1:])


def gnio_run():
    _exec("gnio-run")


def gnio_info():
    _exec("gnio-info")
