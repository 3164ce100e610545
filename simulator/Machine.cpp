//===- simulator/Machine.cpp - Building machines and routing --------------===//
//
// MachineBuilder, the route computation (a deterministic Dijkstra from every
// device over the directed link graph), transfer times, `--gpus N`
// restriction and loading by preset name or file. The cluster-file reader
// and writer are in ClusterFile.cpp, the presets in Presets.cpp.
//
//===----------------------------------------------------------------------===//
#include "simulator/Machine.h"
#include "ir/Error.h"
#include "runtime_lib/LibraryMemory.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>
#include <map>
#include <queue>

using namespace onnx2soap::simulator;
using llvm::Error;
using llvm::Expected;

//===-- MachineBuilder ----------------------------------------------------===//

MachineBuilder::MachineBuilder(std::string Name) { M.Name = std::move(Name); }

unsigned MachineBuilder::addDeviceType(DeviceType Type) {
  M.Types.push_back(std::move(Type));
  return M.Types.size() - 1;
}

unsigned MachineBuilder::addNode() {
  CurrentNode = M.NumNodes++;
  return CurrentNode;
}

EndpointId MachineBuilder::addDevice(unsigned Type, std::string Name) {
  assert(CurrentNode >= 0 && "addNode before addDevice");
  assert(Type < M.Types.size() && "unknown device type");
  unsigned Local = 0;
  for (const Device &D : M.Devices)
    Local += D.Node == static_cast<unsigned>(CurrentNode);
  std::string Full = "node" + std::to_string(CurrentNode) + "/" + Name;
  M.Devices.push_back(
      Device{Full, static_cast<unsigned>(CurrentNode), Type, Local});
  M.Endpoints.push_back(Endpoint{Full, CurrentNode, EndpointKind::Device});
  return M.Endpoints.size() - 1;
}

EndpointId MachineBuilder::addEndpoint(std::string Name, int Node,
                                       EndpointKind Kind) {
  assert(Kind != EndpointKind::Device && "devices are added by addDevice");
  assert(Node < static_cast<int>(M.NumNodes) && "no such node");
  std::string Full =
      Node < 0 ? Name : "node" + std::to_string(Node) + "/" + Name;
  M.Endpoints.push_back(Endpoint{std::move(Full), Node, Kind});
  return M.Endpoints.size() - 1;
}

LinkId MachineBuilder::addLink(EndpointId From, EndpointId To, double Bandwidth,
                               double Latency, llvm::StringRef Kind) {
  assert(From < M.Endpoints.size() && To < M.Endpoints.size() && From != To);
  assert(Bandwidth > 0 && Latency >= 0);
  Link L;
  L.Name = M.Endpoints[From].Name + "->" + M.Endpoints[To].Name + " (" +
           Kind.str() + ")";
  L.Kind = Kind.str();
  L.From = From;
  L.To = To;
  L.Bandwidth = Bandwidth;
  L.Latency = Latency;
  M.Links.push_back(std::move(L));
  return M.Links.size() - 1;
}

void MachineBuilder::addDuplex(EndpointId A, EndpointId B, double Bandwidth,
                               double Latency, llvm::StringRef Kind) {
  addLink(A, B, Bandwidth, Latency, Kind);
  addLink(B, A, Bandwidth, Latency, Kind);
}

std::optional<DeviceId> Machine::deviceNamed(llvm::StringRef Name) const {
  for (DeviceId D = 0; D < Devices.size(); ++D)
    if (Devices[D].Name == Name)
      return D;
  return std::nullopt;
}

std::optional<DeviceId>
MachineBuilder::deviceNamed(llvm::StringRef Name) const {
  return M.deviceNamed(Name);
}

void MachineBuilder::addMeasuredTransfer(MeasuredTransfer T) {
  assert(T.From != T.To && "a transfer joins two devices");
  M.Transfers.push_back(std::move(T));
}

void MachineBuilder::addMeasuredAllReduce(MeasuredAllReduce A) {
  assert(A.Devices.size() >= 2 && llvm::is_sorted(A.Devices) &&
         "an all-reduce among two devices or more, sorted");
  M.AllReduces.push_back(std::move(A));
}

Expected<Machine> MachineBuilder::finish() {
  if (M.Devices.empty())
    return fail("the cluster has no devices");
  // Routing takes a shortest-path search per device over every endpoint:
  // 1,024 nodes of 300 switches each ran for minutes and gigabytes.
  if (M.Endpoints.size() > MaxEndpoints)
    return fail(llvm::formatv("the cluster has {0} devices, switches and "
                              "NICs; at most {1}",
                              M.Endpoints.size(), MaxEndpoints));
  // Devices first, in the order added, then every other endpoint.
  std::vector<EndpointId> NewId(M.Endpoints.size());
  std::vector<Endpoint> Ordered;
  Ordered.reserve(M.Endpoints.size());
  for (bool Devices : {true, false})
    for (EndpointId Old = 0; Old < M.Endpoints.size(); ++Old)
      if ((M.Endpoints[Old].Kind == EndpointKind::Device) == Devices) {
        NewId[Old] = Ordered.size();
        Ordered.push_back(M.Endpoints[Old]);
      }
  M.Endpoints = std::move(Ordered);
  for (Link &L : M.Links) {
    L.From = NewId[L.From];
    L.To = NewId[L.To];
  }
  if (Error E = M.computeRoutes())
    return E;
  return M;
}

int64_t DeviceType::libraryMemory() const {
  if (CudaArch.empty())
    return 0;
  // "37", "90", "90a": one digit of major version; "100", "120": two (the
  // cluster reader admits only these spellings).
  bool TwoDigitMajor = CudaArch.size() == 3 && llvm::isDigit(CudaArch[2]);
  int Major = std::stoi(CudaArch.substr(0, TwoDigitMajor ? 2 : 1));
  return int64_t(onnx2soap::rt::blasWorkspaceBytes(Major));
}

//===-- Routes ------------------------------------------------------------===//

namespace {
/// Shortest paths from one source, ties (within rounding) to the smaller
/// sequence of link ids. Devices do not forward, and a NIC forwards only
/// between its node and the network (it is no shortcut between two things
/// attached to it), so the search runs over states (endpoint, whether it was
/// entered from the network). Every link weighs more than zero, so a best
/// path's prefixes are best paths too and Dijkstra's order settles each
/// state after all of its best predecessors.
class RouteSearch {
public:
  RouteSearch(const std::vector<Endpoint> &Endpoints,
              const std::vector<Link> &Links)
      : Endpoints(Endpoints), Links(Links), Outgoing(Endpoints.size()) {
    for (LinkId L = 0; L < Links.size(); ++L)
      Outgoing[Links[L].From].push_back(L);
  }

  void run(EndpointId Source) {
    constexpr double Infinity = std::numeric_limits<double>::infinity();
    size_t States = 2 * Endpoints.size();
    Dist.assign(States, Infinity);
    Via.assign(States, NoLink);
    From.assign(States, NoState);
    Done.assign(States, false);
    using Entry = std::pair<double, State>;
    std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> Queue;
    Dist[state(Source, false)] = 0;
    Queue.push({0, state(Source, false)});
    while (!Queue.empty()) {
      State S = Queue.top().second;
      Queue.pop();
      if (Done[S])
        continue;
      Done[S] = true;
      EndpointId U = S / 2;
      bool FromNetwork = S % 2;
      EndpointKind Kind = Endpoints[U].Kind;
      if (U != Source && Kind == EndpointKind::Device)
        continue;
      for (LinkId L : Outgoing[U]) {
        const Link &Hop = Links[L];
        EndpointId V = Hop.To;
        bool ToNetwork = Endpoints[V].Kind == EndpointKind::Network;
        if (Kind == EndpointKind::Nic && ToNetwork == FromNetwork)
          continue;
        State T = state(V, Kind == EndpointKind::Network &&
                               Endpoints[V].Kind == EndpointKind::Nic);
        if (Done[T])
          continue;
        double D = Dist[S] + Hop.Latency + 1.0 / Hop.Bandwidth;
        double Slack = 1e-12 * D;
        if (Dist[T] == Infinity || D < Dist[T] - Slack) {
          Dist[T] = D;
          Via[T] = L;
          From[T] = S;
          Queue.push({D, T});
        } else if (D <= Dist[T] + Slack && pathVia(S, L) < path(T)) {
          Via[T] = L;
          From[T] = S;
        }
      }
    }
  }

  /// Whether device E was reached.
  bool reached(EndpointId E) const { return Via[state(E, false)] != NoLink; }

  /// The links from the source to device E, in order.
  std::vector<LinkId> route(EndpointId E) const {
    return path(state(E, false));
  }

private:
  using State = uint32_t;
  static State state(EndpointId E, bool FromNetwork) {
    return 2 * E + FromNetwork;
  }
  std::vector<LinkId> path(State S) const {
    std::vector<LinkId> Path;
    for (; Via[S] != NoLink; S = From[S])
      Path.push_back(Via[S]);
    std::reverse(Path.begin(), Path.end());
    return Path;
  }
  std::vector<LinkId> pathVia(State S, LinkId L) const {
    std::vector<LinkId> Path = path(S);
    Path.push_back(L);
    return Path;
  }

  static constexpr LinkId NoLink = std::numeric_limits<LinkId>::max();
  static constexpr State NoState = std::numeric_limits<State>::max();
  const std::vector<Endpoint> &Endpoints;
  const std::vector<Link> &Links;
  std::vector<std::vector<LinkId>> Outgoing;
  std::vector<double> Dist;
  std::vector<LinkId> Via;
  std::vector<State> From;
  std::vector<bool> Done;
};
} // namespace

Error Machine::computeRoutes() {
  unsigned N = Devices.size();
  Routes.assign(static_cast<size_t>(N) * N, RouteSlice());
  RouteLinks.clear();
  RouteSearch Search(Endpoints, Links);
  for (DeviceId A = 0; A < N; ++A) {
    Search.run(A);
    for (DeviceId B = 0; B < N; ++B) {
      if (A == B)
        continue;
      if (!Search.reached(B))
        return fail("device '" + Devices[A].Name + "' cannot reach '" +
                    Devices[B].Name + "' over the links");
      std::vector<LinkId> Path = Search.route(B);
      if (Path.size() > MaxRouteLinks)
        return fail(llvm::formatv("the route from '{0}' to '{1}' crosses {2} "
                                  "links; at most {3}",
                                  Devices[A].Name, Devices[B].Name, Path.size(),
                                  MaxRouteLinks));
      RouteSlice &S = Routes[static_cast<size_t>(A) * N + B];
      S.Begin = RouteLinks.size();
      S.Size = Path.size();
      for (LinkId L : Path) {
        S.Latency += Links[L].Latency;
        S.Bandwidth = std::min(S.Bandwidth, Links[L].Bandwidth);
      }
      RouteLinks.insert(RouteLinks.end(), Path.begin(), Path.end());
    }
  }
  bindMeasured();
  return Error::success();
}

//===-- Measured communication --------------------------------------------===//

double SizeTable::time(double Bytes) const {
  assert(!Sizes.empty() && Sizes.size() == Times.size());
  if (Bytes <= Sizes.front())
    return Times.front();
  size_t Above =
      std::upper_bound(Sizes.begin(), Sizes.end(), Bytes) - Sizes.begin();
  if (Above == Sizes.size())
    return Bytes / (Sizes.back() / Times.back());
  size_t Below = Above - 1;
  double Low = Sizes[Below] / Times[Below];
  double High = Sizes[Above] / Times[Above];
  double Fraction = (Bytes - Sizes[Below]) / (Sizes[Above] - Sizes[Below]);
  return Bytes / (Low + (High - Low) * Fraction);
}

std::vector<uint32_t> Machine::routeShapes() const {
  std::map<std::vector<std::pair<double, double>>, uint32_t> Ids;
  std::vector<std::pair<double, double>> Figures;
  std::vector<uint32_t> Shapes;
  Shapes.reserve(Routes.size());
  for (const RouteSlice &S : Routes) {
    Figures.clear();
    for (uint32_t I = 0; I < S.Size; ++I) {
      const Link &L = Links[RouteLinks[S.Begin + I]];
      Figures.push_back({L.Bandwidth, L.Latency});
    }
    Shapes.push_back(Ids.try_emplace(Figures, Ids.size()).first->second);
  }
  return Shapes;
}

std::vector<uint32_t> Machine::ringShape(llvm::ArrayRef<uint32_t> Shapes,
                                         llvm::ArrayRef<DeviceId> Group) const {
  std::vector<uint32_t> Ring;
  size_t N = Devices.size();
  for (size_t I = 0; I < Group.size(); ++I)
    Ring.push_back(Shapes[Group[I] * N + Group[(I + 1) % Group.size()]]);
  llvm::sort(Ring);
  return Ring;
}

void Machine::bindMeasured() {
  RouteShapes.clear();
  AllReduceShapes.clear();
  for (RouteSlice &S : Routes)
    S.Measured = -1;
  if (Transfers.empty() && AllReduces.empty())
    return;
  RouteShapes = routeShapes();
  size_t N = Devices.size();
  // The first table of a route's shape times it.
  for (size_t T = Transfers.size(); T-- > 0;) {
    uint32_t Shape = RouteShapes[Transfers[T].From * N + Transfers[T].To];
    for (size_t R = 0; R < Routes.size(); ++R)
      if (Routes[R].Size != 0 && RouteShapes[R] == Shape)
        Routes[R].Measured = int32_t(T);
  }
  for (const MeasuredAllReduce &A : AllReduces)
    AllReduceShapes.push_back(ringShape(RouteShapes, A.Devices));
}

const SizeTable *Machine::allReduceTable(llvm::ArrayRef<DeviceId> Group) const {
  if (AllReduces.empty())
    return nullptr;
  std::vector<uint32_t> Shape;
  for (size_t T = 0; T < AllReduces.size(); ++T) {
    if (AllReduces[T].Devices.size() != Group.size())
      continue;
    if (Shape.empty())
      Shape = ringShape(RouteShapes, Group);
    if (AllReduceShapes[T] == Shape)
      return &AllReduces[T].Table;
  }
  return nullptr;
}

//===-- Restriction to the first devices ----------------------------------===//

Expected<Machine> Machine::firstDevices(unsigned N) const {
  if (N == 0 || N > Devices.size())
    return fail("cannot use " + llvm::Twine(N) + " devices of cluster '" +
                Name + "': it has " + llvm::Twine(Devices.size()) +
                " (ask for 1 to " + llvm::Twine(Devices.size()) + ")");
  if (N == Devices.size())
    return *this;
  // Endpoints on the routes among the kept devices, then every link among
  // those endpoints: the old routes are still there and still the best,
  // and link ids keep their order, so ties break the same way.
  std::vector<bool> Kept(Endpoints.size(), false);
  for (DeviceId A = 0; A < N; ++A) {
    Kept[A] = true;
    for (DeviceId B = 0; B < N; ++B)
      for (LinkId L : route(A, B))
        Kept[Links[L].To] = true;
  }
  Machine R;
  R.Name = Name + " (first " + std::to_string(N) + " devices)";
  std::vector<unsigned> TypeId(Types.size(), ~0u);
  for (DeviceId D = 0; D < N; ++D) {
    Device Copy = Devices[D];
    if (TypeId[Copy.Type] == ~0u) {
      TypeId[Copy.Type] = R.Types.size();
      R.Types.push_back(Types[Copy.Type]);
    }
    Copy.Type = TypeId[Copy.Type];
    R.Devices.push_back(std::move(Copy));
  }
  R.NumNodes = R.Devices.back().Node + 1;
  std::vector<EndpointId> NewId(Endpoints.size(), ~0u);
  for (EndpointId E = 0; E < Endpoints.size(); ++E)
    if (Kept[E]) {
      NewId[E] = R.Endpoints.size();
      R.Endpoints.push_back(Endpoints[E]);
    }
  for (const Link &L : Links)
    if (Kept[L.From] && Kept[L.To]) {
      Link Copy = L;
      Copy.From = NewId[L.From];
      Copy.To = NewId[L.To];
      R.Links.push_back(std::move(Copy));
    }
  // The measured tables among the kept devices (device ids stay).
  for (const MeasuredTransfer &T : Transfers)
    if (T.From < N && T.To < N)
      R.Transfers.push_back(T);
  for (const MeasuredAllReduce &A : AllReduces)
    if (A.Devices.back() < N)
      R.AllReduces.push_back(A);
  if (Error E = R.computeRoutes())
    return E;
  return R;
}

//===-- Loading -----------------------------------------------------------===//

Expected<Machine> Machine::fromFile(llvm::StringRef Path) {
  auto Buffer = llvm::MemoryBuffer::getFile(Path, /*IsText=*/true);
  if (!Buffer)
    return fail("cannot read '" + Path + "': " + Buffer.getError().message());
  return fromJson((*Buffer)->getBuffer(), Path);
}

Expected<Machine> Machine::load(llvm::StringRef PresetOrPath) {
  // A name that looks like a path is never a preset, so a mistyped path
  // says the file is missing.
  if (PresetOrPath.contains('/') || PresetOrPath.endswith(".json"))
    return fromFile(PresetOrPath);
  // A preset's name, a file's too in the working folder, is neither: the
  // file used to win silently.
  bool PresetName = llvm::any_of(presets(), [&](const PresetInfo &P) {
    llvm::StringRef Name(P.Name);
    Name.consume_back(":N");
    return PresetOrPath == Name || PresetOrPath.startswith(Name.str() + ":");
  });
  if (!llvm::sys::fs::exists(PresetOrPath))
    return preset(PresetOrPath);
  if (PresetName)
    return fail("'" + PresetOrPath +
                "' is a cluster preset's name and a file in this folder; "
                "write ./" +
                PresetOrPath + " for the file");
  return fromFile(PresetOrPath);
}
