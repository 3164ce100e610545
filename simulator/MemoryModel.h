//===- simulator/MemoryModel.h - Peak memory per device --------*- C++ -*-===//
//
// What each device must hold during one training iteration under a
// strategy: its parameter shards with their gradients and optimizer state,
// the non-learned tensors its partitions read (BatchNorm running
// statistics, frozen weights, constants), the input data of its partitions,
// and the activations kept for the backward pass (every forward output it
// computes and every activation region it receives), and the message buffer
// that transfers and gradient all-reduces pack their data into (as large as
// the device's largest message). Without recomputation all of these are
// live when the backward pass begins, so their sum is the peak. Not counted:
// gradient buffers of activations (freed as the backward pass proceeds), kernel
// workspace, and sharing of one constant by several ops on a device (each op's
// read is counted).
//
// Every task carries its share (TaskGraph sets it when it builds the task),
// so the sums are kept up to date as delta simulation adds and removes
// tasks.
//
//===----------------------------------------------------------------------===//
#ifndef ONNX2SOAP_SIMULATOR_MEMORYMODEL_H
#define ONNX2SOAP_SIMULATOR_MEMORYMODEL_H

#include "simulator/TaskGraph.h"
#include <map>
#include <vector>

namespace onnx2soap::simulator {

/// Bytes per device, indexed by DeviceId.
struct MemoryBreakdown {
  std::vector<double> Parameters;  ///< shards + gradients + optimizer state
  std::vector<double> Fixed;       ///< state, constants, frozen weights
  std::vector<double> Activations; ///< inputs, outputs, received regions
  /// Per device: how many live tasks need a message buffer of each size.
  std::vector<std::map<double, uint32_t>> Messages;

  explicit MemoryBreakdown(unsigned NumDevices = 0)
      : Parameters(NumDevices), Fixed(NumDevices), Activations(NumDevices),
        Messages(NumDevices) {}
  /// Adds (Sign 1) or removes (Sign -1) a task's share.
  void add(const Task &T, double Sign);
  std::vector<double> total() const;
  /// Device D's message buffer: its largest message.
  double message(DeviceId D) const {
    return Messages[D].empty() ? 0 : Messages[D].rbegin()->first;
  }
  /// Device D's total.
  double total(DeviceId D) const {
    return Parameters[D] + Fixed[D] + Activations[D] + message(D);
  }
};

/// Sums every live task's share.
MemoryBreakdown memoryBreakdown(const TaskGraph &Graph);

} // namespace onnx2soap::simulator

#endif
