//===- runtime_lib/cpu/Reduction.h - Softmax, reductions --------*- C++ -*-===//
//
// The Normalization family's softmax and reduction kernels, split from
// Normalization.cpp (which dispatches the family) to keep files small.
//
//===----------------------------------------------------------------------===//
#ifndef ONNX2SOAP_RUNTIME_CPU_REDUCTION_H
#define ONNX2SOAP_RUNTIME_CPU_REDUCTION_H

#include "CpuKernels.h"

namespace onnx2soap::rt::cpu {

/// Softmax / LogSoftmax over the `axis` attribute; f32 or f64.
void forwardSoftmax(const OpCall &Call);
void backwardSoftmax(const OpCall &Call, const Views &OutputGrads,
                     const Views &InputGrads);
/// ReduceMean / ReduceSum over `axes` (`keepdims` only shapes the output);
/// forward f32, f64, i32, i64, backward f32, f64.
void forwardReduce(const OpCall &Call);
void backwardReduce(const OpCall &Call, const Views &OutputGrads,
                    const Views &InputGrads);
/// ReduceMax / ReduceMin over `axes`: forward f32, f64, i32, i64 (NaN
/// wins, as in ONNX's reference and PyTorch's amax); backward f32, f64,
/// each output's gradient shared evenly by the inputs equal to it (PyTorch's
/// amax / amin), none where the extreme is NaN (where PyTorch's is NaN).
void forwardReduceExtreme(const OpCall &Call);
void backwardReduceExtreme(const OpCall &Call, const Views &OutputGrads,
                           const Views &InputGrads);

/// CumSum along `axis`, `exclusive` and `reverse` as ONNX: forward f32,
/// f64, i32, i64 (sums in double, integers in int64, stored back in the
/// type); backward f32, f64, the gradient's cumulative sum the other way.
void forwardCumSum(const OpCall &Call);
void backwardCumSum(const OpCall &Call, const Views &OutputGrads,
                    const Views &InputGrads);

} // namespace onnx2soap::rt::cpu

#endif
