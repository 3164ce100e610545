//===- tests/runtime_program/PlacementTest.cpp - Ranks on planned hosts ---===//
//
// The start-up check of where the launcher put the ranks against the plan's
// nodes: agreeing placements and one-host jobs say nothing; a node split
// over hosts, or two nodes on one host of a multi-host job, is named with
// its first pair of ranks and the mpirun mapping that fixes it.
//
//===----------------------------------------------------------------------===//
#include "runtime_lib/program/Placement.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

using namespace onnx2soap::rt::program;
using ::testing::HasSubstr;

namespace {

const std::vector<std::string> TwoNodes = {"node0/gpu0", "node0/gpu1",
                                           "node1/gpu0", "node1/gpu1"};

TEST(Placement, NodeIsTheNameBeforeTheSlash) {
  EXPECT_EQ(nodeOf("node1/gpu2"), "node1");
  EXPECT_EQ(nodeOf("rack3-a/cpu0"), "rack3-a");
  EXPECT_EQ(nodeOf("lonely"), "lonely");
}

TEST(Placement, AgreeingPlacementsAndOneHostJobsSayNothing) {
  EXPECT_EQ(placementWarning(TwoNodes, {7, 7, 9, 9}), "");
  // One host emulating the cluster (the CPU tests, a workstation).
  EXPECT_EQ(placementWarning(TwoNodes, {7, 7, 7, 7}), "");
  // A rank count the plan does not have is the runner's error to report.
  EXPECT_EQ(placementWarning(TwoNodes, {7, 9}), "");
}

TEST(Placement, NamesANodeSplitOverHosts) {
  // Round-robin over two hosts (Slurm's cyclic distribution).
  std::string W = placementWarning(TwoNodes, {7, 9, 7, 9});
  EXPECT_THAT(W, HasSubstr("the plan puts ranks 0 and 1 on one node (node0) "
                           "but they run on different hosts"));
  EXPECT_THAT(W, HasSubstr("mpirun --map-by ppr:2:node"));
}

TEST(Placement, NamesTwoNodesSharingAHost) {
  std::string W = placementWarning(
      {"node0/gpu0", "node1/gpu0", "node2/gpu0", "node3/gpu0"}, {7, 7, 9, 9});
  EXPECT_THAT(W, HasSubstr("ranks 0 and 1 run on one host but the plan puts "
                           "them on node0 and node1"));
  EXPECT_THAT(W, HasSubstr("ppr:1:node"));
}

} // namespace
