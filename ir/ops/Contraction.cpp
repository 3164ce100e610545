//===- ir/ops/Contraction.cpp - Conv, ConvTranspose, Gemm, MatMul ---------===//
//
// The ops that contract a dim against parameters. They are where Parameter
// parallelism (output channels / units) and Reduction parallelism (input
// channels / K, partial sums reduced afterwards) apply.
//
// Conv and ConvTranspose attributes (all explicit after import):
// `kernel_shape`, `strides`, `dilations` (one per spatial dim), `pads`
// (begins then ends), `group`; ConvTranspose also `output_padding`.
// Gemm: `transA`, `transB`, `alpha`, `beta`. MatMul: none.
//
//===----------------------------------------------------------------------===//
#include "ir/ops/OpHelpers.h"
#include <algorithm>

namespace onnx2soap::ir {
using namespace ops;

namespace {
/// Spatial attributes of a convolution or pooling window.
struct Window {
  llvm::ArrayRef<int64_t> Kernel, Strides, Dilations, Pads;
  size_t rank() const { return Kernel.size(); }
  int64_t extent(size_t I) const { return (Kernel[I] - 1) * Dilations[I] + 1; }
};

llvm::Expected<Window> readWindow(const Attributes &Attrs, size_t Spatial) {
  Window W{Attrs.getInts("kernel_shape"), Attrs.getInts("strides"),
           Attrs.getInts("dilations"), Attrs.getInts("pads")};
  if (W.Kernel.size() != Spatial || W.Strides.size() != Spatial ||
      W.Dilations.size() != Spatial || W.Pads.size() != 2 * Spatial)
    return fail("window attributes do not match {0} spatial dims", Spatial);
  for (size_t I = 0; I < Spatial; ++I)
    if (W.Kernel[I] <= 0 || W.Strides[I] <= 0 || W.Dilations[I] <= 0)
      return fail("kernel, strides and dilations must be positive");
  return W;
}
} // namespace

//===-- Conv --------------------------------------------------------------===//

static llvm::Expected<OutputTypes> inferConv(const Attributes &Attrs,
                                             InputTypes In) {
  const Shape &X = In[0]->Dims, &W = In[1]->Dims;
  if (X.size() < 3 || W.size() != X.size())
    return fail("input {0} and weight {1} must both be [N,C,spatial...]",
                formatShape(X), formatShape(W));
  size_t Spatial = X.size() - 2;
  auto Win = readWindow(Attrs, Spatial);
  if (!Win)
    return Win.takeError();
  int64_t Group = Attrs.getInt("group", 1);
  if (Group <= 0 || X[1] != W[1] * Group || W[0] % Group != 0)
    return fail("input channels {0} do not match weight {1} with group {2}",
                X[1], formatShape(W), Group);
  for (size_t I = 0; I < Spatial; ++I)
    if (W[2 + I] != Win->Kernel[I])
      return fail("kernel_shape does not match weight shape {0}",
                  formatShape(W));
  if (In.size() > 2 && In[2] &&
      (In[2]->Dims.size() != 1 || In[2]->Dims[0] != W[0]))
    return fail("bias {0} does not match {1} output channels",
                formatShape(In[2]->Dims), W[0]);
  Shape Out{X[0], W[0]};
  for (size_t I = 0; I < Spatial; ++I) {
    int64_t Padded = X[2 + I] + Win->Pads[I] + Win->Pads[Spatial + I];
    int64_t D = (Padded - Win->extent(I)) / Win->Strides[I] + 1;
    if (Padded < Win->extent(I) || D <= 0)
      return fail("spatial dim {0} of size {1} is smaller than the kernel "
                  "extent {2}",
                  I, X[2 + I], Win->extent(I));
    Out.push_back(D);
  }
  return OutputTypes{TensorType{In[0]->Type, Out}};
}

static OpCost convCost(const Graph &G, const Op &O) {
  const Shape &W = G.inputType(O, 1)->Dims;
  double OutElements = G.outputType(O).numElements();
  double MacsPerOutput = numElements(llvm::ArrayRef<int64_t>(W).drop_front());
  double Flops = 2 * OutElements * MacsPerOutput;
  if (G.inputType(O, 2))
    Flops += OutElements;
  double Bytes = ioBytes(G, O);
  // Backward computes both the input and the weight gradient.
  return {Flops, 2 * Flops, Bytes, 2 * Bytes};
}

static ParallelDims convParallel(const Graph &G, const Op &O) {
  ParallelDims P;
  P.Output.assign(G.outputType(O).rank(), DimKind::Attribute);
  P.Output[0] = DimKind::Sample;
  P.Output[1] = DimKind::Parameter;
  if (O.Attrs.getInt("group", 1) == 1)
    P.ReductionExtent = G.inputType(O, 1)->Dims[1];
  return P;
}

/// Input rows needed for output rows [Out.Begin, Out.End) of a window.
static Interval windowInterval(Interval Out, int64_t Stride, int64_t Extent,
                               int64_t PadBegin, int64_t InputSize) {
  if (Out.empty())
    return {0, 0};
  int64_t Begin = Out.Begin * Stride - PadBegin;
  int64_t End = (Out.End - 1) * Stride - PadBegin + Extent;
  return {std::clamp<int64_t>(Begin, 0, InputSize),
          std::clamp<int64_t>(End, 0, InputSize)};
}

static Region convRegion(const Graph &G, const Op &O, unsigned Input,
                         llvm::ArrayRef<Interval> Out, Interval Reduction) {
  const Shape &X = G.inputType(O, 0)->Dims, &W = G.inputType(O, 1)->Dims;
  size_t Spatial = X.size() - 2;
  int64_t Group = O.Attrs.getInt("group", 1);
  int64_t OutPerGroup = W[0] / Group, InPerGroup = W[1];
  // Input channels feeding output channels Out[1]: whole groups, narrowed
  // to the reduction slice.
  Interval Channels{Out[1].Begin / OutPerGroup * InPerGroup,
                    Out[1].empty()
                        ? 0
                        : (Out[1].End - 1) / OutPerGroup * InPerGroup +
                              InPerGroup};
  if (Group == 1)
    Channels = Reduction;
  switch (Input) {
  case 0: {
    Region R{Out[0], Channels};
    auto Strides = O.Attrs.getInts("strides");
    auto Dilations = O.Attrs.getInts("dilations");
    auto Kernel = O.Attrs.getInts("kernel_shape");
    auto Pads = O.Attrs.getInts("pads");
    for (size_t I = 0; I < Spatial; ++I)
      R.push_back(windowInterval(Out[2 + I], Strides[I],
                                 (Kernel[I] - 1) * Dilations[I] + 1, Pads[I],
                                 X[2 + I]));
    return R;
  }
  case 1: {
    Region R{Out[1], Group == 1 ? Reduction : Interval{0, InPerGroup}};
    for (size_t I = 0; I < Spatial; ++I)
      R.push_back({0, W[2 + I]});
    return R;
  }
  default:
    return {Out[1]};
  }
}

const OpKindInfo &infoConv() {
  static const OpKindInfo Info = [] {
    OpKindInfo I;
    I.Kind = OpKind::Conv;
    I.MinInputs = 2;
    I.MaxInputs = 3;
    I.WeightInputs = 0b110;
    I.InferTypes = inferConv;
    I.Cost = convCost;
    I.Parallel = convParallel;
    I.InputRegion = convRegion;
    return I;
  }();
  return Info;
}

//===-- ConvTranspose -----------------------------------------------------===//

static llvm::Expected<OutputTypes> inferConvTranspose(const Attributes &Attrs,
                                                      InputTypes In) {
  const Shape &X = In[0]->Dims, &W = In[1]->Dims;
  if (X.size() < 3 || W.size() != X.size())
    return fail("input {0} and weight {1} must both be [N,C,spatial...]",
                formatShape(X), formatShape(W));
  size_t Spatial = X.size() - 2;
  auto Win = readWindow(Attrs, Spatial);
  if (!Win)
    return Win.takeError();
  int64_t Group = Attrs.getInt("group", 1);
  if (Group <= 0 || X[1] != W[0] || W[0] % Group != 0)
    return fail("input channels {0} do not match weight {1} with group {2}",
                X[1], formatShape(W), Group);
  auto OutputPadding = Attrs.getInts("output_padding");
  if (OutputPadding.size() != Spatial)
    return fail("output_padding must have {0} values", Spatial);
  int64_t Channels = W[1] * Group;
  if (In.size() > 2 && In[2] &&
      (In[2]->Dims.size() != 1 || In[2]->Dims[0] != Channels))
    return fail("bias {0} does not match {1} output channels",
                formatShape(In[2]->Dims), Channels);
  Shape Out{X[0], Channels};
  for (size_t I = 0; I < Spatial; ++I) {
    int64_t D = Win->Strides[I] * (X[2 + I] - 1) + OutputPadding[I] +
                Win->extent(I) - Win->Pads[I] - Win->Pads[Spatial + I];
    if (D <= 0)
      return fail("output spatial dim {0} would be {1}", I, D);
    Out.push_back(D);
  }
  return OutputTypes{TensorType{In[0]->Type, Out}};
}

static OpCost convTransposeCost(const Graph &G, const Op &O) {
  const Shape &W = G.inputType(O, 1)->Dims;
  double InElements = G.inputType(O, 0)->numElements();
  double Flops =
      2 * InElements * numElements(llvm::ArrayRef<int64_t>(W).drop_front());
  if (G.inputType(O, 2))
    Flops += G.outputType(O).numElements();
  double Bytes = ioBytes(G, O);
  return {Flops, 2 * Flops, Bytes, 2 * Bytes};
}

static ParallelDims convTransposeParallel(const Graph &G, const Op &O) {
  ParallelDims P;
  P.Output.assign(G.outputType(O).rank(), DimKind::Attribute);
  P.Output[0] = DimKind::Sample;
  P.Output[1] = DimKind::Parameter;
  if (O.Attrs.getInt("group", 1) == 1)
    P.ReductionExtent = G.inputType(O, 0)->Dims[1];
  return P;
}

static Region convTransposeRegion(const Graph &G, const Op &O, unsigned Input,
                                  llvm::ArrayRef<Interval> Out,
                                  Interval Reduction) {
  const Shape &X = G.inputType(O, 0)->Dims, &W = G.inputType(O, 1)->Dims;
  size_t Spatial = X.size() - 2;
  int64_t Group = O.Attrs.getInt("group", 1);
  int64_t OutPerGroup = W[1], InPerGroup = W[0] / Group;
  Interval Channels{Out[1].Begin / OutPerGroup * InPerGroup,
                    Out[1].empty()
                        ? 0
                        : (Out[1].End - 1) / OutPerGroup * InPerGroup +
                              InPerGroup};
  if (Group == 1)
    Channels = Reduction;
  if (Input == 2)
    return {Out[1]};
  if (Input == 1) {
    // Weight is [C_in, C_out/group, k...].
    Interval Cols = Group == 1 ? Out[1] : Interval{0, OutPerGroup};
    Region R{Channels, Cols};
    for (size_t I = 0; I < Spatial; ++I)
      R.push_back({0, W[2 + I]});
    return R;
  }
  Region R{Out[0], Channels};
  auto Strides = O.Attrs.getInts("strides");
  auto Dilations = O.Attrs.getInts("dilations");
  auto Kernel = O.Attrs.getInts("kernel_shape");
  auto Pads = O.Attrs.getInts("pads");
  for (size_t I = 0; I < Spatial; ++I) {
    // Output o receives input i when o = i*s - pad + k*d for some k.
    const Interval &OutI = Out[2 + I];
    if (OutI.empty()) {
      R.push_back({0, 0});
      continue;
    }
    int64_t Extent = (Kernel[I] - 1) * Dilations[I];
    auto FloorDiv = [](int64_t A, int64_t B) {
      return A >= 0 ? A / B : -((-A + B - 1) / B);
    };
    int64_t Lo =
        FloorDiv(OutI.Begin + Pads[I] - Extent + Strides[I] - 1, Strides[I]);
    int64_t Hi = FloorDiv(OutI.End - 1 + Pads[I], Strides[I]) + 1;
    R.push_back({std::clamp<int64_t>(Lo, 0, X[2 + I]),
                 std::clamp<int64_t>(Hi, 0, X[2 + I])});
  }
  return R;
}

const OpKindInfo &infoConvTranspose() {
  static const OpKindInfo Info = [] {
    OpKindInfo I;
    I.Kind = OpKind::ConvTranspose;
    I.MinInputs = 2;
    I.MaxInputs = 3;
    I.WeightInputs = 0b110;
    I.InferTypes = inferConvTranspose;
    I.Cost = convTransposeCost;
    I.Parallel = convTransposeParallel;
    I.InputRegion = convTransposeRegion;
    return I;
  }();
  return Info;
}

//===-- Gemm --------------------------------------------------------------===//

static llvm::Expected<OutputTypes> inferGemm(const Attributes &Attrs,
                                             InputTypes In) {
  const Shape &A = In[0]->Dims, &B = In[1]->Dims;
  if (A.size() != 2 || B.size() != 2)
    return fail("Gemm needs 2-D inputs, got {0} and {1}", formatShape(A),
                formatShape(B));
  bool TransA = Attrs.getInt("transA"), TransB = Attrs.getInt("transB");
  int64_t M = TransA ? A[1] : A[0], K = TransA ? A[0] : A[1];
  int64_t KB = TransB ? B[1] : B[0], N = TransB ? B[0] : B[1];
  if (K != KB)
    return fail("inner dims differ: {0} and {1} (transA={2}, transB={3})",
                formatShape(A), formatShape(B), int(TransA), int(TransB));
  Shape Out{M, N};
  if (In.size() > 2 && In[2]) {
    const Shape *Shapes[] = {&In[2]->Dims, &Out};
    auto C = broadcastShapes(Shapes);
    if (!C || *C != Out)
      return fail("C {0} does not broadcast to {1}", formatShape(In[2]->Dims),
                  formatShape(Out));
  }
  return OutputTypes{TensorType{In[0]->Type, Out}};
}

static OpCost gemmCost(const Graph &G, const Op &O) {
  const TensorType &Out = G.outputType(O);
  const Shape &A = G.inputType(O, 0)->Dims;
  int64_t K = O.Attrs.getInt("transA") ? A[0] : A[1];
  double Flops = 2.0 * Out.numElements() * K;
  if (G.inputType(O, 2))
    Flops += Out.numElements();
  double Bytes = ioBytes(G, O);
  return {Flops, 2 * Flops, Bytes, 2 * Bytes};
}

static ParallelDims gemmParallel(const Graph &G, const Op &O) {
  ParallelDims P;
  P.Output = {DimKind::Attribute,
              isWeight(G, O, 1) ? DimKind::Parameter : DimKind::Attribute};
  const Shape &A = G.inputType(O, 0)->Dims;
  P.ReductionExtent = O.Attrs.getInt("transA") ? A[0] : A[1];
  return P;
}

static Region gemmRegion(const Graph &G, const Op &O, unsigned Input,
                         llvm::ArrayRef<Interval> Out, Interval Reduction) {
  switch (Input) {
  case 0:
    return O.Attrs.getInt("transA") ? Region{Reduction, Out[0]}
                                    : Region{Out[0], Reduction};
  case 1:
    return O.Attrs.getInt("transB") ? Region{Out[1], Reduction}
                                    : Region{Reduction, Out[1]};
  default:
    return broadcastRegion(G.inputType(O, 2)->Dims, Out);
  }
}

const OpKindInfo &infoGemm() {
  static const OpKindInfo Info = [] {
    OpKindInfo I;
    I.Kind = OpKind::Gemm;
    I.MinInputs = 2;
    I.MaxInputs = 3;
    I.WeightInputs = 0b110;
    I.InferTypes = inferGemm;
    I.Cost = gemmCost;
    I.Parallel = gemmParallel;
    I.InputRegion = gemmRegion;
    return I;
  }();
  return Info;
}

//===-- MatMul ------------------------------------------------------------===//

static llvm::Expected<OutputTypes> inferMatMul(const Attributes &,
                                               InputTypes In) {
  Shape A = In[0]->Dims, B = In[1]->Dims;
  if (A.empty() || B.empty())
    return fail("MatMul inputs must have rank >= 1");
  bool VectorA = A.size() == 1, VectorB = B.size() == 1;
  if (VectorA)
    A.insert(A.begin(), 1);
  if (VectorB)
    B.push_back(1);
  if (A.back() != B[B.size() - 2])
    return fail("inner dims differ: {0} and {1}", formatShape(In[0]->Dims),
                formatShape(In[1]->Dims));
  Shape BatchA(A.begin(), A.end() - 2), BatchB(B.begin(), B.end() - 2);
  const Shape *Batches[] = {&BatchA, &BatchB};
  auto Batch = broadcastShapes(Batches);
  if (!Batch)
    return fail("batch dims of {0} and {1} do not broadcast",
                formatShape(In[0]->Dims), formatShape(In[1]->Dims));
  Shape Out = *Batch;
  if (!VectorA)
    Out.push_back(A[A.size() - 2]);
  if (!VectorB)
    Out.push_back(B.back());
  if (In[0]->Type != In[1]->Type)
    return fail("input types differ: {0} and {1}", dtypeName(In[0]->Type),
                dtypeName(In[1]->Type));
  return OutputTypes{TensorType{In[0]->Type, Out}};
}

static OpCost matMulCost(const Graph &G, const Op &O) {
  int64_t K = G.inputType(O, 0)->Dims.back();
  double Flops = 2.0 * G.outputType(O).numElements() * K;
  double Bytes = ioBytes(G, O);
  return {Flops, 2 * Flops, Bytes, 2 * Bytes};
}

static ParallelDims matMulParallel(const Graph &G, const Op &O) {
  ParallelDims P;
  const Shape &B = G.inputType(O, 1)->Dims;
  P.Output.assign(G.outputType(O).rank(), DimKind::Attribute);
  if (B.size() >= 2 && isWeight(G, O, 1))
    P.Output.back() = DimKind::Parameter;
  P.ReductionExtent = G.inputType(O, 0)->Dims.back();
  return P;
}

static Region matMulRegion(const Graph &G, const Op &O, unsigned Input,
                           llvm::ArrayRef<Interval> Out, Interval Reduction) {
  const Shape &A = G.inputType(O, 0)->Dims, &B = G.inputType(O, 1)->Dims;
  // Rebuild the output region as [batch..., M, N] with unit dims restored
  // for vector operands.
  Region Full(Out.begin(), Out.end());
  if (B.size() == 1)
    Full.push_back({0, 1});
  if (A.size() == 1)
    Full.insert(Full.end() - 1, Interval{0, 1});
  llvm::ArrayRef<Interval> Batch = llvm::ArrayRef<Interval>(Full).drop_back(2);
  Interval M = Full[Full.size() - 2], N = Full.back();
  const Shape &Dims = Input == 0 ? A : B;
  if (Dims.size() == 1)
    return {Reduction};
  // Batch dims align from the right; broadcast ones take [0,1).
  Region R = broadcastRegion(llvm::ArrayRef<int64_t>(Dims).drop_back(2), Batch);
  if (Input == 0) {
    R.push_back(M);
    R.push_back(Reduction);
  } else {
    R.push_back(Reduction);
    R.push_back(N);
  }
  return R;
}

const OpKindInfo &infoMatMul() {
  static const OpKindInfo Info = [] {
    OpKindInfo I;
    I.Kind = OpKind::MatMul;
    I.MinInputs = I.MaxInputs = 2;
    I.WeightInputs = 0b10;
    I.InferTypes = inferMatMul;
    I.Cost = matMulCost;
    I.Parallel = matMulParallel;
    I.InputRegion = matMulRegion;
    return I;
  }();
  return Info;
}

} // namespace onnx2soap::ir
