//===- simulator/TaskGraph.cpp - Building and updating the task graph -----===//
//
// The graph is built in three layers that mirror what each op owns: an op's
// own tasks (forward, backward, BatchNorm statistics), the edges of each of
// its inputs (transfers between producer and consumer partitions), and each
// parameter's gradient synchronization and updates. Changing one op's config
// rebuilds its own tasks, the edges that touch it and the parameters it
// reads; everything else stays.
//
//===----------------------------------------------------------------------===//
#include "simulator/TaskGraph.h"
#include "ir/BatchDims.h"
#include "simulator/KernelScratch.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/MathExtras.h"
#include <algorithm>
#include <cmath>
#include <map>

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
  Undo.Edited.push_back({Id, Tasks[Id].Preds, Tasks[Id].Succs});
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

//===-- An op's own tasks ---------------------------------------------------

bool isTrainingBatchNorm(const ir::Op &O) {
  return O.Kind == ir::OpKind::BatchNorm && O.Attrs.getInt("training", 0);
}

void TaskGraph::buildOp(ir::OpId Id) {
  const ir::Op &O = G.op(Id);
  const ParallelConfig &C = S[Id];
  unsigned Parts = C.numPartitions();
  bool HasBackward = T.BackwardInputs[Id] != 0;
  OpTasks &Own = PerOp[Id];
  Own = OpTasks();
  if (WeightOnly[Id])
    return;
  for (unsigned P = 0; P < Parts; ++P) {
    ir::Region Out = outputRegion(G, O, C, P);
    ir::Interval Reduction = reductionSlice(G, O, C, P);
    DeviceId Device = C.device(P);
    TaskTimes Times =
        Cost.opTimes({G, O, Out, Reduction}, M.deviceType(Device));
    auto Compute = [&](TaskKind Kind, uint32_t Level, double Duration) {
      Task New;
      New.Kind = Kind;
      New.Key = {Level, 0, P, 0, 0};
      New.Duration = Duration;
      New.Op = Id;
      New.Partition = P;
      New.Device = Device;
      New.Resources = {Device};
      return New;
    };
    PartitionBytes Bytes = partitionBytes(O, Out, Reduction);
    Task Forward = Compute(TaskKind::Forward, forwardLevel(Id), Times.Forward);
    setForwardMemory(Forward, Bytes);
    Forward.ScratchMemory =
        kernelScratchBytes(G, O, Out, Reduction, false, M.deviceType(Device));
    Own.Forward.push_back(addTask(std::move(Forward)));
    if (!HasBackward)
      continue;
    Task Backward =
        Compute(TaskKind::Backward, backwardLevel(Id), Times.Backward);
    setBackwardMemory(Backward, Bytes);
    Backward.ScratchMemory =
        kernelScratchBytes(G, O, Out, Reduction, true, M.deviceType(Device));
    Own.Backward.push_back(addTask(std::move(Backward)));
    addEdge(Own.Forward.back(), Own.Backward.back());
  }
  Own.ForwardDone = Own.Forward;
  Own.BackwardDone = Own.Backward;
  if (isTrainingBatchNorm(O)) {
    addStatsSync(Id, false);
    if (HasBackward)
      addStatsSync(Id, true);
  }
}

double alignedBufferBytes(double Bytes) {
  return std::ceil(Bytes / BufferAlignment) * BufferAlignment;
}

TaskGraph::PartitionBytes
TaskGraph::partitionBytes(const ir::Op &O, llvm::ArrayRef<ir::Interval> Out,
                          ir::Interval Reduction) const {
  PartitionBytes Bytes;
  for (unsigned I = 0; I < O.Outputs.size(); ++I)
    Bytes.Outputs.push_back(alignedBufferBytes(
        double(ir::regionVolume(ir::outputRegionOf(G, O, I, Out, Reduction))) *
        ir::dtypeSize(G.outputType(O, I).Type)));
  const ir::OpKindInfo &Info = ir::opKindInfo(O.Kind);
  for (unsigned I = 0; I < O.Inputs.size(); ++I) {
    ir::TensorId In = O.Inputs[I];
    Bytes.Inputs.push_back(
        In == ir::NoTensor
            ? 0
            : alignedBufferBytes(double(ir::regionVolume(Info.InputRegion(
                                     G, O, I, Out, Reduction))) *
                                 ir::dtypeSize(G.tensor(In).Type.Type)));
  }
  return Bytes;
}

void TaskGraph::setForwardMemory(Task &Forward,
                                 const PartitionBytes &Bytes) const {
  const ir::Op &O = G.op(Forward.Op);
  for (double Output : Bytes.Outputs)
    Forward.ActivationMemory += Output;
  for (unsigned I = 0; I < O.Inputs.size(); ++I) {
    ir::TensorId In = O.Inputs[I];
    if (In == ir::NoTensor)
      continue;
    const ir::Tensor &Value = G.tensor(In);
    if (Value.Role == ir::TensorRole::Activation)
      continue; // written by its producer or received by a transfer
    // Trained parameters are counted by their updates.
    if (Value.Role == ir::TensorRole::Parameter &&
        (T.BackwardInputs[O.Id] >> I & 1))
      continue;
    (Value.Role == ir::TensorRole::Input ? Forward.ActivationMemory
                                         : Forward.FixedMemory) +=
        Bytes.Inputs[I];
  }
}

void TaskGraph::setBackwardMemory(Task &Backward,
                                  const PartitionBytes &Bytes) const {
  const ir::Op &O = G.op(Backward.Op);
  for (double Output : Bytes.Outputs)
    Backward.GradientMemory += Output;
  for (unsigned I = 0; I < O.Inputs.size(); ++I) {
    ir::TensorId In = O.Inputs[I];
    if (In != ir::NoTensor && (T.BackwardInputs[O.Id] >> I & 1) &&
        G.tensor(In).Role == ir::TensorRole::Activation)
      Backward.GradientMemory += Bytes.Inputs[I];
  }
}

/// BatchNorm in training mode normalizes with statistics of the whole batch:
/// partitions holding the same channels (split over samples or space) add
/// their per-channel sums before normalizing (forward) and their two
/// gradient sums before computing the input gradient (backward).
void TaskGraph::addStatsSync(ir::OpId Id, bool Backward) {
  const ir::Op &O = G.op(Id);
  const ParallelConfig &C = S[Id];
  OpTasks &Own = PerOp[Id];
  std::vector<TaskId> &Source = Backward ? Own.Backward : Own.Forward;
  std::vector<TaskId> &Done = Backward ? Own.BackwardDone : Own.ForwardDone;
  std::map<unsigned, llvm::SmallVector<unsigned, 4>> Groups;
  for (unsigned P = 0; P < C.numPartitions(); ++P)
    Groups[C.coordinate(P, 1)].push_back(P);
  const ir::Shape &Dims = G.outputType(O).Dims;
  for (auto &[Channel, Members] : Groups) {
    if (Members.size() < 2)
      continue;
    llvm::SmallVector<DeviceId, 8> Devices;
    for (unsigned P : Members)
      Devices.push_back(C.device(P));
    ir::Interval Channels = partInterval(Dims[1], C.Degrees[1], Channel);
    double Bytes = 2.0 * Channels.size() * sizeof(float);
    uint32_t Level = (Backward ? backwardLevel(Id) : forwardLevel(Id)) + 1;
    TaskId Sync = addAllReduce(TaskKind::StatsAllReduce, Devices, Bytes,
                               {Level, 0, Channel, 0, 0}, Id, ir::NoTensor);
    for (unsigned P : Members) {
      addEdge(Source[P], Sync);
      Done[P] = Sync;
    }
    Own.Stats.push_back(Sync);
  }
}

//===-- Edges of one input ----------------------------------------------------

void TaskGraph::connect(TaskId From, DeviceId FromDevice, TaskId To,
                        DeviceId ToDevice, TaskKind Kind, double Bytes,
                        TaskKey Key, ir::OpId Op, std::vector<TaskId> &Owned) {
  if (FromDevice == ToDevice) {
    addEdge(From, To);
    return;
  }
  Task Transfer;
  Transfer.Kind = Kind;
  Transfer.Key = Key;
  Transfer.Duration = M.transferTime(FromDevice, ToDevice, Bytes);
  Transfer.Bytes = Bytes;
  Transfer.MessageBytes = Bytes;
  Transfer.Op = Op;
  Transfer.Device = FromDevice;
  Transfer.Peer = ToDevice;
  for (LinkId L : M.route(FromDevice, ToDevice))
    Transfer.Resources.push_back(M.numDevices() + L);
  if (Options.SerialCommunication) {
    Transfer.Resources.push_back(commEngine(FromDevice));
    Transfer.Resources.push_back(commEngine(ToDevice));
  }
  // The receiving rank waits in the call; the sender goes on.
  if (Options.BlockingCalls)
    Transfer.Resources.push_back(ToDevice);
  if (Kind == TaskKind::Transfer)
    Transfer.ActivationMemory = alignedBufferBytes(Bytes);
  TaskId Id = addTask(std::move(Transfer));
  addEdge(From, Id);
  addEdge(Id, To);
  Owned.push_back(Id);
}

unsigned outputIndex(const ir::Op &O, ir::TensorId Tensor) {
  for (unsigned I = 0; I < O.Outputs.size(); ++I)
    if (O.Outputs[I] == Tensor)
      return I;
  llvm_unreachable("tensor is not an output of its producer");
}

void TaskGraph::buildInputEdges(ir::OpId ConsumerId, unsigned Slot) {
  std::vector<TaskId> &Owned = InputEdges[ConsumerId][Slot];
  Owned.clear();
  const ir::Op &Consumer = G.op(ConsumerId);
  ir::TensorId Tensor = Consumer.Inputs[Slot];
  if (Tensor == ir::NoTensor)
    return;
  const ir::Tensor &Value = G.tensor(Tensor);
  if (Value.Role != ir::TensorRole::Activation || WeightOnly[ConsumerId] ||
      WeightOnly[Value.Producer])
    return;
  const ir::Op &Producer = G.op(Value.Producer);
  unsigned Output = outputIndex(Producer, Tensor);
  const ParallelConfig &PC = S[Producer.Id], &CC = S[ConsumerId];
  const OpTasks &From = PerOp[Producer.Id], &To = PerOp[ConsumerId];
  bool GradFlows = !To.Backward.empty() && !From.Backward.empty() &&
                   (T.BackwardInputs[ConsumerId] >> Slot & 1) &&
                   T.NeedsGrad[Tensor];
  double ElementSize = ir::dtypeSize(Value.Type.Type);
  const ir::OpKindInfo &Info = ir::opKindInfo(Consumer.Kind);
  // Partial sums (the producer split over its contraction) are added into
  // the consumer's buffer.
  bool Summed = PC.Reduction > 1;

  llvm::SmallVector<ir::Region, 8> Written;
  for (unsigned P = 0; P < PC.numPartitions(); ++P)
    Written.push_back(ir::outputRegionOf(G, Producer, Output,
                                         outputRegion(G, Producer, PC, P),
                                         reductionSlice(G, Producer, PC, P)));
  // Per producer partition, with CopyTasks: packing its messages to this
  // input's partitions, and adding the gradients they send back.
  struct PerProducer {
    TaskId Pack = NoTask, Unpack = NoTask;
    double Bytes = 0;
    unsigned Messages = 0;
  };
  std::vector<PerProducer> Producers(Options.CopyTasks ? PC.numPartitions()
                                                       : 0);
  llvm::SmallVector<std::pair<unsigned, double>, 8> Overlaps;
  for (unsigned C = 0; C < CC.numPartitions(); ++C) {
    ir::Region Needed =
        Info.InputRegion(G, Consumer, Slot, outputRegion(G, Consumer, CC, C),
                         reductionSlice(G, Consumer, CC, C));
    Overlaps.clear();
    for (unsigned P = 0; P < PC.numPartitions(); ++P) {
      int64_t Volume = ir::regionVolume(ir::intersect(Needed, Written[P]));
      if (Volume != 0)
        Overlaps.push_back({P, double(Volume) * ElementSize});
    }
    DeviceId Here = CC.device(C);
    // A generated program's call reads the producer's buffer as it is when
    // one partition on the same device wrote exactly the region it needs
    // (codegen's bindInputs); otherwise it gathers the input into a buffer
    // of its own.
    bool Aliased = Overlaps.size() == 1 && !Summed &&
                   PC.device(Overlaps[0].first) == Here &&
                   Written[Overlaps[0].first] == Needed;
    if (!Options.CopyTasks || Aliased) {
      for (auto [P, Bytes] : Overlaps) {
        connect(From.ForwardDone[P], PC.device(P), To.Forward[C], Here,
                TaskKind::Transfer, Bytes,
                {forwardLevel(Producer.Id) + 2, ConsumerId, Slot, C, P},
                ConsumerId, Owned);
        if (GradFlows)
          connect(To.BackwardDone[C], Here, From.Backward[P], PC.device(P),
                  TaskKind::GradTransfer, Bytes,
                  {backwardLevel(ConsumerId) + 2, 0, Slot, C, P}, ConsumerId,
                  Owned);
      }
      continue;
    }
    if (Overlaps.empty())
      continue;
    // Gathered: local parts copied in, messages unpacked, before the
    // forward; after the backward, the gradient's local parts added back
    // and the rest packed to be sent.
    TaskId Gather =
        addCopy(Here, {forwardLevel(ConsumerId) - 1, ConsumerId, Slot, C, ~0u},
                ConsumerId, Tensor, C, Owned);
    TaskId Scatter =
        GradFlows
            ? addCopy(Here, {backwardLevel(ConsumerId) + 1, 3, Slot, C, 0},
                      ConsumerId, Tensor, C, Owned)
            : NoTask;
    double Bytes = 0, LocalBytes = 0;
    unsigned Local = 0;
    for (auto [P, PartBytes] : Overlaps) {
      DeviceId There = PC.device(P);
      Bytes += PartBytes;
      if (There == Here) {
        LocalBytes += PartBytes;
        ++Local;
        addEdge(From.ForwardDone[P], Gather, /*Fresh=*/true);
        if (GradFlows)
          addEdge(Scatter, From.Backward[P], /*Fresh=*/true);
        continue;
      }
      PerProducer &Sender = Producers[P];
      if (Sender.Pack == NoTask) {
        Sender.Pack = addCopy(
            There, {forwardLevel(Producer.Id) + 1, 1 + ConsumerId, Slot, P, 0},
            ConsumerId, Tensor, P, Owned);
        addEdge(From.ForwardDone[P], Sender.Pack, /*Fresh=*/true);
        if (GradFlows) {
          Sender.Unpack = addCopy(
              There,
              {backwardLevel(Producer.Id) - 1, 1 + ConsumerId, Slot, P, 0},
              ConsumerId, Tensor, P, Owned);
          addEdge(Sender.Unpack, From.Backward[P], /*Fresh=*/true);
        }
      }
      Sender.Bytes += PartBytes;
      ++Sender.Messages;
      connect(Sender.Pack, There, Gather, Here, TaskKind::Transfer, PartBytes,
              {forwardLevel(Producer.Id) + 2, ConsumerId, Slot, C, P},
              ConsumerId, Owned);
      if (GradFlows)
        connect(Scatter, Here, Sender.Unpack, There, TaskKind::GradTransfer,
                PartBytes, {backwardLevel(ConsumerId) + 2, 0, Slot, C, P},
                ConsumerId, Owned);
    }
    addEdge(Gather, To.Forward[C], /*Fresh=*/true);
    setCopyTime(Gather, Summed ? 0 : Bytes, Summed ? 0 : Overlaps.size(),
                Summed ? Bytes : 0, Summed ? Overlaps.size() : 0);
    if (GradFlows) {
      addEdge(To.BackwardDone[C], Scatter, /*Fresh=*/true);
      setCopyTime(Scatter, Bytes - LocalBytes, Overlaps.size() - Local,
                  LocalBytes, Local);
    }
  }
  for (const PerProducer &Sender : Producers) {
    if (Sender.Pack == NoTask)
      continue;
    setCopyTime(Sender.Pack, Sender.Bytes, Sender.Messages, 0, 0);
    if (Sender.Unpack != NoTask)
      setCopyTime(Sender.Unpack, 0, 0, Sender.Bytes, Sender.Messages);
  }
}

TaskId TaskGraph::addCopy(DeviceId Device, TaskKey Key, ir::OpId Op,
                          ir::TensorId Tensor, uint32_t Partition,
                          std::vector<TaskId> &Owned) {
  Task Copy;
  Copy.Kind = TaskKind::Copy;
  Copy.Key = Key;
  Copy.Op = Op;
  Copy.Tensor = Tensor;
  Copy.Partition = Partition;
  Copy.Device = Device;
  Copy.Resources = {Device};
  TaskId Id = addTask(std::move(Copy));
  Owned.push_back(Id);
  return Id;
}

void TaskGraph::setCopyTime(TaskId Id, double CopiedBytes, unsigned Copies,
                            double AddedBytes, unsigned Adds) {
  Task &Copy = Tasks[Id];
  const DeviceType &Type = M.deviceType(Copy.Device);
  Copy.Bytes = CopiedBytes + AddedBytes;
  Copy.Duration = 0;
  if (Copies)
    Copy.Duration += Cost.copyTime(CopiedBytes, Copies, false, Type);
  if (Adds)
    Copy.Duration += Cost.copyTime(AddedBytes, Adds, true, Type);
  Copy.CopySeconds = Copy.Duration;
}

//===-- Parameters ------------------------------------------------------------

void TaskGraph::buildTensorSync(ir::TensorId Tensor) {
  TensorSync &Sync = Syncs[Tensor];
  Sync.Uses.clear();
  Sync.Updates.clear();
  // Every partition of every ordinary reader whose backward writes a
  // gradient of the tensor.
  for (auto [Id, Slot] : gradientReads(Tensor)) {
    const ir::Op &O = G.op(Id);
    const ParallelConfig &C = S[Id];
    const ir::OpKindInfo &Info = ir::opKindInfo(O.Kind);
    for (unsigned P = 0; P < C.numPartitions(); ++P)
      Sync.Uses.push_back(
          {Info.InputRegion(G, O, Slot, outputRegion(G, O, C, P),
                            reductionSlice(G, O, C, P)),
           C.device(P), PerOp[Id].Backward[P]});
  }
  std::vector<std::pair<ir::Region, DeviceId>> Regions;
  for (const TensorUse &U : Sync.Uses)
    Regions.push_back({U.Region, U.Device});
  const ir::Tensor &Value = G.tensor(Tensor);
  Sync.Cells = gradientCells(Value.Type.Dims, Regions);

  // Per device holding some of it: the optimizer update, after the
  // backward tasks there that write its gradient (and the all-reduces of
  // its cells: buildBuckets).
  std::map<DeviceId, int64_t> Held;
  for (const GradientCells &Cells : Sync.Cells)
    for (DeviceId D : Cells.Holders)
      Held[D] += Cells.Elements;
  double ElementSize = ir::dtypeSize(Value.Type.Type);
  std::map<DeviceId, double> Packing;
  if (Options.CopyTasks)
    Packing = packingTimes(Sync.Cells, ElementSize, Cost, M);
  // A device holds one box of the tensor: the bounding box of what its
  // partitions read (a weight-only op's result: all of it). A region its
  // partitions read that is not the box is a slice of its own, filled from
  // the box once a step, and its gradient added back once (codegen's
  // Slice): its bytes and boxes per device.
  bool Reshaped = Value.Role == ir::TensorRole::Activation;
  std::map<DeviceId, std::vector<ir::Region>> Read;
  for (const TensorUse &U : Sync.Uses)
    Read[U.Device].push_back(U.Region);
  struct SliceBytes {
    double Bytes = 0, Buffers = 0; ///< Buffers: each rounded as allocated
    unsigned Count = 0;
  };
  std::map<DeviceId, SliceBytes> Slices;
  for (auto &[Device, Regions] : Read) {
    ir::Region Box = Reshaped ? ir::fullRegion(Value.Type.Dims) : Regions[0];
    for (const ir::Region &R : Regions)
      Box = ir::enclose(Box, R);
    llvm::sort(Regions);
    Regions.erase(std::unique(Regions.begin(), Regions.end()), Regions.end());
    for (const ir::Region &R : Regions)
      if (R != Box) {
        double Bytes = double(ir::regionVolume(R)) * ElementSize;
        Slices[Device].Bytes += Bytes;
        Slices[Device].Buffers += alignedBufferBytes(Bytes);
        ++Slices[Device].Count;
      }
  }
  for (auto &[Device, Elements] : Held) {
    Task Update;
    Update.Kind = TaskKind::Update;
    Update.Key = {SegmentLevel[SegmentOf[Tensor]], 2, Tensor, Device, 0};
    Update.Duration = Cost.updateTime(Options.Optimizer, double(Elements),
                                      Value.Type.Type, M.deviceType(Device));
    // The all-reduced cells are packed into the message buffer and
    // unpacked after: charged here, where the device holds them.
    const DeviceType &Type = M.deviceType(Device);
    if (Options.CopyTasks) {
      if (auto It = Packing.find(Device); It != Packing.end())
        Update.CopySeconds += It->second;
      // Its slices filled and their gradients added back, charged here too
      // (the program fills them before the first reader's forward).
      if (auto It = Slices.find(Device); It != Slices.end())
        Update.CopySeconds +=
            Cost.copyTime(It->second.Bytes, It->second.Count, false, Type) +
            Cost.copyTime(It->second.Bytes, It->second.Count, true, Type);
      Update.Duration += Update.CopySeconds;
    }
    Update.Tensor = Tensor;
    Update.Device = Device;
    Update.Resources = {Device};
    Update.Bytes = double(Elements) * ElementSize;
    // The box, its gradient and optimizer slots; a weight-only op's result
    // (a weight the exporter reshaped) and its gradient whole, and what it
    // is computed from (SourceBytes), as generated programs hold them.
    Update.ParamMemory = Reshaped
                             ? 2 * alignedBufferBytes(Value.Type.byteSize()) +
                                   SourceBytes[Tensor]
                             : alignedBufferBytes(Update.Bytes) *
                                   (2 + optimizerStateCount(Options.Optimizer));
    // And each slice with its gradient.
    if (auto It = Slices.find(Device); It != Slices.end())
      Update.ParamMemory += 2 * It->second.Buffers;
    TaskId Id = addTask(std::move(Update));
    for (const TensorUse &U : Sync.Uses)
      if (U.Device == Device)
        addEdge(U.Backward, Id);
    Sync.Updates.push_back(Id);
  }
}

void TaskGraph::buildBuckets(uint32_t Segment) {
  std::vector<TaskId> &Owned = SegmentTasks[Segment];
  Owned.clear();
  // One all-reduce per group of devices (and element type): every cell of
  // the segment's tensors summed over exactly those devices, after the
  // backward tasks on them that write any of it, before those tensors'
  // updates there.
  struct Bucket {
    double Bytes = 0;
    std::vector<BucketPart> Parts;
    std::vector<TaskId> After;
  };
  std::map<std::pair<std::vector<DeviceId>, ir::DType>, Bucket> Buckets;
  for (ir::TensorId Tensor : Segments[Segment]) {
    const TensorSync &Sync = Syncs[Tensor];
    ir::DType Type = G.tensor(Tensor).Type.Type;
    for (uint32_t Index = 0; Index < Sync.Cells.size(); ++Index) {
      const GradientCells &Cells = Sync.Cells[Index];
      if (Cells.Holders.size() < 2)
        continue;
      Bucket &B = Buckets[{Cells.Holders, Type}];
      B.Bytes += double(Cells.Elements) * ir::dtypeSize(Type);
      B.Parts.push_back({Tensor, Index});
      for (const TensorUse &U : Sync.Uses)
        if (std::binary_search(Cells.Holders.begin(), Cells.Holders.end(),
                               U.Device))
          B.After.push_back(U.Backward);
    }
  }
  uint32_t Index = 0;
  for (auto &[Key, B] : Buckets) {
    const std::vector<DeviceId> &Holders = Key.first;
    TaskId Sync = addAllReduce(
        TaskKind::GradAllReduce, Holders, B.Bytes,
        {SegmentLevel[Segment], 1, Segments[Segment].front(), Index++, 0},
        ir::NoOp, B.Parts.front().Tensor);
    llvm::sort(B.After);
    B.After.erase(std::unique(B.After.begin(), B.After.end()), B.After.end());
    for (TaskId Backward : B.After)
      addEdge(Backward, Sync);
    // One edge per tensor and holder.
    for (ir::TensorId Tensor : bucketTensors(B.Parts))
      for (TaskId Update : Syncs[Tensor].Updates)
        if (std::binary_search(Holders.begin(), Holders.end(),
                               Tasks[Update].Device))
          addEdge(Sync, Update, /*Fresh=*/true);
    if (Parts.size() <= Sync)
      Parts.resize(Sync + 1);
    Parts[Sync] = std::move(B.Parts);
    Owned.push_back(Sync);
  }
}

std::map<DeviceId, double> packingTimes(llvm::ArrayRef<GradientCells> Cells,
                                        double ElementSize,
                                        const CostModel &Cost,
                                        const Machine &M) {
  std::map<DeviceId, std::pair<int64_t, unsigned>> Packed;
  for (const GradientCells &Group : Cells)
    if (Group.Holders.size() > 1)
      for (DeviceId D : Group.Holders) {
        Packed[D].first += Group.Elements;
        Packed[D].second += Group.Boxes.size();
      }
  std::map<DeviceId, double> Times;
  for (auto &[Device, Elements] : Packed)
    Times[Device] =
        2 * Cost.copyTime(double(Elements.first) * ElementSize, Elements.second,
                          false, M.deviceType(Device));
  return Times;
}

std::vector<GradientCells>
gradientCells(const ir::Shape &Dims,
              llvm::ArrayRef<std::pair<ir::Region, DeviceId>> Uses) {
  // Cut the parameter into cells at every boundary of every use's region;
  // each cell's gradient is summed over the devices whose regions contain
  // it. Cells shared by the same devices form one group.
  unsigned Rank = Dims.size();
  std::vector<std::vector<int64_t>> Cuts(Rank);
  for (unsigned D = 0; D < Rank; ++D) {
    Cuts[D] = {0, Dims[D]};
    for (const auto &Use : Uses)
      Cuts[D].insert(Cuts[D].end(), {Use.first[D].Begin, Use.first[D].End});
    std::sort(Cuts[D].begin(), Cuts[D].end());
    Cuts[D].erase(std::unique(Cuts[D].begin(), Cuts[D].end()), Cuts[D].end());
  }
  std::map<std::vector<DeviceId>, GradientCells> Groups;
  std::vector<unsigned> Cell(Rank, 0);
  while (true) {
    ir::Region Box(Rank);
    for (unsigned D = 0; D < Rank; ++D)
      Box[D] = {Cuts[D][Cell[D]], Cuts[D][Cell[D] + 1]};
    std::vector<DeviceId> Holders;
    for (const auto &Use : Uses)
      if (ir::regionVolume(ir::intersect(Box, Use.first)) > 0)
        Holders.push_back(Use.second);
    std::sort(Holders.begin(), Holders.end());
    Holders.erase(std::unique(Holders.begin(), Holders.end()), Holders.end());
    if (!Holders.empty() && ir::regionVolume(Box) > 0) {
      GradientCells &Group = Groups[Holders];
      Group.Holders = Holders;
      Group.Boxes.push_back(Box);
      Group.Elements += ir::regionVolume(Box);
    }
    unsigned D = Rank;
    while (D > 0 && ++Cell[D - 1] + 1 >= Cuts[D - 1].size())
      Cell[--D] = 0;
    if (D == 0)
      break;
  }
  std::vector<GradientCells> Result;
  for (auto &Entry : Groups)
    Result.push_back(std::move(Entry.second));
  return Result;
}

TaskId TaskGraph::addAllReduce(TaskKind Kind, llvm::ArrayRef<DeviceId> Devices,
                               double Bytes, TaskKey Key, ir::OpId Op,
                               ir::TensorId Tensor) {
  Task Collective;
  Collective.Kind = Kind;
  Collective.Key = Key;
  Collective.Op = Op;
  Collective.Tensor = Tensor;
  Collective.Group.assign(Devices.begin(), Devices.end());
  std::sort(Collective.Group.begin(), Collective.Group.end());
  Collective.Device = Collective.Group.front();
  CollectiveCost C = allReduceCost(M, Collective.Group, Bytes);
  Collective.Duration = C.Time;
  Collective.Bytes = C.BytesPerDevice;
  // BatchNorm statistics are all-reduced in place (the program's own small
  // buffers); gradients are packed into the message buffer.
  if (Kind == TaskKind::GradAllReduce)
    Collective.MessageBytes = Bytes;
  for (LinkId L : C.Links)
    Collective.Resources.push_back(M.numDevices() + L);
  if (Options.SerialCommunication)
    for (DeviceId D : Collective.Group)
      Collective.Resources.push_back(commEngine(D));
  // Members wait in the call: always for BatchNorm's sums, which the next
  // phase reads; for gradients on CPU ranks, whose MPI all-reduce sums
  // inside the call (NCCL's runs beside the backward pass).
  if (Options.BlockingCalls && (Kind == TaskKind::StatsAllReduce ||
                                llvm::all_of(Collective.Group, [&](DeviceId D) {
                                  return M.deviceType(D).CudaArch.empty();
                                })))
    for (DeviceId D : Collective.Group)
      Collective.Resources.push_back(D);
  return addTask(std::move(Collective));
}

namespace {
/// The links a collective's messages use, each with how many of them cross
/// it (a count per link of the machine, and the links counted so far); the
/// collective's bandwidth time is the busiest link's. Flat, not a map: all-
/// reduces are costed for every config OptCNN's sum offers and every
/// synchronization the task graph builds.
struct LinkLoad {
  std::vector<unsigned> Count;
  llvm::SmallVector<LinkId, 16> Used;

  explicit LinkLoad(const Machine &M) : Count(M.numLinks(), 0) {}
  /// Adds the links of the route From -> To; returns its latency.
  double addRoute(const Machine &M, DeviceId From, DeviceId To) {
    for (LinkId L : M.route(From, To))
      if (Count[L]++ == 0)
        Used.push_back(L);
    return M.routeLatency(From, To);
  }
  double busiest(const Machine &M, double Bytes) const {
    double Time = 0;
    for (LinkId L : Used)
      Time = std::max(Time, Count[L] * Bytes / M.link(L).Bandwidth);
    return Time;
  }
};
} // namespace

CollectiveCost allReduceCost(const Machine &M, llvm::ArrayRef<DeviceId> Devices,
                             double Bytes) {
  // Ring (reduce-scatter then all-gather) over the devices in id order: each
  // ring hop carries 2(n-1)/n of the data; a link used by k hops carries k
  // times that; every one of the 2(n-1) steps pays the slowest hop's latency.
  size_t N = Devices.size();
  LinkLoad Ring(M);
  double RingLatency = 0;
  for (size_t I = 0; I < N; ++I)
    RingLatency = std::max(RingLatency,
                           Ring.addRoute(M, Devices[I], Devices[(I + 1) % N]));
  double PerDevice = 2.0 * double(N - 1) / double(N) * Bytes;
  double RingTime =
      2.0 * double(N - 1) * RingLatency + Ring.busiest(M, PerDevice);

  // Binary tree over the devices in id order (position i's parent is
  // (i-1)/2): the data goes up to the root, reduced on the way, and back
  // down, pipelined in chunks, so each level costs its latency once each way
  // and each tree edge carries the data once in each direction. Fewer
  // latency steps (2 log2 n instead of 2(n-1)): the better algorithm for
  // small messages (BatchNorm statistics) on many devices. Every device
  // still sends 2(n-1)/n of the data on average.
  LinkLoad Tree(M);
  double TreeLatency = 0;
  for (size_t I = 1; I < N; ++I) {
    DeviceId Child = Devices[I], Parent = Devices[(I - 1) / 2];
    TreeLatency = std::max({TreeLatency, Tree.addRoute(M, Child, Parent),
                            Tree.addRoute(M, Parent, Child)});
  }
  // The deepest position, n-1, is on level floor(log2 n).
  double TreeTime =
      2.0 * llvm::Log2_64(N) * TreeLatency + Tree.busiest(M, Bytes);

  CollectiveCost C;
  C.BytesPerDevice = PerDevice;
  C.Tree = TreeTime < RingTime;
  C.Time = C.Tree ? TreeTime : RingTime;
  // A measured time for a group of this shape replaces the model's; the
  // collective still holds the links of the algorithm the model would
  // choose, for contention.
  if (const SizeTable *Measured = M.allReduceTable(Devices))
    C.Time = Measured->time(Bytes);
  const LinkLoad &Used = C.Tree ? Tree : Ring;
  C.Links.assign(Used.Used.begin(), Used.Used.end());
  llvm::sort(C.Links); // in link order, as the task's resources
  return C;
}

double ringBytesSent(double Bytes, unsigned ElementSize, size_t N,
                     size_t Position) {
  if (N < 2)
    return 0;
  int64_t Count = std::llround(Bytes / ElementSize);
  int64_t Members = int64_t(N);
  auto Length = [&](int64_t C) {
    C %= Members;
    return Count * (C + 1) / Members - Count * C / Members;
  };
  // Reduce-scatter sends every chunk but Position + 1, all-gather every one
  // but Position + 2.
  int64_t P = int64_t(Position);
  return double(2 * Count - Length(P + 1) - Length(P + 2)) * ElementSize;
}

//===-- Whole graph and updates ---------------------------------------------

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

std::vector<TaskId> TaskGraph::changeConfig(ir::OpId Id,
                                            const ParallelConfig &C) {
  return changeConfigs({Id}, {C});
}

std::vector<TaskId>
TaskGraph::changeConfigs(llvm::ArrayRef<ir::OpId> Ids,
                         llvm::ArrayRef<ParallelConfig> Configs) {
  assert(Ids.size() == Configs.size() && "one config per op");
  // Slots freed by the previous change are reusable now that the simulator
  // has taken them out of its orders.
  Free.insert(Free.end(), Removed.begin(), Removed.end());
  Removed.clear();
  Created.clear();
  Gained.clear();
  Rewired.clear();
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

  std::vector<TaskId> Changed = Created;
  Touched.insert(Touched.end(), Gained.begin(), Gained.end());
  Marks.dedupe(Touched);
  for (TaskId Task : Touched)
    if (Tasks[Task].Alive)
      Changed.push_back(Task);
  return Changed;
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
  for (ChangeLog::Lists &L : Undo.Edited) {
    Tasks[L.Id].Preds = std::move(L.Preds);
    Tasks[L.Id].Succs = std::move(L.Succs);
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
