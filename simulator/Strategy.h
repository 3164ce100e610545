//===- simulator/Strategy.h - Configs and strategies ------------*- C++ -*-===//
//
// A ParallelConfig is FlexFlow's c_i for one op: how many parts each dim of
// the op's output 0 is cut into (Sample, Attribute and Parameter
// parallelism), how many parts its contraction dim is cut into (Reduction
// parallelism: partial sums added afterwards), and which device runs each
// partition. A Strategy is one config per op. Both are small values: devices
// are an arithmetic progression (first device, stride), not a per-partition
// array, so copying a strategy or proposing a new config allocates nothing
// for the usual ranks.
//
// Partitions are numbered row-major over the output dims with the reduction
// slice fastest: partition p has coordinates (c_0, ..., c_{r-1}, c_red), and
// runs on device FirstDevice + p * DeviceStride. Part c of a dim of extent E
// cut D ways is [c*E/D, (c+1)*E/D).
//
// These types live in the simulator (not in soap_search, as DESIGN.md's table
// has it) because the task graph is built from them and the simulator must
// not depend on the search; soap_search proposes them and reads and writes
// strategy files.
//
//===----------------------------------------------------------------------===//
#ifndef ONNX2SOAP_SIMULATOR_STRATEGY_H
#define ONNX2SOAP_SIMULATOR_STRATEGY_H

#include "ir/Graph.h"
#include "simulator/Machine.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/Error.h"
#include <string>
#include <vector>

namespace onnx2soap::simulator {

struct ParallelConfig {
  /// Parts per dim of output 0 (rank entries; all 1 = unsplit).
  llvm::SmallVector<uint32_t, 4> Degrees;
  /// Parts of the contraction dim (1 = no Reduction parallelism).
  uint32_t Reduction = 1;
  /// Partition p runs on FirstDevice + p * DeviceStride.
  DeviceId FirstDevice = 0;
  uint32_t DeviceStride = 1;

  /// One partition on Device.
  static ParallelConfig single(unsigned Rank, DeviceId Device);

  /// Product of the degrees and the reduction degree (of a config that
  /// checkConfig() accepted: at most the devices).
  unsigned numPartitions() const;
  DeviceId device(unsigned Partition) const {
    return FirstDevice + Partition * DeviceStride;
  }
  /// The partition's coordinate along output dim D.
  unsigned coordinate(unsigned Partition, unsigned Dim) const;
  /// The partition's reduction slice index.
  unsigned reductionIndex(unsigned Partition) const {
    return Partition % Reduction;
  }

  bool operator==(const ParallelConfig &Other) const {
    return Degrees == Other.Degrees && Reduction == Other.Reduction &&
           FirstDevice == Other.FirstDevice &&
           DeviceStride == Other.DeviceStride;
  }
  bool operator!=(const ParallelConfig &Other) const {
    return !(*this == Other);
  }
  /// "[4,1,1,1]x1 @0+1" (degrees, reduction, devices), for messages and
  /// traces.
  std::string str() const;
};

/// Part Index of [0, Extent) cut into Parts.
inline ir::Interval partInterval(int64_t Extent, unsigned Parts,
                                 unsigned Index) {
  return {Extent * Index / Parts, Extent * (Index + 1) / Parts};
}

/// One config per op of the graph it was made for, indexed by OpId.
struct Strategy {
  std::vector<ParallelConfig> Configs;

  const ParallelConfig &operator[](ir::OpId Op) const { return Configs[Op]; }
  ParallelConfig &operator[](ir::OpId Op) { return Configs[Op]; }
  bool operator==(const Strategy &Other) const {
    return Configs == Other.Configs;
  }
  /// The ops whose configs differ from Other's (of the same graph), in op
  /// order.
  std::vector<ir::OpId> opsChangedFrom(const Strategy &Other) const {
    std::vector<ir::OpId> Ops;
    for (ir::OpId Op = 0; Op < Configs.size(); ++Op)
      if (Configs[Op] != Other.Configs[Op])
        Ops.push_back(Op);
    return Ops;
  }
};

/// The region of output 0 that partition P computes.
ir::Region outputRegion(const ir::Graph &G, const ir::Op &O,
                        const ParallelConfig &C, unsigned P);
/// The slice of the contraction dim that partition P sums over (the whole
/// dim, or [0,0) when the op has none, for an unsplit reduction).
ir::Interval reductionSlice(const ir::Graph &G, const ir::Op &O,
                            const ParallelConfig &C, unsigned P);

/// Checks C against the op and the machine: one degree per output dim, each
/// between 1 and the dim's extent and only on splittable dims, a reduction
/// degree only where the op has a contraction dim, every partition on an
/// existing device and no two on the same one. The error says what is
/// wrong, without the op's name.
llvm::Error checkConfig(const ir::Graph &G, const ir::Op &O,
                        const ParallelConfig &C, unsigned NumDevices);

/// checkConfig for every op; the error names the op.
llvm::Error checkStrategy(const ir::Graph &G, const Strategy &S,
                          unsigned NumDevices);

} // namespace onnx2soap::simulator

#endif
