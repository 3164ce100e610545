//===- soap_search/Chain.cpp - One Markov chain over strategies -----------===//
//
// See Chain.h.
//
//===----------------------------------------------------------------------===//
#include "soap_search/Chain.h"
#include "ir/BatchDims.h"
#include "soap_search/Builtins.h"
#include "soap_search/MessageCap.h"
#include <algorithm>
#include <cmath>
#include <deque>
#include <map>
#include <set>

namespace onnx2soap::soap_search {
using simulator::ParallelConfig;
using simulator::Simulator;
using simulator::Strategy;

/// Adds C to a Pareto set over (time, peak memory) unless it is dominated.
static void addToFrontier(std::vector<Candidate> &Set, const Simulator &Sim,
                          double Limit, const std::string &Source) {
  double Time = Sim.time(), Peak = Sim.peakMemory();
  if (Sim.memoryOverflow(Limit) > 0)
    return;
  for (const Candidate &C : Set)
    if (C.Time <= Time && C.PeakMemory <= Peak)
      return;
  llvm::erase_if(Set, [&](const Candidate &C) {
    return Time <= C.Time && Peak <= C.PeakMemory;
  });
  Set.push_back(candidate(Sim, Limit, Source));
}

/// An op's name without a trailing "_<digits>": exporters number the
/// copies of an op that unrolling makes ("/lstm/LSTM_1/Gather_161").
static llvm::StringRef nameStem(llvm::StringRef Name) {
  llvm::StringRef Stem = Name.rtrim("0123456789");
  return Stem.size() < Name.size() && Stem.endswith("_") ? Stem.drop_back()
                                                         : Name;
}

/// A trainable parameter, or a value computed from weights alone.
static bool isWeight(const ir::Graph &G, const std::vector<bool> &WeightOnly,
                     ir::TensorId Id) {
  const ir::Tensor &T = G.tensor(Id);
  return T.Role == ir::TensorRole::Parameter ||
         (T.Role == ir::TensorRole::Activation && WeightOnly[T.Producer]);
}

/// Whether O's weights are larger than the activations it reads and
/// writes. Splitting an op over fewer devices than the ops around it trades
/// the all-reduce of its gradients (its weights) for moving its activations
/// in and out: the fully-connected layers and embeddings, where that can
/// pay, not the convolutions (ResNet-101's heaviest have a third of their
/// activations' size, AlexNet's a thirtieth).
static bool outweighsActivations(const ir::Graph &G,
                                 const std::vector<bool> &WeightOnly,
                                 const ir::Op &O) {
  double Weights = 0, Activations = 0;
  for (ir::TensorId In : O.Inputs)
    if (In != ir::NoTensor)
      (isWeight(G, WeightOnly, In) ? Weights : Activations) +=
          G.tensor(In).Type.byteSize();
  for (ir::TensorId Out : O.Outputs)
    Activations += G.tensor(Out).Type.byteSize();
  return Weights > Activations;
}

/// Per op: whether it reads weights (so splitting it over samples
/// replicates them and costs a gradient all-reduce).
static std::vector<bool> readsWeights(const ir::Graph &G,
                                      const std::vector<bool> &WeightOnly) {
  std::vector<bool> Reads(G.numOps(), false);
  for (const ir::Op &O : G.ops())
    Reads[O.Id] =
        !WeightOnly[O.Id] && llvm::any_of(O.Inputs, [&](ir::TensorId In) {
          return In != ir::NoTensor && isWeight(G, WeightOnly, In);
        });
  return Reads;
}

/// What one proposal changes: any single op with a choice of configs, or a
/// group of ops of one kind and output shape, all taking the same config:
/// ops that read the same weights (the cells of an unrolled recurrent
/// layer, which share parameters), and ops whose names differ only in a
/// trailing number (the per-step glue around those cells). A single cell
/// moving alone mostly adds transfers; FlexFlow's good RNN strategies move
/// whole layers.
static std::vector<std::vector<ir::OpId>>
proposalUnits(const ir::Graph &G, const ConfigSpace &Space,
              const std::vector<bool> &WeightOnly) {
  auto IsWeight = [&](ir::TensorId Id) { return isWeight(G, WeightOnly, Id); };
  std::vector<std::vector<ir::OpId>> Units;
  std::map<std::tuple<ir::OpKind, ir::Shape, std::vector<ir::TensorId>>,
           std::vector<ir::OpId>>
      Groups;
  std::map<std::tuple<ir::OpKind, ir::Shape, std::string>,
           std::vector<ir::OpId>>
      Named;
  for (const ir::Op &O : G.ops()) {
    if (WeightOnly[O.Id] || Space.size(O.Id) < 2)
      continue;
    Units.push_back({O.Id});
    std::vector<ir::TensorId> Weights;
    for (ir::TensorId In : O.Inputs)
      if (In != ir::NoTensor && IsWeight(In))
        Weights.push_back(In);
    if (!Weights.empty())
      Groups[{O.Kind, G.outputType(O).Dims, Weights}].push_back(O.Id);
    if (nameStem(O.Name).size() < O.Name.size())
      Named[{O.Kind, G.outputType(O).Dims, nameStem(O.Name).str()}].push_back(
          O.Id);
  }
  // Groups in the order of their first op.
  std::vector<std::vector<ir::OpId>> Shared;
  for (auto &[Key, Ops] : Groups)
    if (Ops.size() > 1)
      Shared.push_back(std::move(Ops));
  for (auto &[Key, Ops] : Named)
    if (Ops.size() > 1 && !llvm::is_contained(Shared, Ops))
      Shared.push_back(std::move(Ops));
  llvm::sort(Shared, [](const auto &A, const auto &B) {
    return A.front() < B.front();
  });
  Units.insert(Units.end(), Shared.begin(), Shared.end());
  return Units;
}

/// The units whose ops read the most weight bytes, at most eight, each at
/// least 1 % of all weights, heaviest first; of units reading the same
/// weights (a recurrent layer's cells one by one and all together) only the
/// largest.
static std::vector<size_t>
heavyUnits(const ir::Graph &G, const std::vector<std::vector<ir::OpId>> &Units,
           const std::vector<bool> &WeightOnly) {
  auto WeightsOf = [&](llvm::ArrayRef<ir::OpId> Ops) {
    std::set<ir::TensorId> Weights;
    for (ir::OpId Op : Ops)
      for (ir::TensorId In : G.op(Op).Inputs)
        if (In != ir::NoTensor && isWeight(G, WeightOnly, In))
          Weights.insert(In);
    return Weights;
  };
  auto Bytes = [&](const std::set<ir::TensorId> &Weights) {
    double Sum = 0;
    for (ir::TensorId W : Weights)
      Sum += G.tensor(W).Type.byteSize();
    return Sum;
  };
  std::vector<ir::OpId> All;
  for (const ir::Op &O : G.ops())
    All.push_back(O.Id);
  double Total = Bytes(WeightsOf(All));
  std::map<std::set<ir::TensorId>, size_t> Largest;
  for (size_t U = 0; U < Units.size(); ++U) {
    std::set<ir::TensorId> Weights = WeightsOf(Units[U]);
    if (Weights.empty())
      continue;
    auto [It, New] = Largest.try_emplace(std::move(Weights), U);
    if (!New && Units[U].size() > Units[It->second].size())
      It->second = U;
  }
  std::vector<std::pair<double, size_t>> Heavy;
  for (const auto &[Weights, U] : Largest)
    if (double B = Bytes(Weights); B >= 0.01 * Total)
      Heavy.push_back({-B, U});
  llvm::sort(Heavy);
  std::vector<size_t> Order;
  for (size_t I = 0; I < Heavy.size() && I < 8; ++I)
    Order.push_back(Heavy[I].second);
  return Order;
}

ChainResult
runChain(const ir::TrainingGraph &T, const simulator::Machine &M,
         const simulator::CostModel &Cost, simulator::SimOptions SimOpts,
         const SearchOptions &Options, const ConfigSpace &Space,
         const Strategy &Start, llvm::StringRef StartName,
         llvm::ArrayRef<Strategy> Alternatives, CostFunction F, unsigned Index,
         SharedProgress &Progress, Clock::time_point Begin, double Budget,
         const MessageCap &Cap, const std::function<void()> &Aside) {
  Rng R = chainRng(Options.Seed, Index);
  std::string FoundBy =
      "chain " + std::to_string(Index) + " from " + StartName.str();
  Clock::time_point ChainBegin = Clock::now();
  Simulator Sim(T, M, Cost, SimOpts);
  double Current = F(Sim, Sim.simulate(Start));
  ChainResult Result;
  Result.Best = candidate(Sim, F.Limit, FoundBy, secondsSince(Begin));
  Result.Improvements.push_back(improvement(Result.Best));
  if (Options.Goal == Objective::Frontier)
    addToFrontier(Result.Frontier, Sim, F.Limit, FoundBy);
  Progress.improved(Result.Best.Time);
  double LastImprovement = 0;
  std::vector<bool> WeightOnly = simulator::weightOnlyOps(T.G);
  std::vector<std::vector<ir::OpId>> Units =
      proposalUnits(T.G, Space, WeightOnly);
  if (Units.empty())
    return Result;
  std::vector<std::vector<ir::OpId>> Near = neighbours(T.G, WeightOnly);
  std::vector<bool> ReadsWeights = readsWeights(T.G, WeightOnly);
  std::vector<ParallelConfig> Proposal, Old;
  // The simulator holds a new current strategy of cost Next.
  auto Accept = [&](double Next) {
    Current = Next;
    if (Options.Goal == Objective::Frontier)
      addToFrontier(Result.Frontier, Sim, F.Limit, FoundBy);
    Candidate Now;
    Now.Time = Sim.time();
    Now.PeakMemory = Sim.peakMemory();
    Now.Fits = Sim.memoryOverflow(F.Limit) <= 0;
    if (better(Options.Goal, Now, Result.Best)) {
      Clock::time_point Found = Clock::now();
      LastImprovement =
          std::chrono::duration<double>(Found - ChainBegin).count();
      Result.Best =
          candidate(Sim, F.Limit, FoundBy,
                    std::chrono::duration<double>(Found - Begin).count());
      Result.Improvements.push_back(improvement(Result.Best));
      Progress.improved(Result.Best.Time);
    }
  };

  // The data-parallel chain first tries the units that hold the most
  // weights whole on one device, each on four devices spread over the
  // cluster, and keeps the best move that lowers the cost: FlexFlow's NMT
  // strategy keeps each embedding on one GPU (no replicas, no gradient
  // all-reduce of its weights). Random steps rarely find this: an op has
  // hundreds of configs and few steps reach a given op on many devices.
  std::vector<size_t> Heavy;
  if (Index == 0)
    Heavy = heavyUnits(T.G, Units, WeightOnly);
  // Tries each config of Tries for Unit, keeps the best that lowers the
  // cost (in BestCost, BestConfig) and says whether any beat BestCost.
  auto TryAll = [&](llvm::ArrayRef<ir::OpId> Unit,
                    llvm::ArrayRef<ParallelConfig> Tries, double &BestCost,
                    std::optional<ParallelConfig> &BestConfig) {
    Old.clear();
    for (ir::OpId Op : Unit)
      Old.push_back(Sim.strategy()[Op]);
    bool Gained = false;
    for (const ParallelConfig &Try : Tries) {
      if (!llvm::all_of(Unit,
                        [&](ir::OpId Op) { return Space.contains(Op, Try); }) ||
          llvm::all_of(Old,
                       [&](const ParallelConfig &C) { return C == Try; }) ||
          Cap.exceeded(Sim.strategy(), Unit, Try))
        continue;
      ++Result.Steps;
      Progress.Iterations.fetch_add(1, std::memory_order_relaxed);
      Proposal.assign(Unit.size(), Try);
      if (Aside)
        Aside();
      double Next = F(Sim, propose(Sim, Unit, Proposal, Options.FullSimulation,
                                   giveUpAbove(F, BestCost)));
      if (Next < BestCost) {
        BestCost = Next;
        BestConfig = Try;
        Gained = true;
      }
      Sim.revert();
    }
    return Gained;
  };
  auto Move = [&](llvm::ArrayRef<ir::OpId> Unit,
                  const std::optional<ParallelConfig> &Config) {
    if (!Config)
      return;
    Proposal.assign(Unit.size(), *Config);
    Accept(F(Sim, propose(Sim, Unit, Proposal, Options.FullSimulation)));
  };
  unsigned N = Space.numDevices();
  auto PlaceHeavyUnitsWhole = [&] {
    for (size_t U : Heavy) {
      const std::vector<ir::OpId> &Unit = Units[U];
      std::vector<ParallelConfig> Tries;
      for (unsigned K = 0; K < std::min(N, 4u); ++K)
        Tries.push_back(
            Space.place(Space.shapes(Unit.front()).front(), K * (N / 4)));
      double BestCost = Current;
      std::optional<ParallelConfig> BestConfig;
      TryAll(Unit, Tries, BestCost, BestConfig);
      Move(Unit, BestConfig);
    }
  };
  // The ops around a moved op try its config, and keep it when that gains;
  // then the ops around those, and so on outward. Ops that move with others
  // (a recurrent layer's cells and glue) are left to their group's moves: one
  // cell of a layer moved alone only adds transfers, and costs nearly a full
  // simulation to try.
  std::vector<bool> Grouped(T.G.numOps(), false);
  for (const std::vector<ir::OpId> &Unit : Units)
    if (Unit.size() > 1)
      for (ir::OpId Op : Unit)
        Grouped[Op] = true;
  auto Spread = [&](ir::OpId From) {
    std::deque<std::pair<ir::OpId, ir::OpId>> Work;
    std::vector<bool> Seen(T.G.numOps(), false);
    Seen[From] = true;
    for (ir::OpId Op : Near[From])
      Work.push_back({Op, From});
    while (!Work.empty()) {
      auto [Op, Source] = Work.front();
      Work.pop_front();
      if (Seen[Op] || Grouped[Op])
        continue;
      Seen[Op] = true;
      ir::OpId Unit[1] = {Op};
      double BestCost = Current;
      std::optional<ParallelConfig> BestConfig;
      if (!TryAll(Unit, {Sim.strategy()[Source]}, BestCost, BestConfig))
        continue;
      Move(Unit, BestConfig);
      for (ir::OpId Next : Near[Op])
        Work.push_back({Next, Op});
    }
  };
  // Each heavy unit of a single op tries every split of its Sample,
  // Parameter and contraction dims over the first d devices, for each
  // divisor d of the device count from 2 up, until a count of 8 or more
  // gains nothing (2, 4, 8, ... on 2^k devices) (FlexFlow's fully-connected
  // layers split over their channels with the convolutions around them data
  // parallel; an embedding split over its features on all devices); the
  // ops around the split op then spread its config. A try of a layer in 64
  // parts against 64 parts around it makes thousands of transfers: AlexNet on
  // 64 K80s gained 1.46 x over data parallelism in 5 s splitting over all 64
  // devices, 1.96 x in 0.4 s this way. A whole recurrent layer costs nearly
  // a full simulation a try, so units of several ops do not split here.
  // The ops whose weights outweigh their activations split first (where
  // WeightsFirst), the others after (ResNet-101's heaviest convolutions
  // gain 0.6 % split over samples and their contraction dim on 8 K80s;
  // AlexNet's gain nothing and cost 80 tries, a sixth of a second on 64
  // K80s).
  auto SplitHeavyOps = [&](bool WeightsFirst) {
    for (size_t U : Heavy) {
      const std::vector<ir::OpId> &Unit = Units[U];
      if (Unit.size() != 1 ||
          outweighsActivations(T.G, WeightOnly, T.G.op(Unit.front())) !=
              WeightsFirst)
        continue;
      // Its shapes that split no Attribute dim, on the first devices.
      ir::ParallelDims Dims = ir::parallelDims(T.G, T.G.op(Unit.front()));
      std::vector<ParallelConfig> Splits;
      for (const ParallelConfig &Shape : Space.shapes(Unit.front()))
        if (Shape.numPartitions() > 1 && !splitsAttribute(Dims, Shape))
          Splits.push_back(Space.place(Shape, 0));
      double BestCost = Current;
      std::optional<ParallelConfig> BestConfig;
      for (unsigned Parts = 2; Parts <= N; ++Parts) {
        if (N % Parts)
          continue;
        // Each split on the first devices; the layers that outweigh their
        // activations spread evenly too (one part per node: each part's
        // activations come and go through its own node's network card).
        std::vector<ParallelConfig> Tries;
        for (const ParallelConfig &Split : Splits)
          if (Split.numPartitions() == Parts) {
            Tries.push_back(Split);
            if (WeightsFirst && Space.numPlacements(Parts) > N / Parts)
              Tries.push_back(Space.place(Split, N / Parts));
          }
        if (!TryAll(Unit, Tries, BestCost, BestConfig) && Parts >= 8)
          break;
      }
      Move(Unit, BestConfig);
      if (BestConfig)
        Spread(Unit.front());
    }
  };
  // Each op of its own tries the configs of the ops it exchanges
  // activations with and keeps the best that gains, pass after pass while
  // one gains (at most three): a split layer's activations and dropout
  // follow it at once, where random steps take a while to find them
  // (AlexNet on 64 K80s: 32.7 ms after the splits, 23.8 ms after this,
  // 0.03 s later).
  auto FollowNeighbours = [&] {
    for (unsigned Pass = 0; Pass < 3; ++Pass) {
      bool Gained = false;
      for (const std::vector<ir::OpId> &Unit : Units) {
        if (Unit.size() != 1 || Grouped[Unit.front()])
          continue;
        std::vector<ParallelConfig> Tries;
        for (ir::OpId Other : Near[Unit.front()])
          if (!llvm::is_contained(Tries, Sim.strategy()[Other]))
            Tries.push_back(Sim.strategy()[Other]);
        double BestCost = Current;
        std::optional<ParallelConfig> BestConfig;
        if (TryAll(Unit, Tries, BestCost, BestConfig)) {
          Move(Unit, BestConfig);
          Gained = true;
        }
      }
      if (!Gained)
        break;
    }
  };
  if (Index == 0) {
    PlaceHeavyUnitsWhole();
    // Then the same from each alternative start (data parallelism on fewer
    // devices when that is faster, the recurrent layers on groups of
    // devices); the chain goes on from the best, whose heavy ops then try
    // their splits.
    for (const Strategy &Alternative : Alternatives) {
      Strategy Kept = Sim.strategy();
      double KeptCost = Current;
      Accept(F(Sim, Sim.simulate(Alternative)));
      PlaceHeavyUnitsWhole();
      if (KeptCost < Current)
        Accept(F(Sim, Sim.simulate(Kept)));
    }
    // The layers whose weights outweigh their activations split, the ops
    // around them follow, then the other heavy ops try their splits.
    SplitHeavyOps(/*WeightsFirst=*/true);
    FollowNeighbours();
    SplitHeavyOps(/*WeightsFirst=*/false);
  }

  // The chain's gradient bucket size: the one its strategy runs fastest
  // with, chosen after the start and again whenever the chain's best has
  // improved by a tenth since (a delta simulation per size each time): a
  // strategy that synchronizes other gradients among other replicas than
  // data parallelism may want another size (AlexNet on 64 K80s: 4 MiB where
  // data parallelism wants 16), and finding the size only at the end would
  // find the answer only then.
  bool Resizes =
      Options.Goal == Objective::Time && Options.GradientBuckets.size() > 1;
  double SizedFor = 0;
  auto Resize = [&] {
    Strategy S = Sim.strategy();
    // Its simulations count as steps.
    uint64_t Simulations =
        fastestBucket(Sim, S, Options.GradientBuckets, F.Limit,
                      /*Simulated=*/true)
            .Simulations;
    Result.Steps += Simulations;
    Progress.Iterations.fetch_add(Simulations, std::memory_order_relaxed);
    Accept(F(Sim, Sim.time()));
    SizedFor = Result.Best.Time;
  };
  if (Resizes)
    Resize();

  for (uint64_t Step = 0;; ++Step) {
    if (Resizes && Result.Best.Time < 0.9 * SizedFor)
      Resize();
    // The clock is read every step: a step takes microseconds on small
    // clusters, where reading it costs tens of nanoseconds, and seconds on
    // 1,024 GPUs, where sixteen steps between readings overran a budget
    // many times over.
    if (Options.Iterations) {
      if (Step >= Options.Iterations)
        break;
    } else {
      double Elapsed = secondsSince(ChainBegin);
      if (Elapsed >= Budget || Elapsed - LastImprovement >= Budget / 2)
        break;
    }
    ++Result.Steps;
    Progress.Iterations.fetch_add(1, std::memory_order_relaxed);
    const std::vector<ir::OpId> &Unit = Units[uniformIndex(R, Units.size())];
    // Half the steps offer the unit a neighbour's current config (when its
    // space has it): a good layout spreads along a chain of ops one step at
    // a time, where a random config rarely matches the ops around it.
    std::optional<ParallelConfig> Config;
    if (uniformReal(R) < 0.5) {
      const std::vector<ir::OpId> &Around =
          Near[Unit[uniformIndex(R, Unit.size())]];
      if (!Around.empty()) {
        const ParallelConfig &Theirs =
            Sim.strategy()[Around[uniformIndex(R, Around.size())]];
        if (Space.contains(Unit.front(), Theirs))
          Config = Theirs;
      }
    }
    // A quarter of the other steps offer an op that reads weights a whole
    // device (FlexFlow's embedding on one GPU: no replicas, no gradient
    // all-reduce): among the few hundred shapes of such an op, the unsplit
    // one is otherwise rarely drawn.
    if (!Config && ReadsWeights[Unit.front()] && uniformReal(R) < 0.25)
      Config = Space.randomWhole(Unit.front(), R);
    if (!Config)
      Config = Space.random(Unit.front(), R);
    double Coin = uniformReal(R);
    Old.clear();
    for (ir::OpId Op : Unit)
      Old.push_back(Sim.strategy()[Op]);
    if (llvm::all_of(Old,
                     [&](const ParallelConfig &C) { return C == *Config; }) ||
        Cap.exceeded(Sim.strategy(), Unit, *Config))
      continue;
    Proposal.assign(Unit.size(), *Config);
    // Rejected for sure above this cost (any cost, with a coin of 0).
    double Rejects = Coin > 0 ? Current * (1 - std::log(Coin) / Options.Beta)
                              : std::numeric_limits<double>::infinity();
    if (Aside)
      Aside();
    double Next = F(Sim, propose(Sim, Unit, Proposal, Options.FullSimulation,
                                 giveUpAbove(F, Rejects)));
    if (Next <= Current ||
        Coin < std::exp(-Options.Beta * (Next - Current) / Current))
      Accept(Next);
    else
      Sim.revert();
  }
  return Result;
}

} // namespace onnx2soap::soap_search
