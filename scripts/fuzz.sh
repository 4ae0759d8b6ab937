#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz: frames from the wire, every text option, result
# documents) with clang, AddressSanitizer and UndefinedBehaviorSanitizer in FUZZ_BUILD (default
# build-fuzz/, configured here; CI passes build-asan/, which scripts/sanitize.sh configures the
# same way and has built), and runs
# each for FUZZ_SECONDS (default 60, as CI) from its seed corpus in tests/fuzz/corpus/<target>/ (new
# inputs go to a scratch directory; the corpus in the tree changes only by hand). A crash, a
# leak, a sanitizer report or a trap fails the run and leaves the input in FUZZ_BUILD/crashes/:
# add it to the corpus and a regression test for it (doc/testing.md).
#
# FUZZ_SEED fixes libFuzzer's seed: a run with the same seed tries the same inputs in the same
# order (the number tried depends on the machine's speed), so CI (FUZZ_SEED=1) is repeatable and
# finds nothing a run here with that seed and at least as many inputs did not. Unset, the seed is
# random: a longer run then explores, e.g. FUZZ_SECONDS=3600 scripts/fuzz.sh, or one target:
#   build-fuzz/tests/fuzz/spec_fuzz -max_total_time=600 /tmp/spec tests/fuzz/corpus/spec
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${FUZZ_SECONDS:-60}
seed=${FUZZ_SEED:-0}  # 0: libFuzzer picks one
log=$(mktemp)
scratch=$(mktemp -d)
trap 'rm -rf "$log" "$scratch"' EXIT
dir=${FUZZ_BUILD:-build-fuzz}
if [[ ! -f $dir/build.ninja ]]; then
  # Another script's build (CI's build-asan) is configured by that script.
  [[ $dir == build-fuzz ]] \
    || { echo "fuzz: $dir is not configured (its own script sets it up)" >&2; exit 1; }
  # As scripts/sanitize.sh configures build-asan (CI's), so a run here with CI's seed tries
  # the same inputs.
  CC=clang CXX=clang++ meson setup build-fuzz -Dfuzz=true \
    -Db_sanitize=address,undefined -Db_lundef=false -Dbuildtype=debugoptimized \
    -Dcpp_args=-g1 >"$log" 2>&1 \
    || { cat "$log" >&2; echo "fuzz: setup failed" >&2; exit 1; }
fi
grep -q -- '-fsanitize=fuzzer-no-link' "$dir/build.ninja" \
  || { echo "fuzz: $dir was configured without -Dfuzz=true" >&2; exit 1; }
targets=(frame_fuzz spec_fuzz report_fuzz)
ninja -C "$dir" "${targets[@]/#/tests/fuzz/}" >"$log" 2>&1 \
  || { tail -40 "$log" >&2; echo "fuzz: build failed" >&2; exit 1; }
mkdir -p "$dir/crashes"
export ASAN_OPTIONS=detect_leaks=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
rc=0
for target in "${targets[@]}"; do
  t=${target%_fuzz}
  mkdir -p "$scratch/$t"
  # -reload=0: nothing else writes the scratch corpus, and re-reading it must not vary the order.
  if "$dir/tests/fuzz/$target" -max_total_time="$seconds" -seed="$seed" -reload=0 \
      -print_final_stats=1 -artifact_prefix="$dir/crashes/$t-" "$scratch/$t" "tests/fuzz/corpus/$t" \
      >"$dir/$t.log" 2>&1; then
    echo "fuzz: $target clean for $seconds s, seed $(grep -m1 -oE 'Seed: [0-9]+' \
      "$dir/$t.log" | grep -oE '[0-9]+$') ($(grep -m1 -oE 'stat::number_of_executed_units: *[0-9]+' \
      "$dir/$t.log" | grep -oE '[0-9]+$') inputs)"
  else
    grep -E 'ERROR|runtime error|SUMMARY|Test unit written' "$dir/$t.log" | head -20 >&2
    echo "fuzz: $target failed (input in $dir/crashes/)" >&2
    rc=1
  fi
done
exit "$rc"
