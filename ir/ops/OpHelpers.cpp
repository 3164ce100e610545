//===- ir/ops/OpHelpers.cpp - Shared pieces of op kind definitions --------===//
//
// Broadcasting and the default rules shared by the op families.
//
//===----------------------------------------------------------------------===//
#include "ir/ops/OpHelpers.h"
#include <algorithm>

namespace onnx2soap::ir::ops {

std::optional<Shape> broadcastShapes(llvm::ArrayRef<const Shape *> Shapes) {
  size_t Rank = 0;
  for (const Shape *S : Shapes)
    Rank = std::max(Rank, S->size());
  Shape Result(Rank, 1);
  for (const Shape *S : Shapes) {
    size_t Offset = Rank - S->size();
    for (size_t I = 0; I < S->size(); ++I) {
      int64_t D = (*S)[I];
      int64_t &R = Result[Offset + I];
      if (D == R || D == 1)
        continue;
      if (R != 1)
        return std::nullopt;
      R = D;
    }
  }
  return Result;
}

Region broadcastRegion(llvm::ArrayRef<int64_t> InputDims,
                       llvm::ArrayRef<Interval> Out) {
  Region R;
  size_t Offset = Out.size() - InputDims.size();
  for (size_t I = 0; I < InputDims.size(); ++I) {
    const Interval &O = Out[Offset + I];
    if (InputDims[I] == 1)
      R.push_back({0, O.empty() ? 0 : 1});
    else
      R.push_back(O);
  }
  return R;
}

double ioBytes(const Graph &G, const Op &O) {
  double Bytes = 0;
  for (TensorId T : O.Inputs)
    if (T != NoTensor)
      Bytes += G.tensor(T).Type.byteSize();
  for (TensorId T : O.Outputs)
    Bytes += G.tensor(T).Type.byteSize();
  return Bytes;
}

OpCost elementwiseCost(const Graph &G, const Op &O, double FlopsPerElement,
                       double BackwardFlopsPerElement) {
  double N = G.outputType(O).numElements();
  double Bytes = ioBytes(G, O);
  return {N * FlopsPerElement, N * BackwardFlopsPerElement, Bytes, 2 * Bytes};
}

ParallelDims allAttribute(const Graph &G, const Op &O) {
  ParallelDims P;
  P.Output.assign(G.outputType(O).rank(), DimKind::Attribute);
  return P;
}

Region sameRegion(const Graph &G, const Op &O, unsigned Input,
                  llvm::ArrayRef<Interval> Out, Interval Reduction) {
  const TensorType *T = G.inputType(O, Input);
  if (!T)
    return {};
  return broadcastRegion(T->Dims, Out);
}

bool isWeight(const Graph &G, const Op &O, unsigned I) {
  if (I >= O.Inputs.size() || O.Inputs[I] == NoTensor)
    return false;
  TensorRole Role = G.tensor(O.Inputs[I]).Role;
  return Role == TensorRole::Parameter || Role == TensorRole::Constant;
}

} // namespace onnx2soap::ir::ops
