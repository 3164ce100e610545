//===- tests/ir/TrainingTest.cpp - Deriving the training step -------------===//
//
// Loss construction and gradient flow on small hand-built graphs.
//
//===----------------------------------------------------------------------===//
#include "ir/Training.h"
#include "IrTestUtil.h"
#include "ir/BatchDims.h"

using namespace onnx2soap::ir;
using namespace onnx2soap::ir::test;

namespace {

/// x -> Gemm(W) -> Relu -> (Add with itself: fan-out) -> logits [4,10].
Graph mlp() {
  Graph G;
  TensorId X = G.addTensor("x", f32({4, 8}), TensorRole::Input);
  G.addInput(X);
  G.tensor(X).BatchDim = 0;
  TensorId W = G.addTensor("w", f32({10, 8}), TensorRole::Parameter);
  TensorId Frozen = G.addTensor("frozen", f32({10}), TensorRole::Constant);
  TensorId H = add(G, OpKind::Gemm, {X, W, Frozen},
                   attrs({{"transB", int64_t(1)}}), "fc");
  TensorId R = add(G, OpKind::Relu, {H}, {}, "relu");
  TensorId Y = add(G, OpKind::Add, {R, R}, {}, "twice");
  G.addOutput(Y);
  return G;
}

TEST(Training, CrossEntropyOverTheLastDimAndGradientFlow) {
  auto T = deriveTraining(mlp(), LossKind::CrossEntropy);
  ASSERT_TRUE(static_cast<bool>(T)) << llvm::toString(T.takeError());
  const Graph &G = T->G;
  ASSERT_NE(T->Labels, NoTensor);
  EXPECT_EQ(formatShape(G.tensor(T->Labels).Type.Dims), "[4]");
  EXPECT_EQ(G.tensor(T->Labels).Type.Type, DType::Int64);
  EXPECT_EQ(G.tensor(T->LossTensor).Type.numElements(), 1);
  EXPECT_EQ(G.outputs().back(), T->LossTensor);
  ASSERT_EQ(T->Parameters.size(), 1u);

  const Op &Gemm = G.op(0);
  // Only W (input 1) gets a gradient: x is data, the bias is a constant.
  EXPECT_EQ(T->BackwardInputs[Gemm.Id], 0b010u);
  EXPECT_FALSE(T->NeedsGrad[Gemm.Inputs[0]]);
  EXPECT_TRUE(T->NeedsGrad[Gemm.Inputs[1]]);
  // The Add reads Relu's output twice: two contributions accumulate.
  const Op &Relu = G.op(1);
  EXPECT_EQ(T->GradContributions[Relu.Outputs[0]], 2u);
  // Labels never get a gradient.
  EXPECT_FALSE(T->NeedsGrad[T->Labels]);
}

// A sequence model's logits [batch, steps, classes] become rows for the loss:
// the loss ops still split over the samples, so data parallelism computes
// each device's share of the loss where its logits are.
TEST(Training, LossOpsCarryTheBatchDim) {
  Graph Forward;
  TensorId X = Forward.addTensor("x", f32({4, 5, 8}), TensorRole::Input);
  Forward.addInput(X);
  Forward.tensor(X).BatchDim = 0;
  TensorId W = Forward.addTensor("w", f32({8, 10}), TensorRole::Parameter);
  Forward.addOutput(add(Forward, OpKind::MatMul, {X, W}, {}, "fc"));
  inferBatchDims(Forward);
  auto T = deriveTraining(std::move(Forward), LossKind::CrossEntropy);
  ASSERT_TRUE(static_cast<bool>(T)) << llvm::toString(T.takeError());
  const Graph &G = T->G;
  int Checked = 0;
  for (const Op &O : G.ops()) {
    if (O.Name != "loss/scores" && O.Name != "loss/labels")
      continue;
    EXPECT_EQ(G.tensor(O.Outputs[0]).BatchDim, 0) << O.Name;
    EXPECT_EQ(parallelDims(G, O).Output[0], DimKind::Sample) << O.Name;
    ++Checked;
  }
  EXPECT_EQ(Checked, 2);
}

TEST(Training, MeanSquaredErrorTargetsLikeTheOutput) {
  auto T = deriveTraining(mlp(), LossKind::MeanSquaredError);
  ASSERT_TRUE(static_cast<bool>(T)) << llvm::toString(T.takeError());
  EXPECT_EQ(formatShape(T->G.tensor(T->Labels).Type.Dims), "[4,10]");
  EXPECT_EQ(T->G.tensor(T->LossTensor).Type.rank(), 0u);
}

TEST(Training, RefusesWhatCannotBeTrained) {
  auto NotScalar = deriveTraining(mlp(), LossKind::ModelOutput);
  ASSERT_FALSE(static_cast<bool>(NotScalar));
  EXPECT_THAT(llvm::toString(NotScalar.takeError()),
              ::testing::HasSubstr("not a scalar loss"));

  Graph G;
  TensorId X = G.addTensor("x", f32({2, 3}), TensorRole::Input);
  G.addInput(X);
  G.addOutput(add(G, OpKind::Relu, {X}));
  auto NoParams = deriveTraining(std::move(G), LossKind::CrossEntropy);
  ASSERT_FALSE(static_cast<bool>(NoParams));
  EXPECT_THAT(llvm::toString(NoParams.takeError()),
              ::testing::HasSubstr("no trainable parameters"));
}

TEST(Training, CrossEntropyNeedsOneOutput) {
  Graph G = mlp();
  G.addOutput(G.op(1).Outputs[0]);
  auto Two = deriveTraining(std::move(G), LossKind::CrossEntropy);
  ASSERT_FALSE(static_cast<bool>(Two));
  EXPECT_THAT(llvm::toString(Two.takeError()),
              ::testing::HasSubstr("needs a model with one output"));
}

TEST(Training, ParameterThatDoesNotReachTheLossIsReported) {
  Graph G = mlp();
  TensorId Extra = G.addTensor("extra", f32({3}), TensorRole::Parameter);
  add(G, OpKind::Relu, {Extra}, {}, "dangling");
  auto T = deriveTraining(std::move(G), LossKind::CrossEntropy);
  ASSERT_FALSE(static_cast<bool>(T));
  EXPECT_THAT(llvm::toString(T.takeError()),
              ::testing::HasSubstr("parameter 'extra' does not influence the "
                                   "loss (freeze it with --frozen extra)"));
}

} // namespace
