#!/usr/bin/env bash
# Builds txbatch if needed and runs the whole test suite (unit, driver, system, vm, then hw; driver
# and system suites busy-poll and measure time, so they never run in parallel with each other).
set -euo pipefail
cd "$(dirname "$0")"
bash scripts/setup.sh
bash scripts/build.sh
meson test -C build --suite unit --print-errorlogs --logbase unit
meson test -C build --suite driver --num-processes 1 --print-errorlogs --logbase driver
meson test -C build --suite system --num-processes 1 --print-errorlogs --logbase system
# The VM lab: DPDK's real PMDs (and verbs on soft RoCE) in QEMU guests (scripts/vm-lab.sh).
meson test -C build --suite vm --num-processes 1 --print-errorlogs --logbase vm
# Real RDMA hardware where there is some; skipped with the reason elsewhere (and not built
# without libibverbs).
if meson test -C build --list 2>/dev/null | grep -q ':hw /'; then
  meson test -C build --suite hw --print-errorlogs --logbase hw
fi
