//===- simulator/Simulator.cpp - Full and delta simulation ----------------===//
//
// Both algorithms share one scheduler (Algorithm 1): tasks leave a priority
// queue in (ready time, key) order, which is also the order each resource
// runs them in, so the schedule is one sequence appended to at the back.
// Delta simulation cuts it at the first task ready at or after tau, restores
// each resource's last task from what it cut, and feeds the cut tasks, with
// the new ones, to the same scheduler.
//
// The scheduler works on its own compact copy of the graph (Node, EdgePool):
// a re-simulated suffix touches most tasks, and one cache line per task
// instead of four, with no per-resource lists, is most of its speed.
//
//===----------------------------------------------------------------------===//
#include "simulator/Simulator.h"
#include "simulator/MemoryModel.h"
#include <algorithm>
#include <functional>
#include <limits>

namespace onnx2soap::simulator {

static constexpr double NoTail = -std::numeric_limits<double>::infinity();
static constexpr size_t Ahead = 8;

static void prefetch(const void *Address) {
#if defined(__GNUC__)
  __builtin_prefetch(Address);
#endif
}

Simulator::Simulator(const ir::TrainingGraph &T, const Machine &M,
                     const CostModel &Cost, SimOptions Options)
    : Graph(T, M, Cost, Options) {}

void Simulator::syncNode(TaskId Id) {
  const Task &T = Graph.task(Id);
  Node &N = Nodes[Id];
  uint32_t OldPrevious = N.EdgeBegin + N.NumPreds + N.NumSuccs + N.NumResources;
  uint32_t OldResources = N.NumResources;
  DeadEdges += N.NumPreds + N.NumSuccs + 2 * N.NumResources;
  N.Duration = T.Duration;
  N.Key = T.Key;
  N.Alive = T.Alive;
  if (!T.Alive) {
    // Its ready time stays: delta simulation's tau reads it.
    N.NumPreds = N.NumSuccs = N.NumResources = 0;
    return;
  }
  N.EdgeBegin = EdgePool.size();
  N.NumPreds = T.Preds.size();
  N.NumSuccs = T.Succs.size();
  assert(T.Resources.size() <= UINT16_MAX && "too many resources");
  N.NumResources = T.Resources.size();
  EdgePool.insert(EdgePool.end(), T.Preds.begin(), T.Preds.end());
  EdgePool.insert(EdgePool.end(), T.Succs.begin(), T.Succs.end());
  EdgePool.insert(EdgePool.end(), T.Resources.begin(), T.Resources.end());
  // A task rewired in place keeps its resources and its place on them.
  if (OldResources == N.NumResources)
    for (uint32_t I = 0; I < OldResources; ++I)
      EdgePool.push_back(EdgePool[OldPrevious + I]);
  else
    EdgePool.insert(EdgePool.end(), N.NumResources, NoTask);
}

void Simulator::compactEdges() {
  std::vector<uint32_t> Pool;
  Pool.reserve(EdgePool.size() - DeadEdges);
  for (Node &N : Nodes) {
    uint32_t Size = N.NumPreds + N.NumSuccs + 2 * N.NumResources;
    uint32_t Begin = Pool.size();
    Pool.insert(Pool.end(), EdgePool.begin() + N.EdgeBegin,
                EdgePool.begin() + N.EdgeBegin + Size);
    N.EdgeBegin = Begin;
  }
  EdgePool = std::move(Pool);
  DeadEdges = 0;
}

void Simulator::schedule() {
  TimesStale = true;
  auto Later = std::greater<QueueEntry>();
  Heap.clear();
  auto Push = [&](const Node &N, TaskId Id) {
    Heap.push_back({N.Ready, N.Key, Id});
    std::push_heap(Heap.begin(), Heap.end(), Later);
  };
  // The nodes a suffix visits are scattered over memory: fetch them a few
  // tasks ahead.
  for (size_t I = 0; I < Dirty.size(); ++I) {
    if (I + Ahead < Dirty.size())
      prefetch(&Nodes[Dirty[I + Ahead]]);
    if (I + Ahead / 2 < Dirty.size())
      for (TaskId P : preds(Nodes[Dirty[I + Ahead / 2]]))
        prefetch(&Nodes[P]);
    TaskId Id = Dirty[I];
    Node &N = Nodes[Id];
    double Ready = 0;
    uint32_t Waiting = 0;
    for (TaskId P : preds(N)) {
      const Node &Pred = Nodes[P];
      if (Pred.Pending)
        ++Waiting;
      else
        Ready = std::max(Ready, Pred.End);
    }
    N.Ready = Ready;
    N.Waiting = Waiting;
    if (Waiting == 0)
      Push(N, Id);
  }
  while (!Heap.empty()) {
    std::pop_heap(Heap.begin(), Heap.end(), Later);
    TaskId Id = Heap.back().Id;
    Heap.pop_back();
    if (!Heap.empty())
      prefetch(&Nodes[Heap.front().Id]);
    Node &N = Nodes[Id];
    for (TaskId Next : succs(N))
      prefetch(&Nodes[Next]);
    double Start = N.Ready;
    llvm::ArrayRef<uint32_t> Resources = resources(N);
    for (ResourceId R : Resources)
      Start = std::max(Start, Tails[R]);
    Starts[Id] = Start;
    N.End = Start + N.Duration;
    llvm::MutableArrayRef<uint32_t> Previous = previous(N);
    for (size_t I = 0; I < Resources.size(); ++I) {
      ResourceId R = Resources[I];
      Previous[I] = TailTasks[R];
      TailTasks[R] = Id;
      Tails[R] = N.End;
    }
    Sequence.push_back({N.Ready, Id});
    N.Pending = false;
    for (TaskId Next : succs(N)) {
      Node &S = Nodes[Next];
      S.Ready = std::max(S.Ready, N.End);
      if (--S.Waiting == 0)
        Push(S, Next);
    }
  }
}

double Simulator::simulate(const Strategy &S) {
  Graph.build(S);
  Memory = memoryBreakdown(Graph);
  Nodes.assign(Graph.size(), Node());
  Starts.assign(Graph.size(), 0);
  EdgePool.clear();
  DeadEdges = 0;
  for (TaskId Id = 0; Id < Graph.size(); ++Id)
    syncNode(Id);
  DeadEdges = 0;
  Sequence.clear();
  TailTasks.assign(Graph.numResources(), NoTask);
  Tails.assign(Graph.numResources(), NoTail);
  Dirty.clear();
  for (TaskId Id = 0; Id < Graph.size(); ++Id)
    if (Nodes[Id].Alive) {
      Nodes[Id].Pending = true;
      Dirty.push_back(Id);
    }
  schedule();
  return time();
}

double Simulator::change(ir::OpId Op, const ParallelConfig &C) {
  return change(llvm::ArrayRef<ir::OpId>(Op),
                llvm::ArrayRef<ParallelConfig>(C));
}

double Simulator::change(llvm::ArrayRef<ir::OpId> Ops,
                         llvm::ArrayRef<ParallelConfig> Configs) {
  std::vector<TaskId> Changed = Graph.changeConfigs(Ops, Configs);
  if (Nodes.size() < Graph.size()) {
    Nodes.resize(Graph.size());
    Starts.resize(Graph.size(), 0);
  }
  // Removed tasks keep their edges until the cut below has read where they
  // ran.
  for (TaskId Dead : Graph.removed())
    Nodes[Dead].Alive = false;
  for (TaskId New : Graph.created()) {
    syncNode(New);
    Nodes[New].Pending = true; // marks new tasks while tau is worked out
  }
  Rewired.assign(Graph.rewired().begin(), Graph.rewired().end());
  Marks.dedupe(Rewired);
  for (TaskId Id : Rewired)
    if (Graph.task(Id).Alive && !Nodes[Id].Pending)
      syncNode(Id);

  // Nothing ready before Tau changes: removed tasks and tasks that gained or
  // lost a predecessor keep their old ready times until re-simulated, and a
  // new or touched task cannot be ready before its predecessors that were
  // ready before those (whose ends can only grow) end.
  double Tau0 = std::numeric_limits<double>::infinity();
  for (TaskId Dead : Graph.removed()) {
    Memory.add(Graph.task(Dead), -1);
    Tau0 = std::min(Tau0, Nodes[Dead].Ready);
  }
  for (TaskId Id : Changed)
    if (!Nodes[Id].Pending)
      Tau0 = std::min(Tau0, Nodes[Id].Ready);
  // A changed or new task one of whose predecessors is re-simulated (new,
  // or ready at or after Tau0 >= Tau) is ready no earlier than that one,
  // which is ready at or after Tau itself (by induction along the edges; a
  // re-simulated task all of whose predecessors are kept keeps its ready
  // time). Only a task all of whose predecessors are kept and ready before
  // Tau0 bounds Tau: it is ready when the last of them ends. (Bounding
  // every task by its kept predecessors alone gave 0 for the many new
  // tasks with only new predecessors: every change re-simulated the whole
  // timeline.)
  double Tau = Tau0;
  for (TaskId Id : Changed) {
    double Bound = 0;
    bool Follows = false;
    for (TaskId P : preds(Nodes[Id])) {
      const Node &Pred = Nodes[P];
      if (Pred.Pending || Pred.Ready >= Tau0) {
        Follows = true;
        break;
      }
      Bound = std::max(Bound, Pred.End);
    }
    if (!Follows)
      Tau = std::min(Tau, Bound);
  }

  // Everything ready at or after Tau is a suffix of the schedule, and of each
  // resource's order: take it out, and schedule it again with the new tasks.
  Dirty.assign(Graph.created().begin(), Graph.created().end());
  for (TaskId New : Graph.created())
    Memory.add(Graph.task(New), 1);
  size_t Keep = Sequence.size();
  while (Keep > 0 && Sequence[Keep - 1].Ready >= Tau) {
    if (Keep > Ahead)
      prefetch(&Nodes[Sequence[Keep - Ahead].Id]);
    TaskId Id = Sequence[--Keep].Id;
    Node &N = Nodes[Id];
    llvm::ArrayRef<uint32_t> Resources = resources(N);
    llvm::MutableArrayRef<uint32_t> Previous = previous(N);
    for (size_t I = 0; I < Resources.size(); ++I)
      TailTasks[Resources[I]] = Previous[I];
    if (N.Alive && !N.Pending) {
      N.Pending = true;
      Dirty.push_back(Id);
    }
  }
  Sequence.resize(Keep);
  for (ResourceId R = 0; R < Tails.size(); ++R)
    Tails[R] = TailTasks[R] == NoTask ? NoTail : Nodes[TailTasks[R]].End;
  for (TaskId Dead : Graph.removed())
    syncNode(Dead);
  if (DeadEdges > EdgePool.size() / 2 + 4096)
    compactEdges();
  schedule();
  return time();
}

const TaskGraph &Simulator::graph() const {
  if (TimesStale) {
    for (TaskId Id = 0; Id < Graph.size(); ++Id) {
      Task &T = Graph.task(Id);
      if (!T.Alive)
        continue;
      T.Ready = Nodes[Id].Ready;
      T.Start = Starts[Id];
      T.End = Nodes[Id].End;
    }
    TimesStale = false;
  }
  return Graph;
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
  for (double Tail : Tails)
    Time = std::max(Time, Tail);
  return Time;
}

SimReport Simulator::report() const {
  const Machine &M = Graph.machine();
  SimReport R;
  R.Time = time();
  R.ComputeTime.assign(M.numDevices(), 0);
  R.CopyTime.assign(M.numDevices(), 0);
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
    case TaskKind::Copy:
      R.ComputeTime[T.Device] += T.Duration - T.CopySeconds;
      R.CopyTime[T.Device] += T.CopySeconds;
      break;
    case TaskKind::Transfer:
    case TaskKind::GradTransfer:
      R.BytesSent[T.Device] += T.Bytes;
      ++R.Transfers;
      R.MeasuredTransfers += M.measuredRoute(T.Device, T.Peer);
      break;
    case TaskKind::StatsAllReduce:
    case TaskKind::GradAllReduce: {
      ++R.AllReduces;
      R.MeasuredAllReduces += M.allReduceTable(T.Group) != nullptr;
      // Each member's share as the program's ring sends it (chunks of whole
      // elements, so members may differ by a few bytes).
      size_t N = T.Group.size();
      double Whole = T.Bytes * double(N) / (2.0 * double(N - 1));
      unsigned ElementSize =
          T.Kind == TaskKind::GradAllReduce && T.Tensor != ir::NoTensor
              ? unsigned(ir::dtypeSize(
                    Graph.training().G.tensor(T.Tensor).Type.Type))
              : 4;
      for (size_t P = 0; P < N; ++P)
        R.BytesSent[T.Group[P]] += ringBytesSent(Whole, ElementSize, N, P);
      break;
    }
    }
  }
  for (double Bytes : R.BytesSent)
    R.BytesTransferred += Bytes;
  MemoryBreakdown Breakdown = memoryBreakdown(Graph);
  R.PeakMemory = Breakdown.total();
  for (DeviceId D = 0; D < M.numDevices(); ++D) {
    R.KernelScratch.push_back(Breakdown.scratch(D));
    R.RuntimeMemory.push_back(Breakdown.runtime(D));
    R.Communicators.push_back(Breakdown.Communicators[D]);
    R.Peers.push_back(Breakdown.Peers[D]);
  }
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
      Entries.push_back({T.Key, T.Kind, Starts[Id], Nodes[Id].End});
  }
  std::sort(Entries.begin(), Entries.end(),
            [](const TimelineEntry &A, const TimelineEntry &B) {
              return A.Key < B.Key;
            });
  return Entries;
}

} // namespace onnx2soap::simulator
