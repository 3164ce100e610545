#!/usr/bin/env bash
# Creates the import benchmark's inputs (not committed; ~370 MB in all):
#
#   OUT/inception_v3.onnx            Inception-v3, weights inline (~95 MB)
#   OUT/resnet101.onnx               ResNet-101, weights inline (~179 MB)
#   OUT/external/inception_v3.onnx   Inception-v3, weights as external data
#   OUT/external/inception_v3.onnx.data
#
# The models come from samples/export_samples.py (Debian's PyTorch, only
# visible to /usr/bin/python3), exported with their external data kept, then
# rewritten with the weights inline by bench/inline_weights.py.
#
# Usage: bench/make_models.sh [OUT]   (default: build/bench-models)
# Files already present are kept; delete OUT to start over.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${1:-$ROOT/build/bench-models}
PY=/usr/bin/python3
MODELS=(inception_v3 resnet101)

mkdir -p "$OUT/external"
OUT=$(cd "$OUT" && pwd)

missing=()
for m in "${MODELS[@]}"; do
  [[ -s "$OUT/$m.onnx" ]] || missing+=("$m")
done
[[ -s "$OUT/external/inception_v3.onnx.data" ]] || missing+=(inception_v3)
if [[ ${#missing[@]} -eq 0 ]]; then
  echo "bench models up to date in $OUT"
  exit 0
fi
# Unique names, in MODELS order.
todo=()
for m in "${MODELS[@]}"; do
  [[ " ${missing[*]} " == *" $m "* ]] && todo+=("$m")
done

if ! "$PY" -c 'import torch, torchvision, onnx' 2>/dev/null; then
  echo "error: $PY cannot import torch, torchvision and onnx (Debian packages" \
       "python3-torch python3-torchvision python3-onnx)" >&2
  exit 1
fi

STAGE=$(mktemp -d "$OUT/stage.XXXXXX")
trap 'rm -rf "$STAGE"' EXIT

echo "exporting ${todo[*]} with weights (takes a minute or two)..."
"$PY" "$ROOT/samples/export_samples.py" --out "$STAGE" --only "${todo[@]}" \
  --with-weights "${todo[@]}" >"$STAGE/export.log" 2>&1 || {
  cat "$STAGE/export.log" >&2
  exit 1
}

for m in "${todo[@]}"; do
  echo "inlining weights: $m"
  "$PY" "$ROOT/bench/inline_weights.py" "$STAGE/$m.onnx" "$STAGE/$m.inline.onnx"
  mv "$STAGE/$m.inline.onnx" "$OUT/$m.onnx"
  if [[ $m == inception_v3 ]]; then
    # The external-data location recorded in the graph is "inception_v3.onnx.data".
    mv "$STAGE/$m.onnx.data" "$OUT/external/$m.onnx.data"
    mv "$STAGE/$m.onnx" "$OUT/external/$m.onnx"
  fi
done
rm -rf "$STAGE"
ls -l "$OUT" "$OUT/external"
