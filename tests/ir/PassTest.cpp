//===- tests/ir/PassTest.cpp - Graph mutation and IR passes ---------------===//
//
// compact(), role assignment, LayerNorm / GELU recognition and RNN unrolling
// on small hand-built graphs.
//
//===----------------------------------------------------------------------===//
#include "IrTestUtil.h"
#include "ir/BatchDims.h"
#include "ir/Fusion.h"
#include "ir/RnnUnroll.h"
#include "ir/Roles.h"

using namespace onnx2soap::ir;
using namespace onnx2soap::ir::test;

namespace {

std::map<std::string, int> kindCounts(const Graph &G) {
  std::map<std::string, int> Counts;
  for (const Op &O : G.ops())
    ++Counts[opKindName(O.Kind).str()];
  return Counts;
}

TEST(Graph, CompactDropsDeadOpsAndRestoresOrder) {
  Graph G;
  TensorId X = G.addTensor("x", f32({2, 3}), TensorRole::Input);
  G.addInput(X);
  TensorId A = add(G, OpKind::Relu, {X}, {}, "a");
  TensorId Dead = add(G, OpKind::Neg, {X}, {}, "dead");
  TensorId B = add(G, OpKind::Sigmoid, {A}, {}, "b");
  G.addOutput(B);
  // Rewrite: b reads a new op appended after it.
  TensorId C = add(G, OpKind::Tanh, {X}, {}, "c");
  G.replaceAllUses(A, C);
  G.compact();
  ASSERT_EQ(G.numOps(), 2u);
  EXPECT_EQ(G.op(0).Name, "c");
  EXPECT_EQ(G.op(1).Name, "b");
  EXPECT_EQ(G.op(1).Inputs[0], G.op(0).Outputs[0]);
  for (const Tensor &T : G.tensors())
    EXPECT_NE(T.Name, "dead:0");
  (void)Dead;
}

// A graph output is known by the model's name whatever computes it after
// rewrites.
TEST(Graph, OutputsKeepTheirNamesThroughRewrites) {
  Graph G;
  TensorId X = G.addTensor("x", f32({2, 3}), TensorRole::Input);
  G.addInput(X);
  TensorId A = add(G, OpKind::Relu, {X}, {}, "a");
  G.addOutput(A, "y");
  G.addOutput(X);
  TensorId B = add(G, OpKind::Tanh, {X}, {}, "b");
  G.replaceAllUses(A, B);
  G.compact();
  ASSERT_EQ(G.outputs().size(), 2u);
  EXPECT_EQ(G.tensor(G.outputs()[0]).Name, "b:0");
  EXPECT_EQ(G.outputName(0), "y");
  EXPECT_EQ(G.outputName(1), "x");
}

TEST(Graph, AddOpReportsShapeErrors) {
  Graph G;
  TensorId A = G.addTensor("a", f32({2, 3}), TensorRole::Input);
  TensorId B = G.addTensor("b", f32({4, 5}), TensorRole::Input);
  auto Id = G.addOp(OpKind::MatMul, "mm", {A, B}, {});
  ASSERT_FALSE(static_cast<bool>(Id));
  EXPECT_THAT(llvm::toString(Id.takeError()),
              ::testing::HasSubstr("inner dims differ"));
  auto Few = G.addOp(OpKind::Add, "add", {A}, {});
  ASSERT_FALSE(static_cast<bool>(Few));
  EXPECT_THAT(llvm::toString(Few.takeError()),
              ::testing::HasSubstr("takes 2 to 2 inputs"));
}

TEST(Roles, BatchNormStatisticsAreStateAndOverridesApply) {
  Graph G;
  TensorId X = G.addTensor("x", f32({2, 4, 5, 5}), TensorRole::Input);
  std::vector<TensorId> P;
  for (const char *Name : {"scale", "bias", "mean", "var"})
    P.push_back(G.addTensor(Name, f32({4}), TensorRole::Parameter));
  G.addOutput(add(G, OpKind::BatchNorm, {X, P[0], P[1], P[2], P[3]},
                  attrs({{"epsilon", 1e-5}})));
  ASSERT_FALSE(static_cast<bool>(assignRoles(G, {{}, {"bias"}})));
  EXPECT_EQ(G.tensor(P[0]).Role, TensorRole::Parameter);
  EXPECT_EQ(G.tensor(P[1]).Role, TensorRole::Constant);
  EXPECT_EQ(G.tensor(P[2]).Role, TensorRole::State);
  EXPECT_EQ(countParameters(G), 4);

  auto Unknown = assignRoles(G, {{"nope"}, {}});
  EXPECT_THAT(llvm::toString(std::move(Unknown)),
              ::testing::HasSubstr("no initializer or constant named 'nope'"));
  auto Both = assignRoles(G, {{"scale"}, {"scale"}});
  EXPECT_THAT(llvm::toString(std::move(Both)),
              ::testing::HasSubstr("both to --trainable and to --frozen"));
}

/// y = (x - mean(x)) / sqrt(mean((x - mean(x))^2) + eps) * w + b, with eps
/// of shape EpsDims.
Graph decomposedLayerNorm(bool ExtraUse, Shape EpsDims = {}) {
  Graph G;
  TensorId X = G.addTensor("x", f32({2, 5, 8}), TensorRole::Input);
  G.addInput(X);
  Attributes Axes = attrs({{"axes", ints({2})}, {"keepdims", int64_t(1)}});
  TensorId Mean = add(G, OpKind::ReduceMean, {X}, Axes);
  TensorId D = add(G, OpKind::Sub, {X, Mean});
  TensorId Sq = add(G, OpKind::Pow, {D, scalar(G, "two", 2.0f)});
  TensorId Var = add(G, OpKind::ReduceMean, {Sq}, Axes);
  TensorId Eps =
      add(G, OpKind::Add, {Var, scalar(G, "eps", 1e-5f, std::move(EpsDims))});
  TensorId Std = add(G, OpKind::Sqrt, {Eps});
  TensorId N = add(G, OpKind::Div, {D, Std});
  TensorId W = G.addTensor("w", f32({8}), TensorRole::Parameter);
  TensorId B = G.addTensor("b", f32({8}), TensorRole::Parameter);
  TensorId Y = add(G, OpKind::Add, {add(G, OpKind::Mul, {N, W}), B}, {}, "y");
  G.addOutput(Y);
  if (ExtraUse)
    G.addOutput(D);
  return G;
}

TEST(Fusion, RecognizesDecomposedLayerNorm) {
  Graph G = decomposedLayerNorm(false);
  EXPECT_EQ(fusePatterns(G), 1u);
  ASSERT_EQ(G.numOps(), 1u);
  const Op &Norm = G.op(0);
  EXPECT_EQ(Norm.Kind, OpKind::LayerNorm);
  EXPECT_EQ(Norm.Attrs.getInt("axis"), 2);
  EXPECT_NEAR(Norm.Attrs.getFloat("epsilon"), 1e-5, 1e-9);
  EXPECT_EQ(G.tensor(Norm.Inputs[1]).Name, "w");
  EXPECT_EQ(G.tensor(Norm.Inputs[2]).Name, "b");
  EXPECT_EQ(G.outputs()[0], Norm.Outputs[0]);
  // What run --out and inspect name it by.
  EXPECT_EQ(G.tensor(Norm.Outputs[0]).Name, "y:0");
}

// An epsilon of shape [1, 1, 1, 1] makes the result 4-D where LayerNorm's
// would be x's 3-D: the chain is left as it is.
TEST(Fusion, LeavesLayerNormThatRaisesTheRank) {
  Graph G = decomposedLayerNorm(false, Shape{1, 1, 1, 1});
  ASSERT_EQ(G.tensor(G.outputs()[0]).Type.rank(), 4u);
  EXPECT_EQ(fusePatterns(G), 0u);
  EXPECT_EQ(G.tensor(G.outputs()[0]).Type.rank(), 4u);
}

TEST(Fusion, LeavesLayerNormWhoseIntermediateIsUsed) {
  Graph G = decomposedLayerNorm(true);
  EXPECT_EQ(fusePatterns(G), 0u);
  EXPECT_EQ(kindCounts(G)["ReduceMean"], 2);
}

TEST(Fusion, RecognizesErfGeluInBothOrders) {
  for (bool HalfFirst : {false, true}) {
    Graph G;
    TensorId X = G.addTensor("x", f32({4, 16}), TensorRole::Input);
    G.addInput(X);
    TensorId E = add(G, OpKind::Erf,
                     {add(G, OpKind::Div, {X, scalar(G, "r2", 1.4142135f)})});
    TensorId One = add(G, OpKind::Add, {E, scalar(G, "one", 1.0f)});
    TensorId Y;
    if (HalfFirst)
      Y = add(G, OpKind::Mul,
              {add(G, OpKind::Mul, {X, scalar(G, "half", 0.5f)}), One});
    else
      Y = add(G, OpKind::Mul,
              {add(G, OpKind::Mul, {X, One}), scalar(G, "half", 0.5f)});
    G.addOutput(Y);
    std::string Name = G.tensor(Y).Name;
    EXPECT_EQ(fusePatterns(G), 1u) << "half first: " << HalfFirst;
    ASSERT_EQ(G.numOps(), 1u);
    EXPECT_EQ(G.op(0).Kind, OpKind::Gelu);
    EXPECT_EQ(G.op(0).Inputs[0], G.inputs()[0]);
    EXPECT_EQ(G.outputs()[0], G.op(0).Outputs[0]);
    EXPECT_EQ(G.tensor(G.outputs()[0]).Name, Name);
  }
}

// 0.5 of shape [1, 1, 1] makes the result [1, 4, 16] where Gelu's would be
// x's [4, 16]: the chain is left as it is.
TEST(Fusion, LeavesGeluThatRaisesTheRank) {
  Graph G;
  TensorId X = G.addTensor("x", f32({4, 16}), TensorRole::Input);
  G.addInput(X);
  TensorId E = add(G, OpKind::Erf,
                   {add(G, OpKind::Div, {X, scalar(G, "r2", 1.4142135f)})});
  TensorId One = add(G, OpKind::Add, {E, scalar(G, "one", 1.0f)});
  TensorId Y = add(
      G, OpKind::Mul,
      {add(G, OpKind::Mul, {X, One}), scalar(G, "half", 0.5f, Shape{1, 1, 1})});
  G.addOutput(Y);
  EXPECT_EQ(fusePatterns(G), 0u);
  EXPECT_EQ(G.tensor(G.outputs()[0]).Type.Dims, (Shape{1, 4, 16}));
}

TEST(Fusion, IgnoresErfWithOtherConstants) {
  Graph G;
  TensorId X = G.addTensor("x", f32({4, 16}), TensorRole::Input);
  G.addInput(X);
  TensorId E =
      add(G, OpKind::Erf, {add(G, OpKind::Div, {X, scalar(G, "three", 3.0f)})});
  TensorId One = add(G, OpKind::Add, {E, scalar(G, "one", 1.0f)});
  G.addOutput(add(G, OpKind::Mul,
                  {add(G, OpKind::Mul, {X, One}), scalar(G, "h", 0.5f)}));
  EXPECT_EQ(fusePatterns(G), 0u);
}

TEST(RnnUnroll, BidirectionalLstmBecomesCellsSharingWeights) {
  Graph G;
  const int64_t T = 3, B = 2, I = 4, H = 5;
  TensorId X = G.addTensor("x", f32({T, B, I}), TensorRole::Input);
  G.addInput(X);
  G.tensor(X).BatchDim = 1;
  TensorId W = G.addTensor("W", f32({2, 4 * H, I}), TensorRole::Parameter);
  TensorId R = G.addTensor("R", f32({2, 4 * H, H}), TensorRole::Parameter);
  TensorId Bias = G.addTensor("B", f32({2, 8 * H}), TensorRole::Parameter);
  auto Id = G.addOp(
      OpKind::LSTM, "lstm", {X, W, R, Bias},
      attrs({{"hidden_size", H}, {"direction", std::string("bidirectional")}}));
  ASSERT_TRUE(static_cast<bool>(Id));
  std::vector<TensorId> Outs(G.op(*Id).Outputs.begin(),
                             G.op(*Id).Outputs.end());
  for (TensorId O : Outs)
    G.addOutput(O);
  int64_t Params = countParameters(G);

  auto Changed = unrollRecurrent(G);
  ASSERT_TRUE(static_cast<bool>(Changed))
      << llvm::toString(Changed.takeError());
  EXPECT_TRUE(*Changed);
  EXPECT_EQ(kindCounts(G)["LSTMCell"], 2 * T);
  EXPECT_EQ(kindCounts(G)["LSTM"], 0);
  EXPECT_EQ(countParameters(G), Params);
  EXPECT_EQ(formatShape(G.tensor(G.outputs()[0]).Type.Dims), "[3,2,2,5]");
  EXPECT_EQ(formatShape(G.tensor(G.outputs()[1]).Type.Dims), "[2,2,5]");
  EXPECT_EQ(formatShape(G.tensor(G.outputs()[2]).Type.Dims), "[2,2,5]");
  // Every cell reads the layer's weights, viewed gate-major so that a slice
  // of hidden units is one box of each.
  auto ViewOf = [&](TensorId Id) -> std::string {
    OpId P = G.tensor(Id).Producer;
    if (P == NoOp || G.op(P).Kind != OpKind::Reshape)
      return "not a view";
    return G.op(P).Name + " of " + G.tensor(G.op(P).Inputs[0]).Name + " as " +
           formatShape(G.tensor(Id).Type.Dims);
  };
  for (const Op &O : G.ops())
    if (O.Kind == OpKind::LSTMCell) {
      EXPECT_EQ(ViewOf(O.Inputs[3]), "lstm/W_gates of W as [2,4,5,4]");
      EXPECT_EQ(ViewOf(O.Inputs[4]), "lstm/R_gates of R as [2,4,5,5]");
      EXPECT_EQ(ViewOf(O.Inputs[5]), "lstm/B_gates of B as [2,8,5]");
    }
  inferBatchDims(G);
  for (const Op &O : G.ops())
    if (O.Kind == OpKind::LSTMCell) {
      ParallelDims P = parallelDims(G, O);
      EXPECT_EQ(P.Output[0], DimKind::Sample);
      EXPECT_EQ(P.Output[1], DimKind::Parameter);
    }
}

// A layer above an unrolled one reads that layer's step outputs directly,
// not slices of the assembled sequence: step t of the upper layer depends on
// step t of the lower one only, so the two can pipeline (FlexFlow's RNN
// graphs). PyTorch squeezes the direction dim between the layers.
TEST(RnnUnroll, StackedLayerReadsTheCellsBelow) {
  Graph G;
  const int64_t T = 4, B = 2, I = 3, H = 5;
  TensorId X = G.addTensor("x", f32({T, B, I}), TensorRole::Input);
  G.addInput(X);
  auto Layer = [&](const std::string &Name, TensorId In, int64_t InSize) {
    TensorId W = G.addTensor(Name + ".W", f32({1, 4 * H, InSize}),
                             TensorRole::Parameter);
    TensorId R =
        G.addTensor(Name + ".R", f32({1, 4 * H, H}), TensorRole::Parameter);
    auto Id =
        G.addOp(OpKind::LSTM, Name, {In, W, R}, attrs({{"hidden_size", H}}));
    EXPECT_TRUE(static_cast<bool>(Id));
    return G.op(*Id).Outputs[0];
  };
  TensorId Y1 = Layer("lower", X, I);
  auto Squeezed = G.addOp(OpKind::Reshape, "squeeze", {Y1},
                          attrs({{"shape", ints({T, B, H})}}));
  ASSERT_TRUE(static_cast<bool>(Squeezed));
  TensorId Y2 = Layer("upper", G.op(*Squeezed).Outputs[0], H);
  G.addOutput(Y2);

  auto Changed = unrollRecurrent(G);
  ASSERT_TRUE(static_cast<bool>(Changed))
      << llvm::toString(Changed.takeError());
  std::vector<const Op *> Lower, Upper;
  for (const Op &O : G.ops())
    if (O.Kind == OpKind::LSTMCell)
      (llvm::StringRef(O.Name).startswith("lower/") ? Lower : Upper)
          .push_back(&O);
  ASSERT_EQ(Lower.size(), size_t(T));
  ASSERT_EQ(Upper.size(), size_t(T));
  for (int64_t Step = 0; Step < T; ++Step)
    EXPECT_EQ(Upper[Step]->Inputs[0], Lower[Step]->Outputs[0]) << Step;
  // Only the lower layer's input is sliced; its sequence is not assembled.
  EXPECT_EQ(kindCounts(G)["Gather"], T);
  EXPECT_EQ(formatShape(G.tensor(G.outputs()[0]).Type.Dims), "[4,1,2,5]");
}

TEST(RnnUnroll, RefusesSequenceLengths) {
  Graph G;
  TensorId X = G.addTensor("x", f32({3, 2, 4}), TensorRole::Input);
  TensorId W = G.addTensor("W", f32({1, 15, 4}), TensorRole::Parameter);
  TensorId R = G.addTensor("R", f32({1, 15, 5}), TensorRole::Parameter);
  TensorId L =
      G.addTensor("len", TensorType{DType::Int32, {2}}, TensorRole::Input);
  auto Id = G.addOp(OpKind::GRU, "gru", {X, W, R, NoTensor, L},
                    attrs({{"hidden_size", int64_t(5)}}));
  ASSERT_TRUE(static_cast<bool>(Id)) << llvm::toString(Id.takeError());
  G.addOutput(G.op(*Id).Outputs[0]);
  auto Changed = unrollRecurrent(G);
  ASSERT_FALSE(static_cast<bool>(Changed));
  EXPECT_THAT(llvm::toString(Changed.takeError()),
              ::testing::HasSubstr("cannot unroll GRU 'gru': it has "
                                   "sequence_lens"));
}

} // namespace
