//===- tests/soap_search/EliminationTest.cpp - OptCNN's elimination ------===//
//
// AdditiveCost::minimize against brute force: on graphs small enough to
// enumerate (chains, and windows of branching graphs), its strategy has the
// least additive cost of every combination of the configs offered; on
// larger ones (residual blocks, concatenated branches, unrolled recurrent
// layers), no single op's other config costs less, and the strategy is a
// valid one of the space.
//
//===----------------------------------------------------------------------===//
#include "soap_search/Elimination.h"
#include "PlannerTestUtil.h"
#include "soap_search/Builtins.h"
#include "gtest/gtest.h"
#include <algorithm>
#include <atomic>
#include <cmath>
#include <map>
#include <set>
#include <thread>

using namespace onnx2soap;
using namespace onnx2soap::simulator;
using namespace onnx2soap::soap_search;

namespace {

/// The least additive cost over every combination of offered configs.
double bruteForce(AdditiveCost &Cost, Strategy S) {
  llvm::ArrayRef<ir::OpId> Ops = Cost.ops();
  std::vector<size_t> Pick(Ops.size(), 0);
  double Best = INFINITY;
  while (true) {
    for (size_t I = 0; I < Ops.size(); ++I)
      S[Ops[I]] = Cost.configs(Ops[I])[Pick[I]];
    Best = std::min(Best, Cost.of(S));
    size_t I = Ops.size();
    while (I > 0 && ++Pick[I - 1] == Cost.configs(Ops[I - 1]).size())
      Pick[--I] = 0;
    if (I == 0)
      return Best;
  }
}

double combinations(const AdditiveCost &Cost) {
  double N = 1;
  for (ir::OpId Op : Cost.ops())
    N *= double(Cost.configs(Op).size());
  return N;
}

struct Small {
  const char *Path;
  unsigned Devices;
};

class ExactOnSmallGraphs : public ::testing::TestWithParam<Small> {};

TEST_P(ExactOnSmallGraphs, MinimumOfEveryCombination) {
  const Small &C = GetParam();
  ir::TrainingGraph T = test::training(C.Path, 8);
  ASSERT_GT(T.G.numOps(), 0u);
  Machine M = test::machine("paper-k80", C.Devices);
  AnalyticCostModel Model;
  // Splits over Sample and Parameter dims only, keep the products small.
  ConfigSpaceOptions Options;
  Options.SampleAndParameterOnly = true;
  ConfigSpace Space(T.G, M.numDevices(), Options);
  AdditiveCost Cost(T, M, Model, {}, Space);
  ASSERT_LT(combinations(Cost), 3e5) << "too many to enumerate";
  Strategy Base = dataParallel(T.G, M);
  std::optional<Strategy> S = Cost.minimize(Base, 1e12);
  ASSERT_TRUE(S);
  double Least = bruteForce(Cost, Base);
  EXPECT_NEAR(Cost.of(*S), Least, 1e-12 * Least);
  // A second call gives the same (the costed tables are restored).
  EXPECT_EQ(Cost.minimize(Base, 1e12)->Configs, S->Configs);
}

INSTANTIATE_TEST_SUITE_P(
    Graphs, ExactOnSmallGraphs,
    ::testing::Values(Small{"samples/tiny_mlp.onnx", 2},
                      Small{"samples/tiny_mlp.onnx", 4},
                      Small{"tests/fixtures/mlp/model.onnx", 2}));

// Graphs that do not reduce to a chain of leaves: a window of ops with
// branches joined again (a residual block with its downsampling branch,
// Inception branches concatenated), each op
// of it whole or split over samples, the ops around it whole, so that the
// products can be enumerated.
struct Window {
  const char *Model;
  ir::OpId First, End;
};

class ExactOnBranchingGraphs : public ::testing::TestWithParam<Window> {};

TEST_P(ExactOnBranchingGraphs, MinimumOfEveryCombination) {
  const Window &C = GetParam();
  ir::TrainingGraph T = test::sample(C.Model, 64);
  ASSERT_GT(T.G.numOps(), 0u);
  Machine M = test::machine("paper-k80", 2);
  AnalyticCostModel Model;
  ConfigSpaceOptions Options;
  Options.Accept = [&](ir::OpId Op, const ParallelConfig &Shape) {
    bool SamplesOnly = Shape.Reduction == 1;
    for (unsigned D = 1; D < Shape.Degrees.size(); ++D)
      SamplesOnly &= Shape.Degrees[D] == 1;
    return Op >= C.First && Op < C.End && SamplesOnly;
  };
  ConfigSpace Space(T.G, M.numDevices(), Options);
  AdditiveCost Cost(T, M, Model, {}, Space);
  ASSERT_LE(combinations(Cost), 4096) << "too many to enumerate";
  Strategy Base = dataParallel(T.G, M);
  std::optional<Strategy> S = Cost.minimize(Base, 1e12);
  ASSERT_TRUE(S);
  double Least = bruteForce(Cost, Base);
  EXPECT_NEAR(Cost.of(*S), Least, 1e-12 * Least);
  // Not a trivial answer: some ops of the window split, some not.
  unsigned Split = 0;
  for (ir::OpId Op : Cost.ops())
    Split += (*S)[Op].numPartitions() > 1;
  EXPECT_GT(Split, 0u);
}

INSTANTIATE_TEST_SUITE_P(Graphs, ExactOnBranchingGraphs,
                         ::testing::Values(Window{"resnet101", 5, 16},
                                           Window{"inception_v3", 31, 41},
                                           Window{"resnet101", 37, 48}));

struct Larger {
  const char *Path;
  bool Unroll;
  int64_t Batch = 8; ///< a fixture's own (fixed) batch
};

class LocallyOptimal : public ::testing::TestWithParam<Larger> {};

TEST_P(LocallyOptimal, NoSingleOpGainsAlone) {
  const Larger &C = GetParam();
  ir::TrainingGraph T = test::training(C.Path, C.Batch, C.Unroll);
  ASSERT_GT(T.G.numOps(), 0u);
  Machine M = test::machine("paper-k80", 4);
  AnalyticCostModel Model;
  ConfigSpace Space(T.G, M.numDevices());
  AdditiveCost Cost(T, M, Model, {}, Space);
  std::optional<Strategy> S = Cost.minimize(dataParallel(T.G, M), 1e12);
  ASSERT_TRUE(S);
  EXPECT_FALSE(static_cast<bool>(checkStrategy(T.G, *S, M.numDevices())));
  double Own = Cost.of(*S);
  Strategy Other = *S;
  for (ir::OpId Op : Cost.ops()) {
    EXPECT_TRUE(Space.contains(Op, (*S)[Op])) << T.G.op(Op).Name;
    for (const ParallelConfig &Config : Cost.configs(Op)) {
      Other[Op] = Config;
      EXPECT_GE(Cost.of(Other), Own * (1 - 1e-12))
          << T.G.op(Op).Name << " " << Config.str();
    }
    Other[Op] = (*S)[Op];
  }
}

INSTANTIATE_TEST_SUITE_P(
    Graphs, LocallyOptimal,
    ::testing::Values(Larger{"samples/tiny_cnn.onnx", false},
                      Larger{"tests/fixtures/resnet18/model.onnx", false, 4},
                      Larger{"tests/fixtures/inception_mini/model.onnx", false},
                      Larger{"tests/fixtures/seq2seq/model.onnx", true, 4}));

// An unrolled layer's cells read one weight: under either charge they come
// out in one config (on RNNTC with 4 K80s the sum alone had put 24 steps of
// each layer in one config and 16 in another).
TEST(Elimination, OpsReadingOneWeightTakeOneConfig) {
  ir::TrainingGraph T = test::sample("rnntc", 64, /*Unroll=*/true);
  ASSERT_GT(T.G.numOps(), 0u);
  Machine M = test::machine("paper-k80", 4);
  AnalyticCostModel Model;
  ConfigSpace Space(T.G, M.numDevices());
  AdditiveCost Cost(T, M, Model, {}, Space);
  EXPECT_TRUE(Cost.sharesWeights());
  std::vector<bool> Synced = syncedTensors(T, weightOnlyOps(T.G));
  for (SharedWeights Charge : {SharedWeights::Once, SharedWeights::PerReader}) {
    Cost.setSharedWeights(Charge);
    std::optional<Strategy> S = Cost.minimize(dataParallel(T.G, M), 1e12);
    ASSERT_TRUE(S);
    std::map<ir::TensorId, std::set<std::string>> ConfigsOfReaders;
    std::map<ir::TensorId, unsigned> Readers;
    for (ir::OpId Op : Cost.ops()) {
      const ir::Op &O = T.G.op(Op);
      for (unsigned Slot = 0; Slot < O.Inputs.size(); ++Slot)
        if (O.Inputs[Slot] != ir::NoTensor && Synced[O.Inputs[Slot]] &&
            (T.BackwardInputs[Op] >> Slot & 1)) {
          ConfigsOfReaders[O.Inputs[Slot]].insert((*S)[Op].str());
          ++Readers[O.Inputs[Slot]];
        }
    }
    unsigned Shared = 0;
    for (auto &[Tensor, Configs] : ConfigsOfReaders)
      if (Readers[Tensor] > 1) {
        EXPECT_EQ(Configs.size(), 1u) << T.G.tensor(Tensor).Name;
        ++Shared;
      }
    EXPECT_GE(Shared, 4u); // the four layers' weights at least
  }
}

// A fully-connected layer split over its output features can keep that
// layout through the activation and dropout after it: those ops (their
// output a matrix) are offered Attribute splits, which conv outputs are
// not. On AlexNet with 8 K80s the sum's minimum is then lower than over
// the configs without them, and the simulator agrees (61.6 ms against
// 64.9).
TEST(Elimination, MatrixOpsKeepAFeatureSplitLayout) {
  ir::TrainingGraph T = test::sample("alexnet", 256);
  ASSERT_GT(T.G.numOps(), 0u);
  Machine M = test::machine("paper-k80", 8);
  AnalyticCostModel Model;
  SimOptions Sim;
  Sim.setProgramModel(false);
  ConfigSpace Space(T.G, M.numDevices());
  ConfigSpaceOptions NoAttribute;
  NoAttribute.Accept = [&](ir::OpId Op, const ParallelConfig &Shape) {
    return !splitsAttribute(ir::parallelDims(T.G, T.G.op(Op)), Shape);
  };
  ConfigSpace Narrow(T.G, M.numDevices(), NoAttribute);
  AdditiveCost Cost(T, M, Model, Sim, Space);
  AdditiveCost Peer(T, M, Model, Sim, Narrow);

  auto OffersAttributeSplit = [&](ir::OpId Op) {
    return llvm::any_of(Cost.configs(Op), [&](const ParallelConfig &C) {
      return splitsAttribute(ir::parallelDims(T.G, T.G.op(Op)), C);
    });
  };
  unsigned MatrixOps = 0;
  for (ir::OpId Op : Cost.ops()) {
    const ir::Op &O = T.G.op(Op);
    size_t Rank = T.G.tensor(O.Outputs[0]).Type.Dims.size();
    if (Rank == 4) {
      EXPECT_FALSE(OffersAttributeSplit(Op)) << O.Name;
    }
    // A training Dropout has two outputs (its mask too), both matrices.
    if (Rank == 2 &&
        (O.Kind == ir::OpKind::Relu || O.Kind == ir::OpKind::Dropout)) {
      EXPECT_TRUE(OffersAttributeSplit(Op)) << O.Name;
      ++MatrixOps;
    }
  }
  EXPECT_EQ(MatrixOps, 4u);

  Strategy Base = dataParallel(T.G, M);
  std::optional<Strategy> S = Cost.minimize(Base, 1e12);
  std::optional<Strategy> P = Peer.minimize(Base, 1e12);
  ASSERT_TRUE(S && P);
  EXPECT_LT(Cost.of(*S), Cost.of(*P) * 0.99);
  Simulator Run(T, M, Model, Sim);
  EXPECT_LT(Run.simulate(*S), Run.simulate(*P) * 0.98);
}

// The sum charges every gradient all-reduce in full, where the simulator
// overlaps them with the rest of the backward pass: OptCNN's strategy is
// the fastest of the sum's minima under several weights of that charge,
// never slower than under the full charge, and here faster.
struct Overlap {
  const char *Path;
  const char *Cluster;
  unsigned Devices;
};

class SyncWeights : public ::testing::TestWithParam<Overlap> {};

TEST_P(SyncWeights, FastestOfTheMinimaUnderEachWeight) {
  const Overlap &C = GetParam();
  ir::TrainingGraph T = test::training(C.Path, 64);
  ASSERT_GT(T.G.numOps(), 0u);
  Machine M = test::machine(C.Cluster, C.Devices);
  AnalyticCostModel Model;
  SimOptions Options;
  Options.setProgramModel(false);
  ConfigSpace Space(T.G, M.numDevices());
  AdditiveCost Cost(T, M, Model, Options, Space);
  Strategy Base = dataParallel(T.G, M);
  Simulator Sim(T, M, Model, Options);
  std::vector<double> Times;
  for (double Weight : soap_search::SyncWeights) {
    Cost.setSyncWeight(Weight);
    std::optional<Strategy> S = Cost.minimize(Base, 1e12);
    ASSERT_TRUE(S);
    Times.push_back(Sim.simulate(*S));
  }
  Cost.setSyncWeight(1);
  std::optional<Strategy> Chosen = optcnnStrategy(Cost, Sim, Base, 1e12);
  ASSERT_TRUE(Chosen);
  double Time = Sim.time();
  EXPECT_EQ(Time, Simulator(T, M, Model, Options).simulate(*Chosen));
  EXPECT_EQ(Time, *std::min_element(Times.begin(), Times.end()));
  EXPECT_LT(Time, 0.98 * Times.front()) << "no gain over the full charge";
}

INSTANTIATE_TEST_SUITE_P(
    Graphs, SyncWeights,
    ::testing::Values(Overlap{"samples/resnet101.onnx", "paper-k80", 8},
                      Overlap{"samples/inception_v3.onnx", "paper-p100", 8}));

/// Each change of S's ops that Cost ranks adds what the sum from scratch
/// says it does.
void expectChangesAddWhatTheSumSays(
    AdditiveCost &Cost, const ir::TrainingGraph &T, const Strategy &S,
    llvm::ArrayRef<AdditiveCost::Change> Changes) {
  double Sum = Cost.of(S);
  for (const AdditiveCost::Change &C : Changes) {
    Strategy Changed = S;
    Changed[C.Op] = C.Config;
    EXPECT_NEAR(C.Added, Cost.of(Changed) - Sum, 1e-9 * Sum)
        << T.G.op(C.Op).Name << " " << C.Config.str();
  }
}

// Each change of one op is ranked by what it adds to the sum, exactly; at
// the sum's minimum of a chain of ops (AlexNet) none saves anything.
TEST(Elimination, ChangesBySumAreRankedByWhatTheyAdd) {
  ir::TrainingGraph T = test::sample("alexnet", 256);
  ASSERT_GT(T.G.numOps(), 0u);
  Machine M = test::machine("paper-k80", 8);
  AnalyticCostModel Model;
  SimOptions Sim;
  Sim.setProgramModel(false);
  ConfigSpace Space(T.G, M.numDevices());
  AdditiveCost Cost(T, M, Model, Sim, Space);
  Strategy Base = dataParallel(T.G, M);
  EXPECT_TRUE(Cost.changesBySum(Base).empty()) << "edges not costed yet";
  std::optional<Strategy> S = Cost.minimize(Base, 1e12);
  ASSERT_TRUE(S);
  std::vector<AdditiveCost::Change> Changes = Cost.changesBySum(*S);
  size_t Offered = 0;
  for (ir::OpId Op : Cost.ops())
    Offered += Cost.configs(Op).size() - 1;
  EXPECT_EQ(Changes.size(), Offered) << "AlexNet shares no weights";
  double Sum = Cost.of(*S);
  for (size_t I = 0; I < Changes.size(); ++I) {
    const AdditiveCost::Change &C = Changes[I];
    EXPECT_NE(C.Config, (*S)[C.Op]);
    EXPECT_TRUE(llvm::is_contained(Cost.configs(C.Op), C.Config));
    if (I > 0) {
      EXPECT_LE(Changes[I - 1].Added, C.Added);
    }
    EXPECT_GE(C.Added, -1e-9 * Sum) << "not the minimum";
  }
  expectChangesAddWhatTheSumSays(Cost, T, *S, Changes);
  // Ties in op and config order (the ops' order in Cost.ops()).
  auto Place = [&](const AdditiveCost::Change &C) {
    return std::make_pair(llvm::find(Cost.ops(), C.Op) - Cost.ops().begin(),
                          llvm::find(Cost.configs(C.Op), C.Config) -
                              Cost.configs(C.Op).begin());
  };
  size_t Ties = 0;
  for (size_t I = 1; I < Changes.size(); ++I)
    if (Changes[I - 1].Added == Changes[I].Added) {
      ++Ties;
      EXPECT_LT(Place(Changes[I - 1]), Place(Changes[I])) << I;
    }
  EXPECT_GT(Ties, 0u) << "nothing to check the order of ties on";
  // The first few alone: the same, in the same order.
  for (size_t Most : {size_t(0), size_t(1), size_t(7), Changes.size() / 2,
                      Changes.size(), Changes.size() + 1}) {
    std::vector<AdditiveCost::Change> First = Cost.changesBySum(*S, Most);
    ASSERT_EQ(First.size(), std::min(Most, Changes.size()));
    for (size_t I = 0; I < First.size(); ++I) {
      EXPECT_EQ(First[I].Op, Changes[I].Op) << Most << " " << I;
      EXPECT_EQ(First[I].Config, Changes[I].Config) << Most << " " << I;
      EXPECT_EQ(First[I].Added, Changes[I].Added) << Most << " " << I;
    }
  }
}

// Edges alike (the same configs at both ends, the same regions written and
// read: a residual stage's repeated blocks) are costed once and share a
// table; each change of one op still adds what the sum from scratch says.
TEST(Elimination, AlikeEdgesShareATable) {
  ir::TrainingGraph T =
      test::training("tests/fixtures/resnet18/model.onnx", 4, false);
  ASSERT_GT(T.G.numOps(), 0u);
  Machine M = test::machine("paper-k80", 4);
  AnalyticCostModel Model;
  ConfigSpace Space(T.G, M.numDevices());
  AdditiveCost Cost(T, M, Model, {}, Space);
  EXPECT_EQ(Cost.edgesCosted(), (std::pair<size_t, size_t>{0, 0}));
  std::optional<Strategy> S = Cost.minimize(dataParallel(T.G, M), 1e12);
  ASSERT_TRUE(S);
  auto [Costed, Edges] = Cost.edgesCosted();
  EXPECT_GT(Costed, 0u);
  EXPECT_LT(Costed, Edges * 3 / 4) << Costed << " of " << Edges;
  expectChangesAddWhatTheSumSays(Cost, T, *S, Cost.changesBySum(*S));
}

// Ops alike (the same kind, attributes, types read and written, configs
// offered and weights synchronized: a residual stage's repeated blocks,
// Inception's modules) are costed once; each change of one op still adds
// what the sum from scratch says (each config of every op with more than
// one offered whose neighbours' configs are offered too), so its costs are
// its own.
TEST(Elimination, AlikeNodesShareTheirCosts) {
  for (bool Inception : {false, true}) {
    ir::TrainingGraph T =
        Inception
            ? test::sample("inception_v3", 64)
            : test::training("tests/fixtures/resnet18/model.onnx", 4, false);
    ASSERT_GT(T.G.numOps(), 0u);
    Machine M = test::machine("paper-k80", 4);
    AnalyticCostModel Model;
    ConfigSpace Space(T.G, M.numDevices());
    AdditiveCost Cost(T, M, Model, {}, Space);
    EXPECT_EQ(Cost.nodesCosted(), (std::pair<size_t, size_t>{0, 0}));
    std::optional<Strategy> S = Cost.minimize(dataParallel(T.G, M), 1e12);
    ASSERT_TRUE(S);
    auto [Costed, Nodes] = Cost.nodesCosted();
    EXPECT_EQ(Nodes, Cost.ops().size());
    EXPECT_GT(Costed, 0u);
    EXPECT_LT(Costed, Nodes * 3 / 4) << Costed << " of " << Nodes;
    std::vector<AdditiveCost::Change> Changes = Cost.changesBySum(*S);
    std::set<ir::OpId> Changed;
    for (const AdditiveCost::Change &C : Changes)
      Changed.insert(C.Op);
    // More ops than were costed: some of them took another's costs.
    EXPECT_GT(Changed.size(), Costed) << Costed << " of " << Nodes;
    expectChangesAddWhatTheSumSays(Cost, T, *S, Changes);
  }
}

// Another thread helping to cost the edges (the search's first chain
// thread) changes nothing: Inception-v3 on 8 K80s, whose concatenations
// read several branches, with a helper asking for work throughout.
TEST(Elimination, HelpersCostTheSameEdges) {
  ir::TrainingGraph T = test::sample("inception_v3", 64);
  Machine M = test::machine("paper-k80", 8);
  AnalyticCostModel Model;
  ConfigSpace Space(T.G, M.numDevices());
  Strategy Base = dataParallel(T.G, M);
  AdditiveCost Alone(T, M, Model, {}, Space);
  std::optional<Strategy> Expected = Alone.minimize(Base, 1e12);
  ASSERT_TRUE(Expected);
  AdditiveCost Helped(T, M, Model, {}, Space);
  std::atomic<bool> Done{false};
  std::thread Helper([&] {
    while (!Done.load())
      Helped.helpCostEdges();
  });
  std::optional<Strategy> Got = Helped.minimize(Base, 1e12);
  Done = true;
  Helper.join();
  ASSERT_TRUE(Got);
  EXPECT_EQ(Got->Configs, Expected->Configs);
  std::vector<AdditiveCost::Change> Want = Alone.changesBySum(*Expected),
                                    Have = Helped.changesBySum(*Got);
  ASSERT_EQ(Have.size(), Want.size());
  for (size_t I = 0; I < Want.size(); ++I) {
    EXPECT_EQ(Have[I].Op, Want[I].Op);
    EXPECT_EQ(Have[I].Config, Want[I].Config);
    EXPECT_EQ(Have[I].Added, Want[I].Added) << "bit for bit";
  }
  // Once the edges are costed there is nothing to help with.
  Helped.helpCostEdges();
  EXPECT_EQ(Helped.of(*Got), Alone.of(*Expected));
}

TEST(Elimination, DeclinesMoreWorkThanAllowed) {
  ir::TrainingGraph T = test::sample("alexnet", 64);
  Machine M = test::machine("paper-k80", 16);
  AnalyticCostModel Model;
  ConfigSpace Space(T.G, M.numDevices());
  AdditiveCost Cost(T, M, Model, {}, Space);
  EXPECT_FALSE(Cost.minimize(dataParallel(T.G, M), 1000));
  EXPECT_TRUE(Cost.minimize(dataParallel(T.G, M), 1e7));
}

// The limit counts the work of the edges costed: edges alike (ResNet-18's
// repeated blocks) once.
TEST(Elimination, TheLimitCountsEdgesAlikeOnce) {
  ir::TrainingGraph T =
      test::training("tests/fixtures/resnet18/model.onnx", 4, false);
  ASSERT_GT(T.G.numOps(), 0u);
  Machine M = test::machine("paper-k80", 8);
  AnalyticCostModel Model;
  ConfigSpace Space(T.G, M.numDevices());
  AdditiveCost Cost(T, M, Model, {}, Space);
  AdditiveCost::EdgeWorkSize Work = Cost.work();
  EXPECT_LT(Work.Costed, Work.All * 3 / 4);
  EXPECT_FALSE(Cost.minimize(dataParallel(T.G, M), Work.Costed * 0.999));
  EXPECT_TRUE(Cost.minimize(dataParallel(T.G, M), Work.Costed));
}

} // namespace
