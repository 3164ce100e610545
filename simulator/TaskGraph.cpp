//===- simulator/TaskGraph.cpp - Building and updating the task graph -----===//
//
// The graph is built in three layers that mirror what each op owns: an op's
// own tasks (forward, backward, BatchNorm statistics), the edges of each of
// its inputs (transfers between producer and consumer partitions), and each
// parameter's gradient synchronization and updates. Changing one op's config
// rebuilds its own tasks, the edges that touch it and the parameters it
// reads; everything else stays. This file builds the whole graph and
// applies and reverts changes; an op's own tasks are built in
// TaskGraphOps.cpp, the edges in TaskGraphEdges.cpp, the parameters'
// synchronization in TaskGraphSync.cpp.
//
//===----------------------------------------------------------------------===//
#include "simulator/TaskGraph.h"
#include "llvm/ADT/STLExtras.h"
#include <algorithm>
#include <cmath>

namespace onnx2soap::simulator {

llvm::StringRef taskKindName(TaskKind Kind) {
  switch (Kind) {
  case TaskKind::Forward:
    return "forward";
  case TaskKind::Backward:
    return "backward";
  case TaskKind::Transfer:
    return "transfer";
  case TaskKind::GradTransfer:
    return "grad-transfer";
  case TaskKind::StatsAllReduce:
    return "stats-allreduce";
  case TaskKind::GradAllReduce:
    return "grad-allreduce";
  case TaskKind::Update:
    return "update";
  case TaskKind::Copy:
    return "copy";
  }
  llvm_unreachable("unknown TaskKind");
}

std::vector<bool> weightOnlyOps(const ir::Graph &G) {
  std::vector<bool> WeightOnly(G.numOps(), false);
  for (const ir::Op &O : G.ops()) {
    bool OnlyWeights = true;
    for (ir::TensorId In : O.Inputs) {
      if (In == ir::NoTensor)
        continue;
      const ir::Tensor &Value = G.tensor(In);
      OnlyWeights &= Value.Role == ir::TensorRole::Activation
                         ? WeightOnly[Value.Producer]
                         : Value.Role != ir::TensorRole::Input;
    }
    WeightOnly[O.Id] = OnlyWeights;
  }
  return WeightOnly;
}

std::vector<bool> syncedTensors(const ir::TrainingGraph &T,
                                const std::vector<bool> &WeightOnly) {
  // Gradients are summed and applied on the tensors the partitions read:
  // parameters read by ordinary ops, and outputs of weight-only ops.
  const ir::Graph &G = T.G;
  std::vector<bool> ReadByComputation(G.numTensors(), false);
  for (const ir::Op &O : G.ops())
    if (!WeightOnly[O.Id])
      for (ir::TensorId In : O.Inputs)
        if (In != ir::NoTensor)
          ReadByComputation[In] = true;
  std::vector<bool> Synced(G.numTensors(), false);
  for (const ir::Tensor &Value : G.tensors())
    Synced[Value.Id] = ReadByComputation[Value.Id] &&
                       (Value.Role == ir::TensorRole::Parameter ||
                        (Value.Role == ir::TensorRole::Activation &&
                         WeightOnly[Value.Producer] && T.NeedsGrad[Value.Id]));
  return Synced;
}

double alignedBufferBytes(double Bytes) {
  return std::ceil(Bytes / BufferAlignment) * BufferAlignment;
}

TaskGraph::TaskGraph(const ir::TrainingGraph &T, const Machine &M,
                     const CostModel &Cost, SimOptions Options)
    : T(T), G(T.G), M(M), Cost(Cost), Options(Options), NumOps(G.numOps()) {
  Consumers.resize(G.numTensors());
  for (const ir::Op &O : G.ops())
    for (ir::TensorId In : O.Inputs)
      if (In != ir::NoTensor &&
          (Consumers[In].empty() || Consumers[In].back() != O.Id))
        Consumers[In].push_back(O.Id);
  WeightOnly = weightOnlyOps(G);
  std::vector<bool> Synced = syncedTensors(T, WeightOnly);
  for (const ir::Tensor &Value : G.tensors())
    if (Synced[Value.Id])
      SyncedTensors.push_back(Value.Id);
  segmentTensors();
  SourceBytes.assign(G.numTensors(), 0);
  double Slots = optimizerStateCount(Options.Optimizer);
  for (ir::TensorId Id : SyncedTensors) {
    const ir::Tensor &Value = G.tensor(Id);
    if (Value.Role != ir::TensorRole::Activation)
      continue;
    std::vector<bool> Seen(G.numTensors(), false);
    std::vector<ir::TensorId> Stack{Id};
    while (!Stack.empty()) {
      const ir::Op &O = G.op(G.tensor(Stack.back()).Producer);
      Stack.pop_back();
      for (ir::TensorId In : O.Inputs) {
        if (In == ir::NoTensor || Seen[In])
          continue;
        Seen[In] = true;
        const ir::Tensor &Read = G.tensor(In);
        if (Read.Role == ir::TensorRole::Activation) {
          Stack.push_back(In);
          continue;
        }
        bool Trained =
            Read.Role == ir::TensorRole::Parameter && T.NeedsGrad[In];
        SourceBytes[Id] += alignedBufferBytes(Read.Type.byteSize()) *
                           (Trained ? 2 + Slots : 1);
      }
    }
  }
}

llvm::SmallVector<std::pair<ir::OpId, unsigned>, 2>
TaskGraph::gradientReads(ir::TensorId Tensor) const {
  llvm::SmallVector<std::pair<ir::OpId, unsigned>, 2> Reads;
  for (ir::OpId Id : Consumers[Tensor]) {
    if (WeightOnly[Id])
      continue;
    const ir::Op &O = G.op(Id);
    for (unsigned Slot = 0; Slot < O.Inputs.size(); ++Slot)
      if (O.Inputs[Slot] == Tensor && (T.BackwardInputs[Id] >> Slot & 1))
        Reads.push_back({Id, Slot});
  }
  return Reads;
}

llvm::SmallVector<ir::TensorId, 4>
bucketTensors(llvm::ArrayRef<BucketPart> Parts) {
  llvm::SmallVector<ir::TensorId, 4> Tensors;
  for (const BucketPart &Part : Parts)
    if (Tensors.empty() || Tensors.back() != Part.Tensor)
      Tensors.push_back(Part.Tensor);
  return Tensors;
}

void TaskGraph::segmentTensors() {
  // Backward produces a tensor's last gradient at its first reader's
  // backward: later readers first. Segments do not depend on the strategy,
  // so one op's new config touches only the segments of the tensors it
  // reads.
  std::vector<std::pair<ir::OpId, ir::TensorId>> Order;
  for (ir::TensorId Id : SyncedTensors) {
    auto Reads = gradientReads(Id);
    if (!Reads.empty())
      Order.push_back({Reads.front().first, Id});
  }
  llvm::sort(Order, [](const auto &A, const auto &B) {
    return A.first != B.first ? A.first > B.first : A.second < B.second;
  });
  SegmentOf.assign(G.numTensors(), ~0u);
  double Filled = 0;
  for (auto &[First, Id] : Order) {
    double Bytes = G.tensor(Id).Type.byteSize();
    if (Segments.empty() || Filled + Bytes > Options.GradientBucketBytes) {
      Segments.emplace_back();
      SegmentLevel.push_back(0);
      Filled = 0;
    }
    Segments.back().push_back(Id);
    SegmentLevel.back() =
        std::max(SegmentLevel.back(), backwardLevel(First) + 1);
    Filled += Bytes;
    SegmentOf[Id] = Segments.size() - 1;
  }
  Syncs.resize(G.numTensors());
}

TaskId TaskGraph::addTask(Task New) {
  New.Alive = true;
  New.Ready = 0;
  // Never simulated: any computed time differs, so the task propagates.
  New.Start = New.End = -1;
  TaskId Id;
  if (!Free.empty()) {
    Id = Free.back();
    Free.pop_back();
    Tasks[Id] = std::move(New);
    if (Undo.Recording)
      Undo.Popped.push_back(Id);
  } else {
    Id = Tasks.size();
    Tasks.push_back(std::move(New));
  }
  if (Id < Parts.size())
    Parts[Id].clear();
  if (Undo.Recording) {
    // Gone again on revert(): its edges need no log.
    if (Id >= Undo.Stamps.size())
      Undo.Stamps.resize(Id + 1, 0);
    Undo.Stamps[Id] = Undo.Epoch;
  }
  Created.push_back(Id);
  return Id;
}

void TaskGraph::edit(TaskId Id) {
  if (!Undo.Recording)
    return;
  if (Id >= Undo.Stamps.size())
    Undo.Stamps.resize(Id + 1, 0);
  if (Undo.Stamps[Id] == Undo.Epoch)
    return;
  Undo.Stamps[Id] = Undo.Epoch;
  const Task &Old = Tasks[Id];
  Undo.Edited.push_back({Id, uint32_t(Undo.EditedIds.size()),
                         uint32_t(Old.Preds.size()),
                         uint32_t(Old.Succs.size())});
  Undo.EditedIds.insert(Undo.EditedIds.end(), Old.Preds.begin(),
                        Old.Preds.end());
  Undo.EditedIds.insert(Undo.EditedIds.end(), Old.Succs.begin(),
                        Old.Succs.end());
}

void TaskGraph::addEdge(TaskId From, TaskId To, bool Fresh) {
  auto &Succs = Tasks[From].Succs;
  if (!Fresh && std::find(Succs.begin(), Succs.end(), To) != Succs.end())
    return;
  edit(From);
  edit(To);
  Succs.push_back(To);
  Tasks[To].Preds.push_back(From);
  Gained.push_back(To);
  Rewired.push_back(From);
  Rewired.push_back(To);
}

void TaskGraph::removeTask(TaskId Id, std::vector<TaskId> &Touched) {
  Task &Dead = Tasks[Id];
  if (!Dead.Alive)
    return;
  Dead.Alive = false;
  for (TaskId P : Dead.Preds) {
    edit(P);
    auto &Succs = Tasks[P].Succs;
    Succs.erase(std::remove(Succs.begin(), Succs.end(), Id), Succs.end());
    Rewired.push_back(P);
  }
  for (TaskId N : Dead.Succs) {
    edit(N);
    auto &Preds = Tasks[N].Preds;
    Preds.erase(std::remove(Preds.begin(), Preds.end(), Id), Preds.end());
    Touched.push_back(N);
    Rewired.push_back(N);
  }
  Removed.push_back(Id);
}

//===-- Whole graph and updates -------------------------------------------===//

void TaskGraph::build(const Strategy &New) {
  S = New;
  Undo.Open = false;
  Tasks.clear();
  Free.clear();
  Removed.clear();
  Created.clear();
  PerOp.assign(NumOps, OpTasks());
  InputEdges.assign(NumOps, {});
  SegmentTasks.assign(Segments.size(), {});
  Parts.clear();
  for (const ir::Op &O : G.ops()) {
    InputEdges[O.Id].resize(O.Inputs.size());
    buildOp(O.Id);
  }
  for (const ir::Op &O : G.ops())
    for (unsigned Slot = 0; Slot < O.Inputs.size(); ++Slot)
      buildInputEdges(O.Id, Slot);
  for (uint32_t Segment = 0; Segment < Segments.size(); ++Segment) {
    for (ir::TensorId Tensor : Segments[Segment])
      buildTensorSync(Tensor);
    buildBuckets(Segment);
  }
  Created.clear();
  Gained.clear();
  Rewired.clear();
}

void TaskGraph::setGradientBucket(double Bytes) {
  Options.GradientBucketBytes = Bytes;
  Segments.clear();
  SegmentLevel.clear();
  segmentTensors();
}

void TaskGraph::beginChange() {
  // Slots freed by the previous change are reusable now that the simulator
  // has taken them out of its orders.
  Free.insert(Free.end(), Removed.begin(), Removed.end());
  Removed.clear();
  Created.clear();
  Gained.clear();
  Rewired.clear();
}

std::vector<TaskId> TaskGraph::changedTasks(std::vector<TaskId> &Touched) {
  std::vector<TaskId> Changed = Created;
  Touched.insert(Touched.end(), Gained.begin(), Gained.end());
  Marks.dedupe(Touched);
  for (TaskId Task : Touched)
    if (Tasks[Task].Alive)
      Changed.push_back(Task);
  return Changed;
}

std::vector<TaskId> TaskGraph::changeGradientBucket(double Bytes) {
  beginChange();
  Undo.Open = false;
  // The all-reduces go; each tensor's uses, cells and updates stay (they
  // depend on its readers' configs alone), the updates under the keys of
  // their new segments.
  std::vector<TaskId> Touched;
  for (std::vector<TaskId> &Owned : SegmentTasks)
    for (TaskId Sync : Owned)
      removeTask(Sync, Touched);
  setGradientBucket(Bytes);
  SegmentTasks.assign(Segments.size(), {});
  for (uint32_t Segment = 0; Segment < Segments.size(); ++Segment) {
    for (ir::TensorId Tensor : Segments[Segment])
      for (TaskId Update : Syncs[Tensor].Updates) {
        Tasks[Update].Key.Level = SegmentLevel[Segment];
        Touched.push_back(Update);
        Rewired.push_back(Update);
      }
    buildBuckets(Segment);
  }
  return changedTasks(Touched);
}

std::vector<TaskId> TaskGraph::changeConfig(ir::OpId Id,
                                            const ParallelConfig &C) {
  return changeConfigs({Id}, {C});
}

std::vector<TaskId>
TaskGraph::changeConfigs(llvm::ArrayRef<ir::OpId> Ids,
                         llvm::ArrayRef<ParallelConfig> Configs) {
  assert(Ids.size() == Configs.size() && "one config per op");
  beginChange();
  // The log for revert(): what is replaced is moved into it (the rebuilds
  // below fill the lists afresh).
  Undo.Open = Undo.Recording = true;
  if (++Undo.Epoch == 0) {
    std::fill(Undo.Stamps.begin(), Undo.Stamps.end(), 0);
    Undo.Epoch = 1;
  }
  Undo.NumTasks = Tasks.size();
  Undo.Popped.clear();
  Undo.Edited.clear();
  Undo.EditedIds.clear();
  Undo.Configs.clear();
  Undo.Ops.clear();
  Undo.Inputs.clear();
  Undo.Buckets.clear();
  Undo.Syncs.clear();
  std::vector<TaskId> Touched;
  auto RemoveAll = [&](llvm::ArrayRef<TaskId> Tasks) {
    for (TaskId Task : Tasks)
      removeTask(Task, Touched);
  };

  // What depends on the ops' configs: their input edges, their consumers'
  // edges from them, the parameters they read, and their own tasks.
  // Weight-only ops have none of these.
  std::vector<std::pair<ir::OpId, unsigned>> Edges;
  std::vector<ir::TensorId> ChangedTensors;
  std::vector<uint32_t> ChangedSegments;
  std::vector<ir::OpId> Planned;
  for (ir::OpId Id : Ids) {
    if (WeightOnly[Id])
      continue;
    Planned.push_back(Id);
    const ir::Op &O = G.op(Id);
    for (unsigned Slot = 0; Slot < O.Inputs.size(); ++Slot) {
      Edges.push_back({Id, Slot});
      if (O.Inputs[Slot] != ir::NoTensor && SegmentOf[O.Inputs[Slot]] != ~0u) {
        ChangedTensors.push_back(O.Inputs[Slot]);
        ChangedSegments.push_back(SegmentOf[O.Inputs[Slot]]);
      }
    }
    for (ir::TensorId Out : O.Outputs)
      for (ir::OpId Consumer : Consumers[Out]) {
        const ir::Op &Reader = G.op(Consumer);
        for (unsigned Slot = 0; Slot < Reader.Inputs.size(); ++Slot)
          if (Reader.Inputs[Slot] == Out)
            Edges.push_back({Consumer, Slot});
      }
  }
  llvm::sort(Edges);
  Edges.erase(std::unique(Edges.begin(), Edges.end()), Edges.end());
  llvm::sort(ChangedTensors);
  ChangedTensors.erase(
      std::unique(ChangedTensors.begin(), ChangedTensors.end()),
      ChangedTensors.end());
  llvm::sort(ChangedSegments);
  ChangedSegments.erase(
      std::unique(ChangedSegments.begin(), ChangedSegments.end()),
      ChangedSegments.end());

  for (auto &[Consumer, Slot] : Edges) {
    Undo.Inputs.push_back(
        {Consumer, Slot, std::move(InputEdges[Consumer][Slot])});
    InputEdges[Consumer][Slot].clear();
    RemoveAll(Undo.Inputs.back().Tasks);
  }
  for (uint32_t Segment : ChangedSegments) {
    Undo.Buckets.push_back({Segment, std::move(SegmentTasks[Segment])});
    SegmentTasks[Segment].clear();
    RemoveAll(Undo.Buckets.back().second);
  }
  for (ir::TensorId Tensor : ChangedTensors) {
    Undo.Syncs.push_back({Tensor, std::move(Syncs[Tensor])});
    Syncs[Tensor] = TensorSync();
    RemoveAll(Undo.Syncs.back().second.Updates);
  }
  for (ir::OpId Id : Planned) {
    Undo.Ops.push_back({Id, std::move(PerOp[Id])});
    PerOp[Id] = OpTasks();
    const OpTasks &Own = Undo.Ops.back().second;
    RemoveAll(Own.Stats);
    RemoveAll(Own.Forward);
    RemoveAll(Own.Backward);
  }

  for (size_t I = 0; I < Ids.size(); ++I) {
    Undo.Configs.push_back({Ids[I], S[Ids[I]]});
    S[Ids[I]] = Configs[I];
  }
  for (ir::OpId Id : Planned)
    buildOp(Id);
  for (auto &[Consumer, Slot] : Edges)
    buildInputEdges(Consumer, Slot);
  for (ir::TensorId Tensor : ChangedTensors)
    buildTensorSync(Tensor);
  for (uint32_t Segment : ChangedSegments)
    buildBuckets(Segment);

  Undo.Recording = false;
  return changedTasks(Touched);
}

void TaskGraph::revert() {
  assert(Undo.Open && "revert() needs a change to undo");
  Undo.Open = false;
  for (TaskId Id : Created)
    Tasks[Id].Alive = false;
  Tasks.erase(Tasks.begin() + Undo.NumTasks, Tasks.end());
  Free.insert(Free.end(), Undo.Popped.rbegin(), Undo.Popped.rend());
  for (TaskId Id : Removed)
    Tasks[Id].Alive = true;
  for (const ChangeLog::Lists &L : Undo.Edited) {
    const TaskId *Preds = Undo.EditedIds.data() + L.Begin;
    const TaskId *Succs = Preds + L.NumPreds;
    Tasks[L.Id].Preds.assign(Preds, Succs);
    Tasks[L.Id].Succs.assign(Succs, Succs + L.NumSuccs);
  }
  // Last logged first: an op named twice gets its first old config.
  for (auto &[Id, Config] : llvm::reverse(Undo.Configs))
    S[Id] = Config;
  for (auto &[Id, Own] : llvm::reverse(Undo.Ops))
    PerOp[Id] = std::move(Own);
  for (ChangeLog::InputTasks &In : Undo.Inputs)
    InputEdges[In.Consumer][In.Slot] = std::move(In.Tasks);
  for (auto &[Segment, Owned] : Undo.Buckets)
    SegmentTasks[Segment] = std::move(Owned);
  for (auto &[Tensor, Sync] : Undo.Syncs)
    Syncs[Tensor] = std::move(Sync);
  Removed.clear();
  Created.clear();
  Gained.clear();
  Rewired.clear();
}

} // namespace onnx2soap::simulator
