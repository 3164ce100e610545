//===- tests/soap_search/RuntimeMemoryTest.cpp - Context and NCCL memory --===//
//
// The memory model counts, on GPUs, the runtime's own memory and NCCL's:
// one communicator per group of devices a device all-reduces with, one
// connection per device it exchanges messages with (MemoryModel.h), and
// delta simulation opens and closes them as strategies change.
//
//===----------------------------------------------------------------------===//
#include "PlannerTestUtil.h"
#include "simulator/CostModel.h"
#include "simulator/Simulator.h"
#include "soap_search/Builtins.h"
#include "llvm/Support/JSON.h"
#include "gtest/gtest.h"
#include <set>

using namespace onnx2soap;
using namespace onnx2soap::simulator;

namespace {

constexpr double MiB = 1 << 20;

TEST(RuntimeMemory, DataParallelismJoinsOneCommunicatorAndHasNoPeers) {
  ir::TrainingGraph T = test::training("samples/tiny_cnn.onnx", 8);
  Machine M = test::machine("paper-k80", 4);
  ASSERT_EQ(M.deviceType(0).RuntimeMemory, int64_t(DefaultRuntimeMiB * MiB));
  AnalyticCostModel Cost;
  Simulator Sim(T, M, Cost);
  Sim.simulate(
      soap_search::builtin(soap_search::Builtin::DataParallel, T.G, M, Cost));
  SimReport R = Sim.report();
  for (DeviceId D = 0; D < 4; ++D) {
    EXPECT_EQ(R.Communicators[D], 1u); // gradients and statistics: all four
    EXPECT_EQ(R.Peers[D], 0u);
    EXPECT_EQ(R.RuntimeMemory[D],
              (DefaultRuntimeMiB + DefaultCommunicatorMiB) * MiB);
  }
}

TEST(RuntimeMemory, ModelParallelismHasPeersAndNoCommunicator) {
  // Each layer whole on one device: no replicas, no all-reduce; each device
  // exchanges activations (and their gradients) with the devices of the
  // layers next to its own.
  ir::TrainingGraph T = test::training("samples/tiny_mlp.onnx", 8);
  Machine M = test::machine("paper-k80", 4);
  AnalyticCostModel Cost;
  Strategy S =
      soap_search::builtin(soap_search::Builtin::ModelParallel, T.G, M, Cost);
  Simulator Sim(T, M, Cost);
  Sim.simulate(S);
  SimReport R = Sim.report();
  // The peers, from the transfers themselves.
  std::vector<std::set<DeviceId>> Expected(4);
  const TaskGraph &Graph = Sim.graph();
  for (TaskId Id = 0; Id < Graph.size(); ++Id) {
    const Task &Task = Graph.task(Id);
    if (!Task.Alive || Task.Kind != TaskKind::Transfer ||
        Task.MessageBytes <= 0 || Task.Device == Task.Peer)
      continue;
    Expected[Task.Device].insert(Task.Peer);
    Expected[Task.Peer].insert(Task.Device);
  }
  unsigned WithPeers = 0;
  for (DeviceId D = 0; D < 4; ++D) {
    EXPECT_EQ(R.Communicators[D], 0u);
    EXPECT_EQ(R.Peers[D], Expected[D].size());
    EXPECT_EQ(R.RuntimeMemory[D], DefaultRuntimeMiB * MiB + Expected[D].size() *
                                                                DefaultPeerMiB *
                                                                MiB);
    WithPeers += !Expected[D].empty();
  }
  EXPECT_GE(WithPeers, 2u);
}

TEST(RuntimeMemory, DeltaSimulationOpensAndClosesCommunicators) {
  // tiny_mlp data parallel on 4 P100s, then one op replicated on devices
  // 0 and 1 alone: a second group's communicator on those two; back, gone.
  ir::TrainingGraph T = test::training("samples/tiny_mlp.onnx", 8);
  Machine M = test::machine("paper-p100", 4);
  AnalyticCostModel Cost;
  Strategy S =
      soap_search::builtin(soap_search::Builtin::DataParallel, T.G, M, Cost);
  Simulator Sim(T, M, Cost);
  Sim.simulate(S);
  ir::OpId Gemm = ir::NoOp;
  for (const ir::Op &O : T.G.ops())
    if (O.Kind == ir::OpKind::Gemm || O.Kind == ir::OpKind::MatMul) {
      Gemm = O.Id;
      break;
    }
  ASSERT_NE(Gemm, ir::NoOp);
  ParallelConfig Old = Sim.strategy()[Gemm];
  ParallelConfig Two = Old;
  Two.Degrees.assign(Old.Degrees.size(), 1);
  Two.Degrees[0] = 2; // samples over devices 0 and 1
  Two.FirstDevice = 0;
  Two.DeviceStride = 1;
  Sim.change(Gemm, Two);
  EXPECT_EQ(Sim.memory().Communicators[0], 2u);
  EXPECT_EQ(Sim.memory().Communicators[1], 2u);
  EXPECT_EQ(Sim.memory().Communicators[2], 1u);
  // Its input and output regions now move between devices.
  EXPECT_GT(Sim.memory().Peers[2], 0u);
  Simulator Full(T, M, Cost);
  Full.simulate(Sim.strategy());
  for (DeviceId D = 0; D < 4; ++D)
    EXPECT_EQ(Sim.memory().total(D), Full.memory().total(D)) << "device " << D;
  Sim.change(Gemm, Old);
  for (DeviceId D = 0; D < 4; ++D) {
    EXPECT_EQ(Sim.memory().Communicators[D], 1u);
    EXPECT_EQ(Sim.memory().Peers[D], 0u);
  }
  EXPECT_TRUE(Sim.memory().PairUses.empty());
  EXPECT_EQ(Sim.memory().GroupUses.size(), 1u);
}

TEST(RuntimeMemory, AGroupThatAllReducesOnlyStatisticsJoinsACommunicator) {
  // tiny_cnn data parallel on 4 P100s with the first BatchNorm's scale and
  // bias frozen, that BatchNorm split over the samples of devices 0 and 1
  // alone: its statistics are all-reduced among {0, 1}, which no gradient
  // all-reduce joins. The program makes a communicator for every group of
  // its plan, this one too.
  onnx_import::ImportOptions Options;
  Options.Batch = 8;
  Options.Roles.Frozen = {"1.weight", "1.bias"};
  auto Model = onnx_import::importModel(
      ONNX2SOAP_SOURCE_DIR "/samples/tiny_cnn.onnx", Options);
  ASSERT_TRUE(static_cast<bool>(Model)) << llvm::toString(Model.takeError());
  auto T =
      ir::deriveTraining(std::move(Model->Graph), ir::LossKind::CrossEntropy);
  ASSERT_TRUE(static_cast<bool>(T)) << llvm::toString(T.takeError());
  Machine M = test::machine("paper-p100", 4);
  AnalyticCostModel Cost;
  Strategy S =
      soap_search::builtin(soap_search::Builtin::DataParallel, T->G, M, Cost);
  ir::OpId Norm = ir::NoOp;
  for (const ir::Op &O : T->G.ops())
    if (O.Kind == ir::OpKind::BatchNorm) {
      Norm = O.Id;
      break;
    }
  ASSERT_NE(Norm, ir::NoOp);
  ParallelConfig Two = S[Norm];
  Two.Degrees.assign(Two.Degrees.size(), 1);
  Two.Degrees[0] = 2;
  Two.FirstDevice = 0;
  Two.DeviceStride = 1;
  S[Norm] = Two;
  Simulator Sim(*T, M, Cost);
  Sim.simulate(S);
  SimReport R = Sim.report();
  EXPECT_EQ(R.Communicators[0], 2u);
  EXPECT_EQ(R.Communicators[1], 2u);
  EXPECT_EQ(R.Communicators[2], 1u);
  EXPECT_EQ(R.Communicators[3], 1u);
  // Delta simulation agrees: back to data parallelism, one group again.
  Sim.change(Norm, soap_search::builtin(soap_search::Builtin::DataParallel,
                                        T->G, M, Cost)[Norm]);
  for (DeviceId D = 0; D < 4; ++D)
    EXPECT_EQ(Sim.memory().Communicators[D], 1u) << "device " << D;
}

TEST(RuntimeMemory, ClusterFileFiguresReplaceTheEstimates) {
  Machine Preset = test::machine("paper-k80", 2);
  llvm::json::Value V = Preset.toJson();
  // The canonical form leaves the defaults out (cluster hashes unchanged).
  llvm::json::Object &Type =
      *(*V.getAsObject()->getArray("device_types"))[0].getAsObject();
  EXPECT_FALSE(Type.get("runtime_MiB"));
  EXPECT_FALSE(Type.get("communicator_MiB"));
  EXPECT_FALSE(Type.get("peer_MiB"));
  Type["runtime_MiB"] = 500;
  Type["communicator_MiB"] = 0;
  Type["peer_MiB"] = 2.5;
  auto M = Machine::fromJsonValue(V, "measured.json");
  ASSERT_TRUE(static_cast<bool>(M)) << llvm::toString(M.takeError());
  EXPECT_EQ(M->deviceType(0).RuntimeMemory, int64_t(500 * MiB));
  EXPECT_EQ(M->deviceType(0).CommunicatorMemory, 0);
  EXPECT_EQ(M->deviceType(0).PeerMemory, int64_t(2.5 * MiB));
  // Written back when not the defaults, and read the same.
  llvm::json::Value Again = M->toJson();
  const llvm::json::Object &Written =
      *(*Again.getAsObject()->getArray("device_types"))[0].getAsObject();
  EXPECT_EQ(Written.getNumber("runtime_MiB"), llvm::Optional<double>(500));
  EXPECT_EQ(Written.getNumber("communicator_MiB"), llvm::Optional<double>(0));
  EXPECT_EQ(Written.getNumber("peer_MiB"), llvm::Optional<double>(2.5));

  ir::TrainingGraph T = test::training("samples/tiny_cnn.onnx", 8);
  AnalyticCostModel Cost;
  Simulator Sim(T, *M, Cost);
  Sim.simulate(
      soap_search::builtin(soap_search::Builtin::DataParallel, T.G, *M, Cost));
  EXPECT_EQ(Sim.report().RuntimeMemory[0], 500 * MiB);

  // CPU ranks: none.
  Machine Cpu = test::machine("cpu:2", 2);
  EXPECT_EQ(Cpu.deviceType(0).RuntimeMemory, 0);
  EXPECT_EQ(Cpu.deviceType(0).CommunicatorMemory, 0);
  EXPECT_EQ(Cpu.deviceType(0).PeerMemory, 0);
}

} // namespace
