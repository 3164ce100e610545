#!/usr/bin/env python3
"""Device memory of generated programs against the planner's peak
(docs/benchmarks.md, "Generated program memory").

Usage: bench/program_memory.py BUILD [--peer PEER_BUILD] [--gpus 8]
                               [--cluster paper-k80] [--out DIR]

For each sample model (samples/*.onnx, --init random) and built-in strategy,
runs `onnx2soap compile` with BUILD's binary (and PEER_BUILD's, for a
before/after comparison in the same run) and reads the project's
manifest.json: per rank, `allocated_bytes` (what the program allocates: its
buffers' arena and its message buffer), `kernel_scratch_bytes` and
`library_bytes` (the kernel scratch and the cuBLAS workspace the planner
counts on top, where the manifest has them), `runtime_bytes` (the CUDA
context's and NCCL's memory the planner counts outside the program's
buffers, since 2026-11-25) and `predicted_peak_memory` (the planner's peak).
Prints a markdown table for the rank that allocates most; the ratios are
against the peak less the runtime's part, what the program's own
allocations are to fit in.
Compiling needs no GPU; nothing is run.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = [("AlexNet", "alexnet", 256), ("ResNet-101", "resnet101", 64),
          ("Inception-v3", "inception_v3", 64), ("RNNLM", "rnnlm", 64),
          ("RNNTC", "rnntc", 64), ("NMT", "nmt", 64)]
STRATEGIES = ["data-parallel", "expert"]


def compile_memory(build, model, batch, strategy, cluster, gpus, work):
    """(allocated, planner peak, kernel scratch and library memory, runtime
    memory) of the rank that allocates most, or None when compile refuses the strategy (its
    message)."""
    out = os.path.join(work, "project")
    shutil.rmtree(out, ignore_errors=True)
    cmd = [os.path.join(build, "bin", "onnx2soap"), "compile",
           os.path.join(ROOT, "samples", model + ".onnx"),
           "--batch", str(batch), "--cluster", cluster, "--gpus", str(gpus),
           "--strategy", strategy, "--init", "random", "-o", out]
    run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode != 0:
        return None, run.stderr.strip().splitlines()[-1]
    with open(os.path.join(out, "manifest.json")) as f:
        manifest = json.load(f)
    allocated = manifest["allocated_bytes"]
    peak = manifest["predicted_peak_memory"]
    scratch = manifest.get("kernel_scratch_bytes", [0] * len(allocated))
    library = manifest.get("library_bytes", [0] * len(allocated))
    runtime = manifest.get("runtime_bytes", [0] * len(allocated))
    rank = max(range(len(allocated)), key=lambda r: allocated[r])
    return (allocated[rank], peak[rank], scratch[rank] + library[rank],
            runtime[rank]), None


def mib(n):
    return "%.1f" % (n / 2**20)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("build")
    p.add_argument("--peer", help="a second build, compared in the same run")
    p.add_argument("--cluster", default="paper-k80")
    p.add_argument("--gpus", type=int, default=8)
    p.add_argument("--out", help="write the results as JSON here")
    args = p.parse_args()
    work = tempfile.mkdtemp(prefix="program-memory-")
    rows = []
    try:
        for name, model, batch in MODELS:
            for strategy in STRATEGIES:
                row = {"model": name, "strategy": strategy, "batch": batch}
                now, error = compile_memory(args.build, model, batch, strategy,
                                            args.cluster, args.gpus, work)
                if now is None:
                    row["error"] = error
                    rows.append(row)
                    continue
                (row["allocated"], row["planner_peak"], row["kernel_scratch"],
                 row["runtime"]) = now
                if args.peer:
                    before, _ = compile_memory(args.peer, model, batch,
                                               strategy, args.cluster,
                                               args.gpus, work)
                    if before:
                        row["peer_allocated"] = before[0]
                rows.append(row)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    peer = " | peer allocates MiB | now / peer" if args.peer else ""
    print("| model | strategy | batch | allocates MiB "
          "| kernel scratch + cuBLAS MiB | CUDA context + NCCL MiB "
          "| planner's peak MiB | allocates / (peak - context - NCCL) "
          "| (allocates + scratch + cuBLAS) / (peak - context - NCCL)%s |"
          % peer)
    print("|---|---|---:|---:|---:|---:|---:|---:|---:%s|" % (
        "|---:|---:" if args.peer else ""))
    for row in rows:
        if "error" in row:
            print("| %s | %s | %d | refused: %s |" %
                  (row["model"], row["strategy"], row["batch"], row["error"]))
            continue
        buffers = row["planner_peak"] - row["runtime"]
        line = "| %s | %s | %d | %s | %s | %s | %s | %.3f | %.3f" % (
            row["model"], row["strategy"], row["batch"],
            mib(row["allocated"]), mib(row["kernel_scratch"]),
            mib(row["runtime"]), mib(row["planner_peak"]),
            row["allocated"] / buffers,
            (row["allocated"] + row["kernel_scratch"]) / buffers)
        if args.peer:
            if "peer_allocated" in row:
                line += " | %s | %.2f" % (mib(row["peer_allocated"]),
                                          row["allocated"] /
                                          row["peer_allocated"])
            else:
                line += " | - | -"
        print(line + " |")
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "program_memory.json"), "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
