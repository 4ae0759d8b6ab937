#!/usr/bin/env bash
# Configures (once) and builds txbatch in build/: everything, or only the ninja targets given
# (run.sh builds just tools/txbatch). Quiet when all is well; on failure it prints the build's
# output.
set -euo pipefail
cd "$(dirname "$0")/.."
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if [[ ! -f build/build.ninja ]]; then
  meson setup build >"$log" 2>&1 || { cat "$log" >&2; echo "build: meson setup failed" >&2; exit 1; }
fi
ninja -C build "$@" >"$log" 2>&1 || { cat "$log" >&2; echo "build: compilation failed" >&2; exit 1; }
