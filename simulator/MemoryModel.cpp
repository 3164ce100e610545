//===- simulator/MemoryModel.cpp - Peak memory per device -----------------===//
//
// The sums of the tasks' memory shares, per device.
//
//===----------------------------------------------------------------------===//
#include "simulator/MemoryModel.h"

namespace onnx2soap::simulator {

void MemoryBreakdown::add(const Task &T, double Sign) {
  DeviceId Where = T.Kind == TaskKind::Transfer ? T.Peer : T.Device;
  Parameters[Where] += Sign * T.ParamMemory;
  Fixed[Where] += Sign * T.FixedMemory;
  Activations[Where] += Sign * T.ActivationMemory;
  auto Count = [&](SizeCounts &Sizes, double Bytes) {
    if (Sign > 0)
      Sizes.add(Bytes);
    else
      Sizes.remove(Bytes);
  };
  if (T.GradientMemory > 0)
    Count(Gradients[T.Device], T.GradientMemory);
  if (T.ScratchMemory > 0)
    Count(Scratch[T.Device], T.ScratchMemory);
  // A collective's members, or a transfer's two ends, pack what they send
  // into their message buffers (BatchNorm statistics are all-reduced in
  // place: no message bytes).
  if (T.MessageBytes > 0) {
    if (!T.Group.empty()) {
      for (DeviceId D : T.Group)
        Count(Messages[D], T.MessageBytes);
    } else {
      Count(Messages[T.Device], T.MessageBytes);
      Count(Messages[T.Peer], T.MessageBytes);
    }
  }
  // The communicator of the collective's group (gradients or statistics:
  // the program makes one for every group of its plan), or the pair's
  // connection: open while the strategy has such a task.
  auto Use = [&](uint32_t &Uses, auto Each) {
    if (Sign > 0 && Uses++ == 0)
      Each(1);
    else if (Sign < 0 && --Uses == 0)
      Each(-1);
  };
  if (!T.Group.empty()) {
    // The group is sorted, so one group has one key.
    auto It = GroupUses.try_emplace(T.Group, 0).first;
    Use(It->second, [&](int Step) {
      for (DeviceId D : T.Group)
        Communicators[D] += Step;
    });
    if (It->second == 0)
      GroupUses.erase(It);
  } else if (T.MessageBytes > 0 && T.Device != T.Peer) {
    DeviceId Low = std::min(T.Device, T.Peer);
    DeviceId High = std::max(T.Device, T.Peer);
    // Dense keys: DenseMap's hash of an integer (times 37) would let the
    // high half of a 64-bit key fall out of the bucket index.
    uint64_t Key = uint64_t(Low) * Parameters.size() + High;
    uint32_t &Uses = PairUses[Key];
    Use(Uses, [&](int Step) {
      Peers[Low] += Step;
      Peers[High] += Step;
    });
    if (Uses == 0)
      PairUses.erase(Key);
  }
}

std::vector<double> MemoryBreakdown::total() const {
  std::vector<double> Sum(Parameters.size());
  for (size_t D = 0; D < Sum.size(); ++D)
    Sum[D] = total(D);
  return Sum;
}

MemoryBreakdown memoryBreakdown(const TaskGraph &Graph) {
  const Machine &M = Graph.machine();
  MemoryBreakdown B(M.numDevices());
  for (DeviceId D = 0; D < M.numDevices(); ++D) {
    const DeviceType &Type = M.deviceType(D);
    B.Library[D] = double(Type.libraryMemory());
    B.Runtime[D] = double(Type.RuntimeMemory);
    B.PerCommunicator[D] = double(Type.CommunicatorMemory);
    B.PerPeer[D] = double(Type.PeerMemory);
  }
  for (TaskId Id = 0; Id < Graph.size(); ++Id)
    if (Graph.task(Id).Alive)
      B.add(Graph.task(Id), 1);
  return B;
}

} // namespace onnx2soap::simulator
