# Sourced by scripts/experiments/vs_testpmd.sh and scripts/experiments/perf_goals.sh: dpdk-testpmd's txonly generator on
# net_null0, and the EAL memory mode both sides of a comparison run in.
# shellcheck shell=bash

# One forwarding core's worth of CPUs, no hugepages, no shared config: the same for txbatch.
txonly_eal=(-l 0,1 --no-huge -m 512 --no-shconf --no-pci --no-telemetry)

# testpmd --forward-mode=txonly at `burst`, 64-byte frames, one forwarding core: its Tx-pps over a
# 1 s window of port statistics, in Mpps. testpmd leaves its (empty) runtime directory
# /var/run/dpdk/PREFIX behind: the caller removes it.
testpmd_txonly_mpps() {  # file-prefix burst
  (sleep 2.5; echo start; sleep 1; echo "show port stats all"; sleep 1
   echo "show port stats all"; sleep 0.2; echo stop; sleep 0.5; echo quit) |
    timeout 30 dpdk-testpmd "${txonly_eal[@]}" --file-prefix "$1" --vdev net_null0,no-rx=1 -- \
      -i --forward-mode=txonly --burst="$2" --txpkts=64 --nb-cores=1 --total-num-mbufs=8191 2>&1 |
    awk '/Tx-pps:/ {pps=$2} END {printf "%.3f\n", pps/1e6}'
}
