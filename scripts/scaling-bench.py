#!/usr/bin/env python3
"""Thread scaling of the core, and what the machine itself allows.

  scaling-bench.py [--ctrack PATH] [--ovstest PATH] [--threads 1,2,4,8,16]
                   [--json FILE] [--quick]

The figures of BENCHMARKS.md's "Machine B" in one run, on whatever machine
this is (the targets are set for 16 cores):

- `benchmark T 16777216 32 1` (seed 001's command) at one thread and at
  the most threads, with `--ovstest` the same workload through Open
  vSwitch's `ovstest` in the same invocation and the ratio;
- `cps --conns 1000000 --steady 4000000` at every thread count, every
  packet thread sweeping (`--sweeper each`), and at the most threads a
  sweeper thread of its own (`--sweeper thread`: expiry left to one
  thread alone): rate, batch latency, expired / evicted /
  refused;
- `lookup` over 1M and 10M connections at one thread and the most;
- the firewall stage (`bench policy stage`, 10k UDP connections behind
  1 ACL, a ring of 16,384 frames per thread) at one thread and the most,
  through one firewall;
- the machine alone: as many separate processes as the most threads,
  each running the one-thread `benchmark`, `cps`, `lookup` and firewall
  stage at once.
  A process shares nothing with the others, so the ratio of their summed
  rate to one process's is what the machine gives; the ratio of the
  threads' rate to one thread's is what ctrack gives.

Every bench runs with `--json`; the summary (a table, and with --json the
whole record) gives each scaling ratio beside the machine's, and for
`benchmark` at the most threads each thread's own time (the figure is the
slowest thread's: a spread says some threads were held up, not all).
With --json the record is written again after every step, with
`"complete": false` until the end, so that a run cut short (a lent
machine's time limit) keeps what it measured. `--quick` runs tiny sizes
(a check that the script works, in seconds; its figures mean nothing).
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile


def run(cmd):
    """Runs one bench and returns its JSON document."""
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({out.returncode}): {out.stderr.strip()}")
    return json.loads(out.stdout)


def run_many(cmd, n):
    """Runs `n` copies of one bench at once; returns their JSON documents."""
    with tempfile.TemporaryDirectory() as d:
        procs = []
        for i in range(n):
            f = open(os.path.join(d, f"{i}.json"), "w")
            procs.append((subprocess.Popen(cmd, stdout=f, stderr=subprocess.PIPE, text=True), f))
        docs = []
        for p, f in procs:
            _, err = p.communicate()
            f.close()
            if p.returncode != 0:
                sys.exit(f"{' '.join(cmd)} failed ({p.returncode}): {err.strip()}")
            with open(f.name) as g:
                docs.append(json.load(g))
        return docs


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ctrack", default="target/release/ctrack")
    ap.add_argument("--ovstest", help="Open vSwitch's tests/ovstest, for the benchmark ratio")
    ap.add_argument("--threads", default=None,
                    help="thread counts (default: 1, 2, 4, ... up to the CPUs)")
    ap.add_argument("--json", help="write the whole record here")
    ap.add_argument("--quick", action="store_true", help="tiny sizes: a check that it runs")
    a = ap.parse_args()

    cpus = os.cpu_count() or 1
    if a.threads:
        try:
            threads = sorted({int(t) for t in a.threads.split(",")})
        except ValueError:
            sys.exit(f"--threads: a comma-separated list of numbers, not {a.threads!r}")
        if not threads or threads[0] < 1:
            sys.exit("--threads: numbers from 1")
    else:
        threads = [t for t in (1, 2, 4, 8, 16, 32, 64) if t <= cpus] or [1]
    if 1 not in threads:
        threads.insert(0, 1)
    top = threads[-1]
    if not os.access(a.ctrack, os.X_OK):
        sys.exit(f"{a.ctrack}: not an executable (build it: cargo build --release -p ctrack)")

    q = a.quick
    pkts = "20000" if q else "16777216"
    conns = "2000" if q else "1000000"
    steady = "4000" if q else "4000000"
    big = "20000" if q else "10000000"
    lpkts = ["--packets", "20000"] if q else []
    runs = "1" if q else "3"
    b = [a.ctrack, "bench", "--json"]
    rec = {"cpus": cpus, "threads": threads, "quick": q, "complete": False}

    def save():
        """Writes the record so far (every step's figures survive a cut)."""
        if a.json:
            tmp = a.json + ".tmp"
            with open(tmp, "w") as f:
                json.dump(rec, f, indent=1)
            os.replace(tmp, a.json)

    # OVS's benchmark workload.
    rec["benchmark"] = {}
    for t in sorted({1, top}):
        cmd = b + ["benchmark", str(t), pkts, "32", "1", "--runs", runs]
        if a.ovstest:
            cmd += ["--ovstest", a.ovstest]
        rec["benchmark"][t] = run(cmd)
        save()

    # Connection creation with expiry.
    def cps(t, sweeper, *more):
        return run(b + ["cps", "--threads", str(t), "--conns", conns, "--steady", steady,
                        "--runs", runs, "--sweeper", sweeper, *more])
    rec["cps"] = {}
    for t in threads:
        rec["cps"][t] = cps(t, "each")
        save()
    rec["cps_sweeper_thread"] = {top: cps(top, "thread")}
    # Each thread on shards of its own: what sharing the shards costs.
    rec["cps_affine"] = {top: cps(top, "each", "--affine")}
    save()

    # Established packets.
    rec["lookup"] = {}
    for m in (conns, big):
        for t in sorted({1, top}):
            rec["lookup"][f"{m}/{t}"] = run(b + ["lookup", "--threads", str(t), "--conns", m,
                                                 "--runs", runs] + lpkts)
            save()

    # The firewall stage on established traffic, all threads through one
    # firewall.
    spkts = "20000" if q else "4000000"
    stage = ["policy", "stage", "--conns", "10000", "--acls", "1", "--ring", "16384",
             "--packets", spkts, "--runs", runs]
    rec["stage"] = {t: run(b + stage + ["--threads", str(t)]) for t in sorted({1, top})}
    save()

    # The machine alone: `top` processes at once, one thread each.
    alone = {
        "benchmark": run_many(b + ["benchmark", "1", pkts, "32", "1", "--runs", runs], top),
        "cps": run_many(b + ["cps", "--threads", "1", "--conns", conns, "--steady", steady,
                             "--runs", runs], top),
        "lookup": run_many(b + ["lookup", "--threads", "1", "--conns", conns, "--runs", runs]
                           + lpkts, top),
        "stage": run_many(b + stage, top),
    }
    rec["alone"] = alone
    save()

    # Summary: ctrack's scaling beside the machine's.
    def bench_rate(d):
        return d["threads"] * d["packets_per_thread"] / (d["median_ms"] / 1e3) / 1e6

    rows = []
    b1, bt = rec["benchmark"][1], rec["benchmark"][top]
    solo = [bench_rate(d) for d in alone["benchmark"]]
    rows.append(("benchmark Mpps", bench_rate(b1), bench_rate(bt), sum(solo)))
    for phase in ("fill", "steady"):
        c1 = rec["cps"][1][phase]["conns_per_sec"] / 1e6
        ct = rec["cps"][top][phase]["conns_per_sec"] / 1e6
        rows.append((f"cps {phase} M/s", c1, ct,
                     sum(d[phase]["conns_per_sec"] for d in alone["cps"]) / 1e6))
    l1, lt = rec["lookup"][f"{conns}/1"], rec["lookup"][f"{conns}/{top}"]
    rows.append((f"lookup {conns} Mpps", l1["mpps"], lt["mpps"],
                 sum(d["mpps"] for d in alone["lookup"])))

    def stage_rate(d):
        return d["figures"]["rows"][0]["firewall_mpps"]
    rows.append(("firewall stage Mpps", stage_rate(rec["stage"][1]), stage_rate(rec["stage"][top]),
                 sum(stage_rate(d) for d in alone["stage"])))
    print(f"{cpus} CPUs; {top} threads against 1, and {top} one-thread processes at once"
          " (the machine alone; summed, so a little high: they do not all end together):")
    print(f"{'':22} {'1 thread':>10} {f'{top} threads':>11} {'ratio':>7}"
          f" {f'{top} procs':>10} {'ratio':>7}")
    summary = []
    for name, one, many, procs in rows:
        print(f"{name:22} {one:10.2f} {many:11.2f} {many / one:6.1f}x {procs:10.2f}"
              f" {procs / one:6.1f}x")
        summary.append({"what": name, "one": one, "threads": many, "procs": procs})
    for t in sorted({1, top}):
        d = rec["benchmark"][t]
        if d.get("speedup_vs_ovs"):
            print(f"benchmark {t} thread(s): ctrack {d['median_ms']:.0f} ms, ovstest"
                  f" {d['ovs_median_ms']:.0f} ms: {d['speedup_vs_ovs']:.2f}x")
    own = rec["benchmark"][top].get("thread_ms") or []
    if top > 1 and own:
        print(f"benchmark {top} threads, each thread's own time in the median run: fastest"
              f" {own[0]:.0f} ms, median {own[len(own) // 2]:.0f}, slowest {own[-1]:.0f}"
              f" (one process alone: {rec['benchmark'][1]['median_ms']:.0f})")
    for t in threads:
        s = rec["cps"][t]["steady"]
        lat = s["batch_latency_ns"]
        print(f"cps {t:>3} thread(s), every thread sweeping: steady"
              f" {s['conns_per_sec'] / 1e6:.2f} M/s, p99.9/p50"
              f" {lat['p999'] / max(lat['p50'], 1):.1f}x")
    s = rec["cps_affine"][top]["steady"]
    print(f"cps {top:>3} thread(s), each on shards of its own (--affine): steady"
          f" {s['conns_per_sec'] / 1e6:.2f} M/s")
    s = rec["cps_sweeper_thread"][top]["steady"]
    print(f"cps {top:>3} thread(s), one sweeper thread: steady {s['conns_per_sec'] / 1e6:.2f} M/s;"
          f" evicted {s['evicted']}, refused {s['refused_table_full']}")
    rec["summary"] = summary
    rec["complete"] = True
    save()


if __name__ == "__main__":
    main()
