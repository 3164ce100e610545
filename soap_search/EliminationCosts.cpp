//===- soap_search/EliminationCosts.cpp - OptCNN's cost tables ------------===//
//
// The tables OptCNN's sum is minimized over (Elimination.h; Elimination.cpp
// eliminates the graph): the configs offered to each op; each op's time
// under each (its partitions' compute and BatchNorm statistics, its
// weights' gradient all-reduce and update, a shared weight's split among
// its readers); and for each edge the time of the transfers between every
// pair of producer and consumer configs, from the overlaps of the regions
// their partitions write and read.
//
//===----------------------------------------------------------------------===//
#include "ir/BatchDims.h"
#include "ir/OpKind.h"
#include "soap_search/Elimination.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/MathExtras.h"
#include <algorithm>
#include <map>

namespace onnx2soap::soap_search {

using simulator::DeviceId;
using simulator::LinkId;
using simulator::ParallelConfig;

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

void AdditiveCost::costTheNodes() {
  // Nodes alike are found among those of the same kind and output dims.
  std::map<std::pair<ir::OpKind, ir::Shape>, std::vector<unsigned>> Costed;
  CostedParts.assign(Ops.size(), {});
  NodesCosted = 0;
  for (unsigned J = 0; J < Ops.size(); ++J) {
    const ir::Op &O = G.op(Ops[J]);
    std::vector<unsigned> &Seen = Costed[{O.Kind, G.outputType(O).Dims}];
    auto Alike = llvm::find_if(
        Seen, [&](unsigned First) { return alikeNodes(First, J); });
    if (Alike != Seen.end()) {
      CostedParts[J] = CostedParts[*Alike];
      continue;
    }
    Seen.push_back(J);
    ++NodesCosted;
    for (const ParallelConfig &C : Configs[J])
      CostedParts[J].push_back(nodeParts(O, C));
  }
}

bool AdditiveCost::alikeNodes(unsigned A, unsigned B) const {
  // What nodeParts() reads: the op's kind and attributes, the types it
  // reads and writes (their regions follow), the configs offered, which
  // inputs the backward reads, and which of those are weights synchronized
  // among how many readers. A CostModel times a partition from nothing
  // else (CostModel.h), so their costs agree bit for bit. On 8 K80s 58 of
  // ResNet-101's 348 ops with tasks cost differently, 108 of Inception-v3's
  // 322, 14 of RNNLM's 170 unrolled.
  const ir::Op &X = G.op(Ops[A]), &Y = G.op(Ops[B]);
  if (X.Kind != Y.Kind || X.Inputs.size() != Y.Inputs.size() ||
      X.Outputs.size() != Y.Outputs.size() ||
      T.BackwardInputs[X.Id] != T.BackwardInputs[Y.Id] ||
      !(X.Attrs == Y.Attrs) || Configs[A] != Configs[B])
    return false;
  auto Alike = [&](ir::TensorId P, ir::TensorId Q) {
    if (P == ir::NoTensor || Q == ir::NoTensor)
      return P == Q;
    const ir::Tensor &U = G.tensor(P), &V = G.tensor(Q);
    return U.Type == V.Type && U.BatchDim == V.BatchDim &&
           Synced[P] == Synced[Q] && SyncedReaders[P] == SyncedReaders[Q];
  };
  for (unsigned Slot = 0; Slot < X.Inputs.size(); ++Slot)
    if (!Alike(X.Inputs[Slot], Y.Inputs[Slot]))
      return false;
  for (unsigned Slot = 0; Slot < X.Outputs.size(); ++Slot)
    if (!Alike(X.Outputs[Slot], Y.Outputs[Slot]))
      return false;
  return true;
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
  // The hot loop of costing the edges.
  EdgeOverlaps E;
  E.Summed = Summed;
  E.Gradient = Gradient;
  E.Whole.assign(Needed.size(), -1);
  for (unsigned C = 0; C < Needed.size(); ++C) {
    const ir::Region &Need = Needed[C];
    size_t First = E.List.size();
    for (unsigned P = 0; P < Written.size(); ++P) {
      int64_t Volume = ir::overlapVolume(Need, Written[P]);
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
                              const ParallelConfig &To,
                              EdgeScratch &Scratch) const {
  // As the simulator runs them: each transfer holds every link of its route
  // for its latency and its bytes at the route's bandwidth, and a link
  // carries its transfers one after another; the gradient comes back the
  // same way.
  double Scale = Overlaps.Gradient ? 2 : 1;
  std::vector<double> &Load = Scratch.Load;
  std::vector<unsigned> &Touched = Scratch.Touched;
  // Many transfers (an edge that regathers the batch: every pair of
  // partitions) load every resource: then the loads are added blindly and
  // all of them read at the end, instead of noting each resource first
  // touched (a test and a branch per link of every route).
  bool Dense = 2 * Overlaps.List.size() >= Load.size();
  auto Busy = [&](unsigned Resource, double Seconds) {
    if (!Dense && Load[Resource] == 0)
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
  if (Dense) {
    for (double &Seconds : Load) {
      Busiest = std::max(Busiest, Seconds);
      Seconds = 0;
    }
    return Busiest;
  }
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

AdditiveCost::EdgeRegions AdditiveCost::shapeRegions(const EdgeJob &Job) const {
  std::vector<ParallelConfig> ProducerShapes, ConsumerShapes;
  shapesOf(Configs[Job.Producer], ProducerShapes);
  shapesOf(Configs[Job.Consumer], ConsumerShapes);
  return regions(Job.Producer, Job.Output, ProducerShapes, Job.Consumer,
                 Job.Slot, ConsumerShapes);
}

std::vector<double> AdditiveCost::costEdge(const EdgeJob &Job,
                                           std::optional<EdgeRegions> Listed,
                                           EdgeScratch &Scratch) const {
  // Which parts overlap and by how much depends on the configs' shapes, not
  // on their devices: measured once per pair of shapes (a quarter of the
  // pairs of configs where each shape is offered in two placements).
  unsigned Producer = Job.Producer, Consumer = Job.Consumer;
  std::vector<ParallelConfig> ProducerShapes, ConsumerShapes;
  std::vector<unsigned> ProducerShape =
      shapesOf(Configs[Producer], ProducerShapes);
  std::vector<unsigned> ConsumerShape =
      shapesOf(Configs[Consumer], ConsumerShapes);
  EdgeRegions R = Listed ? std::move(*Listed)
                         : regions(Producer, Job.Output, ProducerShapes,
                                   Consumer, Job.Slot, ConsumerShapes);
  size_t KP = Configs[Producer].size(), KC = Configs[Consumer].size();
  std::vector<double> E(KP * KC, 0.0);
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
            E[Producer < Consumer ? I * KC + J : J * KP + I] += edgeTime(
                List, Configs[Producer][I], Configs[Consumer][J], Scratch);
      }
    }
  return E;
}

/// Appends Configs to Key, a row of numbers.
static void addConfigs(std::vector<int64_t> &Key,
                       llvm::ArrayRef<ParallelConfig> Configs) {
  Key.push_back(int64_t(Configs.size()));
  for (const ParallelConfig &C : Configs) {
    Key.push_back(int64_t(C.Degrees.size()));
    Key.insert(Key.end(), C.Degrees.begin(), C.Degrees.end());
    Key.insert(Key.end(), {int64_t(C.Reduction), int64_t(C.FirstDevice),
                           int64_t(C.DeviceStride)});
  }
}

/// Appends the regions of each shape's partitions to Key.
static void addRegions(std::vector<int64_t> &Key,
                       const std::vector<std::vector<ir::Region>> &Shapes) {
  Key.push_back(int64_t(Shapes.size()));
  for (const std::vector<ir::Region> &Parts : Shapes) {
    Key.push_back(int64_t(Parts.size()));
    for (const ir::Region &R : Parts) {
      Key.push_back(int64_t(R.size()));
      for (const ir::Interval &I : R)
        Key.insert(Key.end(), {I.Begin, I.End});
    }
  }
}

void AdditiveCost::groupEdges(EdgeWork &Work) const {
  // Edges between ops of other kinds may still read and write alike (a
  // ReLU after a BatchNorm or after an Add): not the kinds.
  std::map<std::vector<int64_t>, std::vector<size_t>> Groups;
  std::vector<int64_t> Key;
  for (size_t I = 0; I < Work.Jobs.size(); ++I) {
    const EdgeJob &Job = Work.Jobs[I];
    const ir::Op &To = G.op(Ops[Job.Consumer]);
    Key.clear();
    addConfigs(Key, Configs[Job.Producer]);
    addConfigs(Key, Configs[Job.Consumer]);
    const ir::Shape &Dims = G.tensor(To.Inputs[Job.Slot]).Type.Dims;
    Key.insert(Key.end(), Dims.begin(), Dims.end());
    Key.push_back(int64_t(Job.Producer < Job.Consumer));
    Groups[Key].push_back(I);
  }
  for (auto &[Ignored, Members] : Groups)
    Work.Groups.push_back(std::move(Members));
}

void AdditiveCost::alikeEdges(EdgeWork &Work) const {
  // Within a group, everything else costEdge() reads: the regions the
  // shapes write and read, the element size, whether the gradient comes
  // back. The regions are kept for costEdge().
  size_t Count = Work.Jobs.size();
  Work.SameAs.resize(Count);
  Work.Regions.assign(Count, {});
  std::vector<int64_t> Key;
  for (const std::vector<size_t> &Members : Work.Groups) {
    if (Members.size() == 1) {
      Work.SameAs[Members[0]] = Members[0];
      continue;
    }
    std::map<std::vector<int64_t>, size_t> Seen;
    for (size_t I : Members) {
      EdgeRegions R = shapeRegions(Work.Jobs[I]);
      Key.clear();
      addRegions(Key, R.Written);
      addRegions(Key, R.Needed);
      Key.insert(Key.end(), {int64_t(llvm::DoubleToBits(R.ElementSize)),
                             int64_t(llvm::DoubleToBits(R.Scale))});
      auto [At, New] = Seen.try_emplace(Key, I);
      Work.SameAs[I] = At->second;
      if (New)
        Work.Regions[I] = std::move(R);
    }
  }
  Work.Alike = true;
}

std::shared_ptr<AdditiveCost::EdgeWork> AdditiveCost::prepareEdges() {
  if (!Prepared) {
    Prepared = std::make_shared<EdgeWork>();
    Prepared->Jobs = edgeJobs();
    std::vector<double> Parts = partitionsOffered();
    for (const EdgeJob &Job : Prepared->Jobs)
      Prepared->Pairs.push_back(Parts[Job.Producer] * Parts[Job.Consumer]);
    groupEdges(*Prepared);
  }
  return Prepared;
}

std::shared_ptr<AdditiveCost::EdgeWork> AdditiveCost::listAlikeEdges() {
  std::shared_ptr<EdgeWork> Work = prepareEdges();
  if (!Work->Alike)
    alikeEdges(*Work);
  return Work;
}

void AdditiveCost::costEdges(EdgeWork &Work) const {
  EdgeScratch Mine = scratch();
  size_t Count = Work.Order.size();
  for (size_t I; (I = Work.Next.fetch_add(1)) < Count;) {
    size_t Job = Work.Order[I];
    Work.Tables[Job] =
        costEdge(Work.Jobs[Job], std::move(Work.Regions[Job]), Mine);
    if (Work.Done.fetch_add(1) + 1 == Count) {
      std::lock_guard<std::mutex> Guard(Work.Lock);
      Work.AllDone.notify_all();
    }
  }
}

void AdditiveCost::costTheEdges() {
  std::shared_ptr<EdgeWork> Work = listAlikeEdges();
  for (size_t I = 0; I < Work->Jobs.size(); ++I)
    if (Work->SameAs[I] == I)
      Work->Order.push_back(I);
  std::stable_sort(
      Work->Order.begin(), Work->Order.end(),
      [&](size_t A, size_t B) { return Work->Pairs[A] > Work->Pairs[B]; });
  Work->Tables.resize(Work->Jobs.size());
  {
    std::lock_guard<std::mutex> Guard(SharingLock);
    Sharing = Work;
  }
  costEdges(*Work);
  {
    std::unique_lock<std::mutex> Lock(Work->Lock);
    Work->AllDone.wait(Lock,
                       [&] { return Work->Done.load() == Work->Order.size(); });
  }
  {
    std::lock_guard<std::mutex> Guard(SharingLock);
    Sharing.reset();
  }
  // In graph order: parallel edges between two nodes add up as they did
  // when each was costed in turn.
  CostedEdges.clear();
  CostedNeighbours.assign(Ops.size(), {});
  for (size_t I = 0; I < Work->Jobs.size(); ++I) {
    const EdgeJob &Job = Work->Jobs[I];
    std::vector<double> &E = edgeIn(CostedEdges, Job.Producer, Job.Consumer);
    const std::vector<double> &Table = Work->Tables[Work->SameAs[I]];
    if (E.empty())
      E.assign(Table.size(), 0.0);
    for (size_t K = 0; K < E.size(); ++K)
      E[K] += Table[K];
    CostedNeighbours[Job.Producer].insert(Job.Consumer);
    CostedNeighbours[Job.Consumer].insert(Job.Producer);
  }
  EdgesCosted = true;
  // The jobs and which are alike stay for work() and edgesCosted(); the
  // tables are added up.
  Work->Tables = {};
  Work->Regions = {};
}

void AdditiveCost::helpCostEdges() {
  std::shared_ptr<EdgeWork> Work;
  {
    std::lock_guard<std::mutex> Guard(SharingLock);
    Work = Sharing;
  }
  if (Work)
    costEdges(*Work);
}

} // namespace onnx2soap::soap_search
