//===- tests/simulator/ClusterFileTest.cpp - Cluster files ----------------===//
//
// Cluster files: a valid file and its compact form, a table of broken
// files, each of which must give one line naming the file and the JSON
// path, and measured communication tables.
//
//===----------------------------------------------------------------------===//
#include "MachineTestUtil.h"
#include "simulator/Machine.h"
#include "simulator/TaskGraph.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"
#include "gtest/gtest.h"
#include <functional>

using namespace onnx2soap::simulator;
using namespace onnx2soap::simulator::test;
namespace json = llvm::json;

namespace {

//===-- Cluster files -----------------------------------------------------===//

/// Three nodes of two GPUs on a switch, a NIC each; every broken file below
/// starts from this one.
const char *ValidCluster = R"json({
  "name": "test",
  "device_types": [
    {"name": "G", "peak_TFLOPS_f32": 10, "memory_bandwidth_GBps": 500,
     "memory_GiB": 8, "launch_overhead_us": 5, "cuda_arch": "80"}
  ],
  "nodes": [
    {"devices": {"type": "G", "count": 2}, "switches": ["sw"],
     "nics": [{"name": "nic0", "bandwidth_GBps": 10, "latency_us": 2,
               "attach": ["sw"]}],
     "links": [{"from": "gpu0", "to": "sw", "kind": "pcie",
                "bandwidth_GBps": 16, "latency_us": 1},
               {"from": "gpu1", "to": "sw", "kind": "pcie",
                "bandwidth_GBps": 16, "latency_us": 1}]},
    {"devices": [{"type": "G", "names": ["a", "b"]}], "switches": ["sw"],
     "nics": [{"name": "nic0", "bandwidth_GBps": 10, "latency_us": 2,
               "attach": ["a", "b"]}],
     "links": [{"from": "a", "to": "b", "kind": "nvlink",
                "bandwidth_GBps": 20, "latency_us": 1, "duplex": false},
               {"from": "b", "to": "sw", "kind": "pcie",
                "bandwidth_GBps": 16, "latency_us": 1},
               {"from": "sw", "to": "a", "kind": "pcie",
                "bandwidth_GBps": 16, "latency_us": 1, "duplex": false}]},
    {"devices": {"type": "G", "count": 2, "prefix": "dev"},
     "nics": [{"name": "nic0", "bandwidth_GBps": 10, "latency_us": 2,
               "attach": ["dev0", "dev1"]}]}
  ],
  "network": {"name": "ib"}
})json";

json::Value validCluster() { return cantFail(json::parse(ValidCluster)); }

json::Object &root(json::Value &V) { return *V.getAsObject(); }
json::Object &node(json::Value &V, size_t I) {
  return *(*root(V).getArray("nodes"))[I].getAsObject();
}
json::Object &deviceType(json::Value &V) {
  return *(*root(V).getArray("device_types"))[0].getAsObject();
}
json::Object &link(json::Value &V, size_t Node, size_t I) {
  return *(*node(V, Node).getArray("links"))[I].getAsObject();
}

TEST(ClusterFile, TheValidFileReads) {
  auto M = Machine::fromJson(ValidCluster, "cluster.json");
  ASSERT_TRUE(static_cast<bool>(M)) << llvm::toString(M.takeError());
  EXPECT_EQ(M->numDevices(), 6u);
  EXPECT_EQ(M->numNodes(), 3u);
  EXPECT_EQ(M->device(2).Name, "node1/a");
  EXPECT_EQ(M->device(5).Name, "node2/dev1");
  EXPECT_DOUBLE_EQ(M->deviceTypes()[0].PeakFlopsF16, 10e12); // f32's
  EXPECT_DOUBLE_EQ(M->deviceTypes()[0].LaunchOverhead, 5e-6);
  EXPECT_EQ(M->deviceTypes()[0].MemoryCapacity, 8ll << 30);
  // A GPU type (it has a cuda_arch) without conv_workspace_MiB: 64 MiB;
  // sm_80's cuBLAS workspace: 4 MiB.
  EXPECT_EQ(M->deviceTypes()[0].ConvWorkspace, 64ll << 20);
  EXPECT_EQ(M->deviceTypes()[0].libraryMemory(), 4ll << 20);
  // a -> b is one way: b reaches a through the switch.
  EXPECT_EQ(hops(*M, 2, 3), (std::vector<std::string>{"node1/b"}));
  EXPECT_EQ(hops(*M, 3, 2), (std::vector<std::string>{"node1/sw", "node1/a"}));
  // node2's devices have no link between them; a NIC does not forward
  // between things attached to it, so they meet through the network.
  EXPECT_EQ(hops(*M, 4, 5),
            (std::vector<std::string>{"node2/nic0", "ib", "node2/nic0",
                                      "node2/dev1"}));
  expectWellFormedRoutes(*M);
  expectRoundTrip(*M);
}

TEST(ClusterFile, CompactNodesEqualTheirExpansion) {
  json::Value Compact = validCluster();
  json::Value Template = json::Object(node(Compact, 0));
  root(Compact)["nodes"] =
      json::Object{{"count", 3}, {"template", std::move(Template)}};
  json::Value Listed = validCluster();
  json::Value First = json::Object(node(Listed, 0));
  root(Listed)["nodes"] = json::Array{First, First, First};
  auto A = Machine::fromJsonValue(Compact, "compact.json");
  auto B = Machine::fromJsonValue(Listed, "listed.json");
  ASSERT_TRUE(A && B);
  EXPECT_EQ(text(A->toJson()), text(B->toJson()));
  EXPECT_EQ(A->numDevices(), 6u);
}

TEST(ClusterFile, ReadsFromAFile) {
  llvm::SmallString<128> Path;
  ASSERT_FALSE(llvm::sys::fs::createTemporaryFile("cluster", "json", Path));
  {
    std::error_code EC;
    llvm::raw_fd_ostream OS(Path, EC);
    ASSERT_FALSE(EC);
    OS << ValidCluster;
  }
  auto M = Machine::load(Path);
  llvm::sys::fs::remove(Path);
  ASSERT_TRUE(static_cast<bool>(M)) << llvm::toString(M.takeError());
  EXPECT_EQ(M->Name, "test");
}

struct BadCase {
  const char *Name;
  std::function<void(json::Value &)> Break;
  const char *Expected;
};

const BadCase BadCases[] = {
    {"RootNotObject", [](json::Value &V) { V = json::Array{}; },
     "cluster.json: expected an object"},
    {"UnknownTopKey", [](json::Value &V) { root(V)["nodez"] = 1; },
     "cluster.json: unknown key 'nodez' (did you mean 'nodes'?)"},
    {"UnknownKeyFarFromAll", [](json::Value &V) { root(V)["zzzzzzzzzz"] = 1; },
     "unknown key 'zzzzzzzzzz' (expected one of: version, name, "
     "device_types, nodes, network, measured)"},
    {"WrongVersion", [](json::Value &V) { root(V)["version"] = 2; },
     "cluster.json: version: this onnx2soap reads version 1 cluster files"},
    {"NoName", [](json::Value &V) { root(V).erase("name"); },
     "cluster.json: missing 'name'"},
    {"NameNotString", [](json::Value &V) { root(V)["name"] = 3; },
     "cluster.json: name: expected a string"},
    {"NoDeviceTypes",
     [](json::Value &V) { root(V)["device_types"] = json::Array{}; },
     "cluster.json: device_types: must not be empty"},
    {"DeviceTypesNotArray",
     [](json::Value &V) { root(V)["device_types"] = "G"; },
     "cluster.json: device_types: expected an array"},
    {"MissingPeak",
     [](json::Value &V) { deviceType(V).erase("peak_TFLOPS_f32"); },
     "cluster.json: device_types[0]: missing 'peak_TFLOPS_f32'"},
    {"PeakAsString",
     [](json::Value &V) { deviceType(V)["peak_TFLOPS_f32"] = "10"; },
     "cluster.json: device_types[0].peak_TFLOPS_f32: expected a number"},
    {"ZeroBandwidth",
     [](json::Value &V) { deviceType(V)["memory_bandwidth_GBps"] = 0; },
     "device_types[0].memory_bandwidth_GBps: must be greater than 0"},
    {"SubnormalBandwidth",
     [](json::Value &V) { deviceType(V)["memory_bandwidth_GBps"] = 1e-320; },
     "device_types[0].memory_bandwidth_GBps: is too small (at least 1e-12)"},
    {"TinyPeak",
     [](json::Value &V) { deviceType(V)["peak_TFLOPS_f32"] = 1e-13; },
     "device_types[0].peak_TFLOPS_f32: is too small (at least 1e-12)"},
    {"HugeLaunch",
     [](json::Value &V) { deviceType(V)["launch_overhead_us"] = 1e16; },
     "device_types[0].launch_overhead_us: is too large (at most 1e15)"},
    {"NegativeLaunch",
     [](json::Value &V) { deviceType(V)["launch_overhead_us"] = -1; },
     "device_types[0].launch_overhead_us: must not be negative"},
    {"UnitlessKey", [](json::Value &V) { deviceType(V)["memory"] = 8; },
     "device_types[0]: unknown key 'memory'"},
    {"BadArch", [](json::Value &V) { deviceType(V)["cuda_arch"] = "sm_80"; },
     "device_types[0].cuda_arch: 'sm_80' is not a compute capability"},
    {"HugeMemory", [](json::Value &V) { deviceType(V)["memory_GiB"] = 1e300; },
     "device_types[0].memory_GiB: is too large"},
    {"NegativeWorkspace",
     [](json::Value &V) { deviceType(V)["conv_workspace_MiB"] = -1; },
     "device_types[0].conv_workspace_MiB: must not be negative"},
    {"WorkspaceOverMemory",
     [](json::Value &V) { deviceType(V)["conv_workspace_MiB"] = 8193; },
     "device_types[0].conv_workspace_MiB: is more than the device's "
     "memory_GiB"},
    {"TypeTwice",
     [](json::Value &V) {
       json::Value Copy = json::Object(deviceType(V));
       root(V).getArray("device_types")->push_back(std::move(Copy));
     },
     "device_types[1].name: device type 'G' is defined twice"},
    {"NoNodes", [](json::Value &V) { root(V).erase("nodes"); },
     "cluster.json: missing 'nodes'"},
    {"NodesEmpty", [](json::Value &V) { root(V)["nodes"] = json::Array{}; },
     "cluster.json: nodes: must not be empty"},
    {"NodesNumber", [](json::Value &V) { root(V)["nodes"] = 4; },
     "cluster.json: nodes: expected an array of nodes or"},
    {"UnknownEndpoint",
     [](json::Value &V) {
       node(V, 2)["links"] = json::Array{json::Object{{"from", "dev0"},
                                                      {"to", "gpu9"},
                                                      {"kind", "pcie"},
                                                      {"bandwidth_GBps", 1},
                                                      {"latency_us", 1}}};
     },
     "cluster.json: nodes[2].links[0].to: unknown endpoint 'gpu9'"},
    {"LinkKeyTypo",
     [](json::Value &V) {
       json::Object &L = link(V, 0, 0);
       L["bandwith_GBps"] = 16;
       L.erase("bandwidth_GBps");
     },
     "cluster.json: nodes[0].links[0]: unknown key 'bandwith_GBps' (did you "
     "mean 'bandwidth_GBps'?)"},
    {"LinkWithoutLatency",
     [](json::Value &V) { link(V, 0, 1).erase("latency_us"); },
     "cluster.json: nodes[0].links[1]: missing 'latency_us'"},
    {"LinkWithoutTo", [](json::Value &V) { link(V, 0, 1).erase("to"); },
     "cluster.json: nodes[0].links[1]: missing 'to'"},
    {"LinkToItself", [](json::Value &V) { link(V, 0, 1)["to"] = "gpu1"; },
     "nodes[0].links[1]: a link must join two different endpoints"},
    {"DuplexNotBool", [](json::Value &V) { link(V, 1, 0)["duplex"] = "no"; },
     "nodes[1].links[0].duplex: expected true or false"},
    {"EndpointNotString", [](json::Value &V) { link(V, 1, 0)["from"] = 0; },
     "nodes[1].links[0].from: expected a string"},
    {"UnknownDeviceType",
     [](json::Value &V) {
       node(V, 1)["devices"] = json::Object{{"type", "K8O"}, {"count", 2}};
     },
     "cluster.json: nodes[1].devices.type: unknown device type 'K8O' "
     "(device_types has: G)"},
    {"CountAndNames",
     [](json::Value &V) {
       (*(*node(V, 1).getArray("devices"))[0].getAsObject())["count"] = 2;
     },
     "nodes[1].devices[0]: give either 'count' (with an optional 'prefix') "
     "or 'names'"},
    {"ZeroDevices",
     [](json::Value &V) {
       node(V, 0)["devices"] = json::Object{{"type", "G"}, {"count", 0}};
     },
     "nodes[0].devices.count: expected a whole number from 1 to 1024"},
    {"FractionalCount",
     [](json::Value &V) {
       node(V, 0)["devices"] = json::Object{{"type", "G"}, {"count", 1.5}};
     },
     "nodes[0].devices.count: expected a whole number"},
    {"NoDeviceGroups",
     [](json::Value &V) { node(V, 0)["devices"] = json::Array{}; },
     "nodes[0].devices: a node needs at least one device"},
    {"NameTwice",
     [](json::Value &V) { node(V, 0)["switches"] = json::Array{"gpu1"}; },
     "nodes[0].switches[0]: 'gpu1' is already a name in this node"},
    {"SlashInName",
     [](json::Value &V) { node(V, 0)["switches"] = json::Array{"a/b"}; },
     "nodes[0].switches[0]: name 'a/b' may hold only letters, digits"},
    {"AttachToNic",
     [](json::Value &V) {
       (*(*node(V, 1).getArray("nics"))[0].getAsObject())["attach"] =
           json::Array{"nic0"};
     },
     "nodes[1].nics[0].attach[0]: 'nic0' is a NIC; attach devices or "
     "switches"},
    {"NicWithoutBandwidth",
     [](json::Value &V) {
       (*node(V, 2).getArray("nics"))[0].getAsObject()->erase("bandwidth_GBps");
     },
     "nodes[2].nics[0]: missing 'bandwidth_GBps'"},
    {"EmptyDeviceName",
     [](json::Value &V) {
       node(V, 1)["devices"] =
           json::Array{json::Object{{"type", "G"}, {"names", {"", "b"}}}};
     },
     "cluster.json: nodes[1].devices[0].names[0]: a name must not be empty"},
    {"NamesWithPrefix",
     [](json::Value &V) {
       node(V, 1)["devices"] = json::Array{
           json::Object{{"type", "G"}, {"names", {"a", "b"}}, {"prefix", "x"}}};
     },
     "cluster.json: nodes[1].devices[0].prefix: goes with 'count', not "
     "'names'"},
    {"NamesEmpty",
     [](json::Value &V) {
       node(V, 1)["devices"] =
           json::Array{json::Object{{"type", "G"}, {"names", json::Array{}}}};
     },
     "cluster.json: nodes[1].devices[0].names: must not be empty"},
    {"NameNotAString",
     [](json::Value &V) {
       node(V, 1)["devices"] =
           json::Array{json::Object{{"type", "G"}, {"names", {"a", 7}}}};
     },
     "cluster.json: nodes[1].devices[0].names[1]: expected a string"},
    {"NodeWithoutDevices", [](json::Value &V) { node(V, 2).erase("devices"); },
     "cluster.json: nodes[2]: missing 'devices'"},
    {"SwitchNotAString",
     [](json::Value &V) { node(V, 0)["switches"] = json::Array{3}; },
     "cluster.json: nodes[0].switches[0]: expected a string (the switch's "
     "name)"},
    {"NicsWithoutNetwork",
     [](json::Value &V) {
       root(V).erase("network");
       root(V)["nodes"] = json::Array{json::Object(node(V, 0))};
     },
     "cluster.json: nodes[0].nics: NICs need the top-level 'network' they "
     "connect to"},
    {"NodesWithoutNetwork", [](json::Value &V) { root(V).erase("network"); },
     "cluster.json: 3 nodes need a 'network' (and NICs) to reach each other"},
    {"NetworkKeyTypo",
     [](json::Value &V) {
       root(V)["network"] = json::Object{{"nmae", "ib"}};
     },
     "network: unknown key 'nmae' (did you mean 'name'?)"},
    {"Disconnected",
     [](json::Value &V) { node(V, 0)["links"] = json::Array{}; },
     "cluster.json: device 'node0/gpu0' cannot reach 'node0/gpu1' over the "
     "links"},
    {"CompactWithoutTemplate",
     [](json::Value &V) {
       root(V)["nodes"] = json::Object{{"count", 2}};
     },
     "cluster.json: nodes: the compact form needs 'count' and 'template'"},
    {"CompactCountZero",
     [](json::Value &V) {
       json::Value T = json::Object(node(V, 0));
       root(V)["nodes"] = json::Object{{"count", 0}, {"template", T}};
     },
     "nodes.count: expected a whole number from 1 to 1024"},
    {"ErrorInTemplate",
     [](json::Value &V) {
       link(V, 0, 0)["to"] = "gpu9";
       json::Value T = json::Object(node(V, 0));
       root(V)["nodes"] = json::Object{{"count", 2}, {"template", T}};
     },
     "cluster.json: nodes.template.links[0].to: unknown endpoint 'gpu9'"},
    {"MeasuredUnknownKey",
     [](json::Value &V) {
       root(V)["measured"] = json::Object{{"transfer", 1}};
     },
     "cluster.json: measured: unknown key 'transfer' (did you mean "
     "'transfers'?)"},
    {"MeasuredUnknownDevice",
     [](json::Value &V) {
       root(V)["measured"] = json::Object{
           {"transfers",
            json::Array{json::Object{{"from", "gpu0"},
                                     {"to", "node0/gpu1"},
                                     {"sizes_bytes", json::Array{1}},
                                     {"times_us", json::Array{1}}}}}};
     },
     "cluster.json: measured.transfers[0].from: unknown device 'gpu0'"},
    {"MeasuredSameDevice",
     [](json::Value &V) {
       root(V)["measured"] = json::Object{
           {"transfers",
            json::Array{json::Object{{"from", "node0/gpu1"},
                                     {"to", "node0/gpu1"},
                                     {"sizes_bytes", json::Array{1}},
                                     {"times_us", json::Array{1}}}}}};
     },
     "cluster.json: measured.transfers[0]: a transfer joins two different "
     "devices"},
    {"MeasuredSizesDecrease",
     [](json::Value &V) {
       root(V)["measured"] =
           json::Object{{"all_reduces",
                         json::Array{json::Object{
                             {"devices", json::Array{"node0/gpu0", "node1/a"}},
                             {"sizes_bytes", json::Array{8, 1024, 1024}},
                             {"times_us", json::Array{1, 2, 3}}}}}};
     },
     "cluster.json: measured.all_reduces[0].sizes_bytes[2]: sizes must "
     "increase"},
    {"MeasuredSizeNotWhole",
     [](json::Value &V) {
       root(V)["measured"] =
           json::Object{{"all_reduces",
                         json::Array{json::Object{
                             {"devices", json::Array{"node0/gpu0", "node1/a"}},
                             {"sizes_bytes", json::Array{8.5, 1024}},
                             {"times_us", json::Array{1, 2}}}}}};
     },
     "cluster.json: measured.all_reduces[0].sizes_bytes[0]: expected a whole "
     "number of bytes"},
    {"MeasuredTimesMissing",
     [](json::Value &V) {
       root(V)["measured"] =
           json::Object{{"all_reduces",
                         json::Array{json::Object{
                             {"devices", json::Array{"node0/gpu0", "node1/a"}},
                             {"sizes_bytes", json::Array{8, 1024}},
                             {"times_us", json::Array{1}}}}}};
     },
     "cluster.json: measured.all_reduces[0].times_us: has 1 times for 2 "
     "sizes"},
    {"MeasuredZeroTime",
     [](json::Value &V) {
       root(V)["measured"] =
           json::Object{{"all_reduces",
                         json::Array{json::Object{
                             {"devices", json::Array{"node0/gpu0", "node1/a"}},
                             {"sizes_bytes", json::Array{8}},
                             {"times_us", json::Array{0}}}}}};
     },
     "cluster.json: measured.all_reduces[0].times_us[0]: expected a number "
     "greater than 0"},
    {"MeasuredOneDevice",
     [](json::Value &V) {
       root(V)["measured"] = json::Object{
           {"all_reduces",
            json::Array{json::Object{{"devices", json::Array{"node0/gpu0"}},
                                     {"sizes_bytes", json::Array{8}},
                                     {"times_us", json::Array{1}}}}}};
     },
     "cluster.json: measured.all_reduces[0].devices: an all-reduce needs two "
     "devices or more"},
    {"MeasuredDeviceTwice",
     [](json::Value &V) {
       root(V)["measured"] = json::Object{
           {"all_reduces",
            json::Array{json::Object{
                {"devices", json::Array{"node0/gpu0", "node0/gpu0"}},
                {"sizes_bytes", json::Array{8}},
                {"times_us", json::Array{1}}}}}};
     },
     "cluster.json: measured.all_reduces[0].devices[1]: 'node0/gpu0' is "
     "listed twice"},
    {"MeasuredNoSizes",
     [](json::Value &V) {
       root(V)["measured"] = json::Object{
           {"transfers",
            json::Array{json::Object{{"from", "node0/gpu0"},
                                     {"to", "node0/gpu1"},
                                     {"sizes_bytes", json::Array{}},
                                     {"times_us", json::Array{}}}}}};
     },
     "cluster.json: measured.transfers[0].sizes_bytes: must not be empty"},
    {"TooManyDevices",
     [](json::Value &V) {
       json::Value T = json::Object(node(V, 2));
       root(V)["nodes"] = json::Object{{"count", 600}, {"template", T}};
     },
     "cluster.json: nodes: the cluster has 1200 devices; at most 1024"},
};

class BadClusterTest : public ::testing::TestWithParam<BadCase> {};

TEST_P(BadClusterTest, GivesOneLineNamingFileAndPath) {
  json::Value V = validCluster();
  GetParam().Break(V);
  auto M = Machine::fromJsonValue(V, "cluster.json");
  ASSERT_FALSE(static_cast<bool>(M))
      << "read, expected: " << GetParam().Expected;
  std::string Message = llvm::toString(M.takeError());
  EXPECT_NE(Message.find(GetParam().Expected), std::string::npos)
      << "message: " << Message
      << "\nexpected to contain: " << GetParam().Expected;
  EXPECT_EQ(Message.rfind("cluster.json: ", 0), 0u) << Message;
  EXPECT_EQ(Message.find('\n'), std::string::npos) << Message;
}

INSTANTIATE_TEST_SUITE_P(ClusterFile, BadClusterTest,
                         ::testing::ValuesIn(BadCases),
                         [](const auto &Info) { return Info.param.Name; });

/// A node of one device behind a chain of Switches switches, Nodes times.
std::string chainedCluster(unsigned Nodes, unsigned Switches) {
  std::string Names, Links;
  for (unsigned I = 0; I < Switches; ++I) {
    Names += (I ? ", " : "") + ("\"s" + std::to_string(I) + "\"");
    std::string From = I ? "s" + std::to_string(I - 1) : "cpu0";
    Links += ", {\"from\": \"" + From + "\", \"to\": \"s" + std::to_string(I) +
             "\", \"kind\": \"pcie\", \"bandwidth_GBps\": 10, "
             "\"latency_us\": 1}";
  }
  return R"({"name": "chain", "device_types": [{"name": "cpu", )"
         R"("peak_TFLOPS_f32": 0.1, "memory_bandwidth_GBps": 10, )"
         R"("memory_GiB": 4, "launch_overhead_us": 1}], "nodes": {"count": )" +
         std::to_string(Nodes) +
         R"(, "template": {"devices": {"type": "cpu", "count": 1}, )"
         R"("switches": [)" +
         Names +
         R"(], "nics": [{"name": "nic", "bandwidth_GBps": 10, )"
         R"("latency_us": 1, "attach": ["s)" +
         std::to_string(Switches - 1) + R"("]}], "links": [)" +
         Links.substr(2) + R"(]}}, "network": {"name": "ib"}})";
}

// Routing searches from every device over every endpoint and keeps every
// pair's route: 1,024 nodes of 300 switches each ran for minutes and
// gigabytes. Both are bounded, and a file past them refused.
TEST(ClusterFile, RoutingIsBounded) {
  auto Fine = Machine::fromJson(chainedCluster(2, 20), "c.json");
  ASSERT_TRUE(static_cast<bool>(Fine)) << llvm::toString(Fine.takeError());
  auto Long = Machine::fromJson(chainedCluster(2, 40), "c.json");
  ASSERT_FALSE(static_cast<bool>(Long));
  EXPECT_EQ(llvm::toString(Long.takeError()),
            "c.json: the route from 'node0/cpu0' to 'node1/cpu0' crosses 84 "
            "links; at most 64");
  auto Many = Machine::fromJson(chainedCluster(1024, 300), "c.json");
  ASSERT_FALSE(static_cast<bool>(Many));
  EXPECT_EQ(llvm::toString(Many.takeError()),
            "c.json: the cluster has 309249 devices, switches and NICs; at "
            "most 8192");
}

TEST(ClusterFile, BadJsonText) {
  for (const char *Text : {"", "{", "{\"name\": }", "[1,2", "nodes: 3"}) {
    auto M = Machine::fromJson(Text, "cluster.json");
    ASSERT_FALSE(static_cast<bool>(M)) << Text;
    std::string Message = llvm::toString(M.takeError());
    EXPECT_EQ(Message.rfind("cluster.json: not valid JSON: line 1, column ", 0),
              0u)
        << Message;
  }
  // A key twice: llvm::json kept the last one silently.
  std::string Twice = ValidCluster;
  Twice.insert(Twice.find("\"name\": \"test\",") + 16, " \"name\": \"x\",");
  auto Repeated = Machine::fromJson(Twice, "cluster.json");
  ASSERT_FALSE(static_cast<bool>(Repeated));
  EXPECT_EQ(llvm::toString(Repeated.takeError()),
            "cluster.json: line 3, column 2: the key \"name\" again in the "
            "same object");
  // Nesting too deep for llvm::json's recursive parser: refused first.
  auto M = Machine::fromJson(std::string(100000, '['), "cluster.json");
  ASSERT_FALSE(static_cast<bool>(M));
  EXPECT_NE(llvm::toString(M.takeError()).find("nested more than"),
            std::string::npos);
}

/// Random edits of a valid file never crash the reader.
TEST(ClusterFile, TruncationsNeverCrash) {
  std::string Text = ValidCluster;
  for (size_t N = 0; N < Text.size(); N += 7) {
    auto M = Machine::fromJson(llvm::StringRef(Text).take_front(N), "t.json");
    if (!M)
      llvm::consumeError(M.takeError());
  }
}

//===-- Measured communication --------------------------------------------===//

/// The valid cluster's first node three times (each: two GPUs on a PCIe
/// switch, a NIC), with measured tables added by the test.
json::Value threeLikeNodes() {
  json::Value V = validCluster();
  json::Value Template = json::Object(node(V, 0));
  root(V)["nodes"] =
      json::Object{{"count", 3}, {"template", std::move(Template)}};
  return V;
}

json::Object table(json::Object O, json::Array Sizes, json::Array Times) {
  O["sizes_bytes"] = std::move(Sizes);
  O["times_us"] = std::move(Times);
  return O;
}

// TensorOpt's estimate: the bandwidth interpolated between the measured
// sizes around a message's. 1,000 bytes in 10 us is 1e8 B/s, 1e6 in 100 us
// 1e10; halfway between the sizes the bandwidth is halfway too.
TEST(MeasuredComm, TimesInterpolateTheMeasuredBandwidth) {
  SizeTable T{{1000, 1e6}, {10e-6, 100e-6}};
  EXPECT_DOUBLE_EQ(T.time(1), 10e-6); // latency-bound below the sizes
  EXPECT_DOUBLE_EQ(T.time(1000), 10e-6);
  EXPECT_DOUBLE_EQ(T.time(1e6), 100e-6);
  EXPECT_DOUBLE_EQ(T.time(500500), 500500 / (1e8 + (1e10 - 1e8) / 2));
  EXPECT_DOUBLE_EQ(T.time(4e6), 4e6 / 1e10); // the largest's bandwidth above
  SizeTable One{{64}, {2e-6}};
  EXPECT_DOUBLE_EQ(One.time(8), 2e-6);
  EXPECT_DOUBLE_EQ(One.time(128), 4e-6);
}

// A transfer measured between node0's GPUs times every transfer over links
// of the same figures in the same order: both ways, and the same pair in the
// other nodes; not transfers between nodes.
TEST(MeasuredComm, ATransferTableTimesRoutesOfItsShape) {
  json::Value V = threeLikeNodes();
  root(V)["measured"] = json::Object{
      {"transfers",
       json::Array{
           table(json::Object{{"from", "node0/gpu0"}, {"to", "node0/gpu1"}},
                 json::Array{1000, 1e6}, json::Array{10, 100})}}};
  auto M = Machine::fromJsonValue(V, "cluster.json");
  ASSERT_TRUE(static_cast<bool>(M)) << llvm::toString(M.takeError());
  Machine Plain = cantFail(Machine::fromJsonValue(threeLikeNodes(), "c.json"));
  SizeTable T{{1000, 1e6}, {10e-6, 100e-6}};
  for (auto [A, B] : {std::pair<DeviceId, DeviceId>{0, 1}, {1, 0}, {4, 5}})
    EXPECT_DOUBLE_EQ(M->transferTime(A, B, 3e5), T.time(3e5)) << A << B;
  EXPECT_EQ(M->transferTime(0, 2, 3e5), Plain.transferTime(0, 2, 3e5));
  EXPECT_NE(Plain.transferTime(0, 1, 3e5), T.time(3e5));
  EXPECT_EQ(M->transferTime(0, 0, 3e5), 0);
  expectRoundTrip(*M);
}

// An all-reduce measured among node0's two GPUs times every pair within a
// node; a group across nodes keeps the model's time, and the collective
// still holds its ring's links.
TEST(MeasuredComm, AnAllReduceTableTimesGroupsOfItsShape) {
  json::Value V = threeLikeNodes();
  root(V)["measured"] = json::Object{
      {"all_reduces",
       json::Array{table(
           json::Object{{"devices", json::Array{"node0/gpu1", "node0/gpu0"}}},
           json::Array{8, 8e6}, json::Array{20, 1000})}}};
  auto M = Machine::fromJsonValue(V, "cluster.json");
  ASSERT_TRUE(static_cast<bool>(M)) << llvm::toString(M.takeError());
  Machine Plain = cantFail(Machine::fromJsonValue(threeLikeNodes(), "c.json"));
  ASSERT_EQ(M->measuredAllReduces().size(), 1u);
  EXPECT_EQ(M->measuredAllReduces()[0].Devices, (std::vector<DeviceId>{0, 1}));
  CollectiveCost Measured = allReduceCost(*M, {2, 3}, 8e6);
  CollectiveCost Model = allReduceCost(Plain, {2, 3}, 8e6);
  EXPECT_DOUBLE_EQ(Measured.Time, 1000e-6);
  EXPECT_DOUBLE_EQ(allReduceCost(*M, {0, 1}, 8).Time, 20e-6);
  EXPECT_EQ(Measured.Links, Model.Links);
  EXPECT_EQ(Measured.BytesPerDevice, Model.BytesPerDevice);
  EXPECT_EQ(allReduceCost(*M, {0, 2}, 8e6).Time,
            allReduceCost(Plain, {0, 2}, 8e6).Time);
  EXPECT_EQ(allReduceCost(*M, {0, 1, 2}, 8e6).Time,
            allReduceCost(Plain, {0, 1, 2}, 8e6).Time);
  expectRoundTrip(*M);
}

// `--gpus N` keeps the tables measured among the first N devices.
TEST(MeasuredComm, FirstDevicesKeepTheirTables) {
  json::Value V = threeLikeNodes();
  root(V)["measured"] = json::Object{
      {"transfers",
       json::Array{
           table(json::Object{{"from", "node0/gpu0"}, {"to", "node0/gpu1"}},
                 json::Array{1000}, json::Array{10}),
           table(json::Object{{"from", "node0/gpu0"}, {"to", "node2/gpu0"}},
                 json::Array{1000}, json::Array{30})}}};
  Machine M = cantFail(Machine::fromJsonValue(V, "cluster.json"));
  Machine Four = cantFail(M.firstDevices(4));
  ASSERT_EQ(Four.measuredTransfers().size(), 1u);
  EXPECT_DOUBLE_EQ(Four.transferTime(2, 3, 1000), 10e-6);
  // Every route between nodes has the shape of node0 -> node2's, which the
  // second table times; it goes with node 2.
  EXPECT_DOUBLE_EQ(M.transferTime(0, 2, 1000), 30e-6);
  EXPECT_NE(Four.transferTime(0, 2, 1000), 30e-6);
  expectRoundTrip(Four);
}

// Presets have no measurements: their canonical form (and the hash strategy
// files record) has no "measured" key.
TEST(MeasuredComm, PresetsHaveNone) {
  for (const char *Name : {"paper-k80", "dgx-h100", "cpu:2"}) {
    Machine M = mustLoad(Name);
    EXPECT_TRUE(M.measuredTransfers().empty());
    EXPECT_EQ(M.toJson().getAsObject()->get("measured"), nullptr) << Name;
  }
}

} // namespace
