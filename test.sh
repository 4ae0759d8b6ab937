#!/usr/bin/env bash
# Builds txbatch if needed and runs the whole test suite (unit, e2e, system, vm, then hw; e2e
# and system suites busy-poll and measure time, so they never run in parallel with each other).
# Every suite runs even when one before it failed (a unit failure hid the e2e, system and vm
# suites' results); the exit status is the first failure's, said at the end.
set -euo pipefail
cd "$(dirname "$0")"
bash scripts/setup.sh
bash scripts/build.sh
failed=()
suite() {
  local name=$1
  shift
  meson test -C build --suite "$name" --print-errorlogs --logbase "$name" "$@" || failed+=("$name")
}
suite unit
suite e2e --num-processes 1
suite system --num-processes 1
# The VM lab: DPDK's real PMDs (and verbs on soft RoCE) in QEMU guests (scripts/vm-lab.sh).
suite vm --num-processes 1
# Real RDMA hardware where there is some; skipped with the reason elsewhere (and not built
# without libibverbs).
if meson test -C build --list 2>/dev/null | grep -q ':hw /'; then
  suite hw
fi
if (( ${#failed[@]} > 0 )); then
  echo "test.sh: these suites failed: ${failed[*]} (build/meson-logs/<suite>.txt)" >&2
  exit 1
fi
