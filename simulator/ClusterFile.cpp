//===- simulator/ClusterFile.cpp - The JSON cluster format ----------------===//
//
// Reads the cluster file format of docs/cluster-format.md
// (ClusterFileWriter.cpp writes it). The reader checks everything a user
// can get wrong (types, units, unknown keys, names) and reports it with the
// file and the JSON path; it first turns each node description into a
// NodeSpec with names resolved, so the compact
// `{"count": N, "template": {...}}` form is checked once and stamped N
// times.
//
//===----------------------------------------------------------------------===//
#include "ir/Error.h"
#include "ir/JsonReader.h"
#include "simulator/Machine.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Format.h"
#include <cmath>
#include <cstdlib>
#include <optional>

using namespace onnx2soap::simulator;
using onnx2soap::fail;
using onnx2soap::ir::Sign;
namespace json = llvm::json;
using llvm::Error;
using llvm::Expected;
using llvm::StringRef;
using llvm::Twine;

/// More devices than this would make the all-pairs route table too large.
static constexpr unsigned MaxDevices = 1024;

namespace {

/// A node's description with names resolved to local endpoint indices:
/// devices first, then switches, then NICs.
struct NodeSpec {
  struct Nic {
    std::string Name;
    double Bandwidth = 0, Latency = 0;
    std::vector<unsigned> Attach;
  };
  struct LinkSpec {
    unsigned From = 0, To = 0;
    std::string Kind;
    double Bandwidth = 0, Latency = 0;
    bool Duplex = true;
  };
  std::vector<std::pair<unsigned, std::string>> Devices; ///< type, name
  std::vector<std::string> Switches;
  std::vector<Nic> Nics;
  std::vector<LinkSpec> Links;
};

class ClusterReader : public onnx2soap::ir::JsonReader {
public:
  using JsonReader::JsonReader;
  Expected<Machine> read(const json::Value &Root);

private:
  Expected<std::string> string(const json::Object &O, const std::string &Path,
                               StringRef Key, bool IsName,
                               std::optional<StringRef> Default = {}) const;
  Error checkName(StringRef Name, const std::string &Path) const;

  Expected<DeviceType> readDeviceType(const json::Value &V,
                                      const std::string &Path) const;
  Expected<NodeSpec> readNode(const json::Value &V,
                              const std::string &Path) const;
  Error readDeviceGroup(const json::Value &V, const std::string &Path,
                        NodeSpec &Node) const;
  Error readMeasured(const json::Value &V, MachineBuilder &Builder) const;
  Expected<SizeTable> readSizeTable(const json::Object &O,
                                    const std::string &Path) const;
  Expected<DeviceId> readDevice(const json::Value &V, const std::string &Path,
                                const MachineBuilder &Builder) const;

  llvm::StringMap<unsigned> TypeIds;
  std::vector<std::string> TypeNames;
  std::vector<bool> TypeIsGpu; ///< has a cuda_arch: devices default to "gpu"
};

} // namespace

//===-- Names -------------------------------------------------------------===//

Error ClusterReader::checkName(StringRef Name, const std::string &Path) const {
  if (Name.empty())
    return error(Path, "a name must not be empty");
  for (char C : Name)
    if (!llvm::isAlnum(C) && C != '_' && C != '-' && C != '.')
      return error(Path, "name '" + Name +
                             "' may hold only letters, digits, '_', '-' "
                             "and '.'");
  return Error::success();
}

Expected<std::string>
ClusterReader::string(const json::Object &O, const std::string &Path,
                      StringRef Key, bool IsName,
                      std::optional<StringRef> Default) const {
  const json::Value *V = O.get(Key);
  if (!V) {
    if (Default)
      return Default->str();
    return error(Path, "missing '" + Key + "'");
  }
  auto S = V->getAsString();
  if (!S)
    return error(key(Path, Key), "expected a string");
  if (IsName)
    if (Error E = checkName(*S, key(Path, Key)))
      return E;
  return S->str();
}

// Unwraps an Expected into Var or returns its error from the function.
#define TRY(Var, Expr)                                                         \
  auto Var##OrErr = (Expr);                                                    \
  if (!Var##OrErr)                                                             \
    return Var##OrErr.takeError();                                             \
  auto Var = std::move(*Var##OrErr)

//===-- Reading -----------------------------------------------------------===//

Expected<DeviceType>
ClusterReader::readDeviceType(const json::Value &V,
                              const std::string &Path) const {
  TRY(O, object(V, Path));
  if (Error E =
          checkKeys(*O, Path,
                    {"name", "peak_TFLOPS_f32", "peak_TFLOPS_f16",
                     "memory_bandwidth_GBps", "memory_GiB",
                     "launch_overhead_us", "cuda_arch", "conv_workspace_MiB",
                     "runtime_MiB", "communicator_MiB", "peer_MiB"}))
    return E;
  DeviceType T;
  TRY(Name, string(*O, Path, "name", true));
  TRY(F32, number(*O, Path, "peak_TFLOPS_f32", Sign::Positive));
  TRY(F16, number(*O, Path, "peak_TFLOPS_f16", Sign::Positive, F32));
  TRY(Bandwidth, number(*O, Path, "memory_bandwidth_GBps", Sign::Positive));
  TRY(GiB, number(*O, Path, "memory_GiB", Sign::Positive));
  TRY(Launch, number(*O, Path, "launch_overhead_us", Sign::NonNegative));
  TRY(Arch, string(*O, Path, "cuda_arch", false, StringRef()));
  TRY(Workspace, number(*O, Path, "conv_workspace_MiB", Sign::NonNegative,
                        Arch.empty() ? 0 : DefaultConvWorkspaceMiB));
  if (GiB > 1e9)
    return error(key(Path, "memory_GiB"), "is too large");
  if (Workspace > GiB * 1024)
    return error(key(Path, "conv_workspace_MiB"),
                 "is more than the device's memory_GiB");
  for (const RuntimeFigure &F : RuntimeFigures) {
    TRY(MiB, number(*O, Path, F.Key, Sign::NonNegative,
                    Arch.empty() ? 0 : F.GpuDefaultMiB));
    if (MiB > GiB * 1024)
      return error(key(Path, F.Key), "is more than the device's memory_GiB");
    T.*F.Field = static_cast<int64_t>(std::llround(MiB * (1 << 20)));
  }
  bool ArchOk =
      Arch.empty() ||
      ((Arch.size() == 2 || Arch.size() == 3) && llvm::isDigit(Arch[0]) &&
       llvm::isDigit(Arch[1]) && (Arch.size() == 2 || llvm::isAlnum(Arch[2])));
  if (!ArchOk)
    return error(key(Path, "cuda_arch"),
                 "'" + Arch +
                     "' is not a compute capability as nvcc spells it "
                     "(\"70\", \"90\", \"90a\"); leave it out for CPUs");
  T.Name = Name;
  T.PeakFlopsF32 = F32 * 1e12;
  T.PeakFlopsF16 = F16 * 1e12;
  T.MemoryBandwidth = Bandwidth * 1e9;
  T.MemoryCapacity = static_cast<int64_t>(std::llround(GiB * (1 << 30)));
  T.LaunchOverhead = Launch * 1e-6;
  T.CudaArch = Arch;
  T.ConvWorkspace = static_cast<int64_t>(std::llround(Workspace * (1 << 20)));
  return T;
}

Error ClusterReader::readDeviceGroup(const json::Value &V,
                                     const std::string &Path,
                                     NodeSpec &Node) const {
  TRY(O, object(V, Path));
  if (Error E = checkKeys(*O, Path, {"type", "count", "prefix", "names"}))
    return E;
  TRY(Type, string(*O, Path, "type", false));
  auto It = TypeIds.find(Type);
  if (It == TypeIds.end())
    return error(key(Path, "type"), "unknown device type '" + Type +
                                        "' (device_types has: " +
                                        llvm::join(TypeNames, ", ") + ")");
  unsigned TypeId = It->second;
  const json::Value *Count = O->get("count");
  TRY(Names, array(*O, Path, "names", false));
  if ((Count != nullptr) == (Names != nullptr))
    return error(Path, "give either 'count' (with an optional 'prefix') or "
                       "'names'");
  if (Names) {
    if (O->get("prefix"))
      return error(key(Path, "prefix"), "goes with 'count', not 'names'");
    if (Names->empty())
      return error(key(Path, "names"), "must not be empty");
    for (size_t I = 0; I < Names->size(); ++I) {
      std::string P = index(key(Path, "names"), I);
      auto Name = (*Names)[I].getAsString();
      if (!Name)
        return error(P, "expected a string");
      if (Error E = checkName(*Name, P))
        return E;
      Node.Devices.emplace_back(TypeId, Name->str());
    }
    return Error::success();
  }
  auto N = Count->getAsInteger();
  if (!N || *N < 1 || *N > MaxDevices)
    return error(key(Path, "count"),
                 "expected a whole number from 1 to " + Twine(MaxDevices));
  TRY(Prefix, string(*O, Path, "prefix", true,
                     StringRef(TypeIsGpu[TypeId] ? "gpu" : "cpu")));
  for (int64_t I = 0; I < *N; ++I)
    Node.Devices.emplace_back(TypeId, Prefix + std::to_string(I));
  return Error::success();
}

Expected<NodeSpec> ClusterReader::readNode(const json::Value &V,
                                           const std::string &Path) const {
  TRY(O, object(V, Path));
  if (Error E = checkKeys(*O, Path, {"devices", "switches", "nics", "links"}))
    return E;
  NodeSpec Node;
  const json::Value *Devices = O->get("devices");
  if (!Devices)
    return error(Path, "missing 'devices'");
  std::string DevicesPath = key(Path, "devices");
  if (const json::Array *Groups = Devices->getAsArray()) {
    if (Groups->empty())
      return error(DevicesPath, "a node needs at least one device");
    for (size_t I = 0; I < Groups->size(); ++I)
      if (Error E = readDeviceGroup((*Groups)[I], index(DevicesPath, I), Node))
        return E;
  } else if (Error E = readDeviceGroup(*Devices, DevicesPath, Node)) {
    return E;
  }

  // Every name of the node, to its local index.
  llvm::StringMap<unsigned> Local;
  auto Declare = [&](StringRef Name, const std::string &P) -> Error {
    if (!Local.try_emplace(Name, Local.size()).second)
      return error(P, "'" + Name + "' is already a name in this node");
    return Error::success();
  };
  for (size_t I = 0; I < Node.Devices.size(); ++I)
    if (Error E = Declare(Node.Devices[I].second, DevicesPath))
      return E;

  TRY(Switches, array(*O, Path, "switches", false));
  if (Switches)
    for (size_t I = 0; I < Switches->size(); ++I) {
      std::string P = index(key(Path, "switches"), I);
      auto Name = (*Switches)[I].getAsString();
      if (!Name)
        return error(P, "expected a string (the switch's name)");
      if (Error E = checkName(*Name, P))
        return E;
      if (Error E = Declare(*Name, P))
        return E;
      Node.Switches.push_back(Name->str());
    }

  auto Resolve = [&](const json::Value &Ref,
                     const std::string &P) -> Expected<unsigned> {
    auto Name = Ref.getAsString();
    if (!Name)
      return error(P, "expected a string (a device, switch or NIC name)");
    auto Found = Local.find(*Name);
    if (Found == Local.end())
      return error(P, "unknown endpoint '" + *Name + "'");
    return Found->second;
  };

  TRY(Nics, array(*O, Path, "nics", false));
  unsigned FirstNic = Node.Devices.size() + Node.Switches.size();
  if (Nics)
    for (size_t I = 0; I < Nics->size(); ++I) {
      std::string P = index(key(Path, "nics"), I);
      TRY(Nic, object((*Nics)[I], P));
      if (Error E = checkKeys(
              *Nic, P, {"name", "bandwidth_GBps", "latency_us", "attach"}))
        return E;
      NodeSpec::Nic Spec;
      TRY(Name, string(*Nic, P, "name", true));
      if (Error E = Declare(Name, key(P, "name")))
        return E;
      TRY(Bandwidth, number(*Nic, P, "bandwidth_GBps", Sign::Positive));
      TRY(Latency, number(*Nic, P, "latency_us", Sign::NonNegative));
      Spec.Name = Name;
      Spec.Bandwidth = Bandwidth * 1e9;
      Spec.Latency = Latency * 1e-6;
      Node.Nics.push_back(std::move(Spec));
    }
  // Attachments resolve after all NICs are declared, to name NICs properly.
  if (Nics)
    for (size_t I = 0; I < Nics->size(); ++I) {
      std::string P = index(key(Path, "nics"), I);
      TRY(Attach, array(*(*Nics)[I].getAsObject(), P, "attach", false));
      if (!Attach)
        continue;
      for (size_t J = 0; J < Attach->size(); ++J) {
        std::string AP = index(key(P, "attach"), J);
        TRY(Id, Resolve((*Attach)[J], AP));
        if (Id >= FirstNic)
          return error(AP, "'" + Node.Nics[Id - FirstNic].Name +
                               "' is a NIC; attach devices or switches");
        Node.Nics[I].Attach.push_back(Id);
      }
    }

  TRY(Links, array(*O, Path, "links", false));
  if (Links)
    for (size_t I = 0; I < Links->size(); ++I) {
      std::string P = index(key(Path, "links"), I);
      TRY(L, object((*Links)[I], P));
      if (Error E = checkKeys(
              *L, P,
              {"from", "to", "kind", "bandwidth_GBps", "latency_us", "duplex"}))
        return E;
      NodeSpec::LinkSpec Spec;
      for (StringRef End : {"from", "to"}) {
        const json::Value *Ref = L->get(End);
        if (!Ref)
          return error(P, "missing '" + End + "'");
        TRY(Id, Resolve(*Ref, key(P, End)));
        (End == "from" ? Spec.From : Spec.To) = Id;
      }
      if (Spec.From == Spec.To)
        return error(P, "a link must join two different endpoints");
      TRY(Kind, string(*L, P, "kind", true));
      TRY(Bandwidth, number(*L, P, "bandwidth_GBps", Sign::Positive));
      TRY(Latency, number(*L, P, "latency_us", Sign::NonNegative));
      Spec.Kind = Kind;
      Spec.Bandwidth = Bandwidth * 1e9;
      Spec.Latency = Latency * 1e-6;
      if (const json::Value *Duplex = L->get("duplex")) {
        auto B = Duplex->getAsBoolean();
        if (!B)
          return error(key(P, "duplex"), "expected true or false");
        Spec.Duplex = *B;
      }
      Node.Links.push_back(std::move(Spec));
    }
  return Node;
}

/// More measured sizes than this in one table is surely a mistake (2^0 to
/// 2^40 bytes in powers of two is 41).
static constexpr size_t MaxMeasuredSizes = 4096;

Expected<SizeTable>
ClusterReader::readSizeTable(const json::Object &O,
                             const std::string &Path) const {
  SizeTable T;
  for (StringRef Key : {"sizes_bytes", "times_us"}) {
    TRY(List, array(O, Path, Key, true));
    std::string P = key(Path, Key);
    if (List->empty())
      return error(P, "must not be empty");
    if (List->size() > MaxMeasuredSizes)
      return error(P, "has more than " + Twine(MaxMeasuredSizes) + " entries");
    std::vector<double> &Into = Key == "sizes_bytes" ? T.Sizes : T.Times;
    for (size_t I = 0; I < List->size(); ++I) {
      auto D = (*List)[I].getAsNumber();
      if (!D || !std::isfinite(*D) || !(*D > 0))
        return error(index(P, I), "expected a number greater than 0");
      std::string Problem = onnx2soap::ir::figureProblem(*D, Sign::Positive);
      if (!Problem.empty())
        return error(index(P, I), Problem);
      if (Key == "sizes_bytes" && *D != std::floor(*D))
        return error(index(P, I), "expected a whole number of bytes");
      if (Key == "sizes_bytes" && I > 0 && !(*D > Into.back()))
        return error(index(P, I), "sizes must increase");
      Into.push_back(Key == "times_us" ? *D * 1e-6 : *D);
    }
  }
  if (T.Sizes.size() != T.Times.size())
    return error(key(Path, "times_us"), "has " + Twine(T.Times.size()) +
                                            " times for " +
                                            Twine(T.Sizes.size()) + " sizes");
  return T;
}

Expected<DeviceId>
ClusterReader::readDevice(const json::Value &V, const std::string &Path,
                          const MachineBuilder &Builder) const {
  auto Name = V.getAsString();
  if (!Name)
    return error(Path, "expected a device's full name (\"node0/gpu1\")");
  if (std::optional<DeviceId> D = Builder.deviceNamed(*Name))
    return *D;
  return error(Path, "unknown device '" + *Name +
                         "' (devices are named node<N>/<name>, as "
                         "`onnx2soap clusters --show` lists them)");
}

Error ClusterReader::readMeasured(const json::Value &V,
                                  MachineBuilder &Builder) const {
  TRY(O, object(V, "measured"));
  if (Error E = checkKeys(*O, "measured", {"transfers", "all_reduces"}))
    return E;
  TRY(Transfers, array(*O, "measured", "transfers", false));
  if (Transfers)
    for (size_t I = 0; I < Transfers->size(); ++I) {
      std::string P = index("measured.transfers", I);
      TRY(T, object((*Transfers)[I], P));
      if (Error E = checkKeys(*T, P, {"from", "to", "sizes_bytes", "times_us"}))
        return E;
      MeasuredTransfer M;
      for (StringRef End : {"from", "to"}) {
        const json::Value *Ref = T->get(End);
        if (!Ref)
          return error(P, "missing '" + End + "'");
        TRY(D, readDevice(*Ref, key(P, End), Builder));
        (End == "from" ? M.From : M.To) = D;
      }
      if (M.From == M.To)
        return error(P, "a transfer joins two different devices");
      TRY(Table, readSizeTable(*T, P));
      M.Table = std::move(Table);
      Builder.addMeasuredTransfer(std::move(M));
    }
  TRY(AllReduces, array(*O, "measured", "all_reduces", false));
  if (AllReduces)
    for (size_t I = 0; I < AllReduces->size(); ++I) {
      std::string P = index("measured.all_reduces", I);
      TRY(A, object((*AllReduces)[I], P));
      if (Error E = checkKeys(*A, P, {"devices", "sizes_bytes", "times_us"}))
        return E;
      MeasuredAllReduce M;
      TRY(Group, array(*A, P, "devices", true));
      for (size_t J = 0; J < Group->size(); ++J) {
        std::string DP = index(key(P, "devices"), J);
        TRY(D, readDevice((*Group)[J], DP, Builder));
        if (llvm::is_contained(M.Devices, D))
          return error(DP,
                       "'" + *(*Group)[J].getAsString() + "' is listed twice");
        M.Devices.push_back(D);
      }
      if (M.Devices.size() < 2)
        return error(key(P, "devices"), "an all-reduce needs two devices or "
                                        "more");
      llvm::sort(M.Devices);
      TRY(Table, readSizeTable(*A, P));
      M.Table = std::move(Table);
      Builder.addMeasuredAllReduce(std::move(M));
    }
  return Error::success();
}

Expected<Machine> ClusterReader::read(const json::Value &Root) {
  TRY(O, object(Root, ""));
  if (Error E = checkKeys(
          *O, "",
          {"version", "name", "device_types", "nodes", "network", "measured"}))
    return E;
  if (const json::Value *Version = O->get("version")) {
    auto V = Version->getAsInteger();
    if (!V || *V != Machine::ClusterFileVersion)
      return error("version", "this onnx2soap reads version " +
                                  Twine(Machine::ClusterFileVersion) +
                                  " cluster files");
  }
  TRY(Name, string(*O, "", "name", false));
  MachineBuilder Builder(Name);

  TRY(Types, array(*O, "", "device_types", true));
  if (Types->empty())
    return error("device_types", "must not be empty");
  for (size_t I = 0; I < Types->size(); ++I) {
    TRY(Type, readDeviceType((*Types)[I], index("device_types", I)));
    if (!TypeIds.try_emplace(Type.Name, TypeNames.size()).second)
      return error(index("device_types", I) + ".name",
                   "device type '" + Type.Name + "' is defined twice");
    TypeNames.push_back(Type.Name);
    TypeIsGpu.push_back(!Type.CudaArch.empty());
    Builder.addDeviceType(std::move(Type));
  }

  // Nodes: an array, or {"count": N, "template": node}.
  std::vector<NodeSpec> Specs;      // distinct descriptions
  std::vector<unsigned> SpecOfNode; // per node
  std::vector<std::string> PathOfSpec;
  const json::Value *Nodes = O->get("nodes");
  if (!Nodes)
    return error("", "missing 'nodes'");
  if (const json::Array *List = Nodes->getAsArray()) {
    if (List->empty())
      return error("nodes", "must not be empty");
    for (size_t I = 0; I < List->size(); ++I) {
      TRY(Spec, readNode((*List)[I], index("nodes", I)));
      Specs.push_back(std::move(Spec));
      PathOfSpec.push_back(index("nodes", I));
      SpecOfNode.push_back(I);
    }
  } else if (const json::Object *Compact = Nodes->getAsObject()) {
    if (Error E = checkKeys(*Compact, "nodes", {"count", "template"}))
      return E;
    const json::Value *Count = Compact->get("count");
    const json::Value *Template = Compact->get("template");
    if (!Count || !Template)
      return error("nodes", "the compact form needs 'count' and 'template'");
    auto N = Count->getAsInteger();
    if (!N || *N < 1 || *N > MaxDevices)
      return error("nodes.count",
                   "expected a whole number from 1 to " + Twine(MaxDevices));
    TRY(Spec, readNode(*Template, "nodes.template"));
    Specs.push_back(std::move(Spec));
    PathOfSpec.push_back("nodes.template");
    SpecOfNode.assign(*N, 0);
  } else {
    return error("nodes", "expected an array of nodes or {\"count\": N, "
                          "\"template\": {...}}");
  }
  size_t TotalDevices = 0;
  for (unsigned S : SpecOfNode)
    TotalDevices += Specs[S].Devices.size();
  if (TotalDevices > MaxDevices)
    return error("nodes", "the cluster has " + Twine(TotalDevices) +
                              " devices; at most " + Twine(MaxDevices) +
                              " are supported");

  std::optional<EndpointId> Network;
  if (const json::Value *Net = O->get("network")) {
    TRY(NetObject, object(*Net, "network"));
    if (Error E = checkKeys(*NetObject, "network", {"name"}))
      return E;
    TRY(NetName, string(*NetObject, "network", "name", true));
    Network = Builder.addEndpoint(NetName, -1, EndpointKind::Network);
  }
  if (!Network) {
    if (SpecOfNode.size() > 1)
      return error("", Twine(SpecOfNode.size()) +
                           " nodes need a 'network' (and NICs) to reach "
                           "each other");
    for (size_t S = 0; S < Specs.size(); ++S)
      if (!Specs[S].Nics.empty())
        return error(PathOfSpec[S] + ".nics",
                     "NICs need the top-level 'network' they connect to");
  }

  for (unsigned S : SpecOfNode) {
    const NodeSpec &Spec = Specs[S];
    unsigned Node = Builder.addNode();
    std::vector<EndpointId> Ids;
    for (const auto &[Type, DeviceName] : Spec.Devices)
      Ids.push_back(Builder.addDevice(Type, DeviceName));
    for (const std::string &Switch : Spec.Switches)
      Ids.push_back(Builder.addEndpoint(Switch, Node));
    for (const NodeSpec::Nic &Nic : Spec.Nics)
      Ids.push_back(Builder.addEndpoint(Nic.Name, Node, EndpointKind::Nic));
    for (const NodeSpec::LinkSpec &L : Spec.Links) {
      if (L.Duplex)
        Builder.addDuplex(Ids[L.From], Ids[L.To], L.Bandwidth, L.Latency,
                          L.Kind);
      else
        Builder.addLink(Ids[L.From], Ids[L.To], L.Bandwidth, L.Latency, L.Kind);
    }
    // Attachments before network links, so that the canonical form (which
    // writes attachments as ordinary links) reads back to the same link ids.
    unsigned FirstNic = Spec.Devices.size() + Spec.Switches.size();
    for (size_t I = 0; I < Spec.Nics.size(); ++I)
      for (unsigned A : Spec.Nics[I].Attach)
        Builder.addDuplex(Ids[A], Ids[FirstNic + I], Spec.Nics[I].Bandwidth, 0,
                          "pcie");
    for (size_t I = 0; I < Spec.Nics.size(); ++I)
      Builder.addDuplex(Ids[FirstNic + I], *Network, Spec.Nics[I].Bandwidth,
                        Spec.Nics[I].Latency, "network");
  }
  if (const json::Value *Measured = O->get("measured"))
    if (Error E = readMeasured(*Measured, Builder))
      return E;
  auto M = Builder.finish();
  if (!M)
    return error("", llvm::toString(M.takeError()));
  return M;
}

Expected<Machine> Machine::fromJsonValue(const json::Value &Value,
                                         StringRef Where) {
  return ClusterReader(Where).read(Value);
}

Expected<Machine> Machine::fromJson(StringRef Text, StringRef Where) {
  auto Value = ir::parseJson(Text, Where);
  if (!Value)
    return Value.takeError();
  return fromJsonValue(*Value, Where);
}
