//===- tests/runtime_lib/PoolTest.cpp - MaxPool, AveragePool, global pools ===//
//
// The CPU pooling kernels against reference loops in double over several
// window attributes (strides, asymmetric pads, dilation, ceil mode with the
// IR's output-size rule, count_include_pad, 1-D to 3-D), their backward
// against central differences (epsilon 1e-2, relative tolerance 1e-2; max
// pools get inputs spaced 0.05 apart so no perturbation changes an argmax),
// and accumulation of the backward into its view.
//
//===----------------------------------------------------------------------===//
#include "KernelTestUtil.h"
#include "runtime_lib/Error.h"
#include "runtime_lib/ResizeMap.h"
#include <algorithm>
#include <numeric>
#include <random>

using namespace onnx2soap::rt;
using namespace onnx2soap::rt::test;

namespace {

using Ints = std::vector<int64_t>;

/// Distinct values 0.05 apart in random order: no ties, no argmax flips
/// under the gradient check's perturbation.
HostTensor spacedTensor(Ints Dims, unsigned Seed) {
  HostTensor T = f32(std::move(Dims));
  std::vector<int64_t> Order(T.size());
  std::iota(Order.begin(), Order.end(), 0);
  std::mt19937 Rng(Seed);
  std::shuffle(Order.begin(), Order.end(), Rng);
  for (int64_t I = 0; I < T.size(); ++I)
    T.set(I, 0.05 * Order[I] - 0.025 * T.size());
  return T;
}

struct PoolCase {
  const char *Name;
  Ints X, Kernel, Strides, Dilations, Pads;
  bool Ceil;
};

/// The IR's pooled size (ir/ops/Pool.cpp).
int64_t pooledSize(int64_t Input, int64_t PadBegin, int64_t PadEnd,
                   int64_t Extent, int64_t Stride, bool Ceil) {
  int64_t Span = Input + PadBegin + PadEnd - Extent;
  int64_t Out = (Ceil ? (Span + Stride - 1) / Stride : Span / Stride) + 1;
  if (Ceil && (Out - 1) * Stride >= Input + PadBegin)
    --Out;
  return Out;
}

Ints poolOutput(const PoolCase &Case) {
  Ints Out{Case.X[0], Case.X[1]};
  size_t N = Case.X.size() - 2;
  for (size_t I = 0; I < N; ++I)
    Out.push_back(pooledSize(Case.X[2 + I], Case.Pads[I], Case.Pads[N + I],
                             (Case.Kernel[I] - 1) * Case.Dilations[I] + 1,
                             Case.Strides[I], Case.Ceil));
  return Out;
}

OpAttrs poolAttrs(const PoolCase &Case, bool IncludePad) {
  OpAttrs A;
  A.set("kernel_shape", Case.Kernel);
  A.set("strides", Case.Strides);
  A.set("dilations", Case.Dilations);
  A.set("pads", Case.Pads);
  A.set("ceil_mode", int64_t(Case.Ceil));
  A.set("count_include_pad", int64_t(IncludePad));
  return A;
}

/// Max or average pooling by loops in double (ONNX reference semantics:
/// count_include_pad counts the taps inside the padded input).
std::vector<double> referencePool(const PoolCase &Case, const HostTensor &X,
                                  const Ints &Out, bool Max, bool IncludePad) {
  size_t N = Case.X.size() - 2, Offset = 3 - N;
  int64_t In[3] = {1, 1, 1}, O[3] = {1, 1, 1}, K[3] = {1, 1, 1},
          S[3] = {1, 1, 1}, D[3] = {1, 1, 1}, PB[3] = {0, 0, 0},
          PE[3] = {0, 0, 0};
  for (size_t I = 0; I < N; ++I) {
    In[Offset + I] = Case.X[2 + I];
    O[Offset + I] = Out[2 + I];
    K[Offset + I] = Case.Kernel[I];
    S[Offset + I] = Case.Strides[I];
    D[Offset + I] = Case.Dilations[I];
    PB[Offset + I] = Case.Pads[I];
    PE[Offset + I] = Case.Pads[N + I];
  }
  int64_t Planes = Case.X[0] * Case.X[1];
  std::vector<double> Y;
  for (int64_t P = 0; P < Planes; ++P)
    for (int64_t O0 = 0; O0 < O[0]; ++O0)
      for (int64_t O1 = 0; O1 < O[1]; ++O1)
        for (int64_t O2 = 0; O2 < O[2]; ++O2) {
          double Best = -INFINITY, Sum = 0;
          int64_t Valid = 0, Padded = 0;
          for (int64_t K0 = 0; K0 < K[0]; ++K0)
            for (int64_t K1 = 0; K1 < K[1]; ++K1)
              for (int64_t K2 = 0; K2 < K[2]; ++K2) {
                int64_t Out3[3] = {O0, O1, O2}, Tap[3] = {K0, K1, K2}, Pos[3];
                bool Inside = true, InPadded = true;
                for (int A = 0; A < 3; ++A) {
                  Pos[A] = Out3[A] * S[A] - PB[A] + Tap[A] * D[A];
                  Inside = Inside && Pos[A] >= 0 && Pos[A] < In[A];
                  InPadded = InPadded && Pos[A] < In[A] + PE[A];
                }
                Padded += InPadded;
                if (!Inside)
                  continue;
                double V = X.at(
                    ((P * In[0] + Pos[0]) * In[1] + Pos[1]) * In[2] + Pos[2]);
                Best = std::max(Best, V);
                Sum += V;
                ++Valid;
              }
          Y.push_back(Max ? Best : Sum / (IncludePad ? Padded : Valid));
        }
  return Y;
}

const PoolCase PoolCases[] = {
    {"2-D 2x2 stride 2",
     {2, 3, 6, 6},
     {2, 2},
     {2, 2},
     {1, 1},
     {0, 0, 0, 0},
     false},
    {"3x3 stride 2 pads 1",
     {1, 2, 7, 7},
     {3, 3},
     {2, 2},
     {1, 1},
     {1, 1, 1, 1},
     false},
    {"ceil mode", {1, 2, 6, 6}, {3, 3}, {2, 2}, {1, 1}, {0, 0, 0, 0}, true},
    {"ceil mode past the end pad",
     {1, 2, 6, 6},
     {3, 3},
     {2, 2},
     {1, 1},
     {1, 1, 1, 1},
     true},
    {"dilation 2, asymmetric pads",
     {1, 2, 7, 7},
     {2, 2},
     {1, 1},
     {2, 2},
     {1, 0, 0, 1},
     false},
    {"floor drops the last row",
     {1, 1, 5, 5},
     {2, 2},
     {2, 2},
     {1, 1},
     {0, 0, 0, 0},
     false},
    {"1-D", {2, 2, 9}, {3}, {2}, {1}, {1, 1}, false},
    // Dilated windows whose taps skip over the input: the whole op, and
    // the part of it a split gives the call computing its last output
    // (input [6, 8), local pads 0 and 2), where one tap of two is inside.
    {"dilation 3 past the end", {1, 2, 8}, {2}, {3}, {3}, {3, 2}, true},
    {"dilation 3, a split's last part",
     {1, 2, 2},
     {2},
     {3},
     {3},
     {0, 2},
     false},
    {"3-D",
     {1, 2, 4, 5, 4},
     {2, 2, 2},
     {2, 2, 1},
     {1, 1, 1},
     {0, 1, 0, 0, 0, 1},
     false},
};

void checkPool(const PoolCase &Case, OpKind Kind, bool IncludePad) {
  SCOPED_TRACE(std::string(Case.Name) + (IncludePad ? ", include pad" : ""));
  bool Max = Kind == OpKind::MaxPool;
  OpAttrs Attrs = poolAttrs(Case, IncludePad);
  HostTensor X = spacedTensor(Case.X, 1);
  Ints Out = poolOutput(Case);
  HostTensor Y = f32(Out);
  auto Backend = createCpuBackend(1);
  runForward(*Backend, Kind, Attrs, {&X}, {&Y});
  std::vector<double> Expected = referencePool(Case, X, Out, Max, IncludePad);
  ASSERT_EQ(Y.size(), static_cast<int64_t>(Expected.size()));
  for (int64_t I = 0; I < Y.size(); ++I)
    EXPECT_NEAR(Y.at(I), Expected[I],
                1e-4 * std::max(1.0, std::fabs(Expected[I])))
        << "element " << I;
  gradCheck(*Backend, Kind, Attrs, {&X}, {f32(Out)}, {0}, 1e-2, 1e-2);
}

TEST(PoolMaxPool, ForwardMatchesLoopsAndGradientsCheck) {
  for (const PoolCase &Case : PoolCases)
    checkPool(Case, OpKind::MaxPool, false);
}

TEST(PoolAveragePool, ForwardMatchesLoopsAndGradientsCheck) {
  for (const PoolCase &Case : PoolCases) {
    checkPool(Case, OpKind::AveragePool, false);
    checkPool(Case, OpKind::AveragePool, true);
  }
}

/// Backward once into a fresh gradient, twice into another: 2x.
void expectBackwardAccumulates(OpKind Kind, const OpAttrs &Attrs, Ints XDims,
                               Ints YDims) {
  auto Backend = createCpuBackend(1);
  HostTensor X = spacedTensor(XDims, 1), Y = f32(YDims);
  runForward(*Backend, Kind, Attrs, {&X}, {&Y});
  HostTensor DY = spacedTensor(YDims, 2), Once = f32(XDims), Twice = f32(XDims);
  OpCall Call{Kind, Attrs, "pool", {X.view()}, {Y.view()}, 1};
  Backend->backward(Call, {DY.view()}, {Once.view()});
  Backend->backward(Call, {DY.view()}, {Twice.view()});
  Backend->backward(Call, {DY.view()}, {Twice.view()});
  double Norm = 0;
  for (int64_t I = 0; I < Once.size(); ++I) {
    EXPECT_NEAR(Twice.at(I), 2 * Once.at(I), 1e-5) << "element " << I;
    Norm += std::fabs(Once.at(I));
  }
  EXPECT_GT(Norm, 0);
  // An absent input gradient is skipped.
  Backend->backward(Call, {DY.view()}, {TensorView::absent()});
}

TEST(PoolAll, BackwardAccumulates) {
  const PoolCase &Case = PoolCases[1];
  Ints Out = poolOutput(Case);
  expectBackwardAccumulates(OpKind::MaxPool, poolAttrs(Case, false), Case.X,
                            Out);
  expectBackwardAccumulates(OpKind::AveragePool, poolAttrs(Case, true), Case.X,
                            Out);
  const PoolCase &Ceil = PoolCases[3]; // the loop kernel
  expectBackwardAccumulates(OpKind::AveragePool, poolAttrs(Ceil, true), Ceil.X,
                            poolOutput(Ceil));
  OpAttrs None;
  expectBackwardAccumulates(OpKind::GlobalAveragePool, None, {2, 3, 4, 5},
                            {2, 3, 1, 1});
  expectBackwardAccumulates(OpKind::GlobalMaxPool, None, {2, 3, 4, 5},
                            {2, 3, 1, 1});
}

TEST(PoolGlobal, ForwardMatchesLoopsAndGradientsCheck) {
  OpAttrs None;
  for (Ints XDims : {Ints{2, 3, 7}, Ints{2, 3, 4, 5}, Ints{1, 2, 3, 2, 4}}) {
    SCOPED_TRACE(testing::PrintToString(XDims));
    Ints YDims(XDims.size(), 1);
    YDims[0] = XDims[0];
    YDims[1] = XDims[1];
    HostTensor X = spacedTensor(XDims, 3), Max = f32(YDims), Mean = f32(YDims);
    auto Backend = createCpuBackend(1);
    runForward(*Backend, OpKind::GlobalMaxPool, None, {&X}, {&Max});
    runForward(*Backend, OpKind::GlobalAveragePool, None, {&X}, {&Mean});
    int64_t Planes = XDims[0] * XDims[1], Size = X.size() / Planes;
    for (int64_t P = 0; P < Planes; ++P) {
      double Best = -INFINITY, Sum = 0;
      for (int64_t I = 0; I < Size; ++I) {
        Best = std::max(Best, X.at(P * Size + I));
        Sum += X.at(P * Size + I);
      }
      EXPECT_FLOAT_EQ(Max.at(P), Best);
      EXPECT_NEAR(Mean.at(P), Sum / Size, 1e-5 * std::max(1.0, std::fabs(Sum)));
    }
    gradCheck(*Backend, OpKind::GlobalMaxPool, None, {&X}, {f32(YDims)}, {0},
              1e-2, 1e-2);
    gradCheck(*Backend, OpKind::GlobalAveragePool, None, {&X}, {f32(YDims)},
              {0}, 1e-2, 1e-2);
  }
}

//===-- Resize ------------------------------------------------------------===//

OpAttrs resizeAttrs(const char *Mode, const char *Coordinates,
                    std::vector<double> Scales,
                    const char *Nearest = "round_prefer_floor") {
  OpAttrs A;
  A.set("mode", std::string(Mode));
  A.set("coordinate_transformation_mode", std::string(Coordinates));
  A.set("nearest_mode", std::string(Nearest));
  A.set("scales", std::move(Scales));
  return A;
}

// Bilinear upsampling by 2 of a 2x2 plane, PyTorch's align_corners=False
// (half_pixel), worked by hand: the corners keep their values, the border
// blends two, the inside four with weights 1/4 and 3/4.
TEST(PoolResize, BilinearUpsampleByHand) {
  auto Backend = createCpuBackend(1);
  HostTensor X = f32({1, 1, 2, 2}, {0, 4, 8, 12}), Y = f32({1, 1, 4, 4});
  runForward(*Backend, OpKind::Resize,
             resizeAttrs("linear", "half_pixel", {1, 1, 2, 2}), {&X}, {&Y});
  const double Want[16] = {0, 1, 3, 4, 2, 3, 5, 6, 6, 7, 9, 10, 8, 9, 11, 12};
  for (int I = 0; I < 16; ++I)
    EXPECT_FLOAT_EQ(Y.at(I), Want[I]) << I;
  // Nearest by 2 (PyTorch's nn.Upsample: asymmetric, floor).
  runForward(*Backend, OpKind::Resize,
             resizeAttrs("nearest", "asymmetric", {1, 1, 2, 2}, "floor"), {&X},
             {&Y});
  const double Nearest[16] = {0, 0, 4,  4,  0, 0, 4,  4,
                              8, 8, 12, 12, 8, 8, 12, 12};
  for (int I = 0; I < 16; ++I)
    EXPECT_FLOAT_EQ(Y.at(I), Nearest[I]) << I;
}

// Resize is linear in X, so central differences are exact: the backward
// must add each output gradient into exactly the taps the forward read,
// for every mode, 1-D to 3-D, up and down.
TEST(PoolResize, GradientsCheck) {
  struct Case {
    OpAttrs Attrs;
    Ints X, Y;
  } Cases[] = {
      {resizeAttrs("linear", "half_pixel", {1, 1, 2, 2}),
       {2, 3, 3, 4},
       {2, 3, 6, 8}},
      {resizeAttrs("linear", "pytorch_half_pixel", {1, 1, 0.5, 0.75}),
       {1, 2, 4, 4},
       {1, 2, 2, 3}},
      {resizeAttrs("linear", "align_corners", {1, 1, 2.5}),
       {2, 2, 4},
       {2, 2, 10}},
      {resizeAttrs("linear", "asymmetric", {1, 1, 2, 1.5, 2}),
       {1, 1, 2, 2, 3},
       {1, 1, 4, 3, 6}},
      {resizeAttrs("nearest", "asymmetric", {1, 1, 3, 2}, "floor"),
       {2, 2, 2, 3},
       {2, 2, 6, 6}},
      {resizeAttrs("nearest", "half_pixel", {1, 1, 0.5, 0.5},
                   "round_prefer_ceil"),
       {1, 3, 5, 4},
       {1, 3, 2, 2}},
  };
  auto Backend = createCpuBackend(1);
  for (Case &C : Cases) {
    SCOPED_TRACE(testing::PrintToString(C.X) + " -> " +
                 testing::PrintToString(C.Y));
    HostTensor X = spacedTensor(C.X, 5);
    gradCheck(*Backend, OpKind::Resize, C.Attrs, {&X}, {f32(C.Y)}, {0}, 1e-2,
              1e-3);
  }
  expectBackwardAccumulates(OpKind::Resize, Cases[0].Attrs, Cases[0].X,
                            Cases[0].Y);
}

// Backward gathers each input's gradient from the outputs that read it
// (ResizeMap.h, the CUDA kernel's thread per input); it must add exactly
// what adding each output gradient into its taps adds, in the same order:
// downsampling and upsampling, non-integer scales, every coordinate mode
// and nearest rounding, 1-D to 3-D, onto a gradient already holding values.
TEST(PoolResize, GatheredGradientEqualsScatteredToTheBit) {
  std::mt19937 Rng(41);
  std::uniform_int_distribution<int> Size(1, 7), Mode(0, 3), Spatial(1, 3);
  std::uniform_real_distribution<double> Scale(0.3, 3.2);
  int Checked = 0;
  for (int Case = 0; Case < 400; ++Case) {
    ResizeGeometry G;
    G.Planes = 2;
    G.Spatial = Spatial(Rng);
    G.Linear = Case % 2;
    G.Coordinates = static_cast<ResizeCoordinates>(Mode(Rng));
    G.Rounding = static_cast<ResizeRounding>(Mode(Rng));
    for (int D = 0; D < G.Spatial; ++D) {
      G.InDims[D] = Size(Rng);
      // Sizes given (scale Out / In), or scales (Out = floor(scale * In)).
      double S = Scale(Rng);
      G.OutDims[D] = std::max<int64_t>(1, int64_t(S * double(G.InDims[D])));
      G.Scales[D] = Case % 3 ? double(G.OutDims[D]) / double(G.InDims[D]) : S;
      G.InPlane *= G.InDims[D];
      G.OutPlane *= G.OutDims[D];
    }
    std::uniform_real_distribution<float> Value(-1, 1);
    std::vector<float> Grad(G.OutPlane), Scattered(G.InPlane);
    for (float &V : Grad)
      V = Value(Rng);
    for (float &V : Scattered)
      V = Value(Rng);
    std::vector<float> Gathered = Scattered;
    for (int64_t I = 0; I < G.OutPlane; ++I)
      resizeForEachTap(G, I, [&](int64_t Offset, float W) {
        Scattered[Offset] += W * Grad[I];
      });
    for (int64_t I = 0; I < G.InPlane; ++I)
      Gathered[I] = resizeGatherGradient(G, Grad.data(), I, Gathered[I]);
    for (int64_t I = 0; I < G.InPlane; ++I)
      ASSERT_EQ(Gathered[I], Scattered[I])
          << "case " << Case << " element " << I;
    ++Checked;
  }
  EXPECT_EQ(Checked, 400);
}

TEST(PoolAll, BadOperandsNameTheOp) {
  auto Backend = createCpuBackend(1);
  PoolCase Case = PoolCases[0];
  OpAttrs Attrs = poolAttrs(Case, false);
  HostTensor X = f32(Case.X), Y = f32({2, 3, 4, 4}); // should be 3x3
  try {
    runForward(*Backend, OpKind::MaxPool, Attrs, {&X}, {&Y});
    FAIL() << "expected a RuntimeError";
  } catch (const RuntimeError &E) {
    EXPECT_THAT(E.what(), testing::HasSubstr("(MaxPool)"));
  }
  HostTensor Global = f32({2, 3, 2, 1});
  OpAttrs None;
  EXPECT_THROW(
      runForward(*Backend, OpKind::GlobalAveragePool, None, {&X}, {&Global}),
      RuntimeError);
}

} // namespace
