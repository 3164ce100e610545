//===- runtime_lib/Backend.cpp - What every backend shares ----------------===//
//
// Out of the backends' own files so that a program linking only the CUDA
// backend (a generated GPU project ships no CPU kernels) has them too.
//
//===----------------------------------------------------------------------===//
#include "Backend.h"

namespace onnx2soap::rt {

Backend::~Backend() = default;

int optimizerStateCount(const OptimizerConfig &Config) {
  switch (Config.Kind) {
  case OptimizerKind::Sgd:
    return Config.Momentum != 0 ? 1 : 0;
  case OptimizerKind::Adam:
  case OptimizerKind::AdamW:
    return 2;
  }
  return 0;
}

} // namespace onnx2soap::rt
