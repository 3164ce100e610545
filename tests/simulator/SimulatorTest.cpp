//===- tests/simulator/SimulatorTest.cpp - Timelines written by hand ------===//
//
// Timelines worked out on paper (SimulatorTestUtil.h: a fake cost model with
// round numbers, and two devices whose one link moves 256 bytes per second),
// each case run through full simulation and through delta simulation from
// another strategy. A device takes part in one communication at a time
// (SimOptions::SerialCommunication, the default). These cases leave out what
// else generated programs do (the box copies around edges, a call holding a
// waiting rank's device); ProgramCostTest.cpp charges them.
//
//===----------------------------------------------------------------------===//
#include "simulator/Simulator.h"
#include "SimulatorTestUtil.h"

using namespace onnx2soap;
using namespace onnx2soap::simulator;
using namespace onnx2soap::simulator::test;

namespace {

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
  Strategy S = dataParallelOnTwo(Train.G);
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
