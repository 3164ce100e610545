//===- simulator/Presets.cpp - Built-in clusters --------------------------===//
//
// The clusters of the FlexFlow and TensorOpt papers, a DGX H100 pod, and the
// ranks of this host. Each preset is written as a cluster file (a JSON value
// built here) and read by the same reader as a user's file, so a preset is
// exactly what `docs/cluster-format.md` can express. The figures and their
// sources are tabulated in docs/cluster-format.md; keep the two in step.
//
//===----------------------------------------------------------------------===//
#include "ir/Error.h"
#include "simulator/Machine.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include <string>

using namespace onnx2soap::simulator;
namespace json = llvm::json;
using llvm::Expected;
using llvm::StringRef;

static constexpr unsigned MaxCpuRanks = 64;
static constexpr unsigned MaxDgxNodes = 128; // 1,024 GPUs
static constexpr unsigned DefaultDgxNodes = 8;

// Link figures shared by several presets (GB/s per direction, µs).
static constexpr double PcieGen3x16GBps = 15.75; // PCI-SIG, 8 GT/s x16
static constexpr double PcieHopUs = 1.0;         // estimate, per hop
static constexpr double NvlinkHopUs = 1.0;       // estimate, per hop
static constexpr double NicUs = 1.0; // estimate, per NIC-network hop

static json::Object deviceType(StringRef Name, double TflopsF32,
                               double TflopsF16, double MemoryGBps,
                               double MemoryGiB, double LaunchUs,
                               StringRef Arch) {
  json::Object O{
      {"name", Name.str()},           {"peak_TFLOPS_f32", TflopsF32},
      {"peak_TFLOPS_f16", TflopsF16}, {"memory_bandwidth_GBps", MemoryGBps},
      {"memory_GiB", MemoryGiB},      {"launch_overhead_us", LaunchUs}};
  if (!Arch.empty())
    O["cuda_arch"] = Arch.str();
  return O;
}

static json::Object link(const std::string &From, const std::string &To,
                         StringRef Kind, double GBps, double Us) {
  return json::Object{{"from", From},     {"to", To},
                      {"kind", Kind},     {"bandwidth_GBps", GBps},
                      {"latency_us", Us}, {"duplex", true}};
}

static json::Object nic(StringRef Name, double GBps, json::Array Attach) {
  return json::Object{{"name", Name.str()},
                      {"bandwidth_GBps", GBps},
                      {"latency_us", NicUs},
                      {"attach", std::move(Attach)}};
}

static std::string gpu(unsigned I) { return "gpu" + std::to_string(I); }

static json::Value cluster(StringRef Name, json::Object Type, unsigned Nodes,
                           json::Object Template) {
  bool HasNics = !Template.getArray("nics")->empty();
  json::Object Root{{"version", 1},
                    {"name", Name.str()},
                    {"device_types", json::Array{std::move(Type)}},
                    {"nodes", json::Object{{"count", Nodes},
                                           {"template", std::move(Template)}}}};
  if (Nodes > 1 || HasNics)
    Root["network"] = json::Object{{"name", "ib"}};
  return json::Value(std::move(Root));
}

/// FlexFlow Fig. 5a: 4 P100 per node, NVLink between every pair, 100 Gb/s
/// EDR InfiniBand between nodes.
static json::Value paperP100() {
  json::Array Links;
  for (unsigned A = 0; A < 4; ++A)
    for (unsigned B = A + 1; B < 4; ++B)
      Links.push_back(link(gpu(A), gpu(B), "nvlink", 20, NvlinkHopUs));
  for (unsigned A = 0; A < 4; ++A)
    Links.push_back(link(gpu(A), "host", "pcie", PcieGen3x16GBps, PcieHopUs));
  json::Object Node{
      {"devices", json::Object{{"type", "P100"}, {"count", 4}}},
      {"switches", json::Array{"host"}},
      {"nics", json::Array{nic("ib0", 12.5, json::Array{"host"})}},
      {"links", std::move(Links)}};
  return cluster("paper-p100", deviceType("P100", 10.6, 21.2, 732, 16, 5, "60"),
                 4, std::move(Node));
}

/// FlexFlow Fig. 5b: 4 K80 GPUs per node; GPUs 0,1 and 2,3 share a PCIe
/// switch, the switches meet at the host bridge; 56 Gb/s FDR InfiniBand.
static json::Value paperK80() {
  json::Array Links;
  for (unsigned A = 0; A < 4; ++A)
    Links.push_back(link(gpu(A), "pcie" + std::to_string(A / 2), "pcie",
                         PcieGen3x16GBps, PcieHopUs));
  for (unsigned S = 0; S < 2; ++S)
    Links.push_back(link("pcie" + std::to_string(S), "host", "pcie",
                         PcieGen3x16GBps, PcieHopUs));
  json::Object Node{{"devices", json::Object{{"type", "K80"}, {"count", 4}}},
                    {"switches", json::Array{"pcie0", "pcie1", "host"}},
                    {"nics", json::Array{nic("ib0", 7, json::Array{"host"})}},
                    {"links", std::move(Links)}};
  // One K80 board holds two GK210 GPUs: per GPU, half the board's figures.
  return cluster("paper-k80", deviceType("K80", 4.37, 4.37, 240, 12, 5, "37"),
                 16, std::move(Node));
}

/// TensorOpt §5: 8 V100 SXM2 per node in DGX-1's hybrid cube-mesh NVLink,
/// 100 Gb/s EDR InfiniBand with RDMA.
static json::Value tensoroptV100() {
  // NVLink 2.0 bricks between GPU pairs (nvidia-smi topo -m on a DGX-1V):
  // 2 bricks = 50 GB/s per direction.
  static const unsigned Mesh[][3] = {
      {0, 1, 1}, {0, 2, 1}, {0, 3, 2}, {0, 4, 2}, {1, 2, 2}, {1, 3, 1},
      {1, 5, 2}, {2, 3, 2}, {2, 6, 1}, {3, 7, 1}, {4, 5, 1}, {4, 6, 1},
      {4, 7, 2}, {5, 6, 2}, {5, 7, 1}, {6, 7, 2}};
  json::Array Links;
  for (const auto &[A, B, Bricks] : Mesh)
    Links.push_back(link(gpu(A), gpu(B), "nvlink", 25.0 * Bricks, NvlinkHopUs));
  for (unsigned A = 0; A < 8; ++A)
    Links.push_back(link(gpu(A), "pcie" + std::to_string(A / 2), "pcie",
                         PcieGen3x16GBps, PcieHopUs));
  for (unsigned S = 0; S < 4; ++S)
    Links.push_back(link("pcie" + std::to_string(S),
                         "cpu" + std::to_string(S / 2), "pcie", PcieGen3x16GBps,
                         PcieHopUs));
  Links.push_back(link("cpu0", "cpu1", "upi", 20.8, PcieHopUs));
  json::Object Node{
      {"devices", json::Object{{"type", "V100"}, {"count", 8}}},
      {"switches",
       json::Array{"pcie0", "pcie1", "pcie2", "pcie3", "cpu0", "cpu1"}},
      {"nics", json::Array{nic("ib0", 12.5, json::Array{"pcie0"})}},
      {"links", std::move(Links)}};
  return cluster("tensoropt-v100",
                 deviceType("V100", 15.7, 125, 900, 16, 5, "70"), 2,
                 std::move(Node));
}

/// DGX H100: 8 H100 SXM5 on NVSwitch (450 GB/s per direction per GPU), one
/// 400 Gb/s ConnectX-7 per GPU.
static json::Value dgxH100(StringRef Name, unsigned Nodes) {
  json::Array Links, Nics;
  for (unsigned A = 0; A < 8; ++A) {
    Links.push_back(link(gpu(A), "nvswitch", "nvswitch", 450, NvlinkHopUs));
    Nics.push_back(nic("nic" + std::to_string(A), 50, json::Array{gpu(A)}));
  }
  json::Object Node{
      {"devices", json::Object{{"type", "H100-SXM"}, {"count", 8}}},
      {"switches", json::Array{"nvswitch"}},
      {"nics", std::move(Nics)},
      {"links", std::move(Links)}};
  return cluster(Name, deviceType("H100-SXM", 67, 989.4, 3350, 80, 5, "90"),
                 Nodes, std::move(Node));
}

/// N MPI ranks on this host, one core each, meeting in shared memory.
static json::Value cpuRanks(StringRef Name, unsigned N) {
  json::Array Links;
  for (unsigned A = 0; A < N; ++A)
    Links.push_back(
        link("cpu" + std::to_string(A), "shm", "shared-memory", 10, 0.5));
  json::Object Node{
      {"devices",
       json::Object{{"type", "cpu"}, {"count", N}, {"prefix", "cpu"}}},
      {"switches", json::Array{"shm"}},
      {"nics", json::Array{}},
      {"links", std::move(Links)}};
  return cluster(Name, deviceType("cpu", 0.1, 0.1, 10, 4, 1, ""), 1,
                 std::move(Node));
}

llvm::ArrayRef<PresetInfo> Machine::presets() {
  static const PresetInfo List[] = {
      {"paper-p100",
       "FlexFlow's P100 cluster (Fig. 5a): 4 nodes x 4 P100 SXM2, NVLink "
       "within a node, 100 Gb/s EDR InfiniBand",
       "P100", 16, 4},
      {"paper-k80",
       "FlexFlow's K80 cluster (Fig. 5b): 16 nodes x 4 K80 GPUs, pairs on a "
       "PCIe switch, 56 Gb/s FDR InfiniBand",
       "K80", 64, 16},
      {"tensoropt-v100",
       "TensorOpt's cluster: 2 nodes x 8 V100 SXM2 (DGX-1 hybrid cube-mesh "
       "NVLink), 100 Gb/s RDMA",
       "V100", 16, 2},
      {"dgx-h100",
       "DGX H100 nodes: 8 H100 SXM on NVSwitch, 8 x 400 Gb/s NICs; 8 nodes, "
       "dgx-h100:N for N (1 to 128)",
       "H100-SXM", 64, 8},
      {"cpu:N",
       "N MPI ranks on this host (1 to 64), one core each, shared memory; "
       "what generated programs run on in tests",
       "cpu", 0, 1},
  };
  return List;
}

/// The N of "prefix:N", or 0 when Name is not of that form or N is out of
/// range (the caller reports it).
static unsigned suffixNumber(StringRef Name, StringRef Prefix, unsigned Max) {
  if (!Name.consume_front(Prefix) || !Name.consume_front(":"))
    return 0;
  unsigned N = 0;
  // Digits as written are the name (and its hash, which strategy files
  // carry): "cpu:02" is not "cpu:2".
  if (Name.getAsInteger(10, N) || N < 1 || N > Max || Name != std::to_string(N))
    return 0;
  return N;
}

Expected<Machine> Machine::preset(StringRef Name) {
  json::Value Cluster = nullptr;
  if (Name == "paper-p100")
    Cluster = paperP100();
  else if (Name == "paper-k80")
    Cluster = paperK80();
  else if (Name == "tensoropt-v100")
    Cluster = tensoroptV100();
  else if (Name == "dgx-h100")
    Cluster = dgxH100(Name, DefaultDgxNodes);
  else if (Name.startswith("dgx-h100:")) {
    unsigned N = suffixNumber(Name, "dgx-h100", MaxDgxNodes);
    if (N == 0)
      return fail("cluster preset '" + Name +
                  "': N of dgx-h100:N must be 1 to " +
                  std::to_string(MaxDgxNodes) + ", without leading zeros");
    Cluster = dgxH100(Name, N);
  } else if (Name.startswith("cpu:")) {
    unsigned N = suffixNumber(Name, "cpu", MaxCpuRanks);
    if (N == 0)
      return fail("cluster preset '" + Name + "': N of cpu:N must be 1 to " +
                  std::to_string(MaxCpuRanks) + ", without leading zeros");
    Cluster = cpuRanks(Name, N);
  } else {
    std::vector<std::string> Known;
    for (const PresetInfo &P : presets())
      Known.push_back(P.Name);
    return fail("unknown cluster preset '" + Name + "' (known: " +
                llvm::join(Known, ", ") + "; or give a cluster file)");
  }
  return fromJsonValue(Cluster, "preset '" + Name.str() + "'");
}
