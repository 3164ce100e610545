//===- simulator/ClusterFileWriter.cpp - Writing the cluster format ------===//
//
// Machine::toJson(): the canonical form of the cluster file format of
// docs/cluster-format.md (ClusterFile.cpp reads it): every key written,
// numbers rounded to 12 significant digits, identical nodes folded into a
// template, so that reading a written file back writes the same text.
//
//===----------------------------------------------------------------------===//
#include "simulator/Machine.h"
#include <cmath>
#include <cstdio>
#include <cstdlib>

using namespace onnx2soap::simulator;
namespace json = llvm::json;
using llvm::StringRef;

/// X to 12 significant digits, so unit conversions do not leave noise in
/// the last bits and reading a written file back writes the same text.
static double round12(double X) {
  char Buffer[40];
  snprintf(Buffer, sizeof(Buffer), "%.12g", X);
  return std::strtod(Buffer, nullptr);
}

/// The name of an endpoint of node Node without its "node<N>/" prefix.
static std::string localName(StringRef Full, unsigned Node) {
  std::string Prefix = "node" + std::to_string(Node) + "/";
  bool HasPrefix = Full.consume_front(Prefix);
  assert(HasPrefix && "node endpoints are named node<N>/<name>");
  (void)HasPrefix;
  return Full.str();
}

/// The devices of a run of one type: {count, prefix} when they are named
/// prefix0, prefix1, ..., else their names.
static json::Object deviceGroup(const std::string &Type,
                                const std::vector<std::string> &Names) {
  StringRef First = Names.front();
  StringRef Prefix = First.rtrim("0123456789");
  bool Counted = !Prefix.empty();
  for (size_t I = 0; I < Names.size() && Counted; ++I)
    Counted = Names[I] == Prefix.str() + std::to_string(I);
  if (Counted)
    return json::Object{{"type", Type},
                        {"count", static_cast<int64_t>(Names.size())},
                        {"prefix", Prefix.str()}};
  json::Array List;
  for (const std::string &Name : Names)
    List.push_back(Name);
  return json::Object{{"type", Type}, {"names", std::move(List)}};
}

json::Value Machine::toJson() const {
  json::Array TypeList;
  for (const DeviceType &T : Types) {
    json::Object O{{"name", T.Name},
                   {"peak_TFLOPS_f32", round12(T.PeakFlopsF32 / 1e12)},
                   {"peak_TFLOPS_f16", round12(T.PeakFlopsF16 / 1e12)},
                   {"memory_bandwidth_GBps", round12(T.MemoryBandwidth / 1e9)},
                   {"memory_GiB",
                    round12(static_cast<double>(T.MemoryCapacity) / (1 << 30))},
                   {"launch_overhead_us", round12(T.LaunchOverhead * 1e6)},
                   {"conv_workspace_MiB",
                    round12(static_cast<double>(T.ConvWorkspace) / (1 << 20))}};
    if (!T.CudaArch.empty())
      O["cuda_arch"] = T.CudaArch;
    // The runtime's figures only where they differ from the defaults, so
    // that the canonical form (and the cluster hash strategy files carry)
    // of a cluster without them stays what it was before they existed.
    for (const RuntimeFigure &F : RuntimeFigures) {
      double Default = T.CudaArch.empty() ? 0 : F.GpuDefaultMiB;
      int64_t Bytes = T.*F.Field;
      if (Bytes != static_cast<int64_t>(std::llround(Default * (1 << 20))))
        O[F.Key] = round12(static_cast<double>(Bytes) / (1 << 20));
    }
    TypeList.push_back(std::move(O));
  }

  std::optional<EndpointId> Network;
  for (EndpointId E = 0; E < Endpoints.size(); ++E)
    if (Endpoints[E].Kind == EndpointKind::Network) {
      assert(!Network && "the cluster format has one network");
      Network = E;
    }

  std::vector<json::Value> NodeList;
  for (unsigned Node = 0; Node < NumNodes; ++Node) {
    json::Array Groups;
    std::vector<std::string> Run;
    unsigned RunType = 0;
    for (const Device &D : Devices) {
      if (D.Node != Node)
        continue;
      if (!Run.empty() && D.Type != RunType) {
        Groups.push_back(deviceGroup(Types[RunType].Name, Run));
        Run.clear();
      }
      RunType = D.Type;
      Run.push_back(localName(D.Name, Node));
    }
    if (!Run.empty())
      Groups.push_back(deviceGroup(Types[RunType].Name, Run));

    json::Array Switches, Nics, LinkList;
    auto InNode = [&](EndpointId E) {
      return Endpoints[E].Node == static_cast<int>(Node);
    };
    for (EndpointId E = 0; E < Endpoints.size(); ++E) {
      if (!InNode(E))
        continue;
      if (Endpoints[E].Kind == EndpointKind::Switch)
        Switches.push_back(localName(Endpoints[E].Name, Node));
      if (Endpoints[E].Kind != EndpointKind::Nic)
        continue;
      auto Up = llvm::find_if(Links, [&](const Link &L) {
        return L.From == E && Network && L.To == *Network;
      });
      assert(Up != Links.end() && "a NIC links to the network");
      Nics.push_back(
          json::Object{{"name", localName(Endpoints[E].Name, Node)},
                       {"bandwidth_GBps", round12(Up->Bandwidth / 1e9)},
                       {"latency_us", round12(Up->Latency * 1e6)}});
    }
    std::vector<bool> Written(Links.size(), false);
    for (LinkId I = 0; I < Links.size(); ++I) {
      const Link &L = Links[I];
      if (Written[I] || !InNode(L.From) || !InNode(L.To))
        continue;
      Written[I] = true;
      bool Duplex = false;
      for (LinkId J = I + 1; J < Links.size() && !Duplex; ++J) {
        const Link &R = Links[J];
        if (!Written[J] && R.From == L.To && R.To == L.From &&
            R.Kind == L.Kind && R.Bandwidth == L.Bandwidth &&
            R.Latency == L.Latency)
          Duplex = Written[J] = true;
      }
      LinkList.push_back(
          json::Object{{"from", localName(Endpoints[L.From].Name, Node)},
                       {"to", localName(Endpoints[L.To].Name, Node)},
                       {"kind", L.Kind},
                       {"bandwidth_GBps", round12(L.Bandwidth / 1e9)},
                       {"latency_us", round12(L.Latency * 1e6)},
                       {"duplex", Duplex}});
    }
    json::Value DevicesValue = Groups.size() == 1
                                   ? json::Value(std::move(Groups[0]))
                                   : json::Value(std::move(Groups));
    NodeList.push_back(json::Object{{"devices", std::move(DevicesValue)},
                                    {"switches", std::move(Switches)},
                                    {"nics", std::move(Nics)},
                                    {"links", std::move(LinkList)}});
  }

  bool Regular =
      NodeList.size() > 1 && llvm::all_of(NodeList, [&](const json::Value &V) {
        return V == NodeList.front();
      });
  json::Object Root{{"version", ClusterFileVersion},
                    {"name", Name},
                    {"device_types", std::move(TypeList)}};
  if (Regular)
    Root["nodes"] = json::Object{{"count", static_cast<int64_t>(NumNodes)},
                                 {"template", std::move(NodeList.front())}};
  else
    Root["nodes"] = json::Array(std::move(NodeList));
  if (Network)
    Root["network"] = json::Object{{"name", Endpoints[*Network].Name}};
  // Only when there are tables: a machine without keeps the form (and the
  // hash strategy files record) it had before they existed.
  if (!Transfers.empty() || !AllReduces.empty()) {
    auto Table = [](json::Object O, const SizeTable &T) {
      json::Array Sizes, Times;
      for (size_t I = 0; I < T.Sizes.size(); ++I) {
        Sizes.push_back(round12(T.Sizes[I]));
        Times.push_back(round12(T.Times[I] * 1e6));
      }
      O["sizes_bytes"] = std::move(Sizes);
      O["times_us"] = std::move(Times);
      return O;
    };
    json::Array TransferList, AllReduceList;
    for (const MeasuredTransfer &T : Transfers)
      TransferList.push_back(Table(json::Object{{"from", Devices[T.From].Name},
                                                {"to", Devices[T.To].Name}},
                                   T.Table));
    for (const MeasuredAllReduce &A : AllReduces) {
      json::Array Group;
      for (DeviceId D : A.Devices)
        Group.push_back(Devices[D].Name);
      AllReduceList.push_back(
          Table(json::Object{{"devices", std::move(Group)}}, A.Table));
    }
    Root["measured"] = json::Object{{"transfers", std::move(TransferList)},
                                    {"all_reduces", std::move(AllReduceList)}};
  }
  return json::Value(std::move(Root));
}
