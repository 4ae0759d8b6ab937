#!/usr/bin/env bash
# The emulator against the device it emulates (issue 19's goals), as ratios measured in one run,
# rounds interleaved (every measurement once per round, in order), medians and minima:
#   1. dpdk-testpmd --forward-mode=txonly at --burst B against `txbatch run --qdisc none
#      --policy buffer:B` on net_null0 (same EAL memory mode, one producer / forwarding core,
#      64-byte frames): txbatch Mpps / testpmd Mpps, per B in BURSTS;
#      At B = 32 also with --no-timing (no TX stamp a frame), to show what the stamp costs;
#   2. pfifo_fast (root lock, inline runner, --batch 32) minus --qdisc none --policy buffer:32 on
#      net_null0, in ns a frame (1000 / Mpps each); and minus buffer:1, since one producer never
#      builds a queue on pfifo_fast: every frame takes the empty-qdisc bypass alone, as on Linux;
#   3. emu:ixgbe,doorbell_ns=100, --qdisc none --policy buffer:1 and buffer:32, 64-byte frames:
#      Mpps as a fraction of 10 GbE's line rate for them (14.88 Mpps);
#   4. emu:null, --qdisc none --policy buffer:32: CPU ns a frame (producer and txirq thread time
#      in the window: the TX path's, cpu_ns_per_pkt, plus the receiver's, results.receiver, which
#      runs inside the call) over BM_EmuNullPath/32's ns a frame (build/tests/bench/tx_path_bench:
#      the same per-frame work with no window open, so no latency histograms), run in the same
#      round; and the TX path's alone over it, for scale.
#   5. Issue 48's rows, with --latency-sample 64 (one frame in 64 stamped and followed; the rest
#      carry no stamp and read no clock of their own): 1 at B = 32, 2 (and 2 on the lock-free
#      pfifo_fast, --sync nolock, which Linux has run since 4.16), 3 at buffer:32 and 4.
# Prints every round, then one table: what, median, min, goal.
#
# Usage: scripts/experiments/perf_goals.sh [build]   (ROUNDS=3 BURSTS="1 8 32 64" by default)
# Needs dpdk-testpmd (Debian 12: package dpdk-dev; scripts/setup.sh installs it) and a build with
# the benchmarks (meson's default: build/tests/bench/tx_path_bench).
set -euo pipefail
build=${1:-build}
txbatch=$build/tools/txbatch
bench=$build/tests/bench/tx_path_bench
rounds=${ROUNDS:-3}
bursts=${BURSTS:-1 8 32 64}
for f in "$txbatch" "$bench"; do
  [[ -x $f ]] || { echo "perf_goals: $f is not there; valid: a built txbatch tree (meson setup" \
    "build && ninja -C build)" >&2; exit 2; }
done
command -v dpdk-testpmd >/dev/null ||
  { echo "perf_goals: dpdk-testpmd is not installed; valid: apt-get install dpdk-dev" >&2; exit 2; }
# shellcheck source=scripts/experiments/testpmd_txonly.sh
source "$(dirname "$0")/testpmd_txonly.sh"
eal=("${txonly_eal[@]}")
tmp=$(mktemp -d)
# testpmd leaves its (empty) runtime directory behind; remove it with ours.
trap 'rm -rf "$tmp"; rmdir "/var/run/dpdk/pg-tp-$$" 2>/dev/null || true' EXIT

testpmd_mpps() { testpmd_txonly_mpps "pg-tp-$$" "$1"; }  # burst

# One txbatch cell, 1 s window; prints "Mpps TX-CPU-ns-a-frame receiver-ns-a-frame" (0: none).
txbatch_cell() {  # driver, args...
  local driver=$1
  shift
  "$txbatch" run --driver "$driver" --proto udp --size 18 --procs 1 "$@" --duration 1 \
    --warmup 0.2 --rounds 1 --json "$tmp/t.json" -- "${eal[@]}" --file-prefix "pg-tx-$$" \
    >/dev/null
  python3 -c "import json,sys; r=json.load(open(sys.argv[1]))['records'][0]['results']; \
rx=r.get('receiver') or {}; \
print('%.4f %.1f %.1f' % (r['mpps'], r['cpu_ns_per_pkt'], rx.get('cpu_ns_per_pkt', 0)))" "$tmp/t.json"
}

bench_ns() {  # ns a frame of BM_EmuNullPath/32
  "$bench" --benchmark_filter='^BM_EmuNullPath/32$' --benchmark_min_time=0.5 \
    --benchmark_format=json 2>/dev/null |
    python3 -c "import json,sys; b=json.load(sys.stdin)['benchmarks'][0]; \
print('%.2f' % (b['cpu_time'] / 32))"
}

put() { echo "$2" >>"$tmp/$1"; }  # series value
sample=(--latency-sample 64)  # issue 48's rows
for r in $(seq "$rounds"); do
  line="round $r:"
  for b in $bursts; do
    tp=$(testpmd_mpps "$b")
    read -r none _ _ < <(txbatch_cell ethdev:net_null0 --qdisc none --policy "buffer:$b")
    put "ratio.$b" "$(awk -v t="$tp" -v n="$none" 'BEGIN {printf "%.3f", n / t}')"
    line+=" B$b testpmd $tp none $none;"
    [[ $b == 32 ]] && none32=$none
    [[ $b == 1 ]] && none1=$none
    if [[ $b == 32 ]]; then  # what the per-frame stamp costs: the same without it, sampled
      read -r nt _ _ < <(txbatch_cell ethdev:net_null0 --qdisc none --policy buffer:32 --no-timing)
      put notiming "$(awk -v t="$tp" -v n="$nt" 'BEGIN {printf "%.3f", n / t}')"
      read -r ns _ _ < <(txbatch_cell ethdev:net_null0 --qdisc none --policy buffer:32 "${sample[@]}")
      put sampled "$(awk -v t="$tp" -v n="$ns" 'BEGIN {printf "%.3f", n / t}')"
      line+=" no-timing $nt; sampled $ns;"
    fi
  done
  if [[ -z ${none32:-} ]]; then
    read -r none32 _ _ < <(txbatch_cell ethdev:net_null0 --qdisc none --policy buffer:32)
  fi
  if [[ -z ${none1:-} ]]; then
    read -r none1 _ _ < <(txbatch_cell ethdev:net_null0 --qdisc none --policy buffer:1)
  fi
  read -r pf _ _ < <(txbatch_cell ethdev:net_null0 --sync rootlock --runner inline --batch 32)
  put pfifo "$(awk -v p="$pf" -v n="$none32" 'BEGIN {printf "%.1f", 1000 / p - 1000 / n}')"
  put pfifo1 "$(awk -v p="$pf" -v n="$none1" 'BEGIN {printf "%.1f", 1000 / p - 1000 / n}')"
  line+=" pfifo_fast $pf;"
  read -r pfs _ _ < <(txbatch_cell ethdev:net_null0 --sync rootlock --runner inline --batch 32 \
    "${sample[@]}")
  read -r nones _ _ < <(txbatch_cell ethdev:net_null0 --qdisc none --policy buffer:32 \
    "${sample[@]}")
  put pfifo_s "$(awk -v p="$pfs" -v n="$nones" 'BEGIN {printf "%.1f", 1000 / p - 1000 / n}')"
  # The same on the lock-free pfifo_fast (Linux 4.16 on, TCQ_F_NOLOCK; 6.1's): no root lock, the
  # run flag (5.14's seqlock) instead, the TX lock as before.
  read -r pfn _ _ < <(txbatch_cell ethdev:net_null0 --sync nolock --runner inline --batch 32 \
    "${sample[@]}")
  put pfifo_sn "$(awk -v p="$pfn" -v n="$nones" 'BEGIN {printf "%.1f", 1000 / p - 1000 / n}')"
  line+=" sampled: pfifo_fast $pfs nolock $pfn none $nones;"
  for b in 1 32; do
    read -r ix _ _ < <(txbatch_cell emu:ixgbe,doorbell_ns=100 --qdisc none --policy "buffer:$b")
    put "ixgbe.$b" "$(awk -v m="$ix" 'BEGIN {printf "%.3f", m / 14.88}')"
    line+=" ixgbe B$b $ix;"
  done
  read -r ixs _ _ < <(txbatch_cell emu:ixgbe,doorbell_ns=100 --qdisc none --policy buffer:32 \
    "${sample[@]}")
  put ixgbe_s "$(awk -v m="$ixs" 'BEGIN {printf "%.3f", m / 14.88}')"
  line+=" sampled ixgbe B32 $ixs;"
  read -r nm ncpu nrx < <(txbatch_cell emu:null --qdisc none --policy buffer:32)
  bn=$(bench_ns)
  put null "$(awk -v c="$ncpu" -v x="$nrx" -v b="$bn" 'BEGIN {printf "%.2f", (c + x) / b}')"
  put null_tx "$(awk -v c="$ncpu" -v b="$bn" 'BEGIN {printf "%.2f", c / b}')"
  line+=" emu:null $nm Mpps, TX ${ncpu} ns + receiver ${nrx} ns, bench ${bn} ns;"
  read -r _ scpu srx < <(txbatch_cell emu:null --qdisc none --policy buffer:32 "${sample[@]}")
  put null_s "$(awk -v c="$scpu" -v x="$srx" -v b="$bn" 'BEGIN {printf "%.2f", (c + x) / b}')"
  line+=" sampled emu:null TX ${scpu} ns + receiver ${srx} ns"
  echo "$line"
  unset none32 none1
done

# One row of the table: series, what, unit before / after the numbers, goal.
row() {
  local m n
  read -r m n < <(sort -g "$tmp/$1" | awk '{a[NR]=$1} END {
    printf "%s %s\n", NR % 2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2, a[1]}')
  printf '%-64s %-8s %-8s %s\n' "$2" "$3$m$4" "$3$n$4" "$5"
}
echo
printf '%-64s %-8s %-8s %s\n' what median min goal
for b in $bursts; do
  row "ratio.$b" "none buffer:$b / testpmd burst $b (net_null)" "" x ">= 1.0x"
done
[[ -s $tmp/notiming ]] &&
  row notiming "  the same, --no-timing (no stamp: what it costs)" "" x "-"
row pfifo "pfifo_fast inline minus none, batch 32 (ns/frame)" + "" "<= +15"
row pfifo1 "  the same minus none buffer:1 (one producer: its batch is 1)" + "" "-"
for b in 1 32; do
  row "ixgbe.$b" "emu:ixgbe,doorbell_ns=100 buffer:$b / 14.88 Mpps" "" "" ">= 0.97"
done
row null "emu:null buffer:32 CPU ns (TX + receiver) / BM_EmuNullPath/32" "" x "<= 1.2x"
row null_tx "emu:null buffer:32 TX path's CPU ns alone / the same" "" x "-"
echo "with --latency-sample 64 (issue 48's goals):"
row sampled "  none buffer:32 / testpmd burst 32 (net_null)" "" x ">= 0.9x"
row pfifo_s "  pfifo_fast inline minus none, batch 32 (ns/frame)" + "" "<= +40"
row pfifo_sn "  the same lock-free (--sync nolock, Linux >= 4.16's pfifo_fast)" + "" "-"
row ixgbe_s "  emu:ixgbe,doorbell_ns=100 buffer:32 / 14.88 Mpps" "" "" ">= 0.60"
row null_s "  emu:null buffer:32 CPU ns (TX + receiver) / BM_EmuNullPath/32" "" x "<= 1.2x"
