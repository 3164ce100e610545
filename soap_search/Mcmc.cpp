//===- soap_search/Mcmc.cpp - Metropolis-Hastings over strategies ---------===//
//
// search(): the gradient bucket size and the built-ins simulated on the
// search's threads, then the chains (Chain.h) beside the refinement of
// OptCNN's minima (MinimaRefiner.h), then the search on the first half of
// the devices; the answer is the best of them all, ties to the earlier, so
// that the thread timing never matters.
//
//===----------------------------------------------------------------------===//
#include "soap_search/Mcmc.h"
#include "simulator/TaskGraph.h"
#include "soap_search/Builtins.h"
#include "soap_search/Chain.h"
#include "soap_search/ConfigSpace.h"
#include "soap_search/MessageCap.h"
#include "soap_search/MinimaRefiner.h"
#include <algorithm>
#include <atomic>
#include <future>
#include <mutex>
#include <thread>

namespace onnx2soap::soap_search {
using simulator::Simulator;
using simulator::Strategy;

bool better(Objective Goal, const Candidate &A, const Candidate &B) {
  if (A.Fits != B.Fits)
    return A.Fits;
  if (Goal == Objective::Memory && A.PeakMemory != B.PeakMemory)
    return A.PeakMemory < B.PeakMemory;
  return A.Time < B.Time;
}

Candidate evaluate(const ir::TrainingGraph &T, const simulator::Machine &M,
                   const simulator::CostModel &Cost, simulator::SimOptions Sim,
                   const Candidate &C, double MemoryLimit) {
  Sim.GradientBucketBytes = C.GradientBucketBytes;
  Simulator Run(T, M, Cost, Sim);
  Run.simulate(C.S);
  return candidate(Run, MemoryLimit);
}

/// Calls Job(I, Sim) for I = 0 .. Count - 1 on up to Threads threads (this
/// one among them), each with a Simulator of its own, which the calls on
/// that thread share; Used, when given, receives them.
template <typename Fn>
static void onThreads(unsigned Count, unsigned Threads,
                      const ir::TrainingGraph &T, const simulator::Machine &M,
                      const simulator::CostModel &Cost,
                      const simulator::SimOptions &SimOpts, Fn &&Job,
                      std::vector<std::unique_ptr<Simulator>> *Used = nullptr) {
  Threads = std::max(1u, std::min(Threads, Count));
  std::atomic<unsigned> Next{0};
  std::mutex UsedLock;
  auto Run = [&] {
    auto Sim = std::make_unique<Simulator>(T, M, Cost, SimOpts);
    for (unsigned I; (I = Next.fetch_add(1)) < Count;)
      Job(I, *Sim);
    if (Used) {
      std::lock_guard<std::mutex> Guard(UsedLock);
      Used->push_back(std::move(Sim));
    }
  };
  std::vector<std::thread> Pool;
  for (unsigned I = 1; I < Threads; ++I)
    Pool.emplace_back(Run);
  Run();
  for (std::thread &Thread : Pool)
    Thread.join();
}

std::vector<double> defaultGradientBuckets() {
  constexpr double MiB = 1024.0 * 1024.0;
  return {0, 1 * MiB, 4 * MiB, 16 * MiB, 64 * MiB};
}

std::vector<double> distinctGradientBuckets(const ir::TrainingGraph &T,
                                            const simulator::Machine &M,
                                            const simulator::CostModel &Cost,
                                            const simulator::SimOptions &Sim,
                                            llvm::ArrayRef<double> Sizes) {
  if (Sizes.size() < 2)
    return Sizes.vec();
  simulator::TaskGraph Graph(T, M, Cost, Sim);
  std::vector<double> Distinct;
  std::vector<std::vector<std::vector<ir::TensorId>>> Seen;
  for (double Bytes : Sizes) {
    Graph.setGradientBucket(Bytes);
    if (llvm::is_contained(Seen, Graph.gradientSegments()))
      continue;
    Seen.push_back(Graph.gradientSegments());
    Distinct.push_back(Bytes);
  }
  return Distinct;
}

double bestGradientBucket(const ir::TrainingGraph &T,
                          const simulator::Machine &M,
                          const simulator::CostModel &Cost,
                          simulator::SimOptions Sim, const Strategy &S,
                          llvm::ArrayRef<double> Candidates, double MemoryLimit,
                          unsigned Threads,
                          std::vector<std::unique_ptr<Simulator>> *Used,
                          Candidate *Fastest) {
  assert(!Candidates.empty() && "no bucket size to choose from");
  std::vector<double> Times(Candidates.size());
  std::vector<char> Fits(Candidates.size()); // not bool: written by threads
  std::vector<Candidate> Each(Fastest ? Candidates.size() : 0);
  onThreads(
      Candidates.size(), Threads, T, M, Cost, Sim,
      [&](unsigned I, Simulator &Run) {
        // A thread's first size simulated in full, its next ones
        // as changes of it.
        if (Run.simulated()) {
          Times[I] = Run.changeGradientBucket(Candidates[I]);
        } else {
          Run.setGradientBucket(Candidates[I]);
          Times[I] = Run.simulate(S);
        }
        Fits[I] = Run.memoryOverflow(MemoryLimit) <= 0;
        if (Fastest)
          Each[I] = candidate(Run, MemoryLimit);
      },
      Used);
  size_t Chosen = fastestOf(Times, Fits);
  if (Fastest)
    *Fastest = std::move(Each[Chosen]);
  return Candidates[Chosen];
}

SearchResult search(const ir::TrainingGraph &T, const simulator::Machine &M,
                    const simulator::CostModel &Cost,
                    simulator::SimOptions SimOpts, const SearchOptions &Given) {
  Clock::time_point Begin = Clock::now();
  const ir::Graph &G = T.G;
  SearchOptions Options = Given;
  // More threads than cores gain nothing, and each holds a simulator (of
  // gigabytes on a thousand devices): one per core at most.
  unsigned Cores = std::max(1u, std::thread::hardware_concurrency());
  unsigned Threads = std::min(Options.Threads ? Options.Threads : Cores, Cores);
  unsigned Chains = std::max(1u, Options.Chains);
  unsigned ChainThreads = std::min(Threads, Chains);
  // Ahead: with two chain threads or more, the thread that seeks OptCNN's
  // strategy from the start (below). It is started first and handed its
  // work once the config space is built, since a new thread may wait
  // milliseconds for a core (ResNet-101 on 4 K80s: 0.5-3.4 ms, where the
  // answer comes after about 25).
  std::promise<std::function<void()>> AheadWork;
  std::thread Ahead;
  if (ChainThreads >= 2)
    Ahead = std::thread(
        [Work = AheadWork.get_future()]() mutable { Work.get()(); });
  Options.GradientBuckets =
      distinctGradientBuckets(T, M, Cost, SimOpts, Given.GradientBuckets);
  ConfigSpace Space(G, M.numDevices(), Options.Space);
  SearchResult Result;

  // The built-in strategies: answers to beat and chain starts.
  Strategy Starts[3] = {dataParallel(G, M), expert(G, M),
                        modelParallel(G, M, Cost)};
  Candidate *Builtins[3] = {&Result.DataParallel, &Result.Expert,
                            &Result.ModelParallel};
  llvm::StringRef StartNames[3] = {builtinName(Builtin::DataParallel),
                                   builtinName(Builtin::Expert),
                                   builtinName(Builtin::ModelParallel)};
  std::optional<Strategy> FewerDevices;
  // RNNs: each recurrent layer data parallel on its own group of devices
  // (a pipeline of layers), which no op-by-op walk reaches either.
  std::optional<Strategy> LayerGroups = layerGroups(G, M);
  CostFunction F{Options.Goal, Options.MemoryLimit,
                 Options.MemoryLimit > 0
                     ? Options.MemoryLimit
                     : double(M.deviceType(0).MemoryCapacity),
                 0, 0};

  // The chains get half the budget when the search on half the devices
  // (below) follows them.
  bool Halve = Options.Goal != Objective::Frontier && M.numDevices() >= 4 &&
               M.numDevices() % 2 == 0 &&
               (Options.Iterations == 0 || Options.Iterations >= 2);

  // With fewer threads than chains the chains run in waves, each wave with
  // its share of the budget (a chain's clock starts with it): otherwise the
  // later waves would start with the budget spent and never move.
  unsigned Waves = (Chains + ChainThreads - 1) / ChainThreads;
  double ChainsPart = Halve ? Options.BudgetSeconds / 2 : Options.BudgetSeconds;
  double ChainBudget = ChainsPart / Waves;
  std::vector<ChainResult> Results(Chains);
  // With a budget, a chain of a later wave does not start once the chains'
  // part of the budget is spent: each chain's first simulations take their
  // time whatever its share (1,024 chains on 2 threads ran 425 s for a 2 s
  // budget). The first wave always runs.
  std::vector<char> Ran(Chains, 0);
  SharedProgress Progress;
  std::atomic<unsigned> NextChain{0};

  // OptCNN's strategy, refined (MinimaRefiner.h). Its minima are simulated
  // with the search's gradient bucket size (BucketChosen), once known.
  std::promise<double> BucketChosen;
  std::shared_future<double> Bucket = BucketChosen.get_future().share();
  MinimaRefiner Refiner(T, M, Cost, SimOpts, Options, Space, Starts[0], F,
                        Progress, Begin, ChainBudget,
                        Given.GradientBuckets.size());
  std::function<void()> Help = [&] { Refiner.helpIfWanted(); };
  // Threads beside the chains' (SearchOptions::RefineHelpers): the
  // refinements' helpers from the start, numbered after the first chain
  // thread.
  std::vector<std::thread> Beside;
  for (unsigned H = 1; Ahead.joinable() && H <= Options.RefineHelpers; ++H)
    Beside.emplace_back([&Refiner, H] { Refiner.helpUntilDone(H); });
  MessageCap Cap(G, M.numDevices());
  Strategy AdmittedDataParallel = Space.admit(Starts[0]);
  auto Worker = [&](const std::function<void()> &Aside) {
    for (unsigned C; (C = NextChain.fetch_add(1)) < Chains;) {
      if (!Options.Iterations && C >= ChainThreads &&
          secondsSince(Begin) >= ChainsPart)
        continue;
      Ran[C] = 1;
      Strategy Start;
      if (C < 3) {
        // In a restricted space, chains start from the built-ins' nearest
        // strategies in it, so that they search that space alone; under a
        // filter of shapes alone, from the built-ins with each refused
        // config whole on its first device (ConfigSpace::admit). Within
        // the bound on messages: the expert strategy's fully-connected
        // layers on 1,024 GPUs read their input in a million messages.
        Start = Cap.within(Space.admit(Starts[C]), AdmittedDataParallel);
      } else {
        Rng R = chainRng(Options.Seed, Chains + C);
        Start = Cap.randomWithin(Space, AdmittedDataParallel, R);
      }
      CostFunction Chain = F;
      // Frontier chains weigh memory from 0 to 2 (time-equivalents of the
      // data-parallel peak).
      if (Options.Goal == Objective::Frontier)
        Chain.Lambda = Chains > 1 ? 2.0 * C / (Chains - 1) : 0;
      std::vector<Strategy> Alternatives;
      if (C == 0)
        for (const std::optional<Strategy> &A : {FewerDevices, LayerGroups})
          if (A)
            Alternatives.push_back(Space.admit(*A));
      Results[C] = runChain(T, M, Cost, SimOpts, Options, Space, Start,
                            C < 3 ? StartNames[C] : "random", Alternatives,
                            Chain, C, Progress, Begin, ChainBudget, Cap, Aside);
    }
  };
  // Ahead's work: OptCNN's strategy, then chains once the built-ins are
  // simulated (StartsSimulated).
  std::promise<void> StartsSimulated;
  std::shared_future<void> ChainsMayStart =
      StartsSimulated.get_future().share();
  if (Ahead.joinable())
    AheadWork.set_value([&] {
      Refiner.findMinima(Bucket);
      Refiner.refine(/*Helped=*/true);
      ChainsMayStart.wait();
      Worker({});
    });
  unsigned StartThreads = Ahead.joinable() ? Threads - 1 : Threads;

  // Gradient buckets: the size data parallelism runs fastest with (the
  // gradients of most strategies are synchronized much like its own). The
  // sizes are simulated on the search's threads at once, as are the
  // strategies below: until they are, no chain starts.
  // Their simulators, used, go to the refinements before the bucket size
  // does: OptCNN's minima are simulated next, and a used simulator builds
  // and simulates a strategy in half a new one's time or less (ResNet-101
  // on 4 K80s: 5.8 ms against 11.5), and one that holds data parallelism
  // simulates the last minima as changes of it. Data parallelism as
  // simulated with the size chosen is the data-parallel built-in's.
  std::vector<std::unique_ptr<Simulator>> Used;
  std::optional<Candidate> DataParallelSized;
  if (!Options.GradientBuckets.empty())
    SimOpts.GradientBucketBytes = bestGradientBucket(
        T, M, Cost, SimOpts, Starts[0], Options.GradientBuckets,
        Options.MemoryLimit, StartThreads, &Used, &DataParallelSized.emplace());
  for (std::unique_ptr<Simulator> &Sim : Used)
    Refiner.lend(std::move(Sim));
  BucketChosen.set_value(SimOpts.GradientBucketBytes);
  {
    // The built-ins, then data parallelism on the first half, quarter, ...
    // of the devices: where the collectives among all of them cost more
    // than the compute they split, fewer devices are faster. No chain could
    // get there, since every op has to move and each move alone only adds
    // transfers; the data-parallel chain goes on from it when that is
    // faster.
    std::vector<Strategy> Fewer;
    for (unsigned Devices = M.numDevices(); Devices % 2 == 0;) {
      Devices /= 2;
      Fewer.push_back(dataParallelOn(G, Devices));
    }
    std::vector<Candidate> Simulated(3 + Fewer.size());
    unsigned From = 0;
    if (DataParallelSized) {
      Simulated[0] = std::move(*DataParallelSized);
      Simulated[0].Source = StartNames[0].str();
      From = 1;
    }
    onThreads(Simulated.size() - From, StartThreads, T, M, Cost, SimOpts,
              [&](unsigned J, Simulator &Sim) {
                unsigned I = From + J;
                Sim.simulate(I < 3 ? Starts[I] : Fewer[I - 3]);
                Simulated[I] =
                    candidate(Sim, Options.MemoryLimit,
                              I < 3 ? StartNames[I].str() : std::string());
              });
    // Found together, in this order (data parallelism first).
    double Found = secondsSince(Begin);
    for (Candidate &C : Simulated)
      C.FoundAt = Found;
    for (unsigned I = 0; I < 3; ++I)
      *Builtins[I] = std::move(Simulated[I]);
    Candidate Fewest = Result.DataParallel;
    for (size_t I = 0; I < Fewer.size(); ++I)
      if (better(Options.Goal, Simulated[3 + I], Fewest)) {
        Fewest = Simulated[3 + I];
        FewerDevices = Fewer[I];
      }
    F.TimeScale = std::max(Result.DataParallel.Time, 1e-12);
    F.MemoryScale = std::max(Result.DataParallel.PeakMemory, 1.0);
  }
  StartsSimulated.set_value();
  // On one thread: OptCNN's strategy, then the chains.
  if (!Ahead.joinable()) {
    Refiner.findMinima(Bucket);
    Refiner.refine(/*Helped=*/false);
  }

  // The first chain thread's first work: helping to cost OptCNN's edges,
  // when they are being costed still (AlexNet on 64 K80s: 0.3 s on one
  // thread, and the built-ins are simulated after 0.1). The minima come
  // sooner; that chain, a little later.
  if (Ahead.joinable())
    Refiner.helpFindMinima();
  std::vector<std::thread> Pool;
  for (unsigned I = Ahead.joinable() ? 1 : 0; I < ChainThreads; ++I)
    Pool.emplace_back([&, Helps = Ahead.joinable() && I == 1] {
      Worker(Helps ? Help : std::function<void()>());
    });
  std::atomic<bool> Done{false};
  std::thread Reporter;
  if (Options.Progress)
    Reporter = std::thread([&] {
      while (!Done.load()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(250));
        SearchProgress P;
        P.Iterations = Progress.Iterations.load();
        {
          std::lock_guard<std::mutex> Guard(Progress.Lock);
          P.BestTime = Progress.BestTime;
        }
        P.Seconds = secondsSince(Begin);
        if (!Done.load())
          Options.Progress(P);
      }
    });
  if (Ahead.joinable())
    Ahead.join();
  for (std::thread &Thread : Beside)
    Thread.join();
  for (std::thread &Thread : Pool)
    Thread.join();
  Done = true;
  if (Reporter.joinable())
    Reporter.join();
  // The chains that ran, in chain order.
  for (unsigned C = Chains; C-- > 0;)
    if (!Ran[C])
      Results.erase(Results.begin() + C);
  Result.ChainsRun = Results.size();

  // Then the search on the first half of the devices, with the rest of the
  // budget (or half the steps), and so on down: a quarter of the devices,
  // ... A strategy for fewer devices is one for all of them, and where the
  // collectives among all devices cost more than the compute they split
  // (RNNLM on 32 K80s), the best strategy leaves devices idle; no chain over
  // all devices walks there op by op. Its answer is a candidate. (It comes
  // after the chains so that what they find at once, the heavy units placed
  // whole, is found as early as before.)
  std::optional<SearchResult> Half;
  std::optional<Candidate> HalfAnswer;
  std::vector<Improvement> HalfProgression;
  std::optional<simulator::Machine> Fewer;
  if (Halve) {
    auto First = M.firstDevices(M.numDevices() / 2);
    if (First)
      Fewer = std::move(*First);
    else
      llvm::consumeError(First.takeError());
  }
  // Not once the budget is spent: on many devices the chains' setup alone
  // can take it (a budget of 0.001 s on 512 devices ran each half's search
  // all the same, for 10 s).
  if (Fewer && !Options.Iterations &&
      secondsSince(Begin) >= Options.BudgetSeconds)
    Fewer.reset();
  if (Fewer) {
    double Offset = secondsSince(Begin);
    SearchOptions Sub = Given;
    if (Options.Iterations)
      Sub.Iterations = Options.Iterations / 2;
    else
      Sub.BudgetSeconds = std::max(0.0, Options.BudgetSeconds - Offset);
    uint64_t Before = Progress.Iterations.load();
    double BestBefore = Progress.BestTime;
    if (Options.Progress)
      Sub.Progress = [&](SearchProgress P) {
        P.Iterations += Before;
        // 0 until that search has a time of its own.
        P.BestTime =
            P.BestTime > 0 ? std::min(P.BestTime, BestBefore) : BestBefore;
        P.Seconds += Offset;
        Options.Progress(P);
      };
    Half = search(T, *Fewer, Cost, SimOpts, Sub);
    // Its answer simulated on all the devices (the idle ones change nothing
    // but are simulated all the same); in a restricted space, only if it
    // lies in this one too (the spaces of fewer devices place partitions
    // differently).
    if (!Options.Space.restricts() ||
        Space.project(Half->Best.S) == Half->Best.S) {
      // With the gradient bucket size it was found with (that search
      // chose its own).
      HalfAnswer =
          evaluate(T, M, Cost, SimOpts, Half->Best, Options.MemoryLimit);
      HalfAnswer->FoundAt = Offset + Half->BestFoundSeconds;
      std::string Within =
          "first " + std::to_string(Fewer->numDevices()) + " devices: ";
      HalfAnswer->Source = Within + Half->Best.Source;
      // Its improvements on the way count in the progression when the idle
      // devices changed nothing (as they should: the first devices of a
      // cluster are routed alike in both).
      if (HalfAnswer->Time == Half->Best.Time)
        for (Improvement I : Half->Progression) {
          I.Seconds += Offset;
          I.Source = Within + I.Source;
          HalfProgression.push_back(I);
        }
    }
  }

  // The answer: the best of the built-ins and of every chain, ties to the
  // earlier one, so the thread timing never matters.
  Result.Best = Result.DataParallel;
  for (Candidate *B : {&Result.Expert, &Result.ModelParallel})
    if (better(Options.Goal, *B, Result.Best))
      Result.Best = *B;
  // The refinements' best, ties to the earlier minimum.
  MinimaRefiner::Outcome Refined = Refiner.collect(Result.Refinements);
  if (Refined.Best && better(Options.Goal, *Refined.Best, Result.Best))
    Result.Best = *Refined.Best;
  Result.Iterations += Refined.Tries;
  for (unsigned I = 0; I < Results.size(); ++I) {
    ChainResult &C = Results[I];
    Result.Iterations += C.Steps;
    if (I == 0 || better(Options.Goal, C.Best, Result.ChainBest))
      Result.ChainBest = C.Best;
    if (better(Options.Goal, C.Best, Result.Best))
      Result.Best = C.Best;
  }
  // Last, as it was found last.
  if (HalfAnswer && better(Options.Goal, *HalfAnswer, Result.Best))
    Result.Best = *HalfAnswer;
  if (Half)
    Result.Iterations += Half->Iterations;
  // The chains size their gradient buckets as they go, but the answer may
  // have changed since its chain last chose (or be a built-in, or the
  // answer on half the devices): it takes the size it runs fastest with,
  // found now.
  std::optional<Candidate> Resized;
  if (!Options.GradientBuckets.empty() && Options.Goal != Objective::Frontier) {
    Simulator Sim(T, M, Cost, SimOpts);
    fastestBucket(Sim, Result.Best.S, Options.GradientBuckets,
                  Options.MemoryLimit);
    Candidate C = candidate(Sim, Options.MemoryLimit);
    if (C.GradientBucketBytes != Result.Best.GradientBucketBytes &&
        better(Options.Goal, C, Result.Best)) {
      C.FoundAt = secondsSince(Begin);
      C.Source = Result.Best.Source + " (gradient buckets resized)";
      Resized = C;
      Result.Best = std::move(C);
    }
  }
  if (Options.Goal == Objective::Frontier) {
    std::vector<Candidate> All;
    for (ChainResult &C : Results)
      All.insert(All.end(), C.Frontier.begin(), C.Frontier.end());
    std::stable_sort(All.begin(), All.end(),
                     [](const Candidate &A, const Candidate &B) {
                       return std::tie(A.PeakMemory, A.Time) <
                              std::tie(B.PeakMemory, B.Time);
                     });
    for (Candidate &C : All)
      if (Result.Frontier.empty() || C.Time < Result.Frontier.back().Time)
        Result.Frontier.push_back(std::move(C));
  }
  Result.Seconds = secondsSince(Begin);
  Result.BestFoundSeconds = Result.Best.FoundAt;

  // The progression: everything any chain improved on, merged in time order
  // and kept where it beats all before it (in a restricted space a chain
  // may improve on its start and still not reach the best built-in).
  std::vector<Improvement> Seen;
  for (const Candidate *B :
       {&Result.DataParallel, &Result.Expert, &Result.ModelParallel})
    Seen.push_back(improvement(*B));
  Seen.insert(Seen.end(), Refined.Steps.begin(), Refined.Steps.end());
  Seen.insert(Seen.end(), HalfProgression.begin(), HalfProgression.end());
  if (HalfAnswer)
    Seen.push_back(improvement(*HalfAnswer));
  for (const ChainResult &C : Results)
    Seen.insert(Seen.end(), C.Improvements.begin(), C.Improvements.end());
  if (Resized)
    Seen.push_back(improvement(*Resized));
  std::stable_sort(Seen.begin(), Seen.end(),
                   [](const Improvement &A, const Improvement &B) {
                     return A.Seconds < B.Seconds;
                   });
  auto AsCandidate = [](const Improvement &I) {
    Candidate C;
    C.Time = I.Time;
    C.PeakMemory = I.PeakMemory;
    C.Fits = I.Fits;
    return C;
  };
  // Another strategy as good as the answer (two refinements, or chains,
  // that reached the same time) is not an improvement on the way to it:
  // whichever thread got there first, the progression ends with the answer
  // found when it was.
  auto TiesTheAnswer = [&](const Improvement &I) {
    Candidate C = AsCandidate(I);
    return !better(Options.Goal, C, Result.Best) &&
           !better(Options.Goal, Result.Best, C) &&
           !(I.Source == Result.Best.Source &&
             I.Seconds == Result.Best.FoundAt);
  };
  for (const Improvement &I : Seen)
    if (!TiesTheAnswer(I) && (Result.Progression.empty() ||
                              better(Options.Goal, AsCandidate(I),
                                     AsCandidate(Result.Progression.back()))))
      Result.Progression.push_back(I);
  return Result;
}

} // namespace onnx2soap::soap_search
