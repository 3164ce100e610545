//===- ir/BatchDims.cpp - Which dim of each tensor holds the samples ------===//
//
// For each output dim d, restrict d to its first index and ask the region
// rule what the op reads: if that narrows an input's batch dim, d carries the
// batch. Then, backwards, an op that reads no batched tensor (a fill the
// importer could not fold, such as an RNN's zero initial state at a large
// batch) takes the batch dim its consumer reads it by, so each device can
// compute its own slice instead of receiving it.
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

static bool readsBatchedTensor(const Graph &G, const Op &O) {
  for (TensorId In : O.Inputs)
    if (In != NoTensor && G.tensor(In).BatchDim >= 0)
      return true;
  return false;
}

/// The dim of input I that consumer O narrows when its output is restricted
/// to one sample, or -1 when none or more than one.
static int8_t batchDimOfInput(const Graph &G, const Op &O, unsigned I) {
  const Tensor &Out = G.tensor(O.Outputs[0]);
  if (Out.BatchDim < 0 || Out.Type.Dims[Out.BatchDim] <= 1)
    return -1;
  const OpKindInfo &Info = opKindInfo(O.Kind);
  Interval Reduction{0, Info.Parallel(G, O).ReductionExtent};
  Region Probe = fullRegion(Out.Type.Dims);
  Region Whole = Info.InputRegion(G, O, I, Probe, Reduction);
  Probe[Out.BatchDim] = {0, 1};
  Region R = Info.InputRegion(G, O, I, Probe, Reduction);
  int8_t Found = -1;
  for (size_t D = 0; D < R.size() && D < Whole.size(); ++D)
    if (R[D].size() < Whole[D].size()) {
      if (Found >= 0)
        return -1;
      Found = static_cast<int8_t>(D);
    }
  return Found;
}

static void inferBatchDimsOfFills(Graph &G) {
  llvm::ArrayRef<Op> Ops = G.ops();
  for (auto It = Ops.rbegin(); It != Ops.rend(); ++It)
    for (unsigned I = 0; I < It->Inputs.size(); ++I) {
      TensorId In = It->Inputs[I];
      if (In == NoTensor || G.tensor(In).BatchDim >= 0)
        continue;
      OpId Producer = G.tensor(In).Producer;
      if (Producer == NoOp || G.op(Producer).Outputs.size() != 1 ||
          readsBatchedTensor(G, G.op(Producer)))
        continue;
      int8_t D = batchDimOfInput(G, *It, I);
      if (D >= 0)
        G.tensor(In).BatchDim = D;
    }
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
  inferBatchDimsOfFills(G);
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
