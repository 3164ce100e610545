#!/usr/bin/env bash
# The generated-program benchmark (docs/benchmarks.md, "Generated program").
#
# Usage: bench/codegen_bench.sh [BUILD_DIR]     (default: build)
#
# 1. `onnx2soap compile` wall time (whole process, median of COMPILE_RUNS,
#    each into a fresh folder) and the size of what it writes, for
#    Inception-v3 on 64 K80s (data-parallel, and a searched strategy with
#    --iterations 100 --seed 0) and, for context, AlexNet and ResNet-101 on
#    16 P100s; all --batch 64 --init random (samples/ hold graphs only).
#    With perf installed, one `perf record -g` of the Inception-v3
#    data-parallel compile and its top symbols by self time.
# 2. Step time of the generated CPU program for ResNet-18 (batch 16,
#    3x224x224, bench/train_models.py) and the Transformer fixture, from the
#    models' own initial weights, SGD lr 0.01: `--cluster cpu:1` run as
#    1 rank x 2 threads and `--cluster cpu:2` as 2 ranks x 1 thread
#    (data-parallel), against PyTorch (bench/train_peer.py,
#    set_num_threads(2)) and `onnx2soap train --threads 2` on the same
#    weights and batch. Each project is built standalone in Release with
#    its bundled runtime copy, as a user builds it. Each side runs 2 warm-up
#    steps, then N timed steps, in ROUNDS interleaved rounds (the sides
#    rotate which goes first). The program's time is the slowest rank's
#    step wall time, as it prints it.
# It prints markdown tables; raw results go to
# BUILD_DIR/codegen-bench-results/, the projects to BUILD_DIR/codegen-bench-work/.
#
# Environment: BENCH_MODELS (default build/bench-models), CODEGEN_BENCH_ROUNDS
# (default 3), CODEGEN_BENCH_RESNET_STEPS (default 5),
# CODEGEN_BENCH_TRANSFORMER_STEPS (default 50), CODEGEN_BENCH_COMPILE_RUNS
# (default 3), CODEGEN_BENCH_PARTS ("compile step", the default, or one of them),
# CODEGEN_BENCH_JOBS (build parallelism of the projects, default 2).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-build}
[[ $BUILD == /* ]] || BUILD=$ROOT/$BUILD
BIN=$BUILD/bin/onnx2soap
MODELS=${BENCH_MODELS:-$ROOT/build/bench-models}
ROUNDS=${CODEGEN_BENCH_ROUNDS:-3}
COMPILE_RUNS=${CODEGEN_BENCH_COMPILE_RUNS:-3}
PARTS=${CODEGEN_BENCH_PARTS:-compile step}
JOBS=${CODEGEN_BENCH_JOBS:-2}
PY=/usr/bin/python3
RESULTS=$BUILD/codegen-bench-results
WORK=$BUILD/codegen-bench-work
WARMUP=2
export LC_ALL=C
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

[[ -x $BIN ]] || { echo "error: $BIN not built (cmake --build $BUILD --target onnx2soap)" >&2; exit 1; }
mkdir -p "$RESULTS" "$WORK"
loadavg() { cut -d' ' -f1-3 /proc/loadavg; }

BUILD_TYPE=$(sed -n 's/^CMAKE_BUILD_TYPE:STRING=//p' "$BUILD/CMakeCache.txt" 2>/dev/null || true)
echo "onnx2soap: $BIN (CMAKE_BUILD_TYPE=${BUILD_TYPE:-unknown}), $(nproc) CPUs"
echo "load average before: $(loadavg)"
echo

# ---------------------------------------------------------------- compile
if [[ " $PARTS " == *" compile "* ]]; then
  rm -f "$RESULTS"/compile.*
  # name | model | cluster | gpus | strategy flags
  COMPILES=(
    "inception_v3 dp|inception_v3|paper-k80|64|--strategy data-parallel"
    "inception_v3 searched|inception_v3|paper-k80|64|--iterations 100 --seed 0"
    "alexnet dp|alexnet|paper-p100|16|--strategy data-parallel"
    "resnet101 dp|resnet101|paper-p100|16|--strategy data-parallel"
  )
  compile_cmd() { # model cluster gpus flags out
    echo "$BIN compile $ROOT/samples/$1.onnx --batch 64 --cluster $2 --gpus $3 $4 --init random -o $5"
  }
  for ((r = 1; r <= COMPILE_RUNS; r++)); do
    for c in "${COMPILES[@]}"; do
      IFS='|' read -r name model cluster gpus flags <<<"$c"
      tag=${name// /_}
      out=$WORK/compile-$tag
      rm -rf "$out"
      echo "[compile $r/$COMPILE_RUNS] $name" >&2
      # shellcheck disable=SC2046
      /usr/bin/time -f "%e %M %U %S" -o "$RESULTS/compile.$tag.$r.time" \
        $(compile_cmd "$model" "$cluster" "$gpus" "$flags" "$out") >"$RESULTS/compile.$tag.$r.log" 2>&1
      echo "$(loadavg)" >"$RESULTS/compile.$tag.$r.load"
      if ((r == 1)); then
        {
          stat -c %s "$out/src/plan.cpp"
          stat -c %s "$out/weights/shards.bin"
          du -sb "$out" | cut -f1
          wc -l <"$out/src/plan.cpp"
        } >"$RESULTS/compile.$tag.size"
      fi
      rm -rf "$out"
    done
  done
  "$PY" - "$RESULTS" "$COMPILE_RUNS" <<'PYEOF'
import os, statistics, sys
res, runs = sys.argv[1], int(sys.argv[2])
names = ["inception_v3 dp", "inception_v3 searched", "alexnet dp", "resnet101 dp"]
what = {"inception_v3 dp": "Inception-v3, paper-k80 × 64, data-parallel",
        "inception_v3 searched": "Inception-v3, paper-k80 × 64, searched (--iterations 100 --seed 0)",
        "alexnet dp": "AlexNet, paper-p100 × 16, data-parallel",
        "resnet101 dp": "ResNet-101, paper-p100 × 16, data-parallel"}
def mb(b): return f"{b / 1e6:.1f} MB"
print("| case (batch 64, --init random) | compile wall median (min, max) | CPU (user+sys) median | peak RSS | src/plan.cpp | plan.cpp lines | weights/shards.bin | whole project | goal < 1 s |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---|")
for n in names:
    tag = n.replace(" ", "_")
    if not os.path.exists(os.path.join(res, f"compile.{tag}.1.time")):
        continue
    ts, rss, cpu = [], [], []
    for r in range(1, runs + 1):
        with open(os.path.join(res, f"compile.{tag}.{r}.time")) as f:
            line = f.read().split()
        ts.append(float(line[-4])); rss.append(int(line[-3]) * 1024)
        cpu.append(float(line[-2]) + float(line[-1]))
    plan, weights, total, lines = [int(x) for x in open(os.path.join(res, f"compile.{tag}.size")).read().split()]
    med = statistics.median(ts)
    print(f"| {what[n]} | **{med:.2f} s** ({min(ts):.2f}, {max(ts):.2f}) | {statistics.median(cpu):.2f} s | {mb(max(rss))} | {mb(plan)} | {lines:,} "
          f"| {mb(weights)} | {mb(total)} | {'met' if med < 1 else 'MISSED'} |")
print()
print(f"Whole `onnx2soap compile` process (`/usr/bin/time`), median of {runs} runs, each into a fresh folder; "
      "wall minus CPU is waiting: for the cores on a loaded machine, and for the disk.")
PYEOF
  echo
  if command -v perf >/dev/null; then
    echo "[perf] inception_v3 dp" >&2
    out=$WORK/compile-perf
    rm -rf "$out"
    # shellcheck disable=SC2046
    perf record -g -o "$RESULTS/compile.perf.data" \
      $(compile_cmd inception_v3 paper-k80 64 "--strategy data-parallel" "$out") \
      >"$RESULTS/compile.perf.log" 2>&1
    rm -rf "$out"
    perf report -i "$RESULTS/compile.perf.data" --no-children --sort dso,symbol --stdio \
      2>/dev/null >"$RESULTS/compile.perf.self.txt" || true
    perf report -i "$RESULTS/compile.perf.data" --children --sort symbol --stdio -g none \
      2>/dev/null >"$RESULTS/compile.perf.children.txt" || true
    echo "perf (Inception-v3 data-parallel compile), top symbols by self time:"
    echo
    echo '```'
    # (sed, not head: head's early exit would fail the pipeline under pipefail)
    grep -E '^ +[0-9.]+%' "$RESULTS/compile.perf.self.txt" | sed -n 1,20p | cut -c1-150
    echo '```'
    echo
  fi
fi

# ---------------------------------------------------------------- step time
if [[ " $PARTS " == *" step "* ]]; then
  rm -f "$RESULTS"/step.* "$RESULTS"/build.*
  RESNET=$MODELS/resnet18_train
  if [[ ! -s $RESNET/model.onnx || ! -s $RESNET/input_0.pb || ! -s $RESNET/labels.pb ]]; then
    echo "making $RESNET ..." >&2
    "$PY" "$ROOT/bench/train_models.py" --out "$MODELS" >&2
  fi
  # name | peer model | dir | batch | timed steps
  CASES=(
    "resnet18|resnet18|$RESNET|16|${CODEGEN_BENCH_RESNET_STEPS:-5}"
    "transformer|transformer|$ROOT/tests/fixtures/transformer|4|${CODEGEN_BENCH_TRANSFORMER_STEPS:-50}"
  )
  echo "peer: $("$PY" -c 'import torch; print("PyTorch", torch.__version__)'), set_num_threads(2); $(mpirun --version | head -n1)"
  # Compile and build every project first (standalone, bundled runtime).
  for c in "${CASES[@]}"; do
    IFS='|' read -r name peer dir batch steps <<<"$c"
    for n in 1 2; do
      p=$WORK/$name-cpu$n
      rm -rf "$p"
      echo "[build] $name cpu:$n" >&2
      "$BIN" compile "$dir/model.onnx" --batch "$batch" --cluster "cpu:$n" --strategy data-parallel \
        --optimizer sgd --lr 0.01 -o "$p" >"$RESULTS/build.$name.cpu$n.log" 2>&1
      start=$(date +%s.%N)
      cmake -S "$p" -B "$p/build" -G Ninja -DCMAKE_BUILD_TYPE=Release >>"$RESULTS/build.$name.cpu$n.log" 2>&1
      ninja -C "$p/build" -j"$JOBS" >>"$RESULTS/build.$name.cpu$n.log" 2>&1
      echo "$(echo "$(date +%s.%N) - $start" | bc) $(loadavg)" >"$RESULTS/build.$name.cpu$n.time"
    done
  done
  echo "load average after the builds: $(loadavg)"
  echo

  run_side() { # side name dir steps peer round
    local side=$1 name=$2 dir=$3 steps=$4 peer=$5 r=$6 n
    case $side in
      gen1 | gen2)
        n=${side#gen}
        mpirun --oversubscribe --bind-to none -np "$n" "$WORK/$name-cpu$n/build/train" \
          --inputs "$dir/input_0.pb" --labels "$dir/labels.pb" --steps $((WARMUP + steps)) \
          --threads $((2 / n)) >"$RESULTS/step.$name.$side.$r.txt" 2>&1 ;;
      train)
        "$BIN" train "$dir/model.onnx" --inputs "$dir/input_0.pb" --labels "$dir/labels.pb" \
          --steps $((WARMUP + steps)) --optimizer sgd --lr 0.01 --threads 2 --time \
          >"$RESULTS/step.$name.$side.$r.txt" ;;
      peer)
        "$PY" "$ROOT/bench/train_peer.py" "$peer" "$dir" --steps "$steps" --threads 2 \
          --lr 0.01 --json >"$RESULTS/step.$name.$side.$r.json" ;;
    esac
  }
  SIDES=(gen1 gen2 peer train)
  for ((r = 1; r <= ROUNDS; r++)); do
    for c in "${CASES[@]}"; do
      IFS='|' read -r name peer dir batch steps <<<"$c"
      echo "[round $r/$ROUNDS] $name" >&2
      for ((k = 0; k < ${#SIDES[@]}; k++)); do
        side=${SIDES[$(((k + r - 1) % ${#SIDES[@]}))]}
        echo "$side $(loadavg)" >>"$RESULTS/step.load"
        run_side "$side" "$name" "$dir" "$steps" "$peer" "$r"
      done
    done
  done

  "$PY" - "$RESULTS" "$ROUNDS" "$WARMUP" <<'PYEOF'
import json, os, re, statistics, sys
res, rounds, warmup = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
names = [n for n in ("resnet18", "transformer") if os.path.exists(os.path.join(res, f"step.{n}.peer.1.json"))]

def text(name, side, r):
    losses, times = [], []
    with open(os.path.join(res, f"step.{name}.{side}.{r}.txt")) as f:
        for line in f:
            m = re.match(r"step (\d+) loss (\S+) time (\S+)", line)
            if m:
                losses.append(float(m.group(2))); times.append(float(m.group(3)))
    return losses, times

def peer(name, r):
    d = json.load(open(os.path.join(res, f"step.{name}.peer.{r}.json")))
    return d["losses"], d["step_s"], d["batch"]

def fmt(t):
    return f"{t:.3f} s" if t >= 0.1 else f"{t * 1000:.2f} ms"

label = {"gen1": "generated, cpu:1 (1 rank × 2 threads)", "gen2": "generated, cpu:2 (2 ranks × 1 thread)",
         "train": "`onnx2soap train --threads 2`", "peer": "PyTorch (2 threads)"}
print("| model | side | median step (min) | ratio PyTorch / side (per round) | step-1 loss (rel. diff to PyTorch) | max rel. loss diff over all steps |")
print("|---|---|---:|---:|---:|---:|")
for name in names:
    data = {}
    for side in ("gen1", "gen2", "train", "peer"):
        L, T, ratios = None, [], []
        for r in range(1, rounds + 1):
            if side == "peer":
                l, t, batch = peer(name, r)
            else:
                l, t = text(name, side, r)
            T += t[warmup:]
            L = L or l
            data.setdefault(("per", side), []).append(statistics.median(t[warmup:]))
        data[side] = (L, T)
    pl, pt = data["peer"]
    pmed = statistics.median(pt)
    for side in ("gen1", "gen2", "train", "peer"):
        l, t = data[side]
        med = statistics.median(t)
        per = [p / s for p, s in zip(data[("per", "peer")], data[("per", side)])]
        n = min(len(l), len(pl))
        rel = [abs(a - b) / abs(b) for a, b in zip(l[:n], pl[:n])]
        ratio = "—" if side == "peer" else f"**{pmed / med:.2f}×** ({', '.join(f'{x:.2f}' for x in per)})"
        lossc = f"{l[0]:.6f}" + ("" if side == "peer" else f" ({rel[0]:.1e})")
        maxc = "—" if side == "peer" else f"{max(rel):.1e} ({n} steps)"
        print(f"| {name} (batch {batch}) | {label[side]} | {fmt(med)} ({fmt(min(t))}) | {ratio} | {lossc} | {maxc} |")
print()
print(f"Median over {rounds} interleaved rounds × the timed steps of each round, after {warmup} warm-up steps "
      "per round; the sides rotate which goes first. Ratio > 1: the side is faster than PyTorch.")
PYEOF
  echo
  for f in "$RESULTS"/build.*.time; do
    b=$(basename "$f" .time)
    echo "standalone Release build of ${b#build.}: $(cut -d' ' -f1 "$f" | xargs printf '%.0f') s (load average $(cut -d' ' -f2-4 "$f"))"
  done
fi
echo
echo "load average after: $(loadavg)"
