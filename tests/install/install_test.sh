#!/usr/bin/env bash
# Installs the build into a temporary prefix and builds two consumers against it: a CMake project
# using find_package(gnio), and a plain compiler call using pkg-config. Then runs both.
#   install_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1 src=$2
tmp=$(mktemp -d)
# The CUDA runtime, when the library was built with the cuda backend, lives with the toolkit.
export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:-}${CUDA_HOME:+:$CUDA_HOME/lib64}:/usr/local/cuda/lib64"
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
test -L "$tmp/prefix/lib/libgnio.so" || { echo "libgnio.so symlink missing"; exit 1; }
soname=$(readelf -d "$tmp/prefix/lib/libgnio.so" | sed -n 's/.*SONAME.*\[\(.*\)\]/\1/p')
[[ "$soname" == libgnio.so.[0-9]* ]] || { echo "unexpected SONAME '$soname'"; exit 1; }
echo "SONAME $soname"
cmake -S "$src/consumer" -B "$tmp/consumer" -DCMAKE_PREFIX_PATH="$tmp/prefix" >/dev/null
cmake --build "$tmp/consumer" >/dev/null
LD_LIBRARY_PATH="$tmp/prefix/lib:$LD_LIBRARY_PATH" "$tmp/consumer/consumer"
export PKG_CONFIG_PATH="$tmp/prefix/lib/pkgconfig"
pkg-config --exists gnio
# shellcheck disable=SC2046
g++ $(pkg-config --cflags gnio) "$src/consumer/consumer.cpp" -o "$tmp/pc-consumer" $(pkg-config --libs gnio)
LD_LIBRARY_PATH="$tmp/prefix/lib:$LD_LIBRARY_PATH" "$tmp/pc-consumer"
echo "install test passed: find_package and pkg-config consumers build and run"
