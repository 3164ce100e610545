//===- onnx_import/handlers/Normalization.cpp - Norms, softmax, reductions ===//
//
// Normalizes axes to non-negative form and checks the options the IR does
// not represent (BatchNormalization-9's extra training outputs, non-float
// stash types).
//
//===----------------------------------------------------------------------===//
#include "onnx_import/handlers/Handlers.h"
#include <algorithm>

namespace onnx2soap::onnx_import::handlers {

using ir::OpKind;

llvm::Error batchNormalization(NodeContext &C) {
  if (auto E = C.checkAttributes({"epsilon", "momentum", "training_mode"}))
    return E;
  auto Epsilon = C.getFloat("epsilon", 1e-5);
  auto Momentum = C.getFloat("momentum", 0.9);
  auto Training = C.getInt("training_mode", 0);
  if (!Epsilon)
    return Epsilon.takeError();
  if (!Momentum)
    return Momentum.takeError();
  if (!Training)
    return Training.takeError();
  bool ExtraOutputs =
      C.hasOutput(1) || C.hasOutput(2) || C.hasOutput(3) || C.hasOutput(4);
  if (C.opset() < 14 && ExtraOutputs)
    return C.error("the training outputs of BatchNormalization-9 are not "
                   "supported; export with opset 14 or later "
                   "(training_mode=1)");
  if (!*Training && ExtraOutputs)
    return C.error("running statistics outputs need training_mode=1");
  ir::Attributes Attrs;
  Attrs.set("epsilon", *Epsilon);
  Attrs.set("momentum", *Momentum);
  Attrs.set("training", *Training ? int64_t(1) : int64_t(0));
  return C.emitOrFold(OpKind::BatchNorm, {0, 1, 2, 3, 4}, std::move(Attrs));
}

llvm::Error layerNormalization(NodeContext &C) {
  if (auto E = C.checkAttributes({"axis", "epsilon", "stash_type"}))
    return E;
  auto Axis = C.getInt("axis", -1);
  auto Epsilon = C.getFloat("epsilon", 1e-5);
  auto Stash = C.getInt("stash_type", 1);
  if (!Axis)
    return Axis.takeError();
  if (!Epsilon)
    return Epsilon.takeError();
  if (!Stash)
    return Stash.takeError();
  if (*Stash != onnx::TensorProto::FLOAT)
    return C.error("stash_type {0} is not supported (only FLOAT)", *Stash);
  auto Normalized = ir::normalizeAxis(*Axis, C.inputType(0).rank());
  if (!Normalized)
    return C.error("axis {0} is out of range for input {1}", *Axis,
                   ir::formatShape(C.inputType(0).Dims));
  ir::Attributes Attrs;
  Attrs.set("axis", static_cast<int64_t>(*Normalized));
  Attrs.set("epsilon", *Epsilon);
  return C.emitOrFold(OpKind::LayerNorm, {0, 1, C.hasInput(2) ? 2 : -1},
                      std::move(Attrs));
}

llvm::Error softmax(NodeContext &C, OpKind Kind) {
  if (auto E = C.checkAttributes({"axis"}))
    return E;
  auto Axis = C.getInt("axis", -1);
  if (!Axis)
    return Axis.takeError();
  auto Normalized = ir::normalizeAxis(*Axis, C.inputType(0).rank());
  if (!Normalized)
    return C.error("axis {0} is out of range for input {1}", *Axis,
                   ir::formatShape(C.inputType(0).Dims));
  ir::Attributes Attrs;
  Attrs.set("axis", static_cast<int64_t>(*Normalized));
  return C.emitOrFold(Kind, {0}, std::move(Attrs));
}

llvm::Error reduce(NodeContext &C, OpKind Kind) {
  if (auto E = C.checkAttributes({"axes", "keepdims", "noop_with_empty_axes"}))
    return E;
  auto Keep = C.getInt("keepdims", 1);
  auto Noop = C.getInt("noop_with_empty_axes", 0);
  auto AxesAttr = C.getInts("axes");
  if (!Keep)
    return Keep.takeError();
  if (!Noop)
    return Noop.takeError();
  if (!AxesAttr)
    return AxesAttr.takeError();
  // ReduceSum takes its axes as an input from opset 13, ReduceMean from 18.
  int64_t AxesBecameInput = Kind == OpKind::ReduceSum ? 13 : 18;
  if (*AxesAttr && C.opset() >= AxesBecameInput)
    return C.error("the 'axes' attribute was replaced by an input in opset "
                   "{0}; this model uses opset {1}",
                   AxesBecameInput, C.opset());
  if (!*AxesAttr && C.hasInput(1) && C.opset() < AxesBecameInput)
    return C.error("axes are an attribute before opset {0}, not an input",
                   AxesBecameInput);
  if (C.attr("noop_with_empty_axes") && C.opset() < AxesBecameInput)
    return C.error("noop_with_empty_axes exists from opset {0} on; this model "
                   "uses opset {1}",
                   AxesBecameInput, C.opset());
  ir::IntList Axes;
  if (*AxesAttr) {
    Axes = **AxesAttr;
  } else if (C.hasInput(1)) {
    auto Value = intsOf(C, 1, "axes");
    if (!Value)
      return Value.takeError();
    Axes = std::move(*Value);
  }
  unsigned Rank = C.inputType(0).rank();
  if (Rank == 0) {
    C.aliasOutput(0, 0);
    return llvm::Error::success();
  }
  if (Axes.empty()) {
    if (*Noop) {
      C.aliasOutput(0, 0);
      return llvm::Error::success();
    }
    for (unsigned I = 0; I < Rank; ++I)
      Axes.push_back(I);
  }
  for (int64_t &A : Axes) {
    auto N = ir::normalizeAxis(A, Rank);
    if (!N)
      return C.error("axis {0} is out of range for input {1}", A,
                     ir::formatShape(C.inputType(0).Dims));
    A = *N;
  }
  std::sort(Axes.begin(), Axes.end());
  auto Repeated = std::adjacent_find(Axes.begin(), Axes.end());
  if (Repeated != Axes.end())
    return C.error("axes repeat axis {0}", *Repeated);
  ir::Attributes Attrs;
  Attrs.set("axes", std::move(Axes));
  Attrs.set("keepdims", *Keep ? int64_t(1) : int64_t(0));
  return C.emitOrFold(Kind, {0}, std::move(Attrs));
}

llvm::Error softmaxCrossEntropyLoss(NodeContext &C) {
  if (auto E = C.checkAttributes({"ignore_index", "reduction"}))
    return E;
  auto Reduction = C.getString("reduction", "mean");
  if (!Reduction)
    return Reduction.takeError();
  ir::Attributes Attrs;
  Attrs.set("reduction", *Reduction);
  if (C.attr("ignore_index")) {
    auto Ignore = C.getInt("ignore_index", 0);
    if (!Ignore)
      return Ignore.takeError();
    Attrs.set("ignore_index", *Ignore);
    Attrs.set("has_ignore_index", int64_t(1));
  }
  return C.emitOrFold(OpKind::SoftmaxCrossEntropyLoss,
                      {0, 1, C.hasInput(2) ? 2 : -1}, std::move(Attrs));
}

} // namespace onnx2soap::onnx_import::handlers
