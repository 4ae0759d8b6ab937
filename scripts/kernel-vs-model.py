#!/usr/bin/env python3
"""txbatch's model of the kernel reference run, quantity by quantity beside the kernel's
(doc/fidelity.md, "The kernel beside txbatch's model").

    kernel-vs-model.py --kref KREF.json [--out MODEL.json] [--engines real,sim]
                       [--duration S] [--txbatch BIN] [--mode all|udp|tcp]
                       [--tcp-frames guest|txbatch] [--extra ARGS]
    kernel-vs-model.py --kref KREF.json --model MODEL.json     (print a run made before)

KREF.json is scripts/kernel-ref.sh's document. For each of its UDP cases, and each TCP case
with a bottleneck below its sockets (kernel-ref.sh --tcp-rate), this runs `txbatch run` with
the guest's settings on each engine (the command is printed), writes the records to
MODEL.json ({"kind": "kernel_vs_model", "cases": [{"case", "command", "records"}]}) and prints a
table per case: the kernel, then each engine. Quantities marked * depend on the TCG guest's
speed (doc/fidelity.md says why) and are shown, not compared. Exit status: 0; 2 on bad usage or
a case it cannot model; 1 when txbatch failed.

The model (doc/fidelity.md derives each setting): linux-2025 on the lock-free pfifo_fast (6.1.192
has the 2025 bulk cap backported, and its pfifo_fast is TCQ_F_NOLOCK), one datagram producer a
kpktgend thread (pktgen's queue_xmit counts NET_XMIT_DROP as an error and sends the next frame
at once), frames of the guest's pkt_size, its txqueuelen and BQL settings, and an emulated e1000
as QEMU's looks to the guest: a ring of the guest's tx_ring slots that stops with 24 unused (one
kept empty) and wakes at 32, every frame done at its doorbell (a wire at 1 Tb/s), the completion
seen at the next interrupt, throttled to one per 128 us (QEMU's mitigation floor). TCP
(doc/fidelity.md "TCP Small Queues"): the guest's streams as stream producers on an emulated
e1000 whose wire runs at the guest's bottleneck rate, with GSO frames of the guest's own size
goal (tcp_model_command).
"""
import argparse
import json
import os
import shlex
import subprocess
import sys

# QEMU's e1000 raises its TX interrupt at once unless its mitigation timer runs, which it arms
# for max(ITR, TADV x 4 with IDE) x 256 ns, at least 500 x 256 ns (hw/net/e1000.c
# set_interrupt_cause); Linux's e1000 writes ITR 195 (20 000/s) and TADV 32: 128 us.
ITR_USECS = 128
# e1000_xmit_frame (6.1) stops its queue when fewer than MAX_SKB_FRAGS + 7 = 24 descriptors are
# unused after a frame, and E1000_DESC_UNUSED keeps one empty: emu's free slots < 25.
STOP_SLACK = 25
# e1000_clean_tx_irq wakes it with TX_WAKE_THRESHOLD (32) unused: 33 free slots.
FREE_THRESH = 33
ETH_IP_UDP = 42  # bytes of headers before pktgen's payload: the frame less them is --size


def die(msg, status=2):
    print("kernel-vs-model: " + msg, file=sys.stderr)
    sys.exit(status)


# txbatch's TCP MSS at MTU 1500 (MTU - 52: IPv4, TCP and its timestamp option).
TXBATCH_MSS = 1448


def tcp_model_command(rec, a):
    """A TCP case: the guest's streams through a bottleneck below their sockets (tbf at
    config.bottleneck_mbps), modelled as that many stream producers on an emulated e1000 whose
    wire runs at that rate, with GSO frames of the guest's size goal (results.size_goal's median:
    6.1's tcp_tso_autosize and tcp_bound_to_half_wnd on each socket sample, in whole txbatch MSS):
    a producer paced above the wire (--rate twice it) makes one frame a write, where an unpaced
    one makes TCP's 64 KiB goal (a.tcp_frames == "txbatch": txbatch's own frames, no match)."""
    c, r = rec["config"], rec["results"]
    if c.get("nic") != "e1000":
        die("case %s: only e1000 has a TCP model here, not %s" % (c.get("case"), c.get("nic")))
    rate = c.get("bottleneck_mbps")
    if not rate:
        print("kernel-vs-model: case %s has no bottleneck below its sockets (kernel-ref.sh "
              "--tcp-rate): not modelled (doc/fidelity.md says why)" % c["case"], file=sys.stderr)
        return None
    goal = (r.get("size_goal") or {}).get("p50")
    if not goal:
        die("case %s has no size goal (a sampler without snd_wnd: rerun kernel-ref.sh)" % c["case"])
    payload = goal // TXBATCH_MSS * TXBATCH_MSS
    if payload < TXBATCH_MSS:
        die("case %s: the guest's size goal (%d bytes) is under one MSS" % (c["case"], goal))
    driver = "emu:e1000,rate_mbps=%g" % rate
    cmd = [a.txbatch, "run", "--engine", a.engines, "--driver", driver, "--policy", "linux-2025",
           "--sync", "nolock", "--proto", "tcp", "--procs", str(c["streams"]),
           "--txqueuelen", str(c["txqueuelen"]), "--duration", str(max(a.duration, 0.5)),
           "--rounds", "1"]
    # The cap is the guest's tcp_limit_output_bytes (6.1: 1 MiB), not linux-2025's era default
    # (unless --extra sets one).
    if "--tsq" not in shlex.split(a.extra):
        cmd += ["--tsq", str(rec["env"].get("tcp_limit_output_bytes") or 1 << 20)]
    if a.tcp_frames == "guest":
        cmd += ["--size", str(payload), "--rate", "%gmbit" % (2 * rate)]
    else:
        cmd += ["--size", "65536"]
    return cmd


def model_command(rec, a):
    c, env = rec["config"], rec["env"]
    if c.get("mode") == "tcp":
        return tcp_model_command(rec, a)
    if c.get("mode") != "udp" or c.get("generator") != "pktgen":
        return None
    if c.get("nic") != "e1000" or c.get("qdisc") != "pfifo_fast":
        die("case %s: only e1000 with pfifo_fast has a model here, not %s with %s"
            % (c.get("case"), c.get("nic"), c.get("qdisc")))
    if env.get("dev_tx_weight") != 64:
        die("case %s: dev_tx_weight %s; txbatch's quota is 64"
            % (c["case"], env.get("dev_tx_weight")))
    driver = ("emu:e1000,rate_mbps=1000000,ring=%d,free_thresh=%d,stop_slack=%d,tx_usecs=0,"
              "itr_usecs=%g" % (env.get("tx_ring") or 256, FREE_THRESH, STOP_SLACK, ITR_USECS))
    cmd = [a.txbatch, "run", "--engine", a.engines, "--driver", driver, "--policy", "linux-2025",
           "--sync", "nolock", "--proto", "udp", "--size", str(c["pkt_size"] - ETH_IP_UDP),
           "--procs", str(c["threads"]), "--producer", "datagram",
           "--txqueuelen", str(c["txqueuelen"]), "--duration", str(a.duration), "--rounds", "1"]
    if c["bql"]["mode"] == "pinned":
        cmd += ["--bql-limit-min", str(c["bql"]["limit_min"]),
                "--bql-limit-max", str(c["bql"]["limit_max"])]
    return cmd


def size_stats(hist):
    """A bulk-size histogram {size: bulks}: its mode (the larger size on a tie), median (as
    kernel-ref-json.py's: the size at (bulks + 1) / 2), share of single-frame bulks, mean,
    largest, and the mode of the bulks of more than one frame."""
    h = {int(k): v for k, v in hist.items() if v}
    n = sum(h.values())
    if not n:
        return None
    median, acc = None, 0
    for k in sorted(h):
        acc += h[k]
        if acc >= (n + 1) / 2:
            median = k
            break
    multi = {k: v for k, v in h.items() if k > 1}
    return {"bulks": n, "mode": max(h, key=lambda k: (h[k], k)), "median": median,
            "single_share": h.get(1, 0) / n, "mean": sum(k * v for k, v in h.items()) / n,
            "max": max(h), "multi_mode": max(multi, key=lambda k: (multi[k], k)) if multi else None}


def kernel_row(rec):
    r = rec["results"]
    frames = r["pktgen"]["sent"]
    s = size_stats(r["batch_sizes"]) or {}
    irqs = r.get("interrupts")
    bells = r.get("doorbells")
    return dict(s, frames=frames, bulks_per_frame=s.get("bulks", 0) / frames,
                doorbells_per_frame=bells / frames if bells is not None else None,
                bql_limit=r["bql"]["limit_after"],
                requeued_per_frame=r["qdisc"]["requeues"] / frames,
                bypassed_share=r["bypassed"] / frames if r.get("bypassed") is not None else None,
                frames_per_completion=frames / irqs if irqs else None,
                drops_per_frame=r["pktgen"]["errors"] / frames)


def model_row(rec):
    r = rec["results"]
    frames = r["packets"]
    s = size_stats(r.get("dequeue_sizes", {})) or {}
    return dict(s, frames=frames, bulks_per_frame=s.get("bulks", 0) / frames if frames else None,
                doorbells_per_frame=r.get("doorbells_per_pkt"),
                bql_limit=(r.get("bql") or {}).get("limit"),
                requeued_per_frame=r["requeued_frames"] / frames if frames else None,
                bypassed_share=r["bypassed"] / frames if frames else None,
                frames_per_completion=(r.get("completions") or {}).get("frames_per_call"),
                drops_per_frame=r["drops_total"] / frames if frames else None)


# (key, label, format); a label with * depends on the guest's speed.
ROWS = [
    ("mode", "bulk size: mode", "{:d}"),
    ("median", "bulk size: median", "{:d}"),
    ("single_share", "single-frame bulks", "{:.1%}"),
    ("mean", "bulk size: mean", "{:.2f}"),
    ("max", "bulk size: largest", "{:d}"),
    ("multi_mode", "mode of bulks > 1 frame", "{:d}"),
    ("bulks_per_frame", "bulks per frame", "{:.4f}"),
    ("doorbells_per_frame", "doorbells per frame", "{:.4f}"),
    ("bql_limit", "BQL limit (bytes, at the end)", "{:d}"),
    ("requeued_per_frame", "requeued frames per frame", "{:.4f}"),
    ("bypassed_share", "bypassed frames *", "{:.1%}"),
    ("frames_per_completion", "frames per completion *", "{:.1f}"),
    ("drops_per_frame", "drops per frame sent *", "{:.2f}"),
    ("frames", "frames counted *", "{:d}"),
]


def fmt(f, v):
    if v is None:
        return "-"
    if "d}" in f:
        v = int(round(v))
    return f.format(v)


def print_case(case, kernel, models):
    cols = ["kernel"] + ["txbatch " + e for e, _ in models]
    print("\n%s (kernel: %s)" % (case, kernel["_hist"]))
    for e, m in models:
        print("  %s: %s" % (e, m["_hist"]))
    print("  %-32s" % "" + "".join("%16s" % c for c in cols))
    for key, label, f in ROWS:
        vals = [kernel.get(key)] + [m.get(key) for _, m in models]
        print("  %-32s" % label + "".join("%16s" % fmt(f, v) for v in vals))


def tcp_kernel_row(rec):
    r = rec["results"]
    return {"below_p50": r["below_p50"], "below_p90": r["below_p90"],
            "pacing_rate": r["pacing_rate"]["p50"],
            "in_pacing_ms": r["below_socket_in_pacing_seconds"]["p50"] * 1e3,
            "skb_payload": (r.get("size_goal") or {}).get("p50"),
            "delivered": r["delivered_bytes_per_s"], "samples": r["sample_count"]}


def tcp_model_row(rec):
    r = rec["results"]
    t = r.get("tsq") or {}
    frames = sum(int(k) * v for k, v in (r.get("batch_hist") or {}).items()) or None
    return {"below_p50": t.get("below_p50"), "below_p90": t.get("below_p90"),
            "pacing_rate": t.get("pacing_rate"),
            "in_pacing_ms": (t["below_p50"] / t["pacing_rate"] * 1e3
                             if t.get("pacing_rate") else None),
            "skb_payload": int(rec["config"].get("size") or 0) or None,
            # The flows' delivery (tsq.h: pacing = 1.2 x each flow's own), all of them.
            "delivered": (t["pacing_rate"] / 1.2 * int(rec["config"].get("procs") or 1)
                          if t.get("pacing_rate") else None),
            "samples": t.get("samples"), "limit": t.get("limit")}


# (key, label, format); a label with * is not compared (doc/fidelity.md says why).
TCP_ROWS = [
    ("below_p50", "bytes below a socket: median", "{:d}"),
    ("below_p90", "bytes below a socket: p90 *", "{:d}"),
    ("limit", "TSQ limit (model's, bytes)", "{:d}"),
    ("skb_payload", "skb payload: size goal (bytes)", "{:d}"),
    ("pacing_rate", "pacing rate (B/s) *", "{:d}"),
    ("in_pacing_ms", "below in pacing ms: median *", "{:.2f}"),
    ("delivered", "delivered (B/s, all streams) *", "{:d}"),
    ("samples", "socket samples *", "{:d}"),
]


def print_tcp_case(case, kernel, models):
    cols = ["kernel"] + ["txbatch " + e for e, _ in models]
    print("\n%s" % case)
    print("  %-34s" % "" + "".join("%16s" % c for c in cols))
    for key, label, f in TCP_ROWS:
        vals = [kernel.get(key)] + [m.get(key) for _, m in models]
        print("  %-34s" % label + "".join("%16s" % fmt(f, v) for v in vals))


def short_hist(hist, keep=6):
    h = sorted(((int(k), v) for k, v in hist.items()), key=lambda kv: -kv[1])
    text = ", ".join("%d: %d" % kv for kv in h[:keep])
    return text + (", +%d sizes" % (len(h) - keep) if len(h) > keep else "")


def load_doc(path, kind, whose):
    """The JSON document at `path`, which must be `whose` (its "kind" `kind`); else one sentence."""
    try:
        with open(path) as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        die("cannot read %s: %s" % (path, e))
    if doc.get("kind") != kind:
        die("%s is not %s document (kind %r)" % (path, whose, doc.get("kind")))
    return doc


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kref", required=True, help="scripts/kernel-ref.sh's document")
    ap.add_argument("--model", help="a document this script wrote before: print it, run nothing")
    ap.add_argument("--out", help="where to write the model's records (default: none kept)")
    ap.add_argument("--engines", default="real,sim")
    ap.add_argument("--duration", type=float, default=0.3, help="txbatch's window, seconds")
    ap.add_argument("--mode", choices=("all", "udp", "tcp"), default="all",
                    help="which of the document's cases to model")
    ap.add_argument("--tcp-frames", choices=("guest", "txbatch"), default="guest",
                    help="TCP cases: GSO frames of the guest's size goal, or txbatch's own "
                         "(TCP's 64 KiB goal)")
    ap.add_argument("--extra", default="",
                    help="more `txbatch run` arguments for every case (e.g. a wrong model, to "
                         "see a bound fail)")
    ap.add_argument("--txbatch", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                      "..", "build", "tools", "txbatch"))
    a = ap.parse_args()
    kref = load_doc(a.kref, "kernel_reference", "scripts/kernel-ref.sh's")
    if a.model:
        doc = load_doc(a.model, "kernel_vs_model", "this script's")
    else:
        doc = {"schema_version": 1, "kind": "kernel_vs_model", "kernel_reference": a.kref,
               "cases": []}
        for rec in kref["records"]:
            if a.mode != "all" and rec["config"].get("mode") != a.mode:
                continue
            cmd = model_command(rec, a)
            if cmd is None:
                continue
            cmd += shlex.split(a.extra)
            out = (a.out or "kernel-vs-model") + "." + rec["config"]["case"] + ".json"
            print("kernel-vs-model: " + " ".join(shlex.quote(x) for x in cmd + ["--json", out]),
                  file=sys.stderr)
            p = subprocess.run(cmd + ["--json", out], stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True)
            if p.returncode != 0:
                sys.stderr.write(p.stderr)
                die("txbatch failed (status %d) for case %s"
                    % (p.returncode, rec["config"]["case"]), 1)
            with open(out) as f:
                records = json.load(f)["records"]
            os.remove(out)
            doc["cases"].append({"case": rec["config"]["case"], "command": cmd,
                                 "records": records})
        if a.out:
            with open(a.out + ".tmp", "w") as f:
                json.dump(doc, f, indent=1)
                f.write("\n")
            os.replace(a.out + ".tmp", a.out)
    by_case = {c["case"]: c for c in doc["cases"]}
    for rec in kref["records"]:
        case = rec["config"]["case"]
        if case not in by_case:
            continue
        if rec["config"].get("mode") == "tcp":
            print_tcp_case(case, tcp_kernel_row(rec),
                           [(m["config"].get("engine", "real"), tcp_model_row(m))
                            for m in by_case[case]["records"]])
            continue
        k = kernel_row(rec)
        k["_hist"] = short_hist(rec["results"]["batch_sizes"])
        models = []
        for m in by_case[case]["records"]:
            row = model_row(m)
            row["_hist"] = short_hist(m["results"].get("dequeue_sizes", {}))
            models.append((m["config"].get("engine", "real"), row))
        print_case(case, k, models)
    print("\n* depends on the guest's speed under TCG: shown, not compared (doc/fidelity.md)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
