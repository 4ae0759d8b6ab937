#!/usr/bin/env bash
# The kernel's own TX path as a reference (doc/fidelity.md, "The kernel's own run"): the VM lab's
# Debian guest (scripts/vm-lab.sh) sends through its own qdisc and driver, and what the kernel
# counts comes back as one JSON document.
#
#   scripts/kernel-ref.sh [OPTIONS] --out FILE.json
#
#   --dir DIR          the VM lab's image (default build/vm/image, the vm suite's; made with
#                      `scripts/vm-lab.sh image DIR` when it has none)
#   --nic MODEL        e1000 (default) or virtio (QEMU's virtio-net-pci, the kernel's virtio_net)
#   --qdisc NAME       the root qdisc: pfifo_fast (default), fq_codel (Debian's default), fq
#   --bql LIST         UDP cases, one boot each: N pins BQL at N frames' bytes (limit_min =
#                      limit_max = N x --pkt-size), `dynamic` leaves it to the kernel (default
#                      10,40,dynamic; `none` runs no UDP case)
#   --count N          pktgen frames per thread (default 20000)
#   --threads N        kpktgend threads, one a vCPU (default 2; the guest has 2 vCPUs)
#   --pkt-size N       bytes per frame without the FCS (default 60: 64 on the wire)
#   --txqueuelen N     (default 1000)
#   --offloads ARGS    `ethtool -K eth0 ARGS` before the link comes up, e.g. "tso off gso off"
#   --tcp LIST         TCP cases, one boot each: streams to the host (e.g. 1,8; default none)
#   --tcp-seconds S    how long each TCP case sends (default 5)
#   --tcp-sample-ms MS how often the guest samples each TCP socket (inet_diag: bytes below it,
#                      pacing rate, RTTs, cwnd, delivery rate; default 10)
#   --tcp-rate MBIT    a bottleneck below the TCP sockets: tbf at MBIT Mbit/s as the root qdisc
#                      (QEMU's e1000 has no wire; doc/fidelity.md "TCP Small Queues" says why it
#                      is needed; default none)
#   --fq-codel         one more case, one boot: fq_codel's own DRR order and CoDel's drops under
#                      a tbf bottleneck, every fq_codel_enqueue and fq_codel_dequeue call traced
#                      (tests/vm/kref-fq-send.c sends; tests/vm/fq_codel_ref_test.cc replays the
#                      calls on txbatch's FqCodel; doc/fidelity.md "fq_codel beside the kernel's")
#   --keep DIR         keep each case's raw files (the guest's, the QEMU trace) in DIR/CASE
#
# Every case boots a fresh guest: DQL's state (adj_limit survives dql_reset, so a link bounced
# between cases would start its next case with a stale byte budget), the qdisc's counters and
# the trace histograms then belong to that case alone. Exit status: 0, 2 on bad usage or a
# missing image, 1 when a guest failed.
set -euo pipefail
here=$PWD
cd "$(dirname "$0")/.."
root=$PWD

die() { echo "kernel-ref: $*" >&2; exit 2; }

dir=$root/build/vm/image nic=e1000 qdisc=pfifo_fast bql=10,40,dynamic count=20000 threads=2
pkt_size=60 txqueuelen=1000 offloads= tcp= tcp_seconds=5 tcp_sample_ms=10 tcp_rate= keep= out= fq_codel=
while (($#)); do
  case $1 in
    --dir) dir=$(cd "$here" && realpath -m "$2"); shift 2 ;;
    --nic) nic=$2; shift 2 ;;
    --qdisc) qdisc=$2; shift 2 ;;
    --bql) bql=$2; shift 2 ;;
    --count) count=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --pkt-size) pkt_size=$2; shift 2 ;;
    --txqueuelen) txqueuelen=$2; shift 2 ;;
    --offloads) offloads=$2; shift 2 ;;
    --tcp) tcp=$2; shift 2 ;;
    --tcp-seconds) tcp_seconds=$2; shift 2 ;;
    --tcp-sample-ms) tcp_sample_ms=$2; shift 2 ;;
    --tcp-rate) tcp_rate=$2; shift 2 ;;
    --fq-codel) fq_codel=1; shift ;;
    --keep) keep=$(cd "$here" && realpath -m "$2"); shift 2 ;;
    --out) out=$(cd "$here" && realpath -m "$2"); shift 2 ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option $1 (--help lists them)" ;;
  esac
done
[[ -n $out ]] || die "--out FILE.json is required"
case $nic in
  e1000) device=e1000 ;;
  virtio) device=virtio-net-pci ;;
  *) die "--nic is e1000 or virtio, not $nic" ;;
esac
case $qdisc in pfifo_fast | fq_codel | fq) ;; *) die "--qdisc is pfifo_fast, fq_codel or fq, not $qdisc" ;; esac
for n in "$count" "$threads" "$pkt_size" "$txqueuelen" "$tcp_seconds" "$tcp_sample_ms"; do
  [[ $n =~ ^[1-9][0-9]*$ ]] || die "$n is not a positive whole number"
done
((threads <= ${TXBATCH_VM_CPUS:-2})) || die "--threads $threads: the guest has ${TXBATCH_VM_CPUS:-2} vCPUs (one kpktgend each)"
[[ -z $tcp_rate || $tcp_rate =~ ^[1-9][0-9]*$ ]] || die "--tcp-rate is a whole number of Mbit/s, not $tcp_rate"
((pkt_size >= 60 && pkt_size <= 1514)) || die "--pkt-size is 60 to 1514 bytes (without the FCS), not $pkt_size"

if [[ ! -f $dir/initramfs.cpio.gz ]]; then
  echo "kernel-ref: no image in $dir: making one" >&2
  bash scripts/vm-lab.sh image "$dir" >&2
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/kernel-ref.XXXXXX")
trap 'rm -rf "$work"' EXIT

# The TCP and fq_codel cases' tools, built here and added to a copy of the image as one more cpio archive
# after it (the kernel unpacks them in turn; the image ends 4-byte aligned), so the lab's image,
# which the vm suite shares, stays as it is: the sampler (scripts/kref-tcp-sampler.c: inet_diag
# every 10 ms, where ss under TCG ran every 0.5-1.3 s) and the sender (scripts/kref-tcp-send.c:
# 64 KiB writes, where busybox nc's 1 KiB ones bounded a stream under TCG).
if [[ -n $tcp || -n $fq_codel ]]; then
  command -v gcc >/dev/null || die "the TCP and fq_codel cases build their senders: gcc is not installed"
  mkdir -p "$work/tools/usr/bin" "$work/image"
  for t in scripts/kref-tcp-sampler.c scripts/kref-tcp-send.c tests/vm/kref-fq-send.c; do
    b=$(basename "$t" .c)
    gcc -O2 -static -Wall -o "$work/tools/usr/bin/$b" "$t" \
      || die "$t did not build (gcc -static needs libc6-dev's libc.a)"
  done
  # sch_tbf for --tcp-rate and the fq_codel case's bottleneck: the module from the image's kernel package (it has no dependencies).
  tbf=$(find "$dir/modules" -path '*/kernel/net/sched/sch_tbf.ko' -print -quit)
  [[ -n $tbf ]] || die "no sch_tbf.ko under $dir/modules (scripts/vm-lab.sh image $dir unpacks it)"
  cp "$tbf" "$work/tools/usr/bin/"
  (cd "$work/tools" && printf 'usr/bin/%s\n' kref-tcp-sampler kref-tcp-send kref-fq-send sch_tbf.ko \
    | cpio -o -H newc --quiet) >"$work/tools.cpio"
  cat "$dir/initramfs.cpio.gz" "$work/tools.cpio" >"$work/image/initramfs.cpio.gz"
  truncate -s %4 "$work/image/initramfs.cpio.gz"
  ln -s "$dir/vmlinuz" "$work/image/vmlinuz"
fi
image=$dir  # what run_case boots
cases=()

# run_case NAME KEY=VALUE...: boots a guest that runs one case with these KREF_* settings.
run_case() {
  local name=$1 case_dir=$work/$1
  shift
  mkdir -p "$case_dir"
  {
    for kv in "$@"; do printf "%s='%s'\n" "${kv%%=*}" "${kv#*=}"; done
    cat scripts/kernel-ref-guest.sh
  } >"$case_dir/job.sh"
  # Doorbells, counted on the host: e1000's are its TDT register's writes (QEMU's
  # memory_region_ops_write), virtio's the guest's notifications of its TX queue.
  local trace=memory_region_ops_write
  [[ $nic == virtio ]] && trace=virtio_queue_notify
  # The guest reaches the host only through this forward (restrict=on): a TCP sink per
  # connection, QEMU's user stack acknowledging what it receives.
  local netdev="user,id=n0,restrict=on,guestfwd=tcp:10.0.2.100:5001-cmd:dd of=/dev/null bs=64k"
  echo "kernel-ref: case $name" >&2
  if ! TXBATCH_VM_TIMEOUT=${TXBATCH_VM_TIMEOUT:-240} bash scripts/vm-lab.sh boot "$image" \
      "$case_dir/job.sh" "$case_dir/out" -- -netdev "$netdev" \
      -device "$device,netdev=n0,addr=04.0" \
      -object "filter-dump,id=f0,netdev=n0,queue=rx,file=$case_dir/wire.pcap" \
      -trace "enable=$trace,file=$case_dir/qemu-trace.log" >"$case_dir/lab.log" 2>&1; then
    cat "$case_dir/lab.log" >&2
    tail -20 "$case_dir/out/console.log" >&2 2>/dev/null || true
    echo "kernel-ref: case $name: the guest failed" >&2
    return 1
  fi
  if [[ $(cat "$case_dir/out/exit") != 0 ]]; then
    tail -20 "$case_dir/out/console.log" >&2
    echo "kernel-ref: case $name: the guest's job failed (status $(cat "$case_dir/out/exit"))" >&2
    return 1
  fi
  cases+=("$case_dir")
}

common=(KREF_NIC="$nic" KREF_QDISC="$qdisc" KREF_TXQLEN="$txqueuelen" KREF_OFFLOADS="$offloads")
rc=0
if [[ $bql != none ]]; then
  for b in ${bql//,/ }; do
    if [[ $b == dynamic ]]; then
      min= max=
    elif [[ $b =~ ^[1-9][0-9]*$ ]]; then
      min=$((b * pkt_size)) max=$((b * pkt_size))
    else
      die "--bql takes frame counts and 'dynamic', not $b"
    fi
    run_case "udp_bql_$b" "${common[@]}" KREF_MODE=udp KREF_BQL_MIN="$min" KREF_BQL_MAX="$max" \
      KREF_COUNT="$count" KREF_THREADS="$threads" KREF_PKT_SIZE="$pkt_size" KREF_CASE="bql_$b" || rc=1
  done
fi
[[ -z $tcp && -z $fq_codel ]] || image=$work/image
for s in ${tcp//,/ }; do
  [[ $s =~ ^[1-9][0-9]*$ ]] || die "--tcp takes stream counts, not $s"
  run_case "tcp_$s" "${common[@]}" KREF_MODE=tcp KREF_BQL_MIN= KREF_BQL_MAX= KREF_STREAMS="$s" \
    KREF_SECONDS="$tcp_seconds" KREF_SAMPLE_MS="$tcp_sample_ms" KREF_TCP_RATE="$tcp_rate" \
    KREF_SINK=10.0.2.100:5001 KREF_CASE="tcp_$s" || rc=1
done

# fq_codel under tbf (kernel-ref-guest.sh's fq_codel mode), two cases in one boot. drr: three
# flows of 1514-, 700- and 150-byte frames, 74 frames sent at once into a 250 kbit/s tbf (~1 s
# to drain, every flow backlogged for the first ~0.6 s: tc lists their buckets meanwhile),
# CoDel's target far above any sojourn, so that only DRR decides the order. drops: two flows of 1000-byte frames (not ECN-capable: dropped) and 800-byte ones (ECT(0): marked),
# 100 frames at once into 1 Mbit/s (~0.7 s), fq_codel's defaults (target 5ms interval 100ms).
if [[ -n $fq_codel ]]; then
  run_case fq_codel "${common[@]}" KREF_MODE=fq_codel KREF_BQL_MIN= KREF_BQL_MAX= \
    KREF_FQ_DRR_RATE=250kbit KREF_FQ_DRR_WORDS="target 5s interval 10s" \
    KREF_FQ_DRR_FLOWS="5001:1514:0 5002:700:0 5003:150:0" \
    KREF_FQ_DRR_PATTERN="6x0.6x1.30x2.4x(01222222)" \
    KREF_FQ_CODEL_RATE=1mbit KREF_FQ_CODEL_WORDS="" \
    KREF_FQ_CODEL_FLOWS="6001:1000:0 6002:800:2" KREF_FQ_CODEL_PATTERN="50x(01)" \
    KREF_CASE=fq_codel || rc=1
fi

if [[ -n $keep ]]; then
  mkdir -p "$keep"
  cp -r "$work"/. "$keep"/
fi
((${#cases[@]} > 0)) || { echo "kernel-ref: no case ran" >&2; exit 1; }
python3 scripts/kernel-ref-json.py --nic "$nic" --out "$out" "${cases[@]}"
echo "kernel-ref: $out (${#cases[@]} cases)" >&2
exit "$rc"
