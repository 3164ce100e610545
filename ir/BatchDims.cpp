//===- ir/BatchDims.cpp - Which dim of each tensor holds the samples ------===//
//
// For each output dim d, restrict d to its first index and ask the region
// rule what the op reads: if that narrows an input's batch dim, d carries the
// batch.
//
//===----------------------------------------------------------------------===//
#include "ir/BatchDims.h"

namespace onnx2soap::ir {

static int8_t batchDimOfOutput(const Graph &G, const Op &O) {
  const OpKindInfo &Info = opKindInfo(O.Kind);
  const Shape &Out = G.outputType(O).Dims;
  ParallelDims P = Info.Parallel(G, O);
  Interval Reduction{0, P.ReductionExtent};
  for (size_t D = 0; D < Out.size(); ++D) {
    if (Out[D] <= 1)
      continue;
    Region Probe = fullRegion(Out);
    Probe[D] = {0, 1};
    for (unsigned I = 0; I < O.Inputs.size(); ++I) {
      if (O.Inputs[I] == NoTensor)
        continue;
      const Tensor &In = G.tensor(O.Inputs[I]);
      if (In.BatchDim < 0 || In.Type.Dims[In.BatchDim] <= 1)
        continue;
      Region R = Info.InputRegion(G, O, I, Probe, Reduction);
      if (static_cast<size_t>(In.BatchDim) < R.size() &&
          R[In.BatchDim].size() < In.Type.Dims[In.BatchDim])
        return static_cast<int8_t>(D);
    }
  }
  return -1;
}

void inferBatchDims(Graph &G) {
  for (const Op &O : G.ops()) {
    int8_t Batch = batchDimOfOutput(G, O);
    unsigned Rank0 = G.outputType(O).rank();
    for (unsigned K = 0; K < O.Outputs.size(); ++K) {
      Tensor &T = G.tensor(O.Outputs[K]);
      T.BatchDim = -1;
      if (K == 0 || T.Type.rank() == Rank0) {
        T.BatchDim = Batch;
      } else if ((O.Kind == OpKind::LSTM || O.Kind == OpKind::GRU) &&
                 Batch >= 0) {
        // Y_h / Y_c are [D,B,H] (layout 0) or [B,D,H] (layout 1).
        T.BatchDim = O.Attrs.getInt("layout") == 1 ? 0 : 1;
      }
    }
  }
}

ParallelDims parallelDims(const Graph &G, const Op &O) {
  ParallelDims P = opKindInfo(O.Kind).Parallel(G, O);
  int8_t Batch = G.tensor(O.Outputs[0]).BatchDim;
  if (Batch >= 0 && static_cast<size_t>(Batch) < P.Output.size() &&
      P.Output[Batch] == DimKind::Attribute)
    P.Output[Batch] = DimKind::Sample;
  return P;
}

Region outputRegionOf(const Graph &G, const Op &O, unsigned Output,
                      llvm::ArrayRef<Interval> Out, Interval Reduction) {
  if (Output == 0)
    return Region(Out.begin(), Out.end());
  if (auto Rule = opKindInfo(O.Kind).OutputRegion)
    return Rule(G, O, Output, Out, Reduction);
  const Shape &Zero = G.outputType(O, 0).Dims;
  const Shape &Dims = G.outputType(O, Output).Dims;
  Region R = fullRegion(Dims);
  for (size_t I = 1; I <= Dims.size() && I <= Zero.size(); ++I)
    if (Dims[Dims.size() - I] == Zero[Zero.size() - I])
      R[Dims.size() - I] = Out[Zero.size() - I];
  return R;
}

} // namespace onnx2soap::ir
