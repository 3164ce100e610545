//===- tests/soap_search/DeltaSimulationTest.cpp - Delta equals full ------===//
//
// The property delta simulation rests on: after any single-op change, the
// timeline repaired in place is the timeline built and simulated from
// scratch, bit for bit, task by task. Random proposals from the search's own
// config space on sample models (a CNN with branches, an RNN, and a
// Transformer) and clusters with contended links, with one gradient
// all-reduce per tensor and with buckets of several tensors (a change
// rebuilds its tensors' whole segment), and with measured communication
// tables; a third of the proposals are changed back right after and a third
// reverted (Simulator::revert), as a rejected MCMC step is, those simulated
// with a bound (Simulator::changeUnless) that may give up on them.
//
// A new gradient bucket size, and several ops changed at once, are delta
// simulated too: the same timeline and memory as the graph built from
// scratch.
//
// Also the bound the planner benchmark quotes (docs/benchmarks.md, "The most
// any strategy can gain"): under the analytic cost model no strategy on N
// devices keeps them busy for less than the 1-device time in all, so none
// runs an iteration in less than the 1-device time / N.
//
//===----------------------------------------------------------------------===//
#include "PlannerTestUtil.h"
#include "simulator/Simulator.h"
#include "soap_search/Builtins.h"
#include "soap_search/ConfigSpace.h"
#include "gtest/gtest.h"
#include <limits>

using namespace onnx2soap;
using namespace onnx2soap::simulator;
using namespace onnx2soap::soap_search;

namespace {

struct Case {
  const char *Sample;
  int64_t Batch;
  bool Unroll;
  const char *Preset;
  unsigned Devices;
  unsigned Proposals;
  /// SimOptions::GradientBucketBytes: 0, or buckets of several tensors.
  double Bucket = 0;
  /// The cluster with measured communication tables (measuredMachine).
  bool Measured = false;
};

/// Preset's first Devices devices with measured tables for transfers within
/// a node and across nodes and for all-reduces among a node's devices and
/// among all of them: what a cluster file with measurements gives.
Machine measuredMachine(const char *Preset, unsigned Devices) {
  namespace json = llvm::json;
  json::Value V = test::machine(Preset, Devices).toJson();
  auto Table = [](json::Object O, double Scale) {
    O["sizes_bytes"] = json::Array{8, 65536, 1 << 24};
    O["times_us"] = json::Array{5 * Scale, 30 * Scale, 4000 * Scale};
    return json::Value(std::move(O));
  };
  auto Name = [](unsigned D) {
    return "node" + std::to_string(D / 4) + "/gpu" + std::to_string(D % 4);
  };
  json::Array Node0, All;
  for (unsigned D = 0; D < Devices; ++D)
    (D < 4 ? Node0 : All).push_back(Name(D));
  All.insert(All.begin(), Node0.begin(), Node0.end());
  json::Array Transfers{
      Table(json::Object{{"from", Name(0)}, {"to", Name(1)}}, 1),
      Table(json::Object{{"from", Name(0)}, {"to", Name(4)}}, 3)};
  json::Array AllReduces{Table(json::Object{{"devices", std::move(Node0)}}, 2),
                         Table(json::Object{{"devices", std::move(All)}}, 6)};
  (*V.getAsObject())["measured"] =
      json::Object{{"transfers", std::move(Transfers)},
                   {"all_reduces", std::move(AllReduces)}};
  auto M = Machine::fromJsonValue(V, "measured.json");
  EXPECT_TRUE(static_cast<bool>(M)) << llvm::toString(M.takeError());
  return std::move(*M);
}

/// The case's cluster: the preset's first devices, with measured tables
/// when the case asks for them.
Machine caseMachine(const Case &C) {
  return C.Measured ? measuredMachine(C.Preset, C.Devices)
                    : test::machine(C.Preset, C.Devices);
}

/// A case's model, cluster, cost model and config space.
struct Sampled {
  ir::TrainingGraph T;
  Machine M;
  AnalyticCostModel Cost;
  ConfigSpace Space;
  explicit Sampled(const Case &C)
      : T(test::sample(C.Sample, C.Batch, C.Unroll)), M(caseMachine(C)),
        Space(T.G, M.numDevices()) {}
};

class DeltaSimulation : public ::testing::TestWithParam<Case> {};

TEST_P(DeltaSimulation, EqualsFullSimulationOnRandomProposals) {
  const Case &C = GetParam();
  ir::TrainingGraph T = test::sample(C.Sample, C.Batch, C.Unroll);
  ASSERT_GT(T.G.numOps(), 0u);
  Machine M = caseMachine(C);
  if (C.Measured) {
    ASSERT_EQ(M.measuredAllReduces().size(), 2u);
  }
  AnalyticCostModel Cost;
  ConfigSpace Space(T.G, M.numDevices());
  Rng R = chainRng(7, 0);

  Strategy Start;
  for (const ir::Op &O : T.G.ops())
    Start.Configs.push_back(Space.random(O.Id, R));
  SimOptions Options;
  Options.GradientBucketBytes = C.Bucket;
  Simulator Delta(T, M, Cost, Options), Full(T, M, Cost, Options);
  Delta.simulate(Start);
  if (C.Measured) { // the tables time something
    EXPECT_NE(Delta.time(),
              Simulator(T, test::machine(C.Preset, C.Devices), Cost, Options)
                  .simulate(Start));
  }
  unsigned Differences = 0, GivenUp = 0;
  for (unsigned I = 0; I < C.Proposals; ++I) {
    ir::OpId Op = uniformIndex(R, T.G.numOps());
    ParallelConfig Old = Delta.strategy()[Op];
    double Before = Delta.time();
    // The steps to be reverted are bounded as a search bounds the steps it
    // rejects above a cost: given up on only if slower than before.
    double Time = I % 3 == 2
                      ? Delta.changeUnless(Op, Space.random(Op, R), Before)
                      : Delta.change(Op, Space.random(Op, R));
    if (Time == std::numeric_limits<double>::infinity()) {
      ASSERT_GT(Full.simulate(Delta.strategy()), Before)
          << "proposal " << I << " given up on";
      ++GivenUp;
    }
    // A third of the proposals kept, a third changed back, a third
    // reverted (what a search does with the proposals it rejects): each
    // must leave the graph and timeline the next delta simulation needs.
    if (I % 3 == 1)
      Time = Delta.change(Op, Old);
    if (I % 3 == 2) {
      if (Time != std::numeric_limits<double>::infinity()) {
        ASSERT_EQ(Time, Full.simulate(Delta.strategy())) << "proposal " << I;
        ASSERT_TRUE(Delta.timeline() == Full.timeline()) << "proposal " << I;
      }
      ASSERT_TRUE(Delta.canRevert());
      Delta.revert();
      EXPECT_FALSE(Delta.canRevert());
      Time = Delta.time();
      ASSERT_EQ(Time, Before) << "proposal " << I << " reverted";
      ASSERT_EQ(Delta.strategy()[Op], Old);
    }
    double Expected = Full.simulate(Delta.strategy());
    if (Time != Expected || Delta.timeline() != Full.timeline()) {
      ADD_FAILURE() << "proposal " << I << " (op " << Op << " '"
                    << T.G.op(Op).Name << "' -> " << Delta.strategy()[Op].str()
                    << "): delta " << Time << " s, full " << Expected << " s";
      if (++Differences == 3)
        return;
    }
    ASSERT_NEAR(Delta.peakMemory(), Full.peakMemory(),
                1e-9 * Full.peakMemory());
    // Every device's memory, the communicators and peers it keeps count of
    // included.
    for (DeviceId D = 0; D < M.numDevices(); ++D) {
      ASSERT_NEAR(Delta.memory().total(D), Full.memory().total(D),
                  1e-9 * Full.memory().total(D))
          << "device " << D << ", proposal " << I;
      ASSERT_EQ(Delta.memory().Communicators[D], Full.memory().Communicators[D])
          << "device " << D << ", proposal " << I;
      ASSERT_EQ(Delta.memory().Peers[D], Full.memory().Peers[D])
          << "device " << D << ", proposal " << I;
    }
  }
  // Random proposals are mostly slower: the bound does give up.
  EXPECT_GT(GivenUp, 0u);
}

// A new gradient bucket size, delta simulated
// (Simulator::changeGradientBucket), gives the timeline and memory that the
// graph built and simulated from scratch with that size gives, under both
// models of communication; and the graph it leaves takes the next changes
// (kept or reverted) as one built from scratch would.
TEST_P(DeltaSimulation, BucketChangeEqualsFullSimulation) {
  Sampled Setup(GetParam());
  const ir::TrainingGraph &T = Setup.T;
  const Machine &M = Setup.M;
  const ConfigSpace &Space = Setup.Space;
  const double Sizes[] = {0, 4096, 65536, 1 << 20, 4 << 20, 16 << 20};
  for (bool Program : {true, false}) {
    Rng R = chainRng(13, Program);
    Strategy Start;
    for (const ir::Op &O : T.G.ops())
      Start.Configs.push_back(Space.random(O.Id, R));
    SimOptions Options;
    Options.setProgramModel(Program);
    Options.GradientBucketBytes = GetParam().Bucket;
    Simulator Delta(T, M, Setup.Cost, Options), Full(T, M, Setup.Cost, Options);
    Delta.simulate(Start);
    // Changes that cut the gradients anew, and those that moved the time.
    unsigned Recut = 0, Moved = 0;
    for (unsigned I = 0; I < 6; ++I) {
      double Bytes = Sizes[uniformIndex(R, std::size(Sizes))];
      double Before = Delta.time();
      auto Segments = Delta.graph().gradientSegments();
      double Time = Delta.changeGradientBucket(Bytes);
      Recut += Delta.graph().gradientSegments() != Segments;
      EXPECT_FALSE(Delta.canRevert());
      EXPECT_EQ(Delta.graph().options().GradientBucketBytes, Bytes);
      Full.setGradientBucket(Bytes);
      ASSERT_EQ(Time, Full.simulate(Delta.strategy()))
          << (Program ? "program" : "flexflow") << ", change " << I << " to "
          << Bytes << " bytes";
      ASSERT_TRUE(Delta.timeline() == Full.timeline()) << "change " << I;
      for (DeviceId D = 0; D < M.numDevices(); ++D) {
        ASSERT_NEAR(Delta.memory().total(D), Full.memory().total(D),
                    1e-9 * Full.memory().total(D))
            << "device " << D << ", change " << I;
        ASSERT_EQ(Delta.memory().Communicators[D],
                  Full.memory().Communicators[D]);
      }
      Moved += Time != Before;
      // Ops changed after it, the last reverted.
      for (unsigned J = 0; J < 2; ++J) {
        ir::OpId Op = uniformIndex(R, T.G.numOps());
        double Changed = Delta.change(Op, Space.random(Op, R));
        if (J == 1) {
          Delta.revert();
          Changed = Delta.time();
        }
        ASSERT_EQ(Changed, Full.simulate(Delta.strategy()))
            << "change " << I << ", op change " << J;
        ASSERT_TRUE(Delta.timeline() == Full.timeline());
      }
    }
    // Where the sizes cut the gradients differently (all alike for the
    // unrolled RNNLM, each of whose tensors outweighs 16 MiB or holds a
    // segment of its own), the time moves.
    if (Recut) {
      EXPECT_GT(Moved, 0u);
    }
    EXPECT_TRUE(Recut || llvm::StringRef(GetParam().Sample) == "rnnlm");
  }
}

// Several ops changed at once (what a chain's unit, and moveTo() between
// nearby strategies, do) give the timeline and memory of the strategy built
// and simulated from scratch; reverted, the one before.
TEST_P(DeltaSimulation, MultiOpChangeEqualsFullSimulation) {
  Sampled Setup(GetParam());
  const ir::TrainingGraph &T = Setup.T;
  const Machine &M = Setup.M;
  const ConfigSpace &Space = Setup.Space;
  Rng R = chainRng(17, 0);
  auto Random = [&] {
    Strategy S;
    for (const ir::Op &O : T.G.ops())
      S.Configs.push_back(Space.random(O.Id, R));
    return S;
  };
  SimOptions Options;
  Options.GradientBucketBytes = GetParam().Bucket;
  Simulator Delta(T, M, Setup.Cost, Options), Full(T, M, Setup.Cost, Options);
  Strategy Target = Random(), Other = Random();
  Delta.moveTo(Target); // nothing simulated yet: in full
  for (unsigned I = 0; I < 12; ++I) {
    // Up to 8 ops (repeats allowed) take another random strategy's configs.
    unsigned Count = 1 + uniformIndex(R, 8);
    for (unsigned J = 0; J < Count; ++J) {
      ir::OpId Op = uniformIndex(R, T.G.numOps());
      Target[Op] = Other[Op];
    }
    Other = Random();
    double Before = Delta.time();
    std::vector<Simulator::TimelineEntry> Timeline = Delta.timeline();
    // The ops that differ, changed at once (moveTo() simulates in full
    // when they are many).
    std::vector<ir::OpId> Ops;
    std::vector<ParallelConfig> Configs;
    for (ir::OpId Op = 0; Op < T.G.numOps(); ++Op)
      if (!(Delta.strategy()[Op] == Target[Op])) {
        Ops.push_back(Op);
        Configs.push_back(Target[Op]);
      }
    double Time = Ops.empty() ? Delta.time() : Delta.change(Ops, Configs);
    ASSERT_TRUE(Delta.strategy().Configs == Target.Configs);
    ASSERT_EQ(Time, Full.simulate(Target)) << "change " << I;
    ASSERT_TRUE(Delta.timeline() == Full.timeline()) << "change " << I;
    for (DeviceId D = 0; D < M.numDevices(); ++D)
      ASSERT_EQ(Delta.memory().total(D), Full.memory().total(D))
          << "device " << D << ", change " << I;
    if (I % 3 == 2 && Delta.canRevert()) {
      Delta.revert();
      ASSERT_EQ(Delta.time(), Before) << "change " << I << " reverted";
      ASSERT_TRUE(Delta.timeline() == Timeline);
      Target = Delta.strategy();
    }
  }
}

TEST_P(DeltaSimulation, NoStrategyBeatsTheOneDeviceTimeOverN) {
  const Case &C = GetParam();
  ir::TrainingGraph T = test::sample(C.Sample, C.Batch, C.Unroll);
  Machine M = test::machine(C.Preset, C.Devices);
  Machine One = test::machine(C.Preset, 1);
  AnalyticCostModel Cost;
  SimOptions Options;
  Options.GradientBucketBytes = C.Bucket;
  Simulator Alone(T, One, Cost, Options);
  double OneDevice = Alone.simulate(dataParallel(T.G, One));
  ASSERT_GT(OneDevice, 0);

  ConfigSpace Space(T.G, M.numDevices());
  Rng R = chainRng(11, 0);
  Simulator Sim(T, M, Cost, Options);
  std::vector<Strategy> Strategies = {
      dataParallel(T.G, M), modelParallel(T.G, M, Cost), expert(T.G, M)};
  for (unsigned I = 0; I < 20; ++I) {
    Strategy S;
    for (const ir::Op &O : T.G.ops())
      S.Configs.push_back(Space.random(O.Id, R));
    Strategies.push_back(std::move(S));
  }
  const double Slack = 1 - 1e-9;
  for (size_t I = 0; I < Strategies.size(); ++I) {
    double Time = Sim.simulate(Strategies[I]);
    SimReport Report = Sim.report();
    double Busy = 0;
    for (double Compute : Report.ComputeTime)
      Busy += Compute;
    EXPECT_GE(Busy, OneDevice * Slack) << "strategy " << I;
    EXPECT_GE(Time * M.numDevices(), OneDevice * Slack) << "strategy " << I;
  }
}

// revert() after a full simulation gives back the graph and timeline before
// it, and delta simulation goes on from them; after a change, the same.
TEST(Revert, UndoesTheLastSimulationOrChange) {
  ir::TrainingGraph T = test::sample("tiny_cnn", 8, false);
  Machine M = test::machine("paper-k80", 8);
  AnalyticCostModel Cost;
  ConfigSpace Space(T.G, M.numDevices());
  Rng R = chainRng(3, 0);
  Strategy A = dataParallel(T.G, M), B;
  for (const ir::Op &O : T.G.ops())
    B.Configs.push_back(Space.random(O.Id, R));
  Simulator Sim(T, M, Cost), Full(T, M, Cost);
  Sim.simulate(A);
  EXPECT_FALSE(Sim.canRevert()); // nothing before the first simulation
  std::vector<Simulator::TimelineEntry> OfA = Sim.timeline();
  double TimeOfA = Sim.time();
  Sim.simulate(B);
  EXPECT_FALSE(Sim.canRevert()); // not asked to keep A's
  Sim.simulate(A);
  double TimeOfB = Sim.simulate(B, /*Revertible=*/true);
  ASSERT_NE(TimeOfB, TimeOfA);
  ASSERT_TRUE(Sim.canRevert());
  Sim.revert();
  EXPECT_EQ(Sim.time(), TimeOfA);
  EXPECT_TRUE(Sim.timeline() == OfA);
  EXPECT_TRUE(Sim.strategy().Configs == A.Configs);
  EXPECT_FALSE(Sim.canRevert());

  // Changes from the reverted graph, each reverted in turn, then kept.
  for (const ir::Op &O : T.G.ops()) {
    Sim.change(O.Id, B[O.Id]);
    Sim.revert();
    ASSERT_EQ(Sim.time(), TimeOfA) << O.Name;
    ASSERT_TRUE(Sim.timeline() == OfA) << O.Name;
    double Time = Sim.change(O.Id, B[O.Id]);
    EXPECT_EQ(Time, Full.simulate(Sim.strategy())) << O.Name;
    EXPECT_TRUE(Sim.timeline() == Full.timeline()) << O.Name;
    OfA = Sim.timeline();
    TimeOfA = Time;
  }
  EXPECT_EQ(TimeOfA, TimeOfB); // every op took B's config

  // A revertible full simulation bounded above its time finishes as an
  // unbounded one does; bounded below it, it gives up, and revert() gives
  // back the timeline before it.
  Strategy C;
  for (const ir::Op &O : T.G.ops())
    C.Configs.push_back(Space.random(O.Id, R));
  double TimeOfC = Full.simulate(C);
  std::vector<Simulator::TimelineEntry> OfC = Full.timeline();
  EXPECT_EQ(Sim.simulate(C, /*Revertible=*/true, TimeOfC), TimeOfC);
  EXPECT_TRUE(Sim.timeline() == OfC);
  Sim.revert();
  EXPECT_EQ(Sim.simulate(C, /*Revertible=*/true, 0.5 * TimeOfC),
            std::numeric_limits<double>::infinity());
  ASSERT_TRUE(Sim.canRevert());
  Sim.revert();
  EXPECT_EQ(Sim.time(), TimeOfA);
  EXPECT_TRUE(Sim.timeline() == OfA);
  // Not revertible, it finishes whatever the bound.
  EXPECT_EQ(Sim.simulate(C, /*Revertible=*/false, 0.5 * TimeOfC), TimeOfC);
  EXPECT_TRUE(Sim.timeline() == OfC);

  // A new bucket size needs a new simulation: nothing to revert.
  Sim.setGradientBucket(4096);
  EXPECT_FALSE(Sim.canRevert());
}

INSTANTIATE_TEST_SUITE_P(
    Samples, DeltaSimulation,
    ::testing::Values(
        Case{"tiny_cnn", 8, false, "paper-k80", 8, 400},
        Case{"inception_v3", 16, false, "paper-p100", 16, 200},
        Case{"rnnlm", 8, true, "paper-p100", 4, 200},
        Case{"bert_encoder", 8, false, "dgx-h100", 16, 300},
        Case{"tiny_cnn", 8, false, "paper-k80", 8, 400, 4096},
        Case{"inception_v3", 16, false, "paper-p100", 16, 200, 4 << 20},
        Case{"rnnlm", 8, true, "paper-p100", 4, 200, 1 << 20},
        Case{"bert_encoder", 8, false, "dgx-h100", 16, 300, 8 << 20},
        Case{"tiny_cnn", 8, false, "paper-k80", 8, 400, 4096, true},
        Case{"rnnlm", 8, true, "paper-p100", 8, 200, 1 << 20, true}),
    [](const auto &Info) {
      return std::string(Info.param.Sample) +
             (Info.param.Bucket ? "_buckets" : "") +
             (Info.param.Measured ? "_measured" : "");
    });

} // namespace
