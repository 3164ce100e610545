//===- tests/runtime_lib/ShardedBatchNormTest.cpp - BatchNorm in phases ---===//
//
// BatchNorm in training mode with its batch split among partitions, run in
// the phases of Backend.h on the CPU backend, the Stats and Sums summed on
// the host between phases as the program's all-reduce would: every output,
// dX (the partitions' parts put together), dscale and dbias (summed over the
// partitions) and the running statistics must match the unsplit kernel
// within relative 1e-5, for splits along N and along a spatial dim.
//
//===----------------------------------------------------------------------===//
#include "KernelTestUtil.h"
#include "runtime_lib/Error.h"

using namespace onnx2soap::rt;
using namespace onnx2soap::rt::test;

namespace {

HostTensor randomTensor(DType Type, std::vector<int64_t> Dims, unsigned Seed,
                        double Low = -1, double High = 1) {
  HostTensor T(Type, std::move(Dims));
  std::mt19937 Rng(Seed);
  randomize(T, Rng, Low, High);
  return T;
}

/// T viewed as [Outer, T.Dims[Dim], Inner].
struct Split3 {
  int64_t Outer = 1, Mid, Inner = 1;
  Split3(const HostTensor &T, int Dim) : Mid(T.Dims[Dim]) {
    for (int I = 0; I < Dim; ++I)
      Outer *= T.Dims[I];
    for (size_t I = Dim + 1; I < T.Dims.size(); ++I)
      Inner *= T.Dims[I];
  }
};

/// Elements [Begin, End) of T along Dim.
HostTensor slice(const HostTensor &T, int Dim, int64_t Begin, int64_t End) {
  std::vector<int64_t> Dims = T.Dims;
  Dims[Dim] = End - Begin;
  HostTensor Part(T.Type, Dims);
  Split3 W(T, Dim);
  int64_t Out = 0;
  for (int64_t O = 0; O < W.Outer; ++O)
    for (int64_t M = Begin; M < End; ++M)
      for (int64_t I = 0; I < W.Inner; ++I)
        Part.set(Out++, T.at((O * W.Mid + M) * W.Inner + I));
  return Part;
}

/// Writes Part into Whole at [Begin, ...) along Dim.
void place(HostTensor &Whole, int Dim, int64_t Begin, const HostTensor &Part) {
  Split3 W(Whole, Dim), P(Part, Dim);
  int64_t In = 0;
  for (int64_t O = 0; O < P.Outer; ++O)
    for (int64_t M = 0; M < P.Mid; ++M)
      for (int64_t I = 0; I < P.Inner; ++I)
        Whole.set((O * W.Mid + Begin + M) * W.Inner + I, Part.at(In++));
}

void expectClose(const HostTensor &Got, const HostTensor &Want,
                 const char *What) {
  ASSERT_EQ(Got.size(), Want.size()) << What;
  for (int64_t I = 0; I < Want.size(); ++I)
    EXPECT_NEAR(Got.at(I), Want.at(I),
                1e-5 * std::max(1.0, std::fabs(Want.at(I))))
        << What << " element " << I;
}

struct ShardCase {
  DType Type;
  int Dim;   // split along
  int Parts; // into
};

class ShardedBatchNorm : public ::testing::TestWithParam<ShardCase> {};

TEST_P(ShardedBatchNorm, PhasesMatchTheUnsplitKernel) {
  const ShardCase P = GetParam();
  const DType T = P.Type;
  const std::vector<int64_t> Dims = {6, 3, 5, 4};
  const int64_t C = Dims[1], Count = Dims[0] * Dims[2] * Dims[3];
  auto B = createCpuBackend(1);
  OpAttrs A;
  A.set("training", int64_t(1));
  A.set("momentum", 0.8);
  A.set("epsilon", 1e-5);

  // An offset mean, so the one-pass variance of the phases is exercised.
  HostTensor X = randomTensor(T, Dims, 1, -0.5, 2.0),
             Scale = randomTensor(T, {C}, 2, 0.5, 1.5),
             Bias = randomTensor(T, {C}, 3), Mean = randomTensor(T, {C}, 4),
             Var = randomTensor(T, {C}, 5, 0.5, 1.5);
  HostTensor DY = randomTensor(T, Dims, 6), DRunMean = randomTensor(T, {C}, 7),
             DRunVar = randomTensor(T, {C}, 8);

  // The unsplit op.
  HostTensor Y(T, Dims), RunMean(T, {C}), RunVar(T, {C});
  HostTensor DX(T, Dims), DScale(T, {C}), DBias(T, {C});
  OpCall Whole{OpKind::BatchNorm,
               A,
               "bn",
               {X.view(), Scale.view(), Bias.view(), Mean.view(), Var.view()},
               {Y.view(), RunMean.view(), RunVar.view()},
               1};
  B->forward(Whole);
  B->backward(Whole, {DY.view(), DRunMean.view(), DRunVar.view()},
              {DX.view(), DScale.view(), DBias.view(), TensorView::absent(),
               TensorView::absent()});

  // The partitions, each with its slice of X and dY.
  const int64_t Extent = Dims[P.Dim];
  std::vector<int64_t> Bounds;
  for (int K = 0; K <= P.Parts; ++K)
    Bounds.push_back(Extent * K / P.Parts);
  struct Part {
    HostTensor X, DY, Y, RunMean, RunVar, DX, DScale, DBias;
  };
  std::vector<Part> Parts;
  for (int K = 0; K < P.Parts; ++K) {
    HostTensor PX = slice(X, P.Dim, Bounds[K], Bounds[K + 1]);
    std::vector<int64_t> PDims = PX.Dims;
    Parts.push_back({PX, slice(DY, P.Dim, Bounds[K], Bounds[K + 1]),
                     HostTensor(T, PDims), HostTensor(T, {C}),
                     HostTensor(T, {C}), HostTensor(T, PDims),
                     HostTensor(T, {C}), HostTensor(T, {C})});
  }
  auto callOf = [&](Part &Q) {
    return OpCall{
        OpKind::BatchNorm,
        A,
        "bn",
        {Q.X.view(), Scale.view(), Bias.view(), Mean.view(), Var.view()},
        {Q.Y.view(), Q.RunMean.view(), Q.RunVar.view()},
        1};
  };
  // What the all-reduce does between phases.
  auto sumOver = [&](std::vector<HostTensor> &Partial) {
    HostTensor Sum = HostTensor(DType::Float32, {2, C});
    for (int64_t I = 0; I < Sum.size(); ++I) {
      double S = 0;
      for (HostTensor &H : Partial)
        S += H.at(I);
      Sum.set(I, S);
    }
    return Sum;
  };

  std::vector<HostTensor> PartStats(P.Parts,
                                    HostTensor(DType::Float32, {2, C}));
  for (int K = 0; K < P.Parts; ++K)
    B->batchNormPartialStats(callOf(Parts[K]), PartStats[K].view());
  HostTensor Stats = sumOver(PartStats);
  for (Part &Q : Parts)
    B->batchNormForwardWithStats(callOf(Q), Stats.view(), Count);

  std::vector<HostTensor> PartSums(P.Parts, HostTensor(DType::Float32, {2, C}));
  for (int K = 0; K < P.Parts; ++K)
    B->batchNormBackwardPartialSums(callOf(Parts[K]), Parts[K].DY.view(),
                                    Stats.view(), Count, PartSums[K].view());
  HostTensor Sums = sumOver(PartSums);
  for (Part &Q : Parts)
    B->batchNormBackwardWithSums(callOf(Q),
                                 {Q.DY.view(), DRunMean.view(), DRunVar.view()},
                                 {Q.DX.view(), Q.DScale.view(), Q.DBias.view()},
                                 Stats.view(), Sums.view(), Count);

  HostTensor YAll(T, Dims), DXAll(T, Dims), DScaleAll(T, {C}), DBiasAll(T, {C});
  for (int K = 0; K < P.Parts; ++K) {
    Part &Q = Parts[K];
    place(YAll, P.Dim, Bounds[K], Q.Y);
    place(DXAll, P.Dim, Bounds[K], Q.DX);
    // Every partition writes the whole running statistics.
    expectClose(Q.RunMean, RunMean, "running_mean");
    expectClose(Q.RunVar, RunVar, "running_var");
    // The program's gradient all-reduce sums the partitions' shares.
    for (int64_t Ch = 0; Ch < C; ++Ch) {
      DScaleAll.set(Ch, DScaleAll.at(Ch) + Q.DScale.at(Ch));
      DBiasAll.set(Ch, DBiasAll.at(Ch) + Q.DBias.at(Ch));
    }
  }
  expectClose(YAll, Y, "Y");
  expectClose(DXAll, DX, "dX");
  expectClose(DScaleAll, DScale, "dscale");
  expectClose(DBiasAll, DBias, "dbias");
}

INSTANTIATE_TEST_SUITE_P(Splits, ShardedBatchNorm,
                         ::testing::Values(ShardCase{DType::Float32, 0, 2},
                                           ShardCase{DType::Float32, 0, 3},
                                           ShardCase{DType::Float32, 2, 2},
                                           ShardCase{DType::Float32, 2, 3},
                                           ShardCase{DType::Float64, 0, 3},
                                           ShardCase{DType::Float64, 3, 2}),
                         [](const ::testing::TestParamInfo<ShardCase> &Info) {
                           return std::string(Info.param.Type == DType::Float32
                                                  ? "f32"
                                                  : "f64") +
                                  "_dim" + std::to_string(Info.param.Dim) +
                                  "_by" + std::to_string(Info.param.Parts);
                         });

/// One partition that is the whole batch: the phases are the unsplit op.
TEST(ShardedBatchNormKernel, InferenceModePhasesAreTheUnsplitOp) {
  auto B = createCpuBackend(1);
  OpAttrs A;
  A.set("training", int64_t(0));
  A.set("epsilon", 1e-3);
  std::vector<int64_t> Dims = {2, 3, 2, 2};
  HostTensor X = randomTensor(DType::Float32, Dims, 1),
             Scale = randomTensor(DType::Float32, {3}, 2),
             Bias = randomTensor(DType::Float32, {3}, 3),
             Mean = randomTensor(DType::Float32, {3}, 4),
             Var = randomTensor(DType::Float32, {3}, 5, 0.5, 1.5),
             DY = randomTensor(DType::Float32, Dims, 6);
  HostTensor Y = f32(Dims), YPhased = f32(Dims), DX = f32(Dims),
             DXPhased = f32(Dims), DScale = f32({3}), DScalePhased = f32({3});
  std::vector<TensorView> In = {X.view(), Scale.view(), Bias.view(),
                                Mean.view(), Var.view()};
  OpCall Call{OpKind::BatchNorm, A, "bn", In, {Y.view()}, 1};
  OpCall Phased{OpKind::BatchNorm, A, "bn", In, {YPhased.view()}, 1};
  HostTensor Stats = f32({2, 3}), Sums = f32({2, 3});
  B->forward(Call);
  B->backward(Call, {DY.view()}, {DX.view(), DScale.view()});
  B->batchNormPartialStats(Phased, Stats.view());
  B->batchNormForwardWithStats(Phased, Stats.view(), 8);
  B->batchNormBackwardPartialSums(Phased, DY.view(), Stats.view(), 8,
                                  Sums.view());
  B->batchNormBackwardWithSums(Phased, {DY.view()},
                               {DXPhased.view(), DScalePhased.view()},
                               Stats.view(), Sums.view(), 8);
  EXPECT_EQ(YPhased.Bytes, Y.Bytes);
  EXPECT_EQ(DXPhased.Bytes, DX.Bytes);
  EXPECT_EQ(DScalePhased.Bytes, DScale.Bytes);
}

TEST(ShardedBatchNormKernel, RejectsBadPhaseOperands) {
  auto B = createCpuBackend(1);
  OpAttrs A;
  A.set("training", int64_t(1));
  std::vector<int64_t> Dims = {2, 3, 2};
  HostTensor X = randomTensor(DType::Float32, Dims, 1), Scale = f32({3}),
             Bias = f32({3}), Mean = f32({3}), Var = f32({3}), Y = f32(Dims),
             DX = f32(Dims), DMean = f32({3});
  OpCall Call{OpKind::BatchNorm,
              A,
              "bn1",
              {X.view(), Scale.view(), Bias.view(), Mean.view(), Var.view()},
              {Y.view()},
              1};
  HostTensor Stats = f32({2, 3}), WrongStats = f32({3}),
             IntStats(DType::Int32, {2, 3});
  auto Message = [](auto &&Fn) {
    try {
      Fn();
    } catch (const RuntimeError &E) {
      return std::string(E.what());
    }
    return std::string("no error");
  };
  EXPECT_THAT(
      Message([&] { B->batchNormPartialStats(Call, WrongStats.view()); }),
      ::testing::HasSubstr("Stats has 3 elements, expected 6"));
  EXPECT_THAT(Message([&] { B->batchNormPartialStats(Call, IntStats.view()); }),
              ::testing::HasSubstr("Stats must be f32 or f64"));
  EXPECT_THAT(
      Message([&] { B->batchNormForwardWithStats(Call, Stats.view(), 2); }),
      ::testing::HasSubstr("Count 2 is below the partition's own 4"));
  EXPECT_THAT(Message([&] {
                B->batchNormBackwardWithSums(Call, {Y.view()},
                                             {DX.view(), TensorView::absent(),
                                              TensorView::absent(),
                                              DMean.view()},
                                             Stats.view(), Stats.view(), 8);
              }),
              ::testing::HasSubstr("op 'bn1' (BatchNorm): a BatchNorm split "
                                   "among partitions takes no gradient"));
}

} // namespace
