#!/usr/bin/env bash
# txbatch beside dpdk-testpmd on the same vdev (net_null0,no-rx=1), same EAL memory mode, same
# window: testpmd --forward-mode=txonly at --burst B against `txbatch run --driver
# ethdev:net_null0` in each qdisc shape, interleaved per round (testpmd, then every shape), ROUNDS
# rounds per burst. Shapes (SHAPES, default all):
#   none                 --qdisc none --policy buffer:B (each producer batches its own frames, as
#                        testpmd does)
#   rootlock-inline      pfifo_fast, --sync rootlock --runner inline, --batch B
#   rootlock-dedicated   pfifo_fast, --sync rootlock --runner dedicated, --batch B
#   nolock-inline        pfifo_fast, --sync nolock --runner inline, --batch B
#   nolock-dedicated     pfifo_fast, --sync nolock --runner dedicated, --batch B
# One producer (testpmd: one forwarding core), 64-byte frames (18-byte UDP payload). Prints every
# run, then per burst and shape the medians and the ratio to testpmd. Mpps: testpmd's Tx-pps over
# a 1 s window of port statistics; txbatch's frames accepted by the driver in its 1 s window.
#
# Usage: scripts/experiments/vs_testpmd.sh [build/tools/txbatch]   (ROUNDS=5 BURSTS="1 8 32 64" by default)
# Needs dpdk-testpmd (Debian 12: package dpdk-dev; scripts/setup.sh installs it).
set -euo pipefail
txbatch=${1:-build/tools/txbatch}
rounds=${ROUNDS:-5}
bursts=${BURSTS:-1 8 32 64}
shapes=${SHAPES:-none rootlock-inline rootlock-dedicated nolock-inline nolock-dedicated}
# shellcheck source=scripts/experiments/testpmd_txonly.sh
source "$(dirname "$0")/testpmd_txonly.sh"
eal=("${txonly_eal[@]}")
tmp=$(mktemp -d)
# testpmd leaves its (empty) runtime directory behind; remove it with ours.
trap 'rm -rf "$tmp"; rmdir "/var/run/dpdk/vs-tp-$$" 2>/dev/null || true' EXIT

testpmd_mpps() { testpmd_txonly_mpps "vs-tp-$$" "$1"; }  # burst

txbatch_mpps() {  # shape burst
  local args
  case "$1" in
    none) args=(--qdisc none --policy "buffer:$2") ;;
    rootlock-inline) args=(--sync rootlock --runner inline --batch "$2") ;;
    rootlock-dedicated) args=(--sync rootlock --runner dedicated --batch "$2") ;;
    nolock-inline) args=(--sync nolock --runner inline --batch "$2") ;;
    nolock-dedicated) args=(--sync nolock --runner dedicated --batch "$2") ;;
    *) echo "unknown shape '$1'; valid: none, rootlock-inline, rootlock-dedicated," \
         "nolock-inline, nolock-dedicated" >&2; exit 2 ;;
  esac
  "$txbatch" run --driver ethdev:net_null0 --proto udp --size 18 --procs 1 "${args[@]}" \
    --duration 1 --warmup 0.2 --json "$tmp/t.json" -- "${eal[@]}" --file-prefix "vs-tx-$$" \
    >/dev/null
  python3 -c "import json,sys; print('%.3f' % json.load(open(sys.argv[1]))['records'][0]['results']['mpps'])" "$tmp/t.json"
}

median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

for b in $bursts; do
  : >"$tmp/testpmd.$b"
  for s in $shapes; do : >"$tmp/$s.$b"; done
  for r in $(seq "$rounds"); do
    tp=$(testpmd_mpps "$b")
    echo "$tp" >>"$tmp/testpmd.$b"
    line="burst $b round $r: testpmd $tp"
    for s in $shapes; do
      tx=$(txbatch_mpps "$s" "$b")
      echo "$tx" >>"$tmp/$s.$b"
      line+=", $s $tx"
    done
    echo "$line Mpps"
  done
done
echo
printf '%-6s %-14s %-20s %-14s %s\n' burst "testpmd Mpps" shape "txbatch Mpps" "txbatch/testpmd"
for b in $bursts; do
  tp=$(median <"$tmp/testpmd.$b")
  for s in $shapes; do
    tx=$(median <"$tmp/$s.$b")
    awk -v b="$b" -v tp="$tp" -v s="$s" -v tx="$tx" \
      'BEGIN {printf "%-6s %-14s %-20s %-14s %.2f\n", b, tp, s, tx, tx / tp}'
  done
done
