//===- tests/soap_search/SearchTest.cpp - MCMC search properties ----------===//
//
// What the search promises whatever it finds: never worse than a built-in
// strategy or OptCNN's, the same answer for the same seed however many threads
// run the chains, a strategy that fits when one within the memory limit exists
// (TensorOpt), and a frontier whose points all fit and none beats another.
//
//===----------------------------------------------------------------------===//
#include "PlannerTestUtil.h"
#include "simulator/MemoryModel.h"
#include "soap_search/Builtins.h"
#include "soap_search/Elimination.h"
#include "soap_search/Mcmc.h"
#include "gtest/gtest.h"
#include <set>

using namespace onnx2soap;
using namespace onnx2soap::simulator;
using namespace onnx2soap::soap_search;
using onnx2soap::test::fixedWork;

namespace {

class EverySample : public ::testing::TestWithParam<const char *> {};

TEST_P(EverySample, NeverWorseThanABuiltinStrategy) {
  ir::TrainingGraph T = test::sample(GetParam(), 16);
  Machine M = test::machine("paper-p100", 8);
  AnalyticCostModel Cost;
  SearchResult R = search(T, M, Cost, {}, fixedWork(1));
  ASSERT_TRUE(R.Best.Fits);
  for (const Candidate *B : {&R.DataParallel, &R.Expert, &R.ModelParallel}) {
    if (B->Fits) {
      EXPECT_LE(R.Best.Time, B->Time);
    }
  }
  // The reported time is the strategy's, simulated from scratch.
  Simulator Sim(T, M, Cost);
  EXPECT_EQ(Sim.simulate(R.Best.S), R.Best.Time);
  // Nor worse than OptCNN's strategy (a candidate on so few devices).
  ConfigSpace Space(T.G, M.numDevices());
  AdditiveCost Additive(T, M, Cost, {}, Space);
  ASSERT_TRUE(
      optcnnStrategy(Additive, Sim, dataParallel(T.G, M), EliminationWork));
  EXPECT_LE(R.Best.Time, Sim.time());
  EXPECT_FALSE(static_cast<bool>(checkStrategy(T.G, R.Best.S, 8)));
  // The progression starts at the first strategy simulated (data
  // parallelism, or OptCNN's strategy when its thread simulated it sooner)
  // and improves step by step, in time order, to the answer, found when the
  // answer says it was.
  ASSERT_FALSE(R.Progression.empty());
  const Improvement &First = R.Progression.front();
  if (First.Source == "data-parallel") {
    EXPECT_EQ(First.Time, R.DataParallel.Time);
    EXPECT_EQ(First.Seconds, R.DataParallel.FoundAt);
  } else {
    EXPECT_EQ(First.Source, "optcnn");
    EXPECT_LE(First.Seconds, R.DataParallel.FoundAt);
  }
  EXPECT_EQ(R.Progression.back().Source, R.Best.Source);
  EXPECT_NE(R.Best.Source, "");
  for (size_t I = 1; I < R.Progression.size(); ++I) {
    EXPECT_LT(R.Progression[I].Time, R.Progression[I - 1].Time);
    EXPECT_GE(R.Progression[I].Seconds, R.Progression[I - 1].Seconds);
  }
  EXPECT_EQ(R.Progression.back().Time, R.Best.Time);
  EXPECT_EQ(R.Progression.back().Seconds, R.BestFoundSeconds);
}

INSTANTIATE_TEST_SUITE_P(Samples, EverySample,
                         ::testing::Values("tiny_cnn", "alexnet",
                                           "bert_encoder"));

// Inception-v3 on 64 K80s: data parallelism's collectives among all 64
// devices (gradients, and BatchNorm statistics over the global batch per
// layer) cost more than the compute they split, and data parallelism on 32
// devices is faster. No op-by-op step reaches that, so the search must
// start from it.
TEST(Search, NeverWorseThanDataParallelismOnFewerDevices) {
  ir::TrainingGraph T = test::sample("inception_v3", 64);
  Machine M = test::machine("paper-k80", 64);
  AnalyticCostModel Cost;
  SearchOptions O = fixedWork(1);
  O.Iterations = 2;
  SearchResult R = search(T, M, Cost, {}, O);
  Simulator Sim(T, M, Cost);
  double Fewest = R.DataParallel.Time;
  for (unsigned Devices : {32u, 16u, 8u})
    Fewest = std::min(Fewest, Sim.simulate(dataParallelOn(T.G, Devices)));
  EXPECT_LT(Fewest, 0.9 * R.DataParallel.Time);
  EXPECT_LE(R.Best.Time, Fewest);
}

// Inception-v3 on 16 P100s: data parallelism's 300 gradient all-reduces
// each pay the ring's latency; in buckets of a few MiB they pay it a few
// times, and overlap backward still. Given bucket sizes to choose from, the
// search takes the one data parallelism runs fastest with and simulates
// every candidate with it.
TEST(Search, ChoosesTheGradientBucketDataParallelismRunsFastestWith) {
  ir::TrainingGraph T = test::sample("inception_v3", 64);
  Machine M = test::machine("paper-p100", 16);
  AnalyticCostModel Cost;
  SearchOptions O = fixedWork(1);
  O.Iterations = 2;
  O.GradientBuckets = defaultGradientBuckets();
  SearchResult R = search(T, M, Cost, {}, O);
  SimOptions Chosen;
  Chosen.GradientBucketBytes = R.DataParallel.GradientBucketBytes;
  Strategy DataParallel = dataParallel(T.G, M);
  double Time = Simulator(T, M, Cost, Chosen).simulate(DataParallel);
  EXPECT_EQ(R.DataParallel.Time, Time);
  SimOptions Best;
  Best.GradientBucketBytes = R.Best.GradientBucketBytes;
  EXPECT_EQ(Simulator(T, M, Cost, Best).simulate(R.Best.S), R.Best.Time);
  for (double Bytes : O.GradientBuckets) {
    SimOptions Other;
    Other.GradientBucketBytes = Bytes;
    EXPECT_LE(Time, Simulator(T, M, Cost, Other).simulate(DataParallel))
        << Bytes << " bytes per bucket";
  }
  // Buckets win here: by 5 % or more over one all-reduce per tensor.
  EXPECT_GT(R.DataParallel.GradientBucketBytes, 0);
  EXPECT_LT(Time, 0.95 * Simulator(T, M, Cost).simulate(DataParallel));
}

// AlexNet on 16 K80s: data parallelism runs fastest with 16 MiB buckets,
// the answer, its fully-connected layers split over a few devices, with
// smaller ones. The answer is simulated with the size it runs fastest
// with, chosen after the chains, and reported as found then.
TEST(Search, TheAnswerGetsTheGradientBucketItRunsFastestWith) {
  ir::TrainingGraph T = test::sample("alexnet", 256);
  Machine M = test::machine("paper-k80", 16);
  AnalyticCostModel Cost;
  SearchOptions O = fixedWork(1);
  O.Iterations = 2000;
  O.GradientBuckets = defaultGradientBuckets();
  SearchResult R = search(T, M, Cost, {}, O);
  ASSERT_TRUE(R.Best.Fits);
  auto TimeWith = [&](double Bytes) {
    SimOptions Options;
    Options.GradientBucketBytes = Bytes;
    return Simulator(T, M, Cost, Options).simulate(R.Best.S);
  };
  EXPECT_EQ(TimeWith(R.Best.GradientBucketBytes), R.Best.Time);
  for (double Bytes : O.GradientBuckets)
    EXPECT_LE(R.Best.Time, TimeWith(Bytes)) << Bytes << " bytes per bucket";
  EXPECT_NE(R.Best.GradientBucketBytes, R.DataParallel.GradientBucketBytes);
  ASSERT_FALSE(R.Progression.empty());
  EXPECT_EQ(R.Progression.back().Time, R.Best.Time);
  EXPECT_EQ(R.Progression.back().Seconds, R.BestFoundSeconds);
}

// A bucket is packed into each device's message buffer: with a memory limit
// the strategy meets only with smaller buckets, the fastest of those wins.
TEST(Search, TheGradientBucketMustLeaveTheStrategyWithinTheMemoryLimit) {
  ir::TrainingGraph T = test::sample("inception_v3", 64);
  Machine M = test::machine("paper-p100", 16);
  AnalyticCostModel Cost;
  Strategy DataParallel = dataParallel(T.G, M);
  auto PeakWith = [&](double Bytes) {
    SimOptions O;
    O.GradientBucketBytes = Bytes;
    Simulator Sim(T, M, Cost, O);
    Sim.simulate(DataParallel);
    return Sim.peakMemory();
  };
  // 64 MiB buckets are faster than one all-reduce per tensor, and their
  // buffer is larger than the largest gradient tensor (8 MB).
  const double Large = 64 * 1024.0 * 1024.0;
  std::vector<double> Sizes = {0, Large};
  ASSERT_EQ(bestGradientBucket(T, M, Cost, {}, DataParallel, Sizes), Large);
  double Limit = PeakWith(Large) - 1;
  ASSERT_LE(PeakWith(0), Limit);
  EXPECT_EQ(bestGradientBucket(T, M, Cost, {}, DataParallel, Sizes, Limit), 0);
  // Nothing fits: the fastest.
  EXPECT_EQ(bestGradientBucket(T, M, Cost, {}, DataParallel, Sizes, 1e6),
            Large);
}

// The strategy as simulated with the size chosen (the search's data-parallel
// built-in) is what a simulation of it with that size from scratch gives,
// whichever size the simulator held before (each thread's sizes after its
// first are delta simulated).
TEST(Search, TheBucketSizeChosenComesWithTheStrategySimulatedUnderIt) {
  ir::TrainingGraph T = test::sample("resnet101", 64);
  Machine M = test::machine("paper-k80", 8);
  AnalyticCostModel Cost;
  Strategy DataParallel = dataParallel(T.G, M);
  std::vector<double> Sizes = defaultGradientBuckets();
  ASSERT_GE(Sizes.size(), 3u);
  for (unsigned Threads : {1u, 2u}) {
    SCOPED_TRACE(Threads);
    Candidate Fastest;
    double Bytes = bestGradientBucket(T, M, Cost, {}, DataParallel, Sizes,
                                      /*MemoryLimit=*/0, Threads,
                                      /*Used=*/nullptr, &Fastest);
    SimOptions O;
    O.GradientBucketBytes = Bytes;
    Simulator Sim(T, M, Cost, O);
    Sim.simulate(DataParallel);
    EXPECT_EQ(Fastest.S, DataParallel);
    EXPECT_EQ(Fastest.GradientBucketBytes, Bytes);
    EXPECT_EQ(Fastest.Time, Sim.time());
    EXPECT_EQ(Fastest.PeakMemory, Sim.peakMemory());
    EXPECT_TRUE(Fastest.Fits);
  }
}

// The search on 8 devices first searches on the first 4 with half the
// steps (and that one on 2): its answer is a strategy for 8 devices too,
// and the answer on 8 is never worse than it.
TEST(Search, NeverWorseThanTheAnswerOnHalfTheDevices) {
  ir::TrainingGraph T = test::sample("rnnlm", 64, /*Unroll=*/true);
  Machine M = test::machine("paper-k80", 8),
          Half = test::machine("paper-k80", 4);
  AnalyticCostModel Cost;
  SearchOptions O = fixedWork(3);
  O.Iterations = 40;
  SearchOptions H = O;
  H.Iterations = 20;
  SearchResult All = search(T, M, Cost, {}, O);
  SearchResult OnHalf = search(T, Half, Cost, {}, H);
  Simulator Sim(T, M, Cost);
  double HalfOnAll = Sim.simulate(OnHalf.Best.S);
  EXPECT_LE(All.Best.Time, HalfOnAll);
  EXPECT_EQ(HalfOnAll, OnHalf.Best.Time);
  // Its steps are counted: 4 chains of 40 steps here, of 20 on 4 devices
  // and of 10 on 2 (chain 0 also counts its heavy-unit placements).
  EXPECT_GE(All.Iterations, 4u * (40 + 20 + 10));
}

// NMT on 8 P100s: each embedding holds 131 MB of weights and does no
// arithmetic. Replicated, its gradient all-reduce costs more than sending
// its output to the other devices; FlexFlow keeps each on one GPU. The
// data-parallel chain tries the heaviest units whole on one device, and
// split over all devices, before its first random step: each embedding
// ends up with one copy of its weights, whole or split over its features
// (which also spreads the lookup and the memory; 56.7 ms where whole on one
// device was 61.4, in FlexFlow's model of communication). In the program's
// model, where the lookups' outputs are packed, sent to ranks that wait in
// the receive and unpacked, the answer after this one step is 1.48 x data
// parallelism (1.59 x before the copies and waits were charged).
TEST(Search, DataParallelChainKeepsOneCopyOfTheEmbeddings) {
  ir::TrainingGraph T = test::sample("nmt", 64, /*Unroll=*/true);
  Machine M = test::machine("paper-p100", 8);
  AnalyticCostModel Cost;
  SearchOptions O = fixedWork(1);
  O.Iterations = 1;
  O.Chains = 1;
  SearchResult R = search(T, M, Cost, {}, O);
  int Checked = 0;
  for (const ir::Op &Op : T.G.ops())
    if (Op.Name == "/src_embed/Gather" || Op.Name == "/tgt_embed/Gather") {
      // Output [batch, time, features]: no part of the batch or of the
      // sequence, so no two parts read the same weights.
      const ParallelConfig &C = R.Best.S[Op.Id];
      ASSERT_EQ(C.Degrees.size(), 3u) << Op.Name;
      EXPECT_EQ(C.Degrees[0] * C.Degrees[1], 1u) << Op.Name;
      ++Checked;
    }
  EXPECT_EQ(Checked, 2);
  EXPECT_LT(R.Best.Time, 0.7 * R.DataParallel.Time);
}

// AlexNet (batch 256) and the data-parallel chain's start on 16 K80s: one
// chain, one step (its answer, R.ChainBest: the search's is OptCNN's
// strategy, refined).
/// The start of the search on AlexNet with 16 K80s, under FlexFlow's model
/// of communication (a device uses all its links at once), for which these
/// heuristics were written.
struct AlexNetStart {
  ir::TrainingGraph T = test::sample("alexnet", 256);
  SearchResult R;
  AlexNetStart() {
    SearchOptions O = fixedWork(1);
    O.Iterations = 1;
    O.Chains = 1;
    SimOptions FlexFlow;
    FlexFlow.setProgramModel(false);
    R = search(T, test::machine("paper-k80", 16), AnalyticCostModel(), FlexFlow,
               O);
  }
};

// AlexNet's fully-connected layers hold nine tenths of its weights: the
// data-parallel chain tries each split of each over the first 2, 4, 8, ...
// devices, among them splits of their channels and contraction dim that
// replicate none of their weights, before any random step (FlexFlow's
// strategy: convolutions data parallel, fully-connected layers split over
// their channels). Whole on one device, as before, they gained 1.09 x on 16
// K80s.
TEST(Search, DataParallelChainSplitsTheHeavyLayers) {
  AlexNetStart Start;
  const ir::TrainingGraph &T = Start.T;
  const SearchResult &R = Start.R;
  // Gemms whose weights are split: over their output features (dim 1) or
  // their contraction dim.
  unsigned WeightsSplit = 0;
  for (const ir::Op &Op : T.G.ops())
    if (Op.Kind == ir::OpKind::Gemm) {
      const ParallelConfig &C = R.ChainBest.S[Op.Id];
      WeightsSplit += C.Degrees[1] > 1 || C.Reduction > 1;
    }
  EXPECT_GE(WeightsSplit, 2u);
  EXPECT_LT(R.ChainBest.Time, R.DataParallel.Time / 1.3);
}

// After the split, the ops between AlexNet's fully-connected layers (ReLU,
// dropout) take a neighbouring layer's config: left data parallel on all
// devices, each moves the layer's activations out to all 16 devices and
// back. On 16 K80s the start (one step per chain) was 47.3 ms before this
// (1.62 x data parallelism), 39.5 ms with it (1.94 x).
TEST(Search, DataParallelChainMovesTheOpsAroundASplitLayerWithIt) {
  AlexNetStart Start;
  const ir::Graph &G = Start.T.G;
  const SearchResult &R = Start.R;
  auto ConfigOf = [&](llvm::StringRef Name) {
    for (const ir::Op &Op : G.ops())
      if (Op.Name == Name)
        return R.ChainBest.S[Op.Id];
    ADD_FAILURE() << "no op " << Name.str();
    return ParallelConfig();
  };
  for (llvm::StringRef Between :
       {"/classifier/classifier.2/Relu", "/classifier/classifier.3/Dropout",
        "/classifier/classifier.5/Relu"}) {
    ParallelConfig C = ConfigOf(Between);
    EXPECT_TRUE(C == ConfigOf("/classifier/classifier.1/Gemm") ||
                C == ConfigOf("/classifier/classifier.4/Gemm") ||
                C == ConfigOf("/classifier/classifier.6/Gemm"))
        << Between.str() << " has no fully-connected layer's config";
  }
  EXPECT_LT(R.ChainBest.Time, R.DataParallel.Time / 1.8);
}

// RNNLM's unrolled cells split over their hidden units on 4 devices: each
// part reads only its units' rows of every gate (the cells read the layer's
// weights gate-major, so those rows are one box), a quarter of the weights.
// Nothing of them is replicated, so nothing is all-reduced. (With the ONNX
// layout a part read the bounding box of its rows, 13/16 of the weights,
// all-reduced among all.)
TEST(Planner, CellsSplitOverHiddenUnitsShareNoWeights) {
  ir::TrainingGraph T = test::sample("rnnlm", 16, /*Unroll=*/true);
  Machine M = test::machine("paper-p100", 4);
  AnalyticCostModel Cost;
  Strategy S = dataParallelOn(T.G, 1);
  int64_t LstmWeights = 0, Cells = 0;
  for (const ir::Op &O : T.G.ops()) {
    if (O.Kind != ir::OpKind::LSTMCell)
      continue;
    ++Cells;
    S[O.Id].Degrees = {1, 4};
    for (unsigned In = 3; In < 6; ++In) {
      ir::Region Part = ir::opKindInfo(O.Kind).InputRegion(
          T.G, O, In, {ir::Interval{0, 16}, ir::Interval{512, 1024}}, {});
      EXPECT_EQ(4 * ir::regionVolume(Part), T.G.inputType(O, In)->numElements())
          << O.Name << " input " << In;
    }
  }
  ASSERT_EQ(Cells, 80);
  for (const ir::Tensor &W : T.G.tensors())
    if (W.Role == ir::TensorRole::Parameter &&
        llvm::StringRef(W.Name).contains("lstm"))
      LstmWeights += W.Type.numElements();
  EXPECT_EQ(LstmWeights, 2 * (2 * 4 * 2048 * 2048 + 8 * 2048));
  Simulator Sim(T, M, Cost);
  Sim.simulate(S);
  for (TaskId Id = 0; Id < Sim.graph().size(); ++Id) {
    const Task &K = Sim.graph().task(Id);
    EXPECT_FALSE(K.Alive && K.Kind == TaskKind::GradAllReduce &&
                 K.Tensor != ir::NoTensor &&
                 llvm::StringRef(T.G.tensor(K.Tensor).Name).contains("lstm"))
        << T.G.tensor(K.Tensor).Name << " is all-reduced";
  }
  // What devices 1-3 hold of the LSTM weights is what a generated program
  // holds: the exporter's weights whole, with gradients and momentum (the
  // default optimizer), and the gates reshaped from them whole, with
  // gradients (every rank reading a weight-only op's result computes it
  // whole), five copies; and the quarter their cells read as a buffer of its
  // own, with its gradient. (The split still saves the all-reduces.)
  MemoryBreakdown Memory = memoryBreakdown(Sim.graph());
  for (DeviceId D = 1; D < 4; ++D)
    EXPECT_DOUBLE_EQ(Memory.Parameters[D], 4.0 * LstmWeights * (5 + 0.5)) << D;
}

// RNNLM (two LSTM layers, unrolled) on 8 K80s, two nodes of 4: each layer
// data parallel within its own node, a pipeline of layers, needs no
// gradient all-reduce across the nodes and is 1.7 x faster than data
// parallelism; the data-parallel chain tries it before its first step. The
// expert strategy keeps each layer's cells on one GPU of every node.
TEST(Search, DataParallelChainTriesTheLayersOnGroupsOfDevices) {
  ir::TrainingGraph T = test::sample("rnnlm", 64, /*Unroll=*/true);
  Machine M = test::machine("paper-k80", 8);
  std::optional<Strategy> Groups = layerGroups(T.G, M);
  ASSERT_TRUE(Groups.has_value());
  Strategy Expert = expert(T.G, M);
  std::set<std::pair<int, DeviceId>> ExpertFirst;
  for (const ir::Op &O : T.G.ops()) {
    if (O.Kind != ir::OpKind::LSTMCell)
      continue;
    bool Upper = llvm::StringRef(O.Name).startswith("/lstm/LSTM_1/");
    EXPECT_EQ((*Groups)[O.Id].FirstDevice, Upper ? 4u : 0u) << O.Name;
    EXPECT_EQ((*Groups)[O.Id].numPartitions(), 4u) << O.Name;
    ExpertFirst.insert({Upper, Expert[O.Id].FirstDevice});
  }
  EXPECT_EQ(ExpertFirst, (std::set<std::pair<int, DeviceId>>{{0, 0}, {1, 1}}));
  AnalyticCostModel Cost;
  SearchOptions O = fixedWork(1);
  O.Iterations = 1;
  O.Chains = 1;
  SearchResult R = search(T, M, Cost, {}, O);
  EXPECT_LT(R.Best.Time, R.DataParallel.Time / 1.5);
}

// The starts a filtered search takes: the built-ins as they are, only the
// configs whose shape the filter refuses made whole on their first device.
// The expert strategy's cells on the second GPU of each node lie outside
// the enumerated placements; projecting onto those (what a filter did
// until 2026-11-24) put them whole on device 0.
TEST(Search, AFilterKeepsTheStartsItAccepts) {
  ir::TrainingGraph T = test::sample("rnnlm", 64, /*Unroll=*/true);
  Machine M = test::machine("paper-k80", 8);
  ConfigSpaceOptions All;
  All.Accept = [](ir::OpId, const ParallelConfig &) { return true; };
  ConfigSpace Space(T.G, M.numDevices(), All);
  Strategy Expert = expert(T.G, M);
  EXPECT_TRUE(Space.admit(Expert) == Expert);
  EXPECT_FALSE(Space.project(Expert) == Expert);
  std::optional<Strategy> Groups = layerGroups(T.G, M);
  ASSERT_TRUE(Groups.has_value());
  EXPECT_TRUE(Space.admit(*Groups) == *Groups);
  // A filter refusing every split: each split op whole where it began.
  ConfigSpaceOptions None;
  None.Accept = [](ir::OpId, const ParallelConfig &) { return false; };
  ConfigSpace Whole(T.G, M.numDevices(), None);
  Strategy Admitted = Whole.admit(*Groups);
  for (const ir::Op &O : T.G.ops()) {
    const ParallelConfig &Was = (*Groups)[O.Id], &Now = Admitted[O.Id];
    EXPECT_EQ(Now.numPartitions(), 1u) << O.Name;
    EXPECT_EQ(Now.FirstDevice, Was.FirstDevice) << O.Name;
  }
}

TEST(Search, SameSeedSameStrategyWhateverTheThreads) {
  ir::TrainingGraph T = test::sample("alexnet", 64);
  Machine M = test::machine("paper-k80", 8);
  AnalyticCostModel Cost;
  SearchOptions One = fixedWork(5), Two = fixedWork(5);
  One.Threads = 1;
  Two.Threads = 2;
  SearchResult A = search(T, M, Cost, {}, One);
  SearchResult B = search(T, M, Cost, {}, Two);
  EXPECT_TRUE(A.Best.S == B.Best.S);
  EXPECT_EQ(A.Best.Time, B.Best.Time);
  EXPECT_EQ(A.Iterations, B.Iterations);
  SearchResult C = search(T, M, Cost, {}, fixedWork(6));
  EXPECT_EQ(C.Iterations, A.Iterations);
}

// With a budget, chains of a later wave start only while the chains' part of
// the budget lasts (each chain's first simulations take their time whatever
// its share: 1,024 chains on 2 threads ran for minutes); the first wave
// always runs. With --iterations every chain runs.
TEST(Search, LaterWavesOfChainsStartWithinTheBudget) {
  ir::TrainingGraph T = test::sample("tiny_mlp", 8);
  Machine M = test::machine("paper-p100", 4);
  AnalyticCostModel Cost;
  SearchOptions Spent;
  Spent.Chains = 64;
  Spent.Threads = 1;
  Spent.BudgetSeconds = 1e-9;
  EXPECT_EQ(search(T, M, Cost, {}, Spent).ChainsRun, 1u);
  SearchOptions Counted = fixedWork(1);
  Counted.Chains = 64;
  Counted.Threads = 1;
  Counted.Iterations = 2;
  EXPECT_EQ(search(T, M, Cost, {}, Counted).ChainsRun, 64u);
}

// Delta simulation and full simulation of every step make the same search:
// the same answer, found by the same steps (the planner benchmark's Table 5
// compares their speed on that premise).
TEST(Search, DeltaAndFullSimulationSearchAlike) {
  ir::TrainingGraph T = test::sample("alexnet", 64);
  Machine M = test::machine("paper-k80", 8);
  AnalyticCostModel Cost;
  SearchOptions Delta = fixedWork(3);
  Delta.Iterations = 60;
  Delta.Chains = 2;
  Delta.Threads = 1;
  SearchOptions Full = Delta;
  Full.FullSimulation = true;
  SearchResult A = search(T, M, Cost, {}, Delta);
  SearchResult B = search(T, M, Cost, {}, Full);
  EXPECT_TRUE(A.Best.S == B.Best.S);
  EXPECT_EQ(A.Best.Time, B.Best.Time);
  EXPECT_EQ(A.Best.Source, B.Best.Source);
  EXPECT_EQ(A.Iterations, B.Iterations);
  ASSERT_EQ(A.Progression.size(), B.Progression.size());
  for (size_t I = 0; I < A.Progression.size(); ++I)
    EXPECT_EQ(A.Progression[I].Time, B.Progression[I].Time) << I;
}

TEST(Search, FindsAStrategyThatFitsWhenDataParallelismDoesNot) {
  // AlexNet's fully-connected layers hold most of its 61 M parameters:
  // replicated on every device with gradients and momentum they need
  // about 0.7 GB each; splitting them fits in much less.
  ir::TrainingGraph T = test::sample("alexnet", 64);
  Machine M = test::machine("paper-p100", 4);
  AnalyticCostModel Cost;
  Simulator Sim(T, M, Cost);
  Sim.simulate(dataParallel(T.G, M));
  double DataParallelPeak = Sim.peakMemory();
  SearchOptions O = fixedWork(2);
  O.Iterations = 400;
  O.MemoryLimit = 0.6 * DataParallelPeak;
  SearchResult R = search(T, M, Cost, {}, O);
  EXPECT_FALSE(R.DataParallel.Fits);
  ASSERT_TRUE(R.Best.Fits) << "smallest peak found " << R.Best.PeakMemory
                           << " bytes, limit " << O.MemoryLimit;
  EXPECT_LE(R.Best.PeakMemory, O.MemoryLimit);
}

TEST(Search, FrontierPointsFitAndNoneDominatesAnother) {
  ir::TrainingGraph T = test::sample("alexnet", 64);
  Machine M = test::machine("paper-p100", 4);
  AnalyticCostModel Cost;
  SearchOptions O = fixedWork(3);
  O.Goal = Objective::Frontier;
  SearchResult R = search(T, M, Cost, {}, O);
  ASSERT_FALSE(R.Frontier.empty());
  for (size_t I = 0; I < R.Frontier.size(); ++I) {
    EXPECT_TRUE(R.Frontier[I].Fits);
    if (I == 0)
      continue;
    // By increasing memory, strictly decreasing time.
    EXPECT_GT(R.Frontier[I].PeakMemory, R.Frontier[I - 1].PeakMemory);
    EXPECT_LT(R.Frontier[I].Time, R.Frontier[I - 1].Time);
  }
}

TEST(Search, MemoryObjectiveNeedsNoMoreThanDataParallelism) {
  ir::TrainingGraph T = test::sample("alexnet", 64);
  Machine M = test::machine("paper-p100", 4);
  AnalyticCostModel Cost;
  SearchOptions O = fixedWork(4);
  O.Goal = Objective::Memory;
  SearchResult R = search(T, M, Cost, {}, O);
  EXPECT_LT(R.Best.PeakMemory, R.DataParallel.PeakMemory);
}

} // namespace
