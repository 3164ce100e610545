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

namespace {

SearchOptions fixedWork(uint64_t Seed) {
  SearchOptions O;
  O.Iterations = 150;
  O.Seed = Seed;
  O.Chains = 4;
  return O;
}

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

// OptCNN's strategy for AlexNet on 8 K80s splits the fully-connected
// layers, whose weights are then no longer all-reduced: it runs faster
// with 1 MiB buckets than with the 16 MiB data parallelism wants. The
// search's candidate is simulated with data parallelism's size, then with
// the size it runs fastest with.
TEST(Search, OptcnnCandidateGetsTheGradientBucketItRunsFastestWith) {
  ir::TrainingGraph T = test::sample("alexnet", 256);
  Machine M = test::machine("paper-k80", 8);
  AnalyticCostModel Cost;
  SearchOptions O = fixedWork(1);
  O.Iterations = 1;
  O.Chains = 1;
  O.Threads = 1;
  O.GradientBuckets = defaultGradientBuckets();
  SearchResult R = search(T, M, Cost, {}, O);
  // Found first with data parallelism's size, then with its own.
  auto First = llvm::find_if(
      R.Progression, [](const Improvement &I) { return I.Source == "optcnn"; });
  auto Found = llvm::find_if(R.Progression, [](const Improvement &I) {
    return I.Source == "optcnn (gradient buckets resized)";
  });
  ASSERT_NE(First, R.Progression.end());
  ASSERT_NE(Found, R.Progression.end());
  EXPECT_LE(First->Seconds, Found->Seconds);

  ConfigSpace Space(T.G, M.numDevices());
  AdditiveCost Additive(T, M, Cost, {}, Space);
  Simulator Sim(T, M, Cost);
  std::optional<Strategy> S =
      optcnnStrategy(Additive, Sim, dataParallel(T.G, M), EliminationWork);
  ASSERT_TRUE(S);
  double Bytes = bestGradientBucket(T, M, Cost, {}, *S, O.GradientBuckets);
  EXPECT_NE(Bytes, R.DataParallel.GradientBucketBytes);
  SimOptions With;
  With.GradientBucketBytes = Bytes;
  EXPECT_EQ(Found->Time, Simulator(T, M, Cost, With).simulate(*S));
  With.GradientBucketBytes = R.DataParallel.GradientBucketBytes;
  EXPECT_EQ(First->Time, Simulator(T, M, Cost, With).simulate(*S));
  EXPECT_LT(Found->Time, First->Time);
}

/// AlexNet searched on the first Gpus K80s under FlexFlow's model of
/// communication with one thread and one chain step, so that OptCNN's
/// strategy and its refinements come first, in order.
struct AlexNetOnK80s {
  ir::TrainingGraph T = test::sample("alexnet", 256);
  Machine M;
  AnalyticCostModel Cost;
  SimOptions Sim;
  SearchResult R;

  explicit AlexNetOnK80s(unsigned Gpus,
                         unsigned RefineProbe = SearchOptions().RefineProbe,
                         unsigned Threads = 1)
      : M(test::machine("paper-k80", Gpus)) {
    Sim.setProgramModel(false);
    SearchOptions O = fixedWork(1);
    O.Iterations = 1;
    O.Chains = Threads; // a thread for each
    O.Threads = Threads;
    O.GradientBuckets = defaultGradientBuckets();
    O.RefineProbe = RefineProbe;
    R = search(T, M, Cost, Sim, O);
  }
  /// C's strategy simulated afresh with its gradient bucket size.
  double simulate(const Candidate &C) const {
    SimOptions With = Sim;
    With.GradientBucketBytes = C.GradientBucketBytes;
    return Simulator(T, M, Cost, With).simulate(C.S);
  }
};

// OptCNN's strategy is refined by the changes of one op the sum ranks
// least costly: AlexNet on 16 K80s (FlexFlow's model of communication),
// 39.8 ms by the sum alone, 33.6 refined, where data parallelism takes
// 76.5. One chain step: the answer is the refined strategy (relinked).
TEST(Search, RefinesOptcnnStrategyByTheSimulator) {
  AlexNetOnK80s A(16);
  SearchResult &R = A.R;
  auto Sized = llvm::find_if(R.Progression, [](const Improvement &I) {
    return I.Source == "optcnn (gradient buckets resized)";
  });
  ASSERT_NE(Sized, R.Progression.end());
  EXPECT_TRUE(llvm::StringRef(R.Best.Source).startswith("optcnn, refined"))
      << R.Best.Source;
  EXPECT_LT(R.Best.Time, 0.9 * Sized->Time);
  // The answer is what it says: its strategy simulated with its buckets.
  EXPECT_EQ(R.Best.Time, A.simulate(R.Best));
  // Improvements after the sum's, each faster than the one before.
  auto Refined = std::next(Sized);
  ASSERT_NE(Refined, R.Progression.end());
  EXPECT_EQ(Refined->Source, "optcnn, refined");
  for (auto I = Refined; I != R.Progression.end(); ++I) {
    EXPECT_TRUE(llvm::StringRef(I->Source).startswith("optcnn, refined"))
        << I->Source;
    EXPECT_LT(I->Time, std::prev(I)->Time);
  }
}

// Each refinement's end is relinked towards data parallelism under each
// gradient bucket size as soon as its walk ends, and each path's fastest
// strategy, when faster than the walk's end, walked on as soon as its path
// ends: on 64 K80s (FlexFlow's model of communication)
// AlexNet's best refinement takes 15.30 ms with 16 MiB buckets and 17.71
// with 4 MiB; with its last three convolutions data parallel and 4 MiB
// buckets, 14.15, where no one-op step of a walk under either size leads.
// The first minimum's end, relinked and walked on, goes further: 14.07.
TEST(Search, RelinksEachRefinementUnderEachBucketSize) {
  AlexNetOnK80s A(64);
  SearchResult &R = A.R;
  // Every size but 64 MiB, which cuts AlexNet's gradients as 16 does.
  const size_t Sizes = defaultGradientBuckets().size() - 1;
  // Each walk, then its relinkings, its own size's first.
  std::vector<const Refinement *> Minima;
  std::vector<std::vector<const Refinement *>> Relinked;
  for (const Refinement &W : R.Refinements) {
    if (!llvm::StringRef(W.Source).contains(", relinked ")) {
      Minima.push_back(&W);
      Relinked.emplace_back();
      continue;
    }
    ASSERT_FALSE(Minima.empty()) << W.Source;
    EXPECT_TRUE(llvm::StringRef(W.Source).startswith(
        Minima.back()->Source + ", refined, relinked with "))
        << W.Source;
    Relinked.back().push_back(&W);
  }
  ASSERT_EQ(Minima.size(), 4u);
  const Refinement *Best = Minima.front();
  for (size_t K = 0; K < Minima.size(); ++K) {
    if (Minima[K]->Time < Best->Time)
      Best = Minima[K];
    ASSERT_EQ(Relinked[K].size(), Sizes) << Minima[K]->Source;
    // Its own size's path starts where the walk ended.
    EXPECT_EQ(Relinked[K][0]->Start, Minima[K]->Time) << Minima[K]->Source;
    EXPECT_GT(Relinked[K][0]->EndedAt, Minima[K]->EndedAt);
    for (const Refinement *W : Relinked[K]) {
      // The fastest on the path is never slower than where it started.
      EXPECT_LE(W->Probed, W->Start) << W->Source;
      EXPECT_LE(W->Time, W->Probed) << W->Source;
      // Each path that gains on the walk's end is walked on (a path alone
      // takes 2 simulations an op, fewer than 64 here; a walk ends after
      // RefinePatience tries without a gain), each other one is not.
      if (W->Probed < Minima[K]->Time)
        EXPECT_GT(W->Tries, RefinePatience) << W->Source;
      else
        EXPECT_EQ(W->Time, W->Probed) << W->Source;
    }
  }
  // The best refinement (16 MiB buckets) relinked with 4 MiB (the fourth
  // path after its own size's: 0, 1, 4) is 14.15 ms.
  const Refinement *FromBest =
      Relinked[std::find(Minima.begin(), Minima.end(), Best) - Minima.begin()]
              [3];
  EXPECT_EQ(FromBest->Source,
            Best->Source + ", refined, relinked with 4 MiB buckets");
  EXPECT_LT(FromBest->Time, 0.95 * Best->Time);
  EXPECT_EQ(R.Best.GradientBucketBytes, 4 * 1024.0 * 1024.0);
  EXPECT_LE(R.Best.Time, FromBest->Time);
  EXPECT_TRUE(llvm::StringRef(R.Best.Source).contains(", relinked with "))
      << R.Best.Source;
  EXPECT_EQ(R.Best.Time, A.simulate(R.Best));
}

// The search chooses among bucket sizes that cut the gradients differently:
// AlexNet's large weights are buckets of their own under 16 MiB and 64
// alike, so 64 MiB, which simulates every strategy as 16 does, is left
// out; ResNet-101's many smaller tensors are cut differently by each size.
TEST(Search, ChoosesAmongBucketSizesThatCutTheGradientsDifferently) {
  constexpr double MiB = 1024.0 * 1024.0;
  AnalyticCostModel Cost;
  SimOptions Sim;
  Sim.setProgramModel(false);
  ir::TrainingGraph AlexNet = test::sample("alexnet", 256);
  Machine M = test::machine("paper-k80", 8);
  EXPECT_EQ(
      distinctGradientBuckets(AlexNet, M, Cost, Sim, defaultGradientBuckets()),
      (std::vector<double>{0, 1 * MiB, 4 * MiB, 16 * MiB}));
  // Left out since every strategy simulates alike under both.
  Strategy Data = dataParallel(AlexNet.G, M);
  Rng R = chainRng(3, 0);
  ConfigSpace Space(AlexNet.G, M.numDevices());
  Strategy Random;
  for (const ir::Op &O : AlexNet.G.ops())
    Random.Configs.push_back(Space.random(O.Id, R));
  for (const Strategy *S : {&Data, &Random}) {
    SimOptions Sixteen = Sim, SixtyFour = Sim;
    Sixteen.GradientBucketBytes = 16 * MiB;
    SixtyFour.GradientBucketBytes = 64 * MiB;
    EXPECT_EQ(Simulator(AlexNet, M, Cost, Sixteen).simulate(*S),
              Simulator(AlexNet, M, Cost, SixtyFour).simulate(*S));
  }
  ir::TrainingGraph ResNet = test::sample("resnet101", 64);
  EXPECT_EQ(
      distinctGradientBuckets(ResNet, M, Cost, Sim, defaultGradientBuckets()),
      defaultGradientBuckets());
  // One size or none: nothing to leave out.
  EXPECT_EQ(distinctGradientBuckets(AlexNet, M, Cost, Sim, {4 * MiB}),
            (std::vector<double>{4 * MiB}));
  EXPECT_TRUE(distinctGradientBuckets(AlexNet, M, Cost, Sim, {}).empty());
}

// Each of the sum's minima is refined: AlexNet on 32 K80s (FlexFlow's model
// of communication), the fastest minimum simulates 26.4 ms and refines to
// 23.1; the one with the gradient all-reduces free simulates 77.4 ms (every
// convolution over all 32 devices) and refines to 20.3. One thread, one
// chain step: the refinements come first, then the chain.
TEST(Search, RefinesEveryMinimumOfTheSum) {
  AlexNetOnK80s A(32);
  SearchResult &R = A.R;
  auto LastOf = [&](llvm::StringRef Source) {
    auto Found = R.Progression.end();
    for (auto I = R.Progression.begin(); I != R.Progression.end(); ++I)
      if (I->Source == Source)
        Found = I;
    return Found;
  };
  auto Fastest = LastOf("optcnn, refined");
  ASSERT_NE(Fastest, R.Progression.end());
  EXPECT_TRUE(llvm::StringRef(R.Best.Source).startswith("optcnn (minimum "))
      << R.Best.Source;
  EXPECT_TRUE(llvm::StringRef(R.Best.Source).contains(", refined"))
      << R.Best.Source;
  EXPECT_LT(R.Best.Time, 0.95 * Fastest->Time);
  EXPECT_EQ(R.Best.Time, A.simulate(R.Best));
  EXPECT_EQ(R.Progression.back().Source, R.Best.Source);
}

// Each walk but the first goes a few tries (its probe) before the others
// go on: on AlexNet with 32 K80s, one thread, the first minimum's walk is
// at 24.9 ms after 32 tries; then the fourth's, probed next (walks after the
// first start from the last), leads at 21.7 ms, goes on at once and ends at
// the answer, found before the first walk ends. The second and third pause
// behind it, then the paused walks go on in the order of their times.
// Walked in turn, the first walk ends before any other starts. A paused walk
// goes on as if it had not paused: the same tries, the same ends, the same
// answer, whatever the probe or the threads.
TEST(Search, TheRefinementAheadAfterItsProbeGoesOnFirst) {
  AlexNetOnK80s Probed(32), InTurn(32, RefineTries), Threads(32, 32, 2);
  // The minima's walks, each followed by its relinkings (compared too,
  // below).
  const std::vector<Refinement> All = Probed.R.Refinements;
  std::vector<Refinement> W;
  for (const Refinement &R : All)
    if (!llvm::StringRef(R.Source).contains(", relinked "))
      W.push_back(R);
  ASSERT_EQ(W.size(), 4u);
  ASSERT_GT(All.size(), 4u);
  for (const AlexNetOnK80s *Other : {&InTurn, &Threads}) {
    ASSERT_EQ(Other->R.Refinements.size(), All.size());
    for (size_t K = 0; K < All.size(); ++K) {
      const Refinement &O = Other->R.Refinements[K];
      EXPECT_EQ(All[K].Source, O.Source);
      EXPECT_EQ(All[K].Tries, O.Tries) << All[K].Source;
      EXPECT_EQ(All[K].Time, O.Time) << All[K].Source;
    }
    EXPECT_EQ(Probed.R.Best.Source, Other->R.Best.Source);
    EXPECT_EQ(Probed.R.Best.Time, Other->R.Best.Time);
    EXPECT_TRUE(Probed.R.Best.S == Other->R.Best.S);
  }
  for (const Refinement &R : W) {
    EXPECT_LE(R.Time, R.Probed);
    EXPECT_LE(R.Probed, R.Start);
  }
  // Probed first, the first walk paused; the fourth went on at once; the
  // others went on in the order of their times after their probes.
  std::vector<const Refinement *> ByProbe, ByEnd;
  for (const Refinement &R : W)
    ByProbe.push_back(&R), ByEnd.push_back(&R);
  llvm::stable_sort(ByProbe, [](const Refinement *A, const Refinement *B) {
    return A->Probed < B->Probed;
  });
  llvm::stable_sort(ByEnd, [](const Refinement *A, const Refinement *B) {
    return A->EndedAt < B->EndedAt;
  });
  EXPECT_EQ(ByProbe, ByEnd);
  EXPECT_EQ(ByEnd.front(), &W[3]);
  EXPECT_GT(W[0].Tries, 32u);
  // The best walk's end (the answer, or the strategy relinked into it) is
  // found before the first walk ends.
  EXPECT_TRUE(llvm::StringRef(Probed.R.Best.Source)
                  .startswith("optcnn (minimum 4 of 4), refined"))
      << Probed.R.Best.Source;
  auto FourthsEnd =
      llvm::find_if(Probed.R.Progression, [&](const Improvement &I) {
        return I.Source == "optcnn (minimum 4 of 4), refined" &&
               I.Time == W[3].Time;
      });
  ASSERT_NE(FourthsEnd, Probed.R.Progression.end());
  EXPECT_LT(FourthsEnd->Seconds, W[0].EndedAt);
  for (const Refinement &R : InTurn.R.Refinements) {
    if (&R != &InTurn.R.Refinements[0]) {
      EXPECT_LT(InTurn.R.Refinements[0].EndedAt, R.EndedAt);
    }
  }
  EXPECT_GT(InTurn.R.Best.FoundAt, InTurn.R.Refinements[0].EndedAt);
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
