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
// ConfigSpaceOptions narrows the space, for exhaustive search (Exhaustive.h)
// and for an MCMC search that must explore the same space to be compared
// with it.
//
//===----------------------------------------------------------------------===//
#ifndef ONNX2SOAP_SOAP_SEARCH_CONFIGSPACE_H
#define ONNX2SOAP_SOAP_SEARCH_CONFIGSPACE_H

#include "ir/BatchDims.h"
#include "ir/OpKind.h"
#include "simulator/Strategy.h"
#include "soap_search/Random.h"
#include <functional>
#include <vector>

namespace onnx2soap::soap_search {

/// Restrictions of the space; the defaults restrict nothing.
struct ConfigSpaceOptions {
  /// Split only Sample and Parameter dims: no Attribute dims, no Reduction.
  bool SampleAndParameterOnly = false;
  /// Degrees are 1 or the device count (one partition or one per device).
  bool AllOrNothing = false;
  /// Contiguous placements only (no evenly spread ones).
  bool ContiguousOnly = false;
  /// Ops that do no arithmetic (Reshape, Transpose, Gather, Concat, ...:
  /// no forward FLOPs) have one config: their Sample dims split as far as
  /// they go on devices 0, 1, ... (as in data parallelism), or whole on
  /// device 0.
  bool FixDataMovement = false;
  /// An unsplit op goes only on devices 0 .. WholeOpDevices - 1 (0: any).
  unsigned WholeOpDevices = 0;
  /// Keeps only the degree choices (placement-free configs) it accepts;
  /// the unsplit shape always stays. `compile` and `search` pass what
  /// generated programs can run (codegen::checkRunnable). Unlike the
  /// options above, it does not confine the search to the enumerated
  /// placements: a strategy is in the space when Accept takes its shapes.
  std::function<bool(ir::OpId, const simulator::ParallelConfig &)> Accept;

  /// Whether the options above confine the search to a subspace (the
  /// optimality tests' small spaces), into which outside strategies are
  /// projected.
  bool restricts() const {
    return SampleAndParameterOnly || AllOrNothing || ContiguousOnly ||
           FixDataMovement || WholeOpDevices;
  }
};

/// Whether Shape splits one of the op's Attribute dims (Dims: its
/// parallelDims), such as an image's height or a sequence's steps.
bool splitsAttribute(const ir::ParallelDims &Dims,
                     const simulator::ParallelConfig &Shape);

class ConfigSpace {
public:
  ConfigSpace(const ir::Graph &G, unsigned NumDevices,
              ConfigSpaceOptions Options = {});

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
  /// Op unsplit on a uniformly chosen device (operator placement).
  simulator::ParallelConfig randomWhole(ir::OpId Op, Rng &R) const;
  /// Every config of Op, shapes in order, then placements.
  std::vector<simulator::ParallelConfig> all(ir::OpId Op) const;
  /// Number of configs of Op.
  uint64_t size(ir::OpId Op) const;
  /// Whether C is one of Op's configs.
  bool contains(ir::OpId Op, const simulator::ParallelConfig &C) const;
  /// S with every config that is not in the space replaced by its op's
  /// first config.
  simulator::Strategy project(simulator::Strategy S) const;
  /// S as a start in this space: projected when the options restrict it,
  /// else with each config whose shape Accept refuses replaced by the op
  /// unsplit on that config's first device (other placements, enumerated
  /// or not, stay: a built-in strategy's layer groups, say).
  simulator::Strategy admit(simulator::Strategy S) const;

  unsigned numDevices() const { return NumDevices; }

private:
  void fixToSampleSplit(ir::OpId Op, const ir::ParallelDims &Dims);

  unsigned NumDevices;
  ConfigSpaceOptions Options;
  std::vector<std::vector<simulator::ParallelConfig>> Shapes;
  /// Per op: its one shape has the one placement 0 (FixDataMovement).
  std::vector<bool> Fixed;
};

} // namespace onnx2soap::soap_search

#endif
