#!/usr/bin/env bash
# Configures (once) and builds txbatch in build/. Idempotent and quiet when up to date.
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ ! -f build/build.ninja ]]; then
  meson setup build >/dev/null
fi
ninja -C build >/dev/null
