#!/usr/bin/env bash
# The flood-ping table of reference post 003, through the txbatch bridge: `ping -f -c 1000`
# from one lab namespace to the other, batching off (--batch 1) and on (--batch 32), without a
# link and with each impairment, three runs each (the post kept the best of three; this prints
# all three). Root; builds nothing: run after ./run.sh or scripts/build.sh.
#   scripts/experiments/flood_ping.sh [TXBATCH]   (default build/tools/txbatch)
set -euo pipefail
cd "$(dirname "$0")/../.."
txbatch=${1:-build/tools/txbatch}
prefix=fping
trap '"$txbatch" lab down --prefix "$prefix" >/dev/null 2>&1 || true' EXIT

links=("" "delay 1ms" "loss random 1%" "delay 1ms 200us distribution normal loss random 1%")
printf '%-6s %-52s %-4s %6s %6s %6s  %s\n' batch link run sent recv loss "rtt min/avg/max ms"
for batch in 1 32; do
  for link in "${links[@]}"; do
    args=(--batch "$batch")
    [[ -n "$link" ]] && args+=(--link "$link seed 7")
    "$txbatch" lab up --prefix "$prefix" "${args[@]}" >/dev/null
    ip netns exec "$prefix-a" ping -c 3 -i 0.05 -W 1 -q 10.77.0.2 >/dev/null || true  # ARP
    for run in 1 2 3; do
      out=$(ip netns exec "$prefix-a" ping -f -c 1000 -q 10.77.0.2 || true)
      sent=$(sed -n 's/^\([0-9]*\) packets transmitted.*/\1/p' <<<"$out")
      recv=$(sed -n 's/.* \([0-9]*\) received.*/\1/p' <<<"$out")
      loss=$(sed -n 's/.* \([0-9.]*%\) packet loss.*/\1/p' <<<"$out")
      rtt=$(sed -n 's/^rtt [^=]*= \([0-9.]*\)\/\([0-9.]*\)\/\([0-9.]*\)\/.*/\1\/\2\/\3/p' <<<"$out")
      printf '%-6s %-52s %-4s %6s %6s %6s  %s\n' "$batch" "${link:-none}" "$run" "$sent" "$recv" \
        "$loss" "$rtt"
    done
    "$txbatch" lab down --prefix "$prefix" >/dev/null
  done
done
