#!/bin/bash
# Frames per second of wall time, real engine vs simulation engine, on the same cells
# (interleaved: real, sim, real, sim ...). Frames = every frame generated in the run (books),
# over two wall times: the whole command (EAL start-up included, as a user waits for it) and the
# cells alone (env.cell_wall_s: what a longer sweep pays per cell).
# Usage: scripts/experiments/sim_speed.sh [build/tools/txbatch]   (ROUNDS=3)
set -euo pipefail
bin=${1:-build/tools/txbatch}
rounds=${ROUNDS:-3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cells=(
  "--driver emu:e1000 --proto tcp --size 65536 --procs 1,8 --batch 1,32"
  "--driver emu:ixgbe,doorbell_ns=150 --proto udp --size 64 --procs 1,4 --policy count:1,linux-2014"
  "--driver emu:null --proto udp --size 64 --procs 1 --qdisc none --policy buffer:32"
  "--driver emu:ixgbe --proto udp --size 18 --procs 1 --policy count:1,linux-2014,linux-2025,blist-2007"
  "--driver emu:ixgbe --proto udp --size 18 --procs 1 --qdisc none --policy buffer:32:100"
)
printf '%-100s %10s %10s %8s %10s %10s %8s\n' "cells" "real Mfps" "sim Mfps" "sim/real" \
  "real cells" "sim cells" "sim/real"
for cell in "${cells[@]}"; do
  declare -A sum=([real]=0 [sim]=0) cells_sum=([real]=0 [sim]=0)
  for ((r = 1; r <= rounds; r++)); do
    for engine in real sim; do
      start=$(date +%s.%N)
      # shellcheck disable=SC2086
      "$bin" run $cell --engine $engine --duration 0.3 --warmup 0.1 --rounds 1 \
        --json "$tmp/$engine.json" >/dev/null
      end=$(date +%s.%N)
      read -r frames cell_wall < <(python3 -c "import json; d=json.load(open('$tmp/$engine.json')); r=d['records']; print(sum(x['results']['accounting']['generated'] for x in r), sum(x['env']['cell_wall_s'] for x in r))")
      sum[$engine]=$(python3 -c "print(${sum[$engine]} + $frames / ($end - $start) / 1e6)")
      cells_sum[$engine]=$(python3 -c "print(${cells_sum[$engine]} + $frames / $cell_wall / 1e6)")
    done
  done
  real=$(python3 -c "print(${sum[real]} / $rounds)")
  sim=$(python3 -c "print(${sum[sim]} / $rounds)")
  creal=$(python3 -c "print(${cells_sum[real]} / $rounds)")
  csim=$(python3 -c "print(${cells_sum[sim]} / $rounds)")
  printf '%-100s %10.2f %10.2f %8.1f %10.2f %10.2f %8.1f\n' "$cell" "$real" "$sim" \
    "$(python3 -c "print($sim / $real)")" "$creal" "$csim" "$(python3 -c "print($csim / $creal)")"
done
