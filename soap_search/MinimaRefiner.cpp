//===- soap_search/MinimaRefiner.cpp - OptCNN's minima, refined -----------===//
//
// See MinimaRefiner.h.
//
//===----------------------------------------------------------------------===//
#include "soap_search/MinimaRefiner.h"
#include "simulator/TaskGraph.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/Support/FormatVariadic.h"
#include <chrono>
#include <cmath>
#include <numeric>
#include <thread>
#include <utility>

namespace onnx2soap::soap_search {
using simulator::ParallelConfig;
using simulator::Simulator;
using simulator::Strategy;

MinimaRefiner::MinimaRefiner(
    const ir::TrainingGraph &T, const simulator::Machine &M,
    const simulator::CostModel &Cost, const simulator::SimOptions &Unsized,
    const SearchOptions &Options, const ConfigSpace &Space,
    const Strategy &DataParallel, const CostFunction &F,
    SharedProgress &Progress, Clock::time_point Begin, double ChainBudget,
    size_t SizesOffered)
    : T(T), G(T.G), M(M), Cost(Cost), Unsized(Unsized), Sized(Unsized),
      Options(Options), Space(Space), DataParallel(DataParallel), F(F),
      Progress(Progress), Begin(Begin), ChainBudget(ChainBudget),
      Relinkings(std::max<size_t>(1, Options.GradientBuckets.size())),
      SizesOffered(std::max<size_t>(1, SizesOffered)),
      Toward(Space.admit(DataParallel)) {}

void MinimaRefiner::findMinima(std::shared_future<double> Bucket) {
  Additive.emplace(T, M, Cost, Unsized, Space);
  Costing.store(&*Additive, std::memory_order_release);
  std::vector<Strategy> Found =
      optcnnMinima(*Additive, DataParallel, EliminationWork);
  Sized.GradientBucketBytes = Bucket.get();
  if (!Found.empty()) {
    // Last to first, so that the simulator holds the first for the
    // fastest's refinement (startWalk()); each after the first as a change
    // of the one before (minima differ in a few ops). A simulator the search
    // lent (lend()) if there is one.
    Held = simulator(Sized.GradientBucketBytes);
    std::vector<Candidate> Simulated(Found.size());
    for (size_t K = Found.size(); K-- > 0;) {
      Held->moveTo(Found[K]);
      Simulated[K] = candidate(*Held, Options.MemoryLimit, "optcnn");
    }
    std::vector<size_t> Order(Found.size());
    std::iota(Order.begin(), Order.end(), 0);
    std::stable_sort(Order.begin(), Order.end(), [&](size_t A, size_t B) {
      return better(Options.Goal, Simulated[A], Simulated[B]);
    });
    for (size_t K : Order) {
      Minima.push_back(std::move(Found[K]));
      MinimaTimes.push_back(Simulated[K].Time);
    }
    Simulated[Order[0]].FoundAt = secondsSince(Begin);
    ByElimination = Simulated[Order[0]];
    ByEliminationSteps.push_back(improvement(*ByElimination));
    Progress.improved(ByElimination->Time);
  }
  Walks.resize(Minima.size() * (1 + Relinkings));
  MinimaKnown.store(true, std::memory_order_release);
}

void MinimaRefiner::helpFindMinima() {
  if (AdditiveCost *Sum = Costing.load(std::memory_order_acquire))
    Sum->helpCostEdges();
}

// Sim's strategy as W's best, when better than the one before (at first,
// minimum 0 as simulated).
void MinimaRefiner::found(Walk &W, const Simulator &Sim,
                          const std::string &Source) {
  Candidate Now =
      candidate(Sim, Options.MemoryLimit, Source, secondsSince(Begin));
  if (!better(Options.Goal, Now, W.Best ? *W.Best : *ByElimination))
    return;
  W.Best = std::move(Now);
  W.Steps.push_back(improvement(*W.Best));
  Progress.improved(W.Best->Time);
}

void MinimaRefiner::publish(size_t K) {
  std::lock_guard<std::mutex> Guard(WalksLock);
  Leads[K] = Walks[K].Current;
}

// Walk K's start: minimum K simulated with the bucket size it runs
// fastest with, since it synchronizes other gradients among other
// replicas than data parallelism (AlexNet on 8 K80s: 61.6 ms with 1 MiB,
// 64.2 with data parallelism's 16). After the candidate with data
// parallelism's, which comes first (5 simulations sooner).
void MinimaRefiner::startWalk(size_t K) {
  Walk &W = Walks[K];
  W.Summary.StartedAt = secondsSince(Begin);
  W.Summary.Source = K == 0 ? std::string("optcnn")
                            : "optcnn (minimum " + std::to_string(K + 1) +
                                  " of " + std::to_string(Minima.size()) + ")";
  if (K == 0 && Held) {
    // The minima's simulator holds the first found; when another is the
    // fastest, a change of the ops they differ in takes it there, where
    // they are few (moveTo()), in a fraction of a simulation from scratch
    // (ResNet-101 on 4 K80s: 5 ops, 0.2 ms against 1.9; Inception-v3 on 8,
    // 38 ops, 2.3 ms against 6.8).
    W.Sim = std::move(Held);
    W.Sim->moveTo(Minima[0]);
  } else {
    W.Sim = simulator(Sized.GradientBucketBytes);
    W.Sim->simulate(Minima[K]);
  }
  if (Options.GradientBuckets.size() > 1) {
    fastestBucket(*W.Sim, Minima[K], Options.GradientBuckets,
                  Options.MemoryLimit, /*Simulated=*/true);
    found(W, *W.Sim, W.Summary.Source + " (gradient buckets resized)");
  }
  // F's time and memory scales (set once data parallelism is simulated)
  // play no part in the time objective.
  W.Current = F(*W.Sim, W.Sim->time());
  W.Rejected.assign(G.numOps(), {});
  W.Summary.Start = W.Sim->time();
  publish(K);
}

// Walk K, until its tries reach Until or it ends (then its simulator is
// let go): the changes of one op that the sum ranks least costly, each
// delta simulated and kept when faster. Near its minimum the sum ranks
// strategies nearly alike that the simulator, which sees overlap and
// contention, tells apart (AlexNet on 8 K80s: a dropout split 2 x 4 over
// samples and features adds 0.04 ms to the sum and saves 1.5 ms
// simulated). After each gain the changes are ranked again from the new
// strategy; a change tried and not kept is not tried again until its op
// or one it exchanges activations with has changed (AlexNet on 16 K80s:
// the last gain was the first change of the strategy before it, which a
// walk down the old ranking reached 64 tries later). A paused walk goes
// on as if it had not paused: the ranking from the same strategy is the
// same, and each change it tried was kept or is among the rejected. With
// a budget, the walks stop when the chains' share of it is spent.
// A round is the tries from one ranking to its first gain. Open: the
// thread that found the minima walks, and the helping threads (the first
// chain thread with nothing else to do, those of --refine-helpers) help
// with each round (runRound()), where the changes are tried several at a
// time: the walk, its tries and its ends are those of a walk on one
// thread. With the first chain thread's help the answer came after
// 0.81-0.85 s against 1.01-1.09 on Inception-v3 with 8 K80s, 0.44-0.48
// against 0.62-0.65 on 16, 2.06-2.17 against 2.44-2.49 on ResNet-101 with
// 32 (FlexFlow's model, 3 runs each).
void MinimaRefiner::goOn(size_t K, uint64_t Until, bool Open) {
  Walk &W = Walks[K];
  std::string Name = W.Summary.Source + ", refined";
  assert(W.Summary.Tries <= Until && "a walk past its pause");
  auto Stopping = [&] {
    return W.SinceGain == RefinePatience || W.Summary.Tries == RefineTries ||
           budgetSpent();
  };
  Open &= HelpWalks;
  if (Open) {
    std::lock_guard<std::mutex> Guard(WalksLock);
    Round.Open = true;
    wantHelp();
  }
  bool Ended = true;
  for (;;) {
    // The round's changes: the ranking's, but those tried since their op
    // or a neighbour last changed. At most Room are tried, so the
    // ranking's first Room + (changes rejected) + 1 hold them all, and
    // tell whether any is left past them.
    size_t Room = std::min<size_t>({RefinePatience - W.SinceGain,
                                    RefineTries - W.Summary.Tries,
                                    Until - W.Summary.Tries});
    size_t Rejected = 0;
    for (const std::vector<ParallelConfig> &Configs : W.Rejected)
      Rejected += Configs.size();
    std::vector<AdditiveCost::Change> Tries =
        Additive->changesBySum(W.Sim->strategy(), Room + Rejected + 1);
    llvm::erase_if(Tries, [&](const AdditiveCost::Change &C) {
      return W.Sim->strategy()[C.Op] == C.Config ||
             llvm::is_contained(W.Rejected[C.Op], C.Config);
    });
    Room = std::min(Room, Tries.size());
    if (Stopping())
      Room = 0;
    RoundEnd Done = runRound(W, Tries, Room, Open);
    for (size_t I = 0; I < Done.Tried; ++I)
      if (I != Done.Gain)
        W.Rejected[Tries[I].Op].push_back(Tries[I].Config);
    W.Summary.Tries += Done.Tried;
    W.Summary.HelpedTries += Done.Helped;
    W.SinceGain += Done.Tried;
    if (Done.Gain != SIZE_MAX) {
      ir::OpId Op = Tries[Done.Gain].Op;
      W.Current = Done.Cost;
      W.SinceGain = 0;
      publish(K);
      found(W, *W.Sim, Name);
      W.Rejected[Op].clear();
      for (ir::OpId Other : Near[Op])
        W.Rejected[Other].clear();
      continue;
    }
    // As a walk that tries one change after another ends: with every
    // change tried, at its patience, tries or budget, or paused.
    Ended =
        Done.Tried == Tries.size() || Stopping() || W.Summary.Tries != Until;
    break;
  }
  if (Open) {
    std::lock_guard<std::mutex> Guard(WalksLock);
    Round.Open = false;
    Round.Changes.fetch_add(1, std::memory_order_release);
  }
  W.Summary.Time = W.Sim->time();
  if (Ended) {
    W.Summary.EndedAt = secondsSince(Begin);
    W.End = W.Sim->strategy();
    W.EndBucket = W.Sim->graph().options().GradientBucketBytes;
    // A walk's for its path under its own size; a walk on's is done.
    if (K < Minima.size())
      W.Kept = std::move(W.Sim);
    else
      spare(std::move(W.Sim));
    W.Rejected = {};
  }
}

// One round of walk W: the first Room of Tries delta simulated in order
// until one is a gain, which W's simulator then holds. Open: the helping
// threads may try the later changes beside this thread (helpWalk()), the
// first gain in order wins all the same, and W's simulator is the one
// that holds it (it trades places with the simulator of the helping
// thread that found it).
MinimaRefiner::RoundEnd
MinimaRefiner::runRound(Walk &W, const std::vector<AdditiveCost::Change> &Tries,
                        size_t Room, bool Open) {
  RoundEnd End;
  if (!Open) {
    for (size_t I = 0; I < Room && !budgetSpent(); ++I) {
      End.Tried = I + 1;
      if (tryChange(*W.Sim, Tries[I], W.Current, End.Cost)) {
        End.Gain = I;
        break;
      }
    }
    return End;
  }
  std::unique_lock<std::mutex> Lock(WalksLock);
  ++Round.Number;
  Round.At = W.Sim->strategy();
  Round.Bucket = W.Sim->graph().options().GradientBucketBytes;
  Round.Current = W.Current;
  Round.Tries = &Tries;
  Round.Stop = Room;
  Round.Next = 0;
  Round.FirstGain = SIZE_MAX;
  Round.Outcomes.assign(Room, OpenRound::Outcome::Trying);
  Round.Costs.assign(Room, 0);
  Round.By.assign(Room, 0);
  Round.Changes.fetch_add(1, std::memory_order_release);
  size_t Mine = SIZE_MAX; // this thread's gain
  while (Round.takeable()) {
    if (budgetSpent()) {
      Round.Stop = Round.Next;
      break;
    }
    size_t I = Round.Next++;
    Lock.unlock();
    double Cost;
    bool Gain = tryChange(*W.Sim, Tries[I], W.Current, Cost);
    Lock.lock();
    Round.record(I, Gain, Cost, /*Thread=*/0);
    if (Gain) {
      Mine = I;
      break;
    }
  }
  // Every change before the first gain (or taken, without one) tried.
  for (;;) {
    size_t Upto = std::min(Round.Next, Round.FirstGain);
    if (std::none_of(Round.Outcomes.begin(), Round.Outcomes.begin() + Upto,
                     [](OpenRound::Outcome O) {
                       return O == OpenRound::Outcome::Trying;
                     }))
      break;
    Lock.unlock();
    std::this_thread::yield();
    Lock.lock();
  }
  if (Round.FirstGain != SIZE_MAX) {
    End.Gain = Round.FirstGain;
    End.Tried = End.Gain + 1;
    End.Cost = Round.Costs[End.Gain];
    if (End.Gain != Mine) {
      // The simulator of the helping thread that tried it holds the gain
      // (and that thread waits for the next round); this one, any gain of
      // its own past it.
      unsigned Helper = Round.By[End.Gain] - 1;
      std::swap(W.Sim, Round.Mirrors[Helper].Sim);
      Round.Mirrors[Helper].Changed = Mine != SIZE_MAX;
    }
  } else {
    End.Tried = Round.Next;
  }
  End.Helped =
      End.Tried - std::count(Round.By.begin(), Round.By.begin() + End.Tried, 0);
  // Closed: no thread takes a change of it (Tries is the caller's).
  Round.Tries = nullptr;
  return End;
}

// C delta simulated on Sim (its cost in Cost): kept when it costs less
// than Current, else undone.
bool MinimaRefiner::tryChange(Simulator &Sim, const AdditiveCost::Change &C,
                              double Current, double &Cost) {
  Progress.Iterations.fetch_add(1, std::memory_order_relaxed);
  Cost = F(Sim, propose(Sim, C.Op, C.Config, Options.FullSimulation,
                        giveUpAbove(F, Current)));
  if (Cost < Current)
    return true;
  Sim.revert();
  return false;
}

// Walk K from its start until its tries reach Until: its probe.
void MinimaRefiner::probe(size_t K, uint64_t Until, bool Open) {
  startWalk(K);
  goOn(K, Until, Open);
  Walks[K].Summary.Probed = Walks[K].Summary.Time;
}

// Whether minimum K is far from the first (FarFromTheFirst).
bool MinimaRefiner::far(size_t K) const {
  return MinimaTimes[K] >= FarFromTheFirst * MinimaTimes[0];
}

// Whether helping thread Helper starts far minimum K's walk: a thread
// beside the chains does; the first chain thread (Helper 0) not in
// unrolled RNNs (HelpWalks false), whose chains find the answers and
// whose far minima's walks none: each probe held that thread away from
// its chains for about 0.1 s, and NMT's answer on 32 K80s, chain 0's,
// came after 0.81-0.88 s in half the runs, 0.36-0.40 in the others; left
// to the thread that found the minima (NearFirst), 0.40-0.49 in each.
bool MinimaRefiner::startsFar(size_t K, unsigned Helper) const {
  return far(K) && (Helper > 0 || HelpWalks);
}

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
  for (const ir::Op &O : G.ops())
    if (!(From.End[O.Id] == Toward[O.Id]))
      From.Path.push_back(O.Id);
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

// The refinements (none under other objectives: the fastest minimum is
// the candidate). Which minimum refines best varies (the fourth of four
// for AlexNet on 32 K80s, the third on 64, the first for ResNet-101), and
// a walk makes its large gains early. So the thread that found the minima
// walks the first (the fastest simulated) without pause when another
// thread helps (below), else for its probe (Options.RefineProbe tries),
// and then helps itself. Helping, a thread starts the others from the
// last (the slowest simulated); a walk that leads all others started
// after its probe goes on at once, one that does not pauses. With none
// left to start, the thread that found the minima goes on with the
// paused walk ahead (ties to the earlier minimum), and so on. With two
// threads or more, the first chain thread helps between two steps of its
// chains, once the minima are known, but starts only the walks of minima
// that simulate FarFromTheFirst times the first's time or more, outside
// unrolled RNNs (startsFar()): strategies unlike the first, whose walks
// the other thread would reach last, while the first's walk covers those
// near it. On AlexNet with 32 K80s it probes the fourth minimum (74.6 ms,
// the first 26.4; 21.7 ms after 32 tries, the first then at 24.9), which
// goes on to the answer while the first walks; on ResNet-101, whose
// minima lie within 1.25 times the first's, and on RNNs, it does not
// help, and its chains find those answers as soon as before (waiting for the
// minima and helping with every walk before its chains had delayed NMT's answer
// on 8 K80s from 0.16 to 0.67-0.98 s, RNNTC's on 16 from 0.27 to 1.2 s). Both
// threads take the paths of ended walks (relinking, above) before anything
// else, the first chain thread any walk's (Inception-v3 on 8 K80s: the answer
// after 1.5 s, where the thread that found the minima, relinking each
// walk it ended before walking the next, had found it after 2.0 s; most
// RNN walks' paths are too long to relink, so their chains are seldom
// held up).
// Each walk is determined by its minimum alone, and each path by its
// walk's end, so the threads change only when their steps are found.
void MinimaRefiner::helpRefine(bool Owner, unsigned Helper) {
  for (;;) {
    size_t K = Stages.size();
    bool Start = false;
    std::optional<std::pair<size_t, size_t>> Task;
    {
      std::unique_lock<std::mutex> Lock(WalksLock);
      if (!Relinks.empty()) {
        // The path that starts fastest (ties to the earlier minimum, then
        // size) first.
        auto First = std::min_element(
            Relinks.begin(), Relinks.end(), [&](auto A, auto B) {
              double TA = Walks[A.first].SizeTimes[A.second],
                     TB = Walks[B.first].SizeTimes[B.second];
              return TA != TB ? TA < TB : A < B;
            });
        Task = *First;
        Relinks.erase(First);
      } else {
        // Where the thread that found the minima is left the far ones
        // too (NearFirst), it starts them last, once every near walk
        // has ended.
        auto Starts = [&](size_t J) {
          return Owner ? !(NearFirst && far(J)) : startsFar(J, Helper);
        };
        for (size_t J = Stages.size(); J-- > 0;)
          if (Stages[J] == Stage::Waiting && Starts(J)) {
            K = J;
            Start = true;
            break;
          }
        if (!Start && Owner)
          for (size_t J = 0; J < Stages.size(); ++J)
            if (Stages[J] == Stage::Paused &&
                (K == Stages.size() || Leads[J] < Leads[K]))
              K = J;
        if (K == Stages.size() && Owner && NearFirst)
          for (size_t J = Stages.size(); J-- > 0;)
            if (Stages[J] == Stage::Waiting) {
              K = J;
              Start = true;
              break;
            }
        if (K == Stages.size()) {
          if (!Owner && Round.Open) {
            helpWalk(Lock, Helper);
            continue;
          }
          if (!Owner) {
            HelpWanted.store(false, std::memory_order_relaxed);
            return;
          }
          // The thread that found the minima ends only with every walk
          // and relinking: one the first chain thread is probing may
          // pause, and paths it relinks may leave a walk to go on.
          if (llvm::none_of(Stages, [](Stage S) {
                return S == Stage::Started || S == Stage::Relinking;
              }))
            return;
          WalkChanged.wait(Lock);
          continue;
        }
        Stages[K] = Stage::Started;
      }
    }
    if (Task) {
      runRelink(Task->first, Task->second);
      walkOn(Task->first, Task->second, Owner);
      bool Last;
      {
        std::lock_guard<std::mutex> Guard(WalksLock);
        Last = --Walks[Task->first].RelinksLeft == 0;
      }
      if (Last) {
        // The walk's simulator, should its own size's path not have taken
        // it.
        if (Walks[Task->first].Kept)
          spare(std::move(Walks[Task->first].Kept));
        std::lock_guard<std::mutex> Guard(WalksLock);
        Stages[Task->first] = Stage::Ended;
        WalkChanged.notify_all();
      }
      continue;
    }
    if (Start) {
      probe(K, Options.RefineProbe, Owner);
      if (!Walks[K].Sim) {
        endWalk(K);
        continue;
      }
      std::lock_guard<std::mutex> Guard(WalksLock);
      bool Leading = true;
      for (size_t J = 0; J < Stages.size(); ++J)
        Leading &= J == K || Stages[J] == Stage::Waiting || Leads[K] < Leads[J];
      if (!Leading) {
        Stages[K] = Stage::Paused;
        WalkChanged.notify_all();
        continue;
      }
    }
    goOn(K, RefineTries, Owner);
    endWalk(K);
  }
}

// A helping thread's help with the rounds of the walk open to it
// (runRound()), with WalksLock held (Lock), until the walk closes: its
// simulator (Round.Mirrors[Helper]) is brought to each round's strategy,
// and it tries the next change not yet taken, until the round has a gain
// or none is left.
void MinimaRefiner::helpWalk(std::unique_lock<std::mutex> &Lock,
                             unsigned Helper) {
  if (Round.Mirrors.size() <= Helper)
    Round.Mirrors.resize(Helper + 1);
  uint64_t Synced = 0; // the round whose strategy the mirror holds
  while (Round.Open) {
    if (Round.Tries && Synced != Round.Number) {
      uint64_t Number = Round.Number;
      Strategy At = Round.At;
      double Bytes = Round.Bucket;
      bool Undo = std::exchange(Round.Mirrors[Helper].Changed, false);
      Simulator *Sim = Round.Mirrors[Helper].Sim.get();
      Lock.unlock();
      std::unique_ptr<Simulator> New;
      if (!Sim) {
        New = simulator(Bytes);
        Sim = New.get();
      } else if (Sim->graph().options().GradientBucketBytes != Bytes) {
        Sim->setGradientBucket(Bytes);
      } else if (Undo) {
        Sim->revert();
      }
      Sim->moveTo(At);
      Lock.lock();
      if (New)
        Round.Mirrors[Helper].Sim = std::move(New);
      Synced = Number;
      continue;
    }
    if (!Round.takeable()) {
      // Nothing to take before the next round or the walk's end: waits
      // without the lock, which the walking thread takes for each try.
      uint64_t Seen = Round.Changes.load(std::memory_order_relaxed);
      Lock.unlock();
      while (Round.Changes.load(std::memory_order_acquire) == Seen)
        std::this_thread::yield();
      Lock.lock();
      continue;
    }
    size_t I = Round.Next++;
    AdditiveCost::Change C = (*Round.Tries)[I];
    double Current = Round.Current;
    Simulator &Sim = *Round.Mirrors[Helper].Sim;
    Lock.unlock();
    double Cost;
    bool Gain = tryChange(Sim, C, Current, Cost);
    Lock.lock();
    Round.Mirrors[Helper].Changed |= Gain;
    if (Round.Tries && Round.Number == Synced)
      Round.record(I, Gain, Cost, Helper + 1);
  }
}

std::unique_ptr<Simulator> MinimaRefiner::simulator(double Bytes) {
  std::unique_ptr<Simulator> Sim;
  {
    std::lock_guard<std::mutex> Guard(SparesLock);
    if (!Spares.empty()) {
      Sim = std::move(Spares.back());
      Spares.pop_back();
    }
  }
  if (!Sim) {
    simulator::SimOptions With = Sized;
    With.GradientBucketBytes = Bytes;
    return std::make_unique<Simulator>(T, M, Cost, With);
  }
  Sim->setGradientBucket(Bytes);
  return Sim;
}

void MinimaRefiner::spare(std::unique_ptr<Simulator> Sim) {
  std::lock_guard<std::mutex> Guard(SparesLock);
  Spares.push_back(std::move(Sim));
}

void MinimaRefiner::refine(bool Helped) {
  // However it ends, the helpers beside the chains end with it.
  auto Finish = llvm::make_scope_exit([&] {
    std::lock_guard<std::mutex> Guard(WalksLock);
    Finished = true;
    WalkChanged.notify_all();
  });
  if (Options.Goal != Objective::Time || Minima.empty())
    return;
  // Not in unrolled RNNs: their walks cannot move the cells (a shared
  // weight's readers move together), and the chains find most of their
  // answers, sooner without the first chain thread away helping (on 16
  // K80s NMT's answer came after 0.19-0.93 s against 0.18-0.42, RNNTC's
  // after 0.14-0.80 against 0.14-0.25), with their walks or with far
  // minima (startsFar()).
  HelpWalks = Helped && !Additive->sharesWeights();
  NearFirst = Helped && !HelpWalks && Options.RefineHelpers == 0;
  Near = neighbours(G, simulator::weightOnlyOps(G));
  Stages.assign(Minima.size(), Stage::Waiting);
  Leads.assign(Walks.size(), std::numeric_limits<double>::infinity());
  Stages[0] = Stage::Started;
  if (Helped) {
    std::lock_guard<std::mutex> Guard(WalksLock);
    for (size_t K = 1; K < Minima.size(); ++K)
      if (startsFar(K, /*Helper=*/0) || (far(K) && Options.RefineHelpers > 0)) {
        wantHelp();
        break;
      }
  }
  probe(0, Helped ? RefineTries : Options.RefineProbe, /*Open=*/true);
  if (!Walks[0].Sim) {
    endWalk(0);
  } else {
    std::lock_guard<std::mutex> Guard(WalksLock);
    Stages[0] = Stage::Paused;
  }
  helpRefine(/*Owner=*/true);
}

void MinimaRefiner::helpIfWanted() {
  if (HelpWanted.load(std::memory_order_acquire))
    helpRefine(/*Owner=*/false, /*Helper=*/0);
}

void MinimaRefiner::helpUntilDone(unsigned Helper) {
  // First the costing of OptCNN's edges, from when it starts (polled: it
  // starts once the ops are costed, a few milliseconds in).
  while (!MinimaKnown.load(std::memory_order_acquire)) {
    helpFindMinima();
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  for (;;) {
    {
      std::unique_lock<std::mutex> Lock(WalksLock);
      WalkChanged.wait(Lock, [&] {
        return Finished || HelpWanted.load(std::memory_order_relaxed);
      });
      if (Finished)
        return;
    }
    helpRefine(/*Owner=*/false, Helper);
  }
}

MinimaRefiner::Outcome
MinimaRefiner::collect(std::vector<Refinement> &Refinements) {
  Outcome Out;
  Out.Best = std::move(ByElimination);
  Out.Steps = std::move(ByEliminationSteps);
  std::vector<size_t> Listed;
  for (size_t K = 0; K < Minima.size(); ++K) {
    Listed.push_back(K);
    for (size_t I = 0; I < Relinkings; ++I)
      Listed.push_back(relinkEntry(K, I));
  }
  for (size_t K : Listed) {
    Walk &W = Walks[K];
    Out.Tries += W.Summary.Tries;
    Out.Steps.insert(Out.Steps.end(), W.Steps.begin(), W.Steps.end());
    if (W.Best && better(Options.Goal, *W.Best, *Out.Best))
      Out.Best = std::move(W.Best);
    if (!W.Summary.Source.empty())
      Refinements.push_back(std::move(W.Summary));
  }
  return Out;
}

} // namespace onnx2soap::soap_search
