#!/usr/bin/env bash
# The build with the verbs driver forced off (-Dverbs=disabled, as on a machine without
# libibverbs): everything else must build and pass, and a verbs spec must still be parsed and
# refused with the reason.
#
#   scripts/build_without_verbs.sh [DIR]
#
# DIR defaults to build-noverbs/, configured here. CI passes build-tsan/, which scripts/tsan.sh
# configures with -Dverbs=disabled and has built: one build less (a full build is ~5 min of CI's
# 2 cores). There the unit tests that touch verbs without the driver run (the spec parser, the
# record's link layer, driver specs, run plans, the bad-input table); in a build of its own the
# whole unit suite does.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build-noverbs}
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if [[ ! -f $dir/build.ninja ]]; then
  # Another script's build (CI's build-tsan) is configured by that script, with its sanitizer:
  # configuring it here would leave an unsanitised build under its name.
  [[ $dir == build-noverbs ]] \
    || { echo "build-without-verbs: $dir is not configured (its own script sets it up)" >&2; exit 1; }
  meson setup "$dir" -Dverbs=disabled >"$log" 2>&1 || { cat "$log" >&2; exit 1; }
fi
grep -q "driver verbs: only its spec parser is built: -Dverbs=disabled" "$dir/meson-logs/meson-log.txt" \
  || { echo "build-without-verbs: meson did not say why the verbs driver is left out ($dir)" >&2; exit 1; }
unit=tests/unit/unit_tests
[[ $dir == build-noverbs ]] || unit=tests/unit/unit_tsan_tests  # the cases below, built by tsan.sh
ninja -C "$dir" tools/txbatch "$unit" >"$log" 2>&1 \
  || { cat "$log" >&2; echo "build-without-verbs: build failed" >&2; exit 1; }
# The symbols read whole first: under pipefail, `nm | grep -q` could find the symbol and still
# fail (nm killed by SIGPIPE once grep had matched and gone), and the check pass with it there.
syms=$(nm -C "$dir/tools/txbatch")
if grep -q ibv_post_send <<<"$syms"; then
  echo "build-without-verbs: txbatch still links libibverbs" >&2; exit 1
fi
mkdir -p "$dir/meson-logs"
if [[ $dir == build-noverbs ]]; then
  meson test -C "$dir" --suite unit --print-errorlogs --logbase unit >"$log" 2>&1 \
    || { cat "$log" >&2; echo "build-without-verbs: unit suite failed" >&2; exit 1; }
else
  # Every unit test that touches a verbs spec, record or the CLI's refusals.
  TXBATCH_BIN=$PWD/$dir/tools/txbatch "$dir/$unit" \
    --gtest_filter='VerbsSpec.*:VerbsRecord.*:DriverSpec.*:RunPlan.*:Cli.*' \
    >"$dir/meson-logs/noverbs-unit.txt" 2>&1 \
    || { tail -40 "$dir/meson-logs/noverbs-unit.txt" >&2; echo "build-without-verbs: unit tests failed" >&2; exit 1; }
  ran=$(grep -c '^\[       OK \]' "$dir/meson-logs/noverbs-unit.txt" || true)
  (( ran > 0 )) || { echo "build-without-verbs: the unit filter matched no test" >&2; exit 1; }
fi
out=$("$dir/tools/txbatch" run --driver verbs:mlx5_0:1,qpn=1,qkey=1,lid=1 2>&1 >/dev/null || true)
[[ $out == *"built without libibverbs"* ]] \
  || { echo "build-without-verbs: a verbs driver was not refused with the reason: $out" >&2; exit 1; }
echo "build-without-verbs: builds ($dir), unit tests pass, verbs refused with the reason"
