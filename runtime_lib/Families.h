//===- runtime_lib/Families.h - Op kinds by kernel family -------*- C++ -*-===//
//
// Both backends organize their kernels by the families of ir/OpKinds.def;
// this is the one mapping from op kind to family.
//
//===----------------------------------------------------------------------===//
#ifndef ONNX2SOAP_RUNTIME_FAMILIES_H
#define ONNX2SOAP_RUNTIME_FAMILIES_H

#include "Types.h"

namespace onnx2soap::rt {

enum class OpFamily {
  Elementwise,
  Contraction,
  Pool,
  Normalization,
  Movement,
  Recurrent,
  Loss
};

/// No default case: a new op kind fails to compile here until it has a
/// family (and so kernels on every backend).
inline OpFamily opFamily(OpKind Kind) {
  switch (Kind) {
  case OpKind::Relu:
  case OpKind::LeakyRelu:
  case OpKind::Sigmoid:
  case OpKind::Tanh:
  case OpKind::Erf:
  case OpKind::Gelu:
  case OpKind::Sqrt:
  case OpKind::Exp:
  case OpKind::Log:
  case OpKind::Neg:
  case OpKind::Abs:
  case OpKind::Reciprocal:
  case OpKind::Clip:
  case OpKind::HardSigmoid:
  case OpKind::HardSwish:
  case OpKind::Elu:
  case OpKind::Softplus:
  case OpKind::Not:
  case OpKind::Cast:
  case OpKind::Dropout:
  case OpKind::Add:
  case OpKind::Sub:
  case OpKind::Mul:
  case OpKind::Div:
  case OpKind::Pow:
  case OpKind::Max:
  case OpKind::Min:
  case OpKind::Equal:
  case OpKind::Less:
  case OpKind::Greater:
  case OpKind::Where:
  case OpKind::Sin:
  case OpKind::Cos:
  case OpKind::Floor:
  case OpKind::Ceil:
  case OpKind::Round:
    return OpFamily::Elementwise;
  case OpKind::Conv:
  case OpKind::ConvTranspose:
  case OpKind::Gemm:
  case OpKind::MatMul:
    return OpFamily::Contraction;
  case OpKind::MaxPool:
  case OpKind::AveragePool:
  case OpKind::GlobalAveragePool:
  case OpKind::GlobalMaxPool:
  case OpKind::Resize:
    return OpFamily::Pool;
  case OpKind::BatchNorm:
  case OpKind::LayerNorm:
  case OpKind::Softmax:
  case OpKind::LogSoftmax:
  case OpKind::ReduceMean:
  case OpKind::ReduceSum:
  case OpKind::ReduceMax:
  case OpKind::ReduceMin:
  case OpKind::CumSum:
    return OpFamily::Normalization;
  case OpKind::Reshape:
  case OpKind::Transpose:
  case OpKind::Concat:
  case OpKind::Split:
  case OpKind::Slice:
  case OpKind::Pad:
  case OpKind::Expand:
  case OpKind::Gather:
  case OpKind::GatherElements:
    return OpFamily::Movement;
  case OpKind::LSTM:
  case OpKind::GRU:
  case OpKind::LSTMCell:
  case OpKind::GRUCell:
    return OpFamily::Recurrent;
  case OpKind::SoftmaxCrossEntropyLoss:
    return OpFamily::Loss;
  }
  return OpFamily::Elementwise;
}

} // namespace onnx2soap::rt

#endif
