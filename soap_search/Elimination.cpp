//===- soap_search/Elimination.cpp - OptCNN's graph elimination ----------===//
//
// See Elimination.h. The elimination and the minimization over the cost
// tables that EliminationCosts.cpp builds. Costs are seconds per iteration;
// a node's configs are indexed 0 .. K-1, an edge's table row-major with the
// lower node's config first.
//
//===----------------------------------------------------------------------===//
#include "soap_search/Elimination.h"
#include "llvm/ADT/STLExtras.h"
#include <algorithm>
#include <limits>

namespace onnx2soap::soap_search {

using simulator::ParallelConfig;
using simulator::Strategy;

static constexpr double Infinity = std::numeric_limits<double>::infinity();

template <typename Fn> void AdditiveCost::forEachEdge(Fn &&Visit) const {
  for (unsigned Node = 0; Node < Ops.size(); ++Node) {
    const ir::Op &O = G.op(Ops[Node]);
    for (unsigned Slot = 0; Slot < O.Inputs.size(); ++Slot) {
      ir::TensorId Tensor = O.Inputs[Slot];
      if (Tensor == ir::NoTensor)
        continue;
      const ir::Tensor &Value = G.tensor(Tensor);
      if (Value.Role != ir::TensorRole::Activation ||
          WeightOnly[Value.Producer])
        continue;
      Visit(unsigned(NodeOf[Value.Producer]),
            simulator::outputIndex(G.op(Value.Producer), Tensor), Node, Slot);
    }
  }
}

std::vector<AdditiveCost::EdgeJob> AdditiveCost::edgeJobs() const {
  std::vector<EdgeJob> Jobs;
  forEachEdge([&](unsigned Producer, unsigned Output, unsigned Consumer,
                  unsigned Slot) {
    Jobs.push_back({Producer, Output, Consumer, Slot});
  });
  return Jobs;
}

void AdditiveCost::eliminateLeaf(unsigned J) {
  unsigned A = *Neighbours[J].begin();
  Step S{Step::Leaf, J, A, 0, {}};
  size_t KA = Configs[A].size(), KJ = Configs[J].size();
  S.Choice.assign(KA, 0);
  for (size_t CA = 0; CA < KA; ++CA) {
    double Best = Infinity;
    for (size_t CJ = 0; CJ < KJ; ++CJ) {
      double Total = edgeCost(A, CA, J, CJ) + NodeCosts[J][CJ];
      if (Total < Best) {
        Best = Total;
        S.Choice[CA] = CJ;
      }
    }
    NodeCosts[A][CA] += Best;
  }
  Edges.erase({std::min(A, J), std::max(A, J)});
  Neighbours[A].erase(J);
  Neighbours[J].clear();
  Eliminated[J] = true;
  Steps.push_back(std::move(S));
}

void AdditiveCost::eliminateSeries(unsigned J) {
  unsigned A = *Neighbours[J].begin(), B = *std::next(Neighbours[J].begin());
  Step S{Step::Series, J, A, B, {}};
  size_t KA = Configs[A].size(), KB = Configs[B].size(), KJ = Configs[J].size();
  S.Choice.assign(KA * KB, 0);
  std::vector<double> Merged(KA * KB, Infinity);
  // Edge A-J, plus J's own cost, per (CA, CJ); then J-B per (CJ, CB).
  std::vector<double> Left(KA * KJ), Right(KJ * KB);
  for (size_t CA = 0; CA < KA; ++CA)
    for (size_t CJ = 0; CJ < KJ; ++CJ)
      Left[CA * KJ + CJ] = edgeCost(A, CA, J, CJ) + NodeCosts[J][CJ];
  for (size_t CJ = 0; CJ < KJ; ++CJ)
    for (size_t CB = 0; CB < KB; ++CB)
      Right[CJ * KB + CB] = edgeCost(J, CJ, B, CB);
  for (size_t CA = 0; CA < KA; ++CA)
    for (size_t CJ = 0; CJ < KJ; ++CJ) {
      double L = Left[CA * KJ + CJ];
      for (size_t CB = 0; CB < KB; ++CB) {
        double Total = L + Right[CJ * KB + CB];
        if (Total < Merged[CA * KB + CB]) {
          Merged[CA * KB + CB] = Total;
          S.Choice[CA * KB + CB] = CJ;
        }
      }
    }
  Edges.erase({std::min(A, J), std::max(A, J)});
  Edges.erase({std::min(B, J), std::max(B, J)});
  Neighbours[A].erase(J);
  Neighbours[B].erase(J);
  Neighbours[J].clear();
  Eliminated[J] = true;
  // A < B: Merged is already in the edge's orientation. Parallel edges add.
  std::vector<double> &E = edge(A, B);
  if (E.empty())
    E = std::move(Merged);
  else
    for (size_t I = 0; I < E.size(); ++I)
      E[I] += Merged[I];
  Neighbours[A].insert(B);
  Neighbours[B].insert(A);
  Steps.push_back(std::move(S));
}

void AdditiveCost::reduce() {
  // Sweeps in op order until nothing reduces: a node of at most two
  // neighbours goes (the last node of each component stays alone).
  for (bool Changed = true; Changed;) {
    Changed = false;
    for (unsigned J = 0; J < Ops.size(); ++J) {
      if (Eliminated[J])
        continue;
      size_t Degree = Neighbours[J].size();
      if (Degree == 1) {
        eliminateLeaf(J);
        Changed = true;
      } else if (Degree == 2) {
        eliminateSeries(J);
        Changed = true;
      }
    }
  }
  for (unsigned J = 0; J < Ops.size(); ++J) {
    if (Eliminated[J] || !Neighbours[J].empty())
      continue;
    Step S{Step::Alone, J, 0, 0, {0}};
    for (uint32_t C = 1; C < Configs[J].size(); ++C)
      if (NodeCosts[J][C] < NodeCosts[J][S.Choice[0]])
        S.Choice[0] = C;
    Eliminated[J] = true;
    Steps.push_back(std::move(S));
  }
}

void AdditiveCost::settleTheRest() {
  // Each op of a part that did not reduce starts in its cheapest config,
  // then takes its best given its neighbours', until none changes (at most
  // 16 sweeps).
  std::vector<unsigned> Rest;
  for (unsigned J = 0; J < Ops.size(); ++J)
    if (!Eliminated[J]) {
      Rest.push_back(J);
      Chosen[J] =
          uint32_t(std::min_element(NodeCosts[J].begin(), NodeCosts[J].end()) -
                   NodeCosts[J].begin());
    }
  for (unsigned Sweep = 0; Sweep < 16; ++Sweep) {
    bool Changed = false;
    for (unsigned J : Rest) {
      uint32_t Best = Chosen[J];
      double BestCost = Infinity;
      for (uint32_t C = 0; C < Configs[J].size(); ++C) {
        double Total = NodeCosts[J][C];
        for (unsigned K : Neighbours[J])
          Total += edgeCost(J, C, K, Chosen[K]);
        if (Total < BestCost) {
          BestCost = Total;
          Best = C;
        }
      }
      Changed |= Best != Chosen[J];
      Chosen[J] = Best;
    }
    if (!Changed)
      break;
  }
}

void AdditiveCost::readBack() {
  for (auto S = Steps.rbegin(); S != Steps.rend(); ++S)
    switch (S->Kind) {
    case Step::Alone:
      Chosen[S->Node] = S->Choice[0];
      break;
    case Step::Leaf:
      Chosen[S->Node] = S->Choice[Chosen[S->A]];
      break;
    case Step::Series:
      Chosen[S->Node] =
          S->Choice[size_t(Chosen[S->A]) * Configs[S->B].size() + Chosen[S->B]];
      break;
    }
}

std::vector<double> AdditiveCost::partitionsOffered() const {
  std::vector<double> Parts(Ops.size(), 0);
  for (unsigned J = 0; J < Ops.size(); ++J)
    for (const ParallelConfig &C : Configs[J])
      Parts[J] += C.numPartitions();
  return Parts;
}

double AdditiveCost::leastWork() {
  std::shared_ptr<EdgeWork> Edges = prepareEdges();
  double Least = 0;
  for (const std::vector<size_t> &Members : Edges->Groups)
    Least += Edges->Pairs[Members[0]];
  return Least;
}

AdditiveCost::EdgeWorkSize AdditiveCost::work() {
  std::shared_ptr<EdgeWork> Edges = listAlikeEdges();
  EdgeWorkSize Size;
  for (size_t I = 0; I < Edges->Jobs.size(); ++I) {
    Size.All += Edges->Pairs[I];
    if (Edges->SameAs[I] == I)
      Size.Costed += Edges->Pairs[I];
  }
  return Size;
}

std::optional<Strategy> AdditiveCost::minimize(const Strategy &Base,
                                               double MaxWork) {
  // Edges of other configs or dims are never alike: their work may be too
  // much before any region is listed.
  if (leastWork() > MaxWork || work().Costed > MaxWork)
    return std::nullopt;
  // Each node's parts are costed once, then charged as set now.
  if (CostedParts.empty())
    costTheNodes();
  NodeCosts.clear();
  for (unsigned J = 0; J < Ops.size(); ++J) {
    NodeCosts.emplace_back();
    for (const NodeParts &P : CostedParts[J])
      NodeCosts.back().push_back(charge(P));
  }
  if (!EdgesCosted)
    costTheEdges();
  Edges = CostedEdges;
  Neighbours = CostedNeighbours;
  Steps.clear();
  Eliminated.assign(Ops.size(), false);
  reduce();
  Chosen.assign(Ops.size(), 0);
  settleTheRest();
  readBack();
  Strategy S = Base;
  for (unsigned J = 0; J < Ops.size(); ++J)
    S[Ops[J]] = Configs[J][Chosen[J]];
  shareConfigs(S);
  return S;
}

void AdditiveCost::shareConfigs(Strategy &S) {
  // Ops joined by the weights they read (union-find over nodes).
  std::vector<unsigned> Root(Ops.size());
  for (unsigned J = 0; J < Ops.size(); ++J)
    Root[J] = J;
  auto Find = [&](unsigned J) {
    while (Root[J] != J)
      J = Root[J] = Root[Root[J]];
    return J;
  };
  std::vector<int> FirstReader(G.numTensors(), -1);
  for (unsigned J = 0; J < Ops.size(); ++J)
    for (ir::TensorId Tensor : G.op(Ops[J]).Inputs) {
      if (Tensor == ir::NoTensor || SyncedReaders[Tensor] < 2)
        continue;
      if (FirstReader[Tensor] < 0)
        FirstReader[Tensor] = int(J);
      else
        Root[Find(J)] = Find(unsigned(FirstReader[Tensor]));
    }
  std::map<unsigned, std::vector<unsigned>> Groups;
  for (unsigned J = 0; J < Ops.size(); ++J)
    Groups[Find(J)].push_back(J);
  for (auto &[Leader, Members] : Groups) {
    if (Members.size() < 2)
      continue;
    std::vector<ParallelConfig> Tries;
    for (unsigned J : Members)
      if (!llvm::is_contained(Tries, S[Ops[J]]))
        Tries.push_back(S[Ops[J]]);
    if (Tries.size() < 2)
      continue;
    double BestCost = Infinity;
    Strategy Best = S;
    for (const ParallelConfig &C : Tries) {
      if (!llvm::all_of(Members, [&](unsigned J) {
            return llvm::is_contained(Configs[J], C);
          }))
        continue;
      Strategy Try = S;
      for (unsigned J : Members)
        Try[Ops[J]] = C;
      double Cost = of(Try);
      if (Cost < BestCost) {
        BestCost = Cost;
        Best = std::move(Try);
      }
    }
    S = std::move(Best);
  }
}

AdditiveCost::AdditiveCost(const ir::TrainingGraph &T,
                           const simulator::Machine &M,
                           const simulator::CostModel &Cost,
                           simulator::SimOptions Options,
                           const ConfigSpace &Space)
    : T(T), G(T.G), M(M), Cost(Cost), Options(Options), Space(Space),
      WeightOnly(simulator::weightOnlyOps(T.G)), Scratch(scratch()) {
  addNodes();
}

double AdditiveCost::of(const Strategy &S) {
  double Total = 0;
  for (unsigned J = 0; J < Ops.size(); ++J)
    Total += charge(nodeParts(G.op(Ops[J]), S[Ops[J]]));
  forEachEdge([&](unsigned Producer, unsigned Output, unsigned Consumer,
                  unsigned Slot) {
    EdgeRegions R = regions(Producer, Output, {S[Ops[Producer]]}, Consumer,
                            Slot, {S[Ops[Consumer]]});
    Total += edgeTime(overlaps(R.Written[0], R.Needed[0], R.ElementSize,
                               S[Ops[Producer]].Reduction > 1, R.Scale > 1),
                      S[Ops[Producer]], S[Ops[Consumer]], Scratch);
  });
  return Total;
}

std::vector<AdditiveCost::Change>
AdditiveCost::changesBySum(const Strategy &S, size_t Most) const {
  std::vector<Change> Changes;
  if (!EdgesCosted)
    return Changes;
  // Each node's config in S as an index into those offered (-1: not one).
  std::vector<int> Index(Ops.size(), -1);
  for (unsigned J = 0; J < Ops.size(); ++J) {
    auto Found = llvm::find(Configs[J], S[Ops[J]]);
    if (Found != Configs[J].end())
      Index[J] = int(Found - Configs[J].begin());
  }
  // Node J's charge and its costed edges' with J in config C (Tables: its
  // costed edges' tables, in CostedNeighbours[J]'s order).
  std::vector<const std::vector<double> *> Tables;
  auto Local = [&](unsigned J, uint32_t C) {
    double Total = charge(CostedParts[J][C]);
    size_t I = 0;
    for (unsigned K : CostedNeighbours[J])
      Total += entry(*Tables[I++], J, C, K, uint32_t(Index[K]));
    return Total;
  };
  // Ranked by what each adds, ties in op and config order, before the
  // changes are written out: the first Most, in the order a stable sort by
  // what each adds of all of them in op and config order gives.
  struct Ranked {
    double Added;
    unsigned J;
    uint32_t C;
  };
  std::vector<Ranked> Ranking;
  for (unsigned J = 0; J < Ops.size(); ++J) {
    if (Index[J] < 0 ||
        llvm::any_of(CostedNeighbours[J],
                     [&](unsigned K) { return Index[K] < 0; }) ||
        readsSharedWeight(G.op(Ops[J])))
      continue;
    Tables.clear();
    for (unsigned K : CostedNeighbours[J])
      Tables.push_back(&CostedEdges.at({std::min(J, K), std::max(J, K)}));
    double Now = Local(J, uint32_t(Index[J]));
    for (uint32_t C = 0; C < Configs[J].size(); ++C)
      if (int(C) != Index[J])
        Ranking.push_back({Local(J, C) - Now, J, C});
  }
  auto Before = [](const Ranked &A, const Ranked &B) {
    if (A.Added != B.Added)
      return A.Added < B.Added;
    return A.J != B.J ? A.J < B.J : A.C < B.C;
  };
  size_t Kept = std::min(Most, Ranking.size());
  std::partial_sort(Ranking.begin(), Ranking.begin() + Kept, Ranking.end(),
                    Before);
  Changes.reserve(Kept);
  for (size_t I = 0; I < Kept; ++I)
    Changes.push_back({Ops[Ranking[I].J], Configs[Ranking[I].J][Ranking[I].C],
                       Ranking[I].Added});
  return Changes;
}

std::vector<Strategy> optcnnMinima(AdditiveCost &Cost, const Strategy &Base,
                                   double MaxWork) {
  std::vector<Strategy> Minima;
  for (SharedWeights Charge : {SharedWeights::Once, SharedWeights::PerReader}) {
    if (Charge == SharedWeights::PerReader && !Cost.sharesWeights())
      continue;
    Cost.setSharedWeights(Charge);
    for (double Weight : SyncWeights) {
      Cost.setSyncWeight(Weight);
      std::optional<Strategy> S = Cost.minimize(Base, MaxWork);
      if (!S)
        break;
      if (llvm::none_of(Minima, [&](const Strategy &Other) {
            return Other.Configs == S->Configs;
          }))
        Minima.push_back(std::move(*S));
    }
  }
  Cost.setSharedWeights(SharedWeights::Once);
  Cost.setSyncWeight(1);
  return Minima;
}

Strategy fastestMinimum(simulator::Simulator &Sim,
                        std::vector<Strategy> Minima) {
  assert(!Minima.empty() && "no minimum to choose from");
  // Simulated last to first, so that Sim holds the first (the usual winner)
  // without simulating it again.
  size_t Best = Minima.size() - 1;
  double BestTime = std::numeric_limits<double>::infinity();
  for (size_t I = Minima.size(); I-- > 0;) {
    double Time = Sim.simulate(Minima[I]);
    if (Time <= BestTime) {
      BestTime = Time;
      Best = I;
    }
  }
  if (Best != 0)
    Sim.simulate(Minima[Best]);
  return std::move(Minima[Best]);
}

std::optional<Strategy> optcnnStrategy(AdditiveCost &Cost,
                                       simulator::Simulator &Sim,
                                       const Strategy &Base, double MaxWork) {
  std::vector<Strategy> Minima = optcnnMinima(Cost, Base, MaxWork);
  if (Minima.empty())
    return std::nullopt;
  return fastestMinimum(Sim, std::move(Minima));
}

} // namespace onnx2soap::soap_search
