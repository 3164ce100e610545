#!/usr/bin/env bash
# The demo behind `make demo`: the main job on the bundled models. Import,
# inspection, single-device training on the reference executor, planning
# (simulation and SOAP search), then the whole pipeline: a strategy searched
# for two CPU ranks, the generated training project compiled against this
# build's runtime and run with mpirun next to PyTorch's losses.
#
#   scripts/demo.sh [CLI [BUILD]]   defaults: build/bin/onnx2soap, CLI's ../..
set -euo pipefail
cli=$(realpath "${1:-build/bin/onnx2soap}")
build=$(realpath "${2:-$(dirname "$cli")/..}")
cd "$(dirname "$0")/.."

echo "== onnx2soap inspect samples/tiny_cnn.onnx --batch 32"
"$cli" inspect samples/tiny_cnn.onnx --batch 32
echo
echo "== the paper's DNNs and two Transformers (graph-only files, batch 64)"
printf '%-14s %8s %14s %12s  %s\n' model ops parameters GFLOP/fwd "op kinds"
for model in alexnet inception_v3 resnet101 rnntc rnnlm nmt bert_encoder gpt_decoder; do
  "$cli" inspect "samples/$model.onnx" --batch 64 --json |
    python3 -c '
import json, sys
d = json.load(sys.stdin)
kinds = ", ".join(f"{k}:{v}" for k, v in sorted(d["op_kinds"].items()))
print(f"%-14s %8d %14d %12.1f  %s" % (sys.argv[1], d["ops"], d["parameters"],
      d["flops_forward"] / 1e9, kinds[:70] + ("..." if len(kinds) > 70 else "")))
' "$model"
done
echo
echo "== RNNLM unrolled into per-step LSTM cells (--unroll-rnn), as FlexFlow plans it"
"$cli" inspect samples/rnnlm.onnx --batch 64 --unroll-rnn --json |
  python3 -c 'import json,sys; d=json.load(sys.stdin); print("ops:", d["ops"], " kinds:", d["op_kinds"])'
echo
echo "== 5 SGD steps of a small CNN with BatchNorm on the CPU reference executor"
echo "   (PyTorch's losses for the same weights and batch: tests/fixtures/cnn_bn/losses.json)"
fixture=tests/fixtures/cnn_bn
"$cli" train "$fixture/model.onnx" --inputs "$fixture/input_0.pb" \
  --labels "$fixture/labels.pb" --steps 5 --optimizer sgd --lr 0.1
python3 -c 'import json; print("PyTorch:", " ".join("%.9g" % l for l in json.load(open("tests/fixtures/cnn_bn/losses.json"))["sgd"]["losses"]))'
echo
echo "== clusters the planner knows (onnx2soap clusters)"
"$cli" clusters
echo
echo "== AlexNet (batch 256) on 16 P100s: built-in strategies, simulated"
for strategy in data-parallel expert model-parallel; do
  "$cli" simulate samples/alexnet.onnx --batch 256 --cluster paper-p100 \
    --strategy $strategy --json |
    python3 -c 'import json,sys; d=json.load(sys.stdin); print("%-15s %8.2f ms/iteration %8.2f GiB moved  fits: %s" % (sys.argv[1], d["time"]*1e3, d["bytes_transferred"]/2**30, d["fits"]))' $strategy
done
echo
echo "== SOAP search for it (1,000 MCMC steps per chain, seed 1), strategy in build/demo/"
mkdir -p build/demo
"$cli" search samples/alexnet.onnx --batch 256 --cluster paper-p100 \
  --iterations 1000 --seed 1 -o build/demo/alexnet-p100.json
echo
echo "== the pipeline on two CPU ranks: search, compile, build, train"
echo "   (SOAP search for tiny_cnn.onnx, batch 8, 200 MCMC steps per chain, seed 1)"
"$cli" search samples/tiny_cnn.onnx --batch 8 --cluster cpu:2 --iterations 200 --seed 1
echo
echo "== onnx2soap compile: the CNN fixture, a strategy searched the same way, SGD lr 0.1"
project=build/demo/cnn_bn-cpu2
"$cli" compile "$fixture/model.onnx" --batch 8 --cluster cpu:2 \
  --iterations 200 --seed 1 --optimizer sgd --lr 0.1 -o "$project"
echo
echo "== building it against this build's runtime (only src/plan.cpp and src/main.cpp compile)"
# The project links the runtime targets of this build tree; make sure they
# are current (a no-op after `make build`).
cmake --build "$build" --target onnx2soap_runtime_program onnx2soap_runtime_lib >/dev/null
cmake -S "$project" -B "$project/build" -G Ninja \
  -DONNX2SOAP_RUNTIME_EXPORT="$build/onnx2soap-runtime-targets.cmake" >/dev/null
cmake --build "$project/build" -- -j2 >/dev/null
echo "built $project/build/train"
echo
echo "== mpirun -np 2 $project/build/train --steps 5 (PyTorch's losses beside the program's)"
if [[ $(id -u) -eq 0 ]]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
mpirun --oversubscribe -np 2 "$project/build/train" --inputs "$fixture/input_0.pb" \
  --labels "$fixture/labels.pb" --steps 5 --threads 1 |
  python3 -c '
import json, sys
expected = json.load(open(sys.argv[1]))["sgd"]["losses"]
print("%-5s %14s %14s %10s" % ("step", "program", "PyTorch", "rel. diff"))
for line in sys.stdin:
    words = line.split()
    if len(words) >= 4 and words[0] == "step" and words[2] == "loss":
        step, loss = int(words[1]), float(words[3])
        torch = expected[step - 1]
        print("%-5d %14.9g %14.9g %10.1e" % (step, loss, torch, abs(loss - torch) / abs(torch)))
    else:
        print(line, end="")
' "$fixture/losses.json"
