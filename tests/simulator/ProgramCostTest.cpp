//===- tests/simulator/ProgramCostTest.cpp - Programs' own costs ----------===//
//
// Hand-written timelines (SimulatorTestUtil.h) of what FlexFlow's model of
// communication leaves out and generated programs do: a device taking part
// in one communication at a time, the box copies that pack, unpack and
// gather messages and add gradients back (a copy taking a second per 512
// bytes; adding, half as long again), a receive waiting for its rank, and
// on CPU ranks an all-reduce holding its members.
//
//===----------------------------------------------------------------------===//
#include "SimulatorTestUtil.h"

using namespace onnx2soap;
using namespace onnx2soap::simulator;
using namespace onnx2soap::simulator::test;

namespace {

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

} // namespace
