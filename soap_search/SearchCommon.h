//===- soap_search/SearchCommon.h - What search's parts share --*- C++ -*-===//
//
// Internal to soap_search: what the Markov chains (Chain.h) and the
// refinement of OptCNN's minima (MinimaRefiner.h) both use: the cost a step
// is judged by, a strategy turned into a candidate answer, one proposal
// simulated, the ops around each op, and the choice of a gradient bucket
// size for one strategy. Other folders use Mcmc.h.
//
//===----------------------------------------------------------------------===//
#ifndef ONNX2SOAP_SOAP_SEARCH_SEARCHCOMMON_H
#define ONNX2SOAP_SOAP_SEARCH_SEARCHCOMMON_H

#include "soap_search/Mcmc.h"
#include <atomic>
#include <chrono>
#include <limits>
#include <mutex>

namespace onnx2soap::soap_search {

using Clock = std::chrono::steady_clock;

/// What a chain minimizes, and how two candidates compare for the answer.
struct CostFunction {
  Objective Goal;
  double Limit;      ///< bytes per device, 0 for each device's capacity
  double LimitScale; ///< bytes that make the overflow penalty double
  double TimeScale;  ///< the data-parallel time, to mix time and memory
  double MemoryScale;
  double Lambda = 0; ///< frontier chains: weight of memory against time

  double operator()(const simulator::Simulator &Sim, double Time) const {
    double Over = Sim.memoryOverflow(Limit);
    double Penalty = Over > 0 ? 1 + 4 * Over / LimitScale : 1;
    double Peak = Sim.peakMemory();
    switch (Goal) {
    case Objective::Time:
      return Time * Penalty;
    case Objective::Memory:
      return Peak * (1 + 1e-3 * Time / TimeScale);
    case Objective::Frontier:
      return Time * Penalty + Lambda * TimeScale * Peak / MemoryScale;
    }
    llvm_unreachable("unknown Objective");
  }
};

/// The time above which a step whose cost must not exceed Cost is sure to
/// be rejected (delta simulation may then give up on it): under the time
/// objective a cost is at least the time; under the others, none.
inline double giveUpAbove(const CostFunction &F, double Cost) {
  return F.Goal == Objective::Time ? Cost
                                   : std::numeric_limits<double>::infinity();
}

inline double secondsSince(Clock::time_point Begin) {
  return std::chrono::duration<double>(Clock::now() - Begin).count();
}

/// The strategy Sim holds, found by Source FoundAt seconds into the search.
Candidate candidate(const simulator::Simulator &Sim, double Limit,
                    std::string Source = {}, double FoundAt = 0);

inline Improvement improvement(const Candidate &C) {
  return {C.FoundAt, C.Time, C.PeakMemory, C.Fits, C.Source};
}

/// What every thread of a search reports to the progress line.
struct SharedProgress {
  std::atomic<uint64_t> Iterations{0};
  std::mutex Lock;
  double BestTime = 0;
  void improved(double Time) {
    std::lock_guard<std::mutex> Guard(Lock);
    if (BestTime == 0 || Time < BestTime)
      BestTime = Time;
  }
};

/// Ops[I] takes Configs[I]: by delta simulation, or by simulating the
/// changed strategy from scratch; either may give up above GiveUpAbove
/// (Simulator::changeUnless, Simulator::simulate).
double propose(simulator::Simulator &Sim, llvm::ArrayRef<ir::OpId> Ops,
               llvm::ArrayRef<simulator::ParallelConfig> Configs, bool Full,
               double GiveUpAbove = std::numeric_limits<double>::infinity());

/// Per op: the ops it exchanges activations with (producers of its inputs,
/// consumers of its outputs), weight-only ops left out.
std::vector<std::vector<ir::OpId>>
neighbours(const ir::Graph &G, const std::vector<bool> &WeightOnly);

/// The index of the fastest of the simulated times of some bucket sizes,
/// among those under which the strategy fits if any does (the bucket is
/// packed into the message buffer, so a larger one can make it not fit).
/// Only a real gain counts: sizes that make no difference (one device, no
/// all-reduce) differ by rounding alone, and the first of them stays.
size_t fastestOf(llvm::ArrayRef<double> Times, llvm::ArrayRef<char> Fits);

/// Of Candidates, the gradient bucket size under which S is fastest, among
/// those under which it fits MemoryLimit if any does; ties (within a
/// relative 1e-9): the first. Sim is left holding S simulated with it. When
/// Simulated, Sim holds S simulated already with the size it has, which is
/// not simulated again.
struct BucketChoice {
  double Bytes = 0;
  unsigned Simulations = 0;
};
BucketChoice fastestBucket(simulator::Simulator &Sim,
                           const simulator::Strategy &S,
                           llvm::ArrayRef<double> Candidates,
                           double MemoryLimit, bool Simulated = false);

} // namespace onnx2soap::soap_search

#endif
