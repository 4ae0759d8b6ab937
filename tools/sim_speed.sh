#!/bin/bash
# Frames per second of wall time, real engine vs simulation engine, on the same cells
# (interleaved: real, sim, real, sim ...). Frames = every frame generated in the run (books),
# wall = the whole command (EAL start-up included, as a user waits for it).
# Usage: tools/sim_speed.sh [build/tools/txbatch]   (ROUNDS=3)
set -euo pipefail
bin=${1:-build/tools/txbatch}
rounds=${ROUNDS:-3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cells=(
  "--driver emu:e1000 --proto tcp --size 65536 --procs 1,8 --batch 1,32"
  "--driver emu:ixgbe,doorbell_ns=150 --proto udp --size 64 --procs 1,4 --policy count:1,linux-2014"
  "--driver emu:null --proto udp --size 64 --procs 1 --qdisc none --policy buffer:32"
)
printf '%-100s %12s %12s %7s\n' "cells" "real Mfps" "sim Mfps" "sim/real"
for cell in "${cells[@]}"; do
  declare -A sum=([real]=0 [sim]=0)
  for ((r = 1; r <= rounds; r++)); do
    for engine in real sim; do
      start=$(date +%s.%N)
      # shellcheck disable=SC2086
      "$bin" run $cell --engine $engine --duration 0.3 --warmup 0.1 --rounds 1 \
        --json "$tmp/$engine.json" >/dev/null
      end=$(date +%s.%N)
      frames=$(python3 -c "import json,sys; d=json.load(open('$tmp/$engine.json')); print(sum(r['results']['accounting']['generated'] for r in d['records']))")
      sum[$engine]=$(python3 -c "print(${sum[$engine]} + $frames / ($end - $start) / 1e6)")
    done
  done
  real=$(python3 -c "print(${sum[real]} / $rounds)")
  sim=$(python3 -c "print(${sum[sim]} / $rounds)")
  printf '%-100s %12.2f %12.2f %7.1f\n' "$cell" "$real" "$sim" "$(python3 -c "print($sim / $real)")"
done
