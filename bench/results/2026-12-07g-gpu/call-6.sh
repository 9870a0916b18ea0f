#!/usr/bin/env bash
# The whole GPU suite on this session's last device-code change (the delivery agent's kernel takes
# its scratch in device memory) and with rma_persistent_test_agent_gpu now registered: the build
# on the GPU machine, every GPU test, the five two-rank ones under MPS.
#   OUT=... CALL_S=520 bash bench/results/2026-12-07g-gpu/call-6.sh    # carry .deps/tool-debs
source "$(dirname "$0")/../../../tests/gpu/device-call.sh"
build
suite 300
finish
