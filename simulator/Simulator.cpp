//===- simulator/Simulator.cpp - Full and delta simulation ----------------===//
//
// Both algorithms share one scheduler (Algorithm 1): tasks leave a priority
// queue in (ready time, key) order, which is also the order each resource
// runs them in, so the schedule is one sequence appended to at the back.
// Delta simulation cuts it at the first task ready at or after tau, restores
// each resource's last task from what it cut, and feeds the cut tasks, with
// the new ones, to the same scheduler.
//
// The scheduler works on its own compact copy of the graph (Node, the edge
// pool): a re-simulated suffix touches most tasks, and one cache line per task
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

// The limit schedule() gives up above for a step rejected above
// GiveUpAbove: the running sums of pending durations round, and a relative
// 1e-9 more keeps a step that takes exactly GiveUpAbove from being given up.
static double giveUpLimit(double GiveUpAbove) {
  return GiveUpAbove * (1 + 1e-9);
}

static void prefetch(const void *Address) {
#if defined(__GNUC__)
  __builtin_prefetch(Address);
#endif
}

Simulator::Simulator(const ir::TrainingGraph &T, const Machine &M,
                     const CostModel &Cost, SimOptions Options)
    : T(T), M(M), Cost(Cost),
      Graph(std::make_unique<TaskGraph>(T, M, Cost, Options)) {}

void Simulator::setGradientBucket(double Bytes) {
  Graph->setGradientBucket(Bytes);
  Simulated = false;
  Spare.reset();
  Undoable = Last::None;
}

void Simulator::revert() {
  assert(canRevert() && "nothing to revert");
  if (Undoable == Last::Change)
    Graph->revert();
  else
    std::swap(Graph, Spare);
  std::swap(Now, Saved);
  TimesStale = true;
  Undoable = Last::None;
}

void Simulator::syncNode(TaskId Id) {
  const Task &T = Graph->task(Id);
  Node &N = Now.Nodes[Id];
  uint32_t OldPrevious = N.EdgeBegin + N.NumPreds + N.NumSuccs + N.NumResources;
  uint32_t OldResources = N.NumResources;
  Now.DeadEdges += N.NumPreds + N.NumSuccs + 2 * N.NumResources;
  N.Duration = T.Duration;
  N.Key = T.Key;
  N.Alive = T.Alive;
  if (!T.Alive) {
    // Its ready time stays: delta simulation's tau reads it.
    N.NumPreds = N.NumSuccs = N.NumResources = 0;
    return;
  }
  N.EdgeBegin = Now.EdgePool.size();
  N.NumPreds = T.Preds.size();
  N.NumSuccs = T.Succs.size();
  assert(T.Resources.size() <= UINT16_MAX && "too many resources");
  N.NumResources = T.Resources.size();
  Now.EdgePool.insert(Now.EdgePool.end(), T.Preds.begin(), T.Preds.end());
  Now.EdgePool.insert(Now.EdgePool.end(), T.Succs.begin(), T.Succs.end());
  Now.EdgePool.insert(Now.EdgePool.end(), T.Resources.begin(),
                      T.Resources.end());
  // A task rewired in place keeps its resources and its place on them.
  if (OldResources == N.NumResources)
    for (uint32_t I = 0; I < OldResources; ++I)
      Now.EdgePool.push_back(Now.EdgePool[OldPrevious + I]);
  else
    Now.EdgePool.insert(Now.EdgePool.end(), N.NumResources, NoTask);
}

void Simulator::compactEdges() {
  std::vector<uint32_t> Pool;
  Pool.reserve(Now.EdgePool.size() - Now.DeadEdges);
  for (Node &N : Now.Nodes) {
    uint32_t Size = N.NumPreds + N.NumSuccs + 2 * N.NumResources;
    uint32_t Begin = Pool.size();
    Pool.insert(Pool.end(), Now.EdgePool.begin() + N.EdgeBegin,
                Now.EdgePool.begin() + N.EdgeBegin + Size);
    N.EdgeBegin = Begin;
  }
  Now.EdgePool = std::move(Pool);
  Now.DeadEdges = 0;
}

bool Simulator::schedule(double Limit) {
  TimesStale = true;
  auto Later = std::greater<QueueEntry>();
  Heap.clear();
  bool Bounded = Limit != std::numeric_limits<double>::infinity();
  if (Bounded) {
    Remaining.resize(Now.Tails.size(), 0);
    for (TaskId Id : Dirty)
      for (ResourceId R : resources(Now.Nodes[Id])) {
        if (Remaining[R] == 0)
          Loaded.push_back(R);
        Remaining[R] += Now.Nodes[Id].Duration;
      }
  }
  // Remaining is zero between runs.
  auto ClearLoads = [&] {
    for (ResourceId R : Loaded)
      Remaining[R] = 0;
    Loaded.clear();
  };
  if (Bounded)
    for (ResourceId R : Loaded)
      if (Now.Tails[R] + Remaining[R] > Limit) {
        ClearLoads();
        return false;
      }
  // std::push_heap's sift (QueueEntry::after's order), with the entry
  // written once in its place: an entry built on the stack and copied in
  // was read back 16 bytes at a time from its narrower stores, which stalls
  // store forwarding (a quarter of schedule()'s samples by perf on
  // ResNet-101 over 8 K80s).
  auto Push = [&](const Node &N, TaskId Id) {
    size_t Hole = Heap.size();
    Heap.emplace_back();
    while (Hole > 0) {
      size_t Parent = (Hole - 1) / 2;
      const QueueEntry &Above = Heap[Parent];
      if (!Above.after(N.Ready, N.Key))
        break;
      Heap[Hole] = Above;
      Hole = Parent;
    }
    QueueEntry &Entry = Heap[Hole];
    Entry.Ready = N.Ready;
    Entry.Key = N.Key;
    Entry.Id = Id;
  };
  // The nodes a suffix visits are scattered over memory: fetch them a few
  // tasks ahead.
  for (size_t I = 0; I < Dirty.size(); ++I) {
    if (I + Ahead < Dirty.size())
      prefetch(&Now.Nodes[Dirty[I + Ahead]]);
    if (I + Ahead / 2 < Dirty.size())
      for (TaskId P : preds(Now.Nodes[Dirty[I + Ahead / 2]]))
        prefetch(&Now.Nodes[P]);
    TaskId Id = Dirty[I];
    Node &N = Now.Nodes[Id];
    double Ready = 0;
    uint32_t Waiting = 0;
    for (TaskId P : preds(N)) {
      const Node &Pred = Now.Nodes[P];
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
      prefetch(&Now.Nodes[Heap.front().Id]);
    Node &N = Now.Nodes[Id];
    for (TaskId Next : succs(N))
      prefetch(&Now.Nodes[Next]);
    double Start = N.Ready;
    llvm::ArrayRef<uint32_t> Resources = resources(N);
    for (ResourceId R : Resources)
      Start = std::max(Start, Now.Tails[R]);
    Now.Starts[Id] = Start;
    N.End = Start + N.Duration;
    llvm::MutableArrayRef<uint32_t> Previous = previous(N);
    bool Over = false;
    for (size_t I = 0; I < Resources.size(); ++I) {
      ResourceId R = Resources[I];
      Previous[I] = Now.TailTasks[R];
      Now.TailTasks[R] = Id;
      Now.Tails[R] = N.End;
      if (Bounded) {
        Remaining[R] -= N.Duration;
        Over |= N.End + Remaining[R] > Limit;
      }
    }
    if (Over) {
      ClearLoads();
      return false;
    }
    Slot &Scheduled = Now.Sequence.emplace_back();
    Scheduled.Ready = N.Ready;
    Scheduled.Id = Id;
    N.Pending = false;
    for (TaskId Next : succs(N)) {
      Node &S = Now.Nodes[Next];
      S.Ready = std::max(S.Ready, N.End);
      if (--S.Waiting == 0)
        Push(S, Next);
    }
  }
  ClearLoads();
  return true;
}

double Simulator::simulate(const Strategy &S, bool Revertible,
                           double GiveUpAbove) {
  // A timeline to keep for revert(): the graph and the scheduler's state
  // move aside whole, and the new ones are built in what they replace.
  if (Revertible && !Now.Sequence.empty()) {
    if (!Spare)
      Spare = std::make_unique<TaskGraph>(T, M, Cost, Graph->options());
    std::swap(Graph, Spare);
    std::swap(Now, Saved);
    Undoable = Last::Simulate;
  } else {
    Spare.reset();
    Undoable = Last::None;
  }
  Graph->build(S);
  Simulated = true;
  Now.Memory = memoryBreakdown(*Graph);
  Now.Nodes.assign(Graph->size(), Node());
  Now.Starts.assign(Graph->size(), 0);
  Now.EdgePool.clear();
  Now.DeadEdges = 0;
  for (TaskId Id = 0; Id < Graph->size(); ++Id)
    syncNode(Id);
  Now.DeadEdges = 0;
  Now.Sequence.clear();
  Now.TailTasks.assign(Graph->numResources(), NoTask);
  Now.Tails.assign(Graph->numResources(), NoTail);
  Dirty.clear();
  for (TaskId Id = 0; Id < Graph->size(); ++Id)
    if (Now.Nodes[Id].Alive) {
      Now.Nodes[Id].Pending = true;
      Dirty.push_back(Id);
    }
  // Only a simulation revert() can undo may be left unfinished.
  if (!schedule(Undoable == Last::Simulate
                    ? giveUpLimit(GiveUpAbove)
                    : std::numeric_limits<double>::infinity()))
    return std::numeric_limits<double>::infinity();
  return time();
}

double Simulator::moveTo(const Strategy &S) {
  if (!Simulated)
    return simulate(S);
  std::vector<ir::OpId> Ops = S.opsChangedFrom(strategy());
  std::vector<ParallelConfig> Configs;
  for (ir::OpId Op : Ops)
    Configs.push_back(S[Op]);
  if (Ops.empty())
    return time();
  if (!movesByChange(Ops.size(), S.Configs.size()))
    return simulate(S);
  return change(Ops, Configs);
}

double Simulator::change(ir::OpId Op, const ParallelConfig &C) {
  return change(llvm::ArrayRef<ir::OpId>(Op),
                llvm::ArrayRef<ParallelConfig>(C));
}

double Simulator::change(llvm::ArrayRef<ir::OpId> Ops,
                         llvm::ArrayRef<ParallelConfig> Configs) {
  return changeUnless(Ops, Configs, std::numeric_limits<double>::infinity());
}

double Simulator::changeUnless(llvm::ArrayRef<ir::OpId> Ops,
                               llvm::ArrayRef<ParallelConfig> Configs,
                               double GiveUpAbove) {
  // The state before, for revert() (copies into arrays that keep their
  // capacity: no allocation once they have grown).
  Saved = Now;
  Spare.reset();
  Undoable = Last::Change;
  return resimulate(Graph->changeConfigs(Ops, Configs), GiveUpAbove);
}

double Simulator::changeGradientBucket(double Bytes) {
  assert(Simulated && "simulate() must come first");
  Spare.reset();
  Undoable = Last::None;
  return resimulate(Graph->changeGradientBucket(Bytes),
                    std::numeric_limits<double>::infinity());
}

double Simulator::resimulate(const std::vector<TaskId> &Changed,
                             double GiveUpAbove) {
  if (Now.Nodes.size() < Graph->size()) {
    Now.Nodes.resize(Graph->size());
    Now.Starts.resize(Graph->size(), 0);
  }
  // Removed tasks keep their edges until the cut below has read where they
  // ran.
  for (TaskId Dead : Graph->removed())
    Now.Nodes[Dead].Alive = false;
  for (TaskId New : Graph->created()) {
    syncNode(New);
    Now.Nodes[New].Pending = true; // marks new tasks while tau is worked out
  }
  Rewired.assign(Graph->rewired().begin(), Graph->rewired().end());
  Marks.dedupe(Rewired);
  for (TaskId Id : Rewired)
    if (Graph->task(Id).Alive && !Now.Nodes[Id].Pending)
      syncNode(Id);

  // Nothing ready before Tau changes: removed tasks and tasks that gained or
  // lost a predecessor keep their old ready times until re-simulated, and a
  // new or touched task cannot be ready before its predecessors that were
  // ready before those (whose ends can only grow) end.
  double Tau0 = std::numeric_limits<double>::infinity();
  for (TaskId Dead : Graph->removed()) {
    Now.Memory.add(Graph->task(Dead), -1);
    Tau0 = std::min(Tau0, Now.Nodes[Dead].Ready);
  }
  for (TaskId Id : Changed)
    if (!Now.Nodes[Id].Pending)
      Tau0 = std::min(Tau0, Now.Nodes[Id].Ready);
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
    for (TaskId P : preds(Now.Nodes[Id])) {
      const Node &Pred = Now.Nodes[P];
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
  Dirty.assign(Graph->created().begin(), Graph->created().end());
  for (TaskId New : Graph->created())
    Now.Memory.add(Graph->task(New), 1);
  size_t Keep = Now.Sequence.size();
  while (Keep > 0 && Now.Sequence[Keep - 1].Ready >= Tau) {
    if (Keep > Ahead)
      prefetch(&Now.Nodes[Now.Sequence[Keep - Ahead].Id]);
    TaskId Id = Now.Sequence[--Keep].Id;
    Node &N = Now.Nodes[Id];
    llvm::ArrayRef<uint32_t> Resources = resources(N);
    llvm::MutableArrayRef<uint32_t> Previous = previous(N);
    for (size_t I = 0; I < Resources.size(); ++I)
      Now.TailTasks[Resources[I]] = Previous[I];
    if (N.Alive && !N.Pending) {
      N.Pending = true;
      Dirty.push_back(Id);
    }
  }
  Now.Sequence.resize(Keep);
  for (ResourceId R = 0; R < Now.Tails.size(); ++R)
    Now.Tails[R] =
        Now.TailTasks[R] == NoTask ? NoTail : Now.Nodes[Now.TailTasks[R]].End;
  for (TaskId Dead : Graph->removed())
    syncNode(Dead);
  if (Now.DeadEdges > Now.EdgePool.size() / 2 + 4096)
    compactEdges();
  if (!schedule(giveUpLimit(GiveUpAbove)))
    return std::numeric_limits<double>::infinity();
  return time();
}

const TaskGraph &Simulator::graph() const {
  if (TimesStale) {
    for (TaskId Id = 0; Id < Graph->size(); ++Id) {
      Task &T = Graph->task(Id);
      if (!T.Alive)
        continue;
      T.Ready = Now.Nodes[Id].Ready;
      T.Start = Now.Starts[Id];
      T.End = Now.Nodes[Id].End;
    }
    TimesStale = false;
  }
  return *Graph;
}

// Both run after every accepted proposal: no allocation.
double Simulator::peakMemory() const {
  double Peak = 0;
  for (DeviceId D = 0; D < Graph->machine().numDevices(); ++D)
    Peak = std::max(Peak, Now.Memory.total(D));
  return Peak;
}

double Simulator::memoryOverflow(double Limit) const {
  const Machine &M = Graph->machine();
  double Over = 0;
  for (DeviceId D = 0; D < M.numDevices(); ++D) {
    // A limit lowers what a device holds, never raises it.
    double Capacity = double(M.deviceType(D).MemoryCapacity);
    if (Limit > 0)
      Capacity = std::min(Capacity, Limit);
    Over = std::max(Over, Now.Memory.total(D) - Capacity);
  }
  return Over;
}

double Simulator::time() const {
  double Time = 0;
  for (double Tail : Now.Tails)
    Time = std::max(Time, Tail);
  return Time;
}

SimReport Simulator::report() const {
  const Machine &M = Graph->machine();
  SimReport R;
  R.Time = time();
  R.ComputeTime.assign(M.numDevices(), 0);
  R.CopyTime.assign(M.numDevices(), 0);
  R.BytesSent.assign(M.numDevices(), 0);
  for (TaskId Id = 0; Id < Graph->size(); ++Id) {
    const Task &T = Graph->task(Id);
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
                    Graph->training().G.tensor(T.Tensor).Type.Type))
              : 4;
      for (size_t P = 0; P < N; ++P)
        R.BytesSent[T.Group[P]] += ringBytesSent(Whole, ElementSize, N, P);
      break;
    }
    }
  }
  for (double Bytes : R.BytesSent)
    R.BytesTransferred += Bytes;
  MemoryBreakdown Breakdown = memoryBreakdown(*Graph);
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
  for (TaskId Id = 0; Id < Graph->size(); ++Id) {
    const Task &T = Graph->task(Id);
    if (T.Alive)
      Entries.push_back({T.Key, T.Kind, Now.Starts[Id], Now.Nodes[Id].End});
  }
  std::sort(Entries.begin(), Entries.end(),
            [](const TimelineEntry &A, const TimelineEntry &B) {
              return A.Key < B.Key;
            });
  return Entries;
}

} // namespace onnx2soap::simulator
