#!/usr/bin/env bash
# Measures the no-hugepage mempool layout trap (ENV-NOTES) and its fix with pool_layout_bench:
#   A: --no-huge, spread layout (the fix)   B: --no-huge, DPDK default layout (the trap)
#   C: hugepages (--in-memory), spread layout asked for — but since the IOVA fix the pool keeps
#      DPDK's default layout unless IOVA is VA (doc/perf.md, "Row C since the IOVA fix"); skipped
#      when no hugepages are free.
# Each at burst 32 and burst 1, in 5 alternated rounds so drift (a busy neighbour, frequency)
# hits every configuration alike; prints every run, then the medians and the ratios A/C and B/C.
#
# The minimum is printed next to each median: noise here only ever adds cycles (this VM has
# multi-second phases where the same run costs ~1.6x), so the minimum is the undisturbed cost.
#
# Usage: tests/bench/pool_layout.sh BENCH_BINARY [PACKETS_PER_RUN]   (root: EAL needs it here)
# Environment: ROUNDS (default 5), LCORE (default 1).
set -euo pipefail

if [[ $# -lt 1 || ! -x "$1" ]]; then
  echo "usage: $0 BENCH_BINARY [PACKETS_PER_RUN]  (e.g. build/tests/bench/pool_layout_bench)" >&2
  exit 2
fi
bench=$1
packets=${2:-64000000}   # per run: ~0.7-1 s of loop; 16 M-packet runs scattered 1.5x here
rounds=${ROUNDS:-5}
bursts=(32 1)
# One lcore: the loop is single-threaded; pinning keeps it from migrating mid-run.
lcore=${LCORE:-1}
# --in-memory needs free hugepages for EAL plus the ~20 MB pool; ask for a comfortable margin.
need_huge_kb=$((128 * 1024))

free_huge_kb() {
  local kb=0 d pages size
  for d in /sys/kernel/mm/hugepages/hugepages-*kB; do
    [[ -d $d ]] || continue
    size=${d##*hugepages-}
    size=${size%kB}
    pages=$(<"$d/free_hugepages")
    kb=$((kb + pages * size))
  done
  echo "$kb"
}

configs=(A B)
if (($(free_huge_kb) >= need_huge_kb)); then
  configs+=(C)
else
  echo "skipping C (hugepages): $(($(free_huge_kb) / 1024)) MB of free hugepages, need" \
    "$((need_huge_kb / 1024)) MB (echo 512 > /proc/sys/vm/nr_hugepages)" >&2
fi

declare -A results   # "<config>-<burst>" -> space-separated cycles/pkt of every round

run_one() {  # config burst round
  local cfg=$1 burst=$2 round=$3 layout eal line value
  # A file prefix of its own per process, so no run trips over another's leftovers.
  local prefix="pool-layout-$$-$cfg-$burst-$round"
  case $cfg in
    A) layout=spread; eal=(--no-huge -m 512 --no-shconf --no-pci) ;;
    B) layout=default; eal=(--no-huge -m 512 --no-shconf --no-pci) ;;
    C) layout=spread; eal=(--in-memory --no-pci) ;;
  esac
  # --no-telemetry: no socket is left in the runtime dir, so the bench can remove it at exit.
  line=$("$bench" --layout "$layout" --burst "$burst" --iterations $((packets / burst)) \
    -- -l "$lcore" --file-prefix="$prefix" --log-level=warning --no-telemetry "${eal[@]}")
  echo "$cfg round=$round $line"
  value=$(sed -n 's/.*cycles_per_pkt=\([0-9.]*\).*/\1/p' <<<"$line")
  if [[ -z $value ]]; then
    echo "no cycles_per_pkt in: $line" >&2
    exit 1
  fi
  results[$cfg-$burst]+="$value "
}

minimum() {  # values...
  printf '%s\n' "$@" | sort -g | head -n 1
}

median() {  # values...
  printf '%s\n' "$@" | sort -g | awk '{v[NR] = $1} END {
    if (NR % 2) print v[(NR + 1) / 2]; else printf "%.1f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

for ((round = 1; round <= rounds; round++)); do
  for burst in "${bursts[@]}"; do
    for cfg in "${configs[@]}"; do
      run_one "$cfg" "$burst" "$round"
    done
  done
done

echo
echo "medians over $rounds rounds, cycles/pkt (minimum in parentheses):"
declare -A med low
for cfg in "${configs[@]}"; do
  for burst in "${bursts[@]}"; do
    # shellcheck disable=SC2086  # word splitting of the stored list is intended
    med[$cfg-$burst]=$(median ${results[$cfg-$burst]})
    # shellcheck disable=SC2086
    low[$cfg-$burst]=$(minimum ${results[$cfg-$burst]})
  done
done
for cfg in "${configs[@]}"; do
  case $cfg in
    A) name="A spread  no-huge  " ;;
    B) name="B default no-huge  " ;;
    C) name="C spread  hugepages" ;;
  esac
  printf '%s' "$name"
  for burst in "${bursts[@]}"; do
    printf '  burst=%-2s %6s (%s)' "$burst" "${med[$cfg-$burst]}" "${low[$cfg-$burst]}"
  done
  echo
done
if [[ " ${configs[*]} " == *" C "* ]]; then
  for burst in "${bursts[@]}"; do
    awk -v b="$burst" -v a="${med[A-$burst]}" -v bb="${med[B-$burst]}" -v c="${med[C-$burst]}" \
      -v la="${low[A-$burst]}" -v lb="${low[B-$burst]}" -v lc="${low[C-$burst]}" \
      'BEGIN { printf "burst=%-2s A/C=%.2f B/C=%.2f  (minima: A/C=%.2f B/C=%.2f)\n",
                      b, a / c, bb / c, la / lc, lb / lc }'
  done
fi
