//===- runtime_lib/cuda/NormalizationKernels.cuh - Softmax ---*- CUDA -*-===//
//
// The Normalization family's softmax and reduction kernels (Reduction.cu),
// split from Normalization.cu, which dispatches the family; the CUDA twin
// of runtime_lib/cpu/Reduction.h.
//
//===----------------------------------------------------------------------===//
#ifndef ONNX2SOAP_RUNTIME_CUDA_NORMALIZATIONKERNELS_CUH
#define ONNX2SOAP_RUNTIME_CUDA_NORMALIZATIONKERNELS_CUH

#include "CudaKernels.h"

namespace onnx2soap::rt::cuda {

/// Softmax / LogSoftmax over the `axis` attribute; f32 or f64.
void forwardSoftmax(Context &C, const OpCall &Call);
void backwardSoftmax(Context &C, const OpCall &Call, const Views &OutputGrads,
                     const Views &InputGrads);
/// ReduceMean / ReduceSum over `axes` (`keepdims` only shapes the output);
/// forward f32, f64, i32, i64, backward f32, f64.
void forwardReduce(Context &C, const OpCall &Call);
void backwardReduce(Context &C, const OpCall &Call, const Views &OutputGrads,
                    const Views &InputGrads);
/// ReduceMax / ReduceMin over `axes`: forward f32, f64, i32, i64 (NaN
/// wins); backward f32, f64, each output's gradient shared evenly by the
/// inputs equal to it (none where it is NaN). A thread per output, or a
/// block for long reductions.
void forwardReduceExtreme(Context &C, const OpCall &Call);
void backwardReduceExtreme(Context &C, const OpCall &Call,
                           const Views &OutputGrads, const Views &InputGrads);

/// CumSum along `axis` (`exclusive`, `reverse`): forward f32, f64, i32,
/// i64, backward f32, f64; a thread per lane.
void forwardCumSum(Context &C, const OpCall &Call);
void backwardCumSum(Context &C, const OpCall &Call, const Views &OutputGrads,
                    const Views &InputGrads);

} // namespace onnx2soap::rt::cuda

#endif
