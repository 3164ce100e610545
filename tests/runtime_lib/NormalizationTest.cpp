//===- tests/runtime_lib/NormalizationTest.cpp - Normalization kernels ----===//
//
// BatchNorm, LayerNorm, Softmax, LogSoftmax, ReduceMean, ReduceSum,
// ReduceMax, ReduceMin and CumSum on the CPU backend: forward values against
// reference loops written here, the gradient check of every differentiable
// input (f32: epsilon 1e-2, relative tolerance 1e-2; f64: epsilon 1e-5,
// tolerance 1e-6), and accumulation.
//
//===----------------------------------------------------------------------===//
#include "KernelTestUtil.h"
#include "runtime_lib/Error.h"
#include <limits>

using namespace onnx2soap::rt;
using namespace onnx2soap::rt::test;

namespace {

OpAttrs makeAttrs(
    std::initializer_list<std::pair<const char *, OpAttrs::Value>> Entries) {
  OpAttrs A;
  for (const auto &[Name, V] : Entries)
    A.set(Name, V);
  return A;
}

HostTensor randomTensor(DType Type, std::vector<int64_t> Dims, unsigned Seed,
                        double Low = -1, double High = 1) {
  HostTensor T(Type, std::move(Dims));
  std::mt19937 Rng(Seed);
  randomize(T, Rng, Low, High);
  return T;
}

/// Runs forward, then backward with OutGrads into the present InGrads.
void runBackward(Backend &B, OpKind Kind, const OpAttrs &Attrs,
                 std::vector<HostTensor *> Inputs,
                 std::vector<HostTensor *> Outputs,
                 std::vector<HostTensor *> OutGrads,
                 std::vector<HostTensor *> InGrads) {
  runForward(B, Kind, Attrs, Inputs, Outputs);
  OpCall Call{Kind, Attrs, "test", {}, {}, 1};
  for (HostTensor *T : Inputs)
    Call.Inputs.push_back(T ? T->view() : TensorView::absent());
  for (HostTensor *T : Outputs)
    Call.Outputs.push_back(T->view());
  std::vector<TensorView> OG, IG;
  for (HostTensor *T : OutGrads)
    OG.push_back(T ? T->view() : TensorView::absent());
  for (HostTensor *T : InGrads)
    IG.push_back(T ? T->view() : TensorView::absent());
  B.backward(Call, OG, IG);
}

//===-- BatchNorm ---------------------------------------------------------===//

struct BatchNormCase {
  HostTensor X, Scale, Bias, Mean, Var;
  explicit BatchNormCase(DType Type = DType::Float32)
      : X(randomTensor(Type, {2, 3, 2, 2}, 1)),
        Scale(randomTensor(Type, {3}, 2, 0.5, 1.5)),
        Bias(randomTensor(Type, {3}, 3)), Mean(randomTensor(Type, {3}, 4)),
        Var(randomTensor(Type, {3}, 5, 0.5, 1.5)) {}
  std::vector<HostTensor *> inputs() {
    return {&X, &Scale, &Bias, &Mean, &Var};
  }
};

TEST(BatchNormKernel, InferenceUsesTheGivenStatistics) {
  auto B = createCpuBackend(1);
  BatchNormCase C;
  HostTensor Y = f32({2, 3, 2, 2});
  OpAttrs A = makeAttrs({{"epsilon", 1e-3}, {"training", int64_t(0)}});
  runForward(*B, OpKind::BatchNorm, A, C.inputs(), {&Y});
  for (int64_t I = 0; I < Y.size(); ++I) {
    int64_t Ch = (I / 4) % 3;
    double Expected = (C.X.at(I) - C.Mean.at(Ch)) /
                          std::sqrt(C.Var.at(Ch) + 1e-3) * C.Scale.at(Ch) +
                      C.Bias.at(Ch);
    EXPECT_NEAR(Y.at(I), Expected, 1e-5) << I;
  }
}

TEST(BatchNormKernel, TrainingUsesBatchStatisticsAndBlendsRunningOnes) {
  auto B = createCpuBackend(1);
  BatchNormCase C;
  HostTensor Y = f32({2, 3, 2, 2}), RunMean = f32({3}), RunVar = f32({3});
  OpAttrs A = makeAttrs(
      {{"epsilon", 1e-5}, {"momentum", 0.8}, {"training", int64_t(1)}});
  runForward(*B, OpKind::BatchNorm, A, C.inputs(), {&Y, &RunMean, &RunVar});
  for (int64_t Ch = 0; Ch < 3; ++Ch) {
    std::vector<int64_t> Elems;
    for (int64_t N = 0; N < 2; ++N)
      for (int64_t S = 0; S < 4; ++S)
        Elems.push_back((N * 3 + Ch) * 4 + S);
    double Mean = 0, Var = 0;
    for (int64_t E : Elems)
      Mean += C.X.at(E) / Elems.size();
    for (int64_t E : Elems)
      Var += (C.X.at(E) - Mean) * (C.X.at(E) - Mean) / Elems.size();
    for (int64_t E : Elems)
      EXPECT_NEAR(Y.at(E),
                  (C.X.at(E) - Mean) / std::sqrt(Var + 1e-5) * C.Scale.at(Ch) +
                      C.Bias.at(Ch),
                  1e-5);
    // Biased batch variance, as ONNX specifies.
    EXPECT_NEAR(RunMean.at(Ch), 0.8 * C.Mean.at(Ch) + 0.2 * Mean, 1e-6);
    EXPECT_NEAR(RunVar.at(Ch), 0.8 * C.Var.at(Ch) + 0.2 * Var, 1e-6);
  }
}

TEST(BatchNormKernel, GradientsInTrainingMode) {
  auto B = createCpuBackend(1);
  BatchNormCase C;
  OpAttrs A = makeAttrs(
      {{"epsilon", 1e-5}, {"momentum", 0.9}, {"training", int64_t(1)}});
  // Every output carries a random weight, so the running statistics'
  // dependence on X, mean and var is checked too.
  gradCheck(*B, OpKind::BatchNorm, A, C.inputs(),
            {f32({2, 3, 2, 2}), f32({3}), f32({3})}, {0, 1, 2, 3, 4}, 1e-2,
            1e-2);
  BatchNormCase D(DType::Float64);
  gradCheck(*B, OpKind::BatchNorm, A, D.inputs(),
            {HostTensor(DType::Float64, {2, 3, 2, 2}),
             HostTensor(DType::Float64, {3}), HostTensor(DType::Float64, {3})},
            {0, 1, 2, 3, 4}, 1e-5, 1e-6);
}

TEST(BatchNormKernel, GradientsInInferenceMode) {
  auto B = createCpuBackend(1);
  BatchNormCase C;
  OpAttrs A = makeAttrs({{"epsilon", 1e-5}, {"training", int64_t(0)}});
  gradCheck(*B, OpKind::BatchNorm, A, C.inputs(), {f32({2, 3, 2, 2})},
            {0, 1, 2, 3, 4}, 1e-2, 1e-2);
}

TEST(BatchNormKernel, RejectsNonFloatInput) {
  auto B = createCpuBackend(1);
  BatchNormCase C;
  HostTensor X(DType::Int32, {2, 3, 2, 2}), Y(DType::Int32, {2, 3, 2, 2});
  OpAttrs A;
  EXPECT_THROW(runForward(*B, OpKind::BatchNorm, A,
                          {&X, &C.Scale, &C.Bias, &C.Mean, &C.Var}, {&Y}),
               RuntimeError);
}

//===-- LayerNorm ---------------------------------------------------------===//

TEST(LayerNormKernel, NormalizesTrailingDimsWithBroadcastWeights) {
  auto B = createCpuBackend(1);
  HostTensor X = randomTensor(DType::Float32, {2, 3, 4}, 7);
  HostTensor Scale = randomTensor(DType::Float32, {4}, 8);
  HostTensor Bias = randomTensor(DType::Float32, {3, 1}, 9);
  HostTensor Y = f32({2, 3, 4}), Mean = f32({2, 1, 1}), Inv = f32({2, 1, 1});
  OpAttrs A = makeAttrs({{"axis", int64_t(1)}, {"epsilon", 1e-5}});
  runForward(*B, OpKind::LayerNorm, A, {&X, &Scale, &Bias}, {&Y, &Mean, &Inv});
  for (int64_t R = 0; R < 2; ++R) {
    double M = 0, V = 0;
    for (int64_t J = 0; J < 12; ++J)
      M += X.at(R * 12 + J) / 12;
    for (int64_t J = 0; J < 12; ++J)
      V += (X.at(R * 12 + J) - M) * (X.at(R * 12 + J) - M) / 12;
    EXPECT_NEAR(Mean.at(R), M, 1e-6);
    EXPECT_NEAR(Inv.at(R), 1 / std::sqrt(V + 1e-5), 1e-5);
    for (int64_t J = 0; J < 12; ++J)
      EXPECT_NEAR(Y.at(R * 12 + J),
                  (X.at(R * 12 + J) - M) / std::sqrt(V + 1e-5) *
                          Scale.at(J % 4) +
                      Bias.at(J / 4),
                  1e-5);
  }
  // Last-axis normalization without bias.
  HostTensor Scale2 = randomTensor(DType::Float32, {4}, 10);
  HostTensor Mean2 = f32({2, 3, 1}), Inv2 = f32({2, 3, 1});
  A = makeAttrs({{"axis", int64_t(2)}, {"epsilon", 1e-5}});
  runForward(*B, OpKind::LayerNorm, A, {&X, &Scale2, nullptr},
             {&Y, &Mean2, &Inv2});
  for (int64_t R = 0; R < 6; ++R) {
    double M = 0, V = 0;
    for (int64_t J = 0; J < 4; ++J)
      M += X.at(R * 4 + J) / 4;
    for (int64_t J = 0; J < 4; ++J)
      V += (X.at(R * 4 + J) - M) * (X.at(R * 4 + J) - M) / 4;
    for (int64_t J = 0; J < 4; ++J)
      EXPECT_NEAR(Y.at(R * 4 + J),
                  (X.at(R * 4 + J) - M) / std::sqrt(V + 1e-5) * Scale2.at(J),
                  1e-5);
  }
}

TEST(LayerNormKernel, Gradients) {
  auto B = createCpuBackend(1);
  HostTensor X = randomTensor(DType::Float32, {2, 3, 4}, 11);
  HostTensor Scale = randomTensor(DType::Float32, {4}, 12);
  HostTensor Bias = randomTensor(DType::Float32, {3, 1}, 13);
  OpAttrs A = makeAttrs({{"axis", int64_t(1)}, {"epsilon", 1e-5}});
  // Mean and InvStdDev get random weights too: their gradients reach X.
  gradCheck(*B, OpKind::LayerNorm, A, {&X, &Scale, &Bias},
            {f32({2, 3, 4}), f32({2, 1, 1}), f32({2, 1, 1})}, {0, 1, 2}, 1e-2,
            1e-2);
  HostTensor Scale2 = randomTensor(DType::Float32, {3, 4}, 14);
  gradCheck(*B, OpKind::LayerNorm, A, {&X, &Scale2},
            {f32({2, 3, 4}), f32({2, 1, 1}), f32({2, 1, 1})}, {0, 1}, 1e-2,
            1e-2);
  A = makeAttrs({{"axis", int64_t(2)}, {"epsilon", 1e-5}});
  HostTensor Scale3 = randomTensor(DType::Float32, {4}, 15);
  gradCheck(*B, OpKind::LayerNorm, A, {&X, &Scale3, nullptr},
            {f32({2, 3, 4}), f32({2, 3, 1}), f32({2, 3, 1})}, {0, 1}, 1e-2,
            1e-2);
  HostTensor X64 = randomTensor(DType::Float64, {3, 5}, 16);
  HostTensor S64 = randomTensor(DType::Float64, {5}, 17);
  HostTensor B64 = randomTensor(DType::Float64, {5}, 18);
  A = makeAttrs({{"axis", int64_t(1)}, {"epsilon", 1e-5}});
  gradCheck(*B, OpKind::LayerNorm, A, {&X64, &S64, &B64},
            {HostTensor(DType::Float64, {3, 5}),
             HostTensor(DType::Float64, {3, 1}),
             HostTensor(DType::Float64, {3, 1})},
            {0, 1, 2}, 1e-5, 1e-5);
}

//===-- Softmax, LogSoftmax -----------------------------------------------===//

/// Reference (log-)softmax of X [A, B, C] over Axis.
std::vector<double> referenceSoftmax(const HostTensor &X, int Axis, bool Log) {
  int64_t Dims[3] = {X.Dims[0], X.Dims[1], X.Dims[2]};
  int64_t Strides[3] = {Dims[1] * Dims[2], Dims[2], 1};
  std::vector<double> Y(X.size());
  for (int64_t I = 0; I < X.size(); ++I) {
    int64_t Pos = (I / Strides[Axis]) % Dims[Axis];
    int64_t Base = I - Pos * Strides[Axis];
    double Sum = 0;
    for (int64_t K = 0; K < Dims[Axis]; ++K)
      Sum += std::exp(X.at(Base + K * Strides[Axis]));
    Y[I] = Log ? X.at(I) - std::log(Sum) : std::exp(X.at(I)) / Sum;
  }
  return Y;
}

TEST(SoftmaxKernel, ForwardOverEachAxis) {
  auto B = createCpuBackend(1);
  HostTensor X = randomTensor(DType::Float32, {2, 3, 4}, 21, -3, 3);
  for (OpKind Kind : {OpKind::Softmax, OpKind::LogSoftmax})
    for (int Axis = 0; Axis < 3; ++Axis) {
      HostTensor Y = f32({2, 3, 4});
      runForward(*B, Kind, makeAttrs({{"axis", int64_t(Axis)}}), {&X}, {&Y});
      std::vector<double> R =
          referenceSoftmax(X, Axis, Kind == OpKind::LogSoftmax);
      for (int64_t I = 0; I < Y.size(); ++I)
        EXPECT_NEAR(Y.at(I), R[I], 1e-5) << opKindName(Kind) << Axis << I;
    }
  // Large inputs do not overflow.
  HostTensor Big = f32({1, 1, 2}, {1000, 1000}), Y = f32({1, 1, 2});
  runForward(*B, OpKind::Softmax, makeAttrs({{"axis", int64_t(2)}}), {&Big},
             {&Y});
  EXPECT_NEAR(Y.at(0), 0.5, 1e-6);
}

TEST(SoftmaxKernel, Gradients) {
  auto B = createCpuBackend(1);
  for (OpKind Kind : {OpKind::Softmax, OpKind::LogSoftmax})
    for (int Axis : {0, 1, 2}) {
      HostTensor X = randomTensor(DType::Float32, {2, 3, 4}, 22 + Axis);
      gradCheck(*B, Kind, makeAttrs({{"axis", int64_t(Axis)}}), {&X},
                {f32({2, 3, 4})}, {0}, 1e-2, 1e-2);
    }
}

TEST(SoftmaxKernel, RejectsIntegerInputNamingTheOp) {
  auto B = createCpuBackend(1);
  HostTensor X(DType::Int32, {2, 2}), Y(DType::Int32, {2, 2});
  try {
    runForward(*B, OpKind::Softmax, makeAttrs({{"axis", int64_t(1)}}), {&X},
               {&Y});
    FAIL() << "no error";
  } catch (const RuntimeError &E) {
    EXPECT_THAT(E.what(), testing::HasSubstr("op 'test' (Softmax)"));
  }
}

//===-- ReduceMean, ReduceSum ---------------------------------------------===//

TEST(ReduceKernel, ForwardOverAxesWithAndWithoutKeepdims) {
  auto B = createCpuBackend(1);
  HostTensor X = f32({2, 3, 2});
  for (int64_t I = 0; I < 12; ++I)
    X.set(I, I);
  HostTensor Y = f32({1, 3, 1});
  runForward(*B, OpKind::ReduceSum,
             makeAttrs({{"axes", std::vector<int64_t>{0, 2}},
                        {"keepdims", int64_t(1)}}),
             {&X}, {&Y});
  // Column c sums 2c, 2c+1, 6+2c, 7+2c.
  for (int64_t C = 0; C < 3; ++C)
    EXPECT_FLOAT_EQ(Y.at(C), 14 + 8 * C);
  HostTensor M = f32({2, 2});
  runForward(
      *B, OpKind::ReduceMean,
      makeAttrs({{"axes", std::vector<int64_t>{1}}, {"keepdims", int64_t(0)}}),
      {&X}, {&M});
  EXPECT_FLOAT_EQ(M.at(0), 2); // (0 + 2 + 4) / 3
  EXPECT_FLOAT_EQ(M.at(1), 3); // (1 + 3 + 5) / 3
  EXPECT_FLOAT_EQ(M.at(2), 8); // (6 + 8 + 10) / 3
  EXPECT_FLOAT_EQ(M.at(3), 9);
  HostTensor Xi = i64({2, 3}, {1, 2, 3, 4, 5, 6}), Yi = i64({3});
  runForward(
      *B, OpKind::ReduceSum,
      makeAttrs({{"axes", std::vector<int64_t>{0}}, {"keepdims", int64_t(0)}}),
      {&Xi}, {&Yi});
  EXPECT_EQ(Yi.at(0), 5);
  EXPECT_EQ(Yi.at(2), 9);
  HostTensor All = f32({1, 1, 1});
  runForward(*B, OpKind::ReduceMean,
             makeAttrs({{"axes", std::vector<int64_t>{0, 1, 2}},
                        {"keepdims", int64_t(1)}}),
             {&X}, {&All});
  EXPECT_FLOAT_EQ(All.at(0), 5.5);
}

TEST(ReduceKernel, Gradients) {
  auto B = createCpuBackend(1);
  HostTensor X = randomTensor(DType::Float32, {2, 3, 4}, 31);
  for (OpKind Kind : {OpKind::ReduceSum, OpKind::ReduceMean}) {
    gradCheck(*B, Kind,
              makeAttrs({{"axes", std::vector<int64_t>{0, 2}},
                         {"keepdims", int64_t(0)}}),
              {&X}, {f32({3})}, {0}, 1e-2, 1e-2);
    gradCheck(*B, Kind,
              makeAttrs({{"axes", std::vector<int64_t>{1}},
                         {"keepdims", int64_t(1)}}),
              {&X}, {f32({2, 1, 4})}, {0}, 1e-2, 1e-2);
  }
}

//===-- ReduceMax, ReduceMin ----------------------------------------------===//

TEST(ReduceExtremeKernel, ForwardOverAxesNaNWins) {
  auto B = createCpuBackend(1);
  HostTensor X = f32({2, 3}, {1, 5, -2, 7, 7, NAN});
  HostTensor Max = f32({2}), Min = f32({2});
  OpAttrs Rows =
      makeAttrs({{"axes", std::vector<int64_t>{1}}, {"keepdims", int64_t(0)}});
  runForward(*B, OpKind::ReduceMax, Rows, {&X}, {&Max});
  runForward(*B, OpKind::ReduceMin, Rows, {&X}, {&Min});
  EXPECT_EQ(Max.at(0), 5);
  EXPECT_EQ(Min.at(0), -2);
  EXPECT_TRUE(std::isnan(Max.at(1))); // as numpy's maximum.reduce
  EXPECT_TRUE(std::isnan(Min.at(1)));
  HostTensor Xi = i64({2, 3}, {4, -1, 9, 3, 8, 2}), Yi = i64({1, 3});
  runForward(
      *B, OpKind::ReduceMin,
      makeAttrs({{"axes", std::vector<int64_t>{0}}, {"keepdims", int64_t(1)}}),
      {&Xi}, {&Yi});
  EXPECT_EQ(Yi.at(0), 3);
  EXPECT_EQ(Yi.at(1), -1);
  EXPECT_EQ(Yi.at(2), 2);
}

// The gradient goes to the inputs equal to the extreme, shared evenly
// among ties (PyTorch's amax / amin); a NaN row gets none.
TEST(ReduceExtremeKernel, GradientSharedByTies) {
  auto B = createCpuBackend(1);
  HostTensor X = f32({3, 4}, {1, 3, 3, 0, 2, -1, 5, 5, 4, NAN, 4, 1});
  HostTensor Y = f32({3}), GY = f32({3}, {6, 10, 1}), DX = f32({3, 4});
  runBackward(
      *B, OpKind::ReduceMax,
      makeAttrs({{"axes", std::vector<int64_t>{1}}, {"keepdims", int64_t(0)}}),
      {&X}, {&Y}, {&GY}, {&DX});
  float Want[] = {0, 3, 3, 0, 0, 0, 5, 5, 0, 0, 0, 0};
  for (int64_t I = 0; I < 12; ++I)
    EXPECT_EQ(DX.at(I), Want[I]) << I;
  HostTensor YMin = f32({1, 4}), GMin = f32({1, 4}, {1, 2, 3, 4});
  HostTensor DMin = f32({3, 4});
  runBackward(
      *B, OpKind::ReduceMin,
      makeAttrs({{"axes", std::vector<int64_t>{0}}, {"keepdims", int64_t(1)}}),
      {&X}, {&YMin}, {&GMin}, {&DMin});
  // Column minima: 1, NaN (row 2's), 3 and 0, all but the NaN in row 0.
  float WantMin[] = {1, 0, 3, 4, 0, 0, 0, 0, 0, 0, 0, 0};
  for (int64_t I = 0; I < 12; ++I)
    EXPECT_EQ(DMin.at(I), WantMin[I]) << I;
}

TEST(ReduceExtremeKernel, Gradients) {
  auto B = createCpuBackend(1);
  // Distinct values: the extreme moves by less than epsilon.
  HostTensor X = randomTensor(DType::Float64, {2, 3, 4}, 37);
  for (OpKind Kind : {OpKind::ReduceMax, OpKind::ReduceMin})
    gradCheck(*B, Kind,
              makeAttrs({{"axes", std::vector<int64_t>{0, 2}},
                         {"keepdims", int64_t(0)}}),
              {&X}, {HostTensor(DType::Float64, {3})}, {0}, 1e-5, 1e-6);
}

//===-- CumSum ------------------------------------------------------------===//

OpAttrs scanAttrs(int64_t Axis, bool Exclusive, bool Reverse) {
  return makeAttrs({{"axis", Axis},
                    {"exclusive", int64_t(Exclusive)},
                    {"reverse", int64_t(Reverse)}});
}

// ONNX's examples (the operator's documentation) over rows of [2, 3].
TEST(CumSumKernel, ForwardAsOnnxSaysInEachDirection) {
  auto B = createCpuBackend(1);
  HostTensor X = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  struct {
    bool Exclusive, Reverse;
    float Want[6];
  } Cases[] = {{false, false, {1, 3, 6, 4, 9, 15}},
               {true, false, {0, 1, 3, 0, 4, 9}},
               {false, true, {6, 5, 3, 15, 11, 6}},
               {true, true, {5, 3, 0, 11, 6, 0}}};
  for (const auto &C : Cases) {
    HostTensor Y = f32({2, 3});
    runForward(*B, OpKind::CumSum, scanAttrs(1, C.Exclusive, C.Reverse), {&X},
               {&Y});
    for (int64_t I = 0; I < 6; ++I)
      EXPECT_EQ(Y.at(I), C.Want[I]) << "exclusive " << C.Exclusive
                                    << " reverse " << C.Reverse << " " << I;
  }
  // Down the columns.
  HostTensor Y = f32({2, 3});
  runForward(*B, OpKind::CumSum, scanAttrs(0, false, false), {&X}, {&Y});
  float Want[] = {1, 2, 3, 5, 7, 9};
  for (int64_t I = 0; I < 6; ++I)
    EXPECT_EQ(Y.at(I), Want[I]) << I;
}

// Integers stay exact, and wrap as their type does (ONNX Runtime's and
// numpy's int32 cumsum).
TEST(CumSumKernel, IntegersAreExactAndWrap) {
  auto B = createCpuBackend(1);
  HostTensor X = i64({4}, {int64_t(1) << 62, int64_t(1) << 62, 5, -7});
  HostTensor Y = i64({4});
  runForward(*B, OpKind::CumSum, scanAttrs(0, false, false), {&X}, {&Y});
  EXPECT_EQ(Y.data<int64_t>()[0], int64_t(1) << 62);
  EXPECT_EQ(Y.data<int64_t>()[1], std::numeric_limits<int64_t>::min());
  EXPECT_EQ(Y.data<int64_t>()[2], std::numeric_limits<int64_t>::min() + 5);
  EXPECT_EQ(Y.data<int64_t>()[3], std::numeric_limits<int64_t>::max() - 1);
  HostTensor X32(DType::Int32, {3}), Y32(DType::Int32, {3});
  int32_t In[] = {std::numeric_limits<int32_t>::max(), 1, 1};
  std::memcpy(X32.Bytes.data(), In, sizeof In);
  runForward(*B, OpKind::CumSum, scanAttrs(0, false, false), {&X32}, {&Y32});
  EXPECT_EQ(Y32.data<int32_t>()[1], std::numeric_limits<int32_t>::min());
  EXPECT_EQ(Y32.data<int32_t>()[2], std::numeric_limits<int32_t>::min() + 1);
}

TEST(CumSumKernel, Gradients) {
  auto B = createCpuBackend(1);
  HostTensor X = randomTensor(DType::Float64, {3, 4, 2}, 41);
  for (int64_t Axis : {0, 1, 2})
    for (bool Exclusive : {false, true})
      for (bool Reverse : {false, true}) {
        SCOPED_TRACE(::testing::Message()
                     << "axis " << Axis << " exclusive " << Exclusive
                     << " reverse " << Reverse);
        gradCheck(*B, OpKind::CumSum, scanAttrs(Axis, Exclusive, Reverse), {&X},
                  {HostTensor(DType::Float64, {3, 4, 2})}, {0}, 1e-5, 1e-6);
      }
}

//===-- Accumulation ------------------------------------------------------===//

/// Backward twice into the same gradients gives twice the gradient.
void expectAccumulates(OpKind Kind, const OpAttrs &A,
                       std::vector<HostTensor *> Inputs,
                       std::vector<HostTensor> Outputs, unsigned Seed) {
  auto B = createCpuBackend(1);
  std::vector<HostTensor *> Out;
  std::vector<HostTensor> OutGrad = Outputs;
  std::vector<HostTensor *> OG;
  for (size_t I = 0; I < Outputs.size(); ++I) {
    Out.push_back(&Outputs[I]);
    std::mt19937 Rng(Seed + I);
    randomize(OutGrad[I], Rng);
    OG.push_back(&OutGrad[I]);
  }
  std::vector<HostTensor> Grads;
  for (HostTensor *T : Inputs)
    Grads.push_back(T ? HostTensor(T->Type, T->Dims) : HostTensor());
  std::vector<HostTensor *> IG;
  for (size_t I = 0; I < Inputs.size(); ++I)
    IG.push_back(Inputs[I] ? &Grads[I] : nullptr);
  runBackward(*B, Kind, A, Inputs, Out, OG, IG);
  std::vector<HostTensor> Once = Grads;
  runBackward(*B, Kind, A, Inputs, Out, OG, IG);
  for (size_t I = 0; I < Grads.size(); ++I)
    for (int64_t E = 0; E < Grads[I].size(); ++E)
      EXPECT_NEAR(Grads[I].at(E), 2 * Once[I].at(E), 1e-5)
          << opKindName(Kind) << " input " << I << " element " << E;
}

TEST(NormalizationKernels, BackwardAccumulates) {
  BatchNormCase C;
  expectAccumulates(OpKind::BatchNorm,
                    makeAttrs({{"epsilon", 1e-5}, {"training", int64_t(1)}}),
                    C.inputs(), {f32({2, 3, 2, 2}), f32({3}), f32({3})}, 1);
  expectAccumulates(OpKind::BatchNorm, makeAttrs({{"training", int64_t(0)}}),
                    C.inputs(), {f32({2, 3, 2, 2})}, 2);
  HostTensor X = randomTensor(DType::Float32, {2, 6}, 3);
  HostTensor Scale = randomTensor(DType::Float32, {6}, 4);
  HostTensor Bias = randomTensor(DType::Float32, {6}, 5);
  expectAccumulates(OpKind::LayerNorm, makeAttrs({{"axis", int64_t(1)}}),
                    {&X, &Scale, &Bias},
                    {f32({2, 6}), f32({2, 1}), f32({2, 1})}, 3);
  for (OpKind Kind : {OpKind::Softmax, OpKind::LogSoftmax})
    expectAccumulates(Kind, makeAttrs({{"axis", int64_t(1)}}), {&X},
                      {f32({2, 6})}, 4);
  for (OpKind Kind : {OpKind::ReduceSum, OpKind::ReduceMean, OpKind::ReduceMax,
                      OpKind::ReduceMin})
    expectAccumulates(Kind,
                      makeAttrs({{"axes", std::vector<int64_t>{1}},
                                 {"keepdims", int64_t(1)}}),
                      {&X}, {f32({2, 1})}, 5);
  expectAccumulates(OpKind::CumSum, scanAttrs(1, true, true), {&X},
                    {f32({2, 6})}, 6);
}

TEST(NormalizationKernels, AbsentGradientsAreSkipped) {
  auto B = createCpuBackend(1);
  BatchNormCase C;
  HostTensor Y = f32({2, 3, 2, 2}), GY = f32({2, 3, 2, 2}), DScale = f32({3});
  std::mt19937 Rng(9);
  randomize(GY, Rng);
  runBackward(*B, OpKind::BatchNorm, makeAttrs({{"training", int64_t(0)}}),
              C.inputs(), {&Y}, {&GY},
              {nullptr, &DScale, nullptr, nullptr, nullptr});
  double Sum = 0;
  for (int64_t I = 0; I < 3; ++I)
    Sum += std::fabs(DScale.at(I));
  EXPECT_GT(Sum, 0);
}

} // namespace
