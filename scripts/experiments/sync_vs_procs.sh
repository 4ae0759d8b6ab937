#!/usr/bin/env bash
# Throughput vs producers with the root-locked and the lock-free pfifo_fast (--sync rootlock vs
# nolock), interleaved per round (rootlock, nolock, rootlock, …), ROUNDS rounds (default 3), on a
# DRIVER with no wire limit (default emu:null): tcp, 4096-byte writes, procs 1..16, batch 1 and 32.
# Prints one line per cell and round:
#   sync round batch procs MB/s Mpps avg_batch ctxsw/s qdisc_missed/s balanced
# doc/experiments.md (the tbench post, 001) summarises it: medians and per-round ratios.
#
# Usage: scripts/experiments/sync_vs_procs.sh [DRIVER] [build/tools/txbatch]
set -euo pipefail
driver=${1:-emu:null}
txbatch=${2:-build/tools/txbatch}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for r in $(seq "${ROUNDS:-3}"); do
  for sync in rootlock nolock; do
    "$txbatch" run --driver "$driver" --proto tcp --size 4096 --procs 1,2,4,8,16 --batch 1,32 \
      --sync "$sync" --duration 1 --warmup 0.2 --json "$tmp/r.json" >/dev/null
    python3 - "$sync" "$r" "$tmp/r.json" <<'PY'
import json, sys
for rec in json.load(open(sys.argv[3]))['records']:
    c, x = rec['config'], rec['results']
    w = x['window_s']
    print(sys.argv[1], sys.argv[2], c['batch'], c['procs'], round(x['mb_per_s'], 1),
          round(x['mpps'], 3), round(x['avg_batch'], 2), int(x['involuntary_ctxsw'] / w),
          int(x['qdisc_missed'] / w), x['accounting']['balanced'])
PY
  done
done
