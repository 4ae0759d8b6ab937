#!/usr/bin/env python3
"""The JSON document of scripts/kernel-ref.sh, from the files each case's guest sent back.

    kernel-ref-json.py --nic MODEL --out FILE.json CASE_DIR...

Each CASE_DIR holds job.sh (the KREF_* settings the case ran with), out/ (what the guest sent:
settings.txt, the trace histograms hist_*.txt, tc.txt, ethtool_stats.txt, pktgen_N.txt,
bql_samples.txt, ss_samples.txt), wire.pcap (what the NIC put on the cable, QEMU's filter-dump)
and qemu-trace.log (QEMU's trace: the doorbells). doc/fidelity.md says what each field means.
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


def hist(text):
    """A hist trigger's output: {key: hitcount} and its Totals (hits, entries, dropped)."""
    rows = {}
    for m in re.finditer(r"\{\s*(\w+):\s*(-?\d+)\s*\}\s*hitcount:\s*(\d+)", text):
        rows[int(m.group(2))] = rows.get(int(m.group(2)), 0) + int(m.group(3))
    totals = {}
    for k in ("Hits", "Entries", "Dropped"):
        m = re.search(r"%s:\s*(\d+)" % k, text)
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


def ethtool_stats(text):
    out = {}
    for line in text.splitlines():
        m = re.match(r"^\s+([\w.\-\[\]]+):\s+(\d+)$", line)
        if m:
            out[m.group(1)] = int(m.group(2))
    return out


def offloads(text):
    out = {}
    for line in text.splitlines():
        m = re.match(r"^([\w-]+):\s+(on|off)", line)
        if m:
            out[m.group(1)] = m.group(2) == "on"
    return out


def pktgen(text):
    out = {}
    m = re.search(r"pkts-sofar:\s*(\d+)\s+errors:\s*(\d+)", text)
    if m:
        out.update(sent=int(m.group(1)), errors=int(m.group(2)))
    m = re.search(r"Result: OK: (\d+)\(c(\d+)\+d(\d+)\) usec", text)
    if m:
        out.update(usec=int(m.group(1)), usec_busy=int(m.group(2)), usec_idle=int(m.group(3)))
    return out


def pcap_frames(path):
    """Frames in a classic pcap (QEMU's filter-dump), and their lengths on the wire by size."""
    sizes = {}
    try:
        with open(path, "rb") as f:
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
                f.seek(caplen, 1)
                sizes[wirelen] = sizes.get(wirelen, 0) + 1
    except FileNotFoundError:
        return None
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


def ss_samples(text):
    """`ss -tinm` sampled: per sample and socket, the fields a TSQ comparison needs."""
    samples = []
    cur = None
    sock = None
    for line in text.splitlines():
        if line.startswith("t "):
            cur = {"t": float(line.split()[1]), "sockets": []}
            samples.append(cur)
            continue
        if cur is None:
            continue
        if re.match(r"^\d+\s+\d+\s+\S+:\d+\s+\S+:\d+", line.strip()) or line.startswith("ESTAB"):
            parts = line.split()
            sock = {"send_q": int(parts[1]) if parts[1].isdigit() else None}
            cur["sockets"].append(sock)
            continue
        if sock is None:
            continue
        m = re.search(r"skmem:\(([^)]*)\)", line)
        if m:
            for item in m.group(1).split(","):
                mm = re.match(r"([a-z]+)(\d+)", item)
                if mm:
                    sock["skmem_" + mm.group(1)] = int(mm.group(2))
        for key, pat, conv in (
                ("cwnd", r"\bcwnd:(\d+)", int),
                ("mss", r"\bmss:(\d+)", int),
                ("srtt_ms", r"\brtt:([\d.]+)/", float),
                ("pacing_rate_bps", r"\bpacing_rate (\d+)bps", int),
                ("delivery_rate_bps", r"\bdelivery_rate (\d+)bps", int),
                ("bytes_acked", r"\bbytes_acked:(\d+)", int),
                ("notsent_bytes", r"\bnotsent:(\d+)", int)):
            mm = re.search(pat, line)
            if mm:
                sock[key] = conv(mm.group(1))
    return samples


def udp_results(case, nic):
    out_dir = os.path.join(case, "out")
    s = key_values(read(os.path.join(out_dir, "settings.txt")))
    deq, deq_tot = hist(read(os.path.join(out_dir, "hist_qdisc_dequeue.txt")))
    enq, enq_tot = hist(read(os.path.join(out_dir, "hist_qdisc_enqueue.txt")))
    xmit, xmit_tot = hist(read(os.path.join(out_dir, "hist_net_dev_xmit.txt")))
    start, start_tot = hist(read(os.path.join(out_dir, "hist_net_dev_start_xmit.txt")))
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
    samples = ss_samples(read(os.path.join(out_dir, "ss_samples.txt")))
    below = [sk["skmem_t"] for smp in samples for sk in smp["sockets"] if "skmem_t" in sk]
    per_rate = [sk["skmem_t"] / (sk["pacing_rate_bps"] / 8)
                for smp in samples for sk in smp["sockets"]
                if sk.get("pacing_rate_bps") and "skmem_t" in sk]
    deq, _ = hist(read(os.path.join(out_dir, "hist_qdisc_dequeue.txt")))
    sizes = {k: v for k, v in sorted(deq.items()) if k > 0}
    tc = tc_stats(read(os.path.join(out_dir, "tc.txt")))
    wire = pcap_frames(os.path.join(case, "wire.pcap"))
    return {
        "ss_samples": samples,
        "ss_sample_count": len(samples),
        "ss_period_s": ((samples[-1]["t"] - samples[0]["t"]) / (len(samples) - 1)
                        if len(samples) > 1 else None),
        "bytes_below_socket": summary(below),
        "below_socket_in_pacing_seconds": summary(per_rate),
        "batch_sizes": {str(k): v for k, v in sizes.items()},
        "empty_dequeues": deq.get(0, 0),
        "qdisc": tc,
        "driver_counters": ethtool_stats(read(os.path.join(out_dir, "ethtool_stats.txt"))),
        "wire_frames": sum(wire.values()) if wire is not None else None,
        "bql": dict(bql_samples(read(os.path.join(out_dir, "bql_samples.txt")), *run),
                    limit_after=int(s.get("bql_limit_after", 0))),
        "guest_seconds": run[1] - run[0] if run[0] is not None else None,
    }


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
    else:
        config.update(generator="busybox nc < /dev/zero", proto="tcp",
                      streams=int(job["KREF_STREAMS"]), seconds=float(job["KREF_SECONDS"]),
                      sink="QEMU user netdev guestfwd to `dd of=/dev/null` on the host")
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
