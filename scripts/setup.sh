#!/usr/bin/env bash
# Installs the Debian packages onnx2soap needs to build and test, and nothing
# else. Idempotent: when everything is present it prints nothing and exits 0.
#
#   scripts/setup.sh            build + test dependencies
#   scripts/setup.sh --export   also PyTorch, to regenerate samples and fixtures
set -euo pipefail

packages=(
  cmake ninja-build g++ clang-14 libclang-rt-14-dev
  llvm-14-dev
  libprotobuf-dev protobuf-compiler libonnx-dev
  libdnnl-dev ocl-icd-opencl-dev opencl-headers
  libopenmpi-dev openmpi-bin
  libssl-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libonnx-testdata
  python3
)
if [[ "${1:-}" == "--export" ]]; then
  packages+=(python3-torch python3-torchvision python3-onnx)
fi

missing=()
for package in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$package" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$package")
done
[[ ${#missing[@]} -eq 0 ]] && exit 0

echo "setup: installing ${missing[*]}"
sudo=""
[[ $(id -u) -eq 0 ]] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
