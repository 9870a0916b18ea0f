#!/usr/bin/env bash
# Installs the Debian packages gnio needs to build and test, when they are missing. Safe to run
# again; does nothing when everything is present. Needs root (or sudo) only when installing.
set -euo pipefail
# clang and libclang-rt-dev: the libFuzzer targets (tests/fuzz) that scripts/test.sh runs briefly;
# libucx-dev: the ucx network backend (GNIO_NET=ucx); libxdp-dev, libbpf-dev: packet I/O
# (eth::Port over AF_XDP); iputils-ping: the packet-I/O samples' tests; openmpi-bin,
# libopenmpi-dev, libpmix-dev: plain mpirun launches (PMIx rendezvous) and gnio/mpi.hpp's test;
# python3-venv: the Python package's stage (pip install . into a virtual environment);
# slurmctld, slurmd, slurm-client, munge: srun launches on a private one-host Slurm
# (tests/launcher/slurm_test.sh runs its own daemons, whatever the packages start);
# libcli11-dev, nlohmann-json3-dev: header-only, the tools' command lines (gnio-run, gnio-info,
# gnio-perf's driver) and the JSON gnio-info and gnio-perf write (the library takes neither;
# scripts/fetch-tool-debs.sh fetches them for machines without the registry).
packages=(cmake ninja-build g++ make pkg-config git python3 libgtest-dev iproute2 clang libclang-rt-dev libucx-dev
  libxdp-dev libbpf-dev iputils-ping openmpi-bin libopenmpi-dev libpmix-dev python3-venv
  slurmctld slurmd slurm-client munge libcli11-dev nlohmann-json3-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "gnio: installing missing packages: ${missing[*]}"
  sudo=""
  if [ "$(id -u)" != 0 ]; then
    command -v sudo >/dev/null || { echo "gnio: need root or sudo to install ${missing[*]}" >&2; exit 1; }
    sudo=sudo
  fi
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
