//===- tests/simulator/TraceTest.cpp - How a trace names device groups ----===//
//
// A collective's event names its devices by runs, so that an event on each
// of N participants costs O(1) text for the groups strategies make (data
// parallelism over 1,024 GPUs wrote a 1,024-name list on each of 1,024
// tracks per BatchNorm layer: gigabytes).
//
//===----------------------------------------------------------------------===//
#include "simulator/Trace.h"
#include "MachineTestUtil.h"
#include <gtest/gtest.h>
#include <numeric>

using namespace onnx2soap::simulator;
using onnx2soap::simulator::test::mustLoad;

namespace {
std::string groupText(const Machine &M, std::vector<DeviceId> Group) {
  return deviceGroupText(M, Group);
}
} // namespace

TEST(TraceDeviceGroup, RunsAreWrittenByTheirEnds) {
  Machine M = mustLoad("paper-p100"); // 4 nodes of 4 GPUs
  EXPECT_EQ(groupText(M, {5}), "node1/gpu1");
  EXPECT_EQ(groupText(M, {0, 1}), "node0/gpu0, node0/gpu1");
  std::vector<DeviceId> All(16);
  std::iota(All.begin(), All.end(), 0);
  EXPECT_EQ(groupText(M, All), "node0/gpu0 to node3/gpu3");
  EXPECT_EQ(groupText(M, {0, 2, 4, 6}), "node0/gpu0 to node1/gpu2 by 2");
  EXPECT_EQ(groupText(M, {1, 5, 9, 13}), "node0/gpu1 to node3/gpu1 by 4");
  // Uneven groups: each run of three or more by its ends, the rest by name.
  EXPECT_EQ(groupText(M, {0, 1, 4, 5}),
            "node0/gpu0, node0/gpu1, node1/gpu0, node1/gpu1");
  EXPECT_EQ(groupText(M, {0, 1, 2, 3, 8, 12}),
            "node0/gpu0 to node0/gpu3, node2/gpu0, node3/gpu0");
  EXPECT_EQ(groupText(M, {0, 3, 4, 5, 6}),
            "node0/gpu0, node0/gpu3 to node1/gpu2");
}

TEST(TraceDeviceGroup, OneThousandGpusInOneRun) {
  Machine M = mustLoad("dgx-h100:128");
  ASSERT_EQ(M.numDevices(), 1024u);
  std::vector<DeviceId> All(1024);
  std::iota(All.begin(), All.end(), 0);
  EXPECT_EQ(groupText(M, All), "node0/gpu0 to node127/gpu7");
}
