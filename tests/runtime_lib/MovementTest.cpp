//===- tests/runtime_lib/MovementTest.cpp - Data movement kernels ---------===//
//
// Reshape, Transpose, Concat, Split, Slice, Pad, Expand and Gather on the
// CPU backend: forward values written out by hand or by index arithmetic
// here (several dtypes: the kernels copy bytes), the gradient check of every
// float input (epsilon 1e-2, relative tolerance 1e-3: these ops are linear,
// so central differences are exact up to f32 rounding), accumulation, and
// the out-of-range Gather error.
//
//===----------------------------------------------------------------------===//
#include "KernelTestUtil.h"
#include "runtime_lib/Error.h"

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

using Ints = std::vector<int64_t>;

/// A tensor of Type holding 0, 1, 2, ... (f32 for the gradient checks).
HostTensor iota(std::vector<int64_t> Dims, DType Type = DType::Float32) {
  HostTensor T(Type, std::move(Dims));
  for (int64_t I = 0; I < T.size(); ++I)
    T.set(I, static_cast<double>(I));
  return T;
}

HostTensor randomF32(std::vector<int64_t> Dims, unsigned Seed) {
  HostTensor T = f32(std::move(Dims));
  std::mt19937 Rng(Seed);
  randomize(T, Rng);
  return T;
}

void expectValues(const HostTensor &T, std::vector<double> Expected) {
  ASSERT_EQ(T.size(), static_cast<int64_t>(Expected.size()));
  for (int64_t I = 0; I < T.size(); ++I)
    EXPECT_EQ(T.at(I), Expected[I]) << "element " << I;
}

constexpr double Eps = 1e-2, Tol = 1e-3;

TEST(ReshapeKernel, CopiesAndPassesGradientsThrough) {
  auto B = createCpuBackend(1);
  HostTensor X = iota({2, 3}, DType::Int64), Y = i64({3, 1, 2});
  runForward(*B, OpKind::Reshape, makeAttrs({{"shape", Ints{3, 1, 2}}}), {&X},
             {&Y});
  expectValues(Y, {0, 1, 2, 3, 4, 5});
  HostTensor F = randomF32({2, 3}, 1);
  gradCheck(*B, OpKind::Reshape, makeAttrs({{"shape", Ints{6}}}), {&F},
            {f32({6})}, {0}, Eps, Tol);
}

TEST(TransposeKernel, PermutesDims) {
  auto B = createCpuBackend(1);
  for (DType Type : {DType::Int32, DType::Float64, DType::UInt8}) {
    HostTensor X = iota({2, 3, 4}, Type), Y(Type, {4, 2, 3});
    runForward(*B, OpKind::Transpose, makeAttrs({{"perm", Ints{2, 0, 1}}}),
               {&X}, {&Y});
    // Y[k][i][j] = X[i][j][k].
    for (int64_t K = 0; K < 4; ++K)
      for (int64_t I = 0; I < 2; ++I)
        for (int64_t J = 0; J < 3; ++J)
          EXPECT_EQ(Y.at((K * 2 + I) * 3 + J), X.at((I * 3 + J) * 4 + K));
  }
  HostTensor X = randomF32({2, 3, 4}, 2);
  gradCheck(*B, OpKind::Transpose, makeAttrs({{"perm", Ints{1, 2, 0}}}), {&X},
            {f32({3, 4, 2})}, {0}, Eps, Tol);
}

TEST(ConcatKernel, JoinsAlongTheAxis) {
  auto B = createCpuBackend(1);
  HostTensor A = iota({2, 1}, DType::Int32), C = iota({2, 2}, DType::Int32),
             Y(DType::Int32, {2, 3});
  runForward(*B, OpKind::Concat, makeAttrs({{"axis", int64_t(1)}}), {&A, &C},
             {&Y});
  expectValues(Y, {0, 0, 1, 1, 2, 3});
  HostTensor Y0(DType::Int32, {4, 1});
  HostTensor A2 = iota({2, 1}, DType::Int32);
  runForward(*B, OpKind::Concat, makeAttrs({{"axis", int64_t(0)}}), {&A, &A2},
             {&Y0});
  expectValues(Y0, {0, 1, 0, 1});
  HostTensor P = randomF32({2, 1, 3}, 3), Q = randomF32({2, 2, 3}, 4),
             R = randomF32({2, 3, 3}, 5);
  gradCheck(*B, OpKind::Concat, makeAttrs({{"axis", int64_t(1)}}), {&P, &Q, &R},
            {f32({2, 6, 3})}, {0, 1, 2}, Eps, Tol);
}

TEST(SplitKernel, CutsAlongTheAxis) {
  auto B = createCpuBackend(1);
  HostTensor X = iota({2, 3}, DType::Int64), Y0 = i64({2, 1}), Y1 = i64({2, 2});
  runForward(*B, OpKind::Split,
             makeAttrs({{"axis", int64_t(1)}, {"split", Ints{1, 2}}}), {&X},
             {&Y0, &Y1});
  expectValues(Y0, {0, 3});
  expectValues(Y1, {1, 2, 4, 5});
  HostTensor F = randomF32({4, 3}, 6);
  gradCheck(*B, OpKind::Split,
            makeAttrs({{"axis", int64_t(0)}, {"split", Ints{1, 0, 3}}}), {&F},
            {f32({1, 3}), f32({0, 3}), f32({3, 3})}, {0}, Eps, Tol);
}

TEST(SliceKernel, StepsIncludingNegativeOnes) {
  auto B = createCpuBackend(1);
  HostTensor X = iota({3, 5}, DType::Int32), Y(DType::Int32, {2, 3});
  // Rows 2, 0 (step -2); columns 0, 2, 4 (step 2).
  OpAttrs A = makeAttrs(
      {{"starts", Ints{2, 0}}, {"ends", Ints{-1, 5}}, {"steps", Ints{-2, 2}}});
  runForward(*B, OpKind::Slice, A, {&X}, {&Y});
  expectValues(Y, {10, 12, 14, 0, 2, 4});
  HostTensor Y2(DType::Int32, {1, 5});
  runForward(*B, OpKind::Slice,
             makeAttrs({{"starts", Ints{1, 4}},
                        {"ends", Ints{2, -1}},
                        {"steps", Ints{1, -1}}}),
             {&X}, {&Y2});
  expectValues(Y2, {9, 8, 7, 6, 5});
  HostTensor F = randomF32({3, 5}, 7);
  gradCheck(*B, OpKind::Slice, A, {&F}, {f32({2, 3})}, {0}, Eps, Tol);
}

TEST(SliceKernel, RejectsReadsOutsideTheInput) {
  auto B = createCpuBackend(1);
  HostTensor X = iota({3}), Y = f32({2});
  EXPECT_THROW(runForward(*B, OpKind::Slice,
                          makeAttrs({{"starts", Ints{2}},
                                     {"ends", Ints{4}},
                                     {"steps", Ints{1}}}),
                          {&X}, {&Y}),
               RuntimeError);
}

OpAttrs padAttrs(Ints Pads, const char *Mode, double Value = 0) {
  return makeAttrs(
      {{"pads", Pads}, {"mode", std::string(Mode)}, {"value", Value}});
}

TEST(PadKernel, ConstantPadsAndCrops) {
  auto B = createCpuBackend(1);
  // [[0,1,2],[3,4,5]]: one row of 7s above, column 0 cropped, one column of
  // 7s on the right.
  HostTensor X = iota({2, 3}, DType::Int32), Y(DType::Int32, {3, 3});
  runForward(*B, OpKind::Pad, padAttrs({1, -1, 0, 1}, "constant", 7), {&X},
             {&Y});
  expectValues(Y, {7, 7, 7, 1, 2, 7, 4, 5, 7});
  HostTensor F = iota({2}), FY = f32({4});
  runForward(*B, OpKind::Pad, padAttrs({1, 1}, "constant", -0.5), {&F}, {&FY});
  expectValues(FY, {-0.5, 0, 1, -0.5});
  HostTensor Bools(DType::Bool, {1}), BY(DType::Bool, {3});
  Bools.set(0, 0);
  runForward(*B, OpKind::Pad, padAttrs({1, 1}, "constant", 1), {&Bools}, {&BY});
  expectValues(BY, {1, 0, 1});
  HostTensor G = randomF32({3, 4}, 8);
  gradCheck(*B, OpKind::Pad, padAttrs({1, -1, -1, 2}, "constant", 3), {&G},
            {f32({3, 5})}, {0}, Eps, Tol);
}

TEST(PadKernel, ReflectEdgeWrap) {
  auto B = createCpuBackend(1);
  HostTensor X = iota({4}, DType::Int64), Y = i64({9});
  runForward(*B, OpKind::Pad, padAttrs({3, 2}, "reflect"), {&X}, {&Y});
  expectValues(Y, {3, 2, 1, 0, 1, 2, 3, 2, 1});
  runForward(*B, OpKind::Pad, padAttrs({3, 2}, "edge"), {&X}, {&Y});
  expectValues(Y, {0, 0, 0, 0, 1, 2, 3, 3, 3});
  runForward(*B, OpKind::Pad, padAttrs({3, 2}, "wrap"), {&X}, {&Y});
  expectValues(Y, {1, 2, 3, 0, 1, 2, 3, 0, 1});
  // Reflect past a whole period: numpy gives [1,2,1,0,1,2,1,0,1].
  HostTensor X3 = iota({3}, DType::Int64), Y3 = i64({9});
  runForward(*B, OpKind::Pad, padAttrs({3, 3}, "reflect"), {&X3}, {&Y3});
  expectValues(Y3, {1, 2, 1, 0, 1, 2, 1, 0, 1});
  // A crop on one side, reflection of the cropped input on the other.
  HostTensor Y4 = i64({5});
  runForward(*B, OpKind::Pad, padAttrs({-1, 2}, "reflect"), {&X}, {&Y4});
  expectValues(Y4, {1, 2, 3, 2, 1});
  // 2-D wrap: one row after, one column on each side.
  HostTensor M = iota({2, 2}, DType::Int32), MY(DType::Int32, {3, 4});
  runForward(*B, OpKind::Pad, padAttrs({0, 1, 1, 1}, "wrap"), {&M}, {&MY});
  expectValues(MY, {1, 0, 1, 0, 3, 2, 3, 2, 1, 0, 1, 0});
  for (const char *Mode : {"reflect", "edge", "wrap"}) {
    HostTensor F = randomF32({3, 4}, 9);
    // Gradients of repeated elements accumulate into their source.
    gradCheck(*B, OpKind::Pad, padAttrs({2, -1, 1, 3}, Mode), {&F},
              {f32({6, 6})}, {0}, Eps, Tol);
  }
}

TEST(ExpandKernel, BroadcastsAndSumsGradients) {
  auto B = createCpuBackend(1);
  HostTensor X = iota({3, 1}, DType::Float64), Y(DType::Float64, {2, 3, 2});
  runForward(*B, OpKind::Expand, makeAttrs({{"shape", Ints{2, 1, 2}}}), {&X},
             {&Y});
  expectValues(Y, {0, 0, 1, 1, 2, 2, 0, 0, 1, 1, 2, 2});
  HostTensor F = randomF32({3, 1}, 10);
  gradCheck(*B, OpKind::Expand, makeAttrs({{"shape", Ints{2, 3, 4}}}), {&F},
            {f32({2, 3, 4})}, {0}, Eps, Tol);
  HostTensor Same = randomF32({2, 3}, 11);
  gradCheck(*B, OpKind::Expand, makeAttrs({{"shape", Ints{2, 3}}}), {&Same},
            {f32({2, 3})}, {0}, Eps, Tol);
}

TEST(GatherKernel, GathersRowsWithNegativeIndices) {
  auto B = createCpuBackend(1);
  HostTensor X = iota({3, 2}, DType::Int64);
  HostTensor I = i64({2, 2}, {2, 0, -1, 1}), Y = i64({2, 2, 2});
  runForward(*B, OpKind::Gather, makeAttrs({{"axis", int64_t(0)}}), {&X, &I},
             {&Y});
  expectValues(Y, {4, 5, 0, 1, 4, 5, 2, 3});
  HostTensor I32(DType::Int32, {3}), Y1 = f32({3, 3});
  for (int K = 0; K < 3; ++K)
    I32.set(K, K == 0 ? 1 : K == 1 ? -2 : 0);
  HostTensor F = iota({3, 2});
  runForward(*B, OpKind::Gather, makeAttrs({{"axis", int64_t(1)}}), {&F, &I32},
             {&Y1});
  // Columns 1, 0, 0 of each row.
  expectValues(Y1, {1, 0, 0, 3, 2, 2, 5, 4, 4});
  // Duplicated indices accumulate into the data gradient.
  HostTensor D = randomF32({4, 3}, 12), Dup = i64({5}, {1, 3, 1, -1, 0});
  gradCheck(*B, OpKind::Gather, makeAttrs({{"axis", int64_t(0)}}), {&D, &Dup},
            {f32({5, 3})}, {0}, Eps, Tol);
  gradCheck(*B, OpKind::Gather, makeAttrs({{"axis", int64_t(1)}}), {&D, &I32},
            {f32({4, 3})}, {0}, Eps, Tol);
}

// ONNX's examples: torch.gather along each axis, indices smaller than the
// data, negative ones; repeated indices accumulate into the data gradient.
TEST(GatherElementsKernel, TakesAlongTheAxisWithNegativeIndices) {
  auto B = createCpuBackend(1);
  HostTensor X = iota({3, 3}); // 0 1 2 / 3 4 5 / 6 7 8
  HostTensor I = i64({2, 3}, {1, 2, 0, 2, 0, -3}), Y = f32({2, 3});
  runForward(*B, OpKind::GatherElements, makeAttrs({{"axis", int64_t(0)}}),
             {&X, &I}, {&Y});
  expectValues(Y, {3, 7, 2, 6, 1, 2});
  HostTensor I1 = i64({3, 2}, {0, 0, 1, 0, -1, 2}), Y1 = f32({3, 2});
  runForward(*B, OpKind::GatherElements, makeAttrs({{"axis", int64_t(1)}}),
             {&X, &I1}, {&Y1});
  expectValues(Y1, {0, 0, 4, 3, 8, 8});
  HostTensor D = randomF32({4, 3, 2}, 13);
  HostTensor Dup = i64({2, 3, 2}, {3, 0, 0, 0, -1, 2, 1, 1, 3, 3, 0, 0});
  gradCheck(*B, OpKind::GatherElements, makeAttrs({{"axis", int64_t(0)}}),
            {&D, &Dup}, {f32({2, 3, 2})}, {0}, Eps, Tol);
  HostTensor Along1 = i64({4, 2, 1}, {2, 0, 1, 1, 0, 2, -1, -3});
  gradCheck(*B, OpKind::GatherElements, makeAttrs({{"axis", int64_t(1)}}),
            {&D, &Along1}, {f32({4, 2, 1})}, {0}, Eps, Tol);
  HostTensor Out = i64({1, 3}, {0, 5, 1}), Y2 = f32({1, 3});
  try {
    runForward(*B, OpKind::GatherElements, makeAttrs({{"axis", int64_t(1)}}),
               {&X, &Out}, {&Y2});
    FAIL() << "no error";
  } catch (const RuntimeError &E) {
    EXPECT_THAT(E.what(), testing::HasSubstr("op 'test' (GatherElements)"));
    EXPECT_THAT(E.what(), testing::HasSubstr("index 5 (indices element 1)"));
  }
}

TEST(GatherKernel, OutOfRangeIndexNamesOpAndIndex) {
  auto B = createCpuBackend(1);
  HostTensor X = iota({3, 2}), I = i64({2}, {1, 3}), Y = f32({2, 2});
  try {
    runForward(*B, OpKind::Gather, makeAttrs({{"axis", int64_t(0)}}), {&X, &I},
               {&Y});
    FAIL() << "no error";
  } catch (const RuntimeError &E) {
    EXPECT_THAT(E.what(), testing::HasSubstr("op 'test' (Gather)"));
    EXPECT_THAT(E.what(), testing::HasSubstr("index 3"));
  }
  HostTensor Neg = i64({1}, {-4}), Y1 = f32({1, 2});
  EXPECT_THROW(runForward(*B, OpKind::Gather, makeAttrs({{"axis", int64_t(0)}}),
                          {&X, &Neg}, {&Y1}),
               RuntimeError);
}

/// Backward twice into the same gradients gives twice the gradient.
void expectAccumulates(OpKind Kind, const OpAttrs &A,
                       std::vector<HostTensor *> Inputs,
                       std::vector<HostTensor> Outputs, unsigned Float) {
  auto B = createCpuBackend(1);
  std::vector<HostTensor *> Out;
  for (HostTensor &O : Outputs)
    Out.push_back(&O);
  runForward(*B, Kind, A, Inputs, Out);
  OpCall Call{Kind, A, "test", {}, {}, 1};
  for (HostTensor *T : Inputs)
    Call.Inputs.push_back(T->view());
  for (HostTensor &O : Outputs)
    Call.Outputs.push_back(O.view());
  std::vector<HostTensor> OutGrads = Outputs;
  std::vector<TensorView> OG, IG(Inputs.size(), TensorView::absent());
  std::mt19937 Rng(5);
  for (HostTensor &G : OutGrads) {
    randomize(G, Rng);
    OG.push_back(G.view());
  }
  HostTensor Grad(Inputs[Float]->Type, Inputs[Float]->Dims);
  IG[Float] = Grad.view();
  B->backward(Call, OG, IG);
  HostTensor Once = Grad;
  B->backward(Call, OG, IG);
  double Norm = 0;
  for (int64_t E = 0; E < Grad.size(); ++E) {
    EXPECT_NEAR(Grad.at(E), 2 * Once.at(E), 1e-6) << opKindName(Kind) << E;
    Norm += std::fabs(Once.at(E));
  }
  EXPECT_GT(Norm, 0) << opKindName(Kind);
}

TEST(MovementKernels, BackwardAccumulates) {
  HostTensor X = randomF32({2, 3}, 13), Z = randomF32({2, 3}, 14);
  expectAccumulates(OpKind::Reshape, makeAttrs({{"shape", Ints{6}}}), {&X},
                    {f32({6})}, 0);
  expectAccumulates(OpKind::Transpose, makeAttrs({{"perm", Ints{1, 0}}}), {&X},
                    {f32({3, 2})}, 0);
  expectAccumulates(OpKind::Concat, makeAttrs({{"axis", int64_t(0)}}), {&X, &Z},
                    {f32({4, 3})}, 1);
  expectAccumulates(OpKind::Split,
                    makeAttrs({{"axis", int64_t(1)}, {"split", Ints{2, 1}}}),
                    {&X}, {f32({2, 2}), f32({2, 1})}, 0);
  expectAccumulates(OpKind::Slice,
                    makeAttrs({{"starts", Ints{1, 2}},
                               {"ends", Ints{-1, 0}},
                               {"steps", Ints{-1, -2}}}),
                    {&X}, {f32({2, 1})}, 0);
  expectAccumulates(OpKind::Pad, padAttrs({1, 2, 1, 2}, "reflect"), {&X},
                    {f32({4, 7})}, 0);
  expectAccumulates(OpKind::Expand, makeAttrs({{"shape", Ints{4, 2, 3}}}), {&X},
                    {f32({4, 2, 3})}, 0);
  HostTensor I = i64({3}, {1, 1, 0});
  expectAccumulates(OpKind::Gather, makeAttrs({{"axis", int64_t(0)}}), {&X, &I},
                    {f32({3, 3})}, 0);
}

} // namespace
