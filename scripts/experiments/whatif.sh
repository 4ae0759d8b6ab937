#!/usr/bin/env bash
# The what-if table (doc/experiments.md): one producer core sending 64-byte UDP frames (the
# 18-byte txbatch header as payload: 60 bytes + FCS) on an emulated NIC, batching off (count:1) against the kernel's policies (linux-2014, linux-2025,
# blist-2007, on pfifo_fast with an inline runner) and DPDK's buffer:32:100 (--qdisc none: the
# producer batches its own frames), at doorbell costs of 0, 50, 100 and 200 ns, on both engines
# (real threads on the TSC, and the simulation with the built-in cost model). Prints a markdown
# table per NIC model — Mpps of the one producer core / p99 latency, medians over ROUNDS
# interleaved rounds (default 3) — and the first configuration (in the order of the table)
# whose median reaches the wire's ceiling (14.88 Mpps of 64-byte frames on 10 GbE).
#
# Usage: scripts/experiments/whatif.sh [build/tools/txbatch]   (MODELS="ixgbe ipoib-qdr" DOORBELLS="0 50 100 200")
set -euo pipefail
txbatch=${1:-build/tools/txbatch}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
models=${MODELS:-ixgbe ipoib-qdr}
doorbells=${DOORBELLS:-0 50 100 200}
common=(--proto udp --size 18 --procs 1 --engine real,sim --duration "${DURATION:-0.3}"
  --warmup 0.1 --rounds "${ROUNDS:-3}")
for model in $models; do
  for db in $doorbells; do
    "$txbatch" run --driver "emu:$model,doorbell_ns=$db" "${common[@]}" \
      --policy count:1,linux-2014,linux-2025,blist-2007 --json "$tmp/$model-$db-q.json" >/dev/null
    "$txbatch" run --driver "emu:$model,doorbell_ns=$db" "${common[@]}" --qdisc none \
      --policy buffer:32:100 --json "$tmp/$model-$db-n.json" >/dev/null
  done
done
python3 - "$tmp" "$models" "$doorbells" <<'PY'
import json, statistics, sys, glob, os
tmp, models, doorbells = sys.argv[1], sys.argv[2].split(), sys.argv[3].split()
policies = ['count:1', 'linux-2014', 'linux-2025', 'blist-2007', 'buffer:32:100']
first = None
best = None
for model in models:
    cells = {}
    ceiling = None
    for db in doorbells:
        for part in 'qn':
            for rec in json.load(open(f'{tmp}/{model}-{db}-{part}.json'))['records']:
                c, x = rec['config'], rec['results']
                key = (c['policy'], db, c['engine'])
                cells.setdefault(key, []).append(x)
                if x['link_ceiling']['mpps']:
                    ceiling = x['link_ceiling']['mpps']
    print(f'\n{model}, 64-byte UDP frames, one producer: Mpps / p99 latency (medians); '
          f'wire ceiling {ceiling:.2f} Mpps\n')
    head = '| policy | ' + ' | '.join(f'db {db} ns {e}' for db in doorbells for e in ('real', 'sim')) + ' |'
    print(head)
    print('|' + '---|' * (1 + 2 * len(doorbells)))
    for p in policies:
        row = [p]
        for db in doorbells:
            for e in ('real', 'sim'):
                xs = cells.get((p, db, e), [])
                if not xs:
                    row.append('-')
                    continue
                mpps = statistics.median(x['mpps'] for x in xs)
                p99s = [x['latency_ns']['p99'] for x in xs if x['latency_ns']]
                p99 = statistics.median(p99s) if p99s else None
                lat = '-' if p99 is None else (f'{p99/1e3:.1f} us' if p99 < 1e6 else f'{p99/1e6:.2f} ms')
                row.append(f'{mpps:.2f} / {lat}')
                if first is None and ceiling and mpps >= 0.99 * ceiling:
                    first = f'{model} {p} doorbell {db} ns on the {e} engine: {mpps:.2f} Mpps'
                if best is None or mpps / ceiling > best[0]:
                    best = (mpps / ceiling, f'{model} {p} doorbell {db} ns, {e} engine: {mpps:.2f} Mpps ({100 * mpps / ceiling:.0f} % of the ceiling)')
        print('| ' + ' | '.join(row) + ' |')
print('\nfirst at the wire ceiling (>= 99 %):', first or 'none; closest: ' + best[1])
PY
