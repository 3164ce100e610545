//===- runtime_lib/cuda/Elementwise.cuh - Elementwise helpers --*- CUDA -*-===//
//
// What the CUDA elementwise family's files share: the entry points of Cast
// (Cast.cu) and of the broadcasting ops (Broadcast.cu), which Elementwise.cu
// dispatches to, as runtime_lib/cpu/Elementwise.h does for the CPU.
//
//===----------------------------------------------------------------------===//
#ifndef ONNX2SOAP_RUNTIME_CUDA_ELEMENTWISE_CUH
#define ONNX2SOAP_RUNTIME_CUDA_ELEMENTWISE_CUH

#include "CudaKernels.h"

namespace onnx2soap::rt::cuda {

void forwardCast(Context &C, const OpCall &Call);
void backwardCast(Context &C, const OpCall &Call, const Views &OutputGrads,
                  const Views &InputGrads);
/// Add, Sub, Mul, Div, Pow, Max, Min, Equal, Less, Greater, Where.
void forwardBroadcast(Context &C, const OpCall &Call);
void backwardBroadcast(Context &C, const OpCall &Call, const Views &OutputGrads,
                       const Views &InputGrads);

} // namespace onnx2soap::rt::cuda

#endif
