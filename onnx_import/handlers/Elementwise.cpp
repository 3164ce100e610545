//===- onnx_import/handlers/Elementwise.cpp - Elementwise ONNX ops --------===//
//
// Unary and broadcasting ops map one to one onto IR kinds; Identity and
// no-op Casts disappear; Dropout keeps its training flag and ratio; Clip's
// bounds, known at import time, become attributes.
//
//===----------------------------------------------------------------------===//
#include "onnx_import/handlers/Handlers.h"
#include <cmath>

namespace onnx2soap::onnx_import::handlers {

using ir::OpKind;

/// Inputs 0..N-1 of the node, all required.
static llvm::SmallVector<int, 4> allInputs(const NodeContext &C) {
  llvm::SmallVector<int, 4> In;
  for (unsigned I = 0; I < C.numInputs(); ++I)
    In.push_back(static_cast<int>(I));
  return In;
}

llvm::Error unary(NodeContext &C, OpKind Kind) {
  ir::Attributes Attrs;
  switch (Kind) {
  case OpKind::LeakyRelu:
  case OpKind::Elu: {
    if (auto E = C.checkAttributes({"alpha"}))
      return E;
    auto Alpha = C.getFloat("alpha", Kind == OpKind::Elu ? 1.0 : 0.01);
    if (!Alpha)
      return Alpha.takeError();
    Attrs.set("alpha", *Alpha);
    break;
  }
  case OpKind::HardSigmoid: {
    if (auto E = C.checkAttributes({"alpha", "beta"}))
      return E;
    auto Alpha = C.getFloat("alpha", 0.2);
    if (!Alpha)
      return Alpha.takeError();
    auto Beta = C.getFloat("beta", 0.5);
    if (!Beta)
      return Beta.takeError();
    Attrs.set("alpha", *Alpha);
    Attrs.set("beta", *Beta);
    break;
  }
  case OpKind::Gelu: {
    if (auto E = C.checkAttributes({"approximate"}))
      return E;
    auto Approximate = C.getString("approximate", "none");
    if (!Approximate)
      return Approximate.takeError();
    if (*Approximate != "none" && *Approximate != "tanh")
      return C.error("approximate '{0}' is not 'none' or 'tanh'", *Approximate);
    Attrs.set("approximate", *Approximate);
    break;
  }
  default:
    if (auto E = C.checkAttributes({}))
      return E;
  }
  return C.emitOrFold(Kind, {0}, std::move(Attrs));
}

/// Clip's bounds become attributes `min` / `max`: int64 for integer
/// inputs, double for floating-point ones, absent where unbounded.
llvm::Error clip(NodeContext &C) {
  if (auto E = C.checkAttributes({}))
    return E;
  ir::DType Type = C.inputType(0).Type;
  ir::Attributes Attrs;
  for (unsigned I : {1u, 2u}) {
    if (!C.hasInput(I))
      continue;
    const char *What = I == 1 ? "min" : "max";
    auto Bound = C.requireConstant(I, What);
    if (!Bound)
      return Bound.takeError();
    if ((*Bound)->numElements() != 1)
      return C.error("{0} must be a scalar, it has {1} elements", What,
                     (*Bound)->numElements());
    if ((*Bound)->Type != Type)
      return C.error("{0} is {1}, the input {2}", What,
                     ir::dtypeName((*Bound)->Type), ir::dtypeName(Type));
    if (!ir::isFloatingPoint(Type)) {
      Attrs.set(What, (*Bound)->intAt(0));
      continue;
    }
    double Value = (*Bound)->floatAt(0);
    if (std::isnan(Value))
      return C.error("{0} is NaN", What);
    bool Unbounded = I == 1 ? Value == -INFINITY : Value == INFINITY;
    if (std::isinf(Value) && !Unbounded)
      return C.error("{0} of {1}infinity is not supported", What,
                     Value < 0 ? "-" : "+");
    if (!Unbounded)
      Attrs.set(What, Value);
  }
  return C.emitOrFold(OpKind::Clip, {0}, std::move(Attrs));
}

llvm::Error nary(NodeContext &C, OpKind Kind) {
  if (auto E = C.checkAttributes({}))
    return E;
  for (unsigned I = 0; I < C.numInputs(); ++I)
    if (!C.hasInput(I))
      return C.error("input {0} is empty", I);
  if ((Kind == OpKind::Max || Kind == OpKind::Min) && C.numInputs() == 1)
    return identity(C);
  return C.emitOrFold(Kind, allInputs(C), {});
}

llvm::Error identity(NodeContext &C) {
  if (auto E = C.checkAttributes({}))
    return E;
  C.aliasOutput(0, 0);
  return llvm::Error::success();
}

llvm::Error cast(NodeContext &C) {
  if (auto E = C.checkAttributes({"to", "saturate"}))
    return E;
  auto To = C.getInt("to", 0);
  if (!To)
    return To.takeError();
  std::optional<ir::DType> Type = dtypeFromOnnx(static_cast<int32_t>(*To));
  if (!Type)
    return C.error("casting to {0} is not supported",
                   onnxTypeName(static_cast<int32_t>(*To)));
  if (*Type == C.inputType(0).Type && !C.constant(0)) {
    C.aliasOutput(0, 0);
    return llvm::Error::success();
  }
  ir::Attributes Attrs;
  Attrs.set("to", ir::dtypeName(*Type).str());
  return C.emitOrFold(OpKind::Cast, {0}, std::move(Attrs));
}

llvm::Error dropout(NodeContext &C) {
  if (auto E = C.checkAttributes({"seed"}))
    return E;
  auto Seed = C.getInt("seed", 0);
  if (!Seed)
    return Seed.takeError();
  double Ratio = 0.5;
  if (C.hasInput(1)) {
    auto R = C.requireConstant(1, "ratio");
    if (!R)
      return R.takeError();
    if ((*R)->numElements() != 1)
      return C.error("ratio must be a scalar");
    if (!(*R)->isFloat())
      return C.error("ratio must be floating point, it is {0}",
                     ir::dtypeName((*R)->Type));
    Ratio = (*R)->floatAt(0);
  }
  bool Training = false;
  if (C.hasInput(2)) {
    auto T = C.requireConstant(2, "training_mode");
    if (!T)
      return T.takeError();
    if ((*T)->numElements() != 1)
      return C.error("training_mode must be a scalar");
    if ((*T)->Type != ir::DType::Bool)
      return C.error("training_mode must be bool, it is {0}",
                     ir::dtypeName((*T)->Type));
    Training = (*T)->intAt(0) != 0;
  }
  // In inference mode Dropout is the identity; only a requested mask keeps
  // it in the graph.
  if (!Training && !C.hasOutput(1)) {
    C.aliasOutput(0, 0);
    return llvm::Error::success();
  }
  ir::Attributes Attrs;
  Attrs.set("ratio", Ratio);
  Attrs.set("training", static_cast<int64_t>(Training));
  Attrs.set("seed", *Seed);
  auto X = C.tensor(0);
  if (!X)
    return X.takeError();
  return C.emit(OpKind::Dropout, {*X}, std::move(Attrs)).takeError();
}

} // namespace onnx2soap::onnx_import::handlers
