//===- soap_search/Exhaustive.h - Globally best strategy by DFS -*- C++ -*-===//
//
// The check of FlexFlow §8.3: the best strategy of a small model over every
// combination of its ops' configs, found by depth-first search with A*-style
// pruning, to compare with what MCMC finds. Ops are assigned in topological
// order, one config change (one delta simulation) per tree edge, so each
// leaf costs one delta simulation; a child's first config is the one its op
// already has, which costs none. A subtree is cut when a lower bound of
// every strategy in it is no better than the best time found so far. The
// bound counts only tasks whose durations depend on one op's config alone
// (transfers depend on two ops, and shared weights' gradient sync on all
// their readers, so they are left out, which keeps it sound):
//  - the busiest device's compute (forward, backward, updates of tensors
//    only that op reads) of the assigned ops, and the average per device of
//    that plus the least compute each unassigned op can have (a device runs
//    one task at a time from time 0);
//  - the longest chain of forward tasks through ops joined by a data edge
//    (every partition of a consumer reads a non-empty region of its
//    producer, so some partition of the producer precedes it), ending in
//    the last op's backward, then the all-reduce and update of a tensor only
//    it reads; an unassigned op counts its shortest such chain.
// Each leaf checks its bound against its simulated time (BoundViolations).
// Without pruning (Prune = false) it is plain enumeration of the product.
//
//===----------------------------------------------------------------------===//
#ifndef ONNX2SOAP_SOAP_SEARCH_EXHAUSTIVE_H
#define ONNX2SOAP_SOAP_SEARCH_EXHAUSTIVE_H

#include "simulator/Simulator.h"
#include "soap_search/ConfigSpace.h"

namespace onnx2soap::soap_search {

struct ExhaustiveLimits {
  /// Stop after this many leaves (strategies simulated); 0: no limit.
  uint64_t MaxLeaves = 0;
  /// Cut subtrees by the lower bound (else enumerate everything).
  bool Prune = true;
};

struct ExhaustiveResult {
  /// The fastest strategy that fits in memory (ties: the first in search
  /// order), and its iteration time; Time is infinite when none fits.
  simulator::Strategy Best;
  double Time = 0;
  /// Ops searched (not weight-only), and the product of their config
  /// counts (a double: it overflows 64 bits on larger models).
  unsigned Ops = 0;
  double SpaceSize = 0;
  /// Complete strategies simulated, delta simulations run, and subtrees
  /// cut by the bound.
  uint64_t Leaves = 0;
  uint64_t Simulations = 0;
  uint64_t Pruned = 0;
  /// Leaves whose time was below their own bound: 0 unless the bound is
  /// unsound (checked at every leaf, as a test's safety net).
  uint64_t BoundViolations = 0;
  /// False when MaxLeaves stopped the search before it was done.
  bool Complete = true;
  double Seconds = 0;
};

/// The globally best strategy over Space (see the file comment); the
/// search starts from every op's first config (whole, on device 0).
ExhaustiveResult
exhaustiveSearch(const ir::TrainingGraph &T, const simulator::Machine &M,
                 const simulator::CostModel &Cost, simulator::SimOptions Sim,
                 const ConfigSpace &Space, ExhaustiveLimits Limits = {});

} // namespace onnx2soap::soap_search

#endif
