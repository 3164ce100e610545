//===- tests/simulator/SimulatorTestUtil.h - Fake costs ---------*- C++ -*-===//
//
// What the hand-written timelines (SimulatorTest.cpp, ProgramCostTest.cpp)
// are worked out from: a fake cost model with round numbers (forward 1 s,
// backward 2 s for a whole op, scaled by the partition's share; update
// 0.5 s; a copy a second per 512 bytes, adding half as long again), fake
// devices joined by slow links, a small MLP, and the fixtures that run each
// case through full simulation and through delta simulation from another
// strategy.
//
//===----------------------------------------------------------------------===//
#ifndef ONNX2SOAP_TESTS_SIMULATOR_SIMULATORTESTUTIL_H
#define ONNX2SOAP_TESTS_SIMULATOR_SIMULATORTESTUTIL_H

#include "../ir/IrTestUtil.h"
#include "simulator/MemoryModel.h"
#include "simulator/Simulator.h"
#include <algorithm>
#include <tuple>
#include <utility>
#include <vector>

namespace onnx2soap::simulator::test {

using namespace onnx2soap::ir::test;
using ir::OpKind;
using ir::TensorRole;
using K = TaskKind;

class FakeCost : public CostModel {
public:
  TaskTimes opTimes(const PartitionShape &P,
                    const DeviceType &) const override {
    PartitionWork W = partitionWork(P);
    ir::OpCost Whole = ir::opKindInfo(P.O.Kind).Cost(P.G, P.O);
    double Share =
        Whole.FlopsForward > 0 ? W.FlopsForward / Whole.FlopsForward : 1.0;
    return {1.0 * Share, 2.0 * Share};
  }
  double updateTime(OptimizerKind, double, ir::DType,
                    const DeviceType &) const override {
    return 0.5;
  }
  double copyTime(double Bytes, unsigned, bool Add,
                  const DeviceType &) const override {
    return (Add ? 1.5 : 1.0) * Bytes / 512;
  }
};

/// The communication model alone: no copy tasks, no call holding a device.
inline SimOptions withoutProgramCosts() {
  SimOptions Options;
  Options.CopyTasks = false;
  Options.BlockingCalls = false;
  return Options;
}

/// G's inputs x[4,8] and labels[4], both with samples along dim 0.
inline std::pair<ir::TensorId, ir::TensorId> batchInputs(ir::Graph &G) {
  ir::TensorId X = G.addTensor("x", f32({4, 8}), TensorRole::Input);
  ir::TensorId Labels = G.addTensor("labels", i64({4}), TensorRole::Input);
  G.addInput(X);
  G.addInput(Labels);
  G.tensor(X).BatchDim = 0;
  G.tensor(Labels).BatchDim = 0;
  return {X, Labels};
}

/// x[4,8] -> Gemm(W[8,8]) -> Relu -> SoftmaxCrossEntropyLoss(labels[4]),
/// the model's own loss; WithBias: Gemm(x, w, b[8]), two tensors to
/// all-reduce.
inline ir::TrainingGraph mlp(bool WithBias = false) {
  ir::Graph G;
  auto [X, Labels] = batchInputs(G);
  ir::TensorId W = G.addTensor("w", f32({8, 8}), TensorRole::Parameter);
  auto Trans = attrs({{"transB", int64_t(1)}});
  ir::TensorId H =
      WithBias ? add(G, OpKind::Gemm,
                     {X, W, G.addTensor("b", f32({8}), TensorRole::Parameter)},
                     Trans, "fc")
               : add(G, OpKind::Gemm, {X, W}, Trans, "fc");
  ir::TensorId R = add(G, OpKind::Relu, {H}, {}, "relu");
  ir::TensorId L = add(G, OpKind::SoftmaxCrossEntropyLoss, {R, Labels},
                       attrs({{"reduction", std::string("mean")}}), "loss");
  G.addOutput(L);
  auto T = ir::deriveTraining(std::move(G), ir::LossKind::ModelOutput);
  EXPECT_TRUE(static_cast<bool>(T)) << llvm::toString(T.takeError());
  return std::move(*T);
}

/// Devices "d0", "d1", ... of one fake type in one node; Links(B, Ids)
/// joins them. CPUs, unless a CUDA architecture is given.
template <typename LinksFn>
inline Machine fakeDevices(const char *Name, unsigned Count, LinksFn Links,
                           llvm::StringRef CudaArch = "") {
  MachineBuilder B(Name);
  DeviceType Type;
  Type.Name = "fake";
  Type.CudaArch = CudaArch.str();
  Type.PeakFlopsF32 = 1e12;
  Type.MemoryBandwidth = 1e11;
  Type.MemoryCapacity = int64_t(1) << 30;
  unsigned T = B.addDeviceType(Type);
  B.addNode();
  std::vector<EndpointId> Ids;
  for (unsigned D = 0; D < Count; ++D)
    Ids.push_back(B.addDevice(T, "d" + std::to_string(D)));
  Links(B, Ids);
  auto M = B.finish();
  EXPECT_TRUE(static_cast<bool>(M)) << llvm::toString(M.takeError());
  return std::move(*M);
}

/// Two devices joined both ways by a link of 256 B/s and Latency seconds
/// per message.
inline Machine twoDevices(double Latency = 0) {
  return fakeDevices("two", 2, [&](MachineBuilder &B, auto &Ids) {
    B.addDuplex(Ids[0], Ids[1], 256, Latency, "test");
  });
}

inline Strategy allOn(const ir::Graph &G, DeviceId Device) {
  Strategy S;
  for (const ir::Op &O : G.ops())
    S.Configs.push_back(ParallelConfig::single(G.outputType(O).rank(), Device));
  return S;
}

/// Every op split over samples on d0 and d1 (one with a scalar output, the
/// loss, over its reduction).
inline Strategy dataParallelOnTwo(const ir::Graph &G) {
  Strategy S = allOn(G, 0);
  for (const ir::Op &O : G.ops()) {
    ParallelConfig &C = S[O.Id];
    if (C.Degrees.empty())
      C.Reduction = 2;
    else
      C.Degrees[0] = 2;
  }
  return S;
}

/// (kind, device, start, end) of every task, in key order.
inline std::vector<std::tuple<TaskKind, DeviceId, double, double>>
tasks(const Simulator &Sim) {
  std::vector<std::tuple<TaskKind, DeviceId, double, double>> Out;
  std::vector<TaskId> Ids;
  for (TaskId Id = 0; Id < Sim.graph().size(); ++Id)
    if (Sim.graph().task(Id).Alive)
      Ids.push_back(Id);
  std::sort(Ids.begin(), Ids.end(), [&](TaskId A, TaskId B) {
    return Sim.graph().task(A).Key < Sim.graph().task(B).Key;
  });
  for (TaskId Id : Ids) {
    const Task &T = Sim.graph().task(Id);
    Out.push_back({T.Kind, T.Device, T.Start, T.End});
  }
  return Out;
}

class SimulatorTest : public ::testing::TestWithParam<bool> {
protected:
  /// Simulates S: from scratch, or (parameter true) by delta simulation
  /// from everything on device 1, changing one op at a time.
  double run(Simulator &Sim, const Strategy &S) {
    if (!GetParam())
      return Sim.simulate(S);
    Sim.simulate(allOn(Train.G, 1));
    double Time = 0;
    for (const ir::Op &O : Train.G.ops())
      Time = Sim.change(O.Id, S[O.Id]);
    return Time;
  }

  ir::TrainingGraph Train = mlp();
  Machine M = twoDevices();
  FakeCost Cost;
};

/// Data parallelism of mlp(/*WithBias=*/true) over a link with 0.5 s of
/// latency: a ring of two takes 2 latency steps, so an all-reduce of N bytes
/// takes 1 + N / 256 s.
class GradientBucketTest : public SimulatorTest {
protected:
  GradientBucketTest() {
    Train = mlp(/*WithBias=*/true);
    M = twoDevices(0.5);
  }
  Strategy dataParallel() const { return dataParallelOnTwo(Train.G); }
  unsigned allReduces(const Simulator &Sim) const {
    unsigned Count = 0;
    for (TaskId Id = 0; Id < Sim.graph().size(); ++Id)
      Count += Sim.graph().task(Id).Alive &&
               Sim.graph().task(Id).Kind == K::GradAllReduce;
    return Count;
  }
};

} // namespace onnx2soap::simulator::test

#endif
