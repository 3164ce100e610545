//===- tests/simulator/MachineTest.cpp - Presets, routes, collectives -----===//
//
// The machine model: presets against their datasheet figures, routes on the
// paper's K80 topology (and the others), `--gpus N` restriction, the
// canonical JSON form reading back to itself, and collectives' costs.
// Cluster files are ClusterFileTest.cpp's.
//
//===----------------------------------------------------------------------===//
#include "simulator/Machine.h"
#include "MachineTestUtil.h"
#include "simulator/TaskGraph.h"
#include "gtest/gtest.h"

using namespace onnx2soap::simulator;
using namespace onnx2soap::simulator::test;
namespace json = llvm::json;

namespace {

//===-- Presets -----------------------------------------------------------===//

struct PresetCase {
  const char *Name;
  unsigned Devices, Nodes;
  const char *Type;
  double GiB;
  const char *Arch;
  double TflopsF32;
};

class PresetTest : public ::testing::TestWithParam<PresetCase> {};

TEST_P(PresetTest, MatchesItsDatasheet) {
  const PresetCase &C = GetParam();
  Machine M = mustLoad(C.Name);
  EXPECT_EQ(M.Name, C.Name);
  EXPECT_EQ(M.numDevices(), C.Devices);
  EXPECT_EQ(M.numNodes(), C.Nodes);
  ASSERT_EQ(M.deviceTypes().size(), 1u);
  const DeviceType &T = M.deviceTypes()[0];
  EXPECT_EQ(T.Name, C.Type);
  EXPECT_EQ(T.MemoryCapacity, static_cast<int64_t>(C.GiB * (1ll << 30)));
  EXPECT_EQ(T.CudaArch, C.Arch);
  EXPECT_DOUBLE_EQ(T.PeakFlopsF32, C.TflopsF32 * 1e12);
  EXPECT_GE(T.PeakFlopsF16, T.PeakFlopsF32);
  EXPECT_GT(T.MemoryBandwidth, 0);
  EXPECT_GT(T.LaunchOverhead, 0);
  // GPUs keep convolutions within the default workspace; CPUs have none.
  EXPECT_EQ(T.ConvWorkspace, *C.Arch ? 64ll << 20 : 0);
  // cuBLAS's workspace: 32 MiB from Hopper (sm_90) on, 4 MiB before.
  int64_t Blas = !*C.Arch ? 0 : C.Arch[0] == '9' ? 32ll << 20 : 4ll << 20;
  EXPECT_EQ(T.libraryMemory(), Blas);
  for (DeviceId D = 0; D < M.numDevices(); ++D) {
    EXPECT_EQ(M.endpoint(D).Name, M.device(D).Name);
    EXPECT_EQ(M.endpoint(D).Kind, EndpointKind::Device);
    EXPECT_EQ(M.device(D).Node, D / (C.Devices / C.Nodes));
    EXPECT_EQ(M.device(D).Local, D % (C.Devices / C.Nodes));
  }
  expectWellFormedRoutes(M);
}

INSTANTIATE_TEST_SUITE_P(
    Presets, PresetTest,
    ::testing::Values(PresetCase{"paper-p100", 16, 4, "P100", 16, "60", 10.6},
                      PresetCase{"paper-k80", 64, 16, "K80", 12, "37", 4.37},
                      PresetCase{"tensoropt-v100", 16, 2, "V100", 16, "70",
                                 15.7},
                      PresetCase{"dgx-h100", 64, 8, "H100-SXM", 80, "90", 67},
                      PresetCase{"dgx-h100:2", 16, 2, "H100-SXM", 80, "90", 67},
                      PresetCase{"cpu:1", 1, 1, "cpu", 4, "", 0.1},
                      PresetCase{"cpu:4", 4, 1, "cpu", 4, "", 0.1},
                      PresetCase{"cpu:64", 64, 1, "cpu", 4, "", 0.1}),
    [](const auto &Info) {
      std::string Name = Info.param.Name;
      for (char &C : Name)
        if (!isalnum(static_cast<unsigned char>(C)))
          C = '_';
      return Name;
    });

TEST(PresetList, DescribesEveryPreset) {
  ASSERT_EQ(Machine::presets().size(), 5u);
  for (const PresetInfo &P : Machine::presets()) {
    EXPECT_FALSE(P.Description.empty()) << P.Name;
    if (P.Devices == 0)
      continue; // cpu:N
    Machine M = mustLoad(P.Name);
    EXPECT_EQ(M.numDevices(), P.Devices) << P.Name;
    EXPECT_EQ(M.numNodes(), P.Nodes) << P.Name;
    EXPECT_EQ(M.deviceTypes()[0].Name, P.DeviceType) << P.Name;
  }
}

void expectLoadError(llvm::StringRef Name, llvm::StringRef Expected) {
  auto M = Machine::load(Name);
  ASSERT_FALSE(static_cast<bool>(M)) << Name.str();
  std::string Message = llvm::toString(M.takeError());
  EXPECT_NE(Message.find(Expected.str()), std::string::npos)
      << "message: " << Message << "\nexpected to contain: " << Expected.str();
}

TEST(PresetList, UnknownNamesListTheKnownOnes) {
  expectLoadError("paper-k8O", "unknown cluster preset 'paper-k8O' (known: "
                               "paper-p100, paper-k80, tensoropt-v100, "
                               "dgx-h100, cpu:N;");
  expectLoadError("cpu:0", "N of cpu:N must be 1 to 64");
  expectLoadError("cpu:65", "N of cpu:N must be 1 to 64");
  expectLoadError("cpu:two", "N of cpu:N must be 1 to 64");
  expectLoadError("dgx-h100:0", "N of dgx-h100:N must be 1 to 128");
  expectLoadError("/no/such/cluster.json",
                  "cannot read '/no/such/cluster.json'");
  expectLoadError("missing.json", "cannot read 'missing.json'");
}

//===-- Routes ------------------------------------------------------------===//

TEST(Routes, K80PairsShareAPcieSwitch) {
  Machine M = mustLoad("paper-k80");
  EXPECT_EQ(hops(M, 0, 1),
            (std::vector<std::string>{"node0/pcie0", "node0/gpu1"}));
  EXPECT_EQ(hops(M, 2, 3),
            (std::vector<std::string>{"node0/pcie1", "node0/gpu3"}));
  EXPECT_EQ(hops(M, 1, 0),
            (std::vector<std::string>{"node0/pcie0", "node0/gpu0"}));
}

TEST(Routes, K80OtherPairGoesThroughTheHostBridge) {
  Machine M = mustLoad("paper-k80");
  EXPECT_EQ(hops(M, 0, 2),
            (std::vector<std::string>{"node0/pcie0", "node0/host",
                                      "node0/pcie1", "node0/gpu2"}));
}

TEST(Routes, K80AcrossNodesGoesThroughNicsAndNetwork) {
  Machine M = mustLoad("paper-k80");
  DeviceId Node1Gpu0 = 4;
  ASSERT_EQ(M.device(Node1Gpu0).Name, "node1/gpu0");
  EXPECT_EQ(hops(M, 0, Node1Gpu0),
            (std::vector<std::string>{"node0/pcie0", "node0/host", "node0/ib0",
                                      "ib", "node1/ib0", "node1/host",
                                      "node1/pcie0", "node1/gpu0"}));
  // Latency: 4 PCIe hops of 1 us, 2 NIC-network hops of 1 us, attach 0;
  // bandwidth: the 56 Gb/s NIC.
  EXPECT_NEAR(M.transferTime(0, Node1Gpu0, 7e6), 6e-6 + 1e-3, 1e-12);
  EXPECT_NEAR(M.transferTime(0, 1, 15.75e6), 2e-6 + 1e-3, 1e-12);
  EXPECT_EQ(M.transferTime(3, 3, 1e9), 0);
}

TEST(Routes, V100HybridCubeMesh) {
  Machine M = mustLoad("tensoropt-v100");
  // Two NVLink bricks between GPU 0 and 3.
  ASSERT_EQ(M.route(0, 3).size(), 1u);
  EXPECT_EQ(M.link(M.route(0, 3)[0]).Kind, "nvlink");
  EXPECT_DOUBLE_EQ(M.link(M.route(0, 3)[0]).Bandwidth, 50e9);
  EXPECT_DOUBLE_EQ(M.link(M.route(0, 1)[0]).Bandwidth, 25e9);
  // No NVLink between 0 and 5, and GPUs do not forward: PCIe and UPI.
  EXPECT_EQ(hops(M, 0, 5),
            (std::vector<std::string>{"node0/pcie0", "node0/cpu0", "node0/cpu1",
                                      "node0/pcie2", "node0/gpu5"}));
}

TEST(Routes, DgxH100UsesEachGpusOwnNic) {
  Machine M = mustLoad("dgx-h100:2");
  EXPECT_EQ(hops(M, 0, 3),
            (std::vector<std::string>{"node0/nvswitch", "node0/gpu3"}));
  EXPECT_EQ(hops(M, 0, 11),
            (std::vector<std::string>{"node0/nic0", "ib", "node1/nic3",
                                      "node1/gpu3"}));
}

TEST(Routes, CpuRanksMeetInSharedMemory) {
  Machine M = mustLoad("cpu:4");
  EXPECT_EQ(hops(M, 2, 1),
            (std::vector<std::string>{"node0/shm", "node0/cpu1"}));
  EXPECT_NEAR(M.transferTime(2, 1, 1e7), 1e-6 + 1e-3, 1e-12);
}

TEST(Routes, TiesGoToTheSmallerLinkIds) {
  // Two equal paths a -> b, through s1 (links added first) and s2.
  MachineBuilder B("tie");
  DeviceType T;
  T.Name = "t";
  unsigned Type = B.addDeviceType(T);
  B.addNode();
  EndpointId S2 = B.addEndpoint("s2", 0);
  EndpointId A = B.addDevice(Type, "a");
  EndpointId S1 = B.addEndpoint("s1", 0);
  EndpointId Dev = B.addDevice(Type, "b");
  B.addDuplex(A, S1, 1e9, 1e-6, "x");
  B.addDuplex(S1, Dev, 1e9, 1e-6, "x");
  B.addDuplex(A, S2, 1e9, 1e-6, "x");
  B.addDuplex(S2, Dev, 1e9, 1e-6, "x");
  auto M = B.finish();
  ASSERT_TRUE(static_cast<bool>(M)) << llvm::toString(M.takeError());
  // Devices come first whatever the order they were added in.
  EXPECT_EQ(M->endpoint(0).Name, "node0/a");
  EXPECT_EQ(M->endpoint(1).Name, "node0/b");
  EXPECT_EQ(hops(*M, 0, 1), (std::vector<std::string>{"node0/s1", "node0/b"}));
  EXPECT_EQ(hops(*M, 1, 0), (std::vector<std::string>{"node0/s1", "node0/a"}));
  EXPECT_EQ(M->link(M->route(0, 1)[0]).Name, "node0/a->node0/s1 (x)");
}

TEST(Routes, UnreachableDevicesAreAnError) {
  MachineBuilder B("split");
  DeviceType T;
  T.Name = "t";
  unsigned Type = B.addDeviceType(T);
  B.addNode();
  B.addDevice(Type, "a");
  B.addDevice(Type, "b");
  auto M = B.finish();
  ASSERT_FALSE(static_cast<bool>(M));
  EXPECT_EQ(llvm::toString(M.takeError()),
            "device 'node0/a' cannot reach 'node0/b' over the links");
}

//===-- --gpus N ----------------------------------------------------------===//

TEST(FirstDevices, KeepsWhatTheRoutesUse) {
  Machine K80 = mustLoad("paper-k80");
  auto Two = K80.firstDevices(2);
  ASSERT_TRUE(static_cast<bool>(Two)) << llvm::toString(Two.takeError());
  EXPECT_EQ(Two->numDevices(), 2u);
  EXPECT_EQ(Two->numNodes(), 1u);
  EXPECT_EQ(Two->numEndpoints(), 3u); // gpu0, gpu1, pcie0
  EXPECT_EQ(Two->numLinks(), 4u);
  EXPECT_EQ(hops(*Two, 0, 1), hops(K80, 0, 1));

  auto Six = K80.firstDevices(6);
  ASSERT_TRUE(static_cast<bool>(Six)) << llvm::toString(Six.takeError());
  EXPECT_EQ(Six->numDevices(), 6u);
  EXPECT_EQ(Six->numNodes(), 2u);
  for (DeviceId A = 0; A < 6; ++A)
    for (DeviceId B = 0; B < 6; ++B) {
      EXPECT_EQ(hops(*Six, A, B), hops(K80, A, B));
      EXPECT_DOUBLE_EQ(Six->transferTime(A, B, 1e6),
                       K80.transferTime(A, B, 1e6));
    }
  expectWellFormedRoutes(*Six);
  // Node 1 kept only pcie0, host and its NIC: gpu2 and gpu3 there are gone.
  EXPECT_EQ(Six->endpoint(Six->numEndpoints() - 1).Node, 1);

  auto All = K80.firstDevices(64);
  ASSERT_TRUE(static_cast<bool>(All));
  EXPECT_EQ(text(All->toJson()), text(K80.toJson()));
}

TEST(FirstDevices, OutOfRangeIsAnError) {
  Machine M = mustLoad("paper-p100");
  for (unsigned N : {0u, 17u}) {
    auto R = M.firstDevices(N);
    ASSERT_FALSE(static_cast<bool>(R));
    EXPECT_EQ(llvm::toString(R.takeError()),
              "cannot use " + std::to_string(N) +
                  " devices of cluster 'paper-p100': it has 16 (ask for 1 to "
                  "16)");
  }
}

//===-- Canonical JSON ----------------------------------------------------===//

TEST(CanonicalJson, ReadsBackToItself) {
  for (const char *Name : {"paper-p100", "paper-k80", "tensoropt-v100",
                           "dgx-h100:3", "cpu:1", "cpu:8"})
    expectRoundTrip(mustLoad(Name));
  expectRoundTrip(cantFail(mustLoad("paper-k80").firstDevices(6)));
  expectRoundTrip(cantFail(mustLoad("tensoropt-v100").firstDevices(11)));
}

TEST(CanonicalJson, RegularNodesFoldIntoATemplate) {
  json::Value J = mustLoad("paper-k80").toJson();
  const json::Object *Nodes = J.getAsObject()->getObject("nodes");
  ASSERT_NE(Nodes, nullptr);
  EXPECT_EQ(Nodes->getInteger("count").getValueOr(-1), 16);
  // Six K80s: node 1 differs from node 0, so nodes are listed.
  json::Value Six = cantFail(mustLoad("paper-k80").firstDevices(6)).toJson();
  EXPECT_NE(Six.getAsObject()->getArray("nodes"), nullptr);
}

TEST(CanonicalJson, SameMachineSameBytes) {
  EXPECT_EQ(text(mustLoad("dgx-h100").toJson()),
            text(mustLoad("dgx-h100").toJson()));
  EXPECT_NE(text(mustLoad("cpu:2").toJson()), text(mustLoad("cpu:3").toJson()));
}

// cpu:8: every route is two links through shared memory, 1 µs and 10 GB/s.
// A ring pays 2(n-1) = 14 latency steps, a binary tree 2 log2(8) = 6, but
// the tree's busiest link (device 1 sends to its parent and both children)
// carries the data 3 times where the ring's carry 2(n-1)/n of it once.
TEST(AllReduce, TreeForSmallMessagesRingForLargeOnes) {
  Machine M = mustLoad("cpu:8");
  std::vector<DeviceId> All = {0, 1, 2, 3, 4, 5, 6, 7};
  CollectiveCost Small = allReduceCost(M, All, 8);
  EXPECT_TRUE(Small.Tree);
  EXPECT_NEAR(Small.Time, 6 * 1e-6 + 3 * 8 / 1e10, 1e-15);
  EXPECT_DOUBLE_EQ(Small.BytesPerDevice, 2 * 7 / 8.0 * 8);
  CollectiveCost Large = allReduceCost(M, All, 1e8);
  EXPECT_FALSE(Large.Tree);
  EXPECT_NEAR(Large.Time, 14 * 1e-6 + 2 * 7 / 8.0 * 1e8 / 1e10, 1e-12);
  // Two devices: the tree is the ring.
  CollectiveCost Pair = allReduceCost(M, {0, 1}, 1e8);
  EXPECT_NEAR(Pair.Time, 2 * 1e-6 + 1e8 / 1e10, 1e-12);
}

// A generated program's ring cuts the elements into n chunks, [C c / n,
// C (c+1) / n): 3 floats over 4 ranks are chunks of 0, 1, 1 and 1. The
// member at position p sends all but chunk p+1 while reducing and all but
// chunk p+2 while gathering: 4, 4, 5 and 5 floats, 18 bytes on average as
// the collective's cost has it.
TEST(AllReduce, RingSharesAreWholeElements) {
  double Expected[] = {16, 16, 20, 20};
  double Sum = 0;
  for (size_t P = 0; P < 4; ++P) {
    EXPECT_EQ(ringBytesSent(12, 4, 4, P), Expected[P]) << "position " << P;
    Sum += ringBytesSent(12, 4, 4, P);
  }
  EXPECT_EQ(Sum, 4 * (2 * 3 / 4.0 * 12));
  // Divisible: every member sends 2(n-1)/n of the data.
  for (size_t P = 0; P < 4; ++P)
    EXPECT_EQ(ringBytesSent(64, 4, 4, P), 2 * 3 / 4.0 * 64);
  EXPECT_EQ(ringBytesSent(12, 4, 2, 0), 12);
  EXPECT_EQ(ringBytesSent(12, 4, 1, 0), 0);
}

} // namespace
