#!/usr/bin/env bash
# Builds txbatch if needed and runs it: with no arguments, the default experiment (the lmbench
# bw_tcp table of the 2007 batching thread, on the emulated e1000). Arguments go to `txbatch run`.
set -euo pipefail
cd "$(dirname "$0")"
bash scripts/setup.sh
bash scripts/build.sh tools/txbatch >&2  # the one binary it runs, not the tests
exec build/tools/txbatch run "$@"
