//===- simulator/TaskGraphOps.cpp - An op's own tasks ---------------------===//
//
// The first layer of the task graph (TaskGraphEdges.cpp builds the edges of
// an op's inputs, TaskGraphSync.cpp its parameters' synchronization): per
// partition a forward and a backward task on its device, timed by the cost
// model, with the memory each keeps resident and the scratch its kernel
// takes, and for BatchNorm in training the all-reduces of its statistics.
//
//===----------------------------------------------------------------------===//
#include "simulator/TaskGraph.h"

#include "ir/BatchDims.h"
#include "simulator/KernelScratch.h"
#include <map>

namespace onnx2soap::simulator {

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

} // namespace onnx2soap::simulator
