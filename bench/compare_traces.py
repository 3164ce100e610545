#!/usr/bin/env python3
"""Where a generated program's step differs from the planner's prediction:
the program's timeline (`train --trace PROGRAM.json`) against the
simulator's (`onnx2soap simulate ... --trace PLANNED.json`) for the same
model, strategy and cluster.

Usage: bench/compare_traces.py PROGRAM.json PLANNED.json [--top N]

Prints markdown: per rank (rank r is the cluster's device r), when its step
ended and how long it spent in forward and backward calls in each trace, and
how long the program waited in communication; then the N op groups (default
12) whose forward or backward time differs most between the two, summed over
ranks. An op group is an op name without its trailing number, so the steps
of an unrolled recurrent layer count together ("/lstm/LSTM/LSTMCell_6" and
"_8" are "/lstm/LSTM/LSTMCell"). Times in milliseconds. Standard library
only.
"""
import argparse
import collections
import json
import re
import sys

COMPUTE = ("forward", "backward")


def group(name):
    """The op's name without a trailing "_<digits>"."""
    return re.sub(r"_\d+$", "", name)


def program_events(path):
    """{rank: [(kind, op, start ms, duration ms)]} from `train --trace`."""
    with open(path) as f:
        events = json.load(f)["traceEvents"]
    ranks = collections.defaultdict(list)
    for e in events:
        if e.get("ph") == "X":
            ranks[e["tid"]].append((e["cat"], e["name"], e["ts"] / 1e3,
                                    e["dur"] / 1e3))
    return ranks


def planned_events(path):
    """{rank: [(kind, op, start ms, duration ms)]} of the planner's device
    tracks (those running forward or backward tasks), ranked by (node,
    track) as the cluster numbers its devices."""
    with open(path) as f:
        events = json.load(f)["traceEvents"]
    tracks = collections.defaultdict(list)
    for e in events:
        if e.get("ph") == "X":
            op = e.get("args", {}).get("op", e["name"])
            tracks[(e["pid"], e["tid"])].append(
                (e.get("cat", ""), op, e["ts"] / 1e3, e["dur"] / 1e3))
    devices = sorted(k for k, v in tracks.items()
                     if any(kind in COMPUTE for kind, _, _, _ in v))
    return {rank: tracks[key] for rank, key in enumerate(devices)}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("program")
    parser.add_argument("planned")
    parser.add_argument("--top", type=int, default=12)
    args = parser.parse_args()
    try:
        program = program_events(args.program)
        planned = planned_events(args.planned)
    except (OSError, ValueError, KeyError) as error:
        sys.exit("compare_traces: %s" % error)
    if sorted(program) != sorted(planned):
        sys.exit("compare_traces: the program traced ranks %s, the planner "
                 "devices %s: not the same cluster" %
                 (sorted(program), sorted(planned)))

    def total(events, kinds):
        return sum(d for kind, _, _, d in events if kind in kinds)

    def end(events):
        return max((s + d for _, _, s, d in events), default=0)

    print("| rank | step ends: program, planned | forward: program, planned "
          "| backward: program, planned | program waits |")
    print("|---:|---:|---:|---:|---:|")
    for rank in sorted(program):
        p, s = program[rank], planned[rank]
        print("| %d | %.1f, %.1f | %.1f, %.1f | %.1f, %.1f | %.1f |" % (
            rank, end(p), end(s), total(p, ["forward"]),
            total(s, ["forward"]), total(p, ["backward"]),
            total(s, ["backward"]), total(p, ["receive", "wait"])))

    times = collections.defaultdict(lambda: [0.0, 0.0, 0, 0])
    for column, ranks in ((0, program), (1, planned)):
        for events in ranks.values():
            for kind, op, _, duration in events:
                if kind in COMPUTE:
                    entry = times[(group(op), kind)]
                    entry[column] += duration
                    entry[2 + column] += 1
    rows = sorted(times.items(), key=lambda kv: -abs(kv[1][0] - kv[1][1]))
    print()
    print("| op group | kind | calls: program, planned | program ms | "
          "planned ms | program / planned |")
    print("|---|---|---:|---:|---:|---:|")
    for (op, kind), (got, want, calls, planned_calls) in rows[:args.top]:
        ratio = "%.2f" % (got / want) if want > 0 else "—"
        print("| %s | %s | %d, %d | %.1f | %.1f | %s |" % (
            op, kind, calls, planned_calls, got, want, ratio))


if __name__ == "__main__":
    main()
