#!/usr/bin/env bash
# Runs a bundle made by tests/gpu/make_bundle.sh on a machine with an NVIDIA
# GPU, from the root of an onnx2soap checkout (for tests/fixtures and bench/).
#
# Usage: tests/gpu/run_bundle.sh BUNDLE_DIR [--bench | --bench-only] [--out DIR]
#
# 1. bin/runtime_lib_cuda_tests: every CUDA kernel against its CPU twin.
# 2. Every projects/<fixture>_<optimizer>/bin/train, one rank (MPI singleton)
#    on GPU 0, 5 steps on the fixture's batch: each loss against PyTorch's
#    (tests/fixtures/<fixture>/losses.json) within relative 1e-4.
# 2b. One program with --profile-ops and --trace: a copy table measured on
#    the GPU, kernel entries, and a trace with forward and backward steps.
# 3. --bench: step times of the generated ResNet-18 (batch 16, 224x224,
#    random weights) and Transformer programs against PyTorch on the same GPU
#    in the same run (bench/train_peer.py --device cuda), interleaved rounds.
# Exit status 0 only if every check held. Logs go to --out (default
# /tmp/gpu-run).
set -uo pipefail
ROOT=$(pwd)
B=$(cd "$1" && pwd)
shift
BENCH=0
CHECKS=1
OUT=/tmp/gpu-run
while (($#)); do
  case $1 in
    --bench) BENCH=1 ;;
    --bench-only) BENCH=1 CHECKS=0 ;;
    --out) OUT=$2; shift ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
mkdir -p "$OUT"
export LC_ALL=C

# The GPU libraries the machine brings (CUDA toolkit, or the pip wheels
# PyTorch uses), after the bundle's own.
LIBDIRS=$B/lib
for lib in libcudnn.so.9 libcublas.so.13 libcublasLt.so.13 libnccl.so.2; do
  found=$(find /usr/local/cuda*/ /usr/lib /opt /usr/local/lib -name "$lib" 2>/dev/null | head -1)
  if [[ -z $found ]]; then
    echo "error: $lib not found on this machine" >&2
    exit 1
  fi
  LIBDIRS=$LIBDIRS:$(dirname "$found")
done
export LD_LIBRARY_PATH=$LIBDIRS${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
# One rank without mpirun: OpenMPI's singleton, with the bundle's plugins.
export OMPI_MCA_mca_base_component_path=$B/lib/openmpi3
export OMPI_MCA_ess_singleton_isolated=1
export OMPI_MCA_mca_base_component_show_load_errors=0
export OMPI_MCA_btl=self
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
echo "GPU: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1)"
echo "libraries: $LD_LIBRARY_PATH"
FAILED=0

if ((CHECKS)); then
echo "== runtime_lib_cuda_tests"
if "$B/bin/runtime_lib_cuda_tests" >"$OUT/cuda_tests.txt" 2>&1; then
  grep -E '^\[ *(OK|PASSED|SKIPPED) ' "$OUT/cuda_tests.txt"
else
  FAILED=1
  tail -40 "$OUT/cuda_tests.txt"
fi

echo "== generated 1-GPU programs against PyTorch's losses"
for project in "$B"/projects/*/; do
  name=$(basename "$project")
  fixture=${name%_*}
  optimizer=${name##*_}
  case $name in *_sgd_momentum) fixture=${name%_sgd_momentum}; optimizer=sgd_momentum ;; esac
  F=$ROOT/tests/fixtures/$fixture
  "$project/bin/train" --inputs "$F/input_0.pb" --labels "$F/labels.pb" \
    --steps 5 >"$OUT/$name.txt" 2>&1
  rc=$?
  python3 - "$OUT/$name.txt" "$F/losses.json" "$optimizer" "$name" "$rc" <<'EOF' || FAILED=1
import json, re, statistics, sys
text, losses, opt, name, rc = sys.argv[1:]
want = json.load(open(losses))[opt]["losses"]
got, times = {}, []
for line in open(text):
    m = re.match(r"step (\d+) loss (\S+) time (\S+) s$", line)
    if m:
        got[int(m.group(1))] = float(m.group(2))
        times.append(float(m.group(3)))
worst = 0.0
ok = rc == "0" and len(got) == 5
for i, w in enumerate(want[:5], 1):
    if i in got:
        worst = max(worst, abs(got[i] - w) / abs(w))
ok = ok and worst <= 1e-4
print("%-26s %s  max rel diff %.2e  median step %.6f s%s" % (
    name, "ok  " if ok else "FAIL", worst,
    statistics.median(times) if times else float("nan"),
    "" if rc == "0" else "  (exit %s)" % rc))
if not ok:
    print(open(text).read()[-2000:])
sys.exit(0 if ok else 1)
EOF
done

echo "== --profile-ops (kernels and the copy table) and --trace on the GPU"
# Never run on a GPU before 2026-11-25's bundle: the copy timer's CUDA
# copies and the trace's synchronized spans.
project=$(ls -d "$B"/projects/*_sgd/ 2>/dev/null | head -1)
if [[ -n $project ]]; then
  name=$(basename "$project")
  F=$ROOT/tests/fixtures/${name%_sgd}
  "$project/bin/train" --inputs "$F/input_0.pb" --labels "$F/labels.pb" \
    --steps 2 --profile-ops "$OUT/ops.json" --trace "$OUT/trace.json" \
    >"$OUT/profile_trace.txt" 2>&1
  rc=$?
  python3 - "$OUT/ops.json" "$OUT/trace.json" "$rc" "$name" <<'EOF' || FAILED=1
import json, sys
ops, trace, rc, name = sys.argv[1:]
problems, times = [], []
try:
    profile = json.load(open(ops))
    copies = profile.get("copies", {})
    times = copies.get("times_us", [])
    if len(times) != len(copies.get("sizes_bytes", [])) or len(times) < 2 \
            or not times[-1] > times[0] or min(times) <= 0:
        problems.append("copy table %r" % copies)
    if not profile.get("entries"):
        problems.append("no kernel entries")
    events = [e for e in json.load(open(trace))["traceEvents"]
              if e["ph"] == "X"]
    kinds = {e["cat"] for e in events}
    if not {"forward", "backward"} <= kinds:
        problems.append("trace kinds %r" % sorted(kinds))
except (OSError, ValueError, KeyError) as error:
    problems.append(str(error))
if rc != "0":
    problems.append("exit " + rc)
print("%-26s %s  %s" % (name, "FAIL" if problems else "ok  ",
                        "; ".join(problems) or
                        "copies " + ", ".join("%g us" % t for t in times)))
sys.exit(1 if problems else 0)
EOF
fi
fi

if ((BENCH)); then
  echo "== step-time benchmark (generated program vs PyTorch, same GPU)"
  DATA=$OUT/resnet18_224
  mkdir -p "$DATA"
  python3 - "$DATA" <<'EOF'
import sys, numpy as np
from onnx import numpy_helper
rng = np.random.default_rng(0)
x = rng.standard_normal((16, 3, 224, 224), dtype=np.float32)
y = rng.integers(0, 1000, size=(16,), dtype=np.int64)
for name, a in (("input_0.pb", x), ("labels.pb", y)):
    with open(sys.argv[1] + "/" + name, "wb") as f:
        f.write(numpy_helper.from_array(a).SerializeToString())
EOF
  TF=$ROOT/tests/fixtures/transformer
  TLR=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["sgd"]["lr"])' "$TF/losses.json")
  for round in 1 2 3; do
    for c in resnet18 transformer; do
      if [[ $c == resnet18 ]]; then
        prog=$B/bench/resnet18_224/bin/train dir=$DATA steps=20 peerflags=(--init random --lr 0.01)
      else
        prog=$B/projects/transformer_sgd/bin/train dir=$TF steps=50 peerflags=(--lr "$TLR")
      fi
      [[ -x $prog ]] || continue
      soap() { "$prog" --inputs "$dir/input_0.pb" --labels "$dir/labels.pb" \
        --steps $((steps + 2)) >"$OUT/bench.$c.soap.$round.txt" 2>&1; }
      peer() { python3 "$ROOT/bench/train_peer.py" "$c" "$dir" --device cuda \
        --steps "$steps" "${peerflags[@]}" --json >"$OUT/bench.$c.peer.$round.json" 2>"$OUT/bench.$c.peer.$round.err"; }
      if ((round % 2)); then soap; peer; else peer; soap; fi
    done
  done
  python3 - "$OUT" <<'EOF'
import glob, json, re, statistics, sys
out = sys.argv[1]
print("| model | generated program, median step | PyTorch, median step | ratio (program / PyTorch) |")
print("| --- | --- | --- | --- |")
for c in ("resnet18", "transformer"):
    soap, peer = [], []
    for f in sorted(glob.glob("%s/bench.%s.soap.*.txt" % (out, c))):
        t = [float(m.group(1)) for m in re.finditer(r"time (\S+) s", open(f).read())]
        if len(t) > 2:
            soap.append(statistics.median(t[2:]))
    for f in sorted(glob.glob("%s/bench.%s.peer.*.json" % (out, c))):
        try:
            peer.append(json.load(open(f))["median_step_s"])
        except Exception:
            pass
    if soap and peer:
        s, p = statistics.median(soap), statistics.median(peer)
        print("| %s | %.3f ms | %.3f ms | %.2f |" % (c, s * 1e3, p * 1e3, s / p))
    else:
        print("| %s | %s | %s | - |" % (c, soap, peer))
EOF
fi
exit $FAILED
