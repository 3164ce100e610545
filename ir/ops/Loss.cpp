//===- ir/ops/Loss.cpp - Loss op kinds ------------------------------------===//
//
// SoftmaxCrossEntropyLoss as ONNX defines it: scores [N,C,d...], integer
// labels [N,d...], optional class weights [C]. Attributes: `reduction`
// ("mean", "sum", "none"), `ignore_index` (when `has_ignore_index` is 1).
// Outputs: the loss (a scalar, or [N,d...] for "none") and log_prob.
// With a scalar loss the sample dim is a Reduction dim: partitions compute
// partial sums that are reduced afterwards.
//
//===----------------------------------------------------------------------===//
#include "ir/ops/OpHelpers.h"

namespace onnx2soap::ir {
using namespace ops;

static llvm::Expected<OutputTypes> inferCrossEntropy(const Attributes &Attrs,
                                                     InputTypes In) {
  const Shape &Scores = In[0]->Dims, &Labels = In[1]->Dims;
  if (Scores.size() < 2)
    return fail("scores {0} must be [N,C,...]", formatShape(Scores));
  Shape Expected{Scores[0]};
  Expected.append(Scores.begin() + 2, Scores.end());
  if (Labels != Expected)
    return fail("labels {0} do not match scores {1} (expected {2})",
                formatShape(Labels), formatShape(Scores),
                formatShape(Expected));
  if (In[1]->Type != DType::Int64 && In[1]->Type != DType::Int32)
    return fail("labels must be int32 or int64, got {0}",
                dtypeName(In[1]->Type));
  if (In.size() > 2 && In[2] && In[2]->Dims != Shape{Scores[1]})
    return fail("weights {0} do not match {1} classes",
                formatShape(In[2]->Dims), Scores[1]);
  llvm::StringRef Reduction = Attrs.getString("reduction", "mean");
  if (Reduction != "mean" && Reduction != "sum" && Reduction != "none")
    return fail("unknown reduction '{0}'", Reduction);
  TensorType Loss{In[0]->Type, Reduction == "none" ? Expected : Shape{}};
  return OutputTypes{Loss, *In[0]};
}

static OpCost crossEntropyCost(const Graph &G, const Op &O) {
  double N = G.inputType(O, 0)->numElements();
  double Bytes = ioBytes(G, O);
  return {6 * N, 3 * N, Bytes, 2 * Bytes};
}

static bool isReduced(const Op &O) {
  return O.Attrs.getString("reduction", "mean") != "none";
}

static ParallelDims crossEntropyParallel(const Graph &G, const Op &O) {
  ParallelDims P;
  if (isReduced(O)) {
    P.ReductionExtent = G.inputType(O, 0)->Dims[0];
    return P;
  }
  P.Output.assign(G.outputType(O).rank(), DimKind::Attribute);
  return P;
}

static Region crossEntropyRegion(const Graph &G, const Op &O, unsigned Input,
                                 llvm::ArrayRef<Interval> Out,
                                 Interval Reduction) {
  Region R = fullRegion(G.inputType(O, Input)->Dims);
  if (Input == 2)
    return R;
  if (isReduced(O)) {
    R[0] = Reduction;
    return R;
  }
  // Labels match the output; scores add the class dim after the batch.
  R[0] = Out[0];
  unsigned Skip = Input == 0 ? 2 : 1;
  for (size_t I = 1; I < Out.size(); ++I)
    R[Skip + I - 1] = Out[I];
  return R;
}

/// Log-probabilities (output 1, shaped like the scores) of the samples the
/// partition reads.
static Region crossEntropyOutputRegion(const Graph &G, const Op &O,
                                       unsigned Output,
                                       llvm::ArrayRef<Interval> Out,
                                       Interval Reduction) {
  return crossEntropyRegion(G, O, 0, Out, Reduction);
}

const OpKindInfo &infoSoftmaxCrossEntropyLoss() {
  static const OpKindInfo Info = [] {
    OpKindInfo I;
    I.Kind = OpKind::SoftmaxCrossEntropyLoss;
    I.MinInputs = 2;
    I.MaxInputs = 3;
    I.NoGradInputs = 0b110; // labels, class weights
    I.InferTypes = inferCrossEntropy;
    I.Cost = crossEntropyCost;
    I.Parallel = crossEntropyParallel;
    I.InputRegion = crossEntropyRegion;
    I.OutputRegion = crossEntropyOutputRegion;
    return I;
  }();
  return Info;
}

} // namespace onnx2soap::ir
