#!/usr/bin/env bash
# The lab's numbers (net_af_packet on veths, two namespaces) with batching off and on: through
# `txbatch lab up --batch B`, iperf3 TCP goodput (one stream, 3 s) and iperf3 UDP with 64-byte
# datagrams at no rate limit (3 s: what crosses, and the loss iperf3 reports), then from `lab
# down` the a>b direction's average batch and xmit calls per frame. Batch 1 and 32 alternate
# within each round (ROUNDS, default 3). Root; builds nothing: run after ./run.sh or
# scripts/build.sh.
#   scripts/experiments/lab_perf.sh [TXBATCH]   (default build/tools/txbatch)
set -euo pipefail
cd "$(dirname "$0")/../.."
txbatch=${1:-build/tools/txbatch}
rounds=${ROUNDS:-3}
prefix=lperf
server=
cleanup() {
  [[ -n $server ]] && kill "$server" 2>/dev/null || true
  "$txbatch" lab down --prefix "$prefix" >/dev/null 2>&1 || true
}
trap cleanup EXIT

printf '%-5s %-5s %10s %12s %9s %10s %14s\n' round batch "TCP Gb/s" "UDP64 kpps" "UDP loss" \
  "avg batch" "calls/frame"
for r in $(seq "$rounds"); do
  for batch in 1 32; do
    "$txbatch" lab up --prefix "$prefix" --batch "$batch" >/dev/null
    ip netns exec "$prefix-b" iperf3 -s -1 -B 10.77.0.2 >/dev/null 2>&1 &
    server=$!
    sleep 0.3
    tcp=$(ip netns exec "$prefix-a" iperf3 -c 10.77.0.2 -t 3 -J |
      python3 -c 'import json,sys; print("%.2f" % (json.load(sys.stdin)["end"]["sum_received"]["bits_per_second"] / 1e9))')
    wait "$server" || true
    ip netns exec "$prefix-b" iperf3 -s -1 -B 10.77.0.2 >/dev/null 2>&1 &
    server=$!
    sleep 0.3
    read -r kpps loss < <(ip netns exec "$prefix-a" iperf3 -c 10.77.0.2 -u -b 0 -l 64 -t 3 -J |
      python3 -c 'import json,sys; s = json.load(sys.stdin)["end"]["sum"]; print("%.0f %.1f%%" % ((s["packets"] - s["lost_packets"]) / s["seconds"] / 1e3, s["lost_percent"]))')
    wait "$server" || true
    server=
    down=$("$txbatch" lab down --prefix "$prefix")
    read -r avg calls < <(sed -n 's/^a>b: received .*avg batch \([0-9.]*\), xmit calls per frame \([0-9.]*\).*/\1 \2/p' <<<"$down")
    printf '%-5s %-5s %10s %12s %9s %10s %14s\n' "$r" "$batch" "$tcp" "$kpps" "$loss" "$avg" "$calls"
  done
done
