//===- onnx_import/handlers/Shape.cpp - Shape and data-movement ONNX ops --===//
//
// Everything that takes a shape, axes or indices as an input tensor: those
// inputs must be known at import time (constants, or computed from static
// shapes), and become the IR's explicit attributes. Squeeze, Unsqueeze and
// Flatten become Reshape. Shape, Size, Constant, ConstantOfShape and Range
// only ever produce constants.
//
//===----------------------------------------------------------------------===//
#include "onnx_import/handlers/Handlers.h"
#include "llvm/ADT/STLExtras.h"
#include <algorithm>
#include <cmath>

namespace onnx2soap::onnx_import::handlers {

using ir::IntList;
using ir::OpKind;
using ir::Shape;

llvm::Expected<IntList> intsOf(NodeContext &C, unsigned I,
                               llvm::StringRef What) {
  auto Value = C.requireConstant(I, What);
  if (!Value)
    return Value.takeError();
  if ((*Value)->isFloat())
    return C.error("{0} must be an integer tensor", What);
  return IntList((*Value)->Ints.begin(), (*Value)->Ints.end());
}

llvm::Error requireInputType(NodeContext &C, llvm::ArrayRef<ir::DType> Types,
                             llvm::StringRef Names) {
  ir::DType Type = C.inputType(0).Type;
  if (!llvm::is_contained(Types, Type))
    return C.error("input of type {0} is not supported ({1})",
                   ir::dtypeName(Type), Names);
  return llvm::Error::success();
}

llvm::Error normalizeAxes(NodeContext &C, IntList &Axes, unsigned Rank,
                          bool Unique) {
  for (int64_t &A : Axes) {
    auto N = ir::normalizeAxis(A, Rank);
    if (!N)
      return C.error("axis {0} is out of range for rank {1}", A, Rank);
    A = *N;
  }
  if (Unique) {
    IntList Sorted = Axes;
    std::sort(Sorted.begin(), Sorted.end());
    if (std::adjacent_find(Sorted.begin(), Sorted.end()) != Sorted.end())
      return C.error("axes {0} repeat an axis", ir::formatShape(Axes));
  }
  return llvm::Error::success();
}

static llvm::Error reshapeTo(NodeContext &C, const Shape &Target) {
  ir::Attributes Attrs;
  Attrs.set("shape", IntList(Target.begin(), Target.end()));
  return C.emitOrFold(OpKind::Reshape, {0}, std::move(Attrs));
}

llvm::Error reshape(NodeContext &C) {
  if (auto E = C.checkAttributes({"allowzero"}))
    return E;
  auto AllowZero = C.getInt("allowzero", 0);
  if (!AllowZero)
    return AllowZero.takeError();
  auto Requested = intsOf(C, 1, "shape");
  if (!Requested)
    return Requested.takeError();
  const Shape &In = C.inputType(0).Dims;
  Shape Target;
  int Inferred = -1;
  int64_t Known = 1;
  for (size_t I = 0; I < Requested->size(); ++I) {
    int64_t D = (*Requested)[I];
    if (D == 0 && !*AllowZero) {
      if (I >= In.size())
        return C.error("shape {0} copies dim {1}, but the input {2} has no "
                       "such dim",
                       ir::formatShape(*Requested), I, ir::formatShape(In));
      D = In[I];
    }
    if (D == -1) {
      if (Inferred >= 0)
        return C.error("shape {0} has more than one -1",
                       ir::formatShape(*Requested));
      Inferred = static_cast<int>(I);
    } else if (D < 0) {
      return C.error("shape {0} has a negative dim",
                     ir::formatShape(*Requested));
    } else {
      if (D != 0 && Known > ir::MaxTensorExtent / D)
        return C.error("shape {0} is too large", ir::formatShape(*Requested));
      Known *= D;
    }
    Target.push_back(D);
  }
  int64_t Count = C.inputType(0).numElements();
  if (Inferred >= 0) {
    if (Known == 0 || Count % Known != 0)
      return C.error("cannot reshape {0} to {1}", ir::formatShape(In),
                     ir::formatShape(*Requested));
    Target[Inferred] = Count / Known;
  }
  return reshapeTo(C, Target);
}

llvm::Error flatten(NodeContext &C) {
  if (auto E = C.checkAttributes({"axis"}))
    return E;
  auto Axis = C.getInt("axis", 1);
  if (!Axis)
    return Axis.takeError();
  const Shape &In = C.inputType(0).Dims;
  int64_t Rank = In.size(), A = *Axis < 0 ? *Axis + Rank : *Axis;
  if (A < 0 || A > Rank)
    return C.error("axis {0} is out of range for input {1}", *Axis,
                   ir::formatShape(In));
  int64_t Outer = ir::numElements(llvm::ArrayRef<int64_t>(In).take_front(A));
  int64_t Inner = ir::numElements(llvm::ArrayRef<int64_t>(In).drop_front(A));
  return reshapeTo(C, Shape{Outer, Inner});
}

/// Axes from the attribute (older opsets) or from input 1.
static llvm::Expected<std::optional<IntList>> axesOf(NodeContext &C) {
  auto Attr = C.getInts("axes");
  if (!Attr)
    return Attr.takeError();
  if (*Attr)
    return *Attr;
  if (!C.hasInput(1))
    return std::nullopt;
  auto Axes = intsOf(C, 1, "axes");
  if (!Axes)
    return Axes.takeError();
  return std::optional<IntList>(std::move(*Axes));
}

llvm::Error squeeze(NodeContext &C) {
  if (auto E = C.checkAttributes({"axes"}))
    return E;
  auto Axes = axesOf(C);
  if (!Axes)
    return Axes.takeError();
  const Shape &In = C.inputType(0).Dims;
  IntList Remove;
  if (*Axes) {
    Remove = **Axes;
    if (auto E = normalizeAxes(C, Remove, In.size()))
      return E;
    for (int64_t A : Remove)
      if (In[A] != 1)
        return C.error("cannot squeeze dim {0} of size {1}", A, In[A]);
  } else {
    for (size_t I = 0; I < In.size(); ++I)
      if (In[I] == 1)
        Remove.push_back(I);
  }
  Shape Target;
  for (size_t I = 0; I < In.size(); ++I)
    if (std::find(Remove.begin(), Remove.end(), int64_t(I)) == Remove.end())
      Target.push_back(In[I]);
  return reshapeTo(C, Target);
}

llvm::Error unsqueeze(NodeContext &C) {
  if (auto E = C.checkAttributes({"axes"}))
    return E;
  auto Axes = axesOf(C);
  if (!Axes)
    return Axes.takeError();
  if (!*Axes)
    return C.error("axes are required");
  const Shape &In = C.inputType(0).Dims;
  IntList Insert = **Axes;
  unsigned Rank = In.size() + Insert.size();
  if (auto E = normalizeAxes(C, Insert, Rank))
    return E;
  Shape Target;
  size_t Next = 0;
  for (unsigned I = 0; I < Rank; ++I) {
    if (std::find(Insert.begin(), Insert.end(), int64_t(I)) != Insert.end())
      Target.push_back(1);
    else
      Target.push_back(In[Next++]);
  }
  return reshapeTo(C, Target);
}

llvm::Error transpose(NodeContext &C) {
  if (auto E = C.checkAttributes({"perm"}))
    return E;
  auto Perm = C.getInts("perm");
  if (!Perm)
    return Perm.takeError();
  IntList P;
  unsigned Rank = C.inputType(0).rank();
  if (*Perm) {
    P = **Perm;
  } else {
    for (unsigned I = Rank; I-- > 0;)
      P.push_back(I);
  }
  ir::Attributes Attrs;
  Attrs.set("perm", std::move(P));
  return C.emitOrFold(OpKind::Transpose, {0}, std::move(Attrs));
}

llvm::Error concat(NodeContext &C) {
  if (auto E = C.checkAttributes({"axis"}))
    return E;
  auto Axis = C.getInt("axis", 0);
  if (!Axis)
    return Axis.takeError();
  if (C.numInputs() == 0)
    return C.error("Concat needs at least one input");
  auto A = ir::normalizeAxis(*Axis, C.inputType(0).rank());
  if (!A)
    return C.error("axis {0} is out of range for input {1}", *Axis,
                   ir::formatShape(C.inputType(0).Dims));
  llvm::SmallVector<int, 4> Inputs;
  for (unsigned I = 0; I < C.numInputs(); ++I) {
    if (!C.hasInput(I))
      return C.error("input {0} is empty", I);
    Inputs.push_back(I);
  }
  ir::Attributes Attrs;
  Attrs.set("axis", static_cast<int64_t>(*A));
  return C.emitOrFold(OpKind::Concat, Inputs, std::move(Attrs));
}

llvm::Error split(NodeContext &C) {
  if (auto E = C.checkAttributes({"axis", "split", "num_outputs"}))
    return E;
  auto Axis = C.getInt("axis", 0);
  auto SplitAttr = C.getInts("split");
  auto NumOutputs = C.getInt("num_outputs", 0);
  if (!Axis)
    return Axis.takeError();
  if (!SplitAttr)
    return SplitAttr.takeError();
  if (!NumOutputs)
    return NumOutputs.takeError();
  // Split-13 moved 'split' to an input; Split-18 added num_outputs.
  if (*SplitAttr)
    return C.error("the 'split' attribute was replaced by an input in opset "
                   "13; this model uses opset {0}",
                   C.opset());
  if (C.attr("num_outputs") && C.opset() < 18)
    return C.error("num_outputs exists from opset 18 on; this model uses "
                   "opset {0}",
                   C.opset());
  const Shape &In = C.inputType(0).Dims;
  auto A = ir::normalizeAxis(*Axis, In.size());
  if (!A)
    return C.error("axis {0} is out of range for input {1}", *Axis,
                   ir::formatShape(In));
  IntList Sizes;
  int64_t Dim = In[*A];
  if (C.hasInput(1)) {
    auto S = intsOf(C, 1, "split");
    if (!S)
      return S.takeError();
    Sizes = std::move(*S);
  } else {
    // num_outputs (opset 18) or the node's output count: equal parts, the
    // last one smaller when the dim does not divide.
    int64_t N = *NumOutputs ? *NumOutputs : C.numOutputs();
    if (N <= 0)
      return C.error("Split has no outputs");
    int64_t Part = (Dim + N - 1) / N;
    if (!*NumOutputs && Dim % N != 0)
      return C.error("dim {0} of size {1} does not split into {2} equal "
                     "parts",
                     *A, Dim, N);
    for (int64_t I = 0; I < N; ++I)
      Sizes.push_back(std::max<int64_t>(0, std::min(Part, Dim - I * Part)));
  }
  if (Sizes.size() != C.numOutputs())
    return C.error("split has {0} sizes for {1} outputs", Sizes.size(),
                   C.numOutputs());
  ir::Attributes Attrs;
  Attrs.set("axis", static_cast<int64_t>(*A));
  Attrs.set("split", std::move(Sizes));
  return C.emitOrFold(OpKind::Split, {0}, std::move(Attrs));
}

llvm::Error slice(NodeContext &C) {
  if (auto E = C.checkAttributes({}))
    return E;
  const Shape &In = C.inputType(0).Dims;
  auto Starts = intsOf(C, 1, "starts");
  if (!Starts)
    return Starts.takeError();
  auto Ends = intsOf(C, 2, "ends");
  if (!Ends)
    return Ends.takeError();
  IntList Axes, Steps;
  if (C.hasInput(3)) {
    auto A = intsOf(C, 3, "axes");
    if (!A)
      return A.takeError();
    Axes = std::move(*A);
  } else {
    for (size_t I = 0; I < Starts->size(); ++I)
      Axes.push_back(I);
  }
  if (C.hasInput(4)) {
    auto S = intsOf(C, 4, "steps");
    if (!S)
      return S.takeError();
    Steps = std::move(*S);
  } else {
    Steps.assign(Starts->size(), 1);
  }
  if (Ends->size() != Starts->size() || Axes.size() != Starts->size() ||
      Steps.size() != Starts->size())
    return C.error("starts, ends, axes and steps differ in length");
  if (auto E = normalizeAxes(C, Axes, In.size()))
    return E;
  IntList S(In.size(), 0), E(In.begin(), In.end()), St(In.size(), 1);
  for (size_t I = 0; I < Axes.size(); ++I) {
    int64_t Dim = In[Axes[I]], Step = Steps[I];
    if (Step == 0)
      return C.error("slice step of axis {0} is zero", Axes[I]);
    // ONNX: negative positions count from the end, then clamp; a negative
    // step clamps to [-1, dim-1] (as INT_MIN style "before the start").
    auto Clamp = [&](int64_t V, bool IsEnd) {
      if (V < 0)
        V = V < -Dim ? (Step > 0 || !IsEnd ? 0 : -1) : V + Dim;
      if (Step > 0)
        return std::clamp<int64_t>(V, 0, Dim);
      return std::clamp<int64_t>(V, IsEnd ? -1 : 0, Dim - 1);
    };
    S[Axes[I]] = Clamp((*Starts)[I], false);
    E[Axes[I]] = Clamp((*Ends)[I], true);
    // A step longer than the dim takes one element, as the dim's length
    // does: clamped so that no step times a stride overflows.
    int64_t Longest = std::max<int64_t>(Dim, 1);
    St[Axes[I]] = std::clamp<int64_t>(Step, -Longest, Longest);
  }
  ir::Attributes Attrs;
  Attrs.set("starts", std::move(S));
  Attrs.set("ends", std::move(E));
  Attrs.set("steps", std::move(St));
  return C.emitOrFold(OpKind::Slice, {0}, std::move(Attrs));
}

llvm::Error pad(NodeContext &C) {
  if (auto E = C.checkAttributes({"mode"}))
    return E;
  auto Mode = C.getString("mode", "constant");
  if (!Mode)
    return Mode.takeError();
  if (*Mode == "wrap" && C.opset() < 19)
    return C.error("pad mode 'wrap' exists from opset 19 on; this model uses "
                   "opset {0}",
                   C.opset());
  const Shape &In = C.inputType(0).Dims;
  auto Pads = intsOf(C, 1, "pads");
  if (!Pads)
    return Pads.takeError();
  IntList Axes;
  if (C.hasInput(3) && C.opset() < 18)
    return C.error("the axes input exists from opset 18 on; this model uses "
                   "opset {0}",
                   C.opset());
  if (C.hasInput(3)) {
    auto A = intsOf(C, 3, "axes");
    if (!A)
      return A.takeError();
    Axes = std::move(*A);
    if (auto E = normalizeAxes(C, Axes, In.size()))
      return E;
  } else {
    for (size_t I = 0; I < In.size(); ++I)
      Axes.push_back(I);
  }
  if (Pads->size() != 2 * Axes.size())
    return C.error("pads {0} must have 2 x {1} values", ir::formatShape(*Pads),
                   Axes.size());
  IntList Full(2 * In.size(), 0);
  for (size_t I = 0; I < Axes.size(); ++I) {
    Full[Axes[I]] = (*Pads)[I];
    Full[In.size() + Axes[I]] = (*Pads)[Axes.size() + I];
  }
  double Value = 0;
  if (C.hasInput(2)) {
    auto V = C.requireConstant(2, "constant_value");
    if (!V)
      return V.takeError();
    if ((*V)->numElements() != 1)
      return C.error("constant_value must have one element");
    Value = (*V)->floatAt(0);
  }
  ir::Attributes Attrs;
  Attrs.set("pads", std::move(Full));
  Attrs.set("mode", *Mode);
  Attrs.set("value", Value);
  return C.emitOrFold(OpKind::Pad, {0}, std::move(Attrs));
}

llvm::Error expand(NodeContext &C) {
  if (auto E = C.checkAttributes({}))
    return E;
  auto Target = intsOf(C, 1, "shape");
  if (!Target)
    return Target.takeError();
  for (int64_t D : *Target)
    if (D < 0)
      return C.error("shape {0} has a negative dim", ir::formatShape(*Target));
  ir::Attributes Attrs;
  Attrs.set("shape", std::move(*Target));
  return C.emitOrFold(OpKind::Expand, {0}, std::move(Attrs));
}

/// The `axis` of a Gather or GatherElements node, normalized against the
/// data, after checking the indices that are known at import time.
static llvm::Expected<int64_t> gatherAxis(NodeContext &C) {
  if (auto E = C.checkAttributes({"axis"}))
    return std::move(E);
  auto Axis = C.getInt("axis", 0);
  if (!Axis)
    return Axis.takeError();
  const Shape &Data = C.inputType(0).Dims;
  auto A = ir::normalizeAxis(*Axis, Data.size());
  if (!A || Data.empty())
    return C.error("axis {0} is out of range for data {1}", *Axis,
                   ir::formatShape(Data));
  if (const ConstTensor *Indices = C.constant(1))
    for (int64_t I = 0; I < Indices->numElements(); ++I) {
      int64_t V = Indices->intAt(I);
      if (V < -Data[*A] || V >= Data[*A])
        return C.error("index {0} is out of range for dim {1} of size {2}", V,
                       *A, Data[*A]);
    }
  return static_cast<int64_t>(*A);
}

static llvm::Error gatherLike(NodeContext &C, OpKind Kind) {
  auto Axis = gatherAxis(C);
  if (!Axis)
    return Axis.takeError();
  ir::Attributes Attrs;
  Attrs.set("axis", *Axis);
  return C.emitOrFold(Kind, {0, 1}, std::move(Attrs));
}

llvm::Error gather(NodeContext &C) { return gatherLike(C, OpKind::Gather); }

llvm::Error gatherElements(NodeContext &C) {
  return gatherLike(C, OpKind::GatherElements);
}

//===-- Ops that always fold ----------------------------------------------===//

static ConstTensor int64Vector(llvm::ArrayRef<int64_t> Values) {
  ConstTensor T;
  T.Type = ir::DType::Int64;
  T.Dims = {static_cast<int64_t>(Values.size())};
  T.Ints.assign(Values.begin(), Values.end());
  return T;
}

llvm::Error shape(NodeContext &C) {
  if (auto E = C.checkAttributes({"start", "end"}))
    return E;
  const Shape &In = C.inputType(0).Dims;
  int64_t Rank = In.size();
  auto Start = C.getInt("start", 0);
  auto End = C.getInt("end", Rank);
  if (!Start)
    return Start.takeError();
  if (!End)
    return End.takeError();
  auto Clamp = [&](int64_t V) {
    return std::clamp<int64_t>(V < 0 ? V + Rank : V, 0, Rank);
  };
  int64_t S = Clamp(*Start), E = Clamp(*End);
  C.bindConstant(0, int64Vector(llvm::ArrayRef<int64_t>(In).slice(
                        S, std::max<int64_t>(E - S, 0))));
  return llvm::Error::success();
}

llvm::Error size(NodeContext &C) {
  if (auto E = C.checkAttributes({}))
    return E;
  ConstTensor T = int64Vector({C.inputType(0).numElements()});
  T.Dims.clear();
  C.bindConstant(0, std::move(T));
  return llvm::Error::success();
}

llvm::Error constant(NodeContext &C) {
  if (C.numInputs() != 0 || C.numOutputs() != 1)
    return C.error("Constant takes no inputs and has one output");
  if (C.attr("sparse_value") || C.attr("value_string") ||
      C.attr("value_strings"))
    return C.error("sparse and string constants are not supported");
  if (auto E = C.checkAttributes(
          {"value", "value_float", "value_floats", "value_int", "value_ints"}))
    return E;
  // Exactly one, of the type its name says (a value_float stored as an INT
  // read as 0).
  unsigned Given = 0;
  for (const char *Name :
       {"value", "value_float", "value_floats", "value_int", "value_ints"})
    Given += C.attr(Name) != nullptr;
  if (Given > 1)
    return C.error("Constant has {0} value attributes; it takes one", Given);
  ConstTensor T;
  if (const onnx::AttributeProto *A = C.attr("value")) {
    if (!A->has_t())
      return C.error("attribute 'value' must be a TENSOR");
    if (A->t().data_location() == onnx::TensorProto::EXTERNAL)
      return C.error("Constant with external data is not supported");
    for (int64_t D : A->t().dims())
      if (D < 0)
        return C.error("value has a negative dim");
    auto Decoded =
        decodeTensor(A->t(), A->t().raw_data(), A->t().has_raw_data());
    if (!Decoded)
      return C.wrap(Decoded.takeError());
    T = std::move(*Decoded);
  } else if (C.attr("value_float")) {
    auto V = C.getFloat("value_float", 0);
    if (!V)
      return V.takeError();
    T.Type = ir::DType::Float32;
    T.Floats = {*V};
  } else if (C.attr("value_floats")) {
    auto V = C.getFloats("value_floats");
    if (!V)
      return V.takeError();
    T.Type = ir::DType::Float32;
    T.Dims = {static_cast<int64_t>((*V)->size())};
    T.Floats.assign((*V)->begin(), (*V)->end());
  } else if (C.attr("value_int")) {
    auto V = C.getInt("value_int", 0);
    if (!V)
      return V.takeError();
    T.Ints = {*V};
  } else if (C.attr("value_ints")) {
    auto V = C.getInts("value_ints");
    if (!V)
      return V.takeError();
    T = int64Vector(**V);
  } else {
    return C.error("Constant has no value attribute");
  }
  C.bindConstant(0, std::move(T));
  return llvm::Error::success();
}

// A fill too large to build at import time (an RNN's zero initial state at
// a large batch) becomes Expand(scalar, shape): computed where it is used.
llvm::Error constantOfShape(NodeContext &C) {
  if (auto E = C.checkAttributes({"value"}))
    return E;
  auto Dims = intsOf(C, 0, "shape");
  if (!Dims)
    return Dims.takeError();
  auto Count = ir::checkedNumElements(*Dims);
  if (!Count)
    return C.error("shape {0} is invalid", ir::formatShape(*Dims));
  ConstTensor Fill = ConstTensor::zeros(ir::DType::Float32, {});
  if (const onnx::AttributeProto *A = C.attr("value")) {
    auto Decoded =
        decodeTensor(A->t(), A->t().raw_data(), A->t().has_raw_data());
    if (!Decoded)
      return C.wrap(Decoded.takeError());
    if (Decoded->numElements() != 1)
      return C.error("value must have one element");
    Fill = std::move(*Decoded);
    Fill.Dims.clear();
  }
  if (*Count > MaxFoldedElements) {
    ir::Attributes Attrs;
    Attrs.set("shape", std::move(*Dims));
    return C
        .emit(OpKind::Expand, {C.constantTensor(Fill, "value")},
              std::move(Attrs))
        .takeError();
  }
  ConstTensor T;
  T.Type = Fill.Type;
  T.Dims.assign(Dims->begin(), Dims->end());
  if (T.isFloat())
    T.Floats.assign(*Count, Fill.Floats[0]);
  else
    T.Ints.assign(*Count, Fill.Ints[0]);
  C.bindConstant(0, std::move(T));
  return llvm::Error::success();
}

llvm::Error range(NodeContext &C) {
  if (auto E = C.checkAttributes({}))
    return E;
  static const char *const Names[] = {"start", "limit", "delta"};
  const ConstTensor *Values[3];
  for (unsigned I = 0; I < 3; ++I) {
    auto V = C.requireConstant(I, Names[I]);
    if (!V)
      return V.takeError();
    if ((*V)->numElements() != 1)
      return C.error("Range inputs must be scalars");
    Values[I] = *V;
  }
  // ONNX: start, limit and delta share one type (an integer start with a
  // float delta read the delta's missing integers).
  if (Values[1]->Type != Values[0]->Type || Values[2]->Type != Values[0]->Type)
    return C.error("Range inputs must have one type (start {0}, limit {1}, "
                   "delta {2})",
                   ir::dtypeName(Values[0]->Type),
                   ir::dtypeName(Values[1]->Type),
                   ir::dtypeName(Values[2]->Type));
  ConstTensor T;
  T.Type = Values[0]->Type;
  double Start = Values[0]->floatAt(0), Limit = Values[1]->floatAt(0),
         Delta = Values[2]->floatAt(0);
  if (Delta == 0)
    return C.error("Range delta is zero");
  double Steps = std::ceil((Limit - Start) / Delta);
  int64_t N = Steps > 0 ? static_cast<int64_t>(std::min<double>(
                              Steps, double(MaxFoldedElements) + 1))
                        : 0;
  if (N > MaxFoldedElements)
    return C.error("Range of {0} elements is too large", Steps);
  T.Dims = {N};
  for (int64_t I = 0; I < N; ++I) {
    if (T.isFloat())
      T.Floats.push_back(Start + I * Delta);
    else
      T.Ints.push_back(Values[0]->Ints[0] + I * Values[2]->Ints[0]);
  }
  C.bindConstant(0, T.cast(T.Type));
  return llvm::Error::success();
}

} // namespace onnx2soap::onnx_import::handlers
