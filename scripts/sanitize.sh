#!/usr/bin/env bash
# Builds txbatch with AddressSanitizer + UndefinedBehaviorSanitizer in build-asan/ and runs the
# unit suite and the e2e suite on it (the e2e cases spawn the instrumented txbatch). The
# build is clang's with the libFuzzer targets (-Dfuzz=true): scripts/fuzz.sh runs them from here
# with FUZZ_BUILD=build-asan, so CI compiles the product with ASan once, not twice (gcc's ASan
# build alone took 27 min of CI's 2 cores, clang's of everything ~10). Any
# sanitizer report fails the run: ASan aborts on its first error, UBSan is made to halt too, and
# LeakSanitizer's report at exit makes the process (and so the test) fail.
#
# Left out of the e2e suite here: the cases that assert performance against the modelled wire
# or between configurations (an instrumented build runs 2-3x slower; they run in the normal
# build): Models/EmuRun (its modelled end within 2 % of the wall time at which the drain saw
# it; its books check goes with it: splitting it out is a noted to-do), the loopback latency
# ratio, compare's and tune's verdicts, the datagram overload's drop share (it needs one
# producer to outrun the wire by a tenth: an instrumented producer of 1000-byte frames on e1000
# barely does, and once dropped only 5 %), and calibrate --check (a grid of 256 cell runs; the
# simulation it drives is in the unit suite).
set -euo pipefail
cd "$(dirname "$0")/.."
log=$(mktemp)
trap 'rm -f "$log"' EXIT
# A build-asan/ configured before it was clang's with the fuzz targets (gcc's) is this script's
# own: configured again.
if [[ -f build-asan/build.ninja ]] && ! grep -q -- '-fsanitize=fuzzer-no-link' build-asan/build.ninja; then
  rm -rf build-asan
fi
if [[ ! -f build-asan/build.ninja ]]; then
  CC=clang CXX=clang++ meson setup build-asan -Dfuzz=true -Db_sanitize=address,undefined \
    -Db_lundef=false -Dbuildtype=debugoptimized -Dcpp_args=-g1 >"$log" 2>&1 \
    || { cat "$log" >&2; exit 1; }
fi
ninja -C build-asan tools/txbatch tests/unit/unit_tests tests/e2e/e2e_tests \
  tests/fuzz/frame_fuzz tests/fuzz/spec_fuzz tests/fuzz/report_fuzz >"$log" 2>&1 \
  || { cat "$log" >&2; echo "sanitize: build failed" >&2; exit 1; }

export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:halt_on_error=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
export TXBATCH_BIN=$PWD/build-asan/tools/txbatch
mkdir -p build-asan/meson-logs
build-asan/tests/unit/unit_tests >build-asan/meson-logs/unit.txt 2>&1 \
  || { tail -50 build-asan/meson-logs/unit.txt >&2; echo "sanitize: unit suite failed" >&2; exit 1; }
# Left out: the cases whose point is a performance or timing number the product cannot reach at
# ASan's 2-3x slowdown (named one by one: a whole suite left out took its bad-input cases with
# it, issue 44 item 7).
build-asan/tests/e2e/e2e_tests \
  --gtest_filter='-Models/EmuRun.*:Loopbacks/LoopbackLatency.*:Compare.SmallFramesOnIxgbe*:Compare.FullFramesOnE1000*:Tune.ALinkBound*:Tune.AnImpossibleLatencyBudget*:CalibrateRun.Check*:EveryShape/ShapeRun.DatagramOverload*' \
  >build-asan/meson-logs/e2e.txt 2>&1 \
  || { grep -E 'Failure|ERROR|runtime error|FAILED' -A5 build-asan/meson-logs/e2e.txt | head -60 >&2;
       echo "sanitize: e2e suite failed" >&2; exit 1; }
if grep -qE 'runtime error|AddressSanitizer|LeakSanitizer' build-asan/meson-logs/*.txt; then
  grep -E 'runtime error|AddressSanitizer|LeakSanitizer' build-asan/meson-logs/*.txt | head >&2
  echo "sanitize: a sanitizer reported (see build-asan/meson-logs)" >&2
  exit 1
fi
echo "sanitize: unit and e2e suites clean under ASan+UBSan ($(grep -c '^\[       OK \]' \
  build-asan/meson-logs/unit.txt build-asan/meson-logs/e2e.txt | awk -F: '{s+=$2} END {print s}') tests)"
