#!/usr/bin/env bash
# Builds txbatch with the verbs driver forced off (-Dverbs=disabled, as on a machine without
# libibverbs) in build-noverbs/ and runs its unit suite: everything else must build and pass, and
# a verbs spec must still be parsed and refused with the reason.
set -euo pipefail
cd "$(dirname "$0")/.."
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if [[ ! -f build-noverbs/build.ninja ]]; then
  meson setup build-noverbs -Dverbs=disabled >"$log" 2>&1 || { cat "$log" >&2; exit 1; }
fi
grep -q "driver verbs: only its spec parser is built: -Dverbs=disabled" build-noverbs/meson-logs/meson-log.txt \
  || { echo "build-without-verbs: meson did not say why the verbs driver is left out" >&2; exit 1; }
ninja -C build-noverbs tools/txbatch tests/unit/unit_tests >"$log" 2>&1 \
  || { cat "$log" >&2; echo "build-without-verbs: build failed" >&2; exit 1; }
if nm -C build-noverbs/tools/txbatch | grep -q ibv_post_send; then
  echo "build-without-verbs: txbatch still links libibverbs" >&2; exit 1
fi
meson test -C build-noverbs --suite unit --print-errorlogs --logbase unit >"$log" 2>&1 \
  || { cat "$log" >&2; echo "build-without-verbs: unit suite failed" >&2; exit 1; }
out=$(build-noverbs/tools/txbatch run --driver verbs:mlx5_0:1,qpn=1,qkey=1,lid=1 2>&1 >/dev/null || true)
[[ $out == *"built without libibverbs"* ]] \
  || { echo "build-without-verbs: a verbs driver was not refused with the reason: $out" >&2; exit 1; }
echo "build-without-verbs: builds, unit suite passes, verbs refused with the reason"
