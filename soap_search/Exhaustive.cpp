//===- soap_search/Exhaustive.cpp - Globally best strategy by DFS ---------===//
//
// Per op and config, the compute tasks' durations are read once from the
// simulator's task graph (one delta simulation each); the bound is then
// arithmetic on those tables, so a cut subtree costs no simulation at all.
//
//===----------------------------------------------------------------------===//
#include "soap_search/Exhaustive.h"
#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>

namespace onnx2soap::soap_search {
using simulator::DeviceId;
using simulator::ParallelConfig;
using simulator::Simulator;
using simulator::Strategy;
using simulator::TaskKind;

namespace {

/// What one config of one op adds to the bound.
struct ConfigWork {
  /// Seconds of compute per device: forward, backward and the updates of
  /// the tensors only this op reads.
  std::vector<double> Load;
  double Total = 0;
  /// The shortest partition's forward task, and the shortest partition's
  /// chain of forward, backward, gradient all-reduce and update.
  double Forward = 0;
  double Tail = 0;
  /// The shortest partition's backward task, and the shortest all-reduce
  /// and update chain after a partition's backward.
  double Backward = 0;
  double After = 0;
  /// Per input slot: the partitions together read all of the input, so
  /// every partition of its producer gets a gradient from one of them.
  uint32_t Covers = 0;
};

class Search {
public:
  Search(const ir::TrainingGraph &T, const simulator::Machine &M,
         const simulator::CostModel &Cost, simulator::SimOptions SimOpts,
         const ConfigSpace &Space, ExhaustiveLimits Limits)
      : G(T.G), Sim(T, M, Cost, SimOpts), Limits(Limits),
        NumDevices(M.numDevices()) {
    std::vector<bool> WeightOnly = simulator::weightOnlyOps(G);
    Strategy Start;
    for (const ir::Op &O : G.ops()) {
      Start.Configs.push_back(Space.all(O.Id).front());
      if (!WeightOnly[O.Id]) {
        Index.push_back(Ops.size());
        Ops.push_back(O.Id);
        Configs.push_back(Space.all(O.Id));
      } else {
        Index.push_back(~0u);
      }
    }
    // Producers among the searched ops, by position in Ops (ids are in
    // topological order, so producers come first).
    Producers.resize(Ops.size());
    for (unsigned I = 0; I < Ops.size(); ++I)
      for (ir::TensorId In : G.op(Ops[I]).Inputs)
        if (In != ir::NoTensor && G.tensor(In).Producer != ir::NoOp &&
            Index[G.tensor(In).Producer] != ~0u)
          Producers[I].push_back(Index[G.tensor(In).Producer]);
    // Consumers whose backward sends a gradient to the producer's backward.
    Consumers.resize(Ops.size());
    for (unsigned I = 0; I < Ops.size(); ++I) {
      const ir::Op &O = G.op(Ops[I]);
      for (unsigned Slot = 0; Slot < O.Inputs.size(); ++Slot) {
        ir::TensorId In = O.Inputs[Slot];
        if (In == ir::NoTensor || G.tensor(In).Producer == ir::NoOp)
          continue;
        unsigned P = Index[G.tensor(In).Producer];
        if (P != ~0u && T.BackwardInputs[Ops[P]] != 0 &&
            T.BackwardInputs[Ops[I]] >> Slot & 1 && T.NeedsGrad[In])
          Consumers[P].push_back({I, Slot});
      }
    }
    Sim.simulate(Start);
    measureWork();
  }

  ExhaustiveResult run() {
    Result.Ops = Ops.size();
    Result.SpaceSize = 1;
    for (const auto &C : Configs)
      Result.SpaceSize *= double(C.size());
    Result.Time = std::numeric_limits<double>::infinity();
    // The first leaf: every op's first config (whole, on device 0), a
    // cheap strategy with no communication, so pruning starts early.
    Current.assign(Ops.size(), 0);
    for (unsigned I = 0; I < Ops.size(); ++I) {
      ++Result.Simulations;
      Sim.change(Ops[I], Configs[I][0]);
    }
    Load.assign(NumDevices, 0);
    Assigned.assign(Ops.size(), nullptr);
    if (Ops.empty()) {
      leaf();
      return Result;
    }
    visit(0);
    return Result;
  }

private:
  /// Per op and config: its compute work, read from the task graph after a
  /// delta simulation that gives the op that config.
  void measureWork() {
    // Tensors whose gradient sync and updates depend on one searched op's
    // config alone: those it is the only searched reader of.
    std::vector<unsigned> Readers(G.numTensors(), 0);
    for (ir::OpId Op : Ops)
      for (ir::TensorId In : G.op(Op).Inputs)
        if (In != ir::NoTensor)
          ++Readers[In];
    Work.resize(Ops.size());
    Cheapest.resize(Ops.size());
    for (unsigned I = 0; I < Ops.size(); ++I) {
      const ir::Op &O = G.op(Ops[I]);
      auto Owned = [&](ir::TensorId X) {
        return llvm::is_contained(O.Inputs, X) && Readers[X] == 1;
      };
      for (const ParallelConfig &C : Configs[I]) {
        ++Result.Simulations;
        Sim.change(Ops[I], C);
        ConfigWork W;
        W.Load.assign(NumDevices, 0);
        // Per partition: forward, backward; per owned tensor and device:
        // the longest all-reduce, and the update (one chain each).
        unsigned Parts = C.numPartitions();
        std::vector<double> Forward(Parts, 0), Backward(Parts, 0);
        std::map<std::pair<ir::TensorId, DeviceId>, std::pair<double, double>>
            SyncUpdate;
        const simulator::TaskGraph &TG = Sim.graph();
        for (simulator::TaskId Id = 0; Id < TG.size(); ++Id) {
          const simulator::Task &Task = TG.task(Id);
          if (!Task.Alive)
            continue;
          switch (Task.Kind) {
          case TaskKind::Forward:
          case TaskKind::Backward:
            if (Task.Op != Ops[I])
              continue;
            (Task.Kind == TaskKind::Forward ? Forward
                                            : Backward)[Task.Partition] +=
                Task.Duration;
            W.Load[Task.Device] += Task.Duration;
            W.Total += Task.Duration;
            break;
          case TaskKind::Update:
            if (!Owned(Task.Tensor))
              continue;
            SyncUpdate[{Task.Tensor, Task.Device}].second += Task.Duration;
            W.Load[Task.Device] += Task.Duration;
            W.Total += Task.Duration;
            break;
          case TaskKind::GradAllReduce:
            // A bucket holding other ops' tensors depends on their
            // configs too: left out (its tensors' updates still count).
            if (!llvm::all_of(TG.bucketParts(Id),
                              [&](const simulator::BucketPart &Part) {
                                return Owned(Part.Tensor);
                              }))
              continue;
            for (DeviceId D : Task.Group) {
              double &Sync = SyncUpdate[{Task.Tensor, D}].first;
              Sync = std::max(Sync, Task.Duration);
            }
            break;
          case TaskKind::Transfer:
          case TaskKind::GradTransfer:
          case TaskKind::StatsAllReduce:
          case TaskKind::Copy:
            break;
          }
        }
        std::vector<double> AfterBackward(NumDevices, 0);
        for (const auto &[Where, Times] : SyncUpdate)
          AfterBackward[Where.second] =
              std::max(AfterBackward[Where.second], Times.first + Times.second);
        W.Forward = W.Tail = W.Backward = W.After =
            std::numeric_limits<double>::infinity();
        for (unsigned P = 0; P < Parts; ++P) {
          W.Forward = std::min(W.Forward, Forward[P]);
          W.Backward = std::min(W.Backward, Backward[P]);
          W.After = std::min(W.After, AfterBackward[C.device(P)]);
          W.Tail = std::min(W.Tail, Forward[P] + Backward[P] +
                                        AfterBackward[C.device(P)]);
        }
        for (unsigned Slot = 0; Slot < O.Inputs.size() && Slot < 32; ++Slot)
          if (O.Inputs[Slot] != ir::NoTensor && covers(O, C, Slot))
            W.Covers |= 1u << Slot;
        Work[I].push_back(std::move(W));
      }
      ConfigWork &Least = Cheapest[I];
      Least.Total = Least.Forward = Least.Tail = Least.Backward = Least.After =
          std::numeric_limits<double>::infinity();
      Least.Covers = ~0u;
      for (const ConfigWork &W : Work[I]) {
        Least.Total = std::min(Least.Total, W.Total);
        Least.Forward = std::min(Least.Forward, W.Forward);
        Least.Tail = std::min(Least.Tail, W.Tail);
        Least.Backward = std::min(Least.Backward, W.Backward);
        Least.After = std::min(Least.After, W.After);
        Least.Covers &= W.Covers;
      }
    }
  }

  /// A lower bound of every strategy that keeps the configs of the first
  /// Depth ops (see the file comment).
  double bound(unsigned Depth) {
    auto At = [&](unsigned I) -> const ConfigWork & {
      return I < Depth ? *Assigned[I] : Cheapest[I];
    };
    double Busiest = 0, Sum = 0;
    for (double L : Load) {
      Busiest = std::max(Busiest, L);
      Sum += L;
    }
    for (unsigned I = Depth; I < Ops.size(); ++I)
      Sum += Cheapest[I].Total;
    double Bound = std::max(Busiest, Sum / NumDevices);
    // Every forward task of op I ends at ForwardEnd[I] or later: each has
    // a predecessor among every producer's forward tasks.
    ForwardEnd.assign(Ops.size(), 0);
    for (unsigned I = 0; I < Ops.size(); ++I) {
      double Before = 0;
      for (unsigned P : Producers[I])
        Before = std::max(Before, ForwardEnd[P]);
      ForwardEnd[I] = Before + At(I).Forward;
      Bound = std::max(Bound, Before + At(I).Tail);
    }
    // Every backward task of op I ends at BackwardEnd[I] or later: after
    // its own forward, and after a backward task of every consumer that
    // reads all of what I writes (and so sends every partition a gradient).
    BackwardEnd.assign(Ops.size(), 0);
    for (unsigned I = Ops.size(); I-- > 0;) {
      const ConfigWork &W = At(I);
      if (!std::isfinite(W.Backward))
        continue;
      double Before = ForwardEnd[I];
      for (auto [C, Slot] : Consumers[I])
        if (At(C).Covers >> Slot & 1)
          Before = std::max(Before, BackwardEnd[C]);
      BackwardEnd[I] = Before + W.Backward;
      Bound = std::max(Bound, BackwardEnd[I] + W.After);
    }
    return Bound;
  }

  /// Whether the partitions of O under C together read all of input Slot.
  bool covers(const ir::Op &O, const ParallelConfig &C, unsigned Slot) const {
    const ir::OpKindInfo &Info = ir::opKindInfo(O.Kind);
    const ir::Shape &Dims = G.tensor(O.Inputs[Slot]).Type.Dims;
    std::vector<ir::Region> Read;
    for (unsigned P = 0; P < C.numPartitions(); ++P)
      Read.push_back(Info.InputRegion(G, O, Slot,
                                      simulator::outputRegion(G, O, C, P),
                                      simulator::reductionSlice(G, O, C, P)));
    // Cut the input at every boundary; every cell must lie in a read region.
    unsigned Rank = Dims.size();
    std::vector<std::vector<int64_t>> Cuts(Rank);
    for (unsigned D = 0; D < Rank; ++D) {
      Cuts[D] = {0, Dims[D]};
      for (const ir::Region &R : Read)
        for (int64_t X : {R[D].Begin, R[D].End})
          if (X > 0 && X < Dims[D])
            Cuts[D].push_back(X);
      std::sort(Cuts[D].begin(), Cuts[D].end());
      Cuts[D].erase(std::unique(Cuts[D].begin(), Cuts[D].end()), Cuts[D].end());
    }
    std::vector<unsigned> Cell(Rank, 0);
    while (true) {
      ir::Region Box(Rank);
      for (unsigned D = 0; D < Rank; ++D)
        Box[D] = {Cuts[D][Cell[D]], Cuts[D][Cell[D] + 1]};
      int64_t Volume = ir::regionVolume(Box);
      if (Volume > 0 && llvm::none_of(Read, [&](const ir::Region &R) {
            return ir::overlapVolume(Box, R) == Volume;
          }))
        return false;
      unsigned D = Rank;
      while (D > 0 && ++Cell[D - 1] + 1 >= Cuts[D - 1].size())
        Cell[--D] = 0;
      if (D == 0)
        return true;
    }
  }

  void assign(unsigned Depth, unsigned Config) {
    Assigned[Depth] = &Work[Depth][Config];
    for (unsigned D = 0; D < NumDevices; ++D)
      Load[D] += Assigned[Depth]->Load[D];
  }
  void unassign(unsigned Depth) {
    for (unsigned D = 0; D < NumDevices; ++D)
      Load[D] -= Assigned[Depth]->Load[D];
    Assigned[Depth] = nullptr;
  }

  void leaf() {
    ++Result.Leaves;
    double Time = Sim.time();
    if (!Ops.empty() && Time < bound(Ops.size()) * (1 - 1e-9))
      ++Result.BoundViolations;
    if (Time < Result.Time && Sim.memoryOverflow(0) <= 0) {
      Result.Time = Time;
      Result.Best = Sim.strategy();
    }
  }

  /// Tries every config of op Depth, starting from the one it has (no
  /// simulation needed) and going round.
  void visit(unsigned Depth) {
    unsigned N = Configs[Depth].size();
    unsigned First = Current[Depth];
    for (unsigned K = 0; K < N && !Stopped; ++K) {
      unsigned C = (First + K) % N;
      assign(Depth, C);
      bool Last = Depth + 1 == Ops.size();
      // The incumbent beats everything here: skip without simulating.
      if (Limits.Prune && bound(Depth + 1) >= Result.Time) {
        ++Result.Pruned;
        unassign(Depth);
        continue;
      }
      if (C != Current[Depth]) {
        ++Result.Simulations;
        Sim.change(Ops[Depth], Configs[Depth][C]);
        Current[Depth] = C;
      }
      if (Last) {
        leaf();
        if (Limits.MaxLeaves && Result.Leaves >= Limits.MaxLeaves) {
          Stopped = true;
          Result.Complete = false;
        }
      } else {
        visit(Depth + 1);
      }
      unassign(Depth);
    }
  }

  const ir::Graph &G;
  Simulator Sim;
  ExhaustiveLimits Limits;
  unsigned NumDevices;
  /// The searched ops, their configs and compute work, and per op the
  /// positions of the searched ops it reads from.
  std::vector<ir::OpId> Ops;
  std::vector<unsigned> Index;
  std::vector<std::vector<ParallelConfig>> Configs;
  std::vector<std::vector<ConfigWork>> Work;
  /// Per op: the least of each figure over its configs.
  std::vector<ConfigWork> Cheapest;
  std::vector<llvm::SmallVector<unsigned, 2>> Producers;
  std::vector<llvm::SmallVector<std::pair<unsigned, unsigned>, 2>> Consumers;
  /// Search state: each op's config in the simulator, the work of the
  /// assigned ones and its sum per device; scratch for the chain bound.
  std::vector<unsigned> Current;
  std::vector<const ConfigWork *> Assigned;
  std::vector<double> Load;
  std::vector<double> ForwardEnd, BackwardEnd;
  bool Stopped = false;
  ExhaustiveResult Result;
};

} // namespace

ExhaustiveResult
exhaustiveSearch(const ir::TrainingGraph &T, const simulator::Machine &M,
                 const simulator::CostModel &Cost, simulator::SimOptions Sim,
                 const ConfigSpace &Space, ExhaustiveLimits Limits) {
  auto Begin = std::chrono::steady_clock::now();
  Search S(T, M, Cost, Sim, Space, Limits);
  ExhaustiveResult Result = S.run();
  Result.Seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - Begin)
          .count();
  return Result;
}

} // namespace onnx2soap::soap_search
