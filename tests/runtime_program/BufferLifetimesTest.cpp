//===- tests/runtime_program/BufferLifetimesTest.cpp - Live step ranges ---===//
//
// bufferLifetimes on hand-made plans of a layer and its loss on rank 0: each
// buffer is live from the first step that names it to the last, graph inputs
// from the start of the training step, the loss until its end, parameters,
// optimizer slots and buffers no step names throughout, and other ranks'
// buffers never. The backward step of an op that moves elements names only
// its gradients.
//
//===----------------------------------------------------------------------===//
#include "runtime_lib/program/BufferLifetimes.h"

#include <gtest/gtest.h>
#include <vector>

using namespace onnx2soap::rt;
using namespace onnx2soap::rt::program;

namespace {

BufferInfo buffer(int32_t Rank, BufferKind Kind, int32_t Tensor = -1) {
  BufferInfo B{};
  B.Rank = Rank;
  B.Kind = Kind;
  B.Type = DType::Float32;
  B.Tensor = Tensor;
  B.WeightOffset = -1;
  return B;
}

CallInfo call(int32_t FirstOperand, int32_t Inputs) {
  CallInfo C{};
  C.FirstOperand = FirstOperand;
  C.NumInputs = Inputs;
  C.NumOutputs = 1;
  C.HasBackward = true;
  C.Scale = 1;
  return C;
}

StepInfo step(StepKind Kind, int32_t Call) {
  StepInfo S{};
  S.Kind = Kind;
  S.Call = Call;
  S.Buffer = S.Gradient = -1;
  return S;
}

OpInfo op(OpKind Kind) { return OpInfo{Kind, "op", 0, 0}; }

template <typename T> Table<T> table(const std::vector<T> &V) {
  return {V.data(), int32_t(V.size())};
}

/// The tables of a hand-made plan whose loss is tensor 0; rank 0 walks all
/// the steps, other ranks none.
struct Tables {
  std::vector<BufferInfo> Buffers;
  std::vector<OpInfo> Ops;
  std::vector<int32_t> Operands;
  std::vector<CallInfo> Calls;
  std::vector<StepInfo> Steps;
  std::vector<Range> RankSteps, StateCopies;

  Plan plan(int32_t Ranks) {
    RankSteps.assign(size_t(Ranks), {int32_t(Steps.size()), 0});
    RankSteps[0] = {0, int32_t(Steps.size())};
    StateCopies.assign(size_t(Ranks), {0, 0});
    Plan P{};
    P.NumRanks = Ranks;
    P.Buffers = table(Buffers);
    P.Ops = table(Ops);
    P.Operands = table(Operands);
    P.Calls = table(Calls);
    P.Steps = table(Steps);
    P.RankSteps = table(RankSteps);
    P.RankStateCopies = table(StateCopies);
    P.LossTensor = 0;
    return P;
  }
};

enum : int32_t { W, X, Y, Loss, DLoss, DY, DW, Slot, Unused, Elsewhere };

TEST(BufferLifetimesTest, FromFirstToLastStepThatNamesTheBuffer) {
  Tables T;
  T.Buffers = {
      buffer(0, BufferKind::Parameter),  buffer(0, BufferKind::Input),
      buffer(0, BufferKind::Activation), buffer(0, BufferKind::Activation, 0),
      buffer(0, BufferKind::Gradient),   buffer(0, BufferKind::Gradient),
      buffer(0, BufferKind::Gradient),   buffer(0, BufferKind::OptimizerState),
      buffer(0, BufferKind::Activation), buffer(1, BufferKind::Activation)};
  // y = f(x, w): inputs, output, output gradient, input gradients (none
  // for x); loss = g(y): input, output, their gradients.
  T.Operands = {X, W, Y, DY, -1, DW, Y, Loss, DLoss, DY};
  T.Ops = {op(OpKind::Gemm), op(OpKind::SoftmaxCrossEntropyLoss)};
  T.Calls = {call(0, 2), call(6, 1)};
  T.Calls[1].Op = 1;
  StepInfo Update = step(StepKind::Update, -1);
  Update.Buffer = W;
  Update.Gradient = DW;
  Update.State[0] = Slot;
  Update.NumState = 1;
  T.Steps = {step(StepKind::Forward, 0), step(StepKind::Forward, 1),
             step(StepKind::Backward, 1), step(StepKind::Backward, 0), Update};
  Plan P = T.plan(2);

  std::vector<Lifetime> Live = bufferLifetimes(P, 0);
  auto Expect = [&](int32_t Id, int32_t First, int32_t Last) {
    EXPECT_EQ(Live[Id].First, First) << "buffer " << Id;
    EXPECT_EQ(Live[Id].Last, Last) << "buffer " << Id;
  };
  Expect(W, -1, 5);
  Expect(X, -1, 3);
  Expect(Y, 0, 3);
  Expect(Loss, 1, 5);
  Expect(DLoss, 2, 2);
  Expect(DY, 2, 3);
  Expect(DW, 3, 4);
  Expect(Slot, -1, 5);
  Expect(Unused, -1, 5);
  EXPECT_GT(Live[Elsewhere].First, Live[Elsewhere].Last);
  EXPECT_FALSE(Live[DLoss].meets(Live[DW]));
  EXPECT_TRUE(Live[DY].meets(Live[DW]));
}

TEST(BufferLifetimesTest, AMovementsBackwardNamesOnlyGradients) {
  enum : int32_t { X, Y, Loss, DLoss, DY, DX };
  Tables T;
  T.Buffers = {
      buffer(0, BufferKind::Input),         buffer(0, BufferKind::Activation),
      buffer(0, BufferKind::Activation, 0), buffer(0, BufferKind::Gradient),
      buffer(0, BufferKind::Gradient),      buffer(0, BufferKind::Gradient)};
  // y = reshape(x); loss = g(y).
  T.Operands = {X, Y, DY, DX, Y, Loss, DLoss, DY};
  T.Ops = {op(OpKind::Reshape), op(OpKind::SoftmaxCrossEntropyLoss)};
  T.Calls = {call(0, 1), call(4, 1)};
  T.Calls[1].Op = 1;
  T.Steps = {step(StepKind::Forward, 0), step(StepKind::Forward, 1),
             step(StepKind::Backward, 1), step(StepKind::Backward, 0)};
  Plan P = T.plan(1);

  std::vector<Lifetime> Live = bufferLifetimes(P, 0);
  EXPECT_EQ(Live[X].Last, 0);   // not kept for the reshape's backward
  EXPECT_EQ(Live[Y].Last, 2);   // kept for the loss's backward only
  EXPECT_EQ(Live[DY].First, 2); // written by the loss's backward
  EXPECT_EQ(Live[DY].Last, 3);
  EXPECT_EQ(Live[DX].First, 3);
  EXPECT_EQ(Live[DX].Last, 3);
}

} // namespace
