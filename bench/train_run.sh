#!/usr/bin/env bash
# The training-step benchmark (docs/benchmarks.md, "Training step (CPU backend)").
#
# Usage: bench/train_run.sh [BUILD_DIR]     (default: build; `make bench` runs it)
#
# One SGD step (lr 0.01, cross-entropy, training mode) of ResNet-18 (batch 16,
# 3x224x224, bench/train_models.py) and of the Transformer fixture
# (tests/fixtures/transformer), on the CPU backend
# (`onnx2soap train --threads 2 --time`) and in PyTorch
# (bench/train_peer.py, torch.set_num_threads(2)), from the same initial
# weights on the same batch. Each side runs 2 warm-up steps, then N timed
# steps, in ROUNDS interleaved rounds (the two sides alternate which goes
# first). It prints a markdown table of the median step times and their
# ratio, and whether the losses agree; raw results go to
# BUILD_DIR/train-bench-results/.
#
# Environment: BENCH_MODELS (default build/bench-models; the ResNet-18 case
# is made there when missing), TRAIN_BENCH_ROUNDS (default 3),
# TRAIN_BENCH_RESNET_STEPS (timed steps per round, default 5),
# TRAIN_BENCH_TRANSFORMER_STEPS (default 50), TRAIN_BENCH_THREADS (default 2).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-build}
[[ $BUILD == /* ]] || BUILD=$ROOT/$BUILD
BIN=$BUILD/bin/onnx2soap
MODELS=${BENCH_MODELS:-$ROOT/build/bench-models}
ROUNDS=${TRAIN_BENCH_ROUNDS:-3}
THREADS=${TRAIN_BENCH_THREADS:-2}
PY=/usr/bin/python3
RESULTS=$BUILD/train-bench-results
WARMUP=2
export LC_ALL=C

[[ -x $BIN ]] || { echo "error: $BIN not built (cmake --build $BUILD --target onnx2soap)" >&2; exit 1; }
RESNET=$MODELS/resnet18_train
if [[ ! -s $RESNET/model.onnx || ! -s $RESNET/input_0.pb || ! -s $RESNET/labels.pb ]]; then
  echo "making $RESNET ..." >&2
  "$PY" "$ROOT/bench/train_models.py" --out "$MODELS" >&2
fi
mkdir -p "$RESULTS"
rm -f "$RESULTS"/*

# name | peer model | dir | timed steps
CASES=(
  "resnet18|resnet18|$RESNET|${TRAIN_BENCH_RESNET_STEPS:-5}"
  "transformer|transformer|$ROOT/tests/fixtures/transformer|${TRAIN_BENCH_TRANSFORMER_STEPS:-50}"
)

BUILD_TYPE=$(sed -n 's/^CMAKE_BUILD_TYPE:STRING=//p' "$BUILD/CMakeCache.txt" 2>/dev/null || true)
ASSERTIONS=$(sed -n 's/^ONNX2SOAP_ASSERTIONS:BOOL=//p' "$BUILD/CMakeCache.txt" 2>/dev/null || true)
echo "onnx2soap: $BIN (CMAKE_BUILD_TYPE=${BUILD_TYPE:-unknown}," \
  "ONNX2SOAP_ASSERTIONS=${ASSERTIONS:-unknown}), --threads $THREADS;" \
  "peer: $("$PY" -c 'import torch; print("PyTorch", torch.__version__)'), set_num_threads($THREADS)"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo

run_soap() { # name dir steps round
  "$BIN" train "$2/model.onnx" --inputs "$2/input_0.pb" --labels "$2/labels.pb" \
    --steps $((WARMUP + $3)) --optimizer sgd --lr 0.01 --threads "$THREADS" --time \
    >"$RESULTS/$1.soap.$4.txt"
}
run_peer() { # name peer-model dir steps round
  "$PY" "$ROOT/bench/train_peer.py" "$2" "$3" --steps "$4" --threads "$THREADS" \
    --lr 0.01 --json >"$RESULTS/$1.peer.$5.json"
}

for ((r = 1; r <= ROUNDS; r++)); do
  for c in "${CASES[@]}"; do
    IFS='|' read -r name peer dir steps <<<"$c"
    echo "[round $r/$ROUNDS] $name" >&2
    if ((r % 2)); then
      run_soap "$name" "$dir" "$steps" "$r"
      run_peer "$name" "$peer" "$dir" "$steps" "$r"
    else
      run_peer "$name" "$peer" "$dir" "$steps" "$r"
      run_soap "$name" "$dir" "$steps" "$r"
    fi
  done
done

"$PY" - "$RESULTS" "$ROUNDS" "$WARMUP" <<'PYEOF'
import glob, json, os, re, statistics, sys

res, rounds, warmup = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
names = sorted({os.path.basename(p).split(".")[0] for p in glob.glob(os.path.join(res, "*.soap.*.txt"))},
               key=lambda n: (n != "resnet18", n))

def soap(name, r):
    losses, times = [], []
    with open(os.path.join(res, f"{name}.soap.{r}.txt")) as f:
        for line in f:
            m = re.match(r"step (\d+) loss (\S+) time (\S+)", line)
            if m:
                losses.append(float(m.group(2)))
                times.append(float(m.group(3)))
    return losses, times

def peer(name, r):
    with open(os.path.join(res, f"{name}.peer.{r}.json")) as f:
        d = json.load(f)
    return d["losses"], d["step_s"], d["batch"]

def fmt(t):
    return f"{t:.3f} s" if t >= 0.1 else f"{t * 1000:.2f} ms"

rows = []
for name in names:
    st, pt, ratios, soap_losses, peer_losses = [], [], [], None, None
    for r in range(1, rounds + 1):
        sl, s = soap(name, r)
        pl, p, batch = peer(name, r)
        st += s[warmup:]
        pt += p[warmup:]
        ratios.append(statistics.median(p[warmup:]) / statistics.median(s[warmup:]))
        soap_losses, peer_losses = soap_losses or sl, peer_losses or pl
    n = min(len(soap_losses), len(peer_losses))
    rel = [abs(a - b) / abs(b) for a, b in zip(soap_losses[:n], peer_losses[:n])]
    rows.append(dict(name=name, batch=batch, soap=statistics.median(st), soap_min=min(st),
                     peer=statistics.median(pt), peer_min=min(pt), n=len(st), pn=len(pt),
                     ratios=ratios, rel0=rel[0], relmax=max(rel), steps=n,
                     l0=(soap_losses[0], peer_losses[0])))

print("| model | batch | onnx2soap median step (min) | PyTorch median step (min) "
      "| ratio PyTorch / onnx2soap | per-round ratios | step-1 loss onnx2soap / PyTorch (rel. diff) "
      "| losses agree (1e-3) |")
print("|---|---:|---:|---:|---:|---:|---:|---|")
for r in rows:
    ok = r["rel0"] <= 1e-3
    print(f"| {r['name']} | {r['batch']} | {fmt(r['soap'])} ({fmt(r['soap_min'])}) "
          f"| {fmt(r['peer'])} ({fmt(r['peer_min'])}) | **{r['peer'] / r['soap']:.2f}×** "
          f"| {', '.join(f'{x:.2f}' for x in r['ratios'])} "
          f"| {r['l0'][0]:.6f} / {r['l0'][1]:.6f} ({r['rel0']:.1e}) "
          f"| {'yes' if ok else 'NO'} (max rel. diff over {r['steps']} steps {r['relmax']:.1e}) |")
print()
print(f"Median over {rounds} interleaved rounds × the timed steps of each round "
      f"({rows[0]['n']} ResNet-18 steps per side), after {warmup} warm-up steps per round. "
      "Ratio > 1: onnx2soap is faster.")
print()
for r in rows:
    ratio = r["peer"] / r["soap"]
    print(f"Goal (at least as fast as PyTorch) on {r['name']}: "
          f"{'met' if ratio >= 1 else 'MISSED'} ({ratio:.2f}×).")
PYEOF
echo
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
