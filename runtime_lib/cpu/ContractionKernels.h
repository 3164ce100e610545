//===- runtime_lib/cpu/ContractionKernels.h - Contraction -*- C++ -*-===//
//
// The per-op-kind entry points of the CPU contraction family (Conv and
// ConvTranspose in Convolution.cpp, Gemm and MatMul in MatMul.cpp, the
// dispatch in Contraction.cpp) and the small oneDNN helpers they share with
// the pooling kernels: plain memory descriptors over dense row-major views,
// and accumulation of a scratch result into a gradient view.
//
//===----------------------------------------------------------------------===//
#ifndef ONNX2SOAP_RUNTIME_CPU_CONTRACTIONKERNELS_H
#define ONNX2SOAP_RUNTIME_CPU_CONTRACTIONKERNELS_H

#include "CpuKernels.h"
#include "Parallel.h"
#include <vector>

namespace onnx2soap::rt::cpu {

void forwardConv(Context &C, const OpCall &Call, bool Transposed);
void backwardConv(Context &C, const OpCall &Call, bool Transposed,
                  const Views &OutputGrads, const Views &InputGrads);
void forwardGemm(Context &C, const OpCall &Call);
void backwardGemm(Context &C, const OpCall &Call, const Views &OutputGrads,
                  const Views &InputGrads);
void forwardMatMul(Context &C, const OpCall &Call);
void backwardMatMul(Context &C, const OpCall &Call, const Views &OutputGrads,
                    const Views &InputGrads);

namespace dnnl_util {

using dnnl::memory;

/// Row-major strides of Dims.
inline memory::dims denseStrides(const memory::dims &Dims) {
  memory::dims Strides(Dims.size(), 1);
  for (size_t I = Dims.size(); I-- > 1;)
    Strides[I - 1] = Strides[I] * Dims[I];
  return Strides;
}

/// An f32 descriptor of a dense row-major tensor of Dims.
inline memory::desc denseDesc(const memory::dims &Dims) {
  return memory::desc(Dims, memory::data_type::f32, denseStrides(Dims));
}

/// Wraps operand memory (oneDNN takes non-const pointers even for inputs).
inline memory wrap(Context &C, const memory::desc &Desc, const void *Data) {
  return memory(Desc, C.Engine, const_cast<void *>(Data));
}

/// Gradient += Scratch, elementwise over Count floats.
inline void addInto(float *Gradient, const float *Scratch, int64_t Count) {
  parallelChunks(Count, 1, [&](int64_t Begin, int64_t End) {
    for (int64_t I = Begin; I < End; ++I)
      Gradient[I] += Scratch[I];
  });
}

/// Fails unless V is a present, dense f32 tensor; What names it.
inline void requireDenseF32(const OpCall &Call, const TensorView &V,
                            const char *What) {
  if (!V.present())
    failOp(Call, std::string(What) + " is missing");
  requireType(Call, V, DType::Float32, What);
  requireContiguous(Call, V, What);
}

} // namespace dnnl_util
} // namespace onnx2soap::rt::cpu

#endif
