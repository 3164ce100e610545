//===- ir/ops/Normalization.cpp - Normalization, softmax, reductions ------===//
//
// Ops that reduce over some dims: those dims cannot be split (DimKind::None)
// without a cross-partition reduction, the others can.
//
// Attributes: BatchNorm `epsilon`, `momentum`, `training` (0/1; training
// mode has outputs Y, running_mean, running_var). LayerNorm `axis` (first
// normalized dim, non-negative), `epsilon` (outputs Y, Mean, InvStdDev).
// Softmax / LogSoftmax `axis` (non-negative). ReduceMean / ReduceSum /
// ReduceMax / ReduceMin `axes` (sorted, non-negative, non-empty) and
// `keepdims`. CumSum `axis` (non-negative), `exclusive` and `reverse`
// (0/1): like Softmax, its axis cannot be split.
//
//===----------------------------------------------------------------------===//
#include "ir/ops/OpHelpers.h"
#include <algorithm>

namespace onnx2soap::ir {
using namespace ops;

//===-- BatchNorm ---------------------------------------------------------===//

static llvm::Expected<OutputTypes> inferBatchNorm(const Attributes &Attrs,
                                                  InputTypes In) {
  const Shape &X = In[0]->Dims;
  if (X.size() < 2)
    return fail("input {0} must be [N,C,...]", formatShape(X));
  static const char *const Names[] = {"", "scale", "bias", "mean", "var"};
  for (unsigned I = 1; I < 5; ++I)
    if (In[I]->Dims.size() != 1 || In[I]->Dims[0] != X[1])
      return fail("{0} {1} does not match {2} channels", Names[I],
                  formatShape(In[I]->Dims), X[1]);
  OutputTypes Out{*In[0]};
  if (Attrs.getInt("training")) {
    Out.push_back(*In[3]);
    Out.push_back(*In[4]);
  }
  return Out;
}

static OpCost batchNormCost(const Graph &G, const Op &O) {
  // Training mode also computes the batch statistics (two more passes).
  bool Training = O.Attrs.getInt("training");
  return elementwiseCost(G, O, Training ? 8 : 2, 12);
}

static ParallelDims batchNormParallel(const Graph &G, const Op &O) {
  ParallelDims P = allAttribute(G, O);
  P.Output[0] = DimKind::Sample;
  P.Output[1] = DimKind::Parameter;
  return P;
}

static Region batchNormRegion(const Graph &G, const Op &O, unsigned Input,
                              llvm::ArrayRef<Interval> Out, Interval) {
  if (Input == 0)
    return Region(Out.begin(), Out.end());
  return {Out[1]};
}

/// The running statistics (outputs 1 and 2) of the channels the partition
/// normalizes.
static Region batchNormOutputRegion(const Graph &, const Op &, unsigned,
                                    llvm::ArrayRef<Interval> Out, Interval) {
  return {Out[1]};
}

const OpKindInfo &infoBatchNorm() {
  static const OpKindInfo Info = [] {
    OpKindInfo I;
    I.Kind = OpKind::BatchNorm;
    I.MinInputs = I.MaxInputs = 5;
    I.WeightInputs = 0b00110;
    I.StateInputs = 0b11000;
    I.NoGradInputs = 0b11000;
    I.InferTypes = inferBatchNorm;
    I.Cost = batchNormCost;
    I.Parallel = batchNormParallel;
    I.OutputRegion = batchNormOutputRegion;
    I.InputRegion = batchNormRegion;
    return I;
  }();
  return Info;
}

//===-- LayerNorm ---------------------------------------------------------===//

static llvm::Expected<OutputTypes> inferLayerNorm(const Attributes &Attrs,
                                                  InputTypes In) {
  const Shape &X = In[0]->Dims;
  int64_t Axis = Attrs.getInt("axis");
  if (Axis < 0 || Axis >= static_cast<int64_t>(X.size()))
    return fail("axis {0} is out of range for input {1}", Axis, formatShape(X));
  Shape Normalized(X.begin() + Axis, X.end());
  for (unsigned I = 1; I < In.size(); ++I) {
    if (!In[I])
      continue;
    const Shape *Shapes[] = {&In[I]->Dims, &Normalized};
    auto B = broadcastShapes(Shapes);
    if (!B || *B != Normalized)
      return fail("{0} {1} does not broadcast to the normalized shape {2}",
                  I == 1 ? "scale" : "bias", formatShape(In[I]->Dims),
                  formatShape(Normalized));
  }
  Shape Stats(X.begin(), X.begin() + Axis);
  Stats.append(X.size() - Axis, 1);
  return OutputTypes{*In[0], TensorType{DType::Float32, Stats},
                     TensorType{DType::Float32, Stats}};
}

static ParallelDims layerNormParallel(const Graph &G, const Op &O) {
  ParallelDims P = allAttribute(G, O);
  for (size_t I = O.Attrs.getInt("axis"); I < P.Output.size(); ++I)
    P.Output[I] = DimKind::None;
  return P;
}

static Region layerNormRegion(const Graph &G, const Op &O, unsigned Input,
                              llvm::ArrayRef<Interval> Out, Interval) {
  if (Input != 0)
    return fullRegion(G.inputType(O, Input)->Dims);
  const Shape &X = G.inputType(O, 0)->Dims;
  Region R(Out.begin(), Out.end());
  for (size_t I = O.Attrs.getInt("axis"); I < X.size(); ++I)
    R[I] = {0, X[I]};
  return R;
}

template <int Forward, int Backward>
static OpCost perElementCost(const Graph &G, const Op &O) {
  return elementwiseCost(G, O, Forward, Backward);
}

const OpKindInfo &infoLayerNorm() {
  static const OpKindInfo Info = [] {
    OpKindInfo I;
    I.Kind = OpKind::LayerNorm;
    I.MinInputs = 2;
    I.MaxInputs = 3;
    I.WeightInputs = 0b110;
    I.InferTypes = inferLayerNorm;
    I.Cost = perElementCost<8, 16>;
    I.Parallel = layerNormParallel;
    I.InputRegion = layerNormRegion;
    return I;
  }();
  return Info;
}

//===-- Softmax, LogSoftmax -----------------------------------------------===//

static llvm::Expected<OutputTypes> inferSoftmax(const Attributes &Attrs,
                                                InputTypes In) {
  int64_t Axis = Attrs.getInt("axis");
  if (Axis < 0 || Axis >= static_cast<int64_t>(In[0]->Dims.size()))
    return fail("axis {0} is out of range for input {1}", Axis,
                formatShape(In[0]->Dims));
  if (!isFloatingPoint(In[0]->Type))
    return fail("expects a floating-point input, got {0}",
                dtypeName(In[0]->Type));
  return OutputTypes{*In[0]};
}

static ParallelDims softmaxParallel(const Graph &G, const Op &O) {
  ParallelDims P = allAttribute(G, O);
  P.Output[O.Attrs.getInt("axis")] = DimKind::None;
  return P;
}

static Region softmaxRegion(const Graph &G, const Op &O, unsigned,
                            llvm::ArrayRef<Interval> Out, Interval) {
  Region R(Out.begin(), Out.end());
  int64_t Axis = O.Attrs.getInt("axis");
  R[Axis] = {0, G.inputType(O, 0)->Dims[Axis]};
  return R;
}

static OpKindInfo softmaxInfo(OpKind Kind) {
  OpKindInfo I;
  I.Kind = Kind;
  I.MinInputs = I.MaxInputs = 1;
  I.InferTypes = inferSoftmax;
  I.Cost = perElementCost<5, 4>;
  I.Parallel = softmaxParallel;
  I.InputRegion = softmaxRegion;
  return I;
}

const OpKindInfo &infoSoftmax() {
  static const OpKindInfo Info = softmaxInfo(OpKind::Softmax);
  return Info;
}

const OpKindInfo &infoLogSoftmax() {
  static const OpKindInfo Info = softmaxInfo(OpKind::LogSoftmax);
  return Info;
}

//===-- ReduceMean, ReduceSum ---------------------------------------------===//

static bool isReduced(llvm::ArrayRef<int64_t> Axes, size_t Dim) {
  return std::find(Axes.begin(), Axes.end(), static_cast<int64_t>(Dim)) !=
         Axes.end();
}

static llvm::Expected<OutputTypes> inferReduce(const Attributes &Attrs,
                                               InputTypes In) {
  const Shape &X = In[0]->Dims;
  auto Axes = Attrs.getInts("axes");
  if (Axes.empty())
    return fail("reduction has no axes");
  for (size_t I = 0; I < Axes.size(); ++I)
    if (Axes[I] < 0 || Axes[I] >= static_cast<int64_t>(X.size()) ||
        (I && Axes[I] <= Axes[I - 1]))
      return fail("axes {0} are invalid for input {1}", formatShape(Axes),
                  formatShape(X));
  bool Keep = Attrs.getInt("keepdims", 1);
  Shape Out;
  for (size_t I = 0; I < X.size(); ++I) {
    if (!isReduced(Axes, I))
      Out.push_back(X[I]);
    else if (Keep)
      Out.push_back(1);
  }
  return OutputTypes{TensorType{In[0]->Type, Out}};
}

static OpCost reduceCost(const Graph &G, const Op &O) {
  double In = G.inputType(O, 0)->numElements();
  double Bytes = ioBytes(G, O);
  return {In, In, Bytes, 2 * Bytes};
}

static ParallelDims reduceParallel(const Graph &G, const Op &O) {
  ParallelDims P;
  auto Axes = O.Attrs.getInts("axes");
  bool Keep = O.Attrs.getInt("keepdims", 1);
  for (size_t I = 0; I < G.inputType(O, 0)->Dims.size(); ++I) {
    if (!isReduced(Axes, I))
      P.Output.push_back(DimKind::Attribute);
    else if (Keep)
      P.Output.push_back(DimKind::None);
  }
  return P;
}

static Region reduceRegion(const Graph &G, const Op &O, unsigned,
                           llvm::ArrayRef<Interval> Out, Interval) {
  const Shape &X = G.inputType(O, 0)->Dims;
  auto Axes = O.Attrs.getInts("axes");
  bool Keep = O.Attrs.getInt("keepdims", 1);
  Region R;
  size_t OutDim = 0;
  for (size_t I = 0; I < X.size(); ++I) {
    if (isReduced(Axes, I)) {
      R.push_back({0, X[I]});
      OutDim += Keep;
    } else {
      R.push_back(Out[OutDim++]);
    }
  }
  return R;
}

static OpKindInfo reduceInfo(OpKind Kind) {
  OpKindInfo I;
  I.Kind = Kind;
  I.MinInputs = I.MaxInputs = 1;
  I.InferTypes = inferReduce;
  I.Cost = reduceCost;
  I.Parallel = reduceParallel;
  I.InputRegion = reduceRegion;
  return I;
}

const OpKindInfo &infoReduceMean() {
  static const OpKindInfo Info = reduceInfo(OpKind::ReduceMean);
  return Info;
}

const OpKindInfo &infoReduceSum() {
  static const OpKindInfo Info = reduceInfo(OpKind::ReduceSum);
  return Info;
}

const OpKindInfo &infoReduceMax() {
  static const OpKindInfo Info = reduceInfo(OpKind::ReduceMax);
  return Info;
}

const OpKindInfo &infoReduceMin() {
  static const OpKindInfo Info = reduceInfo(OpKind::ReduceMin);
  return Info;
}

//===-- CumSum ------------------------------------------------------------===//

static llvm::Expected<OutputTypes> inferCumSum(const Attributes &Attrs,
                                               InputTypes In) {
  int64_t Axis = Attrs.getInt("axis");
  if (Axis < 0 || Axis >= static_cast<int64_t>(In[0]->Dims.size()))
    return fail("axis {0} is out of range for input {1}", Axis,
                formatShape(In[0]->Dims));
  for (const char *Flag : {"exclusive", "reverse"}) {
    int64_t V = Attrs.getInt(Flag, 0);
    if (V != 0 && V != 1)
      return fail("{0} must be 0 or 1, got {1}", Flag, V);
  }
  DType T = In[0]->Type;
  if (T != DType::Float32 && T != DType::Float64 && T != DType::Int32 &&
      T != DType::Int64)
    return fail("expects an f32, f64, i32 or i64 input, got {0}", dtypeName(T));
  return OutputTypes{*In[0]};
}

/// One add per element each way.
static OpCost cumSumCost(const Graph &G, const Op &O) {
  double In = G.inputType(O, 0)->numElements();
  double Bytes = ioBytes(G, O);
  return {In, In, Bytes, Bytes};
}

const OpKindInfo &infoCumSum() {
  static const OpKindInfo Info = [] {
    OpKindInfo I;
    I.Kind = OpKind::CumSum;
    I.MinInputs = I.MaxInputs = 1;
    I.InferTypes = inferCumSum;
    I.Cost = cumSumCost;
    I.Parallel = softmaxParallel;
    I.InputRegion = softmaxRegion;
    return I;
  }();
  return Info;
}

} // namespace onnx2soap::ir
