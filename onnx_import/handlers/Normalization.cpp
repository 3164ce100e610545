//===- onnx_import/handlers/Normalization.cpp - Norms, softmax, reductions ===//
//
// Normalizes axes to non-negative form and checks the options the IR does
// not represent (BatchNormalization-9's extra training outputs, non-float
// stash types).
//
//===----------------------------------------------------------------------===//
#include "onnx_import/handlers/Handlers.h"
#include "llvm/ADT/STLExtras.h"
#include <algorithm>
#include <cmath>
#include <limits>

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

//===-- InstanceNormalization, GroupNormalization -------------------------===//
//
// Both normalize each sample over a group of channels and the spatial dims,
// which is LayerNorm with axis 2 over [N, groups, rest]: they become that
// LayerNorm (its own scale a constant 1) followed by a per-channel Mul and
// Add, each left out where the node's scale or bias is a constant 1 or 0
// (PyTorch's export of GroupNorm passes those).

/// Input I of the node as a tensor of shape [Size, 1, ..., 1] (Trailing
/// ones), to broadcast over [N, Size, ...]; NoTensor when the input is a
/// constant equal to Identity everywhere (nothing to apply).
static llvm::Expected<ir::TensorId> perChannel(NodeContext &C, unsigned I,
                                               int64_t Size, unsigned Trailing,
                                               double Identity) {
  ir::IntList Shape{Size};
  Shape.append(Trailing, 1);
  if (const ConstTensor *K = C.constant(I)) {
    bool All = true;
    for (int64_t E = 0; E < K->numElements() && All; ++E)
      All = K->floatAt(E) == Identity;
    if (All)
      return ir::NoTensor;
    ConstTensor Reshaped = *K;
    Reshaped.Dims.assign(Shape.begin(), Shape.end());
    return C.constantTensor(Reshaped, I == 1 ? "scale" : "bias");
  }
  auto T = C.tensor(I);
  if (!T)
    return T.takeError();
  ir::Attributes Attrs;
  Attrs.set("shape", std::move(Shape));
  return C.emitHelper(OpKind::Reshape, {*T}, std::move(Attrs));
}

/// Y = X * Scale + Bias, each factor skipped when absent (NoTensor).
static llvm::Expected<ir::TensorId>
affine(NodeContext &C, ir::TensorId X, ir::TensorId Scale, ir::TensorId Bias) {
  if (Scale != ir::NoTensor) {
    auto Y = C.emitHelper(OpKind::Mul, {X, Scale}, {});
    if (!Y)
      return Y.takeError();
    X = *Y;
  }
  if (Bias != ir::NoTensor) {
    auto Y = C.emitHelper(OpKind::Add, {X, Bias}, {});
    if (!Y)
      return Y.takeError();
    X = *Y;
  }
  return X;
}

/// LayerNorm of X over its dims from 2 on, with a constant scale of 1.
static llvm::Expected<ir::TensorId>
normalizeFromDim2(NodeContext &C, ir::TensorId X, double Epsilon) {
  ConstTensor One;
  One.Type = C.inputType(0).Type;
  One.Dims = {1};
  One.Floats = {1.0};
  ir::Attributes Attrs;
  Attrs.set("axis", int64_t(2));
  Attrs.set("epsilon", Epsilon);
  return C.emitHelper(OpKind::LayerNorm, {X, C.constantTensor(One, "one")},
                      std::move(Attrs));
}

/// Checks what both ops need of X (at least MinRank dims), scale and bias
/// (of Size elements).
static llvm::Error checkGroupedInputs(NodeContext &C, unsigned MinRank,
                                      int64_t Size, llvm::StringRef SizeIs) {
  if (auto E = requireInputType(C, FloatKernelTypes, "float or double"))
    return E;
  const ir::TensorType &X = C.inputType(0);
  if (X.rank() < MinRank)
    return C.error("input {0} has fewer than {1} dims ([N, C{2}] expected)",
                   ir::formatShape(X.Dims), MinRank,
                   MinRank > 2 ? ", D1, ..." : ", ...");
  if (X.numElements() == 0)
    return C.error("input {0} is empty", ir::formatShape(X.Dims));
  static const char *const Names[] = {"", "scale", "bias"};
  for (unsigned I = 1; I < 3; ++I) {
    const ir::TensorType &W = C.inputType(I);
    if (W.Type != X.Type)
      return C.error("{0} is {1}, the input {2}", Names[I],
                     ir::dtypeName(W.Type), ir::dtypeName(X.Type));
    if (W.rank() != 1 || W.Dims[0] != Size)
      return C.error("{0} {1} must have {2} values, one per {3}", Names[I],
                     ir::formatShape(W.Dims), Size, SizeIs);
  }
  return llvm::Error::success();
}

llvm::Error instanceNormalization(NodeContext &C) {
  if (auto E = C.checkAttributes({"epsilon"}))
    return E;
  auto Epsilon = C.getFloat("epsilon", 1e-5);
  if (!Epsilon)
    return Epsilon.takeError();
  const ir::TensorType &X = C.inputType(0);
  if (auto E =
          checkGroupedInputs(C, 3, X.rank() >= 2 ? X.Dims[1] : 0, "channel"))
    return E;
  auto In = C.tensor(0);
  if (!In)
    return In.takeError();
  unsigned Spatial = X.rank() - 2;
  auto Scale = perChannel(C, 1, X.Dims[1], Spatial, 1.0);
  if (!Scale)
    return Scale.takeError();
  auto Bias = perChannel(C, 2, X.Dims[1], Spatial, 0.0);
  if (!Bias)
    return Bias.takeError();
  auto Normalized = normalizeFromDim2(C, *In, *Epsilon);
  if (!Normalized)
    return Normalized.takeError();
  auto Y = affine(C, *Normalized, *Scale, *Bias);
  if (!Y)
    return Y.takeError();
  C.bindOutput(0, *Y);
  return llvm::Error::success();
}

llvm::Error groupNormalization(NodeContext &C) {
  if (auto E = C.checkAttributes({"epsilon", "num_groups", "stash_type"}))
    return E;
  auto Epsilon = C.getFloat("epsilon", 1e-5);
  auto Groups = C.getInt("num_groups", 0);
  auto Stash = C.getInt("stash_type", 1);
  if (!Epsilon)
    return Epsilon.takeError();
  if (!Groups)
    return Groups.takeError();
  if (!Stash)
    return Stash.takeError();
  if (!C.attr("num_groups"))
    return C.error("the attribute 'num_groups' is required");
  if (C.attr("stash_type") && C.opset() < 21)
    return C.error("stash_type exists from opset 21 on; this model uses "
                   "opset {0}",
                   C.opset());
  if (*Stash != onnx::TensorProto::FLOAT)
    return C.error("stash_type {0} is not supported (only FLOAT)", *Stash);
  const ir::TensorType &X = C.inputType(0);
  int64_t Channels = X.rank() >= 2 ? X.Dims[1] : 0;
  if (*Groups <= 0 || (X.rank() >= 2 && Channels % *Groups != 0))
    return C.error("num_groups {0} does not divide the {1} channels of input "
                   "{2}",
                   *Groups, Channels, ir::formatShape(X.Dims));
  // GroupNormalization-18 scales and shifts each group, 21 each channel.
  bool PerGroup = C.opset() < 21;
  if (auto E = checkGroupedInputs(C, 2, PerGroup ? *Groups : Channels,
                                  PerGroup ? "group (opset 18)" : "channel"))
    return E;
  int64_t N = X.Dims[0];
  auto In = C.tensor(0);
  if (!In)
    return In.takeError();
  ir::Attributes Grouped;
  Grouped.set("shape", ir::IntList{N, *Groups, X.numElements() / N / *Groups});
  auto Rows = C.emitHelper(OpKind::Reshape, {*In}, std::move(Grouped));
  if (!Rows)
    return Rows.takeError();
  auto Normalized = normalizeFromDim2(C, *Rows, *Epsilon);
  if (!Normalized)
    return Normalized.takeError();
  unsigned Trailing = PerGroup ? 1 : X.rank() - 2;
  int64_t Size = PerGroup ? *Groups : Channels;
  auto Scale = perChannel(C, 1, Size, Trailing, 1.0);
  if (!Scale)
    return Scale.takeError();
  auto Bias = perChannel(C, 2, Size, Trailing, 0.0);
  if (!Bias)
    return Bias.takeError();
  ir::TensorId Y = *Normalized;
  if (PerGroup) {
    auto Applied = affine(C, Y, *Scale, *Bias);
    if (!Applied)
      return Applied.takeError();
    Y = *Applied;
  }
  ir::Attributes Back;
  Back.set("shape", ir::IntList(X.Dims.begin(), X.Dims.end()));
  auto Restored = C.emitHelper(OpKind::Reshape, {Y}, std::move(Back));
  if (!Restored)
    return Restored.takeError();
  Y = *Restored;
  if (!PerGroup) {
    auto Applied = affine(C, Y, *Scale, *Bias);
    if (!Applied)
      return Applied.takeError();
    Y = *Applied;
  }
  C.bindOutput(0, Y);
  return llvm::Error::success();
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

llvm::Error cumSum(NodeContext &C) {
  if (auto E = C.checkAttributes({"exclusive", "reverse"}))
    return E;
  if (auto E = requireInputType(C, NumberKernelTypes, "f32, f64, i32 or i64"))
    return E;
  auto Axis = C.requireConstant(1, "axis");
  if (!Axis)
    return Axis.takeError();
  const ConstTensor &A = **Axis;
  if (A.isFloat() || A.numElements() != 1 || A.Dims.size() > 1)
    return C.error("axis must be one integer, got {0} {1}",
                   ir::dtypeName(A.Type), ir::formatShape(A.Dims));
  int64_t Rank = C.inputType(0).rank();
  auto Normalized = ir::normalizeAxis(A.Ints[0], Rank);
  if (!Normalized || Rank == 0)
    return C.error("axis {0} is out of range for input {1}", A.Ints[0],
                   ir::formatShape(C.inputType(0).Dims));
  ir::Attributes Attrs;
  Attrs.set("axis", static_cast<int64_t>(*Normalized));
  for (const char *Flag : {"exclusive", "reverse"}) {
    auto V = C.getInt(Flag, 0);
    if (!V)
      return V.takeError();
    if (*V != 0 && *V != 1)
      return C.error("{0} {1} is not supported (0 or 1)", Flag, *V);
    Attrs.set(Flag, *V);
  }
  return C.emitOrFold(OpKind::CumSum, {0}, std::move(Attrs));
}

llvm::Expected<std::optional<ir::Attributes>>
reduceAttributes(NodeContext &C, int64_t AxesBecameInput) {
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
  if (Rank == 0)
    return std::nullopt;
  if (Axes.empty()) {
    if (*Noop)
      return std::nullopt;
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
  return Attrs;
}

llvm::Expected<std::optional<ConstTensor>>
emptyReduction(NodeContext &C, const ir::Attributes &Attrs, double Float,
               int64_t Int) {
  const ir::TensorType &X = C.inputType(0);
  auto Axes = Attrs.getInts("axes");
  if (llvm::none_of(Axes, [&](int64_t A) { return X.Dims[A] == 0; }))
    return std::nullopt;
  ConstTensor Fill;
  Fill.Type = X.Type;
  for (size_t I = 0; I < X.Dims.size(); ++I)
    if (!llvm::is_contained(Axes, int64_t(I)))
      Fill.Dims.push_back(X.Dims[I]);
    else if (Attrs.getInt("keepdims"))
      Fill.Dims.push_back(1);
  if (Fill.numElements() > MaxFoldedElements)
    return C.error("reduces an empty set into {0} values; at most {1} are "
                   "supported",
                   Fill.numElements(), MaxFoldedElements);
  if (Fill.isFloat())
    Fill.Floats.assign(Fill.numElements(), Float);
  else
    Fill.Ints.assign(Fill.numElements(), Int);
  return Fill;
}

/// ReduceMax / ReduceMin; over an empty set ONNX gives -inf / +inf (the
/// type's lowest / highest integer), known at import time.
static llvm::Error reduceExtreme(NodeContext &C, OpKind Kind,
                                 ir::Attributes Attrs) {
  bool Max = Kind == OpKind::ReduceMax;
  bool Int32 = C.inputType(0).Type == ir::DType::Int32;
  int64_t Lowest = Int32 ? std::numeric_limits<int32_t>::lowest()
                         : std::numeric_limits<int64_t>::lowest();
  int64_t Highest = Int32 ? std::numeric_limits<int32_t>::max()
                          : std::numeric_limits<int64_t>::max();
  auto Empty = emptyReduction(C, Attrs, Max ? -INFINITY : INFINITY,
                              Max ? Lowest : Highest);
  if (!Empty)
    return Empty.takeError();
  if (!*Empty)
    return C.emitOrFold(Kind, {0}, std::move(Attrs));
  C.bindConstant(0, std::move(**Empty));
  return llvm::Error::success();
}

llvm::Error reduce(NodeContext &C, OpKind Kind) {
  if (Kind == OpKind::ReduceMax || Kind == OpKind::ReduceMin)
    if (auto E = requireInputType(C, NumberKernelTypes, "f32, f64, i32 or i64"))
      return E;
  // ReduceSum takes its axes as an input from opset 13, the others from 18.
  auto Attrs = reduceAttributes(C, Kind == OpKind::ReduceSum ? 13 : 18);
  if (!Attrs)
    return Attrs.takeError();
  if (!*Attrs) {
    C.aliasOutput(0, 0);
    return llvm::Error::success();
  }
  if (Kind == OpKind::ReduceMax || Kind == OpKind::ReduceMin)
    return reduceExtreme(C, Kind, std::move(**Attrs));
  return C.emitOrFold(Kind, {0}, std::move(**Attrs));
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
