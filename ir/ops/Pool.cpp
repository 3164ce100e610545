//===- ir/ops/Pool.cpp - Pooling op kinds ---------------------------------===//
//
// MaxPool and AveragePool over N-D windows, and the global pools.
//
// Attributes (explicit after import): `kernel_shape`, `strides`, `dilations`,
// `pads` (begins then ends), `ceil_mode`; AveragePool `count_include_pad`.
//
//===----------------------------------------------------------------------===//
#include "ir/ops/OpHelpers.h"
#include <algorithm>

namespace onnx2soap::ir {
using namespace ops;

/// Output size of one pooled dim (ONNX rule, with the ceil-mode correction
/// that drops a last window starting in the end padding, as PyTorch does).
static int64_t pooledSize(int64_t Input, int64_t PadBegin, int64_t PadEnd,
                          int64_t Extent, int64_t Stride, bool Ceil) {
  int64_t Span = Input + PadBegin + PadEnd - Extent;
  if (Span < 0)
    return 0;
  int64_t Out = (Ceil ? (Span + Stride - 1) / Stride : Span / Stride) + 1;
  if (Ceil && (Out - 1) * Stride >= Input + PadBegin)
    --Out;
  return Out;
}

static llvm::Expected<OutputTypes> inferPool(const Attributes &Attrs,
                                             InputTypes In) {
  const Shape &X = In[0]->Dims;
  if (X.size() < 3)
    return fail("input {0} must be [N,C,spatial...]", formatShape(X));
  size_t Spatial = X.size() - 2;
  auto Kernel = Attrs.getInts("kernel_shape");
  auto Strides = Attrs.getInts("strides");
  auto Dilations = Attrs.getInts("dilations");
  auto Pads = Attrs.getInts("pads");
  if (Kernel.size() != Spatial || Strides.size() != Spatial ||
      Dilations.size() != Spatial || Pads.size() != 2 * Spatial)
    return fail("window attributes do not match {0} spatial dims", Spatial);
  Shape Out{X[0], X[1]};
  for (size_t I = 0; I < Spatial; ++I) {
    if (Kernel[I] <= 0 || Strides[I] <= 0 || Dilations[I] <= 0)
      return fail("kernel, strides and dilations must be positive");
    int64_t Extent = (Kernel[I] - 1) * Dilations[I] + 1;
    int64_t D = pooledSize(X[2 + I], Pads[I], Pads[Spatial + I], Extent,
                           Strides[I], Attrs.getInt("ceil_mode"));
    if (D <= 0)
      return fail("spatial dim {0} of size {1} is smaller than the window {2}",
                  I, X[2 + I], Extent);
    Out.push_back(D);
  }
  return OutputTypes{TensorType{In[0]->Type, Out}};
}

static OpCost poolCost(const Graph &G, const Op &O) {
  double Window = numElements(O.Attrs.getInts("kernel_shape"));
  double Out = G.outputType(O).numElements();
  double Bytes = ioBytes(G, O);
  return {Out * Window, Out * Window, Bytes, 2 * Bytes};
}

static ParallelDims poolParallel(const Graph &G, const Op &O) {
  ParallelDims P = allAttribute(G, O);
  P.Output[0] = DimKind::Sample;
  return P;
}

static Region poolRegion(const Graph &G, const Op &O, unsigned Input,
                         llvm::ArrayRef<Interval> Out, Interval) {
  const Shape &X = G.inputType(O, 0)->Dims;
  auto Kernel = O.Attrs.getInts("kernel_shape");
  auto Strides = O.Attrs.getInts("strides");
  auto Dilations = O.Attrs.getInts("dilations");
  auto Pads = O.Attrs.getInts("pads");
  Region R{Out[0], Out[1]};
  for (size_t I = 0; I + 2 < X.size(); ++I) {
    const Interval &OutI = Out[2 + I];
    if (OutI.empty()) {
      R.push_back({0, 0});
      continue;
    }
    int64_t Extent = (Kernel[I] - 1) * Dilations[I] + 1;
    int64_t Begin = OutI.Begin * Strides[I] - Pads[I];
    int64_t End = (OutI.End - 1) * Strides[I] - Pads[I] + Extent;
    R.push_back({std::clamp<int64_t>(Begin, 0, X[2 + I]),
                 std::clamp<int64_t>(End, 0, X[2 + I])});
  }
  return R;
}

static OpKindInfo poolInfo(OpKind Kind) {
  OpKindInfo I;
  I.Kind = Kind;
  I.MinInputs = I.MaxInputs = 1;
  I.InferTypes = inferPool;
  I.Cost = poolCost;
  I.Parallel = poolParallel;
  I.InputRegion = poolRegion;
  return I;
}

const OpKindInfo &infoMaxPool() {
  static const OpKindInfo Info = poolInfo(OpKind::MaxPool);
  return Info;
}

const OpKindInfo &infoAveragePool() {
  static const OpKindInfo Info = poolInfo(OpKind::AveragePool);
  return Info;
}

//===-- Global pools ------------------------------------------------------===//

static llvm::Expected<OutputTypes> inferGlobalPool(const Attributes &,
                                                   InputTypes In) {
  const Shape &X = In[0]->Dims;
  if (X.size() < 3)
    return fail("input {0} must be [N,C,spatial...]", formatShape(X));
  Shape Out(X.size(), 1);
  Out[0] = X[0];
  Out[1] = X[1];
  return OutputTypes{TensorType{In[0]->Type, Out}};
}

static OpCost globalPoolCost(const Graph &G, const Op &O) {
  double In = G.inputType(O, 0)->numElements();
  double Bytes = ioBytes(G, O);
  return {In, In, Bytes, 2 * Bytes};
}

static ParallelDims globalPoolParallel(const Graph &G, const Op &O) {
  ParallelDims P;
  P.Output.assign(G.outputType(O).rank(), DimKind::None);
  P.Output[0] = DimKind::Sample;
  P.Output[1] = DimKind::Attribute;
  return P;
}

static Region globalPoolRegion(const Graph &G, const Op &O, unsigned,
                               llvm::ArrayRef<Interval> Out, Interval) {
  const Shape &X = G.inputType(O, 0)->Dims;
  Region R{Out[0], Out[1]};
  for (size_t I = 2; I < X.size(); ++I)
    R.push_back({0, X[I]});
  return R;
}

static OpKindInfo globalPoolInfo(OpKind Kind) {
  OpKindInfo I;
  I.Kind = Kind;
  I.MinInputs = I.MaxInputs = 1;
  I.InferTypes = inferGlobalPool;
  I.Cost = globalPoolCost;
  I.Parallel = globalPoolParallel;
  I.InputRegion = globalPoolRegion;
  return I;
}

const OpKindInfo &infoGlobalAveragePool() {
  static const OpKindInfo Info = globalPoolInfo(OpKind::GlobalAveragePool);
  return Info;
}

const OpKindInfo &infoGlobalMaxPool() {
  static const OpKindInfo Info = globalPoolInfo(OpKind::GlobalMaxPool);
  return Info;
}

} // namespace onnx2soap::ir
