//===- simulator/MemoryModel.h - Peak memory per device --------*- C++ -*-===//
//
// What each device must hold during one training iteration under a
// strategy: its parameter shards with their gradients and optimizer state
// (a weight an exporter reshaped with ops twice: generated programs hold the
// parameter and the reshaped tensor), the non-learned tensors its partitions
// read (BatchNorm running statistics, frozen weights, constants), the input
// data of its partitions, the activations kept for the backward pass (every
// forward output it computes and every activation region it receives), the
// message buffer that transfers and gradient all-reduces pack their data
// into (as large as the device's largest message), the gradient working
// set: the activation gradients of its largest backward call, the kernel
// scratch of its largest call (KernelScratch.h: convolution
// workspace, copies kernels make while they run), and what the backend
// holds for its libraries (cuBLAS's workspace). Without recomputation
// the activations are all live when the backward pass begins, so the sum
// bounds the peak; each buffer is rounded up to the 256 bytes a generated
// program aligns it to. On every fixture and sample plan measured the
// generated program's buffers take at most this much less the scratch
// (tests/codegen/BufferLayoutTest.cpp, docs/benchmarks.md). Outside the
// program's buffers it counts the runtime's memory: the CUDA context with
// its loaded kernels, and NCCL's buffers, per communicator the device
// joins (one per group of devices it all-reduces with) and per device it
// exchanges messages with (the device type's RuntimeMemory,
// CommunicatorMemory and PeerMemory). Not counted: sharing of one constant
// by several ops on a device (each op's read is counted).
//
// Every task carries its share (TaskGraph sets it when it builds the task),
// so the sums are kept up to date as delta simulation adds and removes
// tasks.
//
//===----------------------------------------------------------------------===//
#ifndef ONNX2SOAP_SIMULATOR_MEMORYMODEL_H
#define ONNX2SOAP_SIMULATOR_MEMORYMODEL_H

#include "simulator/TaskGraph.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallVector.h"
#include <algorithm>
#include <map>
#include <vector>

namespace onnx2soap::simulator {

/// The smallest message buffer a generated program allocates
/// (rt::program::MinMessageBufferBytes).
constexpr double MinMessageBytes = 64;

/// How many tasks need each size of something (a message buffer, a
/// gradient working set, kernel scratch), and the largest. A device has
/// few distinct sizes, so they lie in a sorted array, which the copy of
/// the state delta simulation takes before each step copies without
/// allocating (a std::map per device, before, took 3 % of a search in node
/// copies, AlexNet on 64 K80s, and full simulations built them anew).
class SizeCounts {
public:
  void add(double Bytes) {
    auto It = find(Bytes);
    if (It != Sizes.end() && It->first == Bytes)
      ++It->second;
    else
      Sizes.insert(It, {Bytes, 1});
  }
  /// Bytes must have been added.
  void remove(double Bytes) {
    auto It = find(Bytes);
    assert(It != Sizes.end() && It->first == Bytes && "size not counted");
    if (--It->second == 0)
      Sizes.erase(It);
  }
  /// The largest size counted, or 0.
  double largest() const { return Sizes.empty() ? 0 : Sizes.back().first; }

private:
  llvm::SmallVector<std::pair<double, uint32_t>, 4>::iterator find(double B) {
    return std::lower_bound(Sizes.begin(), Sizes.end(), B,
                            [](const std::pair<double, uint32_t> &E, double V) {
                              return E.first < V;
                            });
  }
  llvm::SmallVector<std::pair<double, uint32_t>, 4> Sizes;
};

/// Bytes per device, indexed by DeviceId.
struct MemoryBreakdown {
  std::vector<double> Parameters;  ///< shards + gradients + optimizer state
  std::vector<double> Fixed;       ///< state, constants, frozen weights
  std::vector<double> Activations; ///< inputs, outputs, received regions
  /// Per device: how many live tasks need a message buffer of each size,
  /// and how many backward tasks have a gradient working set of each size.
  std::vector<SizeCounts> Messages;
  std::vector<SizeCounts> Gradients;
  /// Per device: how many compute tasks take kernel scratch of each size.
  std::vector<SizeCounts> Scratch;
  /// Per device: what the backend holds for its libraries (the device
  /// type's libraryMemory()) and the runtime's own memory (its
  /// RuntimeMemory).
  std::vector<double> Library;
  std::vector<double> Runtime;
  /// Per device: its type's bytes per communicator and per peer, and how
  /// many communicators it joins and how many peers it has.
  std::vector<double> PerCommunicator, PerPeer;
  std::vector<uint32_t> Communicators, Peers;
  /// How many live collectives each group of devices (sorted) runs, and
  /// how many live transfers each pair of devices (Low * devices + High)
  /// makes: a device joins a group's communicator, or has a peer, while the
  /// count is above zero.
  std::map<llvm::SmallVector<DeviceId, 2>, uint32_t> GroupUses;
  llvm::DenseMap<uint64_t, uint32_t> PairUses;

  explicit MemoryBreakdown(unsigned NumDevices = 0)
      : Parameters(NumDevices), Fixed(NumDevices), Activations(NumDevices),
        Messages(NumDevices), Gradients(NumDevices), Scratch(NumDevices),
        Library(NumDevices), Runtime(NumDevices), PerCommunicator(NumDevices),
        PerPeer(NumDevices), Communicators(NumDevices), Peers(NumDevices) {}
  /// Adds (Sign 1) or removes (Sign -1) a task's share.
  void add(const Task &T, double Sign);
  std::vector<double> total() const;
  /// Device D's message buffer: its largest message, and at least
  /// MinMessageBytes.
  double message(DeviceId D) const {
    return std::max(MinMessageBytes, Messages[D].largest());
  }
  /// Device D's gradient working set: its largest backward task's.
  double gradients(DeviceId D) const { return Gradients[D].largest(); }
  /// Device D's kernel scratch: its largest compute task's (kernels run
  /// one at a time on a device, and free their scratch when they end).
  double scratch(DeviceId D) const { return Scratch[D].largest(); }
  /// Device D's runtime memory: the runtime's own and NCCL's.
  double runtime(DeviceId D) const {
    return Runtime[D] + Communicators[D] * PerCommunicator[D] +
           Peers[D] * PerPeer[D];
  }
  /// Device D's total.
  double total(DeviceId D) const {
    return Parameters[D] + Fixed[D] + Activations[D] + message(D) +
           gradients(D) + scratch(D) + Library[D] + runtime(D);
  }
};

/// Sums every live task's share.
MemoryBreakdown memoryBreakdown(const TaskGraph &Graph);

} // namespace onnx2soap::simulator

#endif
