//===- tests/soap_search/RefineTest.cpp - OptCNN's minima, refined --------===//
//
// The refinements of OptCNN's minima (soap_search/MinimaRefiner.h): each
// minimum sized with its own gradient buckets and walked by the simulator,
// every walk's end relinked towards data parallelism under each bucket size
// and walked on, the walk ahead after its probe going on first, all of it
// the same whatever the threads.
//
//===----------------------------------------------------------------------===//
#include "PlannerTestUtil.h"
#include "soap_search/Builtins.h"
#include "soap_search/Elimination.h"
#include "soap_search/Mcmc.h"
#include "gtest/gtest.h"

using namespace onnx2soap;
using namespace onnx2soap::simulator;
using namespace onnx2soap::soap_search;
using onnx2soap::test::fixedWork;

namespace {

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

// A search of T on M under FlexFlow's model of communication: 2 chains of
// Iterations steps, the default gradient bucket sizes, on Threads threads
// with Helpers threads beside the chains.
static SearchResult searchOnThreads(const ir::TrainingGraph &T,
                                    const Machine &M, uint64_t Iterations,
                                    unsigned Threads, unsigned Helpers) {
  AnalyticCostModel Cost;
  SimOptions Sim;
  Sim.setProgramModel(false);
  SearchOptions O = fixedWork(1);
  O.Iterations = Iterations;
  O.Chains = 2;
  O.Threads = Threads;
  O.RefineHelpers = Helpers;
  O.GradientBuckets = defaultGradientBuckets();
  return search(T, M, Cost, Sim, O);
}

// Searches of ResNet-101 on 8 K80s, whose minima lie close together (the
// first chain thread walks none of its own), with chains long enough for
// it to help between two of their steps: on one thread, then, up to 5
// times (how often help comes depends on the threads' timing), on two
// threads with Helpers threads beside the chains. Each search's
// refinements, answer and steps must be the first's; false when no walk
// was helped.
static bool helpedWalksGoAsOneAlone(unsigned Helpers) {
  ir::TrainingGraph T = test::sample("resnet101", 64);
  Machine M = test::machine("paper-k80", 8);
  auto Run = [&](unsigned Threads) {
    return searchOnThreads(T, M, 200, Threads, Threads == 1 ? 0 : Helpers);
  };
  const SearchResult Alone = Run(1);
  EXPECT_FALSE(Alone.Refinements.empty());
  uint64_t Helped = 0;
  for (int Attempt = 0; Attempt < 5 && Helped == 0; ++Attempt) {
    const SearchResult Two = Run(2);
    EXPECT_EQ(Two.Refinements.size(), Alone.Refinements.size());
    if (Two.Refinements.size() != Alone.Refinements.size())
      return true;
    for (size_t K = 0; K < Alone.Refinements.size(); ++K) {
      const Refinement &A = Alone.Refinements[K], &B = Two.Refinements[K];
      EXPECT_EQ(A.Source, B.Source);
      EXPECT_EQ(A.Start, B.Start) << A.Source;
      EXPECT_EQ(A.Tries, B.Tries) << A.Source;
      EXPECT_EQ(A.Time, B.Time) << A.Source;
      EXPECT_EQ(A.HelpedTries, 0u) << A.Source;
      EXPECT_LE(B.HelpedTries, B.Tries) << B.Source;
      Helped += B.HelpedTries;
    }
    EXPECT_TRUE(Alone.Best.S == Two.Best.S);
    EXPECT_EQ(Alone.Best.Time, Two.Best.Time);
    EXPECT_EQ(Alone.Iterations, Two.Iterations);
  }
  return Helped > 0;
}

// A walk the first chain thread helps (trying the changes after the
// walking thread's, in the ranking's order, on a simulator of its own)
// goes as it goes on one thread: the first gain in that order wins,
// whichever thread found it.
TEST(Search, AHelpedWalkGoesAsOneAlone) {
  if (!helpedWalksGoAsOneAlone(0))
    GTEST_SKIP() << "the first chain thread helped no walk in 5 searches";
}

// So does a walk that threads beside the chains help as well (from the
// start: they cost OptCNN's edges too), each on a simulator of its own:
// the gain's simulator, whoever's, becomes the walk's.
TEST(Search, AWalkHelpedByThreadsBesideTheChainsGoesAsOneAlone) {
  if (!helpedWalksGoAsOneAlone(2))
    GTEST_SKIP() << "no thread helped a walk in 5 searches";
}

// In unrolled RNNs the first chain thread walks no far minimum (the
// chains find those rows' answers): the thread that found the minima
// starts the far ones last, once every near minimum's walk has ended (on
// RNNLM with 16 K80s the first simulates 135.3 ms, the far ones 216-252).
// The walks and the answer are those of one thread.
TEST(Search, FarMinimaOfUnrolledRnnsAreWalkedLast) {
  ir::TrainingGraph T = test::sample("rnnlm", 64, /*Unroll=*/true);
  Machine M = test::machine("paper-k80", 16);
  const SearchResult Alone = searchOnThreads(T, M, 20, 1, 0),
                     Two = searchOnThreads(T, M, 20, 2, 0);
  ASSERT_EQ(Two.Refinements.size(), Alone.Refinements.size());
  for (size_t K = 0; K < Alone.Refinements.size(); ++K) {
    EXPECT_EQ(Alone.Refinements[K].Source, Two.Refinements[K].Source);
    EXPECT_EQ(Alone.Refinements[K].Tries, Two.Refinements[K].Tries);
    EXPECT_EQ(Alone.Refinements[K].Time, Two.Refinements[K].Time);
  }
  EXPECT_TRUE(Alone.Best.S == Two.Best.S);
  // The minima's walks (the relinkings aside), far when their start is
  // 1.5 times the first's (FarFromTheFirst, by the time before the walk's
  // bucket size is chosen; these lie clear of it: 1.0-1.1 and 1.6-1.9).
  std::vector<const Refinement *> Near, Far;
  for (const Refinement &R : Two.Refinements) {
    if (llvm::StringRef(R.Source).contains(", relinked "))
      continue;
    double Ratio = R.Start / Two.Refinements[0].Start;
    ASSERT_TRUE(Ratio < 1.4 || Ratio > 1.55) << R.Source << " " << Ratio;
    (Ratio < 1.4 ? Near : Far).push_back(&R);
  }
  ASSERT_GE(Near.size(), 2u);
  ASSERT_GE(Far.size(), 2u);
  for (const Refinement *F : Far)
    for (const Refinement *N : Near)
      EXPECT_GE(F->StartedAt, N->EndedAt) << F->Source << " " << N->Source;
}

} // namespace
