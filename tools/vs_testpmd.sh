#!/usr/bin/env bash
# txbatch beside dpdk-testpmd on the same vdev (net_null0,no-rx=1), same EAL memory mode, same
# window: testpmd --forward-mode=txonly at --burst B against `txbatch run --driver
# ethdev:net_null0` with SHAPE (default: --qdisc none --policy buffer:B, each producer batching
# its own frames as testpmd does; SHAPE=pfifo_fast: the qdisc with --batch B), alternated
# (testpmd, txbatch, testpmd, …) ROUNDS times per burst.
# Prints every run and the medians and ratios per burst. Mpps: testpmd's Tx-pps over a 1 s
# window of port statistics; txbatch's frames accepted by the driver in its 1 s window.
#
# Usage: tools/vs_testpmd.sh [build/tools/txbatch]   (ROUNDS=5 BURSTS="1 8 32 64" by default)
# Needs dpdk-testpmd (Debian 12: package dpdk-dev; scripts/setup.sh installs it).
set -euo pipefail
txbatch=${1:-build/tools/txbatch}
rounds=${ROUNDS:-5}
bursts=${BURSTS:-1 8 32 64}
shape=${SHAPE:-none}
eal=(-l 0,1 --no-huge -m 512 --no-shconf --no-pci --no-telemetry)
tmp=$(mktemp -d)
# testpmd leaves its (empty) runtime directory behind; remove it with ours.
trap 'rm -rf "$tmp"; rmdir "/var/run/dpdk/vs-tp-$$" 2>/dev/null || true' EXIT

testpmd_mpps() {  # burst
  (sleep 2.5; echo start; sleep 1; echo "show port stats all"; sleep 1
   echo "show port stats all"; sleep 0.2; echo stop; sleep 0.5; echo quit) |
    timeout 30 dpdk-testpmd "${eal[@]}" --file-prefix "vs-tp-$$" --vdev net_null0,no-rx=1 -- -i \
      --forward-mode=txonly --burst="$1" --txpkts=64 --nb-cores=1 --total-num-mbufs=8191 2>&1 |
    awk '/Tx-pps:/ {pps=$2} END {printf "%.3f\n", pps/1e6}'
}

txbatch_mpps() {  # burst
  local policy=(--qdisc none --policy "buffer:$1")
  [[ "$shape" == pfifo_fast ]] && policy=(--batch "$1")
  "$txbatch" run --driver ethdev:net_null0 --proto udp --size 18 --procs 1 "${policy[@]}" \
    --duration 1 --warmup 0.2 --json "$tmp/t.json" -- "${eal[@]}" --file-prefix "vs-tx-$$" \
    >/dev/null
  python3 -c "import json,sys; print('%.3f' % json.load(open(sys.argv[1]))['records'][0]['results']['mpps'])" "$tmp/t.json"
}

median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

for b in $bursts; do
  : >"$tmp/tp.$b"; : >"$tmp/tx.$b"
  for r in $(seq "$rounds"); do
    tp=$(testpmd_mpps "$b"); tx=$(txbatch_mpps "$b")
    echo "burst $b round $r: testpmd $tp Mpps, txbatch $tx Mpps"
    echo "$tp" >>"$tmp/tp.$b"; echo "$tx" >>"$tmp/tx.$b"
  done
done
echo
printf '%-6s %-16s %-16s %s\n' burst "testpmd Mpps" "txbatch Mpps" "txbatch/testpmd"
for b in $bursts; do
  tp=$(median <"$tmp/tp.$b"); tx=$(median <"$tmp/tx.$b")
  awk -v b="$b" -v tp="$tp" -v tx="$tx" 'BEGIN {printf "%-6s %-16s %-16s %.3f\n", b, tp, tx, tx / tp}'
done
