//===- tests/soap_search/MessageCapTest.cpp - Messages per tensor bounded -===//
//
// On 1,024 GPUs the expert strategy's fully-connected layers read their
// input, split over samples on every device, in a message from each device
// to each: a million messages, past the search's bound; the search brings
// such a start within it and draws random starts within it. On 64 devices
// or fewer nothing can pass the bound.
//
//===----------------------------------------------------------------------===//
#include "soap_search/MessageCap.h"
#include "PlannerTestUtil.h"
#include "simulator/TaskGraph.h"
#include "soap_search/Builtins.h"
#include "soap_search/Mcmc.h"
#include "soap_search/Random.h"
#include "gtest/gtest.h"

using namespace onnx2soap;
using namespace onnx2soap::simulator;
using namespace onnx2soap::soap_search;

namespace {

/// A random strategy drawn op by op from Space, with the numbers
/// randomWithin takes for the same seed (chainRng(3, 7)).
Strategy drawnPlainly(const ir::Graph &G, const ConfigSpace &Space) {
  Rng Plain = chainRng(3, 7);
  Strategy Drawn;
  for (const ir::Op &O : G.ops())
    Drawn.Configs.push_back(Space.random(O.Id, Plain));
  return Drawn;
}

/// The ops whose config in S passes the bound with the ops around them.
std::vector<ir::OpId> overTheBound(const ir::Graph &G, const MessageCap &Cap,
                                   const Strategy &S) {
  std::vector<ir::OpId> Over;
  for (const ir::Op &O : G.ops())
    if (Cap.exceeded(S, O.Id, S[O.Id]))
      Over.push_back(O.Id);
  return Over;
}

TEST(MessageCap, ExpertFullyConnectedLayersOnOneThousandGpus) {
  ir::TrainingGraph T = test::sample("alexnet", 1024);
  Machine M = test::machine("dgx-h100:128", 1024);
  const ir::Graph &G = T.G;
  Strategy Expert = expert(G, M), Data = dataParallel(G, M);
  MessageCap Cap(G, M.numDevices());
  std::vector<ir::OpId> Over = overTheBound(G, Cap, Expert);
  ASSERT_FALSE(Over.empty());
  // The first op past it by its input (the op before it is past it by its
  // output) reads a tensor split over samples on all 1,024 devices, with
  // every partition of its own on another device but one.
  auto ReadsTooMany = [&](ir::OpId Op) {
    ir::TensorId In = G.op(Op).Inputs[0];
    return In != ir::NoTensor && G.tensor(In).Producer != ir::NoOp &&
           inputMessages(G, Op, 0, Expert[G.tensor(In).Producer], Expert[Op],
                         Cap.bound()) > Cap.bound();
  };
  auto Reader = llvm::find_if(Over, ReadsTooMany);
  ASSERT_NE(Reader, Over.end());
  const ir::Op &Fc = G.op(*Reader);
  EXPECT_EQ(Fc.Kind, ir::OpKind::Gemm) << Fc.Name;
  ASSERT_EQ(Expert[Fc.Id].numPartitions(), 1024u);
  ir::OpId Producer = G.tensor(Fc.Inputs[0]).Producer;
  EXPECT_EQ(inputMessages(G, Fc.Id, 0, Expert[Producer], Expert[Fc.Id]),
            1024u * 1023u);
  // Counting stops past a limit, after the consumer partition that passed
  // it.
  EXPECT_EQ(inputMessages(G, Fc.Id, 0, Expert[Producer], Expert[Fc.Id], 5000),
            5u * 1023u);
  EXPECT_TRUE(overTheBound(G, Cap, Data).empty());

  // Within the bound: the ops past it take data parallelism's config, the
  // rest keep the expert's.
  Strategy Within = Cap.within(Expert, Data);
  EXPECT_TRUE(overTheBound(G, Cap, Within).empty());
  unsigned Kept = 0;
  for (const ir::Op &O : G.ops()) {
    bool Changed = !(Within[O.Id] == Expert[O.Id]);
    if (Changed) {
      EXPECT_TRUE(Within[O.Id] == Data[O.Id]) << O.Name;
    }
    Kept += !Changed && !(Expert[O.Id] == Data[O.Id]);
  }
  EXPECT_GT(Kept, 0u); // some fully-connected layers stay split
}

TEST(MessageCap, NothingPassesItOnSixtyFourDevices) {
  ir::TrainingGraph T = test::sample("alexnet", 1024);
  Machine M = test::machine("paper-k80", 64);
  Strategy Expert = expert(T.G, M);
  MessageCap Cap(T.G, M.numDevices());
  EXPECT_TRUE(overTheBound(T.G, Cap, Expert).empty());
  EXPECT_TRUE(Cap.within(Expert, dataParallel(T.G, M)) == Expert);
}

TEST(MessageCap, RandomStrategiesDrawnWithinItOnOneThousandGpus) {
  ir::TrainingGraph T = test::sample("alexnet", 1024);
  Machine M = test::machine("dgx-h100:128", 1024);
  const ir::Graph &G = T.G;
  ConfigSpace Space(G, M.numDevices());
  MessageCap Cap(G, M.numDevices());
  Strategy Data = Space.admit(dataParallel(G, M));
  // Counted here tensor by tensor, not by the bound's own check.
  auto MostMessages = [&](const Strategy &S) {
    uint64_t Most = 0;
    for (const ir::Op &O : G.ops())
      for (unsigned Slot = 0; Slot < O.Inputs.size(); ++Slot) {
        ir::TensorId In = O.Inputs[Slot];
        if (In != ir::NoTensor && G.tensor(In).Producer != ir::NoOp)
          Most = std::max(Most,
                          inputMessages(G, O.Id, Slot, S[G.tensor(In).Producer],
                                        S[O.Id], Cap.bound()));
      }
    return Most;
  };
  Rng Bounded = chainRng(3, 7);
  Strategy Drawn = drawnPlainly(G, Space);
  EXPECT_GT(MostMessages(Drawn), Cap.bound());
  Strategy Within = Cap.randomWithin(Space, Data, Bounded);
  EXPECT_LE(MostMessages(Within), Cap.bound());
  // Still random: most ops keep a config of their own.
  unsigned OwnConfigs = 0;
  for (const ir::Op &O : G.ops())
    OwnConfigs += !(Within[O.Id] == Data[O.Id]);
  EXPECT_GT(OwnConfigs, G.numOps() / 2);
}

TEST(MessageCap, RandomStrategiesAsBeforeOnSixtyFourDevices) {
  ir::TrainingGraph T = test::sample("alexnet", 1024);
  Machine M = test::machine("paper-k80", 64);
  ConfigSpace Space(T.G, M.numDevices());
  Rng Bounded = chainRng(3, 7);
  Strategy Drawn = drawnPlainly(T.G, Space);
  EXPECT_TRUE(MessageCap(T.G, M.numDevices())
                  .randomWithin(Space, Space.admit(dataParallel(T.G, M)),
                                Bounded) == Drawn);
}

} // namespace
