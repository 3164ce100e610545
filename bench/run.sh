#!/usr/bin/env bash
# The import benchmark (docs/benchmarks.md, "Import and shape inference").
#
# Usage: bench/run.sh [BUILD_DIR]        (default: build; `make bench` runs it)
#
# For each model it times `onnx2soap inspect MODEL --batch 1 --json` as a
# whole process (hyperfine when installed, else a loop), and its peak RSS
# with /usr/bin/time; then the peer, bench/onnx_python_peer.py (onnx.load +
# checker.check_model + shape_inference.infer_shapes with Debian's onnx),
# timed the same way as a whole process and also in-process. It prints a
# markdown table with ratios; raw results go to BUILD_DIR/bench-results/.
#
# Environment: BENCH_MODELS (default build/bench-models, created by
# bench/make_models.sh when missing), BENCH_RUNS (onnx2soap runs, default 20),
# BENCH_PEER_RUNS (peer runs, default 5), BENCH_HYPERFINE=0 (time with a
# date loop even when hyperfine is installed).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-build}
[[ $BUILD == /* ]] || BUILD=$ROOT/$BUILD
BIN=$BUILD/bin/onnx2soap
MODELS=${BENCH_MODELS:-$ROOT/build/bench-models}
RUNS=${BENCH_RUNS:-20}
PEER_RUNS=${BENCH_PEER_RUNS:-5}
PY=/usr/bin/python3
PEER=$ROOT/bench/onnx_python_peer.py
RESULTS=$BUILD/bench-results
export LC_ALL=C

[[ -x $BIN ]] || { echo "error: $BIN not built (cmake --build $BUILD --target onnx2soap)" >&2; exit 1; }
[[ -x /usr/bin/time ]] || { echo "error: /usr/bin/time missing (apt-get install -y time)" >&2; exit 1; }
"$ROOT/bench/make_models.sh" "$MODELS" >&2
mkdir -p "$RESULTS"
rm -f "$RESULTS"/*

HAVE_HYPERFINE=0
if [[ ${BENCH_HYPERFINE:-1} != 0 ]] && command -v hyperfine >/dev/null; then
  HAVE_HYPERFINE=1
fi
BUILD_TYPE=$(sed -n 's/^CMAKE_BUILD_TYPE:STRING=//p' "$BUILD/CMakeCache.txt" 2>/dev/null || true)
# The default RelWithDebInfo build keeps assert()s (ONNX2SOAP_ASSERTIONS).
ASSERTIONS=$(sed -n 's/^ONNX2SOAP_ASSERTIONS:BOOL=//p' "$BUILD/CMakeCache.txt" 2>/dev/null || true)
echo "onnx2soap: $BIN (CMAKE_BUILD_TYPE=${BUILD_TYPE:-unknown}," \
  "ONNX2SOAP_ASSERTIONS=${ASSERTIONS:-unknown}); timer:" \
  "$( ((HAVE_HYPERFINE)) && echo hyperfine || echo 'date loop')"
echo

# Drops one file's pages from the page cache (posix_fadvise DONTNEED; other
# files and processes are left alone), for the cold-cache rows.
evict() {
  "$PY" -c 'import os,sys; fd=os.open(sys.argv[1], os.O_RDONLY); os.fsync(fd); os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)' "$1"
}

# time_cmd NAME RUNS CMD...: writes $RESULTS/NAME.times (one wall time in
# seconds per line) and $RESULTS/NAME.rss (peak RSS in KiB per line). With
# COLD=FILE, FILE is evicted from the page cache before every run.
time_cmd() {
  local name=$1 runs=$2 i t0 t1
  shift 2
  local prepare=()
  [[ -n ${COLD:-} ]] && prepare=(--prepare "$(printf '%q ' "$PY" -c 'import os,sys; fd=os.open(sys.argv[1], os.O_RDONLY); os.fsync(fd); os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)' "$COLD")")
  if ((HAVE_HYPERFINE)); then
    hyperfine -N --style none --warmup 2 --runs "$runs" "${prepare[@]}" \
      --export-json "$RESULTS/$name.hyperfine.json" "$(printf '%q ' "$@")" \
      >/dev/null 2>"$RESULTS/$name.hyperfine.log" || {
      cat "$RESULTS/$name.hyperfine.log" >&2
      return 1
    }
    "$PY" -c 'import json,sys; [print(t) for t in json.load(open(sys.argv[1]))["results"][0]["times"]]' \
      "$RESULTS/$name.hyperfine.json" >"$RESULTS/$name.times"
  else
    "$@" >/dev/null; "$@" >/dev/null   # warm the page cache
    : >"$RESULTS/$name.times"
    for ((i = 0; i < runs; i++)); do
      [[ -z ${COLD:-} ]] || evict "$COLD"
      t0=$(date +%s.%N)
      "$@" >/dev/null
      t1=$(date +%s.%N)
      awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.6f\n", b - a }' >>"$RESULTS/$name.times"
    done
  fi
  : >"$RESULTS/$name.rss"
  for ((i = 0; i < 3; i++)); do
    [[ -z ${COLD:-} ]] || evict "$COLD"
    /usr/bin/time -f '%M' -o "$RESULTS/$name.rss.tmp" "$@" >/dev/null
    cat "$RESULTS/$name.rss.tmp" >>"$RESULTS/$name.rss"
  done
  rm -f "$RESULTS/$name.rss.tmp"
}

# name | file | size-of (file whose bytes count as "the model") | run peer?
CASES=(
  "inception_v3 (inline weights)|$MODELS/inception_v3.onnx|$MODELS/inception_v3.onnx|1"
  "resnet101 (inline weights)|$MODELS/resnet101.onnx|$MODELS/resnet101.onnx|1"
  "inception_v3 (external data)|$MODELS/external/inception_v3.onnx|$MODELS/external/inception_v3.onnx.data|1"
  "inception_v3 (graph only, planning)|$ROOT/samples/inception_v3.onnx|$ROOT/samples/inception_v3.onnx|0"
  "inception_v3 (inline weights, cold page cache)|$MODELS/inception_v3.onnx|$MODELS/inception_v3.onnx|1|cold"
)

: >"$RESULTS/cases.txt"
i=0
for c in "${CASES[@]}"; do
  IFS='|' read -r label file sizefile peer cold <<<"$c"
  i=$((i + 1))
  echo "[$i/${#CASES[@]}] $label" >&2
  COLD=
  [[ $cold == cold ]] && COLD=$file
  COLD=$COLD time_cmd "case$i.soap" "$RUNS" "$BIN" inspect "$file" --batch 1 --json
  # The output must be a whole, valid JSON object, or the timing is moot.
  "$BIN" inspect "$file" --batch 1 --json | "$PY" -c 'import json,sys; json.load(sys.stdin)'
  if [[ $peer == 1 ]]; then
    COLD=$COLD time_cmd "case$i.peer" "$PEER_RUNS" "$PY" "$PEER" "$file" --repeat 1
    reps=$PEER_RUNS
    [[ -z $COLD ]] || { evict "$COLD"; reps=1; }
    "$PY" "$PEER" "$file" --repeat "$reps" --json >"$RESULTS/case$i.peer.inproc.json"
  fi
  printf '%s|%s|%s|%s\n' "$i" "$label" "$(stat -c %s "$sizefile")" "$peer" >>"$RESULTS/cases.txt"
done

"$PY" - "$RESULTS" <<'PYEOF'
import json, os, statistics, sys

res = sys.argv[1]

def times(name):
    with open(os.path.join(res, name + ".times")) as f:
        t = [float(x) for x in f if x.strip()]
    return statistics.median(t), min(t), len(t)

def rss(name):
    with open(os.path.join(res, name + ".rss")) as f:
        return max(int(x) for x in f if x.strip()) * 1024

def mb(b):
    return f"{b / 1e6:.1f} MB"

def s(t):
    return f"{t:.3f} s" if t >= 0.1 else f"{t * 1000:.1f} ms"

rows = []
with open(os.path.join(res, "cases.txt")) as f:
    for line in f:
        i, label, size, peer = line.rstrip("\n").split("|")
        size = int(size)
        med, mn, n = times(f"case{i}.soap")
        r = rss(f"case{i}.soap")
        row = {"label": label, "size": size, "med": med, "min": mn, "n": n, "rss": r}
        if peer == "1":
            pmed, pmin, pn = times(f"case{i}.peer")
            with open(os.path.join(res, f"case{i}.peer.inproc.json")) as pf:
                inproc = json.load(pf)
            row.update(pmed=pmed, pmin=pmin, pn=pn, prss=rss(f"case{i}.peer"),
                       pin=inproc["median_s"]["total"], pimport=inproc["import_onnx_s"])
        rows.append(row)

print("| model | file size | onnx2soap median / min | onnx2soap peak RSS | RSS / file size "
      "| onnx Python: process median / min | onnx Python: in-process load+check+infer (median) "
      "| onnx Python peak RSS | speedup (process) | speedup vs in-process |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for r in rows:
    cells = [r["label"], mb(r["size"]), f"{s(r['med'])} / {s(r['min'])}",
             mb(r["rss"]), f"{r['rss'] / r['size']:.2f}×" if r["size"] >= 1e6 else "n/a"]
    if "pmed" in r:
        cells += [f"{r['pmed']:.3f} / {r['pmin']:.3f} s", f"{r['pin']:.3f} s", mb(r["prss"]),
                  f"{r['pmed'] / r['med']:.1f}×", f"{r['pin'] / r['med']:.1f}×"]
    else:
        cells += ["—"] * 5
    print("| " + " | ".join(cells) + " |")
print()
runs = rows[0]["n"]
peer_runs = next((r["pn"] for r in rows if "pn" in r), 0)
imp = next((r["pimport"] for r in rows if "pimport" in r), None)
print(f"onnx2soap: {runs} runs per model after 2 warm-up runs (page cache warm, except the "
      f"cold rows, where the model file is evicted from the page cache before every run; "
      f"the peer's in-process figure there is one cold run); "
      f"peer: {peer_runs} runs. Times are whole processes unless marked in-process; "
      f"peak RSS is the largest of 3 runs (/usr/bin/time %M). "
      + (f"`import onnx` alone takes {imp:.3f} s in the peer process." if imp else ""))
print()
goal_time, goal_rss = 0.25, 1.5
for r in rows:
    if r["label"].startswith("inception_v3 (inline"):
        ok_t = r["med"] < goal_time
        ok_m = r["rss"] < goal_rss * r["size"]
        print(f"Goals on {r['label']}: time {s(r['med'])} median "
              f"{'<' if ok_t else '>='} {goal_time} s: {'met' if ok_t else 'MISSED'}; "
              f"peak RSS {r['rss'] / r['size']:.2f}× file size "
              f"{'<' if ok_m else '>='} {goal_rss}×: {'met' if ok_m else 'MISSED'}.")
PYEOF

# In-process figures (no process start-up, no JSON printing), when the
# Google Benchmark target was built (ONNX2SOAP_BENCH=ON).
if [[ -x $BUILD/bin/import_bench ]]; then
  echo
  echo "In-process importModel / readModelFile (bench/ImportBench.cpp):"
  echo
  echo '```'
  BENCH_MODELS=$MODELS "$BUILD/bin/import_bench" --benchmark_repetitions=5 \
    --benchmark_report_aggregates_only=true 2>/dev/null |
    grep -E '^(Benchmark|-+$|BM_.*_median )' || true
  echo '```'
fi
