#!/usr/bin/env bash
# Builds, on a machine without a GPU, everything tests/gpu/run_bundle.sh runs
# on a machine with one: the CUDA-vs-CPU kernel tests and, for every training
# fixture and optimizer, the generated 1-GPU training program.
#
# Usage: tests/gpu/make_bundle.sh BUILD_DIR OUT.tar.xz [CLUSTER]
#
# BUILD_DIR is an onnx2soap build configured with -DONNX2SOAP_CUDA=ON and
# -DONNX2SOAP_CUDA_ARCHITECTURES set for the target GPU (90 for H100). CLUSTER
# (default dgx-h100) is the preset the programs are compiled for, cut to one
# GPU (--gpus 1); ONNX2SOAP names the compiler binary when BUILD has none
# (only the runtime targets matter for the architecture). The archive holds:
#   bin/runtime_lib_cuda_tests        the kernel comparison tests
#   projects/<fixture>_<optimizer>/   bin/train, weights/, plan hash
#   bench/                            ResNet-18 and Transformer programs for
#                                     the step-time benchmark (--bench)
#   lib/                              the shared libraries the binaries need
#                                     that a CUDA machine may lack (oneDNN,
#                                     OpenMPI and its plugins); cuDNN, cuBLAS
#                                     and NCCL are the GPU machine's own
# xz's large dictionary keeps the near-identical programs cheap to carry.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$(cd "$1" && pwd)
OUT=$2
CLUSTER=${3:-dgx-h100}
BIN=${ONNX2SOAP:-$BUILD/bin/onnx2soap}
EXPORT=$BUILD/onnx2soap-runtime-targets.cmake
STAGE=$(mktemp -d)
trap 'rm -rf "$STAGE"' EXIT
export LC_ALL=C

[[ -n ${ONNX2SOAP:-} ]] || ninja -C "$BUILD" onnx2soap >&2
ninja -C "$BUILD" runtime_lib_cuda_tests onnx2soap_runtime_nccl \
  onnx2soap_runtime_cuda onnx2soap_runtime_program onnx2soap_runtime_lib >&2
mkdir -p "$STAGE/bin" "$STAGE/lib" "$STAGE/projects" "$STAGE/bench"
cp "$BUILD/bin/runtime_lib_cuda_tests" "$STAGE/bin/"

batch_of() { # fixture
  python3 -c 'import json,sys
for f in json.load(open(sys.argv[1]))["fixtures"]:
    if f["name"] == sys.argv[2]: print(f["inputs"][0]["shape"][0])' \
    "$ROOT/tests/fixtures/manifest.json" "$1"
}

optimizer_flags() { # fixture optimizer (a losses.json key)
  python3 -c 'import json,sys
r = json.load(open(sys.argv[1]))[sys.argv[2]]
name = {"SGD": "sgd", "Adam": "adam", "AdamW": "adamw"}[r["optimizer"]]
flags = ["--optimizer", name, "--lr", repr(r["lr"])]
if r.get("momentum"): flags += ["--momentum", repr(r["momentum"])]
flags += ["--weight-decay", repr(r.get("weight_decay", 0.0))]
print(" ".join(flags))' "$ROOT/tests/fixtures/$1/losses.json" "$2"
}

# compile_build NAME DEST MODEL BATCH FLAGS...: a 1-GPU project built against
# BUILD's runtime; DEST gets bin/train and weights/.
compile_build() {
  local name=$1 dest=$2 model=$3 batch=$4
  shift 4
  local work=$STAGE/work/$name
  "$BIN" compile "$model" --batch "$batch" --cluster "$CLUSTER" --gpus 1 \
    --strategy data-parallel "$@" -o "$work" >&2
  cmake -S "$work" -B "$work/build" -G Ninja \
    -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc \
    -DONNX2SOAP_RUNTIME_EXPORT="$EXPORT" >/dev/null
  ninja -C "$work/build" >&2
  mkdir -p "$dest/bin"
  cp "$work/build/train" "$dest/bin/"
  cp -r "$work/weights" "$dest/"
  python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["plan_hash"])' \
    "$work/manifest.json" >"$dest/plan_hash" 2>/dev/null || true
  rm -rf "$work"
}

for fixture in mlp cnn_bn resnet18 lstm_lm gru transformer seq2seq inception_mini; do
  for opt in sgd sgd_momentum adam adamw; do
    # shellcheck disable=SC2046
    compile_build "${fixture}_$opt" "$STAGE/projects/${fixture}_$opt" \
      "$ROOT/tests/fixtures/$fixture/model.onnx" "$(batch_of "$fixture")" \
      $(optimizer_flags "$fixture" "$opt")
  done
done

# The benchmark's ResNet-18 program: 224x224, batch 16, from random weights
# (the PyTorch peer starts from its own: step times are compared, not
# losses); its weights/shards.bin is 45 MB of incompressible floats. The
# Transformer benchmark runs projects/transformer_sgd.
RESNET=${BENCH_MODELS:-$ROOT/build/bench-models}/resnet18_train/model.onnx
if [[ -s $RESNET ]]; then
  compile_build resnet18_224 "$STAGE/bench/resnet18_224" "$RESNET" 16 \
    --optimizer sgd --lr 0.01 --init random
else
  echo "note: $RESNET missing (bench/train_models.py): no ResNet-18 benchmark program" >&2
fi

for f in "$STAGE"/bin/* "$STAGE"/projects/*/bin/train "$STAGE"/bench/*/bin/train; do
  [[ -e $f ]] && strip --strip-debug "$f"
done

# Shared libraries: everything ldd resolves outside glibc and the GPU
# libraries the target machine brings (driver, cuDNN, cuBLAS, NCCL).
KEEP_OUT='^(libc|libm|libdl|libpthread|librt|libgcc_s|libstdc\+\+|ld-linux.*|libcuda|libcudnn.*|libcublas.*|libnccl|libnvidia.*)\.so'
copy_deps() { # file...
  ldd "$@" 2>/dev/null | awk '/=> \//{print $1, $3}' | sort -u |
    while read -r soname path; do
      [[ $soname =~ $KEEP_OUT ]] && continue
      [[ -e $STAGE/lib/$soname ]] || cp -L "$path" "$STAGE/lib/$soname"
    done
}
copy_deps "$STAGE"/bin/* "$STAGE"/projects/*/bin/train
MCA=/usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3
if [[ -d $MCA ]]; then
  mkdir -p "$STAGE/lib/openmpi3"
  cp -L "$MCA"/*.so "$STAGE/lib/openmpi3/"
  copy_deps "$STAGE"/lib/openmpi3/*.so
fi

tar -C "$STAGE" --sort=name --owner=0 --group=0 -cf - bin lib projects bench |
  xz -9e -T1 >"$OUT"
echo "wrote $OUT ($(du -h "$OUT" | cut -f1))" >&2
