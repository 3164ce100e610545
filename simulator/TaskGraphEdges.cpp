//===- simulator/TaskGraphEdges.cpp - The edges of an op's inputs ---------===//
//
// The second layer of the task graph (TaskGraphOps.cpp builds an op's own
// tasks, TaskGraphSync.cpp its parameters' synchronization): for each input
// of a consumer, a transfer for every non-empty overlap between a producer
// partition's output region and the region a consumer partition reads, on
// the route between their devices; under the program's model of
// communication (SimOptions::CopyTasks), also the copies that pack, gather
// and scatter what crosses.
//
//===----------------------------------------------------------------------===//

#include "simulator/TaskGraph.h"

#include "ir/BatchDims.h"

namespace onnx2soap::simulator {

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
  // A new task: neither edge can be there already.
  TaskId Id = addTask(std::move(Transfer));
  addEdge(From, Id, /*Fresh=*/true);
  addEdge(Id, To, /*Fresh=*/true);
  Owned.push_back(Id);
}

unsigned outputIndex(const ir::Op &O, ir::TensorId Tensor) {
  for (unsigned I = 0; I < O.Outputs.size(); ++I)
    if (O.Outputs[I] == Tensor)
      return I;
  llvm_unreachable("tensor is not an output of its producer");
}

uint64_t inputMessages(const ir::Graph &G, ir::OpId ConsumerId, unsigned Slot,
                       const ParallelConfig &PC, const ParallelConfig &CC,
                       uint64_t StopAbove) {
  const ir::Op &Consumer = G.op(ConsumerId);
  ir::TensorId Tensor = Consumer.Inputs[Slot];
  if (Tensor == ir::NoTensor)
    return 0;
  const ir::Tensor &Value = G.tensor(Tensor);
  if (Value.Role != ir::TensorRole::Activation || Value.Producer == ir::NoOp)
    return 0;
  const ir::Op &Producer = G.op(Value.Producer);
  unsigned Output = outputIndex(Producer, Tensor);
  const ir::OpKindInfo &Info = ir::opKindInfo(Consumer.Kind);
  unsigned Producers = PC.numPartitions(), Consumers = CC.numPartitions();
  std::vector<ir::Region> Written;
  std::vector<DeviceId> Where;
  Written.reserve(Producers);
  Where.reserve(Producers);
  for (unsigned P = 0; P < Producers; ++P) {
    Written.push_back(ir::outputRegionOf(G, Producer, Output,
                                         outputRegion(G, Producer, PC, P),
                                         reductionSlice(G, Producer, PC, P)));
    Where.push_back(PC.device(P));
  }
  uint64_t Messages = 0;
  for (unsigned C = 0; C < Consumers && Messages <= StopAbove; ++C) {
    ir::Region Needed =
        Info.InputRegion(G, Consumer, Slot, outputRegion(G, Consumer, CC, C),
                         reductionSlice(G, Consumer, CC, C));
    DeviceId Here = CC.device(C);
    for (unsigned P = 0; P < Producers; ++P)
      Messages +=
          Where[P] != Here && ir::overlapVolume(Needed, Written[P]) != 0;
  }
  return Messages;
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
      int64_t Volume = ir::overlapVolume(Needed, Written[P]);
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

} // namespace onnx2soap::simulator
