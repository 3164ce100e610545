//===- simulator/Simulator.cpp - Full and delta simulation ----------------===//
//
// Both algorithms share one scheduler (Algorithm 1): tasks leave a priority
// queue in (ready time, key) order, which is also the order each resource
// runs them in, so every resource's order is a list appended to at the back.
// Delta simulation cuts each list at the first task ready at or after tau and
// feeds what it cut, with the new tasks, to the same scheduler.
//
//===----------------------------------------------------------------------===//
#include "simulator/Simulator.h"
#include "simulator/MemoryModel.h"
#include <algorithm>
#include <limits>
#include <queue>

namespace onnx2soap::simulator {

namespace {
/// A task ready to be scheduled; the queue yields the smallest (ready time,
/// key) first.
struct QueueEntry {
  double Ready;
  TaskKey Key;
  TaskId Id;
  bool operator>(const QueueEntry &O) const {
    if (Ready != O.Ready)
      return Ready > O.Ready;
    return O.Key < Key;
  }
};
using ReadyQueue = std::priority_queue<QueueEntry, std::vector<QueueEntry>,
                                       std::greater<QueueEntry>>;
} // namespace

Simulator::Simulator(const ir::TrainingGraph &T, const Machine &M,
                     const CostModel &Cost, SimOptions Options)
    : Graph(T, M, Cost, Options) {}

void Simulator::schedule(const std::vector<TaskId> &Dirty) {
  ReadyQueue Queue;
  for (TaskId Id : Dirty) {
    Task &T = Graph.task(Id);
    T.Ready = 0;
    Waiting[Id] = 0;
    for (TaskId P : T.Preds) {
      if (Pending[P])
        ++Waiting[Id];
      else
        T.Ready = std::max(T.Ready, Graph.task(P).End);
    }
    if (Waiting[Id] == 0)
      Queue.push({T.Ready, T.Key, Id});
  }
  while (!Queue.empty()) {
    TaskId Id = Queue.top().Id;
    Queue.pop();
    Task &T = Graph.task(Id);
    double Start = T.Ready;
    for (ResourceId R : T.Resources)
      if (!Orders[R].empty())
        Start = std::max(Start, Graph.task(Orders[R].back()).End);
    T.Start = Start;
    T.End = Start + T.Duration;
    for (ResourceId R : T.Resources)
      Orders[R].push_back(Id);
    Pending[Id] = 0;
    for (TaskId Next : T.Succs) {
      Task &N = Graph.task(Next);
      N.Ready = std::max(N.Ready, T.End);
      if (--Waiting[Next] == 0)
        Queue.push({N.Ready, N.Key, Next});
    }
  }
}

double Simulator::simulate(const Strategy &S) {
  Graph.build(S);
  Memory = memoryBreakdown(Graph);
  Orders.assign(Graph.numResources(), {});
  Pending.assign(Graph.size(), 0);
  Waiting.assign(Graph.size(), 0);
  std::vector<TaskId> Dirty;
  for (TaskId Id = 0; Id < Graph.size(); ++Id)
    if (Graph.task(Id).Alive) {
      Pending[Id] = 1;
      Dirty.push_back(Id);
    }
  schedule(Dirty);
  return time();
}

double Simulator::change(ir::OpId Op, const ParallelConfig &C) {
  return change(llvm::ArrayRef<ir::OpId>(Op),
                llvm::ArrayRef<ParallelConfig>(C));
}

double Simulator::change(llvm::ArrayRef<ir::OpId> Ops,
                         llvm::ArrayRef<ParallelConfig> Configs) {
  std::vector<TaskId> Changed = Graph.changeConfigs(Ops, Configs);
  Pending.resize(Graph.size(), 0);
  Waiting.resize(Graph.size(), 0);
  for (TaskId New : Graph.created())
    Pending[New] = 1; // marks new tasks while tau is worked out

  // Nothing ready before Tau changes: removed tasks and tasks that gained or
  // lost a predecessor keep their old ready times until re-simulated, and a
  // new or touched task cannot be ready before its predecessors that were
  // ready before those (whose ends can only grow) end.
  double Tau0 = std::numeric_limits<double>::infinity();
  for (TaskId Dead : Graph.removed()) {
    Memory.add(Graph.task(Dead), -1);
    Tau0 = std::min(Tau0, Graph.task(Dead).Ready);
  }
  for (TaskId Id : Changed)
    if (!Pending[Id])
      Tau0 = std::min(Tau0, Graph.task(Id).Ready);
  double Tau = Tau0;
  for (TaskId Id : Changed) {
    double Bound = 0;
    for (TaskId P : Graph.task(Id).Preds)
      if (!Pending[P] && Graph.task(P).Ready < Tau0)
        Bound = std::max(Bound, Graph.task(P).End);
    Tau = std::min(Tau, Bound);
  }

  // Everything ready at or after Tau is a suffix of each resource's order:
  // take it out, and schedule it again with the new tasks.
  std::vector<TaskId> Dirty(Graph.created().begin(), Graph.created().end());
  for (TaskId New : Graph.created())
    Memory.add(Graph.task(New), 1);
  for (std::vector<TaskId> &Order : Orders)
    while (!Order.empty() && Graph.task(Order.back()).Ready >= Tau) {
      TaskId Id = Order.back();
      Order.pop_back();
      if (Graph.task(Id).Alive && !Pending[Id]) {
        Pending[Id] = 1;
        Dirty.push_back(Id);
      }
    }
  schedule(Dirty);
  return time();
}

// Both run after every accepted proposal: no allocation.
double Simulator::peakMemory() const {
  double Peak = 0;
  for (DeviceId D = 0; D < Graph.machine().numDevices(); ++D)
    Peak = std::max(Peak, Memory.total(D));
  return Peak;
}

double Simulator::memoryOverflow(double Limit) const {
  const Machine &M = Graph.machine();
  double Over = 0;
  for (DeviceId D = 0; D < M.numDevices(); ++D) {
    double Capacity =
        Limit > 0 ? Limit : double(M.deviceType(D).MemoryCapacity);
    Over = std::max(Over, Memory.total(D) - Capacity);
  }
  return Over;
}

double Simulator::time() const {
  double Time = 0;
  for (const std::vector<TaskId> &Order : Orders)
    if (!Order.empty())
      Time = std::max(Time, Graph.task(Order.back()).End);
  return Time;
}

SimReport Simulator::report() const {
  const Machine &M = Graph.machine();
  SimReport R;
  R.Time = time();
  R.ComputeTime.assign(M.numDevices(), 0);
  R.BytesSent.assign(M.numDevices(), 0);
  for (TaskId Id = 0; Id < Graph.size(); ++Id) {
    const Task &T = Graph.task(Id);
    if (!T.Alive)
      continue;
    ++R.NumTasks;
    switch (T.Kind) {
    case TaskKind::Forward:
    case TaskKind::Backward:
    case TaskKind::Update:
      R.ComputeTime[T.Device] += T.Duration;
      break;
    case TaskKind::Transfer:
    case TaskKind::GradTransfer:
      R.BytesSent[T.Device] += T.Bytes;
      break;
    case TaskKind::StatsAllReduce:
    case TaskKind::GradAllReduce:
      for (DeviceId D : T.Group)
        R.BytesSent[D] += T.Bytes;
      break;
    }
  }
  for (double Bytes : R.BytesSent)
    R.BytesTransferred += Bytes;
  R.PeakMemory = memoryBreakdown(Graph).total();
  for (DeviceId D = 0; D < M.numDevices(); ++D)
    if (R.PeakMemory[D] > double(M.deviceType(D).MemoryCapacity))
      R.Fits = false;
  return R;
}

std::vector<Simulator::TimelineEntry> Simulator::timeline() const {
  std::vector<TimelineEntry> Entries;
  for (TaskId Id = 0; Id < Graph.size(); ++Id) {
    const Task &T = Graph.task(Id);
    if (T.Alive)
      Entries.push_back({T.Key, T.Kind, T.Start, T.End});
  }
  std::sort(Entries.begin(), Entries.end(),
            [](const TimelineEntry &A, const TimelineEntry &B) {
              return A.Key < B.Key;
            });
  return Entries;
}

} // namespace onnx2soap::simulator
