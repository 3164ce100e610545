//===- soap_search/MinimaRefiner.cpp - OptCNN's minima, refined -----------===//
//
// See MinimaRefiner.h.
//
//===----------------------------------------------------------------------===//
#include "soap_search/MinimaRefiner.h"
#include "simulator/TaskGraph.h"
#include "llvm/ADT/ScopeExit.h"
#include <limits>
#include <numeric>
#include <thread>

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
    // fastest's refinement (startWalk()); each as a change of the strategy
    // simulated before (minima differ in a few ops), the first of data
    // parallelism where a simulator the search lent holds it (moveTo()).
    Held = holdingDataParallel(Sized.GradientBucketBytes, Found.back());
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

// The last minima found are data parallelism but for a few ops (ResNet-101
// on 4 K80s: 2 of 348, Inception-v3 on 8: 5 of 322), simulated from it in
// a fraction of a simulation from scratch; elsewhere (AlexNet's, unrolled
// RNNs') the size's delta simulation would be spent for nothing.
std::unique_ptr<Simulator>
MinimaRefiner::holdingDataParallel(double Bytes, const Strategy &Next) {
  if (!Simulator::movesByChange(Next.opsChangedFrom(DataParallel).size(),
                                Next.Configs.size()))
    return simulator(Bytes);
  std::unique_ptr<Simulator> Sim;
  {
    std::lock_guard<std::mutex> Guard(SparesLock);
    auto Holds = [&](const std::unique_ptr<Simulator> &S) {
      return S->simulated() && S->strategy() == DataParallel;
    };
    // One with the size already, else any.
    auto It = llvm::find_if(Spares, [&](const std::unique_ptr<Simulator> &S) {
      return Holds(S) && S->graph().options().GradientBucketBytes == Bytes;
    });
    if (It == Spares.end())
      It = llvm::find_if(Spares, Holds);
    if (It != Spares.end()) {
      Sim = std::move(*It);
      Spares.erase(It);
    }
  }
  if (!Sim)
    return simulator(Bytes);
  if (Sim->graph().options().GradientBucketBytes != Bytes)
    Sim->changeGradientBucket(Bytes);
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
    // Whether a helping thread will start a far minimum (startsFar(): the
    // first chain thread, or those beside the chains).
    for (size_t K = 1; K < Minima.size(); ++K)
      if (startsFar(K, /*Helper=*/0) ||
          (Options.RefineHelpers > 0 && startsFar(K, /*Helper=*/1))) {
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
