//===- soap_search/Elimination.cpp - OptCNN's graph elimination ----------===//
//
// See Elimination.h. Costs are seconds per iteration; a node's configs are
// indexed 0 .. K-1, an edge's table row-major with the lower node's config
// first.
//
//===----------------------------------------------------------------------===//
#include "soap_search/Elimination.h"
#include "ir/BatchDims.h"
#include "ir/OpKind.h"
#include "llvm/ADT/STLExtras.h"
#include <algorithm>
#include <limits>

namespace onnx2soap::soap_search {

using simulator::DeviceId;
using simulator::LinkId;
using simulator::ParallelConfig;
using simulator::Strategy;

static constexpr double Infinity = std::numeric_limits<double>::infinity();

std::vector<ParallelConfig> AdditiveCost::offered(ir::OpId Op) const {
  const ir::Op &O = G.op(Op);
  ir::ParallelDims Dims = ir::parallelDims(G, O);
  unsigned N = Space.numDevices();
  std::vector<ParallelConfig> Offered;
  // Attribute splits multiply the configs (a conv's rows and columns) and
  // the work of costing the edges; they are offered where the output is a
  // matrix (fully-connected layers and the ops between them), so that a
  // layer split over its features can keep that layout through the
  // activation and dropout after it instead of regathering the batch
  // (every output counts: a training Dropout's mask has its output's shape).
  bool Matrix = llvm::all_of(O.Outputs, [&](ir::TensorId Output) {
    return Output == ir::NoTensor || G.tensor(Output).Type.Dims.size() <= 2;
  });
  for (const ParallelConfig &Shape : Space.shapes(O.Id)) {
    if (splitsAttribute(Dims, Shape) && !Matrix)
      continue;
    unsigned Parts = Shape.numPartitions();
    unsigned Blocks = N / Parts;
    for (unsigned Index : {0u, Blocks}) {
      if (Index >= Space.numPlacements(Parts))
        continue;
      ParallelConfig C = Space.place(Shape, Index);
      if (Space.contains(O.Id, C))
        Offered.push_back(C);
    }
  }
  if (Offered.empty())
    Offered = Space.all(O.Id);
  return Offered;
}

AdditiveCost::NodeParts AdditiveCost::nodeParts(const ir::Op &O,
                                                const ParallelConfig &C) const {
  NodeParts Parts;
  Parts.Own = ownTime(O, C);
  const ir::OpKindInfo &Info = ir::opKindInfo(O.Kind);
  for (unsigned Slot = 0; Slot < O.Inputs.size(); ++Slot) {
    ir::TensorId Tensor = O.Inputs[Slot];
    if (Tensor == ir::NoTensor || !Synced[Tensor] ||
        !(T.BackwardInputs[O.Id] >> Slot & 1))
      continue;
    std::vector<std::pair<ir::Region, DeviceId>> Uses;
    for (unsigned P = 0; P < C.numPartitions(); ++P)
      Uses.push_back(
          {Info.InputRegion(G, O, Slot, simulator::outputRegion(G, O, C, P),
                            simulator::reductionSlice(G, O, C, P)),
           C.device(P)});
    const ir::Tensor &Value = G.tensor(Tensor);
    double ElementSize = ir::dtypeSize(Value.Type.Type);
    std::map<std::vector<DeviceId>, int64_t> Groups;
    std::map<DeviceId, int64_t> Held;
    std::vector<simulator::GradientCells> AllCells =
        simulator::gradientCells(Value.Type.Dims, Uses);
    for (const simulator::GradientCells &Cells : AllCells) {
      if (Cells.Holders.size() > 1)
        Groups[Cells.Holders] += Cells.Elements;
      for (DeviceId D : Cells.Holders)
        Held[D] += Cells.Elements;
    }
    // The cells a device all-reduces, packed and unpacked around the
    // all-reduce (SimOptions::CopyTasks).
    std::map<DeviceId, double> Packing;
    if (Options.CopyTasks)
      Packing = simulator::packingTimes(AllCells, ElementSize, Cost, M);
    // Groups of other devices all-reduce at once.
    double Reduce = 0;
    for (auto &[Holders, Elements] : Groups) {
      // Many configs all-reduce the same bytes among the same devices.
      auto [At, New] = ReduceTimes.try_emplace(
          {Holders, double(Elements) * ElementSize}, 0.0);
      if (New)
        At->second =
            simulator::allReduceCost(M, Holders, At->first.second).Time;
      Reduce = std::max(Reduce, At->second);
    }
    double Update = 0;
    for (auto &[Device, Elements] : Held) {
      const simulator::DeviceType &Type = M.deviceType(Device);
      double Time = Cost.updateTime(Options.Optimizer, double(Elements),
                                    Value.Type.Type, Type);
      if (auto It = Packing.find(Device); It != Packing.end())
        Time += It->second;
      Update = std::max(Update, Time);
    }
    // A weight read by several ops (an unrolled layer's cells) is
    // synchronized once: each reader pays its share, which adds up to one
    // all-reduce when they take the same config.
    double Readers = double(SyncedReaders[Tensor]);
    Parts.Reduce[unsigned(SharedWeights::Once)] += Reduce / Readers;
    Parts.Update[unsigned(SharedWeights::Once)] += Update / Readers;
    Parts.Reduce[unsigned(SharedWeights::PerReader)] += Reduce;
    Parts.Update[unsigned(SharedWeights::PerReader)] += Update;
  }
  return Parts;
}

double AdditiveCost::charge(const NodeParts &Parts) const {
  unsigned Charge = unsigned(Shared);
  return Parts.Own + SyncWeight * Parts.Reduce[Charge] + Parts.Update[Charge];
}

double AdditiveCost::ownTime(const ir::Op &O, const ParallelConfig &C) const {
  bool HasBackward = T.BackwardInputs[O.Id] != 0;
  // Partitions are equal (degrees divide their dims); the slowest device's.
  double Compute = 0;
  const simulator::DeviceType *Seen = nullptr;
  for (unsigned P = 0; P < C.numPartitions(); ++P) {
    const simulator::DeviceType &Type = M.deviceType(C.device(P));
    if (&Type == Seen)
      continue;
    Seen = &Type;
    ir::Region Out = simulator::outputRegion(G, O, C, P);
    simulator::TaskTimes Times =
        Cost.opTimes({G, O, Out, simulator::reductionSlice(G, O, C, P)}, Type);
    Compute =
        std::max(Compute, Times.Forward + (HasBackward ? Times.Backward : 0));
  }
  double Stats = 0;
  if (simulator::isTrainingBatchNorm(O) && C.Degrees.size() > 1) {
    // Each channel block's partitions add their statistics: the first's.
    llvm::SmallVector<DeviceId, 8> Group;
    for (unsigned P = 0; P < C.numPartitions(); ++P)
      if (C.coordinate(P, 1) == 0)
        Group.push_back(C.device(P));
    if (Group.size() > 1) {
      const ir::Shape &Dims = G.outputType(O).Dims;
      double Bytes = 2.0 * double(Dims[1] / C.Degrees[1]) * sizeof(float);
      Stats = simulator::allReduceCost(M, Group, Bytes).Time *
              (HasBackward ? 2 : 1);
    }
  }
  return Compute + Stats;
}

void AdditiveCost::addNodes() {
  Synced = simulator::syncedTensors(T, WeightOnly);
  SyncedReaders.assign(G.numTensors(), 0);
  for (const ir::Op &O : G.ops())
    if (!WeightOnly[O.Id])
      for (unsigned Slot = 0; Slot < O.Inputs.size(); ++Slot) {
        ir::TensorId Tensor = O.Inputs[Slot];
        if (Tensor != ir::NoTensor && Synced[Tensor] &&
            (T.BackwardInputs[O.Id] >> Slot & 1))
          ++SyncedReaders[Tensor];
      }
  NodeOf.assign(G.numOps(), -1);
  for (const ir::Op &O : G.ops()) {
    if (WeightOnly[O.Id])
      continue;
    NodeOf[O.Id] = int(Ops.size());
    Ops.push_back(O.Id);
    Configs.push_back(offered(O.Id));
  }
}

AdditiveCost::EdgeOverlaps
AdditiveCost::overlaps(llvm::ArrayRef<ir::Region> Written,
                       llvm::ArrayRef<ir::Region> Needed, double ElementSize,
                       bool Summed, bool Gradient) const {
  // The hot loop of costing the edges: the overlap is measured in place.
  EdgeOverlaps E;
  E.Summed = Summed;
  E.Gradient = Gradient;
  E.Whole.assign(Needed.size(), -1);
  for (unsigned C = 0; C < Needed.size(); ++C) {
    const ir::Region &Need = Needed[C];
    size_t First = E.List.size();
    for (unsigned P = 0; P < Written.size(); ++P) {
      const ir::Region &Have = Written[P];
      int64_t Volume = 1;
      for (unsigned D = 0; D < Need.size() && Volume; ++D) {
        int64_t Begin = std::max(Need[D].Begin, Have[D].Begin);
        int64_t End = std::min(Need[D].End, Have[D].End);
        Volume = End > Begin ? Volume * (End - Begin) : 0;
      }
      if (Volume != 0)
        E.List.push_back({C, P, double(Volume) * ElementSize});
    }
    if (!Summed && E.List.size() == First + 1 &&
        Written[E.List[First].Producer] == Need)
      E.Whole[C] = int32_t(E.List[First].Producer);
  }
  if (Options.CopyTasks && M.deviceTypes().size() == 1)
    for (Overlap &O : E.List) {
      O.Copy = Cost.copyTime(O.Bytes, 1, false, M.deviceTypes()[0]);
      O.Add = Cost.copyTime(O.Bytes, 1, true, M.deviceTypes()[0]);
    }
  return E;
}

double AdditiveCost::edgeTime(const EdgeOverlaps &Overlaps,
                              const ParallelConfig &From,
                              const ParallelConfig &To) {
  // As the simulator runs them: each transfer holds every link of its route
  // for its latency and its bytes at the route's bandwidth, and a link
  // carries its transfers one after another; the gradient comes back the
  // same way.
  double Scale = Overlaps.Gradient ? 2 : 1;
  auto Busy = [&](unsigned Resource, double Seconds) {
    if (Load[Resource] == 0)
      Touched.push_back(Resource);
    Load[Resource] += Seconds;
  };
  unsigned Engines = M.numLinks(), Devices = M.numLinks() + M.numDevices();
  bool OneType = M.deviceTypes().size() == 1;
  auto Copy = [&](DeviceId D, const Overlap &O, bool Add) {
    Busy(Devices + D, OneType
                          ? (Add ? O.Add : O.Copy)
                          : Cost.copyTime(O.Bytes, 1, Add, M.deviceType(D)));
  };
  for (const Overlap &O : Overlaps.List) {
    DeviceId Src = From.device(O.Producer), Dst = To.device(O.Consumer);
    if (Src == Dst) {
      // A local part of a gathered input: copied in, its gradient added
      // back.
      if (Options.CopyTasks && Overlaps.Whole[O.Consumer] != int(O.Producer)) {
        Copy(Dst, O, Overlaps.Summed);
        if (Overlaps.Gradient)
          Copy(Dst, O, true);
      }
      continue;
    }
    double Time = M.transferTime(Src, Dst, O.Bytes);
    for (LinkId L : M.route(Src, Dst))
      Busy(L, Scale * Time);
    // A device in one communication at a time (--comm-model program): its
    // engine is busy with every transfer it sends or receives.
    if (Options.SerialCommunication) {
      Busy(Engines + Src, Scale * Time);
      Busy(Engines + Dst, Scale * Time);
    }
    // The receiver waits in the call.
    if (Options.BlockingCalls) {
      Busy(Devices + Dst, Time);
      if (Overlaps.Gradient)
        Busy(Devices + Src, Time);
    }
    // Packed, sent, unpacked; the gradient packed and added on its way
    // back.
    if (Options.CopyTasks) {
      Copy(Src, O, false);
      Copy(Dst, O, Overlaps.Summed);
      if (Overlaps.Gradient) {
        Copy(Dst, O, false);
        Copy(Src, O, true);
      }
    }
  }
  double Busiest = 0;
  for (unsigned R : Touched) {
    Busiest = std::max(Busiest, Load[R]);
    Load[R] = 0;
  }
  Touched.clear();
  return Busiest;
}

AdditiveCost::EdgeRegions
AdditiveCost::regions(unsigned Producer, unsigned Output,
                      llvm::ArrayRef<ParallelConfig> ProducerConfigs,
                      unsigned Consumer, unsigned Slot,
                      llvm::ArrayRef<ParallelConfig> ConsumerConfigs) const {
  const ir::Op &From = G.op(Ops[Producer]);
  const ir::Op &To = G.op(Ops[Consumer]);
  ir::TensorId Tensor = To.Inputs[Slot];
  EdgeRegions R;
  // Activations forward; their gradients back, as much again.
  bool GradFlows = T.BackwardInputs[From.Id] != 0 &&
                   T.BackwardInputs[To.Id] != 0 &&
                   (T.BackwardInputs[To.Id] >> Slot & 1) && T.NeedsGrad[Tensor];
  R.Scale = GradFlows ? 2 : 1;
  R.ElementSize = ir::dtypeSize(G.tensor(Tensor).Type.Type);
  for (const ParallelConfig &C : ProducerConfigs) {
    R.Written.emplace_back();
    for (unsigned P = 0; P < C.numPartitions(); ++P)
      R.Written.back().push_back(ir::outputRegionOf(
          G, From, Output, simulator::outputRegion(G, From, C, P),
          simulator::reductionSlice(G, From, C, P)));
  }
  const ir::OpKindInfo &Info = ir::opKindInfo(To.Kind);
  for (const ParallelConfig &C : ConsumerConfigs) {
    R.Needed.emplace_back();
    for (unsigned P = 0; P < C.numPartitions(); ++P)
      R.Needed.back().push_back(
          Info.InputRegion(G, To, Slot, simulator::outputRegion(G, To, C, P),
                           simulator::reductionSlice(G, To, C, P)));
  }
  return R;
}

/// Each config's shape (its degrees, whatever its devices; an offered
/// shape comes in up to two placements) as an index into Shapes, which
/// gets the first config of each shape.
static std::vector<unsigned> shapesOf(llvm::ArrayRef<ParallelConfig> Configs,
                                      std::vector<ParallelConfig> &Shapes) {
  std::vector<unsigned> ShapeOf;
  for (const ParallelConfig &C : Configs) {
    unsigned Shape = 0;
    while (Shape < Shapes.size() && !(Shapes[Shape].Degrees == C.Degrees &&
                                      Shapes[Shape].Reduction == C.Reduction))
      ++Shape;
    if (Shape == Shapes.size())
      Shapes.push_back(C);
    ShapeOf.push_back(Shape);
  }
  return ShapeOf;
}

void AdditiveCost::addEdge(unsigned Producer, unsigned Output,
                           unsigned Consumer, unsigned Slot) {
  // Which parts overlap and by how much depends on the configs' shapes, not
  // on their devices: measured once per pair of shapes (a quarter of the
  // pairs of configs where each shape is offered in two placements).
  std::vector<ParallelConfig> ProducerShapes, ConsumerShapes;
  std::vector<unsigned> ProducerShape =
      shapesOf(Configs[Producer], ProducerShapes);
  std::vector<unsigned> ConsumerShape =
      shapesOf(Configs[Consumer], ConsumerShapes);
  EdgeRegions R =
      regions(Producer, Output, ProducerShapes, Consumer, Slot, ConsumerShapes);
  size_t KP = Configs[Producer].size(), KC = Configs[Consumer].size();
  std::vector<double> &E = edge(Producer, Consumer);
  if (E.empty())
    E.assign(KP * KC, 0.0);
  Neighbours[Producer].insert(Consumer);
  Neighbours[Consumer].insert(Producer);
  for (unsigned SP = 0; SP < ProducerShapes.size(); ++SP)
    for (unsigned SC = 0; SC < ConsumerShapes.size(); ++SC) {
      EdgeOverlaps List =
          overlaps(R.Written[SP], R.Needed[SC], R.ElementSize,
                   ProducerShapes[SP].Reduction > 1, R.Scale > 1);
      for (size_t I = 0; I < KP; ++I) {
        if (ProducerShape[I] != SP)
          continue;
        for (size_t J = 0; J < KC; ++J)
          if (ConsumerShape[J] == SC)
            E[Producer < Consumer ? I * KC + J : J * KP + I] +=
                edgeTime(List, Configs[Producer][I], Configs[Consumer][J]);
      }
    }
}

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

double AdditiveCost::work() const {
  // Per edge: every pair of configs, every pair of their partitions.
  std::vector<double> Parts(Ops.size(), 0);
  for (unsigned J = 0; J < Ops.size(); ++J)
    for (const ParallelConfig &C : Configs[J])
      Parts[J] += C.numPartitions();
  double Work = 0;
  forEachEdge([&](unsigned Producer, unsigned, unsigned Consumer, unsigned) {
    Work += Parts[Producer] * Parts[Consumer];
  });
  return Work;
}

std::optional<Strategy> AdditiveCost::minimize(const Strategy &Base,
                                               double MaxWork) {
  if (work() > MaxWork)
    return std::nullopt;
  // Each node's parts are costed once, then charged as set now.
  if (CostedParts.empty())
    for (unsigned J = 0; J < Ops.size(); ++J) {
      CostedParts.emplace_back();
      for (const ParallelConfig &C : Configs[J])
        CostedParts.back().push_back(nodeParts(G.op(Ops[J]), C));
    }
  NodeCosts.clear();
  for (unsigned J = 0; J < Ops.size(); ++J) {
    NodeCosts.emplace_back();
    for (const NodeParts &P : CostedParts[J])
      NodeCosts.back().push_back(charge(P));
  }
  if (!EdgesCosted) {
    Edges.clear();
    Neighbours.assign(Ops.size(), {});
    forEachEdge(
        [&](unsigned Producer, unsigned Output, unsigned Consumer,
            unsigned Slot) { addEdge(Producer, Output, Consumer, Slot); });
    CostedEdges = Edges;
    CostedNeighbours = Neighbours;
    EdgesCosted = true;
  } else {
    Edges = CostedEdges;
    Neighbours = CostedNeighbours;
  }
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
      WeightOnly(simulator::weightOnlyOps(T.G)),
      Load(M.numLinks() + 2 * M.numDevices(), 0.0) {
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
                      S[Ops[Producer]], S[Ops[Consumer]]);
  });
  return Total;
}

std::vector<AdditiveCost::Change>
AdditiveCost::changesBySum(const Strategy &S) const {
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
  // Node J's charge and its costed edges' with J in config C.
  auto Local = [&](unsigned J, uint32_t C) {
    double Total = charge(CostedParts[J][C]);
    for (unsigned K : CostedNeighbours[J])
      Total += entry(CostedEdges.at({std::min(J, K), std::max(J, K)}), J, C, K,
                     uint32_t(Index[K]));
    return Total;
  };
  for (unsigned J = 0; J < Ops.size(); ++J) {
    if (Index[J] < 0 ||
        llvm::any_of(CostedNeighbours[J],
                     [&](unsigned K) { return Index[K] < 0; }) ||
        readsSharedWeight(G.op(Ops[J])))
      continue;
    double Now = Local(J, uint32_t(Index[J]));
    for (uint32_t C = 0; C < Configs[J].size(); ++C)
      if (int(C) != Index[J])
        Changes.push_back({Ops[J], Configs[J][C], Local(J, C) - Now});
  }
  std::stable_sort(
      Changes.begin(), Changes.end(),
      [](const Change &A, const Change &B) { return A.Added < B.Added; });
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
