#!/usr/bin/env bash
# Fetches a UCX built with CUDA support (PyPI's libucx-cu12 wheel: Debian's libucx-dev has no CUDA)
# and unpacks the parts gnio needs (headers, libucp/ucs/uct/ucm, the cuda and cma modules, the
# bundled CUDA runtime) into .deps/ucx-cu12, small enough to carry to a GPU machine without
# registry access. Then:
#
#   UCX_ROOT=$PWD/.deps/ucx-cu12/libucx cmake -S . -B build ...     (the ucx backend uses it)
#   LD_LIBRARY_PATH=$PWD/.deps/ucx-cu12/libucx/lib GNIO_NET=ucx ...  (at run time)
#
# Needs pip and network access (here, not on the GPU machine). UCX_WHEEL_VERSION picks the version.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dest=$root/.deps/ucx-cu12
version=${UCX_WHEEL_VERSION:-1.22.0}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 -m pip download --quiet --no-deps --dest "$work" "libucx-cu12==$version"
python3 - "$work" "$dest" <<'PY'
import glob, os, shutil, sys, zipfile
work, dest = sys.argv[1], sys.argv[2]
wheel = glob.glob(os.path.join(work, "*.whl"))[0]
shutil.rmtree(dest, ignore_errors=True)
keep_libs = ("libucp.so", "libucs.so", "libuct.so", "libucm.so")
keep_modules = ("libuct_cuda.so", "libucm_cuda.so", "libuct_cma.so")
with zipfile.ZipFile(wheel) as z:
    for name in z.namelist():
        base = os.path.basename(name)
        if name.endswith("/"):
            continue
        wanted = (name.startswith("libucx/include/") or name.startswith("libucx_cu12.libs/") or
                  (name.startswith("libucx/lib/ucx/") and base.startswith(keep_modules) and
                   base.endswith(".so.0.0.0")) or
                  (os.path.dirname(name) == "libucx/lib" and base.startswith(keep_libs) and
                   base.endswith(".so.0.0.0")))
        if not wanted:
            continue
        z.extract(name, dest)
# The wheel stores each library three times (no symlinks in zip files): link the short names.
for lib in glob.glob(os.path.join(dest, "libucx/lib/**/*.so.0.0.0"), recursive=True):
    stem = lib[: -len(".0.0")]
    for short in (stem, stem[: -len(".0")]):
        if not os.path.exists(short):
            os.symlink(os.path.basename(lib), short)
PY
echo "UCX $version with CUDA in $dest ($(du -sh "$dest" | cut -f1)); UCX_ROOT=$dest/libucx"
