#!/usr/bin/env python3
"""Runs a txbatch command and samples, every 2 ms, where each of its named threads is (txb-prod0,
txb-txirq0, txb-runner0: the CPU and the state from /proc/PID/task/*/stat) and, at the end, each
one's voluntary and involuntary context switches. Prints a line a thread: its share of samples
per CPU and state (R running or runnable, S asleep, D in the kernel).

usage: scripts/experiments/thread_where.py -- build/tools/txbatch run --driver emu:ixgbe --procs 1 --runner dedicated ...
"""
import collections
import os
import subprocess
import sys
import time


def main():
    if "--" not in sys.argv or sys.argv.index("--") == len(sys.argv) - 1:
        sys.exit(__doc__.strip().splitlines()[-1])
    proc = subprocess.Popen(sys.argv[sys.argv.index("--") + 1:], stdout=subprocess.DEVNULL)
    seen = collections.defaultdict(collections.Counter)
    switches = {}
    while proc.poll() is None:
        try:
            tids = os.listdir(f"/proc/{proc.pid}/task")
        except FileNotFoundError:
            break
        for tid in tids:
            try:
                stat = open(f"/proc/{proc.pid}/task/{tid}/stat").read()
                status = open(f"/proc/{proc.pid}/task/{tid}/status").read()
            except OSError:
                continue
            name = stat[stat.index("(") + 1:stat.rindex(")")]
            if not name.startswith("txb-"):
                continue
            fields = stat[stat.rindex(")") + 2:].split()
            seen[name][(fields[36], fields[0])] += 1  # processor, state
            counts = dict(line.split(":") for line in status.splitlines() if "ctxt_switches" in line)
            switches[name] = (int(counts["voluntary_ctxt_switches"]),
                              int(counts["nonvoluntary_ctxt_switches"]))
        time.sleep(0.002)
    proc.wait()
    for name in sorted(seen):
        n = sum(seen[name].values())
        shares = " ".join(f"cpu{cpu}/{state} {100 * k / n:.0f}%"
                          for (cpu, state), k in sorted(seen[name].items()))
        vol, invol = switches.get(name, (0, 0))
        print(f"{name:14} {n:6} samples  {shares}  switches: {vol} voluntary, {invol} involuntary")
    sys.exit(proc.returncode)


main()
