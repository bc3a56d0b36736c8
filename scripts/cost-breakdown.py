#!/usr/bin/env python3
"""Per-packet cost of ctrack's packet path, broken down by stage.

Runs a `ctrack bench` workload twice under valgrind's callgrind (with its
cache simulation) and divides the difference of the two runs by the
difference of their packet (or connection) counts, so that everything the
two runs share cancels out: the lookup workloads replay the same N packets
over the same table once and three times (`--runs 1` and `--runs 3`:
start-up, building the packets and filling the table cancel); `cps` opens
N1 and N2 connections (start-up cancels; building the packets does not,
and shows as `harness`).
The costs are instructions (Ir), first-level data-cache misses (D1mr +
D1mw) and last-level data-cache misses (DLmr + DLmw) as callgrind
simulates them (a cache of this machine's sizes; no hardware counters are
needed, which is why: these virtual machines expose none).

Each instruction is charged to the source file its debug information names
(the innermost inlined function's file; for the standard library's code
inlined into ours, the file of the function it was inlined into), and
files are grouped in stages:

  parse   ctrack-wire, ctrack-core/src/packet      the frame's headers, checksums
  hash    ctrack-core/src/key                      the keyed hash of the tuple
  index   ctrack-table index, prefetch             the index bucket, tags
  record  ctrack-table header/slab/entry/table,    the record: resolve, entry lock,
          ctrack-core/src/conn                     its fields
  judge   ctrack-core/src/proto, verdict, zone,    the protocol state machine,
          track/judge.rs                           the verdict
  nat     ctrack-core/src/nat, track/stages.rs     translating the packet
  commit  track/open.rs, ctrack-table writer,      a new connection: shard lock,
          shard, arena, epoch                      limits, slot, index entry
  burst   track/process.rs, track/packet.rs        the burst's passes, per-packet set-up
  harness ctrack-wire/src/build.rs, ctrack/src/bench  the benchmark's own work
  other   everything else (std, core: memcpy, allocation, the benchmark's loop)

Usage (release build first: `cargo build --release -p ctrack`):

  scripts/cost-breakdown.py                      # every workload
  scripts/cost-breakdown.py --only lookup-burst  # one
  scripts/cost-breakdown.py --ctrack OTHER/ctrack --json out.json

Workloads:

  lookup-burst    `bench lookup --conns C --calls burst`: established
                  packets, 32 per call, over C connections (per packet)
  lookup-handle   the same, one packet per call through a per-thread handle
  lookup-process  the same, one packet per call through Tracker::process
  lookup-nat      `--calls burst --nat`: connections committed through
                  source NAT, original-direction packets each copied into
                  a buffer and translated (Tracker::process_burst_mut)
  cps             `bench cps --conns N --steady 1`: new UDP connections,
                  opening packet and answer (per connection)
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

STAGES = [
    ("harness", ["ctrack-wire/src/build.rs", "ctrack/src/bench/"]),
    ("parse", ["ctrack-wire/src/", "ctrack-core/src/packet/"]),
    ("hash", ["ctrack-core/src/key/"]),
    ("nat", ["ctrack-core/src/nat/", "ctrack-core/src/track/stages.rs"]),
    ("index", ["ctrack-table/src/index.rs", "ctrack-table/src/prefetch.rs"]),
    (
        "commit",
        [
            "ctrack-core/src/track/open.rs",
            "ctrack-table/src/table/writer.rs",
            "ctrack-table/src/shard.rs",
            "ctrack-table/src/arena.rs",
            "ctrack-table/src/epoch.rs",
            "crossbeam-epoch",
            "parking_lot",
        ],
    ),
    (
        "record",
        [
            "ctrack-table/src/header.rs",
            "ctrack-table/src/slab.rs",
            "ctrack-table/src/table/entry.rs",
            "ctrack-table/src/table.rs",
            "ctrack-core/src/conn/",
        ],
    ),
    (
        "judge",
        [
            "ctrack-core/src/proto/",
            "ctrack-core/src/verdict/",
            "ctrack-core/src/zone/",
            "ctrack-core/src/track/judge.rs",
        ],
    ),
    (
        "burst",
        [
            "ctrack-core/src/track/process.rs",
            "ctrack-core/src/track/packet.rs",
            "ctrack-core/src/track/handle.rs",
        ],
    ),
]
ORDER = ["parse", "hash", "index", "record", "judge", "nat", "commit", "burst", "harness", "other"]


def stage_of(path):
    for name, parts in STAGES:
        if any(p in path for p in parts):
            return name
    return "other"


def workloads(conns, n1, n2):
    """name: (arguments of the first run, of the second, units between
    them, what a unit is)."""
    c = str(conns)

    def lookup(calls, n, extra=()):
        base = ["bench", "lookup", "--conns", c, "--packets", str(n), *extra]
        if calls != "burst":
            # (Bursts are the default: older binaries know no --calls.)
            base += ["--calls", calls]
        return (base + ["--runs", "1"], base + ["--runs", "3"], 2 * n, "packet")

    def cps(a, b):
        def args(n):
            return ["bench", "cps", "--conns", str(n), "--steady", "1", "--runs", "1"]

        return (args(a), args(b), b - a, "connection")

    return {
        "lookup-burst": lookup("burst", n1),
        "lookup-handle": lookup("handle", n1),
        "lookup-process": lookup("process", n1),
        "lookup-nat": lookup("burst", n1, ["--nat"]),
        "cps": cps(n1, n2),
    }


def parse_callgrind(path):
    """Self cost per source file: {file: [Ir, D1 misses, LL misses]}."""
    names = {}
    totals = {}
    events = None
    cur = "?"
    fl = "?"
    skip_next = False

    def name_of(spec):
        m = re.match(r"\((\d+)\)(?: (.*))?", spec)
        if not m:
            return spec
        if m.group(2) is not None:
            names[m.group(1)] = m.group(2)
        return names.get(m.group(1), "?")

    with open(path, errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith("events:"):
                events = line.split()[1:]
                continue
            if not line:
                continue
            head = line[:3]
            if head == "fl=":
                fl = cur = name_of(line[3:])
                continue
            if head in ("fi=", "fe="):
                cur = name_of(line[3:])
                if "/library/" in cur and "/rustc/" in cur:
                    # The standard library inlined into our code (atomics,
                    # slices, comparisons): charged to the function it was
                    # inlined into, whose file says what it was doing.
                    cur = fl
                continue
            if head == "fn=":
                # A new function: its cost lines are in its own file until
                # an fi=/fe= says otherwise.
                name_of(line[3:])
                cur = fl
                continue
            if head == "ob=":
                continue
            if line.startswith(("cfn=", "cfi=", "cfl=", "cob=")):
                # Define names without switching the current file.
                name_of(line.split("=", 1)[1])
                continue
            if line.startswith("calls="):
                skip_next = True
                continue
            c0 = line[0]
            if c0.isdigit() or c0 in "+-*":
                if skip_next:
                    skip_next = False
                    continue
                parts = line.split()
                vals = [int(x) for x in parts[1:]]
                t = totals.setdefault(cur, [0] * len(events))
                for i, v in enumerate(vals):
                    t[i] += v
    if events is None:
        raise SystemExit(f"{path}: not a callgrind profile")
    idx = {e: i for i, e in enumerate(events)}

    def pick(t, keys):
        return sum(t[idx[k]] for k in keys if k in idx)

    out = {}
    for fname, t in totals.items():
        out[fname] = [
            pick(t, ["Ir"]),
            pick(t, ["D1mr", "D1mw"]),
            pick(t, ["DLmr", "DLmw"]),
        ]
    return out


def by_stage(files):
    s = {k: [0, 0, 0] for k in ORDER}
    for fname, v in files.items():
        st = s[stage_of(fname)]
        for i in range(3):
            st[i] += v[i]
    return s


def run(ctrack, args, workdir):
    out = os.path.join(workdir, "cg.out")
    cmd = [
        "valgrind",
        "--tool=callgrind",
        "--cache-sim=yes",
        f"--callgrind-out-file={out}",
        ctrack,
    ] + args
    r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{r.stderr[-2000:]}")
    return by_stage(parse_callgrind(out))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ctrack", default="target/release/ctrack")
    ap.add_argument("--only", help="comma-separated workloads")
    ap.add_argument("--conns", type=int, default=1_000_000, help="table size of the lookup workloads")
    ap.add_argument("--n1", type=int, default=200_000, help="packets replayed (lookup); connections of the first run (cps)")
    ap.add_argument("--n2", type=int, default=600_000, help="connections of the second run (cps)")
    ap.add_argument("--json", help="write the figures here too")
    a = ap.parse_args()
    if not os.access(a.ctrack, os.X_OK):
        raise SystemExit(f"{a.ctrack}: no such program (cargo build --release -p ctrack)")
    if subprocess.run(["which", "valgrind"], stdout=subprocess.DEVNULL).returncode != 0:
        raise SystemExit("valgrind is needed (apt-get install valgrind)")
    if a.n2 <= a.n1:
        raise SystemExit("--n2 must be larger than --n1")
    wl = workloads(a.conns, a.n1, a.n2)
    names = a.only.split(",") if a.only else list(wl)
    for n in names:
        if n not in wl:
            raise SystemExit(f"unknown workload {n}; one of {', '.join(wl)}")
    result = {}
    with tempfile.TemporaryDirectory() as d:
        for n in names:
            first, second, units, unit = wl[n]
            lo = run(a.ctrack, first, d)
            hi = run(a.ctrack, second, d)
            per = {k: [(hi[k][i] - lo[k][i]) / units for i in range(3)] for k in ORDER}
            total = [sum(per[k][i] for k in ORDER) for i in range(3)]
            result[n] = {"unit": unit, "stages": per, "total": total, "first": first, "second": second}
            print(f"\n{n}: per {unit} ({' '.join(second)} against {' '.join(first)})")
            print(f"  {'stage':8} {'instructions':>13} {'D1 misses':>10} {'LL misses':>10}")
            for k in ORDER:
                v = per[k]
                print(f"  {k:8} {v[0]:13.1f} {v[1]:10.2f} {v[2]:10.2f}")
            print(f"  {'total':8} {total[0]:13.1f} {total[1]:10.2f} {total[2]:10.2f}")
            sys.stdout.flush()
    if a.json:
        with open(a.json, "w") as f:
            json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
