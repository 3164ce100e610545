//===- soap_search/Mcmc.h - Metropolis-Hastings over strategies -*- C++ -*-===//
//
// FlexFlow's execution optimizer (§6): Markov chains over strategies, each
// step changing one random op to a random config, delta-simulating it and
// accepting by the Metropolis-Hastings rule on the simulated cost. Chains
// start from data parallelism, the expert strategy, model parallelism and
// then random strategies; they run on threads, each with its own simulator
// and its own generator seeded from (seed, chain), so with a fixed number of
// iterations the result depends on the seed alone.
//
// Memory (after TensorOpt): a strategy whose fullest device exceeds the
// limit never becomes the answer while one that fits has been seen; its cost
// grows with the overflow, which steers chains towards strategies that fit.
// The frontier objective runs chains that trade time against memory with
// different weights and keeps every time/peak-memory pair no other beats.
//
//===----------------------------------------------------------------------===//
#ifndef ONNX2SOAP_SOAP_SEARCH_MCMC_H
#define ONNX2SOAP_SOAP_SEARCH_MCMC_H

#include "simulator/Simulator.h"
#include "soap_search/ConfigSpace.h"
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace onnx2soap::soap_search {

enum class Objective : uint8_t {
  Time,     ///< fastest strategy that fits
  Memory,   ///< smallest peak memory (then fastest)
  Frontier, ///< the time / peak-memory Pareto set
};

struct SearchProgress {
  uint64_t Iterations = 0;
  double BestTime = 0;
  double Seconds = 0;
};

struct SearchOptions {
  /// Wall-clock budget; ignored when Iterations is set.
  double BudgetSeconds = 30;
  /// Steps per chain; when non-zero the result depends only on Seed.
  uint64_t Iterations = 0;
  uint64_t Seed = 0;
  unsigned Chains = 4;
  unsigned Threads = 0; ///< 0: one per hardware thread
  /// Threads beside the chains' that help refine OptCNN's minima (they
  /// cost its edges, try a walk's changes beside the walking thread, walk
  /// far minima and relink paths), where Threads is 2 or more; each holds
  /// a simulator of its own. For cores the chains leave idle: on cores
  /// the search's threads already take they slow it (docs/planner.md).
  /// The answer does not depend on them.
  unsigned RefineHelpers = 0;
  /// Bytes per device; 0: each device's capacity.
  double MemoryLimit = 0;
  Objective Goal = Objective::Time;
  /// Simulate every proposal from scratch (paper Algorithm 1) instead of by
  /// delta simulation: the same chain, slower; for the benchmark of the two.
  bool FullSimulation = false;
  /// Inverse temperature on the relative cost change.
  double Beta = 50;
  /// The configs proposals and random starts draw from. When it restricts
  /// anything, chains start from the built-ins with configs outside it
  /// replaced by their op's first config (the built-ins themselves are still
  /// simulated and can be the answer).
  ConfigSpaceOptions Space;
  /// Called about four times a second from the searching thread.
  std::function<void(const SearchProgress &)> Progress;
  /// Gradient bucket sizes to choose from (SimOptions::GradientBucketBytes):
  /// the search first takes the one under which data parallelism is
  /// fastest, then searches with it (the search on half the devices
  /// chooses its own; each candidate says which it has), and last gives
  /// the answer the one it runs fastest with (except for
  /// Objective::Frontier). Empty: the SimOptions' own. A size that cuts
  /// the gradients into the same buckets as an earlier one is not
  /// simulated (distinctGradientBuckets).
  std::vector<double> GradientBuckets;
  /// The refinements of OptCNN's minima: a walk goes this many tries (its
  /// probe) and goes on at once only if it leads the walks started before
  /// it; the paused walks go on later, the one ahead first (the first
  /// minimum's walk, with a thread of its own, goes on without pause). The
  /// walks and the answer are the same whatever it is; it changes only when
  /// each step is found (RefineTries: each walk to its end in turn).
  unsigned RefineProbe = 32;
};

/// The gradient bucket sizes `--gradient-bucket auto` chooses from: 0 (one
/// all-reduce per tensor) and 1, 4, 16 and 64 MiB.
std::vector<double> defaultGradientBuckets();

/// Sizes without those that cut the gradients into the same buckets as an
/// earlier one (AlexNet: 16 and 64 MiB, each of its large weights a bucket
/// of its own under both), which simulate every strategy alike: the
/// sizes search() chooses among.
std::vector<double> distinctGradientBuckets(const ir::TrainingGraph &T,
                                            const simulator::Machine &M,
                                            const simulator::CostModel &Cost,
                                            const simulator::SimOptions &Sim,
                                            llvm::ArrayRef<double> Sizes);

/// The most pairs of partitions the search lets AdditiveCost::minimize cost
/// for OptCNN's candidate, edges alike counted once (work the size of
/// AlexNet's on 64 GPUs, about 2.7e7: 0.3 s on a 2.x GHz core).
constexpr double EliminationWork = 3.2e7;
/// The search refines OptCNN's strategy by the changes of one op that the
/// sum ranks least costly (AdditiveCost::changesBySum), each simulated and
/// kept when faster, ranked again after each gain: at most RefineTries
/// tries for each of the sum's minima, ending after RefinePatience in a row
/// gain nothing (a walk may pause after SearchOptions::RefineProbe tries).
constexpr unsigned RefineTries = 768;
constexpr unsigned RefinePatience = 64;
/// The most simulations the relinking of a refinement's end towards data
/// parallelism may take, over all gradient bucket sizes offered (a path of
/// D ops costs 2 D a size; longer paths are not relinked). Sizes that cut
/// the gradients alike count, though only the first is relinked: the
/// longest path relinked stays what it was with every size relinked (76
/// ops with the five default sizes).
constexpr double RelinkWork = 768;
/// With two threads or more, the first chain thread helps refine, between
/// two steps of its chains, the minima that simulate this many times the
/// fastest minimum's time or more.
constexpr double FarFromTheFirst = 1.5;

struct Candidate;

/// Of Candidates, the gradient bucket size (SimOptions::GradientBucketBytes)
/// under which S is fastest, among those under which it fits MemoryLimit
/// bytes per device (0: each device's capacity) if any does (a bucket is
/// packed into the message buffer); ties (within a relative 1e-9): the
/// first. The sizes are simulated on up to Threads threads at once, each
/// with a simulator of its own; Used, when given, receives them (a used
/// simulator simulates from scratch in half a new one's time or less).
/// Fastest, when given, receives S as simulated with the size chosen.
double bestGradientBucket(
    const ir::TrainingGraph &T, const simulator::Machine &M,
    const simulator::CostModel &Cost, simulator::SimOptions Sim,
    const simulator::Strategy &S, llvm::ArrayRef<double> Candidates,
    double MemoryLimit = 0, unsigned Threads = 1,
    std::vector<std::unique_ptr<simulator::Simulator>> *Used = nullptr,
    Candidate *Fastest = nullptr);

/// One strategy with what the simulator says of it.
struct Candidate {
  simulator::Strategy S;
  double Time = 0;
  double PeakMemory = 0;
  bool Fits = false;
  /// Seconds from the start of the search until it was found.
  double FoundAt = 0;
  /// The gradient bucket size it was simulated with
  /// (SimOptions::GradientBucketBytes).
  double GradientBucketBytes = 0;
  /// What found it: a built-in ("data-parallel", "expert",
  /// "model-parallel"), "optcnn" (Elimination.h), "chain N from S" (S the
  /// chain's start: a built-in or "random"), or "first N devices: " and the
  /// source within the search on the first devices; " (gradient buckets
  /// resized)" follows when the end gave the answer another bucket size.
  std::string Source;
};

/// Whether A is a better answer than B for Goal: one that fits before one
/// that does not, then (Objective::Memory) the smaller peak memory, then the
/// shorter time.
bool better(Objective Goal, const Candidate &A, const Candidate &B);

/// C's strategy simulated on M with C's gradient bucket size, as a
/// candidate (found at 0 s) that fits if it fits MemoryLimit bytes per
/// device (0: each device's capacity). A strategy found for a cluster's
/// first devices is one for all of them.
Candidate evaluate(const ir::TrainingGraph &T, const simulator::Machine &M,
                   const simulator::CostModel &Cost, simulator::SimOptions Sim,
                   const Candidate &C, double MemoryLimit);

/// A step of the answer's progress: a better strategy than any before it.
struct Improvement {
  double Seconds = 0; ///< from the start of the search
  double Time = 0;
  double PeakMemory = 0;
  bool Fits = false;
  std::string Source; ///< as Candidate::Source
};

/// What the refinement of one of OptCNN's minima did (Objective::Time),
/// or the relinking of a refinement's end under one gradient bucket size.
struct Refinement {
  /// "optcnn" or "optcnn (minimum K of N)"; relinked: the refinement's,
  /// then ", refined, relinked with 4 MiB buckets" (or "with one all-reduce
  /// per tensor").
  std::string Source;
  /// Its time with its gradient buckets sized, after its probe
  /// (SearchOptions::RefineProbe tries; the first minimum's walk, on a
  /// thread of its own, does not probe: its end), and at the end.
  /// Relinked: the refinement's end with that bucket size, at the fastest
  /// point of the path, and at the end (walked on from there when faster
  /// than the refinement's end).
  double Start = 0, Probed = 0, Time = 0;
  /// Relinked: with the path's simulations.
  uint64_t Tries = 0;
  /// Of Tries, those the helping threads made (the first chain thread and
  /// SearchOptions::RefineHelpers), helping the thread that walked (the walk
  /// and its outcome are the same without help; how many depends on the
  /// threads' timing).
  uint64_t HelpedTries = 0;
  /// When it started (relinked: its path) and ended, in seconds from the
  /// start of the search.
  double StartedAt = 0, EndedAt = 0;
};

struct SearchResult {
  Candidate Best;
  /// Objective::Frontier: the Pareto set, by increasing peak memory.
  std::vector<Candidate> Frontier;
  Candidate DataParallel, Expert, ModelParallel;
  /// The best the chains found, built-in strategies aside (projected into
  /// a restricted space, the built-ins may lie outside it).
  Candidate ChainBest;
  /// The chains that ran: all of them with Iterations; with a budget, the
  /// first wave and each chain of a later wave that started before the
  /// chains' part of the budget was spent.
  unsigned ChainsRun = 0;
  uint64_t Iterations = 0;
  double Seconds = 0;
  /// When the answer was first seen, counted from the start: how long the
  /// search took to converge (FlexFlow's rule stops a search once it has
  /// gone half its running time without improving, at twice this).
  double BestFoundSeconds = 0;
  /// Every improvement of the best answer so far, built-ins and all chains
  /// together, in time order; the last is Best. Seconds depend on the
  /// machine, the strategies only on the seed (with --iterations).
  std::vector<Improvement> Progression;
  /// One per minimum of OptCNN's sum, the fastest simulated first, each
  /// followed by one per gradient bucket size its end was relinked under.
  std::vector<Refinement> Refinements;
};

SearchResult search(const ir::TrainingGraph &T, const simulator::Machine &M,
                    const simulator::CostModel &Cost, simulator::SimOptions Sim,
                    const SearchOptions &Options);

} // namespace onnx2soap::soap_search

#endif
