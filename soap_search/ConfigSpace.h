//===- soap_search/ConfigSpace.h - The valid configs of each op -*- C++ -*-===//
//
// The part of the SOAP space the search explores for each op: a degree for
// every splittable dim of the output and for the contraction dim, each a
// divisor of both the device count and the dim's extent (so partitions are
// equal, as FlexFlow requires), with at most as many partitions as devices;
// and a placement aligned to the topology: a contiguous block of devices
// starting at a multiple of its size (partners in a node, or whole nodes),
// or, spread evenly, every (devices / partitions)-th device (one per node).
// A single partition may go on any device (operator placement).
//
//===----------------------------------------------------------------------===//
#ifndef ONNX2SOAP_SOAP_SEARCH_CONFIGSPACE_H
#define ONNX2SOAP_SOAP_SEARCH_CONFIGSPACE_H

#include "simulator/Strategy.h"
#include "soap_search/Random.h"
#include <vector>

namespace onnx2soap::soap_search {

class ConfigSpace {
public:
  ConfigSpace(const ir::Graph &G, unsigned NumDevices);

  /// The op's degree choices, each as a config on devices 0, 1, ...
  llvm::ArrayRef<simulator::ParallelConfig> shapes(ir::OpId Op) const {
    return Shapes[Op];
  }
  /// How many placements a config of Partitions partitions has.
  unsigned numPlacements(unsigned Partitions) const;
  /// Shape placed by placement Index (< numPlacements).
  simulator::ParallelConfig place(simulator::ParallelConfig Shape,
                                  unsigned Index) const;
  /// A random config of Op: a uniform shape, then a uniform placement.
  simulator::ParallelConfig random(ir::OpId Op, Rng &R) const;
  /// Every config of Op, shapes in order, then placements.
  std::vector<simulator::ParallelConfig> all(ir::OpId Op) const;
  /// Number of configs of Op.
  uint64_t size(ir::OpId Op) const;

  unsigned numDevices() const { return NumDevices; }

private:
  unsigned NumDevices;
  std::vector<std::vector<simulator::ParallelConfig>> Shapes;
};

} // namespace onnx2soap::soap_search

#endif
