#!/usr/bin/env bash
# The demo behind `make demo`: the main job on the bundled models. Today
# that is import, inspection, single-device training on the reference
# executor and planning (simulation and SOAP search); code generation joins
# it with its issue (docs/architecture.md, "Status").
set -euo pipefail
cli=${1:-build/bin/onnx2soap}
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
