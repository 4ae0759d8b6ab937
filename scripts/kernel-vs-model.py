#!/usr/bin/env python3
"""txbatch's model of the kernel reference run, quantity by quantity beside the kernel's
(doc/fidelity.md, "The kernel beside txbatch's model").

    kernel-vs-model.py --kref KREF.json [--out MODEL.json] [--engines real,sim]
                       [--duration S] [--txbatch BIN]
    kernel-vs-model.py --kref KREF.json --model MODEL.json     (print a run made before)

KREF.json is scripts/kernel-ref.sh's document. For each of its UDP cases this runs `txbatch run`
with the guest's settings on each engine (the command is printed), writes the records to
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
seen at the next interrupt, throttled to one per 128 us (QEMU's mitigation floor).
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


def model_command(rec, a):
    c, env = rec["config"], rec["env"]
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


def short_hist(hist, keep=6):
    h = sorted(((int(k), v) for k, v in hist.items()), key=lambda kv: -kv[1])
    text = ", ".join("%d: %d" % kv for kv in h[:keep])
    return text + (", +%d sizes" % (len(h) - keep) if len(h) > keep else "")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kref", required=True, help="scripts/kernel-ref.sh's document")
    ap.add_argument("--model", help="a document this script wrote before: print it, run nothing")
    ap.add_argument("--out", help="where to write the model's records (default: none kept)")
    ap.add_argument("--engines", default="real,sim")
    ap.add_argument("--duration", type=float, default=0.3, help="txbatch's window, seconds")
    ap.add_argument("--txbatch", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                      "..", "build", "tools", "txbatch"))
    a = ap.parse_args()
    try:
        with open(a.kref) as f:
            kref = json.load(f)
    except (OSError, ValueError) as e:
        die("cannot read %s: %s" % (a.kref, e))
    if kref.get("kind") != "kernel_reference":
        die("%s is not scripts/kernel-ref.sh's document (kind %r)" % (a.kref, kref.get("kind")))
    if a.model:
        try:
            with open(a.model) as f:
                doc = json.load(f)
        except (OSError, ValueError) as e:
            die("cannot read %s: %s" % (a.model, e))
        if doc.get("kind") != "kernel_vs_model":
            die("%s is not this script's document (kind %r)" % (a.model, doc.get("kind")))
    else:
        doc = {"schema_version": 1, "kind": "kernel_vs_model", "kernel_reference": a.kref,
               "cases": []}
        for rec in kref["records"]:
            cmd = model_command(rec, a)
            if cmd is None:
                continue
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
