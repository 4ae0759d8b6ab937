#!/usr/bin/env python3
"""The JSON document of scripts/kernel-ref.sh, from the files each case's guest sent back.

    kernel-ref-json.py --nic MODEL --out FILE.json CASE_DIR...

Each CASE_DIR holds job.sh (the KREF_* settings the case ran with), out/ (what the guest sent:
settings.txt, the trace histograms hist_*.txt, tc.txt, ethtool_stats.txt, pktgen_N.txt,
bql_samples.txt, tcp_samples.txt: kref-tcp-sampler's), wire.pcap (what the NIC put on the
cable, QEMU's filter-dump) and qemu-trace.log (QEMU's trace: the doorbells). doc/fidelity.md
says what each field means.
"""
import argparse
import datetime
import json
import os
import platform
import re
import shlex
import statistics
import struct
import subprocess
import sys

# e1000's registers, as offsets in its 128 KiB BAR 0 (QEMU's trace gives absolute addresses).
E1000_BAR_MASK = 0x1FFFF
E1000_TCTL = 0x400   # transmit control; bit 1 (EN) enables the transmitter
E1000_TDT = 0x3818   # transmit descriptor tail: the doorbell
E1000_TCTL_EN = 0x2


def read(path, default=""):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except FileNotFoundError:
        return default


def key_values(text):
    out = {}
    for line in text.splitlines():
        if "=" in line:
            k, v = line.split("=", 1)
            out[k.strip()] = v.strip()
    return out


def job_settings(case_dir):
    """The KREF_* assignments kernel-ref.sh wrote at the top of the case's job."""
    out = {}
    for line in read(os.path.join(case_dir, "job.sh")).splitlines():
        m = re.match(r"^(KREF_[A-Z_]+)=(.*)$", line)
        if m:
            out[m.group(1)] = shlex.split(m.group(2))[0] if m.group(2) else ""
    return out


def number(text):
    try:
        return int(text)
    except ValueError:
        return float(text)


def hist(text, key=None):
    """A hist trigger's output: {key: hitcount} and its Totals (hits, entries, dropped). An
    event with several triggers prints a histogram each: `key` picks the one keyed by it (the
    first where None)."""
    sections = [sec for sec in text.split("# event histogram")
                if "hitcount" in sec or "Totals" in sec]
    if key is not None:
        sections = [sec for sec in sections if re.search(r"hist:keys=%s[:\s]" % key, sec)]
    sec = sections[0] if sections else ""
    rows = {}
    for m in re.finditer(r"\{\s*(\w+):\s*(-?\d+)\s*\}\s*hitcount:\s*(\d+)", sec):
        rows[int(m.group(2))] = rows.get(int(m.group(2)), 0) + int(m.group(3))
    totals = {}
    for k in ("Hits", "Entries", "Dropped"):
        m = re.search(r"%s:\s*(\d+)" % k, sec)
        totals[k.lower()] = int(m.group(1)) if m else None
    return rows, totals


def tc_stats(text):
    """`tc -s -d qdisc show dev eth0`: the root qdisc's kind and counters."""
    first = text.strip().splitlines()[0] if text.strip() else ""
    kind = first.split()[1] if len(first.split()) > 1 else None
    out = {"kind": kind}
    m = re.search(r"Sent (\d+) bytes (\d+) pkt \(dropped (\d+), overlimits (\d+) requeues (\d+)\)", text)
    if m:
        out.update(sent_bytes=int(m.group(1)), sent_pkts=int(m.group(2)),
                   dropped=int(m.group(3)), overlimits=int(m.group(4)),
                   requeues=int(m.group(5)))
    m = re.search(r"backlog (\d+)b (\d+)p", text)
    if m:
        out.update(backlog_bytes=int(m.group(1)), backlog_pkts=int(m.group(2)))
    return out


def keyed_lines(text, pattern, value):
    """Each line of `text` that `pattern` matches from its start: group 1 -> value(group 2)."""
    return {m.group(1): value(m.group(2))
            for m in (re.match(pattern, line) for line in text.splitlines()) if m}


def ethtool_stats(text):
    """`ethtool -S eth0`: each counter's value."""
    return keyed_lines(text, r"^\s+([\w.\-\[\]]+):\s+(\d+)$", int)


def offloads(text):
    """`ethtool -k eth0`: each feature, on or off."""
    return keyed_lines(text, r"^([\w-]+):\s+(on|off)", lambda v: v == "on")


def pktgen(text):
    out = {}
    m = re.search(r"pkts-sofar:\s*(\d+)\s+errors:\s*(\d+)", text)
    if m:
        out.update(sent=int(m.group(1)), errors=int(m.group(2)))
    m = re.search(r"Result: OK: (\d+)\(c(\d+)\+d(\d+)\) usec", text)
    if m:
        out.update(usec=int(m.group(1)), usec_busy=int(m.group(2)), usec_idle=int(m.group(3)))
    return out


def pcap_records(path, keep_bytes=False):
    """Each frame of a classic pcap (QEMU's filter-dump) as (length on the wire, its captured
    bytes where keep_bytes, else None); None where the file is missing or has no header."""
    try:
        f = open(path, "rb")
    except FileNotFoundError:
        return None
    out = []
    with f:
        header = f.read(24)
        if len(header) < 24:
            return None
        magic = struct.unpack("<I", header[:4])[0]
        endian = "<" if magic in (0xA1B2C3D4, 0xA1B23C4D) else ">"
        while True:
            rec = f.read(16)
            if len(rec) < 16:
                break
            _, _, caplen, wirelen = struct.unpack(endian + "IIII", rec)
            if keep_bytes:
                out.append((wirelen, f.read(caplen)))
            else:
                f.seek(caplen, 1)
                out.append((wirelen, None))
    return out


def pcap_frames(path):
    """Frames in a classic pcap (QEMU's filter-dump), and their lengths on the wire by size."""
    records = pcap_records(path)
    if records is None:
        return None
    sizes = {}
    for wirelen, _ in records:
        sizes[wirelen] = sizes.get(wirelen, 0) + 1
    return sizes


def doorbells(trace_path, nic):
    """The NIC's doorbells from QEMU's trace: e1000's TDT writes while its transmitter is
    enabled (the driver also writes TDT = 0 while it sets the ring up, with TCTL.EN clear);
    virtio's notifications of queue 1 (the first TX queue)."""
    if not os.path.exists(trace_path):
        return None
    count = 0
    tx_enabled = False
    with open(trace_path, errors="replace") as f:
        for line in f:
            if nic == "virtio":
                m = re.search(r"virtio_queue_notify .* n (\d+) ", line)
                if m and int(m.group(1)) == 1:
                    count += 1
                continue
            if "'e1000-mmio'" not in line:
                continue
            m = re.search(r"addr (0x[0-9a-f]+) value (0x[0-9a-f]+)", line)
            if not m:
                continue
            reg = int(m.group(1), 16) & E1000_BAR_MASK
            value = int(m.group(2), 16)
            if reg == E1000_TCTL:
                tx_enabled = bool(value & E1000_TCTL_EN)
            elif reg == E1000_TDT and tx_enabled:
                count += 1
    return count


def irq_counts(text):
    """The NIC's interrupts (its /proc/interrupts line, every CPU's count summed) and the
    NET_TX softirqs (/proc/softirqs) from the lines the guest kept."""
    out = {"interrupts": None, "net_tx_softirqs": None}
    for line in text.splitlines():
        parts = line.split()
        if not parts:
            continue
        key = "net_tx_softirqs" if parts[0] == "NET_TX:" else "interrupts"
        if key == "interrupts" and parts[-1] != "eth0":
            continue
        out[key] = sum(int(p) for p in parts[1:] if p.isdigit())
    return out


def summary(values):
    if not values:
        return {"n": 0, "min": None, "median": None, "max": None}
    return {"n": len(values), "min": min(values), "median": statistics.median(values),
            "max": max(values)}


def bql_samples(text, t0, t1):
    """BQL's limit and inflight sampled in the guest during the run (those inside [t0, t1])."""
    rows = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 3:
            t, limit, inflight = float(parts[0]), int(parts[1]), int(parts[2])
            if t0 is None or t0 <= t <= t1:
                rows.append([t, limit, inflight])
    limits = [r[1] for r in rows]
    # The settled limit: over the run's second half (the first completions move it from 0).
    half = rows[len(rows) // 2:]
    return {
        "samples": len(rows),
        "limit": summary(limits),
        "limit_settled_median": statistics.median([r[1] for r in half]) if half else None,
        "inflight": summary([r[2] for r in rows]),
        "series": rows,  # [uptime_s, limit, inflight]
    }


def tcp_samples(text):
    """kref-tcp-sampler's output: its columns (the `#` line before the rows), its rows (one a
    socket a sample) and its own count of samples and late ones."""
    cols, rows, meta = [], [], {}
    for line in text.splitlines():
        if line.startswith("# samples"):
            parts = line[2:].split()
            meta = {parts[i]: number(parts[i + 1]) for i in range(0, len(parts) - 1, 2)}
        elif line.startswith("# "):
            cols = line[2:].split()
        elif line.strip() and cols and len(line.split()) == len(cols):
            rows.append([number(x) for x in line.split()])
    return cols, rows, meta


def quantiles(values, qs=(0.1, 0.5, 0.9)):
    """Nearest-rank quantiles ({"p10": ..., "p50": ..., "p90": ...}), None for no values."""
    v = sorted(values)
    return {"p%d" % round(q * 100): (v[min(len(v) - 1, int(q * len(v)))] if v else None)
            for q in qs}


# The guest's sk_gso_max_size (GSO_LEGACY_MAX_SIZE: e1000 sets no larger one), sk_pacing_shift
# and tcp_tso_rtt_log (sysctl, default 9: 512 us), and tcp_min_tso_segs (default 2).
GSO_MAX_SIZE = 65536
PACING_SHIFT = 10
TSO_RTT_LOG = 9
MIN_TSO_SEGS = 2


def size_goal(pacing_rate, min_rtt_us, mss, max_window):
    """The payload of the skbs a 6.1 socket sends at full speed in this state: tcp_write_xmit cuts
    them at tcp_tso_segs (tcp_tso_autosize: pacing_rate >> sk_pacing_shift plus gso_max_size >>
    (min_rtt >> tcp_tso_rtt_log), at most gso_max_size, in whole MSS, at least tcp_min_tso_segs)
    and tcp_xmit_size_goal at half the largest window the peer offered (tcp_bound_to_half_wnd,
    where that is over TCP_MSS_DEFAULT, 536)."""
    if not mss:
        return None
    autosize = pacing_rate >> PACING_SHIFT
    r = min_rtt_us >> TSO_RTT_LOG
    if r < 32:
        autosize += GSO_MAX_SIZE >> r
    segs = max(min(autosize, GSO_MAX_SIZE) // mss, MIN_TSO_SEGS)
    half = max_window >> 1 if max_window > 536 else max_window
    goal = GSO_MAX_SIZE if not half else min(GSO_MAX_SIZE, half)
    return max(min(segs, goal // mss), 1) * mss


def udp_results(case, nic):
    out_dir = os.path.join(case, "out")
    s = key_values(read(os.path.join(out_dir, "settings.txt")))
    deq, deq_tot = hist(read(os.path.join(out_dir, "hist_qdisc_dequeue.txt")), "packets")
    enq, enq_tot = hist(read(os.path.join(out_dir, "hist_qdisc_enqueue.txt")))
    xmit, xmit_tot = hist(read(os.path.join(out_dir, "hist_net_dev_xmit.txt")), "rc")
    start, start_tot = hist(read(os.path.join(out_dir, "hist_net_dev_start_xmit.txt")),
                            "queue_mapping")
    tc = tc_stats(read(os.path.join(out_dir, "tc.txt")))
    threads = []
    n = 0
    while os.path.exists(os.path.join(out_dir, "pktgen_%d.txt" % n)):
        threads.append(pktgen(read(os.path.join(out_dir, "pktgen_%d.txt" % n))))
        n += 1
    sent = sum(t.get("sent", 0) for t in threads)
    sizes = {k: v for k, v in sorted(deq.items()) if k > 0}
    bulks = sum(sizes.values())
    dequeued = sum(k * v for k, v in sizes.items())
    expanded_median = None
    if bulks:
        acc, half = 0, (bulks + 1) / 2
        for k, v in sizes.items():
            acc += v
            if acc >= half:
                expanded_median = k
                break
    requeues = tc.get("requeues")
    driver_ok = xmit.get(0, 0)
    # Frames that reached the driver with no dequeue: the empty-qdisc bypass (sch_direct_xmit
    # from __dev_xmit_skb); a requeued frame is dequeued again (from gso_skb, one a dequeue).
    bypassed = driver_ok - (dequeued - requeues) if requeues is not None else None
    bells = doorbells(os.path.join(case, "qemu-trace.log"), nic)
    wire = pcap_frames(os.path.join(case, "wire.pcap"))
    run = [float(x) for x in s.get("run_s", "").split()] or [None, None]
    guest_s = run[1] - run[0] if run[0] is not None else None
    before = irq_counts(read(os.path.join(out_dir, "irqs_before.txt")))
    after = irq_counts(read(os.path.join(out_dir, "irqs_after.txt")))
    irqs = {k: after[k] - before[k] if after[k] is not None and before[k] is not None else None
            for k in after}
    return {
        "batch_sizes": {str(k): v for k, v in sizes.items()},
        "empty_dequeues": deq.get(0, 0),
        "bulks": bulks,
        "dequeued_frames": dequeued,
        "avg_batch": dequeued / bulks if bulks else None,
        "median_batch": expanded_median,
        "mode_batch": max(sizes, key=lambda k: (sizes[k], k)) if sizes else None,
        "max_batch": max(sizes) if sizes else None,
        "single_frame_share": sizes.get(1, 0) / bulks if bulks else None,
        "enqueued": sum(enq.values()),
        "bypassed": bypassed,
        "handovers": bulks + bypassed if bypassed is not None else None,
        "driver_calls": sum(start.values()),
        "driver_calls_by_rc": {str(k): v for k, v in sorted(xmit.items())},
        "doorbells": bells,
        "xmit_more_calls": sum(start.values()) - bells if bells is not None else None,
        "doorbells_per_pkt": bells / sent if bells is not None and sent else None,
        "xmit_calls_per_pkt": sum(start.values()) / sent if sent else None,
        "trace_dropped": sum((t["dropped"] or 0) for t in (deq_tot, enq_tot, xmit_tot, start_tot)),
        "pktgen": {"sent": sent, "errors": sum(t.get("errors", 0) for t in threads),
                   "threads": threads},
        "qdisc": tc,
        "driver_counters": ethtool_stats(read(os.path.join(out_dir, "ethtool_stats.txt"))),
        "netdev_tx_packets": int(read(os.path.join(out_dir, "tx_packets.txt"), "0").strip() or 0),
        "wire_frames": sum(wire.values()) if wire is not None else None,
        "wire_frame_bytes": {str(k): v for k, v in sorted(wire.items())} if wire else None,
        "bql": dict(bql_samples(read(os.path.join(out_dir, "bql_samples.txt")), *run),
                    limit_after=int(s.get("bql_limit_after", 0)),
                    inflight_after=int(s.get("bql_inflight_after", 0))),
        "guest_seconds": guest_s,
        "pps": sent / guest_s if guest_s else None,
        # During pktgen's run: the NIC's interrupts (each a completion pass, e1000_clean) and
        # NET_TX softirqs (net_tx_action: the qdisc rescheduled, a woken queue run).
        "interrupts": irqs["interrupts"],
        "net_tx_softirqs": irqs["net_tx_softirqs"],
    }


def tcp_results(case):
    out_dir = os.path.join(case, "out")
    s = key_values(read(os.path.join(out_dir, "settings.txt")))
    run = [float(x) for x in s.get("run_s", "").split()] or [None, None]
    cols, rows, meta = tcp_samples(read(os.path.join(out_dir, "tcp_samples.txt")))
    col = {c: i for i, c in enumerate(cols)}
    get = lambda name: [r[col[name]] for r in rows] if name in col else []
    below = get("wmem_alloc")
    per_rate = [r[col["wmem_alloc"]] / r[col["pacing_rate"]] for r in rows if r[col["pacing_rate"]]]
    # The streams' own delivery: bytes acked over the samples' span, each socket, summed.
    by_sock = {}
    for r in rows:
        by_sock.setdefault(r[col["sport"]], []).append(r)
    delivered = 0.0
    for rs in by_sock.values():
        span = rs[-1][col["t"]] - rs[0][col["t"]]
        if span > 0:
            delivered += (rs[-1][col["bytes_acked"]] - rs[0][col["bytes_acked"]]) / span
    instants = sorted({r[col["t"]] for r in rows})
    # Each sample's size goal, from the socket's state then and the largest window its peer had
    # offered by then (tp->max_window; the sampler sees snd_wnd, the current one).
    goals, max_wnd = [], {}
    if "snd_wnd" in col:
        for r in rows:
            sport = r[col["sport"]]
            max_wnd[sport] = max(max_wnd.get(sport, 0), r[col["snd_wnd"]])
            goals.append(size_goal(r[col["pacing_rate"]], r[col["min_rtt"]], r[col["snd_mss"]],
                                   max_wnd[sport]))
    # The skbs the guest's TCP handed the driver (net_dev_xmit with rc 0, by len: one skb, a GSO
    # frame under TSO) and their segments (net_dev_start_xmit's gso_segs; 0 = not GSO).
    skb_len, skb_tot = hist(read(os.path.join(out_dir, "hist_net_dev_xmit.txt")), "len")
    segs, _ = hist(read(os.path.join(out_dir, "hist_net_dev_start_xmit.txt")), "gso_segs")
    skbs = sum(skb_len.values())
    skb_bytes = sum(k * v for k, v in skb_len.items())
    by_bytes, acc = None, 0
    for k in sorted(skb_len):
        acc += k * skb_len[k]
        if acc >= skb_bytes / 2:
            by_bytes = k
            break
    deq, _ = hist(read(os.path.join(out_dir, "hist_qdisc_dequeue.txt")), "packets")
    sizes = {k: v for k, v in sorted(deq.items()) if k > 0}
    tc = tc_stats(read(os.path.join(out_dir, "tc.txt")))
    wire = pcap_frames(os.path.join(case, "wire.pcap"))
    return {
        # kref-tcp-sampler's rows, `sample_columns` naming them (one a socket a sample).
        "sample_columns": cols,
        "samples": rows,
        "sample_count": len(rows),
        "sample_instants": len(instants),
        "sample_period_s": ((instants[-1] - instants[0]) / (len(instants) - 1)
                            if len(instants) > 1 else None),
        "sampler_late": meta.get("late"),
        "sockets": len(by_sock),
        "bytes_below_socket": dict(summary(below), **quantiles(below)),
        "below_p50": quantiles(below)["p50"],
        "below_p90": quantiles(below)["p90"],
        "below_socket_in_pacing_seconds": dict(summary(per_rate), **quantiles(per_rate)),
        "pacing_rate": quantiles(get("pacing_rate")),
        "min_rtt_us": quantiles(get("min_rtt")),
        "rtt_us": quantiles(get("rtt")),
        "cwnd": quantiles(get("cwnd")),
        "snd_wnd": quantiles(get("snd_wnd")),
        "delivery_rate": quantiles(get("delivery_rate")),
        "delivered_bytes_per_s": delivered,
        # 6.1's size goal at each sample (size_goal above), bytes of payload.
        "size_goal": quantiles([g for g in goals if g]),
        "skb_sizes": {str(k): v for k, v in sorted(skb_len.items())},
        "skb_gso_segs": {str(k): v for k, v in sorted(segs.items())},
        "skbs": skbs,
        "skb_len_mean": skb_bytes / skbs if skbs else None,
        "skb_len_max": max(skb_len) if skb_len else None,
        "skb_len_p50_by_bytes": by_bytes,
        "skb_trace_dropped": skb_tot.get("dropped"),
        "batch_sizes": {str(k): v for k, v in sizes.items()},
        "empty_dequeues": deq.get(0, 0),
        "qdisc": tc,
        "driver_counters": ethtool_stats(read(os.path.join(out_dir, "ethtool_stats.txt"))),
        "wire_frames": sum(wire.values()) if wire is not None else None,
        "bql": dict(bql_samples(read(os.path.join(out_dir, "bql_samples.txt")), *run),
                    limit_after=int(s.get("bql_limit_after", 0))),
        "guest_seconds": run[1] - run[0] if run[0] is not None else None,
    }


def wire_udp(path):
    """Every IPv4/UDP frame in a classic pcap, in order: (source port, bytes, TOS, the first 4
    payload bytes as a big-endian number: kref-fq-send's sequence number)."""
    out = []
    for wirelen, b in pcap_records(path, keep_bytes=True) or []:
        if len(b) < 46 or b[12:14] != b"\x08\x00" or b[23] != 17:
            continue
        l4 = 14 + (b[14] & 0xF) * 4
        if len(b) < l4 + 12:
            continue
        out.append((struct.unpack(">H", b[l4:l4 + 2])[0], wirelen, b[15],
                    struct.unpack(">I", b[l4 + 8:l4 + 12])[0]))
    return out


def fq_codel_tc(text):
    """fq_codel's block of `tc -s -d qdisc show` under tbf: its counters and tbf's."""
    out = {}
    for block in re.split(r"\n(?=qdisc )", text.strip()):
        kind = block.split()[1] if len(block.split()) > 1 else None
        stats = tc_stats(block)
        if kind == "fq_codel":
            for k in ("maxpacket", "drop_overlimit", "new_flow_count", "ecn_mark",
                      "drop_overmemory", "new_flows_len", "old_flows_len"):
                m = re.search(r"\b%s (\d+)" % k, block)
                if m:
                    stats[k] = int(m.group(1))
            out["fq_codel"] = stats
        elif kind:
            out[kind] = stats
    return out


def trace_calls(text):
    """kprobe events of the kref group (kernel-ref-guest.sh's fq_codel mode): each call of
    fq_codel_enqueue and __fq_codel_dequeue as [op, entry ns, return ns] ("enq", or "deq" with a
    4th element: whether it returned a frame), in the kernel's order. Entries and returns must
    alternate (the root lock serialises the calls); None where they do not."""
    calls, open_call = [], None
    for line in text.splitlines():
        m = re.search(r"\s(\d+)\.(\d{6}):\s+(enq|enq_ret|deq|deq_ret):(.*)$", line)
        if not m:
            continue
        ns = int(m.group(1)) * 1000000000 + int(m.group(2)) * 1000
        ev = m.group(3)
        if ev in ("enq", "deq"):
            if open_call is not None:
                return None
            open_call = [ev, ns]
        else:
            if open_call is None or open_call[0] != ev[:3]:
                return None
            call = open_call + [ns]
            if ev == "deq_ret":
                r = re.search(r"skb=0x([0-9a-f]+)", m.group(4))
                if not r:
                    return None
                call.append(int(r.group(1), 16) != 0)
            calls.append(call)
            open_call = None
    return calls if open_call is None else None


def fq_codel_results(case):
    out_dir = os.path.join(case, "out")
    wire = wire_udp(os.path.join(case, "wire.pcap"))
    cases = {}
    for name in ("drr", "drops"):
        c = key_values(read(os.path.join(out_dir, "fq_%s_case.txt" % name)))
        if not c:
            continue
        flows = []
        for f in c.get("flows", "").split():
            port, size, tos = (int(x) for x in f.split(":"))
            flows.append({"port": port, "bytes": size, "tos": tos})
        ports = {f["port"]: i for i, f in enumerate(flows)}
        frames = [[int(x) for x in line.split()]
                  for line in read(os.path.join(out_dir, "fq_%s_frames.txt" % name)).splitlines()
                  if line.strip()]
        trace = read(os.path.join(out_dir, "fq_%s_trace.txt" % name))
        m = re.search(r"entries-in-buffer/entries-written: (\d+)/(\d+)", trace)
        classes = read(os.path.join(out_dir, "fq_%s_classes.txt" % name))
        cases[name] = {
            "tbf_rate": c.get("rate"),
            "fq_codel": c.get("fq_codel", ""),
            "flows": flows,
            "pattern": c.get("pattern"),
            "attempts": int(c.get("attempts", 0)),
            # Buckets tc listed right after the sends (fq_codel's classes are its buckets).
            "buckets": sorted(set(re.findall(r"class fq_codel \S+:(\w+)", classes))),
            "frames": frames,
            "trace_lost": (int(m.group(2)) - int(m.group(1))) if m else None,
            "calls": trace_calls(trace),
            # The case's frames on the wire, in order: [seq, flow, bytes, tos].
            "wire": [[seq, ports[port], size, tos] for port, size, tos, seq in wire
                     if port in ports],
            "tc": fq_codel_tc(read(os.path.join(out_dir, "fq_%s_tc.txt" % name))),
        }
    return {"cases": cases}


def record(case, nic):
    job = job_settings(case)
    out_dir = os.path.join(case, "out")
    s = key_values(read(os.path.join(out_dir, "settings.txt")))
    mode = job["KREF_MODE"]
    config = {
        "case": job.get("KREF_CASE"),
        "mode": mode,
        "nic": nic,
        "qdisc": job["KREF_QDISC"],
        "txqueuelen": int(job["KREF_TXQLEN"]),
        "offloads_asked": job.get("KREF_OFFLOADS") or None,
        "bql": ({"mode": "pinned", "limit_min": int(job["KREF_BQL_MIN"]),
                 "limit_max": int(job["KREF_BQL_MAX"])}
                if job.get("KREF_BQL_MIN") else {"mode": "dynamic"}),
    }
    if mode == "udp":
        pkt = int(job["KREF_PKT_SIZE"])
        config.update(generator="pktgen", xmit_mode="queue_xmit", proto="udp",
                      pkt_size=pkt, wire_bytes=pkt + 4, threads=int(job["KREF_THREADS"]),
                      count_per_thread=int(job["KREF_COUNT"]), delay_ns=0)
        if config["bql"]["mode"] == "pinned":
            config["bql"]["frames"] = config["bql"]["limit_max"] // pkt
        results = udp_results(case, nic)
    elif mode == "fq_codel":
        config.update(generator="kref-fq-send (AF_PACKET, one sendto a frame)", proto="udp",
                      qdisc="fq_codel under tbf")
        results = fq_codel_results(case)
    else:
        config.update(generator="kref-tcp-send (64 KiB writes)", proto="tcp",
                      streams=int(job["KREF_STREAMS"]), seconds=float(job["KREF_SECONDS"]),
                      sink="QEMU user netdev guestfwd to `dd of=/dev/null` on the host",
                      sample_ms=int(job.get("KREF_SAMPLE_MS") or 10),
                      bottleneck_mbps=(float(job["KREF_TCP_RATE"]) if job.get("KREF_TCP_RATE")
                                       else None))
        results = tcp_results(case)
    env = {
        "kernel_release": s.get("kernel_release"),
        "kernel_version": s.get("kernel_version"),
        "nic_driver": s.get("nic_driver"),
        "nic_pci_id": s.get("nic_pci_id"),
        "vcpus": int(s["vcpus"]) if "vcpus" in s else None,
        "root_qdisc": tc_stats(read(os.path.join(out_dir, "qdisc.txt"))).get("kind"),
        "default_qdisc": s.get("default_qdisc"),
        "dev_tx_weight": (int(s["dev_weight"]) * int(s["dev_weight_tx_bias"])
                          if "dev_weight" in s else None),
        "txqueuelen": int(s["txqueuelen"]) if "txqueuelen" in s else None,
        "mtu": int(s["mtu"]) if "mtu" in s else None,
        "bql_limit_min": int(s["bql_limit_min"]) if "bql_limit_min" in s else None,
        "bql_limit_max": int(s["bql_limit_max"]) if "bql_limit_max" in s else None,
        "bql_hold_time_ms": int(s["bql_hold_time"]) if "bql_hold_time" in s else None,
        "tcp_limit_output_bytes": int(s["tcp_limit_output_bytes"]) if "tcp_limit_output_bytes" in s else None,
        "tcp_congestion_control": s.get("tcp_congestion_control"),
        "offloads": offloads(read(os.path.join(out_dir, "offloads.txt"))),
        "tx_ring": (lambda m: int(m.group(1)) if m else None)(
            re.search(r"Current hardware settings:.*?\nTX:\s+(\d+)",
                      read(os.path.join(out_dir, "rings.txt")), re.S)),
    }
    return {"config": config, "results": results, "env": env}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nic", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("cases", nargs="+")
    a = ap.parse_args()
    qemu = subprocess.run(["qemu-system-x86_64", "--version"], capture_output=True,
                          text=True).stdout.splitlines()
    doc = {
        "schema_version": 1,
        "kind": "kernel_reference",
        "env": {
            "host": platform.node(),
            "host_cpus": os.cpu_count(),
            "qemu": qemu[0] if qemu else None,
            "accel": "tcg",
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        },
        "records": [record(c, a.nic) for c in a.cases],
    }
    tmp = a.out + ".tmp"
    with open(tmp, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    os.replace(tmp, a.out)


if __name__ == "__main__":
    sys.exit(main())
