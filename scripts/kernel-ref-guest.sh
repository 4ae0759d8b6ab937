# The guest's side of scripts/kernel-ref.sh: one case of the kernel's own TX path, run by the VM
# lab's /init (tests/vm/guest-init.sh) as /job.sh, after the KREF_* settings kernel-ref.sh puts
# before it. It sends back raw files (`result NAME FILE`); kernel-ref-json.py reads them.
#
#   KREF_MODE      udp (pktgen), tcp (bulk streams to the host) or fq_codel (fq_codel's own
#                  order and CoDel's drops, below)
#   KREF_NIC       e1000 or virtio (the driver the case loads)
#   KREF_QDISC     the root qdisc (net.core.default_qdisc before the link comes up)
#   KREF_BQL_MIN, KREF_BQL_MAX  bytes for byte_queue_limits/limit_min and limit_max; empty: the
#                  kernel's defaults (0 and DQL_MAX_LIMIT: BQL dynamic)
#   KREF_TXQLEN    txqueuelen;  KREF_OFFLOADS  `ethtool -K eth0` arguments, or empty
#   KREF_COUNT, KREF_THREADS, KREF_PKT_SIZE    pktgen: frames per thread, kpktgend threads (one
#                  a vCPU), bytes per frame without the FCS
#   KREF_STREAMS, KREF_SECONDS  tcp: streams, how long they send
#   KREF_SAMPLE_S  the period of the shell loop that reads BQL's limit and inflight
#   KREF_SAMPLE_MS tcp: the socket sampler's period (/usr/bin/kref-tcp-sampler; the streams are
#                  /usr/bin/kref-tcp-send's: kernel-ref.sh builds both from scripts/kref-tcp-*.c
#                  and adds them to the image)
#   KREF_SINK      tcp: the address:port QEMU forwards to the host's sink (guestfwd)
#   KREF_TCP_RATE  tcp: Mbit/s of a tbf root qdisc below the sockets (sch_tbf.ko, which
#                  kernel-ref.sh adds beside the tools); empty: none
#   KREF_FQ_{DRR,CODEL}_{RATE,WORDS,FLOWS,PATTERN}  fq_codel: each case's tbf rate, fq_codel's
#                  tc words, kref-fq-send's flows (PORT:BYTES:TOS a flow) and its pattern
T=/sys/kernel/tracing
O=/tmp/kref
mkdir -p $O
mount -t tracefs nodev $T

# No IPv6 (its router and neighbour solicitations would be frames of their own), and the root
# qdisc chosen before any device exists: attach_default_qdiscs reads default_qdisc at link up.
echo 1 > /proc/sys/net/ipv6/conf/all/disable_ipv6
echo 1 > /proc/sys/net/ipv6/conf/default/disable_ipv6
[ "$KREF_QDISC" = fq ] && modprobe sch_fq
echo "$KREF_QDISC" > /proc/sys/net/core/default_qdisc
case $KREF_NIC in
  e1000) modprobe e1000 ;;
  virtio) modprobe virtio_pci && modprobe virtio_net ;;
  *) echo "kernel-ref: no NIC $KREF_NIC"; exit 2 ;;
esac
i=0
while [ ! -e /sys/class/net/eth0 ]; do
  i=$((i + 1)); [ $i -gt 100 ] && { echo "kernel-ref: no eth0"; exit 2; }; sleep 0.1
done
B=/sys/class/net/eth0/queues/tx-0/byte_queue_limits
echo "$KREF_TXQLEN" > /sys/class/net/eth0/tx_queue_len
# limit_max first: a limit_min above the old limit_max would be clamped down to it.
[ -n "$KREF_BQL_MAX" ] && echo "$KREF_BQL_MAX" > $B/limit_max
[ -n "$KREF_BQL_MIN" ] && echo "$KREF_BQL_MIN" > $B/limit_min
[ -n "$KREF_OFFLOADS" ] && /usr/sbin/ethtool -K eth0 $KREF_OFFLOADS
ip link set eth0 up
i=0
while [ "$(cat /sys/class/net/eth0/carrier 2>/dev/null)" != 1 ]; do
  i=$((i + 1)); [ $i -gt 100 ] && { echo "kernel-ref: eth0 has no carrier"; exit 2; }; sleep 0.1
done

# Histograms in the kernel (hist triggers), not the trace buffer: a run of 10^5 frames would
# overrun it. A trigger counts whether or not the event is enabled for tracing.
echo 'hist:keys=packets:sort=packets:size=256' > $T/events/qdisc/qdisc_dequeue/trigger
echo 'hist:keys=ifindex' > $T/events/qdisc/qdisc_enqueue/trigger
echo 'hist:keys=rc' > $T/events/net/net_dev_xmit/trigger
echo 'hist:keys=queue_mapping' > $T/events/net/net_dev_start_xmit/trigger

# settings: what the case ran with, as the kernel reports it.
{
  echo "kernel_release=$(uname -r)"
  echo "kernel_version=$(uname -v)"
  echo "nic_driver=$(basename "$(readlink /sys/class/net/eth0/device/driver)")"
  echo "nic_pci_id=$(cat /sys/class/net/eth0/device/vendor):$(cat /sys/class/net/eth0/device/device)"
  echo "vcpus=$(grep -c ^processor /proc/cpuinfo)"
  echo "default_qdisc=$(cat /proc/sys/net/core/default_qdisc)"
  echo "dev_weight=$(cat /proc/sys/net/core/dev_weight)"
  echo "dev_weight_tx_bias=$(cat /proc/sys/net/core/dev_weight_tx_bias)"
  echo "txqueuelen=$(cat /sys/class/net/eth0/tx_queue_len)"
  echo "mtu=$(cat /sys/class/net/eth0/mtu)"
  for f in limit_min limit_max hold_time limit; do echo "bql_$f=$(cat $B/$f)"; done
  echo "tcp_limit_output_bytes=$(cat /proc/sys/net/ipv4/tcp_limit_output_bytes)"
  echo "tcp_congestion_control=$(cat /proc/sys/net/ipv4/tcp_congestion_control)"
} > $O/settings.txt
/usr/sbin/tc qdisc show dev eth0 > $O/qdisc.txt
/usr/sbin/ethtool -k eth0 > $O/offloads.txt 2>&1 || true
/usr/sbin/ethtool -g eth0 > $O/rings.txt 2>&1 || true
/usr/sbin/ethtool -c eth0 > $O/coalesce.txt 2>&1 || true

# BQL's limit and inflight, sampled with the shell's builtins (no fork a sample) until
# /tmp/kref/stop exists: "uptime_s limit inflight" a line.
sample_bql() {
  while [ ! -e $O/stop ]; do
    read -r up _ < /proc/uptime
    read -r l < $B/limit
    read -r n < $B/inflight
    echo "$up $l $n"
    sleep "${KREF_SAMPLE_S:-0.01}"
  done > $O/bql_samples.txt
}

if [ "$KREF_MODE" = udp ]; then
  modprobe pktgen
  P=/proc/net/pktgen
  t=0
  while [ $t -lt "$KREF_THREADS" ]; do
    echo rem_device_all > $P/kpktgend_$t
    echo "add_device eth0@$t" > $P/kpktgend_$t
    d=$P/eth0@$t
    echo "count $KREF_COUNT" > $d
    echo "pkt_size $KREF_PKT_SIZE" > $d
    echo "delay 0" > $d
    echo "clone_skb 0" > $d
    echo "xmit_mode queue_xmit" > $d
    echo "dst 10.0.2.99" > $d
    echo "dst_mac 02:00:00:00:00:99" > $d
    t=$((t + 1))
  done
  sample_bql &
  sampler=$!
  # The NIC's interrupts and the NET_TX softirqs around the run (per CPU): how often the guest
  # saw its completions, what the model's completion cadence is fitted to.
  grep -h -e eth0 -e NET_TX /proc/interrupts /proc/softirqs > $O/irqs_before.txt
  read -r t0 _ < /proc/uptime
  echo start > $P/pgctrl
  read -r t1 _ < /proc/uptime
  grep -h -e eth0 -e NET_TX /proc/interrupts /proc/softirqs > $O/irqs_after.txt
  touch $O/stop
  wait $sampler
  echo "run_s=$t0 $t1" >> $O/settings.txt
  t=0
  while [ $t -lt "$KREF_THREADS" ]; do cat $P/eth0@$t > $O/pktgen_$t.txt; t=$((t + 1)); done
elif [ "$KREF_MODE" = fq_codel ]; then
  # fq_codel's own order and drops (tests/vm/fq_codel_ref_test.cc): fq_codel under tbf, so that
  # a backlog forms in it and its own dequeue order and CoDel's drops show on the wire, fed by
  # /usr/bin/kref-fq-send (frames of a few UDP flows, in a fixed order, one sendto each). Every
  # call of fq_codel_enqueue and of __fq_codel_dequeue (6.1.192's DRR and codel_dequeue, which
  # both fq_codel_dequeue and fq_codel_peek call: tbf peeks, then takes the peeked frame) is a
  # kprobe event at its entry and its return, stamped by the mono trace clock (ktime_get_ns:
  # CoDel's own clock, codel_get_time is its ns >> 10): the calls are serialised by the root
  # lock, so their order is the kernel's, and each entry and return bracket the instant CoDel
  # read its clock in that call.
  # Each case: NAME TBF_RATE FQ_CODEL_WORDS FLOWS PATTERN (kref-fq-send's -f list and -s).
  insmod /usr/bin/sch_tbf.ko
  echo mono > $T/trace_clock
  echo 16384 > $T/buffer_size_kb
  for e in 'p:kref/enq fq_codel_enqueue' 'r:kref/enq_ret fq_codel_enqueue' \
      'p:kref/deq __fq_codel_dequeue' 'r:kref/deq_ret __fq_codel_dequeue skb=$retval:x64'; do
    echo "$e" >> $T/kprobe_events
  done
  fq_case() {
    name=$1 rate=$2 words=$3 flows=$4 pattern=$5
    attempt=0
    while :; do
      /usr/sbin/tc qdisc del dev eth0 root 2>/dev/null || true
      # tbf's burst holds one 1514-byte frame; its limit applies to its own bfifo only, which
      # fq_codel replaces.
      /usr/sbin/tc qdisc add dev eth0 root handle 1: tbf rate "$rate" burst 1600 limit 1000000
      /usr/sbin/tc qdisc add dev eth0 parent 1:1 handle 10: fq_codel $words
      echo > $T/trace
      echo 1 > $T/events/kref/enable
      set --
      for f in $flows; do set -- "$@" -f "$f"; done
      /usr/bin/kref-fq-send -i eth0 "$@" -s "$pattern" > $O/fq_${name}_frames.txt
      # The flows' buckets while they are all backlogged (fq_codel's classes are its buckets).
      /usr/sbin/tc -s class show dev eth0 > $O/fq_${name}_classes.txt
      i=0
      while /usr/sbin/tc -s qdisc show dev eth0 | grep backlog | grep -qv 'backlog 0b 0p'; do
        i=$((i + 1)); [ $i -gt 300 ] && { echo "kernel-ref: fq_codel case $name never drained"; exit 2; }
        sleep 0.05
      done
      echo 0 > $T/events/kref/enable
      # Two of the flows in one bucket (the kernel's hash is seeded at boot): fq_codel would
      # serve them as one flow. Again with the ports moved on (another draw of the hash), at
      # most twice.
      n=$(grep -c '^class fq_codel' $O/fq_${name}_classes.txt || true)
      want=$(echo $flows | wc -w)
      if [ "$n" -ge "$want" ] || [ $attempt -ge 2 ]; then break; fi
      attempt=$((attempt + 1))
      flows=$(for f in $flows; do echo "$((${f%%:*} + 100)):${f#*:}"; done)
    done
    cat $T/trace > $O/fq_${name}_trace.txt
    /usr/sbin/tc -s -d qdisc show dev eth0 > $O/fq_${name}_tc.txt
    { echo "rate=$rate"; echo "fq_codel=$words"; echo "flows=$(echo $flows)"
      echo "pattern=$pattern"; echo "attempts=$((attempt + 1))"; } > $O/fq_${name}_case.txt
  }
  read -r t0 _ < /proc/uptime
  fq_case drr "$KREF_FQ_DRR_RATE" "$KREF_FQ_DRR_WORDS" "$KREF_FQ_DRR_FLOWS" "$KREF_FQ_DRR_PATTERN"
  fq_case drops "$KREF_FQ_CODEL_RATE" "$KREF_FQ_CODEL_WORDS" "$KREF_FQ_CODEL_FLOWS" \
    "$KREF_FQ_CODEL_PATTERN"
  read -r t1 _ < /proc/uptime
  echo "run_s=$t0 $t1" >> $O/settings.txt
else
  # The sampler reads each socket's memory, pacing rate and RTT through inet_diag (tcp_diag).
  modprobe tcp_diag
  ip addr add 10.0.2.15/24 dev eth0
  # The skbs TCP hands the driver (tcp_tso_autosize sizes them from the pacing rate and the min
  # RTT): net_dev_xmit's len where the driver took it, and net_dev_start_xmit's gso_segs.
  echo 'hist:keys=len:sort=len:size=8192 if rc == 0' >> $T/events/net/net_dev_xmit/trigger
  echo 'hist:keys=gso_segs:sort=gso_segs:size=256' >> $T/events/net/net_dev_start_xmit/trigger
  if [ -n "$KREF_TCP_RATE" ]; then
    # A bottleneck below the sockets, as a wire is (QEMU's e1000 has none: a frame is done at
    # its doorbell): tbf at KREF_TCP_RATE Mbit/s as the root qdisc. Its burst holds one 64 KiB
    # GSO skb whole (tbf cuts a larger one); its 4 MB limit is far above what TSQ lets below
    # eight sockets, so it drops nothing.
    insmod /usr/bin/sch_tbf.ko
    /usr/sbin/tc qdisc replace dev eth0 root tbf rate "${KREF_TCP_RATE}mbit" burst 70000 \
      limit 4000000
    /usr/sbin/tc qdisc show dev eth0 > $O/qdisc.txt
  fi
  sample_bql &
  sampler=$!
  read -r t0 _ < /proc/uptime
  # Bulk streams, each a process writing 64 KiB of zeros a call (kref-tcp-send).
  /usr/bin/kref-tcp-send -c "${KREF_SINK%:*}" -p "${KREF_SINK#*:}" -n "$KREF_STREAMS" \
    -d "$KREF_SECONDS" 2> $O/tcp_send_err.txt &
  senders=$!
  # Every established socket to the sink, every KREF_SAMPLE_MS, while the senders send.
  /usr/bin/kref-tcp-sampler -p "${KREF_SINK#*:}" -i "${KREF_SAMPLE_MS:-10}" -d "$KREF_SECONDS" \
    > $O/tcp_samples.txt 2> $O/tcp_sampler_err.txt || echo "kernel-ref: the sampler failed"
  wait "$senders" || echo "kernel-ref: the sender failed"
  read -r t1 _ < /proc/uptime
  touch $O/stop
  wait $sampler
  echo "run_s=$t0 $t1" >> $O/settings.txt
fi

# Let the NIC's last completions land, then read the books.
sleep 0.5
echo "bql_limit_after=$(cat $B/limit)" >> $O/settings.txt
echo "bql_inflight_after=$(cat $B/inflight)" >> $O/settings.txt
for e in qdisc/qdisc_dequeue qdisc/qdisc_enqueue net/net_dev_xmit net/net_dev_start_xmit; do
  cat $T/events/$e/hist > $O/hist_${e#*/}.txt
done
/usr/sbin/tc -s -d qdisc show dev eth0 > $O/tc.txt
/usr/sbin/ethtool -S eth0 > $O/ethtool_stats.txt 2>&1 || true
cat /sys/class/net/eth0/statistics/tx_packets > $O/tx_packets.txt
for f in $O/*.txt; do result "$(basename "$f")" "$f"; done
