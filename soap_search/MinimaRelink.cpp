//===- soap_search/MinimaRelink.cpp - Walks relinked ----------------------===//
//
// MinimaRefiner's path relinking: each walk's end relinked towards data
// parallelism under each gradient bucket size, and each path's fastest
// point walked on. See MinimaRefiner.h.
//
//===----------------------------------------------------------------------===//
#include "soap_search/MinimaRefiner.h"
#include "llvm/Support/FormatVariadic.h"
#include <cmath>
#include <limits>
#include <numeric>

namespace onnx2soap::soap_search {
using simulator::Simulator;

// When a walk ends, its end is relinked towards data parallelism under
// each gradient bucket size: path relinking (Glover's), where the path is
// the ops the two strategies place differently. Each op's move alone is
// simulated from the walk's end, and the ops then move in that order (the
// fastest alone first), each kept even when slower, until none is left.
// Each path's fastest strategy is walked on (goOn()) when faster than the
// walk's end. So a strategy and its bucket size are chosen together, where
// a walk steps under one size: on 64 K80s AlexNet's best refinement takes
// 15.30 ms with 16 MiB buckets and 17.71 with 4 MiB; with its last three
// convolutions data parallel and 4 MiB buckets, 14.15, which no one-op
// step under either size leads to (the chains' answer there is 15.07).
// Each size's path is a task (walk, size) of its own, queued as soon as
// the walk ends and taken before any walk goes on, by the refining
// threads (helpRefine()): the answer comes soon after the walk that leads
// to it ends, not after the last (ResNet-101 on 16 K80s: the first walk
// ends after 0.5 s, the last after 3.2). The paths that start fastest
// (the walk's end simulated under their size) go first, and the thread
// that ends a path walks it on at once (walkOn()). Each relinking is
// determined by its walk's end alone. A path of D ops costs 2 D
// simulations a size (the greedy path that ranks the moves again after
// each step, D (D + 1) / 2, found the same strategies on AlexNet and
// ResNet-101); there is no relinking where that, over all sizes, exceeds
// RelinkWork.
// The entry in Walks of walk K's path under its I-th size.
size_t MinimaRefiner::relinkEntry(size_t K, size_t I) const {
  return Minima.size() + K * Relinkings + I;
}

// Walk K's path and sizes (its own first); false when it is not relinked.
bool MinimaRefiner::planRelink(size_t K) {
  Walk &From = Walks[K];
  if (Options.Goal != Objective::Time || budgetSpent())
    return false;
  From.Path = From.End.opsChangedFrom(Toward);
  From.Sizes.assign(Options.GradientBuckets.begin(),
                    Options.GradientBuckets.end());
  if (From.Sizes.empty())
    From.Sizes.push_back(Sized.GradientBucketBytes);
  if (From.Path.empty() || 2.0 * From.Path.size() * SizesOffered > RelinkWork)
    return false;
  std::stable_partition(From.Sizes.begin(), From.Sizes.end(),
                        [&](double Bytes) { return Bytes == From.EndBucket; });
  // Where each path starts: the end under each size, delta simulated on
  // the walk's simulator, which then holds it under its own size again
  // for the first path. The paths are taken in this order (helpRefine()).
  From.SizeTimes.clear();
  for (double Bytes : From.Sizes)
    From.SizeTimes.push_back(!From.Kept || Bytes == From.EndBucket
                                 ? From.Summary.Time
                                 : From.Kept->changeGradientBucket(Bytes));
  if (From.Kept &&
      From.Kept->graph().options().GradientBucketBytes != From.EndBucket)
    From.Kept->changeGradientBucket(From.EndBucket);
  return true;
}

// Walk K's path under its I-th size; its fastest point is the entry's
// End (walked on by walkOn()).
void MinimaRefiner::runRelink(size_t K, size_t I) {
  if (budgetSpent())
    return;
  Walk &From = Walks[K];
  Walk &W = Walks[relinkEntry(K, I)];
  W.Summary.StartedAt = secondsSince(Begin);
  double Bytes = From.Sizes[I];
  double MiB = Bytes / (1 << 20);
  W.Summary.Source =
      From.Summary.Source + ", refined, relinked " +
      (Bytes == 0 ? std::string("with one all-reduce per tensor")
       : MiB == std::floor(MiB)
           ? llvm::formatv("with {0} MiB buckets", int64_t(MiB)).str()
           : llvm::formatv("with {0}-byte buckets", int64_t(Bytes)).str());
  // The path under the walk's own size (the first) starts from the
  // walk's simulator, which holds its end; the others from a simulation.
  std::unique_ptr<Simulator> Owned;
  if (I == 0 && From.Kept && Bytes == From.EndBucket) {
    Owned = std::move(From.Kept);
  } else {
    Owned = simulator(Bytes);
    Owned->simulate(From.End);
  }
  Simulator &Sim = *Owned;
  W.Summary.Start = Sim.time();
  double Fastest = W.Summary.Start;
  W.End = From.End;
  W.EndBucket = Bytes;
  const std::vector<ir::OpId> &Path = From.Path;
  std::vector<double> Alone(Path.size());
  for (size_t J = 0; J < Path.size(); ++J) {
    Alone[J] = propose(Sim, Path[J], Toward[Path[J]], Options.FullSimulation,
                       std::numeric_limits<double>::infinity());
    Sim.revert();
  }
  std::vector<size_t> Order(Path.size());
  std::iota(Order.begin(), Order.end(), 0);
  std::stable_sort(Order.begin(), Order.end(),
                   [&](size_t A, size_t B) { return Alone[A] < Alone[B]; });
  for (size_t J : Order) {
    Sim.change(Path[J], Toward[Path[J]]);
    if (Sim.time() < Fastest) {
      Fastest = Sim.time();
      W.End = Sim.strategy();
    }
  }
  uint64_t Simulations = 2 * Path.size();
  Progress.Iterations.fetch_add(Simulations, std::memory_order_relaxed);
  // Back to the fastest point: the path's last moves undone.
  Sim.moveTo(W.End);
  W.Current = F(Sim, Sim.time());
  W.Summary.Probed = W.Summary.Time = Sim.time();
  W.Summary.Tries = Simulations;
  W.Summary.EndedAt = secondsSince(Begin);
  found(W, Sim, W.Summary.Source);
  // For the walk on, should this path's point beat the walk's end.
  W.Kept = std::move(Owned);
}

// Walk K's path under its I-th size, once done: its fastest point goes on
// at once when faster than the walk's end, else its simulator is let go.
// Every path that gains goes on, not only the fastest, so that none waits
// for the others: on AlexNet with 64 K80s the path that leads to the
// answer (4 MiB buckets, the fourth) often ended last.
void MinimaRefiner::walkOn(size_t K, size_t I, bool Open) {
  size_t R = relinkEntry(K, I);
  Walk &W = Walks[R];
  if (W.Summary.Source.empty())
    return;
  if (!(W.Summary.Probed < Walks[K].Summary.Time)) {
    spare(std::move(W.Kept));
    return;
  }
  W.Sim = std::move(W.Kept);
  W.Rejected.assign(G.numOps(), {});
  uint64_t Simulations = W.Summary.Tries;
  W.Summary.Tries = 0;
  goOn(R, RefineTries, Open);
  W.Summary.Tries += Simulations;
}

// Walk K has ended: its relinkings are queued, else it is done.
void MinimaRefiner::endWalk(size_t K) {
  bool Relinked = planRelink(K);
  if (!Relinked && Walks[K].Kept)
    spare(std::move(Walks[K].Kept));
  std::lock_guard<std::mutex> Guard(WalksLock);
  if (Relinked) {
    Walks[K].RelinksLeft = Walks[K].Sizes.size();
    for (size_t I = 0; I < Walks[K].Sizes.size(); ++I)
      Relinks.push_back({K, I});
    wantHelp();
  }
  Stages[K] = Relinked ? Stage::Relinking : Stage::Ended;
  WalkChanged.notify_all();
}

} // namespace onnx2soap::soap_search
