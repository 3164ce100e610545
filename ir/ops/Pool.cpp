//===- ir/ops/Pool.cpp - Pooling op kinds ---------------------------------===//
//
// MaxPool and AveragePool over N-D windows, the global pools, and Resize of
// the spatial dims.
//
// Attributes (explicit after import): `kernel_shape`, `strides`, `dilations`,
// `pads` (begins then ends), `ceil_mode`; AveragePool `count_include_pad`.
// Resize: `sizes` (the output's spatial dims; dims 0 and 1, never resized,
// follow the input), `scales` (one per dim, the scale its
// source coordinates use), `mode` ("nearest" | "linear"),
// `coordinate_transformation_mode` ("half_pixel" | "pytorch_half_pixel" |
// "align_corners" | "asymmetric"), `nearest_mode` ("round_prefer_floor" |
// "round_prefer_ceil" | "floor" | "ceil").
//
//===----------------------------------------------------------------------===//
#include "ir/ops/OpHelpers.h"
#include <algorithm>
#include <cmath>

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

//===-- Resize ------------------------------------------------------------===//

static llvm::Expected<OutputTypes> inferResize(const Attributes &Attrs,
                                               InputTypes In) {
  const Shape &X = In[0]->Dims;
  if (X.size() < 3)
    return fail("input {0} must be [N,C,spatial...]", formatShape(X));
  if (!isFloatingPoint(In[0]->Type))
    return fail("expects a floating-point input, got {0}",
                dtypeName(In[0]->Type));
  auto Sizes = Attrs.getInts("sizes");
  auto Scales = Attrs.getFloats("scales");
  if (Sizes.size() != X.size() || Scales.size() != X.size())
    return fail("sizes and scales must have one value per dim of {0}",
                formatShape(X));
  for (size_t I = 2; I < X.size(); ++I)
    if (Sizes[I] <= 0 || X[I] <= 0 || !(Scales[I] > 0))
      return fail("spatial dim {0} resized from {1} to {2} (scale {3})", I,
                  X[I], Sizes[I], Scales[I]);
  llvm::StringRef Mode = Attrs.getString("mode");
  if (Mode != "nearest" && Mode != "linear")
    return fail("mode '{0}' is not 'nearest' or 'linear'", Mode);
  // Dims 0 and 1 follow the input, so a partition of them (a shard of the
  // samples or channels) has the shape rule of the whole.
  Shape Out(Sizes.begin(), Sizes.end());
  Out[0] = X[0];
  Out[1] = X[1];
  return OutputTypes{TensorType{In[0]->Type, Out}};
}

/// Taps read per output element: one, or two per spatial dim for linear.
static double resizeTaps(const Graph &G, const Op &O) {
  if (O.Attrs.getString("mode") != "linear")
    return 1;
  return std::ldexp(1.0, static_cast<int>(G.outputType(O).rank()) - 2);
}

static OpCost resizeCost(const Graph &G, const Op &O) {
  double Out = G.outputType(O).numElements();
  double Bytes = ioBytes(G, O);
  double Flops = Out * 2 * resizeTaps(G, O);
  return {Flops, Flops, Bytes, 2 * Bytes};
}

const OpKindInfo &infoResize() {
  static const OpKindInfo Info = [] {
    OpKindInfo I;
    I.Kind = OpKind::Resize;
    I.MinInputs = I.MaxInputs = 1;
    I.InferTypes = inferResize;
    I.Cost = resizeCost;
    // Samples and channels split; each partition resizes whole planes.
    I.Parallel = globalPoolParallel;
    I.InputRegion = globalPoolRegion;
    return I;
  }();
  return Info;
}

} // namespace onnx2soap::ir
