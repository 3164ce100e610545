//===- tests/soap_search/KernelScratchMemoryTest.cpp - Scratch in the peak ===//
//
// The memory model counts each device's largest kernel scratch
// (simulator/KernelScratch.h) and its libraries' memory in its peak, on a
// sample model's plan.
//
//===----------------------------------------------------------------------===//
#include "PlannerTestUtil.h"
#include "simulator/CostModel.h"
#include "simulator/Simulator.h"
#include "soap_search/Builtins.h"
#include "gtest/gtest.h"

using namespace onnx2soap;
using namespace onnx2soap::simulator;

namespace {

TEST(KernelScratchMemory, TheMemoryModelCountsEachDevicesLargestCall) {
  // tiny_cnn data parallel on 2 K80s: every device runs each convolution,
  // so its scratch is the workspace (64 MiB by default) plus nothing larger;
  // the backend holds 4 MiB of cuBLAS workspace on each.
  ir::TrainingGraph T = test::training("samples/tiny_cnn.onnx", 8);
  simulator::Machine M = test::machine("paper-k80", 2);
  AnalyticCostModel Cost;
  Strategy S =
      soap_search::builtin(soap_search::Builtin::DataParallel, T.G, M, Cost);
  Simulator Sim(T, M, Cost);
  Sim.simulate(S);
  SimReport R = Sim.report();
  ASSERT_EQ(R.KernelScratch.size(), 2u);
  double Largest = 0;
  const TaskGraph &Graph = Sim.graph();
  for (TaskId Id = 0; Id < Graph.size(); ++Id)
    if (Graph.task(Id).Alive && Graph.task(Id).Device == 0)
      Largest = std::max(Largest, Graph.task(Id).ScratchMemory);
  EXPECT_GE(Largest, 64.0 * (1 << 20));
  EXPECT_EQ(R.KernelScratch[0], Largest);
  EXPECT_EQ(R.KernelScratch[1], Largest);
  MemoryBreakdown B = memoryBreakdown(Graph);
  EXPECT_EQ(R.PeakMemory[0], B.Parameters[0] + B.Fixed[0] + B.Activations[0] +
                                 B.message(0) + B.gradients(0) + Largest +
                                 (4 << 20) + B.runtime(0));
}

} // namespace
