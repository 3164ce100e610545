//===- simulator/Machine.h - A cluster: devices, links, routes -*- C++ -*-===//
//
// The machine model the simulator plans against (FlexFlow's device
// topology): compute devices (GPUs, or CPU ranks) grouped into nodes, and a
// graph of directed links between endpoints (devices, PCIe switches,
// NVSwitches, host bridges, NICs, the inter-node network). A transfer from
// one device to another crosses the links of its route, one hop after the
// other; the simulator makes every link a FIFO device so that transfers
// sharing a link contend. Machines come from a JSON cluster file
// (docs/cluster-format.md) or a built-in preset (`onnx2soap clusters`).
//
//===----------------------------------------------------------------------===//
#ifndef ONNX2SOAP_SIMULATOR_MACHINE_H
#define ONNX2SOAP_SIMULATOR_MACHINE_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace onnx2soap::simulator {

/// Index of a compute device, dense from 0 in the cluster's order (node by
/// node): it is also the rank that runs the device in a generated program.
using DeviceId = uint32_t;
/// Index of a directed link.
using LinkId = uint32_t;
/// Index of a point of the link graph (devices first, with EndpointId ==
/// DeviceId, then switches, bridges, NICs, networks).
using EndpointId = uint32_t;

/// A GPU device type's convolution workspace when its cluster file gives
/// none (conv_workspace_MiB): enough for the algorithms cuDNN's heuristics
/// rank first on common layers; CPU devices default to none.
constexpr double DefaultConvWorkspaceMiB = 64;
/// A GPU device type's runtime memory when its cluster file gives none
/// (runtime_MiB): the CUDA context with the kernels a training step loads
/// (lazy module loading, the default from CUDA 12.2 on Linux) and the
/// cuDNN and cuBLAS handles. PyTorch measured 287 MB for its context so
/// loaded (pytorch/pytorch#86509); ours links the same libraries.
constexpr double DefaultRuntimeMiB = 320;
/// A GPU device type's memory per NCCL communicator it joins when its
/// cluster file gives none (communicator_MiB): NCCL allocates receive
/// buffers per channel and ring connection (4 MiB for its Simple protocol,
/// NCCL_BUFFSIZE, plus the LL and LL128 protocols' buffers), and uses 16 or
/// more channels on NVLink GPUs; one report measured 544-688 MB per group
/// on A100s (NVIDIA/nccl#964), more with NVLink SHARP.
constexpr double DefaultCommunicatorMiB = 256;
/// A GPU device type's memory per device it exchanges point-to-point
/// messages with when its cluster file gives none (peer_MiB): NCCL opens
/// two channels per peer (NCCL_NCHANNELS_PER_NET_PEER) with a 4 MiB buffer
/// each, in each direction.
constexpr double DefaultPeerMiB = 16;

/// What one kind of compute device can do. Rates are per second, sizes in
/// bytes, times in seconds.
struct DeviceType {
  std::string Name;           ///< "P100", "H100-SXM", "cpu"
  double PeakFlopsF32 = 0;    ///< dense float32 FLOP/s
  double PeakFlopsF16 = 0;    ///< dense float16 / bfloat16 FLOP/s
  double MemoryBandwidth = 0; ///< device memory, bytes/s
  int64_t MemoryCapacity = 0; ///< bytes usable for training
  double LaunchOverhead = 0;  ///< fixed cost of one kernel, seconds
  /// Bytes of workspace a convolution may take (cuDNN's): generated programs
  /// choose algorithms within it, and the memory model counts it on every
  /// device that runs a convolution (MemoryModel.h).
  int64_t ConvWorkspace = 0;
  /// CUDA compute capability as nvcc spells it ("60", "90"), empty for CPU
  /// devices.
  std::string CudaArch;
  /// Bytes outside a generated program's buffers (MemoryModel.h): the
  /// runtime's own (CUDA context, loaded kernels, library handles), and
  /// NCCL's per communicator the device joins and per device it exchanges
  /// messages with. Estimates by default (DefaultRuntimeMiB, ...; none on
  /// CPUs), for a cluster file to replace with measured figures.
  int64_t RuntimeMemory = 0;
  int64_t CommunicatorMemory = 0;
  int64_t PeerMemory = 0;

  /// Bytes a generated program's backend holds for its libraries on a
  /// device of this type for the whole run: the cuBLAS workspace on GPUs
  /// (rt::blasWorkspaceBytes of CudaArch's major version), none on CPUs.
  /// Counted in every device's peak.
  int64_t libraryMemory() const;
};

/// The device type's memory outside a program's buffers (MemoryModel.h),
/// as a cluster file (and `--profile-comm`'s device_memory) spells it: its
/// key, its field, and its default on GPUs (none on CPUs).
struct RuntimeFigure {
  const char *Key;
  int64_t DeviceType::*Field;
  double GpuDefaultMiB;
};
inline constexpr RuntimeFigure RuntimeFigures[] = {
    {"runtime_MiB", &DeviceType::RuntimeMemory, DefaultRuntimeMiB},
    {"communicator_MiB", &DeviceType::CommunicatorMemory,
     DefaultCommunicatorMiB},
    {"peer_MiB", &DeviceType::PeerMemory, DefaultPeerMiB}};

struct Device {
  std::string Name; ///< "node0/gpu3"
  unsigned Node = 0;
  unsigned Type = 0;  ///< index into Machine::deviceTypes()
  unsigned Local = 0; ///< index within its node (the local rank)
};

/// What a point of the link graph is. Routes never pass through a Device
/// (a GPU does not forward other GPUs' messages); they may cross any other
/// kind.
enum class EndpointKind : uint8_t {
  Device,  ///< a compute device; EndpointId == DeviceId
  Switch,  ///< NVSwitch, PCIe switch, host bridge, shared memory
  Nic,     ///< a network card of a node, linked to the Network both ways
  Network, ///< the inter-node network, shared by all nodes
};

struct Endpoint {
  std::string Name; ///< "node0/gpu3", "node1/pcie-switch0", "ib"
  /// The node it belongs to, or -1 for something shared between nodes (the
  /// inter-node network).
  int Node = -1;
  EndpointKind Kind = EndpointKind::Switch;
};

/// One direction of a physical connection.
struct Link {
  std::string Name; ///< "node0/gpu0->node0/gpu1 (nvlink)"
  std::string Kind; ///< "nvlink", "pcie", "network", ... (free text)
  EndpointId From = 0;
  EndpointId To = 0;
  double Bandwidth = 0; ///< bytes/s
  double Latency = 0;   ///< seconds per message
};

/// Measured times of one communication by message size (a cluster file's
/// "measured" tables, docs/cluster-format.md): Sizes in bytes, strictly
/// increasing, and the time each took, in seconds.
struct SizeTable {
  std::vector<double> Sizes;
  std::vector<double> Times;

  /// The time of a message of Bytes, as TensorOpt (Cai et al., 2020, §3.2)
  /// estimates it: the bandwidth (size / time) interpolated linearly between
  /// the two measured sizes around Bytes. At or below the smallest size, its
  /// time (latency-bound); above the largest, its bandwidth.
  double time(double Bytes) const;
};

/// A point-to-point transfer measured from one device to another: it times
/// every transfer whose route crosses links of the same bandwidths and
/// latencies in the same order.
struct MeasuredTransfer {
  DeviceId From = 0, To = 0;
  SizeTable Table;
};

/// An all-reduce measured among a group of devices: it times every
/// all-reduce whose group has as many devices and whose ring (the devices
/// in id order, the last back to the first) crosses routes of the same
/// shapes, in any order.
struct MeasuredAllReduce {
  std::vector<DeviceId> Devices; ///< sorted, two or more
  SizeTable Table;
};

/// A built-in cluster, as `onnx2soap clusters` lists it.
struct PresetInfo {
  std::string Name;        ///< "paper-p100", "cpu:N"
  std::string Description; ///< one line, with the source of its figures
  std::string DeviceType;  ///< "P100"
  /// Of the preset as named (dgx-h100: its default 8 nodes); 0 where the
  /// name's N chooses it (cpu:N).
  unsigned Devices = 0;
  unsigned Nodes = 0;
};

/// The most devices, switches and NICs a machine has (routing searches
/// from every device over all of them), and the most links a route between
/// two devices crosses (the route table holds every pair's).
constexpr size_t MaxEndpoints = 8192;
constexpr size_t MaxRouteLinks = 64;

class Machine {
public:
  /// The cluster file format's version, which toJson() writes and fromJson()
  /// accepts.
  static constexpr int64_t ClusterFileVersion = 1;
  /// Parses a cluster file's text; errors name the file (Where) and the
  /// JSON path of what is wrong.
  static llvm::Expected<Machine> fromJson(llvm::StringRef Text,
                                          llvm::StringRef Where);
  /// The same from parsed JSON (a cluster embedded in a strategy file).
  static llvm::Expected<Machine> fromJsonValue(const llvm::json::Value &Value,
                                               llvm::StringRef Where);
  /// Reads and parses a cluster file.
  static llvm::Expected<Machine> fromFile(llvm::StringRef Path);
  /// A preset by name ("paper-p100", "cpu:4", ...).
  static llvm::Expected<Machine> preset(llvm::StringRef Name);
  /// A preset name or else a cluster file path (the CLI's `--cluster C`).
  static llvm::Expected<Machine> load(llvm::StringRef PresetOrPath);
  static llvm::ArrayRef<PresetInfo> presets();

  /// The machine restricted to its first N devices (`--gpus N`), with the
  /// endpoints their routes use and every link among those (so routes stay
  /// what they were); nodes left without a device are dropped. An error when
  /// N is 0 or larger than the machine.
  llvm::Expected<Machine> firstDevices(unsigned N) const;

  unsigned numDevices() const { return Devices.size(); }
  unsigned numNodes() const { return NumNodes; }
  unsigned numLinks() const { return Links.size(); }
  unsigned numEndpoints() const { return Endpoints.size(); }

  const Device &device(DeviceId Id) const { return Devices[Id]; }
  /// The device of that full name ("node0/gpu1"), if any.
  std::optional<DeviceId> deviceNamed(llvm::StringRef Name) const;
  const DeviceType &deviceType(DeviceId Id) const {
    return Types[Devices[Id].Type];
  }
  llvm::ArrayRef<DeviceType> deviceTypes() const { return Types; }
  llvm::ArrayRef<Device> devices() const { return Devices; }
  const Link &link(LinkId Id) const { return Links[Id]; }
  llvm::ArrayRef<Link> links() const { return Links; }
  const Endpoint &endpoint(EndpointId Id) const { return Endpoints[Id]; }
  llvm::ArrayRef<Endpoint> endpoints() const { return Endpoints; }

  /// The links a message from A to B crosses, in order; empty when A == B.
  /// Routes are fixed (the lowest total latency + 1/bandwidth path, ties to
  /// the lexicographically smaller sequence of link ids; never through
  /// another device), computed once when the machine is built.
  llvm::ArrayRef<LinkId> route(DeviceId A, DeviceId B) const {
    const RouteSlice &S = Routes[A * Devices.size() + B];
    return llvm::ArrayRef<LinkId>(RouteLinks).slice(S.Begin, S.Size);
  }
  /// Time for one message of Bytes along the route A -> B when nothing else
  /// uses its links: every hop's latency plus Bytes over the slowest hop
  /// (messages are pipelined across hops).
  /// A measured table of a route of the same shape (measuredTransfers)
  /// times it instead.
  double transferTime(DeviceId A, DeviceId B, double Bytes) const {
    const RouteSlice &S = Routes[static_cast<size_t>(A) * Devices.size() + B];
    if (S.Size == 0)
      return 0;
    if (S.Measured >= 0)
      return Transfers[S.Measured].Table.time(Bytes);
    return S.Latency + Bytes / S.Bandwidth;
  }
  /// Whether a measured table times transfers A -> B.
  bool measuredRoute(DeviceId A, DeviceId B) const {
    return Routes[static_cast<size_t>(A) * Devices.size() + B].Measured >= 0;
  }
  /// The summed latency of the route's hops (0 when A == B).
  double routeLatency(DeviceId A, DeviceId B) const {
    return Routes[static_cast<size_t>(A) * Devices.size() + B].Latency;
  }

  /// The measured communication times of the cluster file, in its order
  /// (the first table that fits a transfer or all-reduce times it).
  llvm::ArrayRef<MeasuredTransfer> measuredTransfers() const {
    return Transfers;
  }
  llvm::ArrayRef<MeasuredAllReduce> measuredAllReduces() const {
    return AllReduces;
  }
  /// The measured table that times an all-reduce among Devices (sorted,
  /// two or more), or null: the first whose group has the same ring shape.
  const SizeTable *allReduceTable(llvm::ArrayRef<DeviceId> Devices) const;

  /// Per ordered device pair (index A * numDevices() + B): the kind of its
  /// route, an id shared by the routes that cross links of the same
  /// bandwidths and latencies in the same order, numbered as first met
  /// (what a measured transfer table matches). Computed on each call.
  std::vector<uint32_t> routeShapes() const;
  /// The ring shape of Group (sorted devices; the last back to the first):
  /// the kinds (Shapes, from routeShapes) of its hops, sorted. What a
  /// measured all-reduce table matches.
  std::vector<uint32_t> ringShape(llvm::ArrayRef<uint32_t> Shapes,
                                  llvm::ArrayRef<DeviceId> Group) const;

  /// The canonical JSON form (the cluster file format, keys sorted, numbers
  /// rounded to 12 significant digits, regular nodes written once as a
  /// template): what strategy files and manifests record and hash.
  /// fromJsonValue(toJson()) gives back the same machine. Defined for
  /// machines in the cluster-file shape: devices named <prefix><index>
  /// or listed by name, links within a node or between a NIC and the
  /// network (what fromJson, presets and firstDevices make).
  llvm::json::Value toJson() const;

  /// The preset name or the file's "name" field.
  std::string Name;

private:
  /// A route's links in RouteLinks, and its figures for transferTime (on
  /// the hot paths of simulation and of OptCNN's sum): its hops' summed
  /// latency and least bandwidth.
  struct RouteSlice {
    uint32_t Begin = 0;
    uint32_t Size = 0;
    double Latency = 0;
    double Bandwidth = std::numeric_limits<double>::infinity();
    /// The measured transfer that times it (index into Transfers), or -1.
    int32_t Measured = -1;
  };
  /// Fills Routes; an error names a device pair with no route. Then binds
  /// the measured tables to the routes and groups they time.
  llvm::Error computeRoutes();
  void bindMeasured();

  std::vector<DeviceType> Types;
  std::vector<Device> Devices;
  std::vector<Endpoint> Endpoints;
  std::vector<Link> Links;
  unsigned NumNodes = 0;
  std::vector<RouteSlice> Routes; ///< NumDevices x NumDevices
  std::vector<LinkId> RouteLinks;
  std::vector<MeasuredTransfer> Transfers;
  std::vector<MeasuredAllReduce> AllReduces;
  /// routeShapes() when the machine has measured tables (else empty), and
  /// per measured all-reduce the ringShape of its devices.
  std::vector<uint32_t> RouteShapes;
  std::vector<std::vector<uint32_t>> AllReduceShapes;

  friend class MachineBuilder;
};

/// Builds a Machine piece by piece (the JSON reader, firstDevices, tests).
/// Ids it returns are the builder's own, in the order things were added:
/// finish() renumbers endpoints so that devices come first (EndpointId ==
/// DeviceId) and keeps devices, nodes and links in the order added.
class MachineBuilder {
public:
  explicit MachineBuilder(std::string Name);
  unsigned addDeviceType(DeviceType Type);
  /// Adds a node; devices and endpoints added next belong to it.
  unsigned addNode();
  /// Adds a device of the current node, named "node<N>/<Name>". Returns its
  /// endpoint (for addLink); its DeviceId is the number of devices added
  /// before it.
  EndpointId addDevice(unsigned Type, std::string Name);
  /// Endpoints that are not compute devices: of node Node when it is 0 or
  /// more (named "node<N>/<Name>"), shared between nodes when Node is -1
  /// (named Name).
  EndpointId addEndpoint(std::string Name, int Node,
                         EndpointKind Kind = EndpointKind::Switch);
  /// Adds the link From -> To.
  LinkId addLink(EndpointId From, EndpointId To, double Bandwidth,
                 double Latency, llvm::StringRef Kind);
  /// Adds links both ways.
  void addDuplex(EndpointId A, EndpointId B, double Bandwidth, double Latency,
                 llvm::StringRef Kind);
  /// The device of that full name ("node0/gpu1"), if added.
  std::optional<DeviceId> deviceNamed(llvm::StringRef Name) const;
  /// Measured communication times (devices by DeviceId; a group sorted).
  void addMeasuredTransfer(MeasuredTransfer T);
  void addMeasuredAllReduce(MeasuredAllReduce A);
  /// Checks that every device reaches every other and computes the routes.
  llvm::Expected<Machine> finish();

private:
  Machine M; ///< endpoints in the order added until finish()
  int CurrentNode = -1;
};

} // namespace onnx2soap::simulator

#endif
