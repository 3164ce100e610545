//===- tests/ir/RegionTest.cpp - Region rules and parallel dims -----------===//
//
// The region of each input a partition of the output needs, written by hand
// for the cases the planner relies on: convolution halos, contractions with
// a reduction slice, reshapes, concatenation, slicing, gathering.
//
//===----------------------------------------------------------------------===//
#include "IrTestUtil.h"
#include "ir/BatchDims.h"

using namespace onnx2soap::ir;
using namespace onnx2soap::ir::test;

namespace {

Region region(const Graph &G, TensorId Out, unsigned Input, Region OutRegion,
              Interval Reduction = {0, 0}) {
  const Op &O = G.op(G.tensor(Out).Producer);
  return opKindInfo(O.Kind).InputRegion(G, O, Input, OutRegion, Reduction);
}

// The bounding box of two regions, and regions ordered interval by
// interval (Begin, then End), as sorting and map keys use them.
TEST(Region, EncloseAndOrder) {
  Region A{{0, 4}, {2, 3}}, B{{1, 6}, {0, 1}};
  EXPECT_EQ(enclose(A, B), (Region{{0, 6}, {0, 3}}));
  EXPECT_EQ(enclose(A, A), A);
  EXPECT_TRUE(A < B);
  EXPECT_TRUE((Region{{0, 4}, {2, 3}}) < (Region{{0, 5}, {0, 1}}));
  EXPECT_TRUE((Region{{0, 4}, {2, 3}}) < (Region{{0, 4}, {2, 4}}));
  EXPECT_FALSE(A < A);
}

// The volume of an intersection, measured without building it, is the
// intersection's volume: zero when the regions miss in any dim (also in a
// later dim than one where they meet), or only touch; one for scalars.
TEST(Region, OverlapVolumeIsTheIntersectionsVolume) {
  std::vector<Region> Regions{{{0, 4}, {2, 3}, {0, 8}},
                              {{1, 6}, {0, 3}, {4, 8}},
                              {{4, 6}, {0, 3}, {0, 8}},
                              {{0, 4}, {3, 5}, {0, 8}},
                              {{2, 3}, {2, 3}, {7, 9}}};
  for (const Region &A : Regions)
    for (const Region &B : Regions)
      EXPECT_EQ(overlapVolume(A, B), regionVolume(intersect(A, B)));
  EXPECT_EQ(overlapVolume(Regions[0], Regions[1]), 3 * 1 * 4);
  EXPECT_EQ(overlapVolume(Regions[0], Regions[2]), 0); // touch at 4
  EXPECT_EQ(overlapVolume(Regions[1], Regions[3]), 0); // miss in dim 1
  EXPECT_EQ(overlapVolume(Region{}, Region{}), 1);
}

TEST(Region, ConvHaloAndChannels) {
  Graph G;
  TensorId X = G.addTensor("x", f32({4, 3, 16, 16}), TensorRole::Input);
  TensorId W = G.addTensor("w", f32({8, 3, 3, 3}), TensorRole::Parameter);
  TensorId Y = add(G, OpKind::Conv, {X, W},
                   attrs({{"kernel_shape", ints({3, 3})},
                          {"strides", ints({1, 1})},
                          {"pads", ints({1, 1, 1, 1})},
                          {"dilations", ints({1, 1})},
                          {"group", int64_t(1)}}));
  // Rows 8..15 of the output need input rows 7..15 (one halo row above, the
  // padding below); the reduction slice picks input channels.
  Region In = region(G, Y, 0, {{0, 2}, {0, 8}, {8, 16}, {0, 16}}, {1, 3});
  EXPECT_EQ(formatRegion(In), "[0:2,1:3,7:16,0:16]");
  Region Weight = region(G, Y, 1, {{0, 2}, {4, 8}, {8, 16}, {0, 16}}, {1, 3});
  EXPECT_EQ(formatRegion(Weight), "[4:8,1:3,0:3,0:3]");
  ParallelDims P = parallelDims(G, G.op(0));
  ASSERT_EQ(P.Output.size(), 4u);
  EXPECT_EQ(P.Output[0], DimKind::Sample);
  EXPECT_EQ(P.Output[1], DimKind::Parameter);
  EXPECT_EQ(P.Output[2], DimKind::Attribute);
  EXPECT_EQ(P.ReductionExtent, 3);
}

TEST(Region, DepthwiseConvReadsItsGroups) {
  Graph G;
  TensorId X = G.addTensor("x", f32({1, 8, 8, 8}), TensorRole::Input);
  TensorId W = G.addTensor("w", f32({16, 1, 3, 3}), TensorRole::Parameter);
  TensorId Y = add(G, OpKind::Conv, {X, W},
                   attrs({{"kernel_shape", ints({3, 3})},
                          {"strides", ints({1, 1})},
                          {"pads", ints({1, 1, 1, 1})},
                          {"dilations", ints({1, 1})},
                          {"group", int64_t(8)}}));
  // Output channels 4..7 belong to groups 2 and 3 (two outputs per group).
  Region In = region(G, Y, 0, {{0, 1}, {4, 8}, {0, 8}, {0, 8}}, {0, 1});
  EXPECT_EQ(formatRegion(In), "[0:1,2:4,0:8,0:8]");
  EXPECT_EQ(parallelDims(G, G.op(0)).ReductionExtent, 0);
}

TEST(Region, MatMulWeightIsParameterAndKIsReduction) {
  Graph G;
  TensorId X = G.addTensor("x", f32({2, 7, 16}), TensorRole::Input);
  X = G.tensor(X).Id;
  G.tensor(X).BatchDim = 0;
  TensorId W = G.addTensor("w", f32({16, 32}), TensorRole::Parameter);
  TensorId Y = add(G, OpKind::MatMul, {X, W});
  inferBatchDims(G);
  EXPECT_EQ(formatRegion(region(G, Y, 0, {{1, 2}, {0, 7}, {8, 16}}, {4, 12})),
            "[1:2,0:7,4:12]");
  EXPECT_EQ(formatRegion(region(G, Y, 1, {{1, 2}, {0, 7}, {8, 16}}, {4, 12})),
            "[4:12,8:16]");
  ParallelDims P = parallelDims(G, G.op(0));
  EXPECT_EQ(P.Output[0], DimKind::Sample);
  EXPECT_EQ(P.Output[1], DimKind::Attribute);
  EXPECT_EQ(P.Output[2], DimKind::Parameter);
  EXPECT_EQ(P.ReductionExtent, 16);
}

TEST(Region, ReshapeMapsLeadingSplitsExactly) {
  Graph G;
  TensorId X = G.addTensor("x", f32({4, 6, 8}), TensorRole::Input);
  TensorId Y = add(G, OpKind::Reshape, {X}, attrs({{"shape", ints({24, 8})}}));
  // Rows 6..11 of [24,8] are sample 1 of [4,6,8].
  EXPECT_EQ(formatRegion(region(G, Y, 0, {{6, 12}, {0, 8}})), "[1:2,0:6,0:8]");
  // A split inside the merged dim gives the bounding box.
  EXPECT_EQ(formatRegion(region(G, Y, 0, {{5, 7}, {0, 8}})), "[0:2,0:6,0:8]");
}

TEST(Region, ReshapeGroupsDimsSoSqueezesAreExact) {
  Graph G;
  TensorId X = G.addTensor("x", f32({40, 1, 8, 16}), TensorRole::Input);
  TensorId Y =
      add(G, OpKind::Reshape, {X}, attrs({{"shape", ints({40, 8, 16})}}));
  EXPECT_EQ(formatRegion(region(G, Y, 0, {{0, 40}, {2, 4}, {0, 16}})),
            "[0:40,0:1,2:4,0:16]");
  // [6,4] -> [2,3,4]: the merged dim splits, the trailing one maps exactly.
  Graph H;
  TensorId Z = H.addTensor("z", f32({6, 4}), TensorRole::Input);
  TensorId W =
      add(H, OpKind::Reshape, {Z}, attrs({{"shape", ints({2, 3, 4})}}));
  EXPECT_EQ(formatRegion(region(H, W, 0, {{1, 2}, {0, 3}, {1, 3}})),
            "[3:6,1:3]");
}

TEST(Region, ConcatRoutesToTheRightInput) {
  Graph G;
  TensorId A = G.addTensor("a", f32({2, 3}), TensorRole::Input);
  TensorId B = G.addTensor("b", f32({2, 5}), TensorRole::Input);
  TensorId Y = add(G, OpKind::Concat, {A, B}, attrs({{"axis", int64_t(1)}}));
  EXPECT_EQ(formatRegion(region(G, Y, 0, {{0, 2}, {2, 6}})), "[0:2,2:3]");
  EXPECT_EQ(formatRegion(region(G, Y, 1, {{0, 2}, {2, 6}})), "[0:2,0:3]");
  EXPECT_EQ(regionVolume(region(G, Y, 0, {{0, 2}, {4, 8}})), 0);
}

TEST(Region, SliceWithNegativeStep) {
  Graph G;
  TensorId X = G.addTensor("x", f32({10}), TensorRole::Input);
  TensorId Y = add(G, OpKind::Slice, {X},
                   attrs({{"starts", ints({9})},
                          {"ends", ints({-1})},
                          {"steps", ints({-2})}}));
  // Outputs 1..2 are inputs 7 and 5.
  EXPECT_EQ(formatRegion(region(G, Y, 0, {{1, 3}})), "[5:8]");
}

TEST(Region, GatherEmbeddingReadsWholeTableRows) {
  Graph G;
  TensorId Table = G.addTensor("table", f32({100, 16}), TensorRole::Parameter);
  TensorId Ids = G.addTensor("ids", i64({4, 7}), TensorRole::Input);
  G.tensor(Ids).BatchDim = 0;
  TensorId Y =
      add(G, OpKind::Gather, {Table, Ids}, attrs({{"axis", int64_t(0)}}));
  inferBatchDims(G);
  EXPECT_EQ(formatRegion(region(G, Y, 0, {{0, 2}, {0, 7}, {8, 16}})),
            "[0:100,8:16]");
  EXPECT_EQ(formatRegion(region(G, Y, 1, {{0, 2}, {0, 7}, {8, 16}})),
            "[0:2,0:7]");
  ParallelDims P = parallelDims(G, G.op(0));
  EXPECT_EQ(P.Output[0], DimKind::Sample);
  EXPECT_EQ(P.Output[2], DimKind::Parameter);
}

TEST(Region, SecondaryOutputsFollowTheirOwnRules) {
  // BatchNorm in training mode: a partition of channels 2..4 of a [2,7,5,7]
  // activation updates the running statistics of those channels (not the
  // last dim, whose extent happens to equal the channel count).
  Graph G;
  TensorId X = G.addTensor("x", f32({2, 7, 5, 7}), TensorRole::Input);
  llvm::SmallVector<TensorId, 4> P;
  for (const char *Name : {"scale", "bias", "mean", "var"})
    P.push_back(G.addTensor(Name, f32({7}), TensorRole::State));
  TensorId Y = add(
      G, OpKind::BatchNorm, {X, P[0], P[1], P[2], P[3]},
      attrs({{"epsilon", 1e-5}, {"momentum", 0.9}, {"training", int64_t(1)}}));
  const Op &Norm = G.op(G.tensor(Y).Producer);
  ASSERT_EQ(Norm.Outputs.size(), 3u);
  Region Out{{0, 2}, {2, 4}, {0, 5}, {0, 7}};
  EXPECT_EQ(formatRegion(outputRegionOf(G, Norm, 1, Out, {0, 0})), "[2:4]");
  EXPECT_EQ(formatRegion(outputRegionOf(G, Norm, 0, Out, {0, 0})),
            "[0:2,2:4,0:5,0:7]");
}

TEST(BatchDims, FollowsTheBatchThroughLayoutChanges) {
  Graph G;
  // [batch, seq, feature] -> Transpose -> [seq, batch, feature] -> LSTM.
  TensorId X = G.addTensor("x", f32({4, 5, 8}), TensorRole::Input);
  G.tensor(X).BatchDim = 0;
  TensorId T =
      add(G, OpKind::Transpose, {X}, attrs({{"perm", ints({1, 0, 2})}}));
  TensorId W = G.addTensor("w", f32({1, 64, 8}), TensorRole::Parameter);
  TensorId R = G.addTensor("r", f32({1, 64, 16}), TensorRole::Parameter);
  TensorId Y =
      add(G, OpKind::LSTM, {T, W, R}, attrs({{"hidden_size", int64_t(16)}}));
  inferBatchDims(G);
  EXPECT_EQ(G.tensor(T).BatchDim, 1);
  EXPECT_EQ(G.tensor(Y).BatchDim, 2);                  // Y [T,D,B,H]
  EXPECT_EQ(G.tensor(G.op(1).Outputs[1]).BatchDim, 1); // Y_h [D,B,H]
  ParallelDims P = parallelDims(G, G.op(1));
  EXPECT_EQ(P.Output[0], DimKind::None);
  EXPECT_EQ(P.Output[2], DimKind::Sample);
}

} // namespace
