//===- tests/runtime_lib/ContractionTest.cpp - Contraction kernels ------===//
//
// The CPU contraction kernels against direct reference loops in double
// (several window attributes, groups, 1-D to 3-D, broadcasting), their
// backward against central differences (f32: epsilon 1e-2, relative
// tolerance 1e-2), and accumulation of the backward into its views.
//
//===----------------------------------------------------------------------===//
#include "KernelTestUtil.h"
#include "runtime_lib/Error.h"

using namespace onnx2soap::rt;
using namespace onnx2soap::rt::test;

namespace {

using Ints = std::vector<int64_t>;

HostTensor randomTensor(Ints Dims, unsigned Seed) {
  std::mt19937 Rng(Seed);
  HostTensor T = f32(std::move(Dims));
  randomize(T, Rng);
  return T;
}

void expectClose(const HostTensor &Actual, const std::vector<double> &Expected,
                 double Tolerance = 1e-4) {
  ASSERT_EQ(Actual.size(), static_cast<int64_t>(Expected.size()));
  for (int64_t I = 0; I < Actual.size(); ++I)
    EXPECT_NEAR(Actual.at(I), Expected[I],
                Tolerance * std::max(1.0, std::fabs(Expected[I])))
        << "element " << I;
}

/// Runs backward once into fresh gradients and twice into others; the
/// second set must be twice the first (backward adds into its views).
void expectBackwardAccumulates(OpKind Kind, const OpAttrs &Attrs,
                               std::vector<HostTensor *> Inputs,
                               HostTensor Output) {
  auto B = createCpuBackend(1);
  runForward(*B, Kind, Attrs, Inputs, {&Output});
  HostTensor OutGrad = randomTensor(Output.Dims, 7);
  OpCall Call{Kind, Attrs, "test", {}, {Output.view()}, 1};
  std::vector<HostTensor> Once, Twice;
  std::vector<TensorView> OnceViews, TwiceViews;
  for (HostTensor *T : Inputs) {
    Call.Inputs.push_back(T ? T->view() : TensorView::absent());
    Once.push_back(T ? HostTensor(T->Type, T->Dims) : HostTensor());
    Twice.push_back(T ? HostTensor(T->Type, T->Dims) : HostTensor());
  }
  for (size_t I = 0; I < Inputs.size(); ++I) {
    OnceViews.push_back(Inputs[I] ? Once[I].view() : TensorView::absent());
    TwiceViews.push_back(Inputs[I] ? Twice[I].view() : TensorView::absent());
  }
  B->backward(Call, {OutGrad.view()}, OnceViews);
  B->backward(Call, {OutGrad.view()}, TwiceViews);
  B->backward(Call, {OutGrad.view()}, TwiceViews);
  for (size_t I = 0; I < Inputs.size(); ++I)
    for (int64_t E = 0; E < Once[I].size(); ++E)
      EXPECT_NEAR(Twice[I].at(E), 2 * Once[I].at(E),
                  1e-5 * std::max(1.0, std::fabs(Once[I].at(E))))
          << "input " << I << " element " << E;
}

//===-- Conv and ConvTranspose --------------------------------------------===//

struct ConvCase {
  const char *Name;
  Ints X, W, Strides, Dilations, Pads, OutputPadding;
  int64_t Group;
  bool Bias;
};

OpAttrs convAttrs(const ConvCase &Case) {
  OpAttrs A;
  A.set("kernel_shape", Ints(Case.W.begin() + 2, Case.W.end()));
  A.set("strides", Case.Strides);
  A.set("dilations", Case.Dilations);
  A.set("pads", Case.Pads);
  A.set("group", Case.Group);
  if (!Case.OutputPadding.empty())
    A.set("output_padding", Case.OutputPadding);
  return A;
}

/// Spatial dims padded to 3 (leading unit dims), for the reference loops.
struct Spatial3 {
  int64_t In[3] = {1, 1, 1}, Out[3] = {1, 1, 1}, K[3] = {1, 1, 1};
  int64_t S[3] = {1, 1, 1}, D[3] = {1, 1, 1}, P[3] = {0, 0, 0};
};

Spatial3 spatial3(const ConvCase &Case, const Ints &Out) {
  Spatial3 G;
  size_t N = Case.X.size() - 2, Offset = 3 - N;
  for (size_t I = 0; I < N; ++I) {
    G.In[Offset + I] = Case.X[2 + I];
    G.Out[Offset + I] = Out[2 + I];
    G.K[Offset + I] = Case.W[2 + I];
    G.S[Offset + I] = Case.Strides[I];
    G.D[Offset + I] = Case.Dilations[I];
    G.P[Offset + I] = Case.Pads[I];
  }
  return G;
}

int64_t flat3(const int64_t *Dims, int64_t A, int64_t B, int64_t C) {
  return (A * Dims[1] + B) * Dims[2] + C;
}

/// Direct convolution (Transposed = false) or its transpose, in double.
std::vector<double> referenceConv(const ConvCase &Case, const HostTensor &X,
                                  const HostTensor &W, const HostTensor *B,
                                  const Ints &Out, bool Transposed) {
  Spatial3 G = spatial3(Case, Out);
  int64_t N = Case.X[0], C = Case.X[1], M = Out[1];
  int64_t InPerGroup = C / Case.Group, OutPerGroup = M / Case.Group;
  int64_t InSize = G.In[0] * G.In[1] * G.In[2];
  int64_t OutSize = G.Out[0] * G.Out[1] * G.Out[2];
  int64_t KSize = G.K[0] * G.K[1] * G.K[2];
  std::vector<double> Y(N * M * OutSize, 0.0);
  for (int64_t Sample = 0; Sample < N; ++Sample)
    for (int64_t Oc = 0; Oc < M; ++Oc) {
      int64_t Group = Oc / OutPerGroup;
      for (int64_t Ic = 0; Ic < InPerGroup; ++Ic) {
        int64_t Channel = Group * InPerGroup + Ic;
        // Conv's W [M, C/g, k], ConvTranspose's W [C, M/g, k].
        int64_t WBase = Transposed
                            ? (Channel * OutPerGroup + Oc % OutPerGroup) * KSize
                            : (Oc * InPerGroup + Ic) * KSize;
        for (int64_t A = 0; A < G.K[0]; ++A)
          for (int64_t Bk = 0; Bk < G.K[1]; ++Bk)
            for (int64_t Ck = 0; Ck < G.K[2]; ++Ck) {
              double Wv = W.at(WBase + flat3(G.K, A, Bk, Ck));
              int64_t Tap[3] = {A, Bk, Ck};
              // Conv: out o reads in o*s - p + k*d. Transpose: in i writes
              // out i*s - p + k*d.
              const int64_t *Outer = Transposed ? G.In : G.Out;
              const int64_t *Inner = Transposed ? G.Out : G.In;
              for (int64_t O0 = 0; O0 < Outer[0]; ++O0)
                for (int64_t O1 = 0; O1 < Outer[1]; ++O1)
                  for (int64_t O2 = 0; O2 < Outer[2]; ++O2) {
                    int64_t O[3] = {O0, O1, O2}, I[3];
                    bool Inside = true;
                    for (int D = 0; D < 3; ++D) {
                      I[D] = O[D] * G.S[D] - G.P[D] + Tap[D] * G.D[D];
                      Inside = Inside && I[D] >= 0 && I[D] < Inner[D];
                    }
                    if (!Inside)
                      continue;
                    int64_t OuterIndex = flat3(Outer, O0, O1, O2);
                    int64_t InnerIndex = flat3(Inner, I[0], I[1], I[2]);
                    int64_t XIndex = Transposed ? OuterIndex : InnerIndex;
                    int64_t YIndex = Transposed ? InnerIndex : OuterIndex;
                    Y[(Sample * M + Oc) * OutSize + YIndex] +=
                        Wv * X.at((Sample * C + Channel) * InSize + XIndex);
                  }
            }
      }
      if (B)
        for (int64_t P = 0; P < OutSize; ++P)
          Y[(Sample * M + Oc) * OutSize + P] += B->at(Oc);
    }
  return Y;
}

Ints convOutput(const ConvCase &Case, bool Transposed) {
  int64_t M = Transposed ? Case.W[1] * Case.Group : Case.W[0];
  Ints Out{Case.X[0], M};
  size_t N = Case.X.size() - 2;
  for (size_t I = 0; I < N; ++I) {
    int64_t Extent = (Case.W[2 + I] - 1) * Case.Dilations[I] + 1;
    int64_t Pads = Case.Pads[I] + Case.Pads[N + I];
    Out.push_back(Transposed
                      ? Case.Strides[I] * (Case.X[2 + I] - 1) +
                            Case.OutputPadding[I] + Extent - Pads
                      : (Case.X[2 + I] + Pads - Extent) / Case.Strides[I] + 1);
  }
  return Out;
}

void checkConvCase(const ConvCase &Case, bool Transposed) {
  SCOPED_TRACE(Case.Name);
  OpKind Kind = Transposed ? OpKind::ConvTranspose : OpKind::Conv;
  OpAttrs Attrs = convAttrs(Case);
  HostTensor X = randomTensor(Case.X, 1), W = randomTensor(Case.W, 2);
  Ints Out = convOutput(Case, Transposed);
  HostTensor B = randomTensor({Out[1]}, 3), Y = f32(Out);
  HostTensor *BP = Case.Bias ? &B : nullptr;
  auto Backend = createCpuBackend(1);
  runForward(*Backend, Kind, Attrs, {&X, &W, BP}, {&Y});
  expectClose(Y, referenceConv(Case, X, W, BP, Out, Transposed));
  std::vector<unsigned> Check{0, 1};
  if (Case.Bias)
    Check.push_back(2);
  gradCheck(*Backend, Kind, Attrs, {&X, &W, BP}, {f32(Out)}, Check, 1e-2, 1e-2);
}

const ConvCase ConvCases[] = {
    {"2-D with bias",
     {2, 3, 5, 5},
     {4, 3, 3, 3},
     {1, 1},
     {1, 1},
     {0, 0, 0, 0},
     {},
     1,
     true},
    {"stride 2, asymmetric pads",
     {1, 2, 7, 6},
     {3, 2, 3, 2},
     {2, 2},
     {1, 1},
     {1, 0, 2, 1},
     {},
     1,
     false},
    {"dilation 2",
     {1, 2, 7, 7},
     {2, 2, 3, 3},
     {1, 1},
     {2, 2},
     {2, 2, 2, 2},
     {},
     1,
     true},
    {"group 2",
     {2, 4, 5, 5},
     {6, 2, 3, 3},
     {1, 2},
     {1, 1},
     {1, 1, 1, 1},
     {},
     2,
     true},
    {"depthwise",
     {1, 3, 6, 6},
     {3, 1, 3, 3},
     {1, 1},
     {1, 1},
     {1, 1, 1, 1},
     {},
     3,
     false},
    {"1-D", {2, 3, 9}, {4, 3, 3}, {2}, {2}, {1, 2}, {}, 1, true},
    {"3-D",
     {1, 2, 4, 5, 4},
     {2, 2, 2, 3, 2},
     {1, 2, 1},
     {1, 1, 1},
     {0, 1, 1, 1, 0, 0},
     {},
     1,
     true},
    // 16 channels: oneDNN picks blocked layouts, so the reorders to and from
    // the plain views (and the accumulating ones of the gradients) run.
    {"2-D, 16 channels, stride 2",
     {1, 16, 5, 5},
     {16, 16, 3, 3},
     {2, 2},
     {1, 1},
     {1, 1, 1, 1},
     {},
     1,
     true},
};

TEST(ContractionConv, ForwardMatchesLoopsAndGradientsCheck) {
  for (const ConvCase &Case : ConvCases)
    checkConvCase(Case, /*Transposed=*/false);
}

const ConvCase ConvTransposeCases[] = {
    {"2-D stride 2 with output_padding",
     {1, 2, 3, 3},
     {2, 3, 3, 3},
     {2, 2},
     {1, 1},
     {1, 1, 1, 1},
     {1, 1},
     1,
     true},
    {"groups, dilation, asymmetric pads",
     {2, 4, 3, 4},
     {4, 1, 2, 2},
     {2, 1},
     {1, 2},
     {0, 1, 0, 0},
     {1, 0},
     2,
     false},
    {"1-D output_padding past the end pad",
     {1, 2, 4},
     {2, 2, 3},
     {3},
     {1},
     {0, 0},
     {2},
     1,
     true},
    {"3-D",
     {1, 2, 2, 3, 2},
     {2, 2, 2, 2, 2},
     {2, 1, 2},
     {1, 1, 1},
     {0, 0, 1, 1, 0, 1},
     {0, 0, 1},
     1,
     true},
};

TEST(ContractionConvTranspose, ForwardMatchesLoopsAndGradientsCheck) {
  for (const ConvCase &Case : ConvTransposeCases)
    checkConvCase(Case, /*Transposed=*/true);
}

TEST(ContractionConv, BackwardAccumulatesAndSkipsAbsentGradients) {
  const ConvCase &Case = ConvCases[3];
  HostTensor X = randomTensor(Case.X, 1), W = randomTensor(Case.W, 2);
  HostTensor B = randomTensor({Case.W[0]}, 3);
  expectBackwardAccumulates(OpKind::Conv, convAttrs(Case), {&X, &W, &B},
                            f32(convOutput(Case, false)));
  const ConvCase &T = ConvTransposeCases[0];
  HostTensor TX = randomTensor(T.X, 1), TW = randomTensor(T.W, 2);
  HostTensor TB = randomTensor({T.W[1]}, 3);
  expectBackwardAccumulates(OpKind::ConvTranspose, convAttrs(T),
                            {&TX, &TW, &TB}, f32(convOutput(T, true)));

  // Only dW requested: dX's and dB's views are absent and nothing fails.
  auto Backend = createCpuBackend(1);
  HostTensor Y = f32(convOutput(Case, false)), DW = f32(Case.W);
  OpAttrs Attrs = convAttrs(Case);
  runForward(*Backend, OpKind::Conv, Attrs, {&X, &W, &B}, {&Y});
  HostTensor DY = randomTensor(Y.Dims, 4);
  OpCall Call{OpKind::Conv, Attrs, "c", {X.view(), W.view(), B.view()},
              {Y.view()},   1};
  Backend->backward(Call, {DY.view()},
                    {TensorView::absent(), DW.view(), TensorView::absent()});
  double Norm = 0;
  for (int64_t I = 0; I < DW.size(); ++I)
    Norm += std::fabs(DW.at(I));
  EXPECT_GT(Norm, 0);
}

TEST(ContractionConv, BadOperandsNameTheOp) {
  auto Backend = createCpuBackend(1);
  ConvCase Case = ConvCases[0];
  OpAttrs Attrs = convAttrs(Case);
  HostTensor X = f32({2, 2, 5, 5}), W = f32(Case.W), Y = f32({2, 4, 3, 3});
  OpCall Call{OpKind::Conv,         Attrs,      "conv7",
              {X.view(), W.view()}, {Y.view()}, 1};
  try {
    Backend->forward(Call);
    FAIL() << "expected a RuntimeError";
  } catch (const RuntimeError &E) {
    EXPECT_THAT(E.what(), testing::HasSubstr("op 'conv7' (Conv)"));
  }
  HostTensor GoodX = f32({2, 3, 5, 5}), Wrong = f32({2, 4, 4, 4});
  OpCall Bad{OpKind::Conv,   Attrs, "conv8", {GoodX.view(), W.view()},
             {Wrong.view()}, 1}; // output spatial dims off
  EXPECT_THROW(Backend->forward(Bad), RuntimeError);
}

//===-- Gemm --------------------------------------------------------------===//

struct GemmCase {
  const char *Name;
  bool TransA, TransB;
  double Alpha, Beta;
  Ints C; // empty vector with HasC = scalar
  bool HasC;
};

TEST(ContractionGemm, ForwardMatchesLoopsAndGradientsCheck) {
  const int64_t M = 3, K = 4, N = 5;
  const GemmCase Cases[] = {
      {"plain with C [M,N]", false, false, 1.0, 1.0, {M, N}, true},
      {"transA, C [N]", true, false, 0.5, 2.0, {N}, true},
      {"transB, C [M,1]", false, true, -1.5, 0.5, {M, 1}, true},
      {"both transposed, scalar C", true, true, 2.0, -1.0, {}, true},
      {"no C", false, true, 0.7, 1.0, {}, false},
  };
  for (const GemmCase &Case : Cases) {
    SCOPED_TRACE(Case.Name);
    OpAttrs Attrs;
    Attrs.set("transA", int64_t(Case.TransA));
    Attrs.set("transB", int64_t(Case.TransB));
    Attrs.set("alpha", Case.Alpha);
    Attrs.set("beta", Case.Beta);
    HostTensor A = randomTensor(Case.TransA ? Ints{K, M} : Ints{M, K}, 1);
    HostTensor B = randomTensor(Case.TransB ? Ints{N, K} : Ints{K, N}, 2);
    HostTensor C = randomTensor(Case.C, 3), Y = f32({M, N});
    HostTensor *CP = Case.HasC ? &C : nullptr;
    auto Backend = createCpuBackend(1);
    runForward(*Backend, OpKind::Gemm, Attrs, {&A, &B, CP}, {&Y});
    std::vector<double> Expected(M * N);
    for (int64_t I = 0; I < M; ++I)
      for (int64_t J = 0; J < N; ++J) {
        double Sum = 0;
        for (int64_t P = 0; P < K; ++P)
          Sum += A.at(Case.TransA ? P * M + I : I * K + P) *
                 B.at(Case.TransB ? J * K + P : P * N + J);
        double CValue = 0;
        if (Case.HasC) {
          int64_t Row = Case.C.size() == 2 && Case.C[0] != 1 ? I : 0;
          int64_t Col = !Case.C.empty() && Case.C.back() != 1 ? J : 0;
          CValue = C.at(Row * (Case.C.size() == 2 ? Case.C[1] : 0) + Col);
        }
        Expected[I * N + J] = Case.Alpha * Sum + Case.Beta * CValue;
      }
    expectClose(Y, Expected);
    std::vector<unsigned> Check{0, 1};
    if (Case.HasC)
      Check.push_back(2);
    gradCheck(*Backend, OpKind::Gemm, Attrs, {&A, &B, CP}, {f32({M, N})}, Check,
              1e-2, 1e-2);
    if (Case.HasC)
      expectBackwardAccumulates(OpKind::Gemm, Attrs, {&A, &B, &C}, f32({M, N}));
  }
}

//===-- MatMul ------------------------------------------------------------===//

/// numpy matmul in double.
std::vector<double> referenceMatMul(const HostTensor &A, const HostTensor &B,
                                    const Ints &Out) {
  Ints AD = A.Dims, BD = B.Dims;
  if (AD.size() == 1)
    AD.insert(AD.begin(), 1);
  if (BD.size() == 1)
    BD.push_back(1);
  size_t Rank = std::max(AD.size(), BD.size());
  AD.insert(AD.begin(), Rank - AD.size(), 1);
  BD.insert(BD.begin(), Rank - BD.size(), 1);
  int64_t M = AD[Rank - 2], K = AD[Rank - 1], N = BD[Rank - 1];
  Ints Batch;
  for (size_t I = 0; I + 2 < Rank; ++I)
    Batch.push_back(std::max(AD[I], BD[I]));
  int64_t Count = 1;
  for (int64_t D : Batch)
    Count *= D;
  std::vector<double> Y(Count * M * N, 0.0);
  for (int64_t Flat = 0; Flat < Count; ++Flat) {
    int64_t Rest = Flat, AOff = 0, BOff = 0, AStride = M * K, BStride = K * N;
    for (size_t I = Batch.size(); I-- > 0;) {
      int64_t Index = Rest % Batch[I];
      Rest /= Batch[I];
      AOff += (AD[I] == 1 ? 0 : Index) * AStride;
      BOff += (BD[I] == 1 ? 0 : Index) * BStride;
      AStride *= AD[I];
      BStride *= BD[I];
    }
    for (int64_t I = 0; I < M; ++I)
      for (int64_t J = 0; J < N; ++J)
        for (int64_t P = 0; P < K; ++P)
          Y[(Flat * M + I) * N + J] +=
              A.at(AOff + I * K + P) * B.at(BOff + P * N + J);
  }
  EXPECT_EQ(static_cast<int64_t>(Y.size()), f32(Out).size());
  return Y;
}

TEST(ContractionMatMul, ForwardMatchesLoopsAndGradientsCheck) {
  struct Case {
    Ints A, B, Out;
  } Cases[] = {
      {{3, 4}, {4, 5}, {3, 5}},
      {{2, 3, 4}, {4, 5}, {2, 3, 5}},          // weight B: folded batch
      {{4}, {2, 4, 5}, {2, 5}},                // vector A, batched B
      {{2, 1, 3, 4}, {3, 4, 2}, {2, 3, 3, 2}}, // both broadcast
      {{2, 3, 4}, {4}, {2, 3}},                // vector B
      {{4}, {4}, {}},                          // dot product
      {{3, 4}, {2, 4, 5}, {2, 3, 5}},          // A broadcast
  };
  OpAttrs Attrs;
  for (const Case &C : Cases) {
    SCOPED_TRACE(testing::PrintToString(C.A) + " x " +
                 testing::PrintToString(C.B));
    HostTensor A = randomTensor(C.A, 1), B = randomTensor(C.B, 2);
    HostTensor Y = f32(C.Out);
    auto Backend = createCpuBackend(1);
    runForward(*Backend, OpKind::MatMul, Attrs, {&A, &B}, {&Y});
    expectClose(Y, referenceMatMul(A, B, C.Out));
    gradCheck(*Backend, OpKind::MatMul, Attrs, {&A, &B}, {f32(C.Out)}, {0, 1},
              1e-2, 1e-2);
    expectBackwardAccumulates(OpKind::MatMul, Attrs, {&A, &B}, f32(C.Out));
  }
}

TEST(ContractionMatMul, MismatchedInnerDimsFail) {
  auto Backend = createCpuBackend(1);
  OpAttrs Attrs;
  HostTensor A = f32({3, 4}), B = f32({5, 2}), Y = f32({3, 2});
  EXPECT_THROW(runForward(*Backend, OpKind::MatMul, Attrs, {&A, &B}, {&Y}),
               RuntimeError);
}

} // namespace
