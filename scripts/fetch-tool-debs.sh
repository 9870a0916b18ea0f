#!/usr/bin/env bash
# Downloads the .deb files of the tools' header-only dependencies, Debian's libcli11-dev (CLI11)
# and nlohmann-json3-dev (nlohmann-json), into .deps/tool-debs (or TOOL_DEBS), for a machine
# without a package registry: carry that folder there and tests/gpu/session-run.sh unpacks the
# files with dpkg -x into .deps/tool-headers (never into /), where CMake looks for them
# (cmake/GnioToolHeaders.cmake). By hand:
#
#   for f in .deps/tool-debs/*.deb; do dpkg -x "$f" .deps/tool-headers; done
#
# Needs apt-get and the registry (here, not on the GPU machine); no root.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dest=${TOOL_DEBS:-$root/.deps/tool-debs}
mkdir -p "$dest"
cd "$dest"
apt-get download libcli11-dev nlohmann-json3-dev
ls -l "$dest"/*.deb
