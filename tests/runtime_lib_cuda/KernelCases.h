//===- tests/runtime_lib_cuda/KernelCases.h - Kernel cases ------*- C++ -*-===//
//
// The cases CudaVsCpuTest.cpp runs on both backends: each op kind's forward
// and backward on small random operands, grouped by family. The groups draw
// from one generator in turn, in the order of the one table they were cut
// from, so each case keeps the operands it had there.
//
//===----------------------------------------------------------------------===//
#ifndef ONNX2SOAP_TESTS_RUNTIME_LIB_CUDA_KERNELCASES_H
#define ONNX2SOAP_TESTS_RUNTIME_LIB_CUDA_KERNELCASES_H

#include "../runtime_lib/KernelTestUtil.h"
#include <random>
#include <vector>

namespace onnx2soap::rt::test {

using Ints = std::vector<int64_t>;

/// One op on small operands, the same on both backends.
struct Case {
  const char *Name;
  OpKind Kind;
  OpAttrs Attrs;
  std::vector<HostTensor> Inputs;   // absent optional operands: Rank -1 views
  std::vector<HostTensor> Outputs;  // shapes and types
  std::vector<unsigned> GradInputs; // inputs whose gradients are compared
  /// OpCall::GlobalOffset, GlobalDims: empty unless the call is a partition.
  std::vector<int64_t> GlobalOffset = {}, GlobalDims = {};
};

/// f32 tensors of uniformly random elements in [Low, High), drawn from Rng.
struct RandomF32 {
  std::mt19937 &Rng;
  HostTensor operator()(std::vector<int64_t> Dims, double Low = -1,
                        double High = 1) const {
    HostTensor T = f32(std::move(Dims));
    randomize(T, Rng, Low, High);
    return T;
  }
};

/// Convolutions, Gemm and MatMul, pooling.
void contractionCases(std::mt19937 &Rng, std::vector<Case> &All);
/// Elementwise kinds and the loss.
void elementwiseCases(std::mt19937 &Rng, std::vector<Case> &All);
/// Movement: slices, pads, gathers.
void movementCases(std::mt19937 &Rng, std::vector<Case> &All);
/// Normalization and reductions.
void normalizationCases(std::mt19937 &Rng, std::vector<Case> &All);
/// Recurrent layers and cells.
void recurrentCases(std::mt19937 &Rng, std::vector<Case> &All);
/// Cumulative sums.
void scanCases(std::mt19937 &Rng, std::vector<Case> &All);

/// Every case, the groups above in turn.
std::vector<Case> cases();

} // namespace onnx2soap::rt::test

#endif
