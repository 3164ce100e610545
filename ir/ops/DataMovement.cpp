//===- ir/ops/DataMovement.cpp - Reshape, Transpose, Concat, ... ----------===//
//
// Ops that move or select elements without arithmetic. Their region rules are
// what lets the planner place a transfer for exactly the elements a consumer
// partition needs.
//
// Attributes (static after import): Reshape `shape`; Transpose `perm`;
// Concat `axis`; Split `axis`, `split` (sizes); Slice `starts`, `ends`,
// `steps` (one per dim, clamped; a negative step may end at -1); Pad `pads`
// (begins then ends, negative crops), `mode` ("constant", "reflect", "edge",
// "wrap"), `value`; Expand `shape`; Gather and GatherElements `axis`.
//
//===----------------------------------------------------------------------===//
#include "ir/ops/OpHelpers.h"
#include "llvm/Support/MathExtras.h"
#include <algorithm>
#include <cstdint>

namespace onnx2soap::ir {
using namespace ops;

static OpCost movementCost(const Graph &G, const Op &O) {
  double Bytes = ioBytes(G, O);
  return {0, 0, Bytes, Bytes};
}

static OpKindInfo movementInfo(OpKind Kind, unsigned MinInputs,
                               unsigned MaxInputs) {
  OpKindInfo I;
  I.Kind = Kind;
  I.MinInputs = MinInputs;
  I.MaxInputs = MaxInputs;
  I.Cost = movementCost;
  I.Parallel = allAttribute;
  I.InputRegion = sameRegion;
  return I;
}

//===-- Reshape -----------------------------------------------------------===//

static llvm::Expected<OutputTypes> inferReshape(const Attributes &Attrs,
                                                InputTypes In) {
  auto Target = Attrs.getInts("shape");
  auto Count = checkedNumElements(Target);
  if (!Count || *Count != In[0]->numElements())
    return fail("cannot reshape {0} to {1}", formatShape(In[0]->Dims),
                formatShape(Target));
  return OutputTypes{
      TensorType{In[0]->Type, Shape(Target.begin(), Target.end())}};
}

/// Multi-index of linear index L in row-major Dims.
static Shape unflatten(int64_t L, llvm::ArrayRef<int64_t> Dims) {
  Shape Index(Dims.size(), 0);
  for (size_t I = Dims.size(); I-- > 0;) {
    Index[I] = L % Dims[I];
    L /= Dims[I];
  }
  return Index;
}

/// The bounding box, in shape InDims, of the row-major linear range that the
/// box Out of shape OutDims spans (both shapes hold the same elements).
static void linearBox(llvm::ArrayRef<int64_t> InDims,
                      llvm::ArrayRef<int64_t> OutDims,
                      llvm::ArrayRef<Interval> Out, Region &R) {
  int64_t First = 0, Last = 0;
  for (size_t I = 0; I < OutDims.size(); ++I) {
    First = First * OutDims[I] + Out[I].Begin;
    Last = Last * OutDims[I] + (Out[I].End - 1);
  }
  Shape A = unflatten(First, InDims), B = unflatten(Last, InDims);
  size_t I = 0;
  for (; I < InDims.size() && A[I] == B[I]; ++I)
    R.push_back({A[I], A[I] + 1});
  if (I < InDims.size())
    R.push_back({A[I], B[I] + 1});
  for (++I; I < InDims.size(); ++I)
    R.push_back({0, InDims[I]});
}

/// Reshape splits into groups of input and output dims with equal products
/// ([1,8] <-> [8], [4,6] <-> [24], unit dims on their own); within a group
/// the input box is the bounding box of the output box's linear range. That
/// is exact for squeezes, unsqueezes and splits of leading dims.
static Region reshapeRegion(const Graph &G, const Op &O, unsigned,
                            llvm::ArrayRef<Interval> Out, Interval) {
  const Shape &In = G.inputType(O, 0)->Dims;
  const Shape &OutDims = G.outputType(O).Dims;
  Region R;
  if (regionVolume(Out) == 0) {
    R.assign(In.size(), Interval{0, 0});
    return R;
  }
  size_t I = 0, J = 0;
  while (I < In.size() || J < OutDims.size()) {
    if (I < In.size() && In[I] == 1) {
      R.push_back({0, 1});
      ++I;
      continue;
    }
    if (J < OutDims.size() && OutDims[J] == 1) {
      ++J;
      continue;
    }
    size_t I0 = I, J0 = J;
    int64_t PIn = I < In.size() ? In[I++] : 1;
    int64_t POut = J < OutDims.size() ? OutDims[J++] : 1;
    while (PIn != POut && (I < In.size() || J < OutDims.size())) {
      if (PIn < POut && I < In.size())
        PIn *= In[I++];
      else if (J < OutDims.size())
        POut *= OutDims[J++];
      else
        PIn *= In[I++];
    }
    // Unit dims inside a group are part of it; zero-sized tensors end up in
    // one group, which is still a valid (full) box.
    linearBox(llvm::ArrayRef<int64_t>(In).slice(I0, I - I0),
              llvm::ArrayRef<int64_t>(OutDims).slice(J0, J - J0),
              Out.slice(J0, J - J0), R);
  }
  return R;
}

const OpKindInfo &infoReshape() {
  static const OpKindInfo Info = [] {
    OpKindInfo I = movementInfo(OpKind::Reshape, 1, 1);
    I.InferTypes = inferReshape;
    I.InputRegion = reshapeRegion;
    return I;
  }();
  return Info;
}

//===-- Transpose ---------------------------------------------------------===//

static llvm::Expected<OutputTypes> inferTranspose(const Attributes &Attrs,
                                                  InputTypes In) {
  const Shape &X = In[0]->Dims;
  auto Perm = Attrs.getInts("perm");
  if (Perm.size() != X.size())
    return fail("perm {0} does not match rank {1}", formatShape(Perm),
                X.size());
  llvm::SmallVector<bool, 4> Seen(X.size(), false);
  Shape Out;
  for (int64_t P : Perm) {
    if (P < 0 || P >= static_cast<int64_t>(X.size()) || Seen[P])
      return fail("perm {0} is not a permutation", formatShape(Perm));
    Seen[P] = true;
    Out.push_back(X[P]);
  }
  return OutputTypes{TensorType{In[0]->Type, Out}};
}

static Region transposeRegion(const Graph &G, const Op &O, unsigned,
                              llvm::ArrayRef<Interval> Out, Interval) {
  auto Perm = O.Attrs.getInts("perm");
  Region R(Perm.size());
  for (size_t I = 0; I < Perm.size(); ++I)
    R[Perm[I]] = Out[I];
  return R;
}

const OpKindInfo &infoTranspose() {
  static const OpKindInfo Info = [] {
    OpKindInfo I = movementInfo(OpKind::Transpose, 1, 1);
    I.InferTypes = inferTranspose;
    I.InputRegion = transposeRegion;
    return I;
  }();
  return Info;
}

//===-- Concat ------------------------------------------------------------===//

static llvm::Expected<OutputTypes> inferConcat(const Attributes &Attrs,
                                               InputTypes In) {
  Shape Out = In[0]->Dims;
  int64_t Axis = Attrs.getInt("axis");
  if (Axis < 0 || Axis >= static_cast<int64_t>(Out.size()))
    return fail("axis {0} is out of range for rank {1}", Axis, Out.size());
  for (size_t I = 1; I < In.size(); ++I) {
    const Shape &S = In[I]->Dims;
    if (In[I]->Type != In[0]->Type)
      return fail("input types differ: {0} and {1}", dtypeName(In[0]->Type),
                  dtypeName(In[I]->Type));
    bool Match = S.size() == Out.size();
    for (size_t D = 0; Match && D < S.size(); ++D)
      Match = D == static_cast<size_t>(Axis) || S[D] == Out[D];
    if (!Match)
      return fail("input {0} {1} does not match {2} outside axis {3}", I,
                  formatShape(S), formatShape(In[0]->Dims), Axis);
    Out[Axis] += S[Axis];
  }
  return OutputTypes{TensorType{In[0]->Type, Out}};
}

static Region concatRegion(const Graph &G, const Op &O, unsigned Input,
                           llvm::ArrayRef<Interval> Out, Interval) {
  int64_t Axis = O.Attrs.getInt("axis");
  int64_t Offset = 0;
  for (unsigned I = 0; I < Input; ++I)
    Offset += G.inputType(O, I)->Dims[Axis];
  int64_t Size = G.inputType(O, Input)->Dims[Axis];
  Region R(Out.begin(), Out.end());
  int64_t Begin = std::max(Out[Axis].Begin, Offset) - Offset;
  int64_t End = std::min(Out[Axis].End, Offset + Size) - Offset;
  R[Axis] = End > Begin ? Interval{Begin, End} : Interval{0, 0};
  return R;
}

const OpKindInfo &infoConcat() {
  static const OpKindInfo Info = [] {
    OpKindInfo I = movementInfo(OpKind::Concat, 1, 1u << 16);
    I.InferTypes = inferConcat;
    I.InputRegion = concatRegion;
    return I;
  }();
  return Info;
}

//===-- Split -------------------------------------------------------------===//

static llvm::Expected<OutputTypes> inferSplit(const Attributes &Attrs,
                                              InputTypes In) {
  const Shape &X = In[0]->Dims;
  int64_t Axis = Attrs.getInt("axis");
  if (Axis < 0 || Axis >= static_cast<int64_t>(X.size()))
    return fail("axis {0} is out of range for rank {1}", Axis, X.size());
  auto Sizes = Attrs.getInts("split");
  int64_t Total = 0;
  OutputTypes Out;
  for (int64_t S : Sizes) {
    if (S < 0 || llvm::AddOverflow(Total, S, Total))
      return fail("split sizes {0} must not be negative or add up past 2^63",
                  formatShape(Sizes));
    Shape D = X;
    D[Axis] = S;
    Out.push_back(TensorType{In[0]->Type, D});
  }
  if (Sizes.empty() || Total != X[Axis])
    return fail("split sizes {0} do not add up to dim {1} of size {2}",
                formatShape(Sizes), Axis, X[Axis]);
  return Out;
}

/// Outputs of a Split are partitioned alike, so its axis is not split.
static ParallelDims splitParallel(const Graph &G, const Op &O) {
  ParallelDims P = allAttribute(G, O);
  P.Output[O.Attrs.getInt("axis")] = DimKind::None;
  return P;
}

static Region splitRegion(const Graph &G, const Op &O, unsigned,
                          llvm::ArrayRef<Interval> Out, Interval) {
  Region R(Out.begin(), Out.end());
  int64_t Axis = O.Attrs.getInt("axis");
  R[Axis] = {0, G.inputType(O, 0)->Dims[Axis]};
  return R;
}

const OpKindInfo &infoSplit() {
  static const OpKindInfo Info = [] {
    OpKindInfo I = movementInfo(OpKind::Split, 1, 1);
    I.InferTypes = inferSplit;
    I.Parallel = splitParallel;
    I.InputRegion = splitRegion;
    return I;
  }();
  return Info;
}

//===-- Slice -------------------------------------------------------------===//

static llvm::Expected<OutputTypes> inferSlice(const Attributes &Attrs,
                                              InputTypes In) {
  const Shape &X = In[0]->Dims;
  auto Starts = Attrs.getInts("starts"), Ends = Attrs.getInts("ends"),
       Steps = Attrs.getInts("steps");
  if (Starts.size() != X.size() || Ends.size() != X.size() ||
      Steps.size() != X.size())
    return fail("starts/ends/steps do not cover the {0} dims", X.size());
  Shape Out;
  for (size_t I = 0; I < X.size(); ++I) {
    int64_t Step = Steps[I];
    if (Step == 0 || Step == INT64_MIN)
      return fail("slice step of dim {0} is {1}", I, Step);
    int64_t Span;
    if (Step > 0 ? llvm::SubOverflow(Ends[I], Starts[I], Span)
                 : llvm::SubOverflow(Starts[I], Ends[I], Span))
      return fail("slice of dim {0} from {1} to {2} is out of range", I,
                  Starts[I], Ends[I]);
    int64_t AbsStep = Step > 0 ? Step : -Step;
    Out.push_back(Span <= 0 ? 0 : (Span + AbsStep - 1) / AbsStep);
  }
  return OutputTypes{TensorType{In[0]->Type, Out}};
}

static Region sliceRegion(const Graph &G, const Op &O, unsigned,
                          llvm::ArrayRef<Interval> Out, Interval) {
  auto Starts = O.Attrs.getInts("starts"), Steps = O.Attrs.getInts("steps");
  Region R;
  for (size_t I = 0; I < Out.size(); ++I) {
    if (Out[I].empty()) {
      R.push_back({0, 0});
      continue;
    }
    int64_t A = Starts[I] + Out[I].Begin * Steps[I];
    int64_t B = Starts[I] + (Out[I].End - 1) * Steps[I];
    R.push_back({std::min(A, B), std::max(A, B) + 1});
  }
  return R;
}

const OpKindInfo &infoSlice() {
  static const OpKindInfo Info = [] {
    OpKindInfo I = movementInfo(OpKind::Slice, 1, 1);
    I.InferTypes = inferSlice;
    I.InputRegion = sliceRegion;
    return I;
  }();
  return Info;
}

//===-- Pad ---------------------------------------------------------------===//

static llvm::Expected<OutputTypes> inferPad(const Attributes &Attrs,
                                            InputTypes In) {
  const Shape &X = In[0]->Dims;
  auto Pads = Attrs.getInts("pads");
  if (Pads.size() != 2 * X.size())
    return fail("pads {0} must have 2 x {1} values", formatShape(Pads),
                X.size());
  llvm::StringRef Mode = Attrs.getString("mode", "constant");
  Shape Out;
  for (size_t I = 0; I < X.size(); ++I) {
    int64_t D;
    if (llvm::AddOverflow(X[I], Pads[I], D) ||
        llvm::AddOverflow(D, Pads[X.size() + I], D))
      return fail("pads {0} take dim {1} past 2^63", formatShape(Pads), I);
    if (D < 0)
      return fail("pads {0} crop dim {1} of size {2} below zero",
                  formatShape(Pads), I, X[I]);
    if (Mode == "reflect" && X[I] < 2 && D != X[I])
      return fail("reflect padding needs dim {0} of at least 2", I);
    if (Mode != "constant" && X[I] == 0 && D != 0)
      return fail("{0} padding of the empty dim {1}", Mode, I);
    Out.push_back(D);
  }
  if (Mode != "constant" && Mode != "reflect" && Mode != "edge" &&
      Mode != "wrap")
    return fail("unknown pad mode '{0}'", Mode);
  return OutputTypes{TensorType{In[0]->Type, Out}};
}

static Region padRegion(const Graph &G, const Op &O, unsigned,
                        llvm::ArrayRef<Interval> Out, Interval) {
  const Shape &X = G.inputType(O, 0)->Dims;
  auto Pads = O.Attrs.getInts("pads");
  bool Constant = O.Attrs.getString("mode", "constant") == "constant";
  Region R;
  for (size_t I = 0; I < X.size(); ++I) {
    bool Padded = Pads[I] != 0 || Pads[X.size() + I] != 0;
    if (Out[I].empty()) {
      R.push_back({0, 0});
    } else if (!Padded) {
      R.push_back(Out[I]);
    } else if (!Constant) {
      // Reflected and edge values may come from anywhere along the dim.
      R.push_back({0, X[I]});
    } else {
      int64_t B = std::clamp<int64_t>(Out[I].Begin - Pads[I], 0, X[I]);
      int64_t E = std::clamp<int64_t>(Out[I].End - Pads[I], 0, X[I]);
      R.push_back(E > B ? Interval{B, E} : Interval{0, 0});
    }
  }
  return R;
}

const OpKindInfo &infoPad() {
  static const OpKindInfo Info = [] {
    OpKindInfo I = movementInfo(OpKind::Pad, 1, 1);
    I.InferTypes = inferPad;
    I.InputRegion = padRegion;
    return I;
  }();
  return Info;
}

//===-- Expand ------------------------------------------------------------===//

static llvm::Expected<OutputTypes> inferExpand(const Attributes &Attrs,
                                               InputTypes In) {
  auto TargetList = Attrs.getInts("shape");
  Shape Target(TargetList.begin(), TargetList.end());
  const Shape *Shapes[] = {&In[0]->Dims, &Target};
  auto Out = broadcastShapes(Shapes);
  if (!Out)
    return fail("cannot expand {0} to {1}", formatShape(In[0]->Dims),
                formatShape(Target));
  return OutputTypes{TensorType{In[0]->Type, *Out}};
}

const OpKindInfo &infoExpand() {
  static const OpKindInfo Info = [] {
    OpKindInfo I = movementInfo(OpKind::Expand, 1, 1);
    I.InferTypes = inferExpand;
    return I;
  }();
  return Info;
}

//===-- Gather ------------------------------------------------------------===//

static llvm::Expected<OutputTypes> inferGather(const Attributes &Attrs,
                                               InputTypes In) {
  const Shape &Data = In[0]->Dims, &Indices = In[1]->Dims;
  int64_t Axis = Attrs.getInt("axis");
  if (Axis < 0 || Axis >= static_cast<int64_t>(Data.size()))
    return fail("axis {0} is out of range for data {1}", Axis,
                formatShape(Data));
  if (In[1]->Type != DType::Int64 && In[1]->Type != DType::Int32)
    return fail("indices must be int32 or int64, got {0}",
                dtypeName(In[1]->Type));
  Shape Out(Data.begin(), Data.begin() + Axis);
  Out.append(Indices.begin(), Indices.end());
  Out.append(Data.begin() + Axis + 1, Data.end());
  return OutputTypes{TensorType{In[0]->Type, Out}};
}

static OpCost gatherCost(const Graph &G, const Op &O) {
  double Out = G.outputType(O).byteSize();
  double Indices = G.inputType(O, 1)->byteSize();
  // Reads the gathered rows and the indices, writes the output; backward
  // scatter-adds into the data gradient.
  return {0, double(G.outputType(O).numElements()), 2 * Out + Indices,
          2 * Out + Indices};
}

static ParallelDims gatherParallel(const Graph &G, const Op &O) {
  ParallelDims P = allAttribute(G, O);
  if (!isWeight(G, O, 0))
    return P;
  // An embedding lookup: dims after the indices split the table's columns.
  size_t Axis = O.Attrs.getInt("axis");
  size_t IndexRank = G.inputType(O, 1)->rank();
  for (size_t I = 0; I < P.Output.size(); ++I)
    if (I < Axis || I >= Axis + IndexRank)
      P.Output[I] = DimKind::Parameter;
  return P;
}

static Region gatherRegion(const Graph &G, const Op &O, unsigned Input,
                           llvm::ArrayRef<Interval> Out, Interval) {
  const Shape &Data = G.inputType(O, 0)->Dims;
  size_t Axis = O.Attrs.getInt("axis");
  size_t IndexRank = G.inputType(O, 1)->rank();
  if (Input == 1)
    return Region(Out.begin() + Axis, Out.begin() + Axis + IndexRank);
  Region R(Out.begin(), Out.begin() + Axis);
  // Which rows are read depends on the index values: all of them.
  R.push_back({0, Data[Axis]});
  R.append(Out.begin() + Axis + IndexRank, Out.end());
  return R;
}

const OpKindInfo &infoGather() {
  static const OpKindInfo Info = [] {
    OpKindInfo I = movementInfo(OpKind::Gather, 2, 2);
    I.WeightInputs = 0b01;
    I.NoGradInputs = 0b10;
    I.InferTypes = inferGather;
    I.Cost = gatherCost;
    I.Parallel = gatherParallel;
    I.InputRegion = gatherRegion;
    return I;
  }();
  return Info;
}

//===-- GatherElements ----------------------------------------------------===//

static llvm::Expected<OutputTypes> inferGatherElements(const Attributes &Attrs,
                                                       InputTypes In) {
  const Shape &Data = In[0]->Dims, &Indices = In[1]->Dims;
  int64_t Axis = Attrs.getInt("axis");
  if (Axis < 0 || Axis >= static_cast<int64_t>(Data.size()))
    return fail("axis {0} is out of range for data {1}", Axis,
                formatShape(Data));
  if (In[1]->Type != DType::Int64 && In[1]->Type != DType::Int32)
    return fail("indices must be int32 or int64, got {0}",
                dtypeName(In[1]->Type));
  if (Indices.size() != Data.size())
    return fail("indices {0} must have the rank of data {1}",
                formatShape(Indices), formatShape(Data));
  for (size_t D = 0; D < Data.size(); ++D)
    if (static_cast<int64_t>(D) != Axis && Indices[D] > Data[D])
      return fail("indices {0} are larger than data {1} in dim {2}",
                  formatShape(Indices), formatShape(Data), D);
  return OutputTypes{TensorType{In[0]->Type, Indices}};
}

static OpCost gatherElementsCost(const Graph &G, const Op &O) {
  double Out = G.outputType(O).byteSize();
  double Indices = G.inputType(O, 1)->byteSize();
  return {0, double(G.outputType(O).numElements()), 2 * Out + Indices,
          2 * Out + Indices};
}

/// Output element e reads the data at e's position but along the axis,
/// where its index says: the whole axis of the data, the same box of the
/// indices.
static Region gatherElementsRegion(const Graph &G, const Op &O, unsigned Input,
                                   llvm::ArrayRef<Interval> Out, Interval) {
  Region R(Out.begin(), Out.end());
  if (Input == 0) {
    size_t Axis = O.Attrs.getInt("axis");
    R[Axis] = {0, G.inputType(O, 0)->Dims[Axis]};
  }
  return R;
}

const OpKindInfo &infoGatherElements() {
  static const OpKindInfo Info = [] {
    OpKindInfo I = movementInfo(OpKind::GatherElements, 2, 2);
    I.NoGradInputs = 0b10;
    I.InferTypes = inferGatherElements;
    I.Cost = gatherElementsCost;
    I.InputRegion = gatherElementsRegion;
    return I;
  }();
  return Info;
}

} // namespace onnx2soap::ir
