//===- tests/codegen/BufferLayoutTest.cpp - Buffers sharing memory --------===//
//
// layoutBuffers on the plans of the training fixtures under several
// strategies: every buffer lies inside its rank's arena at an aligned
// offset, no two buffers whose lifetimes meet share a byte, the arena is
// within a tenth of the most bytes live at one time (the bound any layout
// has), the arenas together well under what holding every buffer for the
// whole run took, and what each rank allocates at most the planner's peak
// there. That the programs still compute PyTorch's losses with buffers
// sharing memory is checked end to end by the codegen_* cases.
//
//===----------------------------------------------------------------------===//
#include "codegen/BufferLayout.h"
#include "../soap_search/PlannerTestUtil.h"
#include "runtime_lib/program/BufferLifetimes.h"
#include "soap_search/Builtins.h"
#include "gtest/gtest.h"
#include <algorithm>
#include <map>
#include <set>

using namespace onnx2soap;
using namespace onnx2soap::rt::program;

namespace {

struct Case {
  const char *Fixture;
  int64_t Batch;
  soap_search::Builtin Strategy;
  unsigned Ranks;
};

std::string caseName(const ::testing::TestParamInfo<Case> &Info) {
  std::string Name = std::string(Info.param.Fixture) + "_" +
                     soap_search::builtinName(Info.param.Strategy).str() +
                     "_np" + std::to_string(Info.param.Ranks);
  std::replace(Name.begin(), Name.end(), '-', '_');
  return Name;
}

void PrintTo(const Case &C, std::ostream *Out) {
  *Out << C.Fixture << " " << soap_search::builtinName(C.Strategy).str()
       << " on " << C.Ranks << " ranks";
}

class FixturePlans : public ::testing::TestWithParam<Case> {};

TEST_P(FixturePlans, BuffersShareMemoryOnlyWhenTheirLifetimesDoNotMeet) {
  const Case &C = GetParam();
  ir::TrainingGraph T = test::training(
      std::string("tests/fixtures/") + C.Fixture + "/model.onnx", C.Batch);
  simulator::Machine M =
      test::machine("cpu:" + std::to_string(C.Ranks), C.Ranks);
  simulator::AnalyticCostModel Cost;
  codegen::PlanOptions Options;
  Options.Optimizer.Momentum = 0.9; // one optimizer slot per parameter
  Options.Init = codegen::InitKind::Random;
  auto Plan = codegen::buildProgramPlan(
      T, soap_search::builtin(C.Strategy, T.G, M, Cost), M, Cost, Options);
  ASSERT_TRUE(bool(Plan)) << llvm::toString(Plan.takeError());
  rt::program::Plan View = Plan->view("", "", 0);
  std::vector<int64_t> Live = codegen::liveBytesPeak(*Plan);
  std::vector<double> Allocated = Plan->allocatedBytes();
  int64_t AllArenas = 0, AllBuffers = 0;

  for (int32_t Rank = 0; Rank < Plan->NumRanks; ++Rank) {
    SCOPED_TRACE("rank " + std::to_string(Rank));
    std::vector<Lifetime> Lives = bufferLifetimes(View, Rank);
    std::vector<int32_t> Mine;
    int64_t Whole = 0;
    for (int32_t Id = 0; Id < int32_t(Plan->Buffers.size()); ++Id)
      if (Plan->Buffers[Id].Rank == Rank) {
        Mine.push_back(Id);
        Whole += alignedBufferBytes(Plan->Buffers[Id]);
      }
    int64_t Arena = Plan->ArenaBytes[Rank];
    AllArenas += Arena;
    AllBuffers += Whole;
    for (int32_t Id : Mine) {
      const BufferInfo &Info = Plan->Buffers[Id];
      EXPECT_EQ(Info.Offset % BufferAlignment, 0) << "buffer " << Id;
      EXPECT_GE(Info.Offset, 0) << "buffer " << Id;
      EXPECT_LE(Info.Offset + int64_t(bufferBytes(Info)), Arena)
          << "buffer " << Id;
      EXPECT_LE(Lives[Id].First, Lives[Id].Last) << "buffer " << Id;
    }
    for (size_t I = 0; I < Mine.size(); ++I)
      for (size_t J = I + 1; J < Mine.size(); ++J) {
        const BufferInfo &A = Plan->Buffers[Mine[I]];
        const BufferInfo &B = Plan->Buffers[Mine[J]];
        bool Overlap = A.Offset < B.Offset + int64_t(bufferBytes(B)) &&
                       B.Offset < A.Offset + int64_t(bufferBytes(A));
        if (Overlap) {
          EXPECT_FALSE(Lives[Mine[I]].meets(Lives[Mine[J]]))
              << "buffers " << Mine[I] << " and " << Mine[J]
              << " share memory while both are live";
        }
      }
    EXPECT_GE(Arena, Live[Rank]);
    // The planner's peak bounds what the program allocates: a strategy the
    // planner says fits does.
    EXPECT_LE(Allocated[Rank], Plan->Prediction.PeakMemory[Rank]);
    EXPECT_LE(double(Arena), 1.1 * double(Live[Rank]))
        << "fragmentation: live peak " << Live[Rank];
  }
  // A rank holding little but parameters cannot save much; the ranks
  // together must.
  EXPECT_LT(double(AllArenas), 0.95 * double(AllBuffers));
}

using soap_search::Builtin;
INSTANTIATE_TEST_SUITE_P(
    Fixtures, FixturePlans,
    ::testing::Values(Case{"mlp", 8, Builtin::DataParallel, 2},
                      Case{"cnn_bn", 8, Builtin::ModelParallel, 2},
                      Case{"cnn_bn", 8, Builtin::ModelParallel, 4},
                      Case{"resnet18", 4, Builtin::ModelParallel, 4},
                      Case{"cnn_bn", 8, Builtin::DataParallel, 2},
                      Case{"cnn_bn", 8, Builtin::Expert, 4},
                      Case{"resnet18", 4, Builtin::DataParallel, 2},
                      Case{"lstm_lm", 4, Builtin::Expert, 4},
                      Case{"gru", 4, Builtin::DataParallel, 2},
                      Case{"transformer", 4, Builtin::ModelParallel, 2},
                      Case{"seq2seq", 4, Builtin::DataParallel, 2}),
    caseName);

// The unrolled cells of an LSTM split over their hidden units on two ranks
// (FlexFlow's RNN strategies): every cell of a layer on a rank reads the
// same part of the layer's gate weights, which the rank holds whole. That
// part is one buffer per rank, filled from the box once a step by the first
// cell's forward step, and its gradient added back once by the last cell's
// backward; until 2026-11-25 each cell copied it (RNNTC on two CPU ranks:
// 2.7 GB copied a step, 3 GB allocated a rank where the planner predicted
// 277 MB).
TEST(Slices, CellsReadTheirPartOfAWeightFromOneBufferFilledOnceAStep) {
  ir::TrainingGraph T =
      test::training("tests/fixtures/lstm_lm/model.onnx", 4, /*Unroll=*/true);
  simulator::Machine M = test::machine("cpu:2", 2);
  simulator::AnalyticCostModel Cost;
  simulator::Strategy S =
      soap_search::builtin(soap_search::Builtin::DataParallel, T.G, M, Cost);
  unsigned Cells = 0;
  for (const ir::Op &O : T.G.ops())
    if (O.Kind == ir::OpKind::LSTMCell) {
      S[O.Id] = simulator::ParallelConfig::single(2, 0);
      S[O.Id].Degrees = {1, 2};
      ++Cells;
    }
  ASSERT_GT(Cells, 2u);
  codegen::PlanOptions Options;
  Options.Init = codegen::InitKind::Random;
  auto Plan = codegen::buildProgramPlan(T, S, M, Cost, Options);
  ASSERT_TRUE(bool(Plan)) << llvm::toString(Plan.takeError());
  rt::program::Plan View = Plan->view("", "", 0);
  std::vector<double> Allocated = Plan->allocatedBytes();
  // The boxes: parameters, and the results of the weight-only ops (the
  // gate views of the weights), which every rank computes whole.
  std::vector<bool> WeightOnly = simulator::weightOnlyOps(T.G);
  std::set<int32_t> Boxes;
  for (int32_t Id = 0; Id < View.Buffers.Size; ++Id)
    if (View.Buffers[Id].Kind == BufferKind::Parameter)
      Boxes.insert(Id);
  for (const CallInfo &Call : View.Calls)
    if (WeightOnly[Call.Op])
      for (int32_t K = 0; K < Call.NumOutputs; ++K)
        Boxes.insert(View.Operands[Call.FirstOperand + Call.NumInputs + K]);
  for (int32_t Rank = 0; Rank < Plan->NumRanks; ++Rank) {
    SCOPED_TRACE("rank " + std::to_string(Rank));
    // Copies out of a box in the forward steps, and which buffers they
    // fill.
    std::map<int32_t, unsigned> Fills;
    unsigned FromBoxes = 0;
    const Range &Steps = View.RankSteps[Rank];
    for (int32_t I = Steps.First; I < Steps.First + Steps.Count; ++I) {
      const StepInfo &Step = View.Steps[I];
      if (Step.Kind != StepKind::Forward)
        continue;
      for (int32_t C = Step.FirstCopy; C < Step.FirstCopy + Step.NumCopies;
           ++C) {
        const CopyInfo &Copy = View.Copies[C];
        if (Copy.From >= 0 && Copy.To >= 0 && Boxes.count(Copy.From)) {
          ++FromBoxes;
          ++Fills[Copy.To];
        }
      }
    }
    EXPECT_GT(FromBoxes, 0u);
    for (auto [Buffer, Count] : Fills)
      EXPECT_EQ(Count, 1u) << "buffer " << Buffer << " filled " << Count
                           << " times a step";
    // Fewer fills than cells: the cells share them.
    EXPECT_LT(FromBoxes, Cells);
    EXPECT_LE(Allocated[Rank], Plan->Prediction.PeakMemory[Rank]);
  }
}

// --profile-comm measures one pair per kind of route and one group per ring
// shape. On 8 K80s (two nodes; GPUs 0,1 and 2,3 of a node on a PCIe switch
// each): pairs 0->1 (one switch), 0->2 (the host bridge), 0->4 (the
// network); data parallelism's group of all 8 (ring hops of all three
// kinds), node 0's 4 (one switch twice, the bridge twice), and one GPU per
// node by local index: {0, 4} (the network both ways) stands for {1, 5},
// {2, 6} and {3, 7}.
TEST(ProfileComm, OnePairPerRouteKindOneGroupPerRingShape) {
  ir::TrainingGraph T = test::training("tests/fixtures/mlp/model.onnx", 8);
  simulator::Machine M = test::machine("paper-k80", 8);
  simulator::AnalyticCostModel Cost;
  codegen::PlanOptions Options;
  Options.Init = codegen::InitKind::Random;
  auto Plan = codegen::buildProgramPlan(
      T, soap_search::builtin(soap_search::Builtin::DataParallel, T.G, M, Cost),
      M, Cost, Options);
  ASSERT_TRUE(bool(Plan)) << llvm::toString(Plan.takeError());
  EXPECT_EQ(Plan->ProfilePairs, (std::vector<int32_t>{0, 1, 0, 2, 0, 4}));
  std::vector<std::vector<int32_t>> Groups;
  for (const GroupInfo &G : Plan->ProfileGroups)
    Groups.emplace_back(Plan->ProfileGroupRanks.begin() + G.First,
                        Plan->ProfileGroupRanks.begin() + G.First + G.Size);
  EXPECT_EQ(Groups, (std::vector<std::vector<int32_t>>{
                        {0, 1, 2, 3, 4, 5, 6, 7}, {0, 1, 2, 3}, {0, 4}}));
  rt::program::Plan View = Plan->view("", "", 0);
  ASSERT_EQ(View.DeviceNames.Size, 8);
  EXPECT_STREQ(View.DeviceNames[5], "node1/gpu1");
}

} // namespace
