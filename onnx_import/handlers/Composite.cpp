//===- onnx_import/handlers/Composite.cpp - ONNX ops as several IR ops ----===//
//
// ONNX ops that are short compositions of IR ops, written as those ops
// rather than given kinds and kernels of their own: each then has the
// gradients, splits, costs and CUDA kernels of the ops it is made of, all
// already checked. Where every operand is known at import time the parts
// fold (Evaluate.cpp), as one op would.
//
//   PRelu(x, s)          Where(x > 0, x, x * s)
//   Selu(x)              gamma * Elu(x, alpha)
//   Celu(x)              alpha * Elu(x / alpha)
//   Softsign(x)          x / (|x| + 1)
//   ThresholdedRelu(x)   Where(x > alpha, x, 0)
//   Mish(x)              x * tanh(Softplus(x))
//   Sum, Mean            Adds (then / n)
//   Tile(x, repeats)     Reshape to [1, d0, 1, d1, ...], Expand to
//                        [r0, d0, r1, d1, ...], Reshape to [r0 d0, ...]
//   ReduceSumSquare      ReduceSum(x * x)
//   ReduceL1, ReduceL2   ReduceSum(|x|), sqrt(ReduceSum(x * x))
//   LpNormalization      x / ReduceL1 or ReduceL2 over the axis (1 where
//                        that is 0, so that zeros stay zeros)
//   ReduceLogSumExp      log(ReduceSum(exp(x - m))) + m, m = ReduceMax(x)
//                        where finite, else 0 (an empty set gives -inf)
//   Sign                 (x > 0) - (x < 0), NaN kept
//   And, Or, Xor (bool)  Where(a, b, false), Where(a, true, b),
//                        Where(a, not b, b)
//   LessOrEqual,         Where(a < b, true, a == b) (and a > b): false
//   GreaterOrEqual       where either is NaN
//   Trilu                Where(constant triangle of the last two dims, x, 0)
//   DepthToSpace,        Reshape to 6 dims, Transpose, Reshape (ONNX's
//   SpaceToDepth         definitions, DCR and CRD)
//   Einsum               per pair of operands (greedily: of the pairs
//                        sharing a label, the smallest result first):
//                        ReduceSum of the labels neither the other operand
//                        nor the rest need, Transposes and Reshapes to
//                        [batch..., M, K] and [batch..., K, N], a MatMul,
//                        a Reshape back; then ReduceSum and a Transpose
//                        to the output's labels (no diagonals)
//
// ReduceProd is computed only where its input is known at import time
// (exporters' shape arithmetic, such as the element count of a variance).
//
// PRelu's form passes s * gradient where x <= 0, as PyTorch's prelu does.
//
//===----------------------------------------------------------------------===//
#include "onnx_import/Evaluate.h"
#include "onnx_import/handlers/Handlers.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include <cmath>
#include <limits>
#include <map>
#include <optional>

namespace onnx2soap::onnx_import::handlers {

using ir::OpKind;

namespace {

/// One operand of a composition: known at import time, or an IR tensor.
struct Part {
  ir::TensorType Type;
  std::optional<ConstTensor> Known;
  ir::TensorId Tensor = ir::NoTensor;
};

llvm::Expected<Part> inputPart(NodeContext &C, unsigned I) {
  Part P;
  P.Type = C.inputType(I);
  if (const ConstTensor *K = C.constant(I)) {
    P.Known = *K;
    return P;
  }
  auto T = C.tensor(I);
  if (!T)
    return T.takeError();
  P.Tensor = *T;
  return P;
}

/// A scalar of Type holding Value.
Part scalar(ir::DType Type, double Value) {
  Part P;
  P.Type = ir::TensorType{Type, {}};
  ConstTensor K;
  K.Type = Type;
  if (K.isFloat())
    K.Floats = {Value};
  else
    K.Ints = {static_cast<int64_t>(Value)};
  P.Known = std::move(K);
  return P;
}

/// Folding computes on int64: a uint64 of 2^63 or more would read as
/// negative (NodeContext::emitOrFold leaves those to the kernels too).
bool foldable(const Part &P) {
  return P.Known &&
         !(P.Known->Type == ir::DType::UInt64 &&
           llvm::any_of(P.Known->Ints, [](int64_t V) { return V < 0; }));
}

/// Op Kind over In: computed now when every operand is known and the kind
/// folds, else an IR op named after the node.
llvm::Expected<Part> apply(NodeContext &C, OpKind Kind, llvm::ArrayRef<Part> In,
                           ir::Attributes Attrs = {}) {
  if (llvm::all_of(In, foldable)) {
    llvm::SmallVector<const ir::TensorType *, 3> Types;
    llvm::SmallVector<const ConstTensor *, 3> Values;
    for (const Part &P : In) {
      Types.push_back(&P.Type);
      Values.push_back(&*P.Known);
    }
    auto OutTypes = ir::opKindInfo(Kind).InferTypes(Attrs, Types);
    if (!OutTypes)
      return C.wrap(OutTypes.takeError());
    if (auto Results = evaluate(Kind, Attrs, Values, *OutTypes)) {
      Part Out;
      Out.Type = (*OutTypes)[0];
      Out.Known = std::move((*Results)[0]);
      return Out;
    }
  }
  llvm::SmallVector<ir::TensorId, 3> Inputs;
  for (const Part &P : In)
    Inputs.push_back(P.Known ? C.constantTensor(*P.Known, "constant")
                             : P.Tensor);
  auto T = C.emitHelper(Kind, Inputs, std::move(Attrs));
  if (!T)
    return T.takeError();
  Part Out;
  Out.Type = C.graph().tensor(*T).Type;
  Out.Tensor = *T;
  return Out;
}

/// The node's output 0 is P.
llvm::Error bindPart(NodeContext &C, Part P) {
  if (P.Known)
    C.bindConstant(0, std::move(*P.Known));
  else
    C.bindOutput(0, P.Tensor);
  return llvm::Error::success();
}

ir::Attributes withAlpha(double Alpha) {
  ir::Attributes Attrs;
  Attrs.set("alpha", Alpha);
  return Attrs;
}

ir::Attributes withShape(const ir::Shape &Dims) {
  ir::Attributes Attrs;
  Attrs.set("shape", ir::IntList(Dims.begin(), Dims.end()));
  return Attrs;
}

ir::Attributes withPerm(ir::IntList Perm) {
  ir::Attributes Attrs;
  Attrs.set("perm", std::move(Perm));
  return Attrs;
}

llvm::Error requireFloat(NodeContext &C) {
  if (!ir::isFloatingPoint(C.inputType(0).Type))
    return C.error("input of type {0} is not supported (floating point only)",
                   ir::dtypeName(C.inputType(0).Type));
  return llvm::Error::success();
}

/// Unwraps an Expected<Part> into P, or returns its error.
#define TAKE(P, Expr)                                                          \
  auto P##OrErr = (Expr);                                                      \
  if (!P##OrErr)                                                               \
    return P##OrErr.takeError();                                               \
  Part P = std::move(*P##OrErr)

} // namespace

llvm::Error prelu(NodeContext &C) {
  if (auto E = C.checkAttributes({}))
    return E;
  if (auto E = requireFloat(C))
    return E;
  TAKE(X, inputPart(C, 0));
  TAKE(Slope, inputPart(C, 1));
  if (Slope.Type.Type != X.Type.Type)
    return C.error("slope is {0}, the input {1}",
                   ir::dtypeName(Slope.Type.Type), ir::dtypeName(X.Type.Type));
  TAKE(Scaled, apply(C, OpKind::Mul, {X, Slope}));
  // The slope broadcasts to x, not x to the slope's shape.
  if (Scaled.Type.Dims != X.Type.Dims)
    return C.error("slope {0} does not broadcast to the input {1}",
                   ir::formatShape(Slope.Type.Dims),
                   ir::formatShape(X.Type.Dims));
  TAKE(Positive, apply(C, OpKind::Greater, {X, scalar(X.Type.Type, 0.0)}));
  TAKE(Y, apply(C, OpKind::Where, {Positive, X, Scaled}));
  return bindPart(C, std::move(Y));
}

llvm::Error selu(NodeContext &C) {
  if (auto E = C.checkAttributes({"alpha", "gamma"}))
    return E;
  if (auto E = requireFloat(C))
    return E;
  auto Alpha = C.getFloat("alpha", 1.67326319217681884765625);
  auto Gamma = C.getFloat("gamma", 1.05070102214813232421875);
  if (!Alpha)
    return Alpha.takeError();
  if (!Gamma)
    return Gamma.takeError();
  TAKE(X, inputPart(C, 0));
  TAKE(Elu, apply(C, OpKind::Elu, {X}, withAlpha(*Alpha)));
  TAKE(Y, apply(C, OpKind::Mul, {Elu, scalar(X.Type.Type, *Gamma)}));
  return bindPart(C, std::move(Y));
}

llvm::Error celu(NodeContext &C) {
  if (auto E = C.checkAttributes({"alpha"}))
    return E;
  if (auto E = requireFloat(C))
    return E;
  auto Alpha = C.getFloat("alpha", 1.0);
  if (!Alpha)
    return Alpha.takeError();
  if (!(*Alpha > 0))
    return C.error("alpha {0} is not positive",
                   llvm::formatv("{0}", llvm::format("%g", *Alpha)).str());
  TAKE(X, inputPart(C, 0));
  ir::DType Type = X.Type.Type;
  if (*Alpha != 1.0) {
    TAKE(Scaled, apply(C, OpKind::Div, {X, scalar(Type, *Alpha)}));
    X = std::move(Scaled);
  }
  TAKE(Y, apply(C, OpKind::Elu, {X}, withAlpha(1.0)));
  if (*Alpha != 1.0) {
    TAKE(Back, apply(C, OpKind::Mul, {Y, scalar(Type, *Alpha)}));
    Y = std::move(Back);
  }
  return bindPart(C, std::move(Y));
}

llvm::Error softsign(NodeContext &C) {
  if (auto E = C.checkAttributes({}))
    return E;
  if (auto E = requireFloat(C))
    return E;
  TAKE(X, inputPart(C, 0));
  TAKE(Magnitude, apply(C, OpKind::Abs, {X}));
  TAKE(Below, apply(C, OpKind::Add, {Magnitude, scalar(X.Type.Type, 1.0)}));
  TAKE(Y, apply(C, OpKind::Div, {X, Below}));
  return bindPart(C, std::move(Y));
}

llvm::Error thresholdedRelu(NodeContext &C) {
  if (auto E = C.checkAttributes({"alpha"}))
    return E;
  if (auto E = requireFloat(C))
    return E;
  auto Alpha = C.getFloat("alpha", 1.0);
  if (!Alpha)
    return Alpha.takeError();
  TAKE(X, inputPart(C, 0));
  ir::DType Type = X.Type.Type;
  TAKE(Above, apply(C, OpKind::Greater, {X, scalar(Type, *Alpha)}));
  TAKE(Y, apply(C, OpKind::Where, {Above, X, scalar(Type, 0.0)}));
  return bindPart(C, std::move(Y));
}

llvm::Error mish(NodeContext &C) {
  if (auto E = C.checkAttributes({}))
    return E;
  if (auto E = requireFloat(C))
    return E;
  TAKE(X, inputPart(C, 0));
  TAKE(Soft, apply(C, OpKind::Softplus, {X}));
  TAKE(Gate, apply(C, OpKind::Tanh, {Soft}));
  TAKE(Y, apply(C, OpKind::Mul, {X, Gate}));
  return bindPart(C, std::move(Y));
}

llvm::Error sumOrMean(NodeContext &C, bool Mean) {
  if (auto E = C.checkAttributes({}))
    return E;
  for (unsigned I = 0; I < C.numInputs(); ++I)
    if (!C.hasInput(I))
      return C.error("input {0} is empty", I);
  if (Mean)
    if (auto E = requireFloat(C))
      return E;
  TAKE(Total, inputPart(C, 0));
  for (unsigned I = 1; I < C.numInputs(); ++I) {
    TAKE(Next, inputPart(C, I));
    TAKE(Sum, apply(C, OpKind::Add, {Total, Next}));
    Total = std::move(Sum);
  }
  if (Mean && C.numInputs() > 1) {
    TAKE(Y, apply(C, OpKind::Div,
                  {Total, scalar(Total.Type.Type, C.numInputs())}));
    Total = std::move(Y);
  }
  return bindPart(C, std::move(Total));
}

llvm::Error tile(NodeContext &C) {
  if (auto E = C.checkAttributes({}))
    return E;
  auto Repeats = intsOf(C, 1, "repeats");
  if (!Repeats)
    return Repeats.takeError();
  const ir::Shape &Dims = C.inputType(0).Dims;
  if (Repeats->size() != Dims.size())
    return C.error("repeats {0} must have one value per dim of the input {1}",
                   ir::formatShape(*Repeats), ir::formatShape(Dims));
  for (size_t D = 0; D < Dims.size(); ++D) {
    int64_t R = (*Repeats)[D];
    if (R < 1)
      return C.error("repeats {0} must be positive", ir::formatShape(*Repeats));
    if (Dims[D] > 0 && R > std::numeric_limits<int64_t>::max() / Dims[D])
      return C.error("repeats {0} make dim {1} of the input {2} too large",
                     ir::formatShape(*Repeats), D, ir::formatShape(Dims));
  }
  TAKE(X, inputPart(C, 0));
  // Each repeated dim gets a dim of 1 before it, expanded to its repeats.
  ir::Shape Split, Expanded, Result;
  for (size_t D = 0; D < Dims.size(); ++D) {
    if ((*Repeats)[D] != 1) {
      Split.push_back(1);
      Expanded.push_back((*Repeats)[D]);
    }
    Split.push_back(Dims[D]);
    Expanded.push_back(Dims[D]);
    Result.push_back(Dims[D] * (*Repeats)[D]);
  }
  if (Result == Dims)
    return bindPart(C, std::move(X));
  if (Split != Dims) {
    TAKE(Spread, apply(C, OpKind::Reshape, {X}, withShape(Split)));
    X = std::move(Spread);
  }
  TAKE(Copies, apply(C, OpKind::Expand, {X}, withShape(Expanded)));
  TAKE(Y, apply(C, OpKind::Reshape, {Copies}, withShape(Result)));
  return bindPart(C, std::move(Y));
}

llvm::Error reduceComposite(NodeContext &C, ReduceForm Form) {
  // ONNX's ReduceL2 of integers rounds the root back to an integer.
  if (Form == ReduceForm::L2)
    if (auto E = requireFloat(C))
      return E;
  auto Reduction = reduceAttributes(C, 18);
  if (!Reduction)
    return Reduction.takeError();
  TAKE(X, inputPart(C, 0));
  TAKE(Terms, Form == ReduceForm::L1 ? apply(C, OpKind::Abs, {X})
                                     : apply(C, OpKind::Mul, {X, X}));
  // No axes and noop_with_empty_axes: the terms unreduced, as ONNX's
  // reference computes them.
  if (*Reduction) {
    TAKE(Sum, apply(C, OpKind::ReduceSum, {Terms}, std::move(**Reduction)));
    Terms = std::move(Sum);
  }
  if (Form == ReduceForm::L2) {
    TAKE(Root, apply(C, OpKind::Sqrt, {Terms}));
    Terms = std::move(Root);
  }
  return bindPart(C, std::move(Terms));
}

llvm::Error lpNormalization(NodeContext &C) {
  if (auto E = C.checkAttributes({"axis", "p"}))
    return E;
  if (auto E = requireFloat(C))
    return E;
  auto Axis = C.getInt("axis", -1);
  auto P = C.getInt("p", 2);
  if (!Axis)
    return Axis.takeError();
  if (!P)
    return P.takeError();
  if (*P != 1 && *P != 2)
    return C.error("p {0} is not supported (1 or 2)", *P);
  auto Normalized = ir::normalizeAxis(*Axis, C.inputType(0).rank());
  if (!Normalized)
    return C.error("axis {0} is out of range for input {1}", *Axis,
                   ir::formatShape(C.inputType(0).Dims));
  TAKE(X, inputPart(C, 0));
  TAKE(Terms,
       *P == 1 ? apply(C, OpKind::Abs, {X}) : apply(C, OpKind::Mul, {X, X}));
  ir::Attributes Attrs;
  Attrs.set("axes", ir::IntList{static_cast<int64_t>(*Normalized)});
  Attrs.set("keepdims", int64_t(1));
  TAKE(Norm, apply(C, OpKind::ReduceSum, {Terms}, std::move(Attrs)));
  if (*P == 2) {
    TAKE(Root, apply(C, OpKind::Sqrt, {Norm}));
    Norm = std::move(Root);
  }
  // A zero norm (x all zero along the axis) gives zeros: x / 1.
  ir::DType Type = X.Type.Type;
  TAKE(Zero, apply(C, OpKind::Equal, {Norm, scalar(Type, 0.0)}));
  TAKE(Divisor, apply(C, OpKind::Where, {Zero, scalar(Type, 1.0), Norm}));
  TAKE(Y, apply(C, OpKind::Div, {X, Divisor}));
  return bindPart(C, std::move(Y));
}

llvm::Error reduceLogSumExp(NodeContext &C) {
  if (auto E = requireInputType(C, FloatKernelTypes, "float or double"))
    return E;
  auto Reduction = reduceAttributes(C, 18);
  if (!Reduction)
    return Reduction.takeError();
  TAKE(X, inputPart(C, 0));
  // Nothing reduced: log(exp(x)) is x.
  if (!*Reduction)
    return bindPart(C, std::move(X));
  // log(0) over an empty set.
  auto Empty = emptyReduction(C, **Reduction, -INFINITY, 0);
  if (!Empty)
    return Empty.takeError();
  if (*Empty) {
    C.bindConstant(0, std::move(**Empty));
    return llvm::Error::success();
  }
  ir::DType Type = X.Type.Type;
  ir::Attributes Kept = **Reduction;
  bool KeepDims = Kept.getInt("keepdims");
  Kept.set("keepdims", int64_t(1));
  TAKE(Largest, apply(C, OpKind::ReduceMax, {X}, Kept));
  // The shift is 0 where the maximum is not finite, as in PyTorch: +inf
  // gives +inf and a slice all -inf gives -inf, not inf - inf.
  TAKE(Magnitude, apply(C, OpKind::Abs, {Largest}));
  TAKE(Finite,
       apply(C, OpKind::Less, {Magnitude, scalar(Type, double(INFINITY))}));
  TAKE(Max, apply(C, OpKind::Where, {Finite, Largest, scalar(Type, 0.0)}));
  TAKE(Shifted, apply(C, OpKind::Sub, {X, Max}));
  TAKE(Exp, apply(C, OpKind::Exp, {Shifted}));
  TAKE(Sum, apply(C, OpKind::ReduceSum, {Exp}, std::move(**Reduction)));
  TAKE(Log, apply(C, OpKind::Log, {Sum}));
  if (!KeepDims) {
    TAKE(Flat, apply(C, OpKind::Reshape, {Max}, withShape(Log.Type.Dims)));
    Max = std::move(Flat);
  }
  TAKE(Y, apply(C, OpKind::Add, {Log, Max}));
  return bindPart(C, std::move(Y));
}

llvm::Error sign(NodeContext &C) {
  if (auto E = C.checkAttributes({}))
    return E;
  if (auto E = requireInputType(C, NumberKernelTypes, "f32, f64, i32 or i64"))
    return E;
  ir::DType Type = C.inputType(0).Type;
  TAKE(X, inputPart(C, 0));
  ir::Attributes To;
  To.set("to", ir::dtypeName(Type).str());
  TAKE(Above, apply(C, OpKind::Greater, {X, scalar(Type, 0.0)}));
  TAKE(Below, apply(C, OpKind::Less, {X, scalar(Type, 0.0)}));
  TAKE(Plus, apply(C, OpKind::Cast, {Above}, To));
  TAKE(Minus, apply(C, OpKind::Cast, {Below}, To));
  TAKE(Y, apply(C, OpKind::Sub, {Plus, Minus}));
  if (ir::isFloatingPoint(Type)) {
    // NaN is neither above nor below 0, and its sign is NaN.
    TAKE(Number, apply(C, OpKind::Equal, {X, X}));
    TAKE(Kept, apply(C, OpKind::Where, {Number, Y, X}));
    Y = std::move(Kept);
  }
  return bindPart(C, std::move(Y));
}

llvm::Error logical(NodeContext &C, Logic Form) {
  if (auto E = C.checkAttributes({}))
    return E;
  for (unsigned I = 0; I < 2; ++I)
    if (C.inputType(I).Type != ir::DType::Bool)
      return C.error("input {0} of type {1} is not supported (bool only)", I,
                     ir::dtypeName(C.inputType(I).Type));
  TAKE(A, inputPart(C, 0));
  TAKE(B, inputPart(C, 1));
  Part True = scalar(ir::DType::Bool, 1), False = scalar(ir::DType::Bool, 0);
  if (Form == Logic::And) {
    TAKE(Y, apply(C, OpKind::Where, {A, B, False}));
    return bindPart(C, std::move(Y));
  }
  if (Form == Logic::Or) {
    TAKE(Y, apply(C, OpKind::Where, {A, True, B}));
    return bindPart(C, std::move(Y));
  }
  TAKE(NotB, apply(C, OpKind::Not, {B}));
  TAKE(Y, apply(C, OpKind::Where, {A, NotB, B}));
  return bindPart(C, std::move(Y));
}

llvm::Error compareOrEqual(NodeContext &C, OpKind Strict) {
  if (auto E = C.checkAttributes({}))
    return E;
  static constexpr ir::DType Types[] = {ir::DType::Float32, ir::DType::Float64,
                                        ir::DType::UInt8, ir::DType::Int32,
                                        ir::DType::Int64};
  if (auto E = requireInputType(C, Types, "f32, f64, u8, i32 or i64"))
    return E;
  TAKE(A, inputPart(C, 0));
  TAKE(B, inputPart(C, 1));
  // NaN is neither: false, as ONNX's and PyTorch's a <= b.
  TAKE(Below, apply(C, Strict, {A, B}));
  TAKE(Same, apply(C, OpKind::Equal, {A, B}));
  TAKE(Y, apply(C, OpKind::Where, {Below, scalar(ir::DType::Bool, 1), Same}));
  return bindPart(C, std::move(Y));
}

llvm::Error trilu(NodeContext &C) {
  if (auto E = C.checkAttributes({"upper"}))
    return E;
  auto Upper = C.getInt("upper", 1);
  if (!Upper)
    return Upper.takeError();
  const ir::TensorType &In = C.inputType(0);
  if (In.rank() < 2)
    return C.error("input {0} has fewer than 2 dims", ir::formatShape(In.Dims));
  int64_t K = 0;
  if (C.hasInput(1)) {
    auto Value = intsOf(C, 1, "k");
    if (!Value)
      return Value.takeError();
    if (Value->size() != 1)
      return C.error("k must be a scalar, it has {0} values", Value->size());
    K = (*Value)[0];
  }
  int64_t Rows = In.Dims[In.rank() - 2], Cols = In.Dims[In.rank() - 1];
  if (Cols != 0 && Rows > MaxFoldedElements / Cols)
    return C.error("the last two dims of {0} make a mask of more than {1} "
                   "values",
                   ir::formatShape(In.Dims), MaxFoldedElements);
  Part Mask;
  Mask.Type = ir::TensorType{ir::DType::Bool, {Rows, Cols}};
  ConstTensor Keep;
  Keep.Type = ir::DType::Bool;
  Keep.Dims = {Rows, Cols};
  for (int64_t I = 0; I < Rows; ++I)
    for (int64_t J = 0; J < Cols; ++J)
      Keep.Ints.push_back(*Upper ? J - I >= K : J - I <= K);
  Mask.Known = std::move(Keep);
  TAKE(X, inputPart(C, 0));
  TAKE(Y, apply(C, OpKind::Where, {Mask, X, scalar(In.Type, 0.0)}));
  return bindPart(C, std::move(Y));
}

llvm::Error depthSpace(NodeContext &C, bool ToSpace) {
  if (auto E = C.checkAttributes(
          ToSpace ? llvm::ArrayRef<llvm::StringRef>({"blocksize", "mode"})
                  : llvm::ArrayRef<llvm::StringRef>({"blocksize"})))
    return E;
  auto Block = C.getInt("blocksize", 0);
  auto Mode = C.getString("mode", "DCR");
  if (!Block)
    return Block.takeError();
  if (!Mode)
    return Mode.takeError();
  if (!C.attr("blocksize"))
    return C.error("the attribute 'blocksize' is required");
  if (*Mode != "DCR" && *Mode != "CRD")
    return C.error("mode '{0}' is not DCR or CRD", *Mode);
  const ir::TensorType &In = C.inputType(0);
  if (In.rank() != 4)
    return C.error("input {0} is not [N, C, H, W]", ir::formatShape(In.Dims));
  int64_t B = *Block, N = In.Dims[0], Ch = In.Dims[1], H = In.Dims[2],
          W = In.Dims[3];
  if (B < 1 || B > 4096)
    return C.error("blocksize {0} is not between 1 and 4096", B);
  TAKE(X, inputPart(C, 0));
  ir::Shape Six, Out;
  ir::IntList Perm;
  if (ToSpace) {
    if (Ch % (B * B))
      return C.error("blocksize {0} squared does not divide the {1} channels",
                     B, Ch);
    if (*Mode == "DCR") {
      Six = {N, B, B, Ch / (B * B), H, W};
      Perm = {0, 3, 4, 1, 5, 2};
    } else {
      Six = {N, Ch / (B * B), B, B, H, W};
      Perm = {0, 1, 4, 2, 5, 3};
    }
    Out = {N, Ch / (B * B), H * B, W * B};
  } else {
    if (H % B || W % B)
      return C.error("blocksize {0} does not divide the spatial dims of {1}", B,
                     ir::formatShape(In.Dims));
    Six = {N, Ch, H / B, B, W / B, B};
    Perm = {0, 3, 5, 1, 2, 4};
    Out = {N, Ch * B * B, H / B, W / B};
  }
  TAKE(Split, apply(C, OpKind::Reshape, {X}, withShape(Six)));
  TAKE(Moved, apply(C, OpKind::Transpose, {Split}, withPerm(std::move(Perm))));
  TAKE(Y, apply(C, OpKind::Reshape, {Moved}, withShape(Out)));
  return bindPart(C, std::move(Y));
}

llvm::Error reduceProd(NodeContext &C) {
  auto Reduction = reduceAttributes(C, 18);
  if (!Reduction)
    return Reduction.takeError();
  const ConstTensor *X = C.constant(0);
  if (!X)
    return C.error("ReduceProd of '{0}', known only at run time, is not "
                   "supported (only of values known at import time, as in "
                   "shape computations)",
                   C.inputName(0));
  if (!*Reduction) {
    C.bindConstant(0, *X);
    return llvm::Error::success();
  }
  auto Axes = (*Reduction)->getInts("axes");
  bool KeepDims = (*Reduction)->getInt("keepdims");
  const ir::Shape &Dims = X->Dims;
  ConstTensor Y;
  Y.Type = X->Type;
  ir::Shape Strides(Dims.size(), 0); // of each kept dim in Y
  int64_t Count = 1;
  for (size_t D = Dims.size(); D-- > 0;)
    if (!llvm::is_contained(Axes, int64_t(D))) {
      Strides[D] = Count;
      Count *= Dims[D];
    }
  for (size_t D = 0; D < Dims.size(); ++D)
    if (!llvm::is_contained(Axes, int64_t(D)))
      Y.Dims.push_back(Dims[D]);
    else if (KeepDims)
      Y.Dims.push_back(1);
  if (Y.isFloat())
    Y.Floats.assign(Count, 1.0);
  else
    Y.Ints.assign(Count, 1);
  for (int64_t I = 0; I < X->numElements(); ++I) {
    int64_t Rest = I, At = 0;
    for (size_t D = Dims.size(); D-- > 0;) {
      At += (Rest % Dims[D]) * Strides[D];
      Rest /= Dims[D];
    }
    if (Y.Type == ir::DType::Float32)
      Y.Floats[At] = static_cast<float>(Y.Floats[At] * X->Floats[I]);
    else if (Y.isFloat())
      Y.Floats[At] *= X->Floats[I];
    else
      Y.Ints[At] = static_cast<int64_t>(static_cast<uint64_t>(Y.Ints[At]) *
                                        static_cast<uint64_t>(X->Ints[I]));
  }
  // Back into the element type: integers wrap, f16 and bf16 round.
  C.bindConstant(0, Y.cast(Y.Type));
  return llvm::Error::success();
}

//===-- Einsum ------------------------------------------------------------===//

namespace {

/// An operand of an Einsum with one label per dim (ellipsis dims get labels
/// of their own, below 'A': EllipsisLabel + k for the k-th from the right).
struct Labelled {
  Part Value;
  std::string Labels;
};

constexpr char EllipsisLabel = '0';
constexpr unsigned MaxEllipsisDims = 16;

bool isEllipsisLabel(char L) {
  return L >= EllipsisLabel && L < EllipsisLabel + char(MaxEllipsisDims);
}

/// L as a message names it: 'j', or "ellipsis dim k" (from the right).
std::string labelName(char L) {
  if (isEllipsisLabel(L))
    return "ellipsis dim " + std::to_string(L - EllipsisLabel) +
           " (from the right)";
  return "label '" + std::string(1, L) + "'";
}

/// Ch as a message shows it: itself when printable ASCII, else its code.
std::string charName(char Ch) {
  unsigned char U = static_cast<unsigned char>(Ch);
  if (U >= 0x20 && U < 0x7f)
    return "'" + std::string(1, Ch) + "'";
  return llvm::formatv("byte {0:x2}", U).str();
}

/// Term's labels for an operand of Rank dims, the ellipsis (if any) spelled
/// out.
llvm::Expected<std::string> spellOut(NodeContext &C, llvm::StringRef Term,
                                     unsigned Rank, unsigned Operand) {
  size_t Dots = Term.find("...");
  std::string Letters = Term.str();
  if (Dots != llvm::StringRef::npos)
    Letters.erase(Dots, 3);
  for (char L : Letters)
    if (!llvm::isAlpha(L))
      return C.error("equation term '{0}' of operand {1} has {2}; only "
                     "letters and one ellipsis are allowed",
                     Term, Operand, charName(L));
  if (Letters.size() > Rank ||
      (Dots == llvm::StringRef::npos && Letters.size() != Rank))
    return C.error("equation term '{0}' has {1} labels for operand {2} of "
                   "rank {3}",
                   Term, Letters.size(), Operand, Rank);
  if (Dots == llvm::StringRef::npos)
    return Letters;
  unsigned Ellipsis = Rank - Letters.size();
  if (Ellipsis > MaxEllipsisDims)
    return C.error("the ellipsis of operand {0} stands for {1} dims (at most "
                   "{2})",
                   Operand, Ellipsis, MaxEllipsisDims);
  std::string Spelled;
  for (unsigned K = Ellipsis; K > 0; --K)
    Spelled += static_cast<char>(EllipsisLabel + K - 1);
  return Letters.substr(0, Dots) + Spelled + Letters.substr(Dots);
}

int64_t sizeOf(const Labelled &X, char L) {
  return X.Value.Type.Dims[X.Labels.find(L)];
}

bool has(llvm::StringRef Labels, char L) { return Labels.contains(L); }

/// X summed over the labels not in Keep.
llvm::Expected<Labelled> sumAllBut(NodeContext &C, Labelled X,
                                   llvm::StringRef Keep) {
  ir::IntList Axes;
  std::string Left;
  for (size_t D = 0; D < X.Labels.size(); ++D) {
    if (has(Keep, X.Labels[D]))
      Left += X.Labels[D];
    else
      Axes.push_back(static_cast<int64_t>(D));
  }
  if (Axes.empty())
    return X;
  ir::Attributes Attrs;
  Attrs.set("axes", Axes);
  Attrs.set("keepdims", int64_t(0));
  TAKE(Sum, apply(C, OpKind::ReduceSum, {X.Value}, std::move(Attrs)));
  return Labelled{std::move(Sum), Left};
}

/// X with its dims in the order of Labels (a permutation of X's).
llvm::Expected<Labelled> permuteTo(NodeContext &C, Labelled X,
                                   llvm::StringRef Labels) {
  if (X.Labels == Labels)
    return X;
  ir::IntList Perm;
  for (char L : Labels)
    Perm.push_back(static_cast<int64_t>(X.Labels.find(L)));
  TAKE(Moved, apply(C, OpKind::Transpose, {X.Value}, withPerm(Perm)));
  return Labelled{std::move(Moved), Labels.str()};
}

/// X reshaped to Dims (skipped when it has them).
llvm::Expected<Part> reshapeTo(NodeContext &C, Part X, const ir::Shape &Dims) {
  if (X.Type.Dims == Dims)
    return X;
  return apply(C, OpKind::Reshape, {X}, withShape(Dims));
}

/// The labels of A and B that the result of contracting them keeps: those
/// in Keep.
std::string keptLabels(const Labelled &A, const Labelled &B,
                       llvm::StringRef Keep) {
  std::string Kept;
  for (const Labelled *X : {&A, &B})
    for (char L : X->Labels)
      if (has(Keep, L) && !has(Kept, L))
        Kept += L;
  return Kept;
}

/// A and B contracted over their shared labels not in Keep, as one MatMul:
/// A as [batch..., M, K], B as [batch..., K, N], where the batch labels are
/// shared and kept, M and N those of one operand kept, K those summed.
llvm::Expected<Labelled> contract(NodeContext &C, Labelled A, Labelled B,
                                  llvm::StringRef Keep) {
  // A summed label of size 1 on one side broadcasts (numpy's rule): sum
  // the other side over it first, leaving a label of one side only.
  std::string DropA, DropB;
  for (char L : A.Labels) {
    if (!has(B.Labels, L) || has(Keep, L))
      continue;
    int64_t SA = sizeOf(A, L), SB = sizeOf(B, L);
    if (SA != SB && SA != 1 && SB != 1)
      return C.error("{0} has sizes {1} and {2}", labelName(L), SA, SB);
    if (SA != SB)
      (SA == 1 ? DropB : DropA) += L;
  }
  // One sum per side: over its labels the other lacks and nothing keeps,
  // and over the dropped ones (on the size-1 side, a squeeze).
  std::string KeepA = Keep.str(), KeepB = Keep.str();
  for (char L : B.Labels)
    if (!has(DropA, L) && !has(DropB, L))
      KeepA += L;
  for (char L : A.Labels)
    if (!has(DropA, L) && !has(DropB, L))
      KeepB += L;
  auto SumA = sumAllBut(C, std::move(A), KeepA);
  if (!SumA)
    return SumA.takeError();
  auto SumB = sumAllBut(C, std::move(B), KeepB);
  if (!SumB)
    return SumB.takeError();
  A = std::move(*SumA);
  B = std::move(*SumB);
  std::string Batch, OnlyA, OnlyB, Summed;
  for (char L : A.Labels)
    (has(B.Labels, L) ? (has(Keep, L) ? Batch : Summed) : OnlyA) += L;
  for (char L : B.Labels)
    if (!has(A.Labels, L))
      OnlyB += L;
  ir::Shape BatchA, BatchB, Kept;
  int64_t M = 1, N = 1, K = 1;
  for (char L : Batch) {
    int64_t SA = sizeOf(A, L), SB = sizeOf(B, L);
    if (SA != SB && SA != 1 && SB != 1)
      return C.error("{0} has sizes {1} and {2}", labelName(L), SA, SB);
    BatchA.push_back(SA);
    BatchB.push_back(SB);
    Kept.push_back(std::max(SA, SB));
  }
  for (char L : Summed)
    K *= sizeOf(A, L);
  for (char L : OnlyA) {
    M *= sizeOf(A, L);
    Kept.push_back(sizeOf(A, L));
  }
  for (char L : OnlyB) {
    N *= sizeOf(B, L);
    Kept.push_back(sizeOf(B, L));
  }
  auto PA = permuteTo(C, std::move(A), Batch + OnlyA + Summed);
  if (!PA)
    return PA.takeError();
  auto PB = permuteTo(C, std::move(B), Batch + Summed + OnlyB);
  if (!PB)
    return PB.takeError();
  ir::Shape DimsA = BatchA, DimsB = BatchB;
  DimsA.append({M, K});
  DimsB.append({K, N});
  TAKE(MA, reshapeTo(C, std::move(PA->Value), DimsA));
  TAKE(MB, reshapeTo(C, std::move(PB->Value), DimsB));
  TAKE(Product, apply(C, OpKind::MatMul, {MA, MB}));
  TAKE(Result, reshapeTo(C, std::move(Product), Kept));
  return Labelled{std::move(Result), Batch + OnlyA + OnlyB};
}

/// The element count of the result of contracting A and B keeping Keep.
double resultSize(const Labelled &A, const Labelled &B, llvm::StringRef Keep) {
  double Size = 1;
  for (char L : keptLabels(A, B, Keep))
    Size *= std::max(has(A.Labels, L) ? sizeOf(A, L) : 1,
                     has(B.Labels, L) ? sizeOf(B, L) : 1);
  return Size;
}

} // namespace

llvm::Error einsum(NodeContext &C) {
  if (auto E = C.checkAttributes({"equation"}))
    return E;
  // Any floating type imports; planning and running refuse, naming the
  // part, what the kernels cannot run (MatMul: f32 only).
  if (auto E = requireFloat(C))
    return E;
  if (!C.attr("equation"))
    return C.error("the attribute 'equation' is required");
  auto Equation = C.getString("equation", "");
  if (!Equation)
    return Equation.takeError();
  std::string Text;
  for (char Ch : *Equation)
    if (!llvm::isSpace(Ch))
      Text += Ch;
  llvm::StringRef Eq(Text);
  auto [Left, Right] = Eq.split("->");
  bool Explicit = Eq.contains("->");
  if (Right.contains("->"))
    return C.error("equation '{0}' has two '->'", *Equation);
  llvm::SmallVector<llvm::StringRef, 4> Terms;
  Left.split(Terms, ',');
  if (Terms.size() != C.numInputs())
    return C.error("equation '{0}' has {1} operand terms for {2} inputs",
                   *Equation, Terms.size(), C.numInputs());
  std::vector<Labelled> Operands;
  unsigned MaxEllipsis = 0;
  for (unsigned I = 0; I < C.numInputs(); ++I) {
    if (C.inputType(I).Type != C.inputType(0).Type)
      return C.error("input {0} is {1}, input 0 {2}", I,
                     ir::dtypeName(C.inputType(I).Type),
                     ir::dtypeName(C.inputType(0).Type));
    auto Labels = spellOut(C, Terms[I], C.inputType(I).rank(), I);
    if (!Labels)
      return Labels.takeError();
    for (size_t D = 0; D < Labels->size(); ++D)
      if (Labels->find((*Labels)[D], D + 1) != std::string::npos)
        return C.error("{0} repeats in operand {1} ('{2}'): diagonals are "
                       "not supported",
                       labelName((*Labels)[D]), I, Terms[I]);
    MaxEllipsis = std::max<unsigned>(MaxEllipsis,
                                     llvm::count_if(*Labels, isEllipsisLabel));
    TAKE(Value, inputPart(C, I));
    Operands.push_back({std::move(Value), std::move(*Labels)});
  }
  // The output's labels: as written (an ellipsis left out is summed, as
  // ONNX and numpy do), or, in implicit mode, the ellipsis, then the letters
  // used once, in ASCII order.
  std::string Out, Ellipsis;
  for (unsigned K = MaxEllipsis; K > 0; --K)
    Ellipsis += static_cast<char>(EllipsisLabel + K - 1);
  if (Explicit) {
    if (Right.count("...") > 1)
      return C.error("equation output '{0}' has two ellipses", Right);
    std::string Letters = Right.str();
    size_t Dots = Right.find("...");
    if (Dots != llvm::StringRef::npos)
      Letters.erase(Dots, 3);
    for (char L : Letters) {
      if (!llvm::isAlpha(L))
        return C.error("equation output '{0}' has {1}; only letters and one "
                       "ellipsis are allowed",
                       Right, charName(L));
      if (llvm::none_of(Operands,
                        [&](const Labelled &X) { return has(X.Labels, L); }))
        return C.error("output label '{0}' is in no operand", L);
    }
    for (size_t D = 0; D < Letters.size(); ++D)
      if (Letters.find(Letters[D], D + 1) != std::string::npos)
        return C.error("output label '{0}' repeats", Letters[D]);
    if (Dots != llvm::StringRef::npos)
      Letters.insert(Dots, Ellipsis);
    Out = Letters;
  } else {
    std::map<char, int> Uses;
    for (const Labelled &X : Operands)
      for (char L : X.Labels)
        if (llvm::isAlpha(L))
          ++Uses[L];
    Out = Ellipsis;
    for (auto [L, N] : Uses)
      if (N == 1)
        Out += L;
  }
  // Contract pairs greedily: of the pairs that share a label (any pair when
  // none does), the one with the smallest result, the first such pair on
  // ties; each keeps what the output or another operand needs.
  while (Operands.size() > 1) {
    size_t BestI = 0, BestJ = 1;
    double BestSize = 0;
    bool BestShares = false, Found = false;
    std::string BestKeep;
    for (size_t I = 0; I < Operands.size(); ++I)
      for (size_t J = I + 1; J < Operands.size(); ++J) {
        std::string Keep = Out;
        for (size_t Other = 0; Other < Operands.size(); ++Other)
          if (Other != I && Other != J)
            Keep += Operands[Other].Labels;
        bool Shares = llvm::any_of(Operands[I].Labels, [&](char L) {
          return has(Operands[J].Labels, L);
        });
        double Size = resultSize(Operands[I], Operands[J], Keep);
        if (!Found || (Shares && !BestShares) ||
            (Shares == BestShares && Size < BestSize)) {
          Found = true;
          BestI = I;
          BestJ = J;
          BestSize = Size;
          BestShares = Shares;
          BestKeep = std::move(Keep);
        }
      }
    auto Next = contract(C, std::move(Operands[BestI]),
                         std::move(Operands[BestJ]), BestKeep);
    if (!Next)
      return Next.takeError();
    Operands.erase(Operands.begin() + BestJ);
    Operands[BestI] = std::move(*Next);
  }
  auto Summed = sumAllBut(C, std::move(Operands[0]), Out);
  if (!Summed)
    return Summed.takeError();
  auto Final = permuteTo(C, std::move(*Summed), Out);
  if (!Final)
    return Final.takeError();
  return bindPart(C, std::move(Final->Value));
}

} // namespace onnx2soap::onnx_import::handlers
