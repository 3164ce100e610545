//===- soap_search/MinimaRefiner.h - OptCNN's minima, refined --*- C++ -*-===//
//
// Internal to soap_search (search() in Mcmc.cpp runs it): OptCNN's strategy
// (Elimination.h), where costing the graph's edges takes at most
// EliminationWork pairs of partitions (0.05 s or so), then refined by the
// simulator: a candidate answer. On 2-8 GPUs it is often as good as the
// chains' answer or better (RNNTC on 4 P100s 33.8 ms, the chains 36.1),
// found in milliseconds; on more the sum misjudges what overlaps, less so
// once refined (AlexNet on 16 K80s: 33.6 ms refined, 39.8 not, the chains'
// 34.1 after 5 s). Not a chain's start: the data-parallel chain's
// heavy-layer splits from it end worse than from data parallelism (AlexNet
// on 16 K80s 41.2 ms against 39.5).
//
// The sum's minima (one per charge of shared weights and weight of the
// gradient all-reduces, optcnnMinima) need no simulator: on two threads or
// more they are sought on a thread of their own from the search's start,
// beside the simulations of the bucket sizes and the built-ins, which take
// the other threads. They are simulated once the bucket size is known; the
// fastest is the candidate "optcnn". Then each is refined by a walk, the
// fastest first: one that simulates slower may refine to a faster strategy
// (AlexNet on 32 K80s: the minimum with the all-reduces free simulates 77.4
// ms and refines to 20.3, the fastest 26.4 and 23.1; on 16 P100s 29.8 ->
// 14.0 against 18.1 -> 15.1), and each walk's end is relinked towards data
// parallelism under each gradient bucket size. The thread that found the
// minima refines them before its chains (the other threads start theirs:
// on RNNs, whose refinements take seconds, the chains find the answers);
// the first chain thread helps between two of its steps, with the
// relinkings and, outside unrolled RNNs, the walks of far minima and each
// walk the other thread takes (trying its changes beside it); so do the
// threads beside the chains (SearchOptions::RefineHelpers), from the
// start, where they also cost OptCNN's edges and walk far minima in
// unrolled RNNs too. Each refinement is
// determined by its minimum alone, each relinking by its walk's end, and
// the best of them (ties to the earlier minimum) is the candidate, so the
// result does not depend on the thread timing.
//
//===----------------------------------------------------------------------===//
#ifndef ONNX2SOAP_SOAP_SEARCH_MINIMAREFINER_H
#define ONNX2SOAP_SOAP_SEARCH_MINIMAREFINER_H

#include "soap_search/Elimination.h"
#include "soap_search/SearchCommon.h"
#include <condition_variable>
#include <future>
#include <memory>
#include <optional>

namespace onnx2soap::soap_search {

class MinimaRefiner {
public:
  /// F is read as the search's threads go (its scales are set once data
  /// parallelism is simulated; they play no part in the time objective,
  /// the only one refined). Unsized: the options before the gradient
  /// bucket size is chosen (the sum's own). With a budget, the walks stop
  /// when ChainBudget seconds from Begin are spent. SizesOffered: how many
  /// gradient bucket sizes the search was offered, those that cut the
  /// gradients alike included (RelinkWork counts them all, so that the
  /// same paths are relinked as when each was).
  MinimaRefiner(const ir::TrainingGraph &T, const simulator::Machine &M,
                const simulator::CostModel &Cost,
                const simulator::SimOptions &Unsized,
                const SearchOptions &Options, const ConfigSpace &Space,
                const simulator::Strategy &DataParallel, const CostFunction &F,
                SharedProgress &Progress, Clock::time_point Begin,
                double ChainBudget, size_t SizesOffered);

  /// Seeks the sum's minima, then (once Bucket, the search's gradient
  /// bucket size, is known) simulates them with it: the fastest is the
  /// candidate. On the thread that refine() runs on, before it.
  void findMinima(std::shared_future<double> Bucket);
  /// Helps findMinima() cost OptCNN's edges, from another thread, when it
  /// is costing them (AdditiveCost::helpCostEdges()); returns at once
  /// otherwise.
  void helpFindMinima();
  /// The refinements (none under other objectives: the fastest minimum is
  /// the candidate), on the thread that found the minima; Helped: the first
  /// chain thread helps (helpIfWanted()).
  void refine(bool Helped);
  /// The first chain thread's help, between two steps of its chains (they
  /// wait: the help uses simulators of its own), once it is wanted.
  void helpIfWanted();
  /// The help of a thread beside the chains (SearchOptions::RefineHelpers)
  /// until the refinements end: as the first chain thread's, whenever
  /// wanted.
  /// Helper: the thread's number, from 1 (the first chain thread is 0).
  void helpUntilDone(unsigned Helper);
  /// A used simulator of the search's (its options but the gradient bucket
  /// size) for the refinements to take before building new ones: the
  /// minima's first simulation, the walks' starts, the relinked paths.
  void lend(std::unique_ptr<simulator::Simulator> Sim) {
    spare(std::move(Sim));
  }

  /// What the refinements found, once every thread is done.
  struct Outcome {
    /// The best of them (ties to the earlier minimum, each walk before
    /// its relinkings, which come before the next walk's), or the fastest
    /// minimum as simulated; none without minima.
    std::optional<Candidate> Best;
    /// Their improvements on the way (for the progression).
    std::vector<Improvement> Steps;
    /// Simulations they took.
    uint64_t Tries = 0;
  };
  /// Moves out what was found; appends each walk's summary, then those of
  /// its relinkings, to Refinements.
  Outcome collect(std::vector<Refinement> &Refinements);

private:
  /// Refinement K: its best (when better than minimum 0 simulated), its
  /// improvements on the way, what it did, its walk while it may go on (a
  /// walk may pause after its probe, helpRefine()) and where it ended.
  struct Walk {
    std::optional<Candidate> Best;
    std::vector<Improvement> Steps;
    Refinement Summary;
    std::unique_ptr<simulator::Simulator> Sim;
    double Current = 0;
    std::vector<std::vector<simulator::ParallelConfig>> Rejected;
    unsigned SinceGain = 0;
    simulator::Strategy End;
    double EndBucket = 0;
    /// Once it has ended, its simulator, holding End simulated with
    /// EndBucket, until its path under that size (a walk) or the walk on
    /// (a path) takes it, or it is let go (spare()).
    std::unique_ptr<simulator::Simulator> Kept;
    // Its relinking (runRelink): the path, the bucket sizes in order, End's
    // time under each (where each path starts), and how many of the paths
    // are not done yet (under WalksLock).
    std::vector<ir::OpId> Path;
    std::vector<double> Sizes;
    std::vector<double> SizeTimes;
    size_t RelinksLeft = 0;
  };
  /// Where each walk stands (refine(), helpRefine()).
  enum class Stage { Waiting, Started, Paused, Relinking, Ended };

  void found(Walk &W, const simulator::Simulator &Sim,
             const std::string &Source);
  void publish(size_t K);
  void startWalk(size_t K);
  void goOn(size_t K, uint64_t Until, bool Open = false);
  /// What one round of a walk came to: how many of its tries count (those
  /// before the first gain, and that one; Helped of them the helping
  /// thread's), and the first gain's index and cost (SIZE_MAX when none).
  struct RoundEnd {
    size_t Tried = 0;
    size_t Helped = 0;
    size_t Gain = SIZE_MAX;
    double Cost = 0;
  };
  RoundEnd runRound(Walk &W, const std::vector<AdditiveCost::Change> &Tries,
                    size_t Room, bool Open);
  void helpWalk(std::unique_lock<std::mutex> &Lock, unsigned Helper);
  bool tryChange(simulator::Simulator &Sim, const AdditiveCost::Change &C,
                 double Current, double &Cost);
  /// With a budget, whether the chains' share of it (ChainBudget) is spent.
  bool budgetSpent() const {
    return !Options.Iterations && secondsSince(Begin) > ChainBudget;
  }
  void probe(size_t K, uint64_t Until, bool Open = false);
  bool far(size_t K) const;
  bool startsFar(size_t K, unsigned Helper) const;
  size_t relinkEntry(size_t K, size_t I) const;
  bool planRelink(size_t K);
  void runRelink(size_t K, size_t I);
  void walkOn(size_t K, size_t I, bool Open = false);
  void endWalk(size_t K);
  void helpRefine(bool Owner, unsigned Helper = 0);
  size_t nextWalk(bool Owner, unsigned Helper, bool &Start) const;
  /// A simulator with gradient buckets of about Bytes, nothing simulated
  /// yet: one let go before (spare()), else a new one.
  std::unique_ptr<simulator::Simulator> simulator(double Bytes);
  /// For Next's simulation, a simulator that holds DataParallel simulated
  /// with gradient buckets of about Bytes, where Next is a change of it
  /// (Simulator::movesByChange()): a spare
  /// that holds it (the search lends those of the bucket sizes), one with
  /// that size first, else another taken to it (changeGradientBucket());
  /// else simulator()'s.
  std::unique_ptr<simulator::Simulator>
  holdingDataParallel(double Bytes, const simulator::Strategy &Next);
  /// Sim for the next simulator(): a used one simulates a strategy from
  /// scratch in a third of a new one's time, its arrays allocated
  /// (simulation_bench, AlexNet on 64 K80s: 8.2 ms against 24.6).
  void spare(std::unique_ptr<simulator::Simulator> Sim);

  const ir::TrainingGraph &T;
  const ir::Graph &G;
  const simulator::Machine &M;
  const simulator::CostModel &Cost;
  const simulator::SimOptions Unsized;
  /// For the minima: Unsized with the search's gradient bucket size.
  simulator::SimOptions Sized;
  const SearchOptions &Options;
  const ConfigSpace &Space;
  const simulator::Strategy &DataParallel;
  const CostFunction &F;
  SharedProgress &Progress;
  const Clock::time_point Begin;
  const double ChainBudget;

  std::optional<AdditiveCost> Additive;
  /// Additive once there, for helpFindMinima().
  std::atomic<AdditiveCost *> Costing{nullptr};
  /// Set once findMinima() has found and simulated the minima.
  std::atomic<bool> MinimaKnown{false};
  std::vector<simulator::Strategy> Minima; // fastest first
  std::vector<double> MinimaTimes; // as simulated with data parallelism's
                                   // gradient buckets
  /// The fastest minimum as simulated, then the best refinement; the
  /// improvements on the way.
  std::optional<Candidate> ByElimination;
  std::vector<Improvement> ByEliminationSteps;
  /// The walks of the minima, then the relinkings of each walk's end, one
  /// per gradient bucket size (runRelink()): all there from the start, so
  /// that no thread's walk moves while another's is added.
  std::vector<Walk> Walks;
  const size_t Relinkings;
  const size_t SizesOffered;
  /// The simulator that simulated the minima (it holds the first found),
  /// for the fastest one's walk.
  std::unique_ptr<simulator::Simulator> Held;
  /// Per op, the ops it exchanges activations with (neighbours()).
  std::vector<std::vector<ir::OpId>> Near;
  /// Where relinking leads: data parallelism, in the search's space.
  const simulator::Strategy Toward;

  /// Simulators let go (spare()), under SparesLock.
  std::vector<std::unique_ptr<simulator::Simulator>> Spares;
  std::mutex SparesLock;

  std::mutex WalksLock;
  /// Notified when a walk the first chain thread started pauses or ends.
  std::condition_variable WalkChanged;
  /// The minima's walks', under WalksLock.
  std::vector<Stage> Stages;
  /// Each walk's Current once started (until then +inf), under WalksLock.
  std::vector<double> Leads;
  /// Relinking tasks (walk, index into its Sizes) not yet taken, under
  /// WalksLock.
  std::vector<std::pair<size_t, size_t>> Relinks;
  /// Set when there is work for the helping threads (far minima to walk,
  /// paths to relink, a walk open to their help), under WalksLock: the
  /// first chain thread then helps, between two of its steps, and the
  /// threads beside the chains wake (WalkChanged).
  std::atomic<bool> HelpWanted{false};
  void wantHelp() {
    HelpWanted.store(true, std::memory_order_release);
    WalkChanged.notify_all();
  }
  /// Set when refine() ends, under WalksLock: the threads beside the
  /// chains then end.
  bool Finished = false;
  /// Whether the helping threads help the walks of the thread that found
  /// the minima (goOn()'s Open), and the first chain thread walks far
  /// minima (startsFar()).
  bool HelpWalks = false;
  /// Whether the thread that found the minima is left the far minima too
  /// (unrolled RNNs, other threads but none beside the chains): it then
  /// starts them last, once every near minimum's walk has ended. On RNNLM
  /// with 16 K80s the answer is the third minimum's walk (150.7 ms, the
  /// first 135.3), which probing the three far ones (216-252 ms, 0.1 s
  /// each) in their turn had delayed from 0.69-0.95 s to 1.11-1.22.
  bool NearFirst = false;

  /// The round of a walk open to help (goOn()): the helping threads (the
  /// first chain thread with nothing else to do, the threads beside the
  /// chains) try the round's changes beside the thread that walks, each on
  /// a simulator of its own that holds the round's strategy (Mirrors),
  /// each thread taking the next change not yet taken.
  /// The round's outcome is the first gain in the ranking's order, as a
  /// walk on one thread finds it: tries past it are not counted. Under
  /// WalksLock, but for the changes, which only the walking thread writes,
  /// between rounds.
  struct OpenRound {
    /// Whether the walking thread takes help; rounds are numbered over
    /// all walks, from 1.
    bool Open = false;
    uint64_t Number = 0;
    /// Counts each round's start and each walk's end, for the helping
    /// threads to wait on without the lock.
    std::atomic<uint64_t> Changes{0};
    /// The round's strategy, gradient bucket size, cost to beat and
    /// changes to try, in order (the walking thread's, while the round
    /// lasts).
    simulator::Strategy At;
    double Bucket = 0;
    double Current = 0;
    const std::vector<AdditiveCost::Change> *Tries = nullptr;
    /// The next change to take; none at or after Stop is taken (how many
    /// the round may try, fewer once the budget is spent), nor after the
    /// first gain found (FirstGain), nor any once the round is over (Tries
    /// null).
    size_t Next = 0;
    size_t Stop = 0;
    size_t FirstGain = SIZE_MAX;
    /// Per change taken: how its try went (a gain's cost in Costs), and
    /// which thread tried it (0 the walking thread, else helper By - 1).
    enum class Outcome : char { Trying, Slower, Faster };
    std::vector<Outcome> Outcomes;
    std::vector<double> Costs;
    std::vector<unsigned> By;
    /// Whether a change is left to take.
    bool takeable() const { return Tries && Next < std::min(Stop, FirstGain); }
    /// Change I's try, with WalksLock held.
    void record(size_t I, bool Gain, double Cost, unsigned Thread) {
      Outcomes[I] = Gain ? Outcome::Faster : Outcome::Slower;
      Costs[I] = Cost;
      By[I] = Thread;
      if (Gain)
        FirstGain = std::min(FirstGain, I);
    }
    /// Per helping thread, its simulator, and whether it holds a change
    /// not undone (a gain of its own past the first, or the walking
    /// thread's given to it).
    struct Mirror {
      std::unique_ptr<simulator::Simulator> Sim;
      bool Changed = false;
    };
    std::vector<Mirror> Mirrors;
  };
  OpenRound Round;
};

} // namespace onnx2soap::soap_search

#endif
