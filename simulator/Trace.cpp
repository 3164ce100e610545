//===- simulator/Trace.cpp - The simulated timeline as trace events -------===//
//
// Events are sorted by (start, resource, task key), so the file is the same
// whatever order the task graph's slots are in (delta simulation reuses
// them). Links that carry nothing get no track.
//
//===----------------------------------------------------------------------===//
#include "simulator/Trace.h"
#include "ir/JsonText.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include <algorithm>
#include <cmath>
#include <tuple>

namespace onnx2soap::simulator {

using llvm::json::Object;
using llvm::json::Value;

/// The op on the other side of a transfer: the producer, whose task precedes
/// an activation transfer and follows a gradient transfer (or the copy that
/// packs, or adds, what it sends: the activation's producer).
static llvm::StringRef producerName(const TaskGraph &Graph, const Task &T) {
  const ir::Graph &G = Graph.training().G;
  llvm::ArrayRef<TaskId> Ends =
      T.Kind == TaskKind::Transfer ? T.Preds : T.Succs;
  for (TaskId End : Ends) {
    const Task &Other = Graph.task(End);
    if (Other.Kind == TaskKind::Copy && Other.Tensor != ir::NoTensor)
      return G.op(G.tensor(Other.Tensor).Producer).Name;
    if (Other.Op != ir::NoOp)
      return G.op(Other.Op).Name;
  }
  return "?";
}

std::string traceEventName(const TaskGraph &Graph, TaskId Id) {
  const Task &T = Graph.task(Id);
  const ir::Graph &G = Graph.training().G;
  auto OpName = [&]() -> llvm::StringRef {
    return T.Op == ir::NoOp ? llvm::StringRef("?")
                            : llvm::StringRef(G.op(T.Op).Name);
  };
  auto TensorName = [&]() -> llvm::StringRef {
    return T.Tensor == ir::NoTensor ? llvm::StringRef("?")
                                    : llvm::StringRef(G.tensor(T.Tensor).Name);
  };
  switch (T.Kind) {
  case TaskKind::Forward:
    return llvm::formatv("fwd {0} [p{1}]", OpName(), T.Partition).str();
  case TaskKind::Backward:
    return llvm::formatv("bwd {0} [p{1}]", OpName(), T.Partition).str();
  case TaskKind::Transfer:
    return llvm::formatv("xfer {0}->{1}", producerName(Graph, T), OpName())
        .str();
  case TaskKind::GradTransfer:
    return llvm::formatv("grad {0}->{1}", OpName(), producerName(Graph, T))
        .str();
  case TaskKind::StatsAllReduce:
    return llvm::formatv("stats {0}", OpName()).str();
  case TaskKind::GradAllReduce: {
    size_t Tensors = bucketTensors(Graph.bucketParts(Id)).size();
    if (Tensors > 1)
      return llvm::formatv("allreduce {0} +{1}", TensorName(), Tensors - 1)
          .str();
    return llvm::formatv("allreduce {0}", TensorName()).str();
  }
  case TaskKind::Update:
    return llvm::formatv("update {0}", TensorName()).str();
  case TaskKind::Copy:
    return llvm::formatv("copy {0} [{1}]", TensorName(), OpName()).str();
  }
  llvm_unreachable("unknown TaskKind");
}

std::string deviceGroupText(const Machine &M, llvm::ArrayRef<DeviceId> Group) {
  std::string Text;
  auto Append = [&](const std::string &Part) {
    Text += (Text.empty() ? "" : ", ") + Part;
  };
  size_t I = 0;
  while (I < Group.size()) {
    // The longest evenly spaced run from Group[I].
    size_t End = I + 1;
    if (End < Group.size()) {
      DeviceId Step = Group[End] - Group[I];
      while (End + 1 < Group.size() && Group[End + 1] - Group[End] == Step)
        ++End;
      ++End;
    }
    if (End - I < 3) {
      Append(M.device(Group[I]).Name);
      ++I;
      continue;
    }
    DeviceId Step = Group[I + 1] - Group[I];
    Append(M.device(Group[I]).Name + " to " + M.device(Group[End - 1]).Name +
           (Step == 1 ? "" : " by " + std::to_string(Step)));
    I = End;
  }
  return Text;
}

namespace {
/// Where a resource's track lives.
struct Track {
  int64_t Process = 0;
  std::string Name;
};
} // namespace

void writeChromeTrace(const TaskGraph &Graph, llvm::raw_ostream &OS) {
  const Machine &M = Graph.machine();
  const ir::Graph &G = Graph.training().G;
  unsigned NumDevices = M.numDevices();
  // One process per node, and one more for links shared between nodes.
  int64_t SharedProcess = M.numNodes();
  std::vector<Track> Tracks(Graph.numResources());
  for (DeviceId D = 0; D < NumDevices; ++D)
    Tracks[D] = {M.device(D).Node, M.device(D).Name};
  for (LinkId L = 0; L < M.numLinks(); ++L) {
    const Link &Link = M.link(L);
    int Node = M.endpoint(Link.From).Node;
    if (Node < 0)
      Node = M.endpoint(Link.To).Node;
    Tracks[NumDevices + L] = {Node < 0 ? SharedProcess : Node, Link.Name};
  }
  for (ResourceId R = NumDevices + M.numLinks(); R < Tracks.size(); ++R) {
    DeviceId D = R - NumDevices - M.numLinks();
    Tracks[R] = {M.device(D).Node, M.device(D).Name + " communication"};
  }

  struct Event {
    double Start;
    ResourceId Resource;
    TaskKey Key;
    TaskId Id;
  };
  std::vector<Event> Events;
  std::vector<bool> Used(Graph.numResources(), false);
  for (TaskId Id = 0; Id < Graph.size(); ++Id) {
    const Task &T = Graph.task(Id);
    if (!T.Alive)
      continue;
    for (ResourceId R : T.Resources) {
      Events.push_back({T.Start, R, T.Key, Id});
      Used[R] = true;
    }
  }
  std::sort(Events.begin(), Events.end(), [](const Event &A, const Event &B) {
    if (A.Start != B.Start)
      return A.Start < B.Start;
    if (A.Resource != B.Resource)
      return A.Resource < B.Resource;
    return A.Key < B.Key;
  });

  bool First = true;
  auto Emit = [&](Object Event) {
    OS << (First ? "\n" : ",\n") << Value(std::move(Event));
    First = false;
  };
  OS << "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[";
  bool HasShared = false;
  for (ResourceId R = NumDevices; R < Tracks.size(); ++R)
    HasShared |= Used[R] && Tracks[R].Process == SharedProcess;
  for (int64_t P = 0; P < SharedProcess + (HasShared ? 1 : 0); ++P) {
    std::string Name =
        P == SharedProcess ? "network" : llvm::formatv("node{0}", P).str();
    Emit(Object{{"ph", "M"},
                {"name", "process_name"},
                {"pid", P},
                {"args", Object{{"name", Name}}}});
    Emit(Object{{"ph", "M"},
                {"name", "process_sort_index"},
                {"pid", P},
                {"args", Object{{"sort_index", P}}}});
  }
  for (ResourceId R = 0; R < Tracks.size(); ++R) {
    if (R >= NumDevices && !Used[R])
      continue;
    Emit(Object{{"ph", "M"},
                {"name", "thread_name"},
                {"pid", Tracks[R].Process},
                {"tid", int64_t(R)},
                {"args", Object{{"name", Tracks[R].Name}}}});
    Emit(Object{{"ph", "M"},
                {"name", "thread_sort_index"},
                {"pid", Tracks[R].Process},
                {"tid", int64_t(R)},
                {"args", Object{{"sort_index", int64_t(R)}}}});
  }
  for (const Event &E : Events) {
    const Task &T = Graph.task(E.Id);
    Object Args{{"device", M.device(T.Device).Name}};
    switch (T.Kind) {
    case TaskKind::Forward:
    case TaskKind::Backward:
      Args["partition"] = int64_t(T.Partition);
      Args["config"] = Graph.strategy()[T.Op].str();
      break;
    case TaskKind::Transfer:
    case TaskKind::GradTransfer:
      Args["peer"] = M.device(T.Peer).Name;
      Args["bytes"] = T.Bytes;
      if (M.measuredRoute(T.Device, T.Peer))
        Args["measured"] = true; // timed by the cluster's measured table
      break;
    case TaskKind::StatsAllReduce:
    case TaskKind::GradAllReduce: {
      Args["devices"] = deviceGroupText(M, T.Group);
      Args["group_size"] = int64_t(T.Group.size());
      Args["bytes"] = T.Bytes;
      if (M.allReduceTable(T.Group))
        Args["measured"] = true;
      if (T.Kind == TaskKind::GradAllReduce) {
        llvm::json::Array Tensors;
        for (ir::TensorId Tensor : bucketTensors(Graph.bucketParts(E.Id)))
          Tensors.push_back(G.tensor(Tensor).Name);
        Args["tensors"] = std::move(Tensors);
      }
      break;
    }
    case TaskKind::Update:
    case TaskKind::Copy:
      Args["bytes"] = T.Bytes;
      break;
    }
    if (T.Op != ir::NoOp)
      Args["op"] = G.op(T.Op).Name;
    // Times to the nanosecond, in the microseconds the format counts in,
    // in the fewest digits that read back (a double prints 17 otherwise).
    int64_t StartNs = std::llround(T.Start * 1e9);
    int64_t EndNs = std::llround(T.End * 1e9);
    auto Micros = [](int64_t Ns) { return ir::shortestNumber(Ns / 1e3); };
    OS << (First ? "\n" : ",\n");
    First = false;
    // Keys in sorted order, as the metadata events above print them.
    llvm::json::OStream J(OS);
    J.object([&] {
      J.attribute("args", std::move(Args));
      J.attribute("cat", taskKindName(T.Kind));
      J.attributeBegin("dur");
      J.rawValue(Micros(EndNs - StartNs));
      J.attributeEnd();
      J.attribute("name", traceEventName(Graph, E.Id));
      J.attribute("ph", "X");
      J.attribute("pid", Tracks[E.Resource].Process);
      J.attribute("tid", int64_t(E.Resource));
      J.attributeBegin("ts");
      J.rawValue(Micros(StartNs));
      J.attributeEnd();
    });
  }
  OS << "\n]}\n";
}

} // namespace onnx2soap::simulator
