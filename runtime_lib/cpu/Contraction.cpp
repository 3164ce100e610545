//===- runtime_lib/cpu/Contraction.cpp - The contraction family -----------===//
//
// Dispatch of the contraction family (Conv, ConvTranspose, Gemm, MatMul) to
// its kernels: Convolution.cpp and MatMul.cpp.
//
//===----------------------------------------------------------------------===//
#include "ContractionKernels.h"

namespace onnx2soap::rt::cpu {

void forwardContraction(Context &C, const OpCall &Call) {
  switch (Call.Kind) {
  case OpKind::Conv:
    return forwardConv(C, Call, /*Transposed=*/false);
  case OpKind::ConvTranspose:
    return forwardConv(C, Call, /*Transposed=*/true);
  case OpKind::Gemm:
    return forwardGemm(C, Call);
  case OpKind::MatMul:
    return forwardMatMul(C, Call);
  default:
    failOp(Call, "is not a contraction op");
  }
}

void backwardContraction(Context &C, const OpCall &Call,
                         const Views &OutputGrads, const Views &InputGrads) {
  switch (Call.Kind) {
  case OpKind::Conv:
    return backwardConv(C, Call, false, OutputGrads, InputGrads);
  case OpKind::ConvTranspose:
    return backwardConv(C, Call, true, OutputGrads, InputGrads);
  case OpKind::Gemm:
    return backwardGemm(C, Call, OutputGrads, InputGrads);
  case OpKind::MatMul:
    return backwardMatMul(C, Call, OutputGrads, InputGrads);
  default:
    failOp(Call, "is not a contraction op");
  }
}

} // namespace onnx2soap::rt::cpu
