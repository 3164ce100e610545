//===- tests/soap_search/OptimalityTest.cpp - MCMC finds the optimum ------===//
//
// FlexFlow's §8.3 check: on a small CNN and a 2-step RNNLM on 4 devices,
// the best strategy of an exhaustive (A*-pruned) search over a config space
// has the same simulated time as the best strategy MCMC finds in that space
// with a fixed number of iterations and seed, and no built-in strategy in
// the space beats it. The spaces are restricted (ConfigSpaceOptions; see
// docs/architecture.md, "Optimality check"): the unrestricted products have
// about 10^17 (tiny_cnn) and 10^29 (RNNLM) strategies.
//
//===----------------------------------------------------------------------===//
#include "PlannerTestUtil.h"
#include "soap_search/Builtins.h"
#include "soap_search/Exhaustive.h"
#include "soap_search/Mcmc.h"
#include "gtest/gtest.h"
#include <cmath>
#include <cstdio>

using namespace onnx2soap;
using namespace onnx2soap::simulator;
using namespace onnx2soap::soap_search;

namespace {

/// Ops split over Sample or Parameter dims into 4 parts on devices 0-3, or
/// whole on one of the first WholeOpDevices devices; data movement ops
/// data parallel.
ConfigSpaceOptions smallSpace(unsigned WholeOpDevices) {
  ConfigSpaceOptions Options;
  Options.SampleAndParameterOnly = true;
  Options.AllOrNothing = true;
  Options.ContiguousOnly = true;
  Options.FixDataMovement = true;
  Options.WholeOpDevices = WholeOpDevices;
  return Options;
}

struct Case {
  const char *Name;
  const char *Path;
  bool Unroll;
  const char *Preset;
  ConfigSpaceOptions Space;
  uint64_t Iterations;
};

class Optimality : public ::testing::TestWithParam<Case> {};

TEST_P(Optimality, McmcFindsTheExhaustiveOptimum) {
  const Case &C = GetParam();
  ir::TrainingGraph T = test::training(C.Path, 8, C.Unroll);
  ASSERT_GT(T.G.numOps(), 0u);
  Machine M = test::machine(C.Preset, 4);
  AnalyticCostModel Cost;
  ConfigSpace Space(T.G, M.numDevices(), C.Space);

  ExhaustiveResult E = exhaustiveSearch(T, M, Cost, {}, Space);
  std::printf("%s on %s x4: %u ops, %.4g strategies; %llu simulated, %llu "
              "delta simulations, %llu subtrees cut, %.2f s; best %.6g s\n",
              C.Name, C.Preset, E.Ops, E.SpaceSize,
              (unsigned long long)E.Leaves, (unsigned long long)E.Simulations,
              (unsigned long long)E.Pruned, E.Seconds, E.Time);
  ASSERT_TRUE(E.Complete);
  EXPECT_EQ(E.BoundViolations, 0u);
  ASSERT_TRUE(std::isfinite(E.Time));
  // The answer's time is what full simulation says of it.
  Simulator Full(T, M, Cost);
  EXPECT_EQ(Full.simulate(E.Best), E.Time);

  SearchOptions Options;
  Options.Iterations = C.Iterations;
  Options.Seed = 1;
  Options.Chains = 4;
  Options.Threads = 2;
  Options.Space = C.Space;
  SearchResult R = search(T, M, Cost, {}, Options);
  std::printf("%s: MCMC %llu iterations, %.2f s; best %.6g s; data-parallel "
              "%.6g, expert %.6g, model-parallel %.6g\n",
              C.Name, (unsigned long long)R.Iterations, R.Seconds, R.Best.Time,
              R.DataParallel.Time, R.Expert.Time, R.ModelParallel.Time);
  // Both times come from simulating one strategy in one way (delta
  // simulation equals full simulation bit for bit), so the same optimum
  // has the very same time. A built-in outside the space may beat it; the
  // answer is then that built-in, and only the space's own best is checked.
  const Candidate *Builtins[] = {&R.DataParallel, &R.Expert, &R.ModelParallel};
  const char *Names[] = {"data-parallel", "expert", "model-parallel"};
  bool BuiltinWins = false;
  for (unsigned I = 0; I < 3; ++I) {
    bool Inside = Space.project(Builtins[I]->S) == Builtins[I]->S;
    std::printf("  %s: %.6g s, %s the space\n", Names[I], Builtins[I]->Time,
                Inside ? "in" : "outside");
    if (Inside) {
      EXPECT_LE(E.Time, Builtins[I]->Time) << Names[I];
    }
    BuiltinWins |= Builtins[I]->Time < E.Time;
  }
  if (BuiltinWins)
    EXPECT_LE(R.Best.Time, E.Time);
  else
    EXPECT_EQ(R.Best.Time, E.Time);
  // Inside the space, the chains' own best is the optimum.
  std::printf("  chains' best: %.6g s\n", R.ChainBest.Time);
  EXPECT_EQ(R.ChainBest.Time, E.Time);
}

INSTANTIATE_TEST_SUITE_P(
    Models, Optimality,
    ::testing::Values(Case{"tiny_cnn", "samples/tiny_cnn.onnx", false,
                           "paper-p100", smallSpace(2), 20000},
                      Case{"rnnlm_2step",
                           "tests/fixtures/planner/rnnlm_2step.onnx", true,
                           "paper-p100", smallSpace(0), 20000}),
    [](const auto &Info) { return std::string(Info.param.Name); });

/// The bound only cuts subtrees that cannot hold a better strategy: pruned
/// and plain enumeration find the same time, and every strategy's time is
/// at least its bound, under both models of communication. Under
/// FlexFlow's the bound cuts subtrees; under the program's, whose copies
/// and waits depend on neighbouring ops' configs and are left out of the
/// bound, it cuts none on this model.
TEST(Exhaustive, PruningKeepsTheOptimum) {
  ir::TrainingGraph T = test::training("samples/tiny_cnn.onnx", 8, false);
  ASSERT_GT(T.G.numOps(), 0u);
  Machine M = test::machine("paper-p100", 4);
  AnalyticCostModel Cost;
  ConfigSpace Space(T.G, M.numDevices(), smallSpace(2));
  for (bool Program : {false, true}) {
    SimOptions Sim;
    Sim.setProgramModel(Program);
    ExhaustiveLimits Plain;
    Plain.Prune = false;
    ExhaustiveResult All = exhaustiveSearch(T, M, Cost, Sim, Space, Plain);
    ExhaustiveResult Pruned = exhaustiveSearch(T, M, Cost, Sim, Space);
    std::printf("tiny_cnn on paper-p100 x4, %s model: %.4g strategies; all "
                "%llu in %.2f s, pruned %llu in %.2f s\n",
                Program ? "program" : "flexflow", All.SpaceSize,
                (unsigned long long)All.Leaves, All.Seconds,
                (unsigned long long)Pruned.Leaves, Pruned.Seconds);
    EXPECT_EQ(double(All.Leaves), All.SpaceSize);
    EXPECT_EQ(All.BoundViolations, 0u);
    EXPECT_EQ(Pruned.Time, All.Time);
    if (!Program) {
      EXPECT_LT(Pruned.Leaves, All.Leaves);
    }
  }
}

} // namespace
