#!/usr/bin/env python3
"""How well the simulator predicts what generated programs do (the FlexFlow
paper's §8.3.1, Figure 11: simulated against real iteration times), on the
only cluster this machine has: CPU ranks (`cpu:N`, one MPI rank per device).

Usage: bench/simulator_accuracy.py BUILD_DIR [--models alexnet:32,...]
                                   [--devices N] [--steps N] [--rounds R]
                                   [--out DIR]

For each model (a sample, graph only: weights random) and strategy (data
parallel, model parallel, expert, OptCNN's and a searched one):

1. communication is measured once per model by a generated program
   (`train --profile-comm`), and `clusters --show cpu:N --measured` puts the
   tables in a cluster file;
2. `onnx2soap calibrate --strategy S` measures the forward and backward time
   of each partition the strategy runs, on this machine's CPU backend with
   one thread per rank (the profiles of all strategies merged into one),
   with cold caches (calibrate's default) and with warm ones (`--cache
   warm`); the search (200 steps per chain, seed 1) on the measured
   cluster uses the built-ins' cold profile;
3. `onnx2soap simulate --profile` predicts the step time on the measured
   cluster file with either profile, and on the `cpu:N` preset (its
   communication figures from the analytic model) with the cold one (not
   for the searched strategy, whose file names the measured cluster);
4. `onnx2soap compile` writes the program (for the measured cluster file,
   as the search's strategy file is), it is built against BUILD_DIR's
   runtime (Release) and run with `mpirun -np N train --threads 1`: its step
   time is what it prints (the slowest rank's wall time of one step), the
   median of the timed steps of R rounds, the strategies interleaved.

Prints markdown tables: predicted and measured time per strategy, their
ratios, and how many of the pairs of strategies whose measured times differ
by more than 10 % the predictions order the same way; then where the
slowest rank's step goes (`train --profile-ops`: kernels, copies,
communication, the rest) beside the planner's compute and copy times of its
busiest device. Raw outputs go to OUT (default BUILD_DIR/simulator-accuracy),
among them, per model and strategy, the profiled step's timeline
(`train --trace`), the planner's (`simulate --trace`) and
`bench/compare_traces.py`'s table of the two (compare-<strategy>.md).
Standard library only.
"""
import argparse
import json
import os
import random
import re
import statistics
import struct
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STRATEGIES = ["data-parallel", "model-parallel", "expert", "optcnn",
              "searched"]
CACHES = ["warm", "cold"]
# name:batch[:flags]; small enough for a step of about a second on 2 cores.
DEFAULT_MODELS = "alexnet:32,bert_encoder:8,rnntc:8:--unroll-rnn,inception_v3:4"


def run(cmd, **kw):
    done = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if done.returncode != 0:
        sys.exit("failed (exit %d): %s\n%s%s" % (
            done.returncode, " ".join(cmd), done.stdout[-2000:],
            done.stderr[-2000:]))
    return done.stdout


def varint(n):
    out = b""
    while True:
        low, n = n & 0x7F, n >> 7
        if not n:
            return out + bytes([low])
        out += bytes([low | 0x80])


def tensor_pb(name, dims, values, float_data):
    """An ONNX TensorProto (dims, data_type, name, raw_data)."""
    raw = struct.pack("<%d%s" % (len(values), "f" if float_data else "q"),
                      *values)
    msg = b"".join(b"\x08" + varint(d) for d in dims)
    msg += b"\x10" + varint(1 if float_data else 7)
    msg += b"\x42" + varint(len(name)) + name.encode()
    msg += b"\x4a" + varint(len(raw)) + raw
    return msg


def make_batch(binary, model, batch, flags, work):
    """Random inputs and labels for the model at this batch: floats from
    N(0, 1), token ids below 100, labels below the output's last dim."""
    info = json.loads(run([binary, "inspect", model, "--batch", str(batch),
                           "--json"] + flags))
    rng = random.Random(0)
    args = []
    for i, inp in enumerate(info["inputs"]):
        count = 1
        for d in inp["shape"]:
            count *= d
        floating = inp["dtype"].startswith("f")
        values = ([rng.gauss(0, 1) for _ in range(count)] if floating else
                  [rng.randrange(100) for _ in range(count)])
        path = os.path.join(work, "input_%d.pb" % i)
        with open(path, "wb") as f:
            f.write(tensor_pb(inp["name"], inp["shape"], values, floating))
        args += ["--inputs", path]
    out = info["outputs"][0]["shape"]
    count = 1
    for d in out[:-1]:
        count *= d
    path = os.path.join(work, "labels.pb")
    with open(path, "wb") as f:
        f.write(tensor_pb("labels", out[:-1],
                          [rng.randrange(out[-1]) for _ in range(count)],
                          False))
    return args + ["--labels", path]


def mpi_env():
    env = dict(os.environ)
    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMP_NUM_THREADS="1")
    return env


def mpirun(train, devices, args):
    """Runs the program on `devices` ranks of this machine; its stdout."""
    return run(["mpirun", "--oversubscribe", "--bind-to", "none", "-np",
                str(devices), train, "--threads", "1"] + args,
               env=mpi_env(), timeout=1800)


def build_project(build, project):
    export = os.path.join(build, "onnx2soap-runtime-targets.cmake")
    run(["cmake", "-S", project, "-B", os.path.join(project, "build"), "-G",
         "Ninja", "-DCMAKE_BUILD_TYPE=Release",
         "-DONNX2SOAP_RUNTIME_EXPORT=" + export])
    run(["cmake", "--build", os.path.join(project, "build"), "--", "-j2"])
    return os.path.join(project, "build", "train")


def breakdown(train, devices, data, trace):
    """Where the slowest rank's profiled step goes (`--profile-ops`, one step
    after a warm-up): seconds of kernels, copies, communication, other. The
    profiled step's timeline goes to `trace` (`train --trace`)."""
    profile = os.path.join(os.path.dirname(train), "ops.json")
    out = mpirun(train, devices, ["--steps", "2", "--profile-ops", profile,
                                  "--trace", trace] + data)
    ranks = []
    for line in out.splitlines():
        m = re.match(r"rank \d+ per profiled step: (\S+) s = kernels (\S+) "
                     r"s, copies (\S+) s, communication (\S+) s, other "
                     r"(\S+) s$", line)
        if m:  # total, kernels, copies, communication, other
            ranks.append([float(x) for x in m.groups()])
    if len(ranks) != devices:
        sys.exit("no breakdown from %s:\n%s" % (train, out))
    return max(ranks, key=lambda r: r[0])


def step_times(train, devices, data, steps):
    out = mpirun(train, devices, ["--steps", str(steps + 1), "--quiet"] +
                 data)
    times = [float(line.split()[-2]) for line in out.splitlines()
             if line.startswith("step ")]
    if len(times) != steps + 1:
        sys.exit("unexpected output of %s:\n%s" % (train, out))
    return times[1:]  # the first step warms up


def merge_profiles(paths, out):
    merged, seen = None, set()
    for path in paths:
        with open(path) as f:
            p = json.load(f)
        if merged is None:
            merged = dict(p, entries=[])
        for e in p["entries"]:
            if e["key"] not in seen:
                seen.add(e["key"])
                merged["entries"].append(e)
    merged["entries"].sort(key=lambda e: e["key"])
    with open(out, "w") as f:
        json.dump(merged, f, indent=1, sort_keys=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("build")
    parser.add_argument("--models", default=DEFAULT_MODELS)
    parser.add_argument("--devices", type=int, default=2)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--out", default="")
    args = parser.parse_args()
    build = os.path.abspath(args.build)
    binary = os.path.join(build, "bin", "onnx2soap")
    out_dir = os.path.abspath(args.out or
                              os.path.join(build, "simulator-accuracy"))
    os.makedirs(out_dir, exist_ok=True)
    run(["cmake", "--build", build, "--target", "onnx2soap",
         "onnx2soap_runtime_program", "onnx2soap_runtime_lib"])
    cluster = "cpu:%d" % args.devices

    rows = []
    for spec in args.models.split(","):
        stem, batch, *rest = spec.split(":")
        flags = rest[0].split() if rest else []
        model = os.path.join(ROOT, "samples", stem + ".onnx")
        work = os.path.join(out_dir, stem)
        os.makedirs(work, exist_ok=True)
        common = [model, "--batch", batch] + flags
        data = make_batch(binary, model, int(batch), flags, work)

        # Communication first, measured by a data-parallel program
        # (`train --profile-comm`), then a cluster file with the tables: the
        # search and every program below are made for it. Built-ins get
        # 4 MiB gradient buckets everywhere (compile and simulate would
        # otherwise each choose for their cluster); the searched strategy
        # carries its own.
        bucket = ["--gradient-bucket", "4MiB"]
        probe = os.path.join(work, "project-probe")
        run([binary, "compile"] + common + bucket +
            ["--cluster", cluster, "--strategy", "data-parallel", "--init",
             "random", "-o", probe])
        comm = os.path.join(work, "comm.json")
        mpirun(build_project(build, probe), args.devices,
               ["--profile-comm", comm, "--quiet"])
        measured = os.path.join(work, "cluster-measured.json")
        with open(measured, "w") as f:
            f.write(run([binary, "clusters", "--show", cluster, "--measured",
                         comm]))

        # Op times of the built-ins' partitions, the search with them (200
        # steps per chain, seed 1: the same strategy every run),
        # then the searched strategy's partitions: one profile, measured
        # with cold caches (calibrate's default) and with warm ones.
        def calibrate(strategy, name, cache):
            path = os.path.join(work, "profile-%s-%s.json" % (name, cache))
            run([binary, "calibrate"] + common +
                ["--cluster", measured, "--threads", "1", "--strategy",
                 strategy, "--cache", cache, "-o", path])
            return path
        profile = {c: os.path.join(work, "profile-%s.json" % c)
                   for c in CACHES}
        parts = {c: [calibrate(s, s, c) for s in STRATEGIES
                     if s != "searched"] for c in CACHES}
        for c in CACHES:
            merge_profiles(parts[c], profile[c])
        files = {s: s for s in STRATEGIES}
        files["searched"] = os.path.join(work, "searched.json")
        sgd = ["--optimizer", "sgd"]  # what the programs run
        run([binary, "search"] + common + sgd +
            ["--cluster", measured, "--profile", profile["cold"],
             "--iterations", "200", "--seed", "1", "-o", files["searched"]])
        for c in CACHES:
            parts[c].append(calibrate(files["searched"], "searched", c))
            merge_profiles(parts[c], profile[c])

        def flags_of(s):
            return [] if s == "searched" else bucket

        # Predictions: on the measured cluster with either profile; on the
        # preset (analytic communication) with the cold one, for the
        # built-ins (a strategy file names the cluster it was searched for).
        # The cold column's busiest device's compute goes beside the
        # program's breakdown below.
        predicted = {"preset": {}, "warm": {}, "cold": {}}
        compute, copies = {}, {}
        for s in STRATEGIES:
            for column, where, cache in (("preset", cluster, "cold"),
                                         ("warm", measured, "warm"),
                                         ("cold", measured, "cold")):
                if s == "searched" and where == cluster:
                    continue
                report = json.loads(run(
                    [binary, "simulate"] + common + sgd + flags_of(s) +
                    ["--cluster", where, "--strategy", files[s], "--profile",
                     profile[cache], "--json"]))
                predicted[column][s] = report["time"]
                if column == "cold":
                    # The busiest device's, and its copies.
                    busiest = max(range(len(report["compute_time"])),
                                  key=lambda d: report["compute_time"][d] +
                                  report["copy_time"][d])
                    compute[s] = report["compute_time"][busiest]
                    copies[s] = report["copy_time"][busiest]

        # The programs.
        trains = {}
        for s in STRATEGIES:
            project = os.path.join(work, "project-" + s)
            run([binary, "compile"] + common + flags_of(s) +
                ["--cluster", measured, "--strategy", files[s], "--profile",
                 profile["cold"], "--init", "random", "--optimizer", "sgd", "--lr",
                 "0.01", "-o", project])
            trains[s] = build_project(build, project)

        # 4. Measurements, strategies interleaved round by round.
        samples = {s: [] for s in STRATEGIES}
        for r in range(args.rounds):
            for s in STRATEGIES[r % len(STRATEGIES):] + \
                    STRATEGIES[:r % len(STRATEGIES)]:
                samples[s] += step_times(trains[s], args.devices, data,
                                         args.steps)
        measured_time = {s: statistics.median(samples[s]) for s in STRATEGIES}
        # Where the program's time goes, and its timeline beside the
        # planner's (cold profile, measured communication):
        # compare-<strategy>.md.
        parts = {}
        for s in STRATEGIES:
            traced = os.path.join(work, "trace-program-%s.json" % s)
            planned = os.path.join(work, "trace-planned-%s.json" % s)
            parts[s] = breakdown(trains[s], args.devices, data, traced)
            run([binary, "simulate"] + common + sgd + flags_of(s) +
                ["--cluster", measured, "--strategy", files[s], "--profile",
                 profile["cold"], "--trace", planned])
            with open(os.path.join(work, "compare-%s.md" % s), "w") as f:
                f.write(run([sys.executable,
                             os.path.join(ROOT, "bench", "compare_traces.py"),
                             traced, planned]))
        with open(os.path.join(work, "results.json"), "w") as f:
            json.dump({"predicted": predicted, "measured_steps": samples,
                       "predicted_compute": compute,
                       "predicted_copies": copies, "breakdown": parts}, f,
                      indent=1, sort_keys=True)
        rows.append((stem, batch, predicted, measured_time, samples,
                     (compute, copies), parts))
        print("done %s at %s" % (stem, time.strftime("%H:%M:%S")),
              file=sys.stderr, flush=True)

    def cell(table, s, scale=1e3):
        return "%.1f" % (table[s] * scale) if s in table else "—"

    def ratio(meas, table, s):
        return "%.2f" % (meas[s] / table[s]) if s in table else "—"
    print("| model | batch | strategy | predicted ms: preset, cold | "
          "measured comm, warm | measured comm, cold | measured ms "
          "(min–max) | measured / predicted: preset cold, warm, cold |")
    print("|---|---:|---|---:|---:|---:|---:|---|")
    for stem, batch, pred, meas, samples, _, _ in rows:
        for s in STRATEGIES:
            print("| %s | %s | %s | %s | %s | %s | %.1f (%.1f–%.1f) | "
                  "%s, %s, %s |" % (
                      stem, batch, s, cell(pred["preset"], s),
                      cell(pred["warm"], s), cell(pred["cold"], s),
                      meas[s] * 1e3, min(samples[s]) * 1e3,
                      max(samples[s]) * 1e3, ratio(meas, pred["preset"], s),
                      ratio(meas, pred["warm"], s),
                      ratio(meas, pred["cold"], s)))
    print()
    # Ranking: of the pairs of strategies whose measured times differ by
    # more than the run-to-run noise (10 %), how many the prediction orders
    # the same way.
    print("| model | order measured (fastest first) | predicted (measured "
          "comm, warm) | pairs alike | predicted (measured comm, cold) | "
          "pairs alike |")
    print("|---|---|---|---:|---|---:|")
    for stem, batch, pred, meas, samples, _, _ in rows:
        def order(t):
            return " < ".join(sorted(t, key=lambda s: t[s]))

        def alike(t):
            pairs = [(a, b) for a in t for b in t
                     if a < b and abs(meas[a] - meas[b]) >
                     0.1 * min(meas[a], meas[b])]
            same = sum((meas[a] < meas[b]) == (t[a] < t[b])
                       for a, b in pairs)
            return "%d of %d" % (same, len(pairs))
        print("| %s | %s | %s | %s | %s | %s |" % (
            stem, order(meas), order(pred["warm"]), alike(pred["warm"]),
            order(pred["cold"]), alike(pred["cold"])))
    print()
    # The slowest rank of a profiled step (kernels synchronized one by
    # one), against the planner's busiest device's compute (cold profile).
    print("| model | strategy | planner compute ms | planner copies ms | "
          "profiled step ms | kernels | copies | communication | other |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for stem, batch, pred, meas, samples, planned, parts in rows:
        compute, copied = planned
        for s in STRATEGIES:
            total, kernels, copies, comm, other = parts[s]
            print("| %s | %s | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f "
                  "|" % (stem, s, compute[s] * 1e3, copied[s] * 1e3,
                         total * 1e3, kernels * 1e3, copies * 1e3, comm * 1e3,
                         other * 1e3))


if __name__ == "__main__":
    main()
