//===- runtime_lib/KernelTypes.cpp - Element types the kernels take -------===//
//
// Kept equal to what the kernels do by KernelTypesTest (see the header).
//
//===----------------------------------------------------------------------===//
#include "KernelTypes.h"

namespace onnx2soap::rt {

namespace {

constexpr TypeSet F32 = typeBit(DType::Float32);
constexpr TypeSet Floats = F32 | typeBit(DType::Float64);
constexpr TypeSet Numbers =
    Floats | typeBit(DType::Int32) | typeBit(DType::Int64);
/// Comparisons also take bool and its byte-sized twin u8.
constexpr TypeSet Comparable =
    Numbers | typeBit(DType::UInt8) | typeBit(DType::Bool);
constexpr TypeSet AnyFloat =
    Floats | typeBit(DType::Float16) | typeBit(DType::BFloat16);
/// Kernels that move elements by their size take every type.
constexpr TypeSet Every = (1u << (static_cast<unsigned>(DType::Bool) + 1)) - 1;

KernelTypes typesOf(OpKind Kind) {
  switch (Kind) {
  // Elementwise, f32 and f64 (they compute in floating point).
  case OpKind::LeakyRelu:
  case OpKind::Sigmoid:
  case OpKind::Tanh:
  case OpKind::Erf:
  case OpKind::Gelu:
  case OpKind::Sqrt:
  case OpKind::Exp:
  case OpKind::Log:
  case OpKind::Reciprocal:
  case OpKind::HardSigmoid:
  case OpKind::HardSwish:
  case OpKind::Elu:
  case OpKind::Softplus:
  case OpKind::Sin:
  case OpKind::Cos:
  case OpKind::Floor:
  case OpKind::Ceil:
  case OpKind::Round:
  case OpKind::Dropout:
  // Normalizations, softmaxes, the loss and recurrent layers.
  case OpKind::BatchNorm:
  case OpKind::LayerNorm:
  case OpKind::Softmax:
  case OpKind::LogSoftmax:
  case OpKind::SoftmaxCrossEntropyLoss:
  case OpKind::LSTM:
  case OpKind::GRU:
  case OpKind::LSTMCell:
  case OpKind::GRUCell:
    return {0, Floats, Floats};
  // Exact in integers too.
  case OpKind::Relu:
  case OpKind::Neg:
  case OpKind::Abs:
  case OpKind::Clip:
  case OpKind::Add:
  case OpKind::Sub:
  case OpKind::Mul:
  case OpKind::Div:
  case OpKind::Max:
  case OpKind::Min:
  case OpKind::ReduceMean:
  case OpKind::ReduceSum:
  case OpKind::ReduceMax:
  case OpKind::ReduceMin:
  case OpKind::CumSum:
    return {0, Numbers, Floats};
  case OpKind::Pow: // the exponent's type need not be the base's
    return {0, Numbers, Floats, 1, Numbers};
  case OpKind::Equal:
  case OpKind::Less:
  case OpKind::Greater:
    return {0, Comparable, 0};
  case OpKind::Not:
    return {0, typeBit(DType::Bool), 0};
  // oneDNN's and cuDNN/cuBLAS's f32 paths.
  case OpKind::Conv:
  case OpKind::ConvTranspose:
  case OpKind::Gemm:
  case OpKind::MatMul:
  case OpKind::MaxPool:
  case OpKind::AveragePool:
  case OpKind::GlobalAveragePool:
  case OpKind::GlobalMaxPool:
  case OpKind::Resize:
    return {0, F32, F32};
  // Data movement, by element size.
  case OpKind::Reshape:
  case OpKind::Transpose:
  case OpKind::Concat:
  case OpKind::Split:
  case OpKind::Slice:
  case OpKind::Pad:
  case OpKind::Expand:
  case OpKind::Gather:
  case OpKind::GatherElements:
    return {0, Every, Floats};
  case OpKind::Where:
    return {1, Every, Floats};
  // Any type to any type; the gradient back between floating types.
  case OpKind::Cast:
    return {0, Every, AnyFloat};
  }
  return {};
}

constexpr unsigned NumKinds = 0
#define OP_KIND(Name) +1
#include "OpKinds.def"
    ;

struct Table {
  KernelTypes Kinds[NumKinds];
  Table() {
    for (unsigned K = 0; K < NumKinds; ++K)
      Kinds[K] = typesOf(static_cast<OpKind>(K));
  }
};

} // namespace

const KernelTypes &kernelTypes(OpKind Kind) {
  static const Table T;
  static const KernelTypes None;
  unsigned K = static_cast<unsigned>(Kind);
  return K < NumKinds ? T.Kinds[K] : None;
}

TypeSet optimizerTypes() { return Floats; }

std::string typeSetText(TypeSet Set) {
  std::string Text;
  unsigned Left = 0;
  for (unsigned T = 0; T <= static_cast<unsigned>(DType::Bool); ++T)
    Left += contains(Set, static_cast<DType>(T));
  for (unsigned T = 0; T <= static_cast<unsigned>(DType::Bool); ++T) {
    if (!contains(Set, static_cast<DType>(T)))
      continue;
    if (!Text.empty())
      Text += Left == 1 ? " or " : ", ";
    Text += dtypeName(static_cast<DType>(T));
    --Left;
  }
  return Text.empty() ? "none" : Text;
}

std::string kernelTypesMarkdown() {
  std::string Out;
  Out += "\n## Element types\n\n";
  Out += "What the kernels of both backends take, per IR op "
         "(`runtime_lib/KernelTypes.cpp`, held to the kernels by "
         "`KernelTypesTest`). `run` checks a model's forward against it; "
         "`train`, `simulate`, `search`, `calibrate` and `compile` check the "
         "whole training step: every op's forward, the gradient of every op "
         "a gradient flows through, and the update of every weight (";
  Out += typeSetText(optimizerTypes());
  Out += "). A model that fails the check is refused with the op's name "
         "before anything is planned or written. The type is that of the "
         "op's input 0 (Where: its input 1); indices, labels and conditions "
         "have their own, and Pow's exponent its own types (input 1). Half "
         "precision (f16, bf16) is not supported yet: "
         "export the model in float32.\n\n";
  Out += "| IR op | forward | gradient |\n|---|---|---|\n";
  for (unsigned K = 0; K < NumKinds; ++K) {
    const KernelTypes &Row = kernelTypes(static_cast<OpKind>(K));
    std::string Forward = typeSetText(Row.Forward);
    if (Row.OtherInput >= 0)
      Forward += "; input " + std::to_string(Row.OtherInput) + ": " +
                 typeSetText(Row.Other);
    Out += std::string("| ") + opKindName(static_cast<OpKind>(K)) + " | " +
           Forward + " | " +
           (Row.Backward ? typeSetText(Row.Backward) : "(none)") + " |\n";
  }
  return Out;
}

} // namespace onnx2soap::rt
