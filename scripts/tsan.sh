#!/usr/bin/env bash
# Builds txbatch with ThreadSanitizer in build-tsan/ and runs the tests where threads meet: the
# queue protocol with real producer, runner and txirq threads for every sync x runner shape
# (unit: TxQueueShape, TxQueue), producers racing into a lock-free band (LockfreePfifo), and in
# the e2e suite the instrumented txbatch running every qdisc shape on the emulated e1000
# (ShapeRun), two TX queues on every DPDK vdev (TwoQueues/EthdevRun) and the link model behind
# the emulated wire (Link). The shapes' net_ring cases are left out here: 8 producers flat out on
# 2 CPUs, 5-15x slower under TSan, once left a 0.3 s window without a frame (a measurement
# assert, not a race; TSan reported nothing); the e1000 cases run the same threads wire-bound.
# Any report fails the run: a report in the spawned txbatch makes it exit 66 and its test fail.
# Tests that assert performance are left out (TSan runs 5-15x slower).
#
# DPDK comes from Debian, not instrumented: the hand-over its lock-free internals do (mempool,
# a PMD's rings) is invisible to TSan and would look like a race. It is told to TSan instead
# (base/tsan.h: the pool's handler is wrapped, the ethdev driver marks its bursts).
# scripts/tsan.supp holds the library-internal reports left (EAL's interrupt callbacks), each
# with its reason; nothing of txbatch's own is suppressed.
set -euo pipefail
cd "$(dirname "$0")/.."
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if [[ ! -f build-tsan/build.ninja ]]; then
  meson setup build-tsan -Db_sanitize=thread -Db_lundef=false -Dbuildtype=debugoptimized \
    -Dcpp_args=-g1 \
    -Dverbs=disabled >"$log" 2>&1 || { cat "$log" >&2; exit 1; }
fi
# The unit cases that run here have a binary of their own (tests/unit/meson.build). The driver
# suite's binary only spawns txbatch: the instrumented one runs its threads, the test binary
# itself has none to check, so the normal build's serves (CI's test.sh has built it).
ninja -C build-tsan tools/txbatch tests/unit/unit_tsan_tests >"$log" 2>&1 \
  || { tail -40 "$log" >&2; echo "tsan: build failed" >&2; exit 1; }
bash scripts/build.sh tests/e2e/e2e_tests \
  || { echo "tsan: the e2e suite's binary (build/) failed to build" >&2; exit 1; }
export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$PWD/scripts/tsan.supp"
export TXBATCH_BIN=$PWD/build-tsan/tools/txbatch
mkdir -p build-tsan/meson-logs
# run_suite NAME COMMAND...: runs a test binary with its output in build-tsan/meson-logs/NAME.txt;
# if it fails, prints the reports and failures from there and ends the script.
run_suite() {
  local name=$1
  shift
  "$@" >"build-tsan/meson-logs/$name.txt" 2>&1 \
    || { grep -E 'WARNING: ThreadSanitizer|Failure|FAILED' -A12 "build-tsan/meson-logs/$name.txt" | head -60 >&2;
         echo "tsan: $name tests failed" >&2; exit 1; }
}
# Left out of TxQueue.*: the windows-against-spins ratio (the TX path runs 6-50x slower here,
# so its own work is no longer a small part of a receiver's spins; tx_queue_test.cc says more).
run_suite unit build-tsan/tests/unit/unit_tsan_tests \
  --gtest_filter='SyncAndRunner/TxQueueShape.*:TxQueue.*:LockfreePfifo.*-TxQueue.TheTxPathsWindowsAreASmallPartOfTheReceiversSpins'
run_suite e2e build/tests/e2e/e2e_tests \
  --gtest_filter='EveryShape/ShapeRun.BooksBalance*_e1000:TwoQueues/EthdevRun.*:Link.Impairments*'
if grep -q 'WARNING: ThreadSanitizer' build-tsan/meson-logs/*.txt; then
  grep -A20 'WARNING: ThreadSanitizer' build-tsan/meson-logs/*.txt | head -40 >&2
  echo "tsan: ThreadSanitizer reported (see build-tsan/meson-logs)" >&2
  exit 1
fi
echo "tsan: threaded unit and e2e tests clean under ThreadSanitizer ($(grep -c '^\[       OK \]' \
  build-tsan/meson-logs/unit.txt build-tsan/meson-logs/e2e.txt | awk -F: '{s+=$2} END {print s}') tests)"
