#!/usr/bin/python3
"""The import benchmark's peer: what the onnx Python package takes to load,
check and infer the shapes of a model.

    /usr/bin/python3 bench/onnx_python_peer.py MODEL.onnx [--repeat N] [--json]

Times onnx.load (external data included), onnx.checker.check_model and
onnx.shape_inference.infer_shapes in-process, N times (default 5), and prints
the median and minimum of each step and of their sum, the time to import the
onnx package, and the process's peak RSS (ru_maxrss). bench/run.sh also times
the whole process (interpreter start and `import onnx` included) the same way
it times onnx2soap.
"""

import argparse
import json
import resource
import statistics
import sys
import time

T0 = time.perf_counter()
import onnx  # noqa: E402
import onnx.checker  # noqa: E402
import onnx.shape_inference  # noqa: E402
IMPORT_S = time.perf_counter() - T0


def once(path):
    t0 = time.perf_counter()
    model = onnx.load(path)
    t1 = time.perf_counter()
    # A model over 2 GB would need the path form; the bench models are smaller.
    onnx.checker.check_model(model)
    t2 = time.perf_counter()
    inferred = onnx.shape_inference.infer_shapes(model)
    t3 = time.perf_counter()
    assert len(inferred.graph.node) == len(model.graph.node)
    return {"load": t1 - t0, "check": t2 - t1, "infer": t3 - t2, "total": t3 - t0}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    runs = [once(args.model) for _ in range(max(1, args.repeat))]
    steps = ("load", "check", "infer", "total")
    result = {
        "model": args.model,
        "onnx_version": onnx.__version__,
        "import_onnx_s": IMPORT_S,
        "repeat": len(runs),
        "median_s": {k: statistics.median(r[k] for r in runs) for k in steps},
        "min_s": {k: min(r[k] for r in runs) for k in steps},
        # Linux reports ru_maxrss in KiB.
        "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
    }
    if args.json:
        json.dump(result, sys.stdout, indent=1)
        print()
        return
    print(f"{args.model}: onnx {onnx.__version__}, import onnx {IMPORT_S:.3f} s")
    for k in steps:
        print(f"  {k:6s} median {result['median_s'][k]:.3f} s  min {result['min_s'][k]:.3f} s")
    print(f"  peak RSS {result['peak_rss_bytes'] / 2**20:.1f} MiB")


if __name__ == "__main__":
    main()
