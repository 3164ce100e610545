//===- simulator/CostModel.h - How long a task takes -----------*- C++ -*-===//
//
// The simulator asks a CostModel for the forward and backward time of one
// partition of an op on a device type, and for an optimizer update. The
// default is an analytic roofline (FLOPs over peak times an efficiency per
// op family, or bytes over memory bandwidth, whichever is larger, plus the
// kernel launch); measured profiles override it per (op kind, partition
// shapes, device type). Tests use a fake with round numbers so that
// timelines can be written by hand. Communication is not here: the simulator
// times transfers and collectives from the machine's links; the box copies
// around them are (copyTime).
//
//===----------------------------------------------------------------------===//
#ifndef ONNX2SOAP_SIMULATOR_COSTMODEL_H
#define ONNX2SOAP_SIMULATOR_COSTMODEL_H

#include "ir/Graph.h"
#include "simulator/Machine.h"

namespace onnx2soap::simulator {

/// Seconds for one partition's forward and backward tasks.
struct TaskTimes {
  double Forward = 0;
  double Backward = 0;
};

/// The optimizer whose update the simulator times and whose state it counts.
enum class OptimizerKind : uint8_t {
  Sgd,         ///< plain SGD: no state
  SgdMomentum, ///< one state tensor per parameter
  Adam,        ///< two (Adam, AdamW)
};
/// State tensors per parameter tensor.
unsigned optimizerStateCount(OptimizerKind Kind);

/// What one partition of an op computes: the region of output 0 and the
/// slice of the contraction dim.
struct PartitionShape {
  const ir::Graph &G;
  const ir::Op &O;
  llvm::ArrayRef<ir::Interval> Out;
  ir::Interval Reduction;
};

class CostModel {
public:
  virtual ~CostModel();
  /// A function of the op's kind and attributes, the types of the tensors
  /// it reads and writes, P's region and slice, and the device type: never
  /// of the op's name or which tensors it reads. Ops alike in all of these
  /// take the same times, and OptCNN's elimination costs them once
  /// (soap_search/Elimination.h).
  virtual TaskTimes opTimes(const PartitionShape &P,
                            const DeviceType &Device) const = 0;
  /// One optimizer update over Elements parameters (their gradients and
  /// state).
  virtual double updateTime(OptimizerKind Kind, double Elements, ir::DType Type,
                            const DeviceType &Device) const = 0;
  /// Copies box copies of Bytes in all, as a generated program makes them
  /// on its device (gathering a partition's input, packing and unpacking
  /// messages, adding gradients back; Add: summed into the destination,
  /// which is read too). By default a kernel launch per copy plus the bytes
  /// read and written over the device's memory bandwidth.
  virtual double copyTime(double Bytes, unsigned Copies, bool Add,
                          const DeviceType &Device) const;
};

/// FLOPs and bytes of one partition: the op's whole-op counts scaled by the
/// partition's share of the output and of the contraction dim; bytes are
/// the partition's input regions (from the region rule) plus its outputs.
struct PartitionWork {
  double FlopsForward = 0;
  double FlopsBackward = 0;
  double BytesForward = 0;
  double BytesBackward = 0;
};
PartitionWork partitionWork(const PartitionShape &P);

/// The roofline model.
class AnalyticCostModel : public CostModel {
public:
  TaskTimes opTimes(const PartitionShape &P,
                    const DeviceType &Device) const override;
  double updateTime(OptimizerKind Kind, double Elements, ir::DType Type,
                    const DeviceType &Device) const override;
  /// Fraction of peak FLOP/s an op kind reaches (documented per family in
  /// docs/cost-model.md).
  static double efficiency(ir::OpKind Kind);
};

} // namespace onnx2soap::simulator

#endif
