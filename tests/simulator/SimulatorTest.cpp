//===- tests/simulator/SimulatorTest.cpp - Timelines written by hand ------===//
//
// A fake cost model with round numbers (forward 1 s, backward 2 s for a whole
// op, scaled by the partition's share; update 0.5 s) and a two-device machine
// whose one link moves 256 bytes per second, so that every expected timeline
// below can be worked out on paper. Each case runs through full simulation
// and through delta simulation from another strategy. A device takes part
// in one communication at a time (SimOptions::SerialCommunication, the
// default) unless a case says otherwise. The cases of SimulatorTest and
// GradientBucketTest leave out what else generated programs do (the box
// copies around edges, a call holding a waiting rank's device); the
// ProgramCostTest cases below charge them, a copy taking a second per 512
// bytes (adding, half as long again).
//
//===----------------------------------------------------------------------===//
#include "simulator/Simulator.h"
#include "../ir/IrTestUtil.h"
#include "simulator/MemoryModel.h"

using namespace onnx2soap;
using namespace onnx2soap::simulator;
using namespace onnx2soap::ir::test;
using ir::OpKind;
using ir::TensorRole;

namespace {

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
SimOptions withoutProgramCosts() {
  SimOptions Options;
  Options.CopyTasks = false;
  Options.BlockingCalls = false;
  return Options;
}

/// G's inputs x[4,8] and labels[4], both with samples along dim 0.
std::pair<ir::TensorId, ir::TensorId> batchInputs(ir::Graph &G) {
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
ir::TrainingGraph mlp(bool WithBias = false) {
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
Machine fakeDevices(const char *Name, unsigned Count, LinksFn Links,
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
Machine twoDevices(double Latency = 0) {
  return fakeDevices("two", 2, [&](MachineBuilder &B, auto &Ids) {
    B.addDuplex(Ids[0], Ids[1], 256, Latency, "test");
  });
}

Strategy allOn(const ir::Graph &G, DeviceId Device) {
  Strategy S;
  for (const ir::Op &O : G.ops())
    S.Configs.push_back(ParallelConfig::single(G.outputType(O).rank(), Device));
  return S;
}

/// (kind, device, start, end) of every task, in key order.
std::vector<std::tuple<TaskKind, DeviceId, double, double>>
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

using K = TaskKind;

TEST_P(SimulatorTest, OneDeviceRunsEverythingInOrder) {
  ASSERT_EQ(Train.G.numOps(), 3u); // Gemm, Relu, loss
  Simulator Sim(Train, M, Cost, withoutProgramCosts());
  EXPECT_EQ(run(Sim, allOn(Train.G, 0)), 9.5);
  using T = std::tuple<TaskKind, DeviceId, double, double>;
  EXPECT_THAT(tasks(Sim), ::testing::ElementsAre(
                              T{K::Forward, 0, 0, 1}, T{K::Forward, 0, 1, 2},
                              T{K::Forward, 0, 2, 3}, T{K::Backward, 0, 3, 5},
                              T{K::Backward, 0, 5, 7}, T{K::Backward, 0, 7, 9},
                              T{K::Update, 0, 9, 9.5}));
  SimReport R = Sim.report();
  EXPECT_EQ(R.BytesTransferred, 0);
  EXPECT_EQ(R.ComputeTime[0], 9.5);
  EXPECT_EQ(R.ComputeTime[1], 0);
}

TEST_P(SimulatorTest, DataParallelAllReducesTheWeightGradient) {
  Strategy S = allOn(Train.G, 0);
  for (const ir::Op &O : Train.G.ops()) {
    ParallelConfig &C = S[O.Id];
    if (C.Degrees.empty())
      C.Reduction = 2; // the mean loss: partial sums over the samples
    else
      C.Degrees[0] = 2;
  }
  Simulator Sim(Train, M, Cost, withoutProgramCosts());
  // Halves of every task on each device; the 256-byte gradient of W goes
  // round a ring of two: each device sends 2(n-1)/n * 256 = 256 bytes.
  EXPECT_EQ(run(Sim, S), 6.0);
  using T = std::tuple<TaskKind, DeviceId, double, double>;
  EXPECT_THAT(tasks(Sim),
              ::testing::ElementsAre(
                  T{K::Forward, 0, 0, 0.5}, T{K::Forward, 1, 0, 0.5},
                  T{K::Forward, 0, 0.5, 1}, T{K::Forward, 1, 0.5, 1},
                  T{K::Forward, 0, 1, 1.5}, T{K::Forward, 1, 1, 1.5},
                  T{K::Backward, 0, 1.5, 2.5}, T{K::Backward, 1, 1.5, 2.5},
                  T{K::Backward, 0, 2.5, 3.5}, T{K::Backward, 1, 2.5, 3.5},
                  T{K::Backward, 0, 3.5, 4.5}, T{K::Backward, 1, 3.5, 4.5},
                  T{K::GradAllReduce, 0, 4.5, 5.5}, T{K::Update, 0, 5.5, 6},
                  T{K::Update, 1, 5.5, 6}));
  SimReport R = Sim.report();
  EXPECT_EQ(R.BytesSent[0], 256);
  EXPECT_EQ(R.BytesSent[1], 256);
}

// With the cluster's measured all-reduce among the two devices, the
// gradient's all-reduce takes the measured time instead of the model's 1 s:
// 64 bytes and 1,024 each in 2 s, so 256 bytes, a fifth of the way, move at
// 32 + 480 / 5 = 128 B/s: 2 s.
TEST_P(SimulatorTest, AMeasuredAllReduceTakesItsMeasuredTime) {
  M = fakeDevices("two", 2, [&](MachineBuilder &B, auto &Ids) {
    B.addDuplex(Ids[0], Ids[1], 256, 0, "test");
    B.addMeasuredAllReduce({{0, 1}, SizeTable{{64, 1024}, {2.0, 2.0}}});
  });
  Strategy S = allOn(Train.G, 0);
  for (const ir::Op &O : Train.G.ops()) {
    ParallelConfig &C = S[O.Id];
    if (C.Degrees.empty())
      C.Reduction = 2;
    else
      C.Degrees[0] = 2;
  }
  Simulator Sim(Train, M, Cost, withoutProgramCosts());
  EXPECT_EQ(run(Sim, S), 7.0);
  using T = std::tuple<TaskKind, DeviceId, double, double>;
  auto Timeline = tasks(Sim);
  ASSERT_EQ(Timeline.size(), 15u);
  EXPECT_EQ(Timeline[12], (T{K::GradAllReduce, 0, 4.5, 6.5}));
  SimReport R = Sim.report();
  EXPECT_EQ(R.AllReduces, 1u);
  EXPECT_EQ(R.MeasuredAllReduces, 1u);
  EXPECT_EQ(R.Transfers, 0u);
}

// A measured transfer times the activation and its gradient (the route back
// has the same shape): 64 bytes in 1 s and 256 in 1 s measured, so 128
// bytes, a third of the way, move at 64 + 192 / 3 = 128 B/s, 1 s each way
// where the link's figures give 0.5
// (ModelParallelSendsActivationsAndGradients).
TEST_P(SimulatorTest, AMeasuredTransferTakesItsMeasuredTime) {
  M = fakeDevices("two", 2, [&](MachineBuilder &B, auto &Ids) {
    B.addDuplex(Ids[0], Ids[1], 256, 0, "test");
    B.addMeasuredTransfer({0, 1, SizeTable{{64, 256}, {1.0, 1.0}}});
  });
  Strategy S = allOn(Train.G, 1);
  S[0].FirstDevice = 0;
  Simulator Sim(Train, M, Cost, withoutProgramCosts());
  EXPECT_EQ(run(Sim, S), 11.5);
  using T = std::tuple<TaskKind, DeviceId, double, double>;
  EXPECT_THAT(tasks(Sim),
              ::testing::ElementsAre(
                  T{K::Forward, 0, 0, 1}, T{K::Transfer, 0, 1, 2},
                  T{K::Forward, 1, 2, 3}, T{K::Forward, 1, 3, 4},
                  T{K::Backward, 1, 4, 6}, T{K::Backward, 1, 6, 8},
                  T{K::GradTransfer, 1, 8, 9}, T{K::Backward, 0, 9, 11},
                  T{K::Update, 0, 11, 11.5}));
  SimReport R = Sim.report();
  EXPECT_EQ(R.Transfers, 2u);
  EXPECT_EQ(R.MeasuredTransfers, 2u);
  EXPECT_EQ(R.AllReduces, 0u);
}

TEST_P(SimulatorTest, ModelParallelSendsActivationsAndGradients) {
  Strategy S = allOn(Train.G, 1);
  S[0].FirstDevice = 0; // the Gemm on device 0, the rest on device 1
  Simulator Sim(Train, M, Cost, withoutProgramCosts());
  // H is 4x8 floats = 128 bytes: 0.5 s each way over the link.
  EXPECT_EQ(run(Sim, S), 10.5);
  using T = std::tuple<TaskKind, DeviceId, double, double>;
  EXPECT_THAT(tasks(Sim),
              ::testing::ElementsAre(
                  T{K::Forward, 0, 0, 1}, T{K::Transfer, 0, 1, 1.5},
                  T{K::Forward, 1, 1.5, 2.5}, T{K::Forward, 1, 2.5, 3.5},
                  T{K::Backward, 1, 3.5, 5.5}, T{K::Backward, 1, 5.5, 7.5},
                  T{K::GradTransfer, 1, 7.5, 8}, T{K::Backward, 0, 8, 10},
                  T{K::Update, 0, 10, 10.5}));
  EXPECT_EQ(Sim.report().BytesTransferred, 256);
}

TEST_P(SimulatorTest, ParameterSplitNeedsNoGradientSync) {
  // The Gemm split over its 8 output units: each device holds half of W
  // and needs all of x; Relu and the loss stay on device 1.
  Strategy S = allOn(Train.G, 1);
  S[0].Degrees = {1, 2};
  S[0].FirstDevice = 0;
  Simulator Sim(Train, M, Cost, withoutProgramCosts());
  run(Sim, S);
  SimReport R = Sim.report();
  // Device 0 sends its half of H (64 bytes) and receives the gradient of
  // that half back (64 bytes); W's halves are updated where they live.
  EXPECT_EQ(R.BytesSent[0], 64);
  EXPECT_EQ(R.BytesSent[1], 64);
  unsigned Updates = 0, AllReduces = 0;
  for (TaskId Id = 0; Id < Sim.graph().size(); ++Id) {
    const Task &T = Sim.graph().task(Id);
    Updates += T.Alive && T.Kind == K::Update;
    AllReduces += T.Alive && T.Kind == K::GradAllReduce;
  }
  EXPECT_EQ(Updates, 2u);
  EXPECT_EQ(AllReduces, 0u);
  // Each device holds 32 of W's 64 floats, plus a gradient and one
  // momentum buffer each, each 128 bytes rounded up to the 256 that
  // generated programs align buffers to.
  MemoryBreakdown Memory = memoryBreakdown(Sim.graph());
  EXPECT_EQ(Memory.Parameters[0], 3 * 256);
  EXPECT_EQ(Memory.Parameters[1], 3 * 256);
  // And a message buffer for the largest message it sends or receives, and
  // the gradients of its Gemm half's backward: its half of H's (x, a graph
  // input, has none).
  EXPECT_EQ(Memory.message(0), 64);
  EXPECT_EQ(Memory.message(1), 64);
  EXPECT_EQ(Memory.gradients(0), 256);
  EXPECT_EQ(Memory.total(0), Memory.Parameters[0] + Memory.Fixed[0] +
                                 Memory.Activations[0] + 64 + 256);
}

/// Data parallelism of mlp(/*WithBias=*/true) over a link with 0.5 s of
/// latency: a ring of two takes 2 latency steps, so an all-reduce of N bytes
/// takes 1 + N / 256 s.
class GradientBucketTest : public SimulatorTest {
protected:
  GradientBucketTest() {
    Train = mlp(/*WithBias=*/true);
    M = twoDevices(0.5);
  }
  Strategy dataParallel() const {
    Strategy S = allOn(Train.G, 0);
    for (const ir::Op &O : Train.G.ops()) {
      ParallelConfig &C = S[O.Id];
      if (C.Degrees.empty())
        C.Reduction = 2;
      else
        C.Degrees[0] = 2;
    }
    return S;
  }
  unsigned allReduces(const Simulator &Sim) const {
    unsigned Count = 0;
    for (TaskId Id = 0; Id < Sim.graph().size(); ++Id)
      Count += Sim.graph().task(Id).Alive &&
               Sim.graph().task(Id).Kind == K::GradAllReduce;
    return Count;
  }
};

TEST_P(GradientBucketTest, OneAllReducePerTensorWithoutBuckets) {
  Simulator Sim(Train, M, Cost, withoutProgramCosts());
  // Backward ends at 4.5 s (as in DataParallelAllReducesTheWeightGradient);
  // w's 256 bytes take 1 + 1 s, then b's 32 bytes 1 + 0.125 s on the same
  // link. Each device updates w at 6.5 and b at 7.625.
  EXPECT_EQ(run(Sim, dataParallel()), 8.125);
  EXPECT_EQ(allReduces(Sim), 2u);
  // w's gradient is the largest message.
  EXPECT_EQ(memoryBreakdown(Sim.graph()).message(0), 256);
  using T = std::tuple<TaskKind, DeviceId, double, double>;
  auto Timeline = tasks(Sim);
  std::vector<T> Tail(Timeline.end() - 6, Timeline.end());
  EXPECT_THAT(Tail, ::testing::ElementsAre(T{K::GradAllReduce, 0, 4.5, 6.5},
                                           T{K::GradAllReduce, 0, 6.5, 7.625},
                                           T{K::Update, 0, 6.5, 7},
                                           T{K::Update, 1, 6.5, 7},
                                           T{K::Update, 0, 7.625, 8.125},
                                           T{K::Update, 1, 7.625, 8.125}));
}

TEST_P(GradientBucketTest, ABucketPaysTheLatencyOnce) {
  SimOptions Options = withoutProgramCosts();
  Options.GradientBucketBytes = 1024;
  Simulator Sim(Train, M, Cost, Options);
  // One all-reduce of 288 bytes: 1 + 1.125 s; then both updates on each
  // device, w's first (its key).
  EXPECT_EQ(run(Sim, dataParallel()), 7.625);
  EXPECT_EQ(allReduces(Sim), 1u);
  using T = std::tuple<TaskKind, DeviceId, double, double>;
  auto Timeline = tasks(Sim);
  std::vector<T> Tail(Timeline.end() - 5, Timeline.end());
  EXPECT_THAT(Tail, ::testing::ElementsAre(T{K::GradAllReduce, 0, 4.5, 6.625},
                                           T{K::Update, 0, 6.625, 7.125},
                                           T{K::Update, 1, 6.625, 7.125},
                                           T{K::Update, 0, 7.125, 7.625},
                                           T{K::Update, 1, 7.125, 7.625}));
  EXPECT_EQ(Sim.report().BytesSent[0], 288);
  // The packed bucket is the largest message: w and b together.
  EXPECT_EQ(memoryBreakdown(Sim.graph()).message(0), 288);
  EXPECT_EQ(memoryBreakdown(Sim.graph()).message(1), 288);
  for (TaskId Id = 0; Id < Sim.graph().size(); ++Id) {
    if (!Sim.graph().task(Id).Alive ||
        Sim.graph().task(Id).Kind != K::GradAllReduce)
      continue;
    llvm::ArrayRef<BucketPart> Parts = Sim.graph().bucketParts(Id);
    ASSERT_EQ(Parts.size(), 2u);
    EXPECT_EQ(Train.G.tensor(Parts[0].Tensor).Name, "w");
    EXPECT_EQ(Train.G.tensor(Parts[1].Tensor).Name, "b");
  }
}

TEST_P(GradientBucketTest, ATensorOverTheBucketSizeStartsANewBucket) {
  // w alone (256 bytes) is over 100: w and b are all-reduced apart.
  SimOptions Options = withoutProgramCosts();
  Options.GradientBucketBytes = 100;
  Simulator Sim(Train, M, Cost, Options);
  EXPECT_EQ(run(Sim, dataParallel()), 8.125);
  EXPECT_EQ(allReduces(Sim), 2u);
}

TEST_P(GradientBucketTest, ASimulatorCanChangeItsBucketSize) {
  // Without buckets, then one bucket, then without again: the timelines of
  // the two tests above, and delta simulation goes on from there.
  Simulator Sim(Train, M, Cost, withoutProgramCosts());
  EXPECT_EQ(run(Sim, dataParallel()), 8.125);
  Sim.setGradientBucket(1024);
  EXPECT_EQ(run(Sim, dataParallel()), 7.625);
  EXPECT_EQ(allReduces(Sim), 1u);
  EXPECT_EQ(Sim.graph().options().GradientBucketBytes, 1024);
  EXPECT_EQ(memoryBreakdown(Sim.graph()).message(0), 288);
  Sim.setGradientBucket(0);
  EXPECT_EQ(run(Sim, dataParallel()), 8.125);
  EXPECT_EQ(allReduces(Sim), 2u);
  EXPECT_EQ(memoryBreakdown(Sim.graph()).message(0), 256);
}

TEST_P(GradientBucketTest, ParameterSplitTensorsAreNotInTheBucket) {
  // The Gemm split over its outputs: each device holds its halves of w
  // and b, nothing to all-reduce, bucket or not.
  SimOptions Options = withoutProgramCosts();
  Options.GradientBucketBytes = 1024;
  Strategy S = allOn(Train.G, 1);
  S[0].Degrees = {1, 2};
  S[0].FirstDevice = 0;
  Simulator Sim(Train, M, Cost, Options);
  run(Sim, S);
  EXPECT_EQ(allReduces(Sim), 0u);
}

/// Three devices, each pair joined by a link of its own (256 B/s each way).
Machine star() {
  return fakeDevices("star", 3, [](MachineBuilder &B, auto &Ids) {
    B.addDuplex(Ids[0], Ids[1], 256, 0, "a");
    B.addDuplex(Ids[0], Ids[2], 256, 0, "b");
    B.addDuplex(Ids[1], Ids[2], 256, 0, "c"); // unused; every pair connects
  });
}

// x -> a = Gemm(x, w) on d0, read by b = Relu(a) on d1 and c = Relu(a) on d2,
// then Add(b, c) and the loss on d0. a's two forward transfers (128 bytes,
// 0.5 s each) leave d0 over different links: at once in FlexFlow's model,
// one after the other when d0 takes part in one communication at a time,
// as generated programs run them.
TEST(CommunicationModel, ADeviceSendsOneMessageAtATimeAsProgramsDo) {
  ir::Graph G;
  auto [X, Labels] = batchInputs(G);
  ir::TensorId W = G.addTensor("w", f32({8, 8}), TensorRole::Parameter);
  ir::TensorId A =
      add(G, OpKind::Gemm, {X, W}, attrs({{"transB", int64_t(1)}}), "a");
  ir::TensorId B1 = add(G, OpKind::Relu, {A}, {}, "b");
  ir::TensorId C = add(G, OpKind::Relu, {A}, {}, "c");
  ir::TensorId Sum = add(G, OpKind::Add, {B1, C}, {}, "sum");
  ir::TensorId L = add(G, OpKind::SoftmaxCrossEntropyLoss, {Sum, Labels},
                       attrs({{"reduction", std::string("mean")}}), "loss");
  G.addOutput(L);
  auto T = ir::deriveTraining(std::move(G), ir::LossKind::ModelOutput);
  ASSERT_TRUE(static_cast<bool>(T)) << llvm::toString(T.takeError());
  Machine M = star();
  FakeCost Cost;
  Strategy S = allOn(T->G, 0);
  S[1] = ParallelConfig::single(2, 1);
  S[2] = ParallelConfig::single(2, 2);

  auto ForwardSendsOfA = [&](bool Serial) {
    SimOptions Options = withoutProgramCosts();
    Options.SerialCommunication = Serial;
    Simulator Sim(*T, M, Cost, Options);
    Sim.simulate(S);
    std::vector<std::pair<double, double>> Spans;
    for (auto [Kind, Device, Start, End] : tasks(Sim))
      if (Kind == TaskKind::Transfer && Device == 0 && Start < 2)
        Spans.push_back({Start, End});
    std::sort(Spans.begin(), Spans.end());
    return Spans;
  };
  using Spans = std::vector<std::pair<double, double>>;
  EXPECT_EQ(ForwardSendsOfA(false), (Spans{{1.0, 1.5}, {1.0, 1.5}}));
  EXPECT_EQ(ForwardSendsOfA(true), (Spans{{1.0, 1.5}, {1.5, 2.0}}));
}

/// What generated programs do besides kernels and messages, charged as
/// they do it (SimOptions::CopyTasks and BlockingCalls, the default).
class ProgramCostTest : public SimulatorTest {};

// The Gemm on d0, the rest on d1. H (128 bytes) is packed on d0 (0.25 s),
// sent (0.5 s, while d1 waits in the receive) and unpacked on d1 (0.25 s);
// its gradient is packed on d1, sent to d0 and added there (0.375 s). The
// Relu's output is the loss's input as it is: no copy.
TEST_P(ProgramCostTest, AMessageIsPackedSentAndUnpacked) {
  Strategy S = allOn(Train.G, 1);
  S[0].FirstDevice = 0;
  Simulator Sim(Train, M, Cost);
  EXPECT_EQ(run(Sim, S), 11.625);
  using T = std::tuple<TaskKind, DeviceId, double, double>;
  EXPECT_THAT(tasks(Sim),
              ::testing::ElementsAre(
                  T{K::Forward, 0, 0, 1}, T{K::Copy, 0, 1, 1.25},
                  T{K::Transfer, 0, 1.25, 1.75}, T{K::Copy, 1, 1.75, 2},
                  T{K::Forward, 1, 2, 3}, T{K::Forward, 1, 3, 4},
                  T{K::Backward, 1, 4, 6}, T{K::Backward, 1, 6, 8},
                  T{K::Copy, 1, 8, 8.25}, T{K::GradTransfer, 1, 8.25, 8.75},
                  T{K::Copy, 0, 8.75, 9.125}, T{K::Backward, 0, 9.125, 11.125},
                  T{K::Update, 0, 11.125, 11.625}));
  SimReport R = Sim.report();
  EXPECT_EQ(R.CopyTime[0], 0.625);
  EXPECT_EQ(R.CopyTime[1], 0.5);
  EXPECT_EQ(R.ComputeTime[0], 3.5);
  EXPECT_EQ(R.BytesTransferred, 256);
}

// The Gemm split over samples on d0 and d1, the rest on d0: the Relu
// gathers H from its local half (64 bytes copied) and d1's (packed, sent,
// unpacked); back, its gradient's local half is added to the Gemm's (0.1875
// s) and the other packed for d1, which adds it (0.1875 s). Both Gemm
// halves read all of w: its 256-byte gradient is all-reduced (1 s, both
// ranks waiting in it: the fake devices are CPUs), packed and unpacked at
// each update (0.5 + 2 * 0.5 s).
TEST_P(ProgramCostTest, APartitionGathersLocalAndReceivedParts) {
  Strategy S = allOn(Train.G, 0);
  S[0].Degrees = {2, 1};
  Simulator Sim(Train, M, Cost);
  EXPECT_EQ(run(Sim, S), 11.375);
  using T = std::tuple<TaskKind, DeviceId, double, double>;
  EXPECT_THAT(
      tasks(Sim),
      ::testing::ElementsAre(
          T{K::Forward, 0, 0, 0.5}, T{K::Forward, 1, 0, 0.5},
          T{K::Copy, 1, 0.5, 0.625}, T{K::Transfer, 1, 0.625, 0.875},
          T{K::Copy, 0, 0.875, 1.125}, T{K::Forward, 0, 1.125, 2.125},
          T{K::Forward, 0, 2.125, 3.125}, T{K::Backward, 0, 3.125, 5.125},
          T{K::Backward, 0, 5.125, 7.125}, T{K::Copy, 0, 7.125, 7.4375},
          T{K::GradTransfer, 0, 7.4375, 7.6875}, T{K::Copy, 1, 7.6875, 7.875},
          T{K::Backward, 0, 7.4375, 8.4375}, T{K::Backward, 1, 7.875, 8.875},
          T{K::GradAllReduce, 0, 8.875, 9.875}, T{K::Update, 0, 9.875, 11.375},
          T{K::Update, 1, 9.875, 11.375}));
  // The update's packing and unpacking counts as copies.
  SimReport R = Sim.report();
  EXPECT_EQ(R.CopyTime[0], 0.25 + 0.3125 + 1);
  EXPECT_EQ(R.ComputeTime[0], 0.5 + 1 + 1 + 2 + 2 + 1 + 0.5);
  EXPECT_EQ(R.CopyTime[1], 0.125 + 0.1875 + 1);
}

// x feeds a = Gemm(x, w) on d0 and b = Relu(Relu(x)) on d1, summed on d1. a is
// ready to go at 1.25 s (packed), but d1 computes until 2 s: a receive
// waits for its rank, so the message moves at 2 s, where FlexFlow's model
// moves it at once.
TEST_P(ProgramCostTest, AReceiveWaitsForItsRank) {
  ir::Graph G;
  auto [X, Labels] = batchInputs(G);
  ir::TensorId W = G.addTensor("w", f32({8, 8}), TensorRole::Parameter);
  ir::TensorId A =
      add(G, OpKind::Gemm, {X, W}, attrs({{"transB", int64_t(1)}}), "a");
  ir::TensorId B1 = add(G, OpKind::Relu, {X}, {}, "b1");
  ir::TensorId B2 = add(G, OpKind::Relu, {B1}, {}, "b2");
  ir::TensorId Sum = add(G, OpKind::Add, {A, B2}, {}, "sum");
  ir::TensorId L = add(G, OpKind::SoftmaxCrossEntropyLoss, {Sum, Labels},
                       attrs({{"reduction", std::string("mean")}}), "loss");
  G.addOutput(L);
  auto Trained = ir::deriveTraining(std::move(G), ir::LossKind::ModelOutput);
  ASSERT_TRUE(static_cast<bool>(Trained))
      << llvm::toString(Trained.takeError());
  Train = std::move(*Trained);
  Strategy S = allOn(Train.G, 1);
  S[0].FirstDevice = 0;
  auto SpanOfA = [&](bool Blocking) {
    SimOptions Options;
    Options.BlockingCalls = Blocking;
    Simulator Sim(Train, M, Cost, Options);
    run(Sim, S);
    for (auto [Kind, Device, Start, End] : tasks(Sim))
      if (Kind == K::Transfer)
        return std::make_pair(Start, End);
    return std::make_pair(-1.0, -1.0);
  };
  EXPECT_EQ(SpanOfA(true), std::make_pair(2.0, 2.5));
  EXPECT_EQ(SpanOfA(false), std::make_pair(1.25, 1.75));
}

/// mlp(/*WithBias=*/true), data parallel over a link with 0.5 s of latency
/// (GradientBucketTest): w's all-reduce 4.5-6.5 s, b's after it, 1.125 s.
class BlockingAllReduceTest : public GradientBucketTest {
protected:
  /// The same two devices as GPUs (a CUDA architecture) when Gpu.
  double runOn(bool Gpu) {
    M = fakeDevices(
        "two", 2,
        [&](MachineBuilder &B, auto &Ids) {
          B.addDuplex(Ids[0], Ids[1], 256, 0.5, "test");
        },
        Gpu ? "90" : "");
    Simulator Sim(Train, M, Cost);
    double Time = run(Sim, dataParallel());
    Timeline = tasks(Sim);
    return Time;
  }
  std::vector<std::tuple<TaskKind, DeviceId, double, double>> Timeline;
};

// On CPU ranks an all-reduce holds its members (MPI sums in the call): w's
// update (0.5 s, and 1 s packing and unpacking its 256 bytes) waits for b's
// all-reduce, which was ready first; on GPUs it runs beside it.
TEST_P(BlockingAllReduceTest, OnCpuRanksAnAllReduceHoldsItsMembers) {
  using T = std::tuple<TaskKind, DeviceId, double, double>;
  EXPECT_EQ(runOn(/*Gpu=*/false), 9.75);
  std::vector<T> Tail(Timeline.end() - 6, Timeline.end());
  EXPECT_THAT(Tail, ::testing::ElementsAre(T{K::GradAllReduce, 0, 4.5, 6.5},
                                           T{K::GradAllReduce, 0, 6.5, 7.625},
                                           T{K::Update, 0, 7.625, 9.125},
                                           T{K::Update, 1, 7.625, 9.125},
                                           T{K::Update, 0, 9.125, 9.75},
                                           T{K::Update, 1, 9.125, 9.75}));
  EXPECT_EQ(runOn(/*Gpu=*/true), 8.625);
  Tail.assign(Timeline.end() - 6, Timeline.end());
  EXPECT_THAT(Tail, ::testing::ElementsAre(
                        T{K::GradAllReduce, 0, 4.5, 6.5},
                        T{K::GradAllReduce, 0, 6.5, 7.625},
                        T{K::Update, 0, 6.5, 8}, T{K::Update, 1, 6.5, 8},
                        T{K::Update, 0, 8, 8.625}, T{K::Update, 1, 8, 8.625}));
}

INSTANTIATE_TEST_SUITE_P(FullAndDelta, ProgramCostTest, ::testing::Bool(),
                         [](const auto &Info) {
                           return Info.param ? "Delta" : "Full";
                         });
INSTANTIATE_TEST_SUITE_P(FullAndDelta, BlockingAllReduceTest, ::testing::Bool(),
                         [](const auto &Info) {
                           return Info.param ? "Delta" : "Full";
                         });

INSTANTIATE_TEST_SUITE_P(FullAndDelta, GradientBucketTest, ::testing::Bool(),
                         [](const auto &Info) {
                           return Info.param ? "Delta" : "Full";
                         });

INSTANTIATE_TEST_SUITE_P(FullAndDelta, SimulatorTest, ::testing::Bool(),
                         [](const auto &Info) {
                           return Info.param ? "Delta" : "Full";
                         });

} // namespace

// What the memory model keeps per device for buffers sized by their largest
// user: each size counted as often as added, the largest while any counts.
TEST(SizeCounts, KeepsTheLargestSizeStillCounted) {
  SizeCounts Sizes;
  EXPECT_EQ(Sizes.largest(), 0);
  for (double Bytes : {256.0, 4096.0, 1024.0, 4096.0})
    Sizes.add(Bytes);
  EXPECT_EQ(Sizes.largest(), 4096);
  Sizes.remove(4096);
  EXPECT_EQ(Sizes.largest(), 4096); // added twice
  Sizes.remove(4096);
  EXPECT_EQ(Sizes.largest(), 1024);
  Sizes.remove(256);
  EXPECT_EQ(Sizes.largest(), 1024);
  Sizes.remove(1024);
  EXPECT_EQ(Sizes.largest(), 0);
}
