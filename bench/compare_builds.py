#!/usr/bin/env python3
"""Two onnx2soap binaries side by side on the planner's search.

Usage: bench/compare_builds.py OLD_BINARY NEW_BINARY [--rounds N] [--skip-fixed]
           [--rows alexnet:paper-k80:64,...] [--budget SEC]
           [--comm-model flexflow|program]

For each row (model:cluster:GPUs), alternating the binaries in each round so
that the machine's load falls on both alike:

- fixed work, FlexFlow's Table 5 layout: `search --iterations 100 --chains 2
  --threads 1` with delta and with full simulation, wall seconds, and whether
  both binaries wrote the same strategy file (they must when a change only
  makes the search faster);
- with --budget: `search --budget SEC` (2 threads), when the answer came
  (`best_found_seconds`) and when it came within 1 % of its final time.

Communication is FlexFlow's model (`--comm-model flexflow`), as in the
planner benchmark, unless --comm-model program (the CLI's default) is given. Prints Markdown tables; the machine is noisy, so read the
ratios of the same round, and the spread over rounds.
"""
import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BATCH = {"alexnet": 256}
UNROLL = {"rnntc", "rnnlm", "nmt"}
COMM_MODEL = "flexflow"


def seconds(t):
    # Three decimals below a second: the answers of small rows come in
    # milliseconds.
    return "%.3f" % t if t < 1 else "%.2f" % t


def command(binary, model, cluster, gpus):
    cmd = [binary, "search", os.path.join(ROOT, "samples", model + ".onnx"),
           "--batch", str(BATCH.get(model, 64)), "--cluster", cluster,
           "--gpus", str(gpus), "--seed", "1", "--comm-model", COMM_MODEL]
    if model in UNROLL:
        cmd.append("--unroll-rnn")
    return cmd


def fixed_work(binary, row, full, out):
    cmd = command(binary, *row) + ["--iterations", "100", "--chains", "2",
                                   "--threads", "1", "-o", out]
    if full:
        cmd.append("--full-simulation")
    start = time.monotonic()
    subprocess.run(cmd, check=True, capture_output=True)
    wall = time.monotonic() - start
    with open(out, "rb") as f:
        return wall, hashlib.sha256(f.read()).hexdigest()


def budgeted(binary, row, budget):
    done = subprocess.run(command(binary, *row) +
                          ["--budget", str(budget), "--json"],
                          check=True, capture_output=True, text=True)
    r = json.loads(done.stdout)
    final = r["time"]
    within = min((p["seconds"] for p in r.get("progression", [])
                  if p["time"] <= final * 1.01),
                 default=r["best_found_seconds"])
    return final, r["best_found_seconds"], within


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("old")
    parser.add_argument("new")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--rows", default="alexnet:paper-k80:32,"
                        "alexnet:paper-k80:64,inception_v3:paper-k80:16,"
                        "rnnlm:paper-k80:16,nmt:paper-k80:16")
    parser.add_argument("--budget", type=float, default=0)
    parser.add_argument("--skip-fixed", action="store_true",
                        help="only the --budget table")
    parser.add_argument("--comm-model", default="flexflow",
                        choices=["flexflow", "program"])
    args = parser.parse_args()
    global COMM_MODEL
    COMM_MODEL = args.comm_model
    rows = []
    for spec in args.rows.split(","):
        model, cluster, gpus = spec.split(":")
        rows.append((model, cluster, int(gpus)))
    scratch = tempfile.mkdtemp(prefix="compare_builds.")

    if not args.skip_fixed:
        compare_fixed_work(args, rows, scratch)
    if args.budget:
        compare_budgeted(args, rows)


def compare_fixed_work(args, rows, scratch):
    print("Fixed work (`--iterations 100 --chains 2 --threads 1`), wall "
          "seconds per round, old / new:\n")
    print("| model | cluster | GPUs | delta old s | delta new s | delta "
          "new/old | full old s | full new s | full new/old | same "
          "strategy |")
    print("|---|---|---:|---|---|---|---|---|---|---|")
    for row in rows:
        times = {}
        hashes = set()
        for _ in range(args.rounds):
            for full in (False, True):
                for name, binary in (("old", args.old), ("new", args.new)):
                    wall, digest = fixed_work(
                        binary, row, full,
                        os.path.join(scratch, "%s.json" % name))
                    times.setdefault((full, name), []).append(wall)
                    hashes.add(digest)

        def cell(full, name):
            return ", ".join("%.2f" % t for t in times[(full, name)])

        def ratio(full):
            return ", ".join("%.2f" % (n / o) for o, n in zip(
                times[(full, "old")], times[(full, "new")]))

        print("| %s | %s | %d | %s | %s | %s | %s | %s | %s | %s |" % (
            row[0], row[1], row[2], cell(False, "old"), cell(False, "new"),
            ratio(False), cell(True, "old"), cell(True, "new"), ratio(True),
            "yes" if len(hashes) == 1 else "no"), flush=True)


def compare_budgeted(args, rows):
    print("\nWith `--budget %g` (2 threads): the answer's ms, when it "
          "came and when it came within 1 %%, per round:\n" % args.budget)
    print("| model | cluster | GPUs | binary | answer ms | found s | "
          "within 1 % s |")
    print("|---|---|---:|---|---|---|---|")
    for row in rows:
        results = {"old": [], "new": []}
        for _ in range(args.rounds):
            for name, binary in (("old", args.old), ("new", args.new)):
                results[name].append(budgeted(binary, row, args.budget))
        for name in ("old", "new"):
            rs = results[name]
            print("| %s | %s | %d | %s | %s | %s | %s |" % (
                row[0], row[1], row[2], name,
                ", ".join("%.2f" % (r[0] * 1e3) for r in rs),
                ", ".join(seconds(r[1]) for r in rs),
                ", ".join(seconds(r[2]) for r in rs)), flush=True)


if __name__ == "__main__":
    sys.exit(main())
