//===- tests/runtime_lib/LossTest.cpp - SoftmaxCrossEntropyLoss on the CPU ===//
//
// Forward values against a hand-computed case and a double reference loop
// (reductions, class weights, ignore_index, extra d... dims, i32 and i64
// labels), gradient checks w.r.t. scores and weights through both outputs
// (f32, epsilon 1e-2, relative tolerance 1e-2), accumulation and errors.
//
//===----------------------------------------------------------------------===//
#include "KernelTestUtil.h"
#include "runtime_lib/Error.h"

using namespace onnx2soap::rt;
using namespace onnx2soap::rt::test;

namespace {

class LossTest : public ::testing::Test {
protected:
  std::unique_ptr<Backend> B = createCpuBackend(1);
  std::mt19937 Rng{11};
};

OpAttrs lossAttrs(const char *Reduction, bool Ignore = false,
                  int64_t IgnoreIndex = 0) {
  OpAttrs A;
  A.set("reduction", std::string(Reduction));
  A.set("has_ignore_index", int64_t(Ignore));
  A.set("ignore_index", IgnoreIndex);
  return A;
}

/// Reference in double: log_prob [N,C,D] and loss (per position, or reduced).
struct Reference {
  std::vector<double> LogProb, Loss;
};

Reference reference(const HostTensor &Scores, const HostTensor &Labels,
                    const HostTensor *Weights, const std::string &Reduction,
                    bool Ignore, int64_t IgnoreIndex) {
  int64_t N = Scores.Dims[0], C = Scores.Dims[1], D = Scores.size() / (N * C);
  Reference R;
  R.LogProb.resize(Scores.size());
  std::vector<double> PerPosition(N * D);
  double Sum = 0, WeightSum = 0;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t d = 0; d < D; ++d) {
      double Lse = 0;
      for (int64_t c = 0; c < C; ++c)
        Lse += std::exp(Scores.at((n * C + c) * D + d));
      Lse = std::log(Lse);
      for (int64_t c = 0; c < C; ++c)
        R.LogProb[(n * C + c) * D + d] = Scores.at((n * C + c) * D + d) - Lse;
      int64_t L = static_cast<int64_t>(Labels.at(n * D + d));
      if (Ignore && L == IgnoreIndex)
        continue;
      double W = Weights ? Weights->at(L) : 1;
      PerPosition[n * D + d] = -W * R.LogProb[(n * C + L) * D + d];
      Sum += PerPosition[n * D + d];
      WeightSum += W;
    }
  if (Reduction == "none")
    R.Loss = PerPosition;
  else if (Reduction == "sum")
    R.Loss = {Sum};
  else
    R.Loss = {Sum / WeightSum};
  return R;
}

TEST_F(LossTest, HandComputedMean) {
  // Scores [[0, ln 2, ln 3], [1, 1, 1]], labels [2, 0]:
  // losses -ln(3/6) = ln 2 and ln 3; mean (ln 2 + ln 3) / 2.
  HostTensor Scores = f32({2, 3}, {0, std::log(2.0), std::log(3.0), 1, 1, 1});
  HostTensor Labels = i64({2}, {2, 0}), Loss = f32({}), LogProb = f32({2, 3});
  runForward(*B, OpKind::SoftmaxCrossEntropyLoss, lossAttrs("mean"),
             {&Scores, &Labels}, {&Loss, &LogProb});
  EXPECT_NEAR(Loss.at(0), (std::log(2.0) + std::log(3.0)) / 2, 1e-6);
  EXPECT_NEAR(LogProb.at(0), std::log(1.0 / 6), 1e-6);
  EXPECT_NEAR(LogProb.at(4), std::log(1.0 / 3), 1e-6);
}

TEST_F(LossTest, WeightedMeanDividesByWeightsOfKeptLabels) {
  // Uniform scores: every -log_prob is ln 4. Labels 1, 3, 0 (ignored):
  // mean = (w1 + w3) ln 4 / (w1 + w3), sum = (w1 + w3) ln 4.
  HostTensor Scores = f32({3, 4}), Weights = f32({4}, {0.5, 2, 1, 3}),
             Loss = f32({}), LogProb = f32({3, 4});
  HostTensor IgnoreLast = i64({3}, {1, 3, 0});
  runForward(*B, OpKind::SoftmaxCrossEntropyLoss, lossAttrs("mean", true, 0),
             {&Scores, &IgnoreLast, &Weights}, {&Loss, &LogProb});
  EXPECT_NEAR(Loss.at(0), std::log(4.0), 1e-6);
  runForward(*B, OpKind::SoftmaxCrossEntropyLoss, lossAttrs("sum", true, 0),
             {&Scores, &IgnoreLast, &Weights}, {&Loss, &LogProb});
  EXPECT_NEAR(Loss.at(0), 5 * std::log(4.0), 1e-5);
  // Non-uniform: the divisor is w[1] + w[3] = 5, not 3 or the sum of all.
  randomize(Scores, Rng, -2, 2);
  runForward(*B, OpKind::SoftmaxCrossEntropyLoss, lossAttrs("mean", true, 0),
             {&Scores, &IgnoreLast, &Weights}, {&Loss, &LogProb});
  Reference R = reference(Scores, IgnoreLast, &Weights, "mean", true, 0);
  EXPECT_NEAR(Loss.at(0), R.Loss[0], 1e-6);
  double ByHand = (-2 * R.LogProb[1] - 3 * R.LogProb[4 + 3]) / 5;
  EXPECT_NEAR(Loss.at(0), ByHand, 1e-6);
}

struct Config {
  const char *Reduction;
  bool Weighted, Ignore, Int32Labels;
  std::vector<int64_t> ScoreDims;
};

std::vector<Config> configs() {
  return {{"mean", false, false, false, {4, 5}},
          {"mean", true, true, false, {3, 4, 2, 3}},
          {"mean", false, true, true, {2, 3, 5}},
          {"sum", true, false, true, {4, 3, 2}},
          {"sum", false, true, false, {3, 5}},
          {"none", true, true, false, {2, 4, 3}},
          {"none", false, false, true, {5, 3}}};
}

/// Random scores, labels (a few set to the ignore index 1) and weights.
void makeOperands(const Config &C, std::mt19937 &Rng, HostTensor &Scores,
                  HostTensor &Labels, HostTensor &Weights) {
  Scores = f32(C.ScoreDims);
  randomize(Scores, Rng, -3, 3);
  std::vector<int64_t> LabelDims = {C.ScoreDims[0]};
  LabelDims.insert(LabelDims.end(), C.ScoreDims.begin() + 2, C.ScoreDims.end());
  Labels = HostTensor(C.Int32Labels ? DType::Int32 : DType::Int64, LabelDims);
  std::uniform_int_distribution<int64_t> Class(0, C.ScoreDims[1] - 1);
  for (int64_t I = 0; I < Labels.size(); ++I)
    Labels.set(I, Class(Rng));
  Labels.set(0, 0); // one position is never ignored
  Labels.set(Labels.size() - 1, 1);
  Weights = f32({C.ScoreDims[1]});
  randomize(Weights, Rng, 0.5, 2);
}

std::vector<int64_t> lossDims(const Config &C) {
  if (std::string(C.Reduction) != "none")
    return {};
  std::vector<int64_t> Dims = {C.ScoreDims[0]};
  Dims.insert(Dims.end(), C.ScoreDims.begin() + 2, C.ScoreDims.end());
  return Dims;
}

TEST_F(LossTest, ForwardMatchesReference) {
  for (const Config &C : configs()) {
    HostTensor Scores, Labels, Weights;
    makeOperands(C, Rng, Scores, Labels, Weights);
    HostTensor Loss = f32(lossDims(C)), LogProb = f32(C.ScoreDims);
    std::vector<HostTensor *> Inputs = {&Scores, &Labels};
    if (C.Weighted)
      Inputs.push_back(&Weights);
    runForward(*B, OpKind::SoftmaxCrossEntropyLoss,
               lossAttrs(C.Reduction, C.Ignore, 1), Inputs, {&Loss, &LogProb});
    Reference R = reference(Scores, Labels, C.Weighted ? &Weights : nullptr,
                            C.Reduction, C.Ignore, 1);
    SCOPED_TRACE(std::string(C.Reduction) + " rank " +
                 std::to_string(C.ScoreDims.size()));
    for (int64_t I = 0; I < LogProb.size(); ++I)
      EXPECT_NEAR(LogProb.at(I), R.LogProb[I], 1e-5);
    ASSERT_EQ(Loss.size(), static_cast<int64_t>(R.Loss.size()));
    for (int64_t I = 0; I < Loss.size(); ++I)
      EXPECT_NEAR(Loss.at(I), R.Loss[I], 1e-5 * std::max(1.0, R.Loss[I]));
  }
}

TEST_F(LossTest, GradientsThroughLossAndLogProb) {
  // gradCheck weights both outputs randomly, so this covers d loss and
  // d log_prob together; epsilon 1e-2, relative tolerance 1e-2.
  for (const Config &C : configs()) {
    HostTensor Scores, Labels, Weights;
    makeOperands(C, Rng, Scores, Labels, Weights);
    std::vector<HostTensor *> Inputs = {&Scores, &Labels};
    std::vector<unsigned> Check = {0};
    if (C.Weighted) {
      Inputs.push_back(&Weights);
      Check.push_back(2);
    }
    SCOPED_TRACE(std::string(C.Reduction) + " rank " +
                 std::to_string(C.ScoreDims.size()));
    gradCheck(*B, OpKind::SoftmaxCrossEntropyLoss,
              lossAttrs(C.Reduction, C.Ignore, 1), Inputs,
              {f32(lossDims(C)), f32(C.ScoreDims)}, Check, 1e-2, 1e-2);
  }
}

TEST_F(LossTest, MeanGradientIsSoftmaxMinusOneHotOverCount) {
  HostTensor Scores = f32({2, 3}), Labels = i64({2}, {1, 2}), Loss = f32({}),
             LogProb = f32({2, 3}), DLoss = f32({}, {1}), DS = f32({2, 3});
  randomize(Scores, Rng);
  OpAttrs A = lossAttrs("mean");
  OpCall Call{OpKind::SoftmaxCrossEntropyLoss,
              A,
              "test",
              {Scores.view(), Labels.view()},
              {Loss.view(), LogProb.view()},
              1};
  B->forward(Call);
  B->backward(Call, {DLoss.view(), TensorView::absent()},
              {DS.view(), TensorView::absent()});
  for (int N = 0; N < 2; ++N)
    for (int C = 0; C < 3; ++C) {
      double P = std::exp(LogProb.at(N * 3 + C));
      double OneHot = C == Labels.at(N) ? 1 : 0;
      EXPECT_NEAR(DS.at(N * 3 + C), (P - OneHot) / 2, 1e-6);
    }
  HostTensor Once = DS;
  B->backward(Call, {DLoss.view(), TensorView::absent()},
              {DS.view(), TensorView::absent()});
  for (int I = 0; I < 6; ++I)
    EXPECT_FLOAT_EQ(DS.at(I), 2 * Once.at(I));
}

TEST_F(LossTest, StableForLargeScores) {
  HostTensor Scores = f32({1, 3}, {1000, 0, -1000}), Labels = i64({1}, {1}),
             Loss = f32({}), LogProb = f32({1, 3});
  runForward(*B, OpKind::SoftmaxCrossEntropyLoss, lossAttrs("sum"),
             {&Scores, &Labels}, {&Loss, &LogProb});
  EXPECT_NEAR(Loss.at(0), 1000, 1e-3);
  EXPECT_NEAR(LogProb.at(0), 0, 1e-6);
  EXPECT_TRUE(std::isfinite(LogProb.at(2)));
}

TEST_F(LossTest, F64Scores) {
  HostTensor Scores(DType::Float64, {3, 4}), Labels = i64({3}, {0, 3, 2}),
                                             Loss(DType::Float64, {}),
                                             LogProb(DType::Float64, {3, 4});
  randomize(Scores, Rng);
  runForward(*B, OpKind::SoftmaxCrossEntropyLoss, lossAttrs("mean"),
             {&Scores, &Labels}, {&Loss, &LogProb});
  Reference R = reference(Scores, Labels, nullptr, "mean", false, 0);
  EXPECT_NEAR(Loss.at(0), R.Loss[0], 1e-12);
  gradCheck(
      *B, OpKind::SoftmaxCrossEntropyLoss, lossAttrs("mean"),
      {&Scores, &Labels},
      {HostTensor(DType::Float64, {}), HostTensor(DType::Float64, {3, 4})}, {0},
      1e-5, 1e-6);
}

TEST_F(LossTest, Errors) {
  HostTensor Scores = f32({2, 3}), Loss = f32({}), LogProb = f32({2, 3});
  HostTensor OutOfRange = i64({2}, {0, 3});
  try {
    runForward(*B, OpKind::SoftmaxCrossEntropyLoss, lossAttrs("mean"),
               {&Scores, &OutOfRange}, {&Loss, &LogProb});
    ADD_FAILURE() << "no error";
  } catch (const RuntimeError &E) {
    EXPECT_THAT(E.what(),
                ::testing::HasSubstr("op 'test' (SoftmaxCrossEntropyLoss)"));
    EXPECT_THAT(E.what(), ::testing::HasSubstr("label 3"));
  }
  HostTensor Negative = i64({2}, {-100, 1});
  EXPECT_THROW(runForward(*B, OpKind::SoftmaxCrossEntropyLoss,
                          lossAttrs("mean"), {&Scores, &Negative},
                          {&Loss, &LogProb}),
               RuntimeError);
  // ...but fine when it is the ignore index.
  runForward(*B, OpKind::SoftmaxCrossEntropyLoss, lossAttrs("mean", true, -100),
             {&Scores, &Negative}, {&Loss, &LogProb});
  EXPECT_NEAR(Loss.at(0), -LogProb.at(4), 1e-6);
  HostTensor WrongLabels = i64({3}, {0, 1, 2});
  EXPECT_THROW(runForward(*B, OpKind::SoftmaxCrossEntropyLoss,
                          lossAttrs("mean"), {&Scores, &WrongLabels},
                          {&Loss, &LogProb}),
               RuntimeError);
  HostTensor Labels = i64({2}, {0, 1});
  EXPECT_THROW(runForward(*B, OpKind::SoftmaxCrossEntropyLoss,
                          lossAttrs("average"), {&Scores, &Labels},
                          {&Loss, &LogProb}),
               RuntimeError);
}

} // namespace
