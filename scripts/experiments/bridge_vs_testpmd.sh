#!/usr/bin/env bash
# The bridge beside `dpdk-testpmd --forward-mode=io` on the same pair of memif ports (the software
# ceiling), interleaved per round. The forwarder under test (FWD) holds two memif servers, A and B,
# on cpu 1; a testpmd peer on cpu 0 holds their clients, forwards io too (A's client <-> B's
# client) and starts the loop with `start tx_first 16` (16 bursts of 32 64-byte frames each way).
# Frames then circle peer -> FWD -> peer; the loop runs at the slower forwarder's rate, and the
# peer's Rx-pps (port statistics over 2 s) measures it the same way for every FWD. Variants
# (VARIANTS, default all):
#   testpmd      dpdk-testpmd --forward-mode=io --burst=32 (main and forwarding lcore on cpu 1)
#   none         txbatch bridge --qdisc none --batch 32              (RX stamp + time through it)
#   notiming     txbatch bridge --qdisc none --batch 32 --no-timing  (no stamp, no histogram)
#   qdisc        txbatch bridge --batch 32       (pfifo_fast, root lock, inline runner, stamped)
#   link         txbatch bridge --qdisc none --batch 32 --link 'rate 100gbit' (the link model
#                on every frame; the rate never binds at these speeds)
# Prints every run, then per variant the median and best Mpps (each way) over ROUNDS rounds, the
# ratio to testpmd, and the cost per frame each stage adds over `notiming` (from the best runs:
# 1e9 / (2 x Mpps) is the forwarder's ns per frame when it is the loop's bottleneck).
#
# Usage: scripts/experiments/bridge_vs_testpmd.sh [build/tools/txbatch]   (ROUNDS=5 by default)
# Needs dpdk-testpmd (Debian 12: package dpdk-dev; scripts/setup.sh installs it) and 2 cpus.
set -euo pipefail
txbatch=${1:-build/tools/txbatch}
rounds=${ROUNDS:-5}
variants=${VARIANTS:-testpmd none notiming qdisc link}
eal=(--no-huge -m 512 --no-shconf --no-pci --no-telemetry)
tmp=$(mktemp -d)
# testpmd leaves its (empty) runtime directories behind; remove them with ours.
trap 'rm -rf "$tmp"; rmdir /var/run/dpdk/bvt-*-$$ 2>/dev/null || true' EXIT

# One run: the forwarder under test, then the peer; prints the loop's Mpps each way.
loop_mpps() {  # variant
  local a="$tmp/a.sock" b="$tmp/b.sock" fwd args=()
  rm -f "$a" "$b"
  case "$1" in
    testpmd)
      (sleep 2.5; echo start; sleep 6.5; echo stop; sleep 1.5; echo quit) |
        timeout 30 dpdk-testpmd --lcores 0@1,1@1 --main-lcore 0 "${eal[@]}" \
          --file-prefix "bvt-f-$$" --vdev "net_memif0,role=server,socket=$a" \
          --vdev "net_memif1,role=server,socket=$b" -- -i --forward-mode=io --burst=32 \
          --nb-cores=1 --total-num-mbufs=16384 >"$tmp/fwd.log" 2>&1 &
      fwd=$! ;;
    none) args=(--qdisc none --batch 32) ;;
    notiming) args=(--qdisc none --batch 32 --no-timing) ;;
    qdisc) args=(--batch 32) ;;
    link) args=(--qdisc none --batch 32 --link 'rate 100gbit') ;;
    *) echo "unknown variant '$1'; valid: testpmd, none, notiming, qdisc, link" >&2; exit 2 ;;
  esac
  if [[ $1 != testpmd ]]; then
    "$txbatch" bridge --port-a "net_memif0,role=server,socket=$a" \
      --port-b "net_memif1,role=server,socket=$b" "${args[@]}" --duration 10 --stats 0 -- -l 1 \
      "${eal[@]}" --file-prefix "bvt-f-$$" >"$tmp/fwd.log" 2>&1 &
    fwd=$!
  fi
  sleep 1.5
  # Stop forwarding on both sides before either exits (ENV-NOTES: memif's peer-exit crash).
  (sleep 2.5; echo "start tx_first 16"; sleep 2; echo "show port stats all"; sleep 2
   echo "show port stats all"; sleep 0.3; echo stop; sleep 1; echo quit) |
    timeout 30 dpdk-testpmd --lcores 0@0,1@0 --main-lcore 1 "${eal[@]}" --file-prefix "bvt-p-$$" \
      --vdev "net_memif0,role=client,socket=$a" --vdev "net_memif1,role=client,socket=$b" -- -i \
      --forward-mode=io --burst=32 --nb-cores=1 --total-num-mbufs=16384 >"$tmp/peer.log" 2>&1
  if ! wait "$fwd"; then
    echo "the forwarder ($1) failed:" >&2; tail -5 "$tmp/fwd.log" >&2; exit 1
  fi
  if [[ $1 != testpmd ]] && [[ $(grep -c ' — balanced' "$tmp/fwd.log") != 2 ]]; then
    echo "the bridge's books did not balance ($1):" >&2; tail -8 "$tmp/fwd.log" >&2; exit 1
  fi
  # The last statistics: Rx-pps of the peer's port 0 and port 1 (one each way).
  grep Rx-pps "$tmp/peer.log" | tail -2 | awk '{s += $2} END {printf "%.3f\n", s / 2 / 1e6}'
}

median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
best() { sort -g | tail -1; }

for v in $variants; do : >"$tmp/$v"; done
for r in $(seq "$rounds"); do
  line="round $r:"
  for v in $variants; do
    m=$(loop_mpps "$v")
    echo "$m" >>"$tmp/$v"
    line+=" $v $m"
  done
  echo "$line Mpps each way"
done
echo
tp_med=$( [[ -s $tmp/testpmd ]] && median <"$tmp/testpmd" || echo 0)
tp_best=$( [[ -s $tmp/testpmd ]] && best <"$tmp/testpmd" || echo 0)
base=$( [[ -s $tmp/notiming ]] && best <"$tmp/notiming" || echo 0)
printf '%-10s %-12s %-10s %-16s %-14s %s\n' variant "median Mpps" "best Mpps" "best/testpmd" \
  "ns/frame" "+ns/frame over notiming"
for v in $variants; do
  awk -v v="$v" -v med="$(median <"$tmp/$v")" -v b="$(best <"$tmp/$v")" -v tp="$tp_best" \
    -v base="$base" 'BEGIN {
      ns = 1e9 / (2 * b * 1e6); bns = base > 0 ? 1e9 / (2 * base * 1e6) : 0
      printf "%-10s %-12s %-10s %-16s %-14.1f %s\n", v, med, b,
        (tp > 0 ? sprintf("%.2f", b / tp) : "-"), ns,
        (base > 0 && v != "testpmd" ? sprintf("%+.1f", ns - bns) : "-") }'
done
