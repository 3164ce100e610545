//===- simulator/TaskGraphSync.cpp - Parameters' gradient sync ------------===//
//
// The third layer of the task graph (TaskGraphOps.cpp builds an op's own
// tasks, TaskGraphEdges.cpp the edges of its inputs): each parameter's
// gradient synchronization among the partitions that hold replicas of it,
// alone or in gradient buckets, as ring or tree all-reduces over the
// machine's links, and its optimizer updates; and the costs of those
// collectives, which OptCNN's sum (soap_search/Elimination.h) charges too.
//
//===----------------------------------------------------------------------===//

#include "simulator/TaskGraph.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/MathExtras.h"
#include <algorithm>
#include <cmath>
#include <map>

namespace onnx2soap::simulator {

void TaskGraph::buildTensorSync(ir::TensorId Tensor) {
  TensorSync &Sync = Syncs[Tensor];
  Sync.Uses.clear();
  Sync.Updates.clear();
  // Every partition of every ordinary reader whose backward writes a
  // gradient of the tensor.
  for (auto [Id, Slot] : gradientReads(Tensor)) {
    const ir::Op &O = G.op(Id);
    const ParallelConfig &C = S[Id];
    const ir::OpKindInfo &Info = ir::opKindInfo(O.Kind);
    for (unsigned P = 0; P < C.numPartitions(); ++P)
      Sync.Uses.push_back(
          {Info.InputRegion(G, O, Slot, outputRegion(G, O, C, P),
                            reductionSlice(G, O, C, P)),
           C.device(P), PerOp[Id].Backward[P]});
  }
  std::vector<std::pair<ir::Region, DeviceId>> Regions;
  for (const TensorUse &U : Sync.Uses)
    Regions.push_back({U.Region, U.Device});
  const ir::Tensor &Value = G.tensor(Tensor);
  Sync.Cells = gradientCells(Value.Type.Dims, Regions);

  // Per device holding some of it: the optimizer update, after the
  // backward tasks there that write its gradient (and the all-reduces of
  // its cells: buildBuckets).
  std::map<DeviceId, int64_t> Held;
  for (const GradientCells &Cells : Sync.Cells)
    for (DeviceId D : Cells.Holders)
      Held[D] += Cells.Elements;
  double ElementSize = ir::dtypeSize(Value.Type.Type);
  std::map<DeviceId, double> Packing;
  if (Options.CopyTasks)
    Packing = packingTimes(Sync.Cells, ElementSize, Cost, M);
  // A device holds one box of the tensor: the bounding box of what its
  // partitions read (a weight-only op's result: all of it). A region its
  // partitions read that is not the box is a slice of its own, filled from
  // the box once a step, and its gradient added back once (codegen's
  // Slice): its bytes and boxes per device.
  bool Reshaped = Value.Role == ir::TensorRole::Activation;
  std::map<DeviceId, std::vector<ir::Region>> Read;
  for (const TensorUse &U : Sync.Uses)
    Read[U.Device].push_back(U.Region);
  struct SliceBytes {
    double Bytes = 0, Buffers = 0; ///< Buffers: each rounded as allocated
    unsigned Count = 0;
  };
  std::map<DeviceId, SliceBytes> Slices;
  for (auto &[Device, Regions] : Read) {
    ir::Region Box = Reshaped ? ir::fullRegion(Value.Type.Dims) : Regions[0];
    for (const ir::Region &R : Regions)
      Box = ir::enclose(Box, R);
    llvm::sort(Regions);
    Regions.erase(std::unique(Regions.begin(), Regions.end()), Regions.end());
    for (const ir::Region &R : Regions)
      if (R != Box) {
        double Bytes = double(ir::regionVolume(R)) * ElementSize;
        Slices[Device].Bytes += Bytes;
        Slices[Device].Buffers += alignedBufferBytes(Bytes);
        ++Slices[Device].Count;
      }
  }
  for (auto &[Device, Elements] : Held) {
    Task Update;
    Update.Kind = TaskKind::Update;
    Update.Key = {SegmentLevel[SegmentOf[Tensor]], 2, Tensor, Device, 0};
    Update.Duration = Cost.updateTime(Options.Optimizer, double(Elements),
                                      Value.Type.Type, M.deviceType(Device));
    // The all-reduced cells are packed into the message buffer and
    // unpacked after: charged here, where the device holds them.
    const DeviceType &Type = M.deviceType(Device);
    if (Options.CopyTasks) {
      if (auto It = Packing.find(Device); It != Packing.end())
        Update.CopySeconds += It->second;
      // Its slices filled and their gradients added back, charged here too
      // (the program fills them before the first reader's forward).
      if (auto It = Slices.find(Device); It != Slices.end())
        Update.CopySeconds +=
            Cost.copyTime(It->second.Bytes, It->second.Count, false, Type) +
            Cost.copyTime(It->second.Bytes, It->second.Count, true, Type);
      Update.Duration += Update.CopySeconds;
    }
    Update.Tensor = Tensor;
    Update.Device = Device;
    Update.Resources = {Device};
    Update.Bytes = double(Elements) * ElementSize;
    // The box, its gradient and optimizer slots; a weight-only op's result
    // (a weight the exporter reshaped) and its gradient whole, and what it
    // is computed from (SourceBytes), as generated programs hold them.
    Update.ParamMemory = Reshaped
                             ? 2 * alignedBufferBytes(Value.Type.byteSize()) +
                                   SourceBytes[Tensor]
                             : alignedBufferBytes(Update.Bytes) *
                                   (2 + optimizerStateCount(Options.Optimizer));
    // And each slice with its gradient.
    if (auto It = Slices.find(Device); It != Slices.end())
      Update.ParamMemory += 2 * It->second.Buffers;
    TaskId Id = addTask(std::move(Update));
    for (const TensorUse &U : Sync.Uses)
      if (U.Device == Device)
        addEdge(U.Backward, Id);
    Sync.Updates.push_back(Id);
  }
}

void TaskGraph::buildBuckets(uint32_t Segment) {
  std::vector<TaskId> &Owned = SegmentTasks[Segment];
  Owned.clear();
  // One all-reduce per group of devices (and element type): every cell of
  // the segment's tensors summed over exactly those devices, after the
  // backward tasks on them that write any of it, before those tensors'
  // updates there.
  struct Bucket {
    double Bytes = 0;
    std::vector<BucketPart> Parts;
    std::vector<TaskId> After;
  };
  std::map<std::pair<std::vector<DeviceId>, ir::DType>, Bucket> Buckets;
  for (ir::TensorId Tensor : Segments[Segment]) {
    const TensorSync &Sync = Syncs[Tensor];
    ir::DType Type = G.tensor(Tensor).Type.Type;
    for (uint32_t Index = 0; Index < Sync.Cells.size(); ++Index) {
      const GradientCells &Cells = Sync.Cells[Index];
      if (Cells.Holders.size() < 2)
        continue;
      Bucket &B = Buckets[{Cells.Holders, Type}];
      B.Bytes += double(Cells.Elements) * ir::dtypeSize(Type);
      B.Parts.push_back({Tensor, Index});
      for (const TensorUse &U : Sync.Uses)
        if (std::binary_search(Cells.Holders.begin(), Cells.Holders.end(),
                               U.Device))
          B.After.push_back(U.Backward);
    }
  }
  uint32_t Index = 0;
  for (auto &[Key, B] : Buckets) {
    const std::vector<DeviceId> &Holders = Key.first;
    TaskId Sync = addAllReduce(
        TaskKind::GradAllReduce, Holders, B.Bytes,
        {SegmentLevel[Segment], 1, Segments[Segment].front(), Index++, 0},
        ir::NoOp, B.Parts.front().Tensor);
    llvm::sort(B.After);
    B.After.erase(std::unique(B.After.begin(), B.After.end()), B.After.end());
    for (TaskId Backward : B.After)
      addEdge(Backward, Sync);
    // One edge per tensor and holder.
    for (ir::TensorId Tensor : bucketTensors(B.Parts))
      for (TaskId Update : Syncs[Tensor].Updates)
        if (std::binary_search(Holders.begin(), Holders.end(),
                               Tasks[Update].Device))
          addEdge(Sync, Update, /*Fresh=*/true);
    if (Parts.size() <= Sync)
      Parts.resize(Sync + 1);
    Parts[Sync] = std::move(B.Parts);
    Owned.push_back(Sync);
  }
}

std::map<DeviceId, double> packingTimes(llvm::ArrayRef<GradientCells> Cells,
                                        double ElementSize,
                                        const CostModel &Cost,
                                        const Machine &M) {
  std::map<DeviceId, std::pair<int64_t, unsigned>> Packed;
  for (const GradientCells &Group : Cells)
    if (Group.Holders.size() > 1)
      for (DeviceId D : Group.Holders) {
        Packed[D].first += Group.Elements;
        Packed[D].second += Group.Boxes.size();
      }
  std::map<DeviceId, double> Times;
  for (auto &[Device, Elements] : Packed)
    Times[Device] =
        2 * Cost.copyTime(double(Elements.first) * ElementSize, Elements.second,
                          false, M.deviceType(Device));
  return Times;
}

std::vector<GradientCells>
gradientCells(const ir::Shape &Dims,
              llvm::ArrayRef<std::pair<ir::Region, DeviceId>> Uses) {
  // Cut the parameter into cells at every boundary of every use's region;
  // each cell's gradient is summed over the devices whose regions contain
  // it. Cells shared by the same devices form one group.
  unsigned Rank = Dims.size();
  std::vector<std::vector<int64_t>> Cuts(Rank);
  for (unsigned D = 0; D < Rank; ++D) {
    Cuts[D] = {0, Dims[D]};
    for (const auto &Use : Uses)
      Cuts[D].insert(Cuts[D].end(), {Use.first[D].Begin, Use.first[D].End});
    std::sort(Cuts[D].begin(), Cuts[D].end());
    Cuts[D].erase(std::unique(Cuts[D].begin(), Cuts[D].end()), Cuts[D].end());
  }
  std::map<std::vector<DeviceId>, GradientCells> Groups;
  std::vector<unsigned> Cell(Rank, 0);
  while (true) {
    ir::Region Box(Rank);
    for (unsigned D = 0; D < Rank; ++D)
      Box[D] = {Cuts[D][Cell[D]], Cuts[D][Cell[D] + 1]};
    std::vector<DeviceId> Holders;
    for (const auto &Use : Uses)
      if (ir::overlapVolume(Box, Use.first) > 0)
        Holders.push_back(Use.second);
    std::sort(Holders.begin(), Holders.end());
    Holders.erase(std::unique(Holders.begin(), Holders.end()), Holders.end());
    if (!Holders.empty() && ir::regionVolume(Box) > 0) {
      GradientCells &Group = Groups[Holders];
      Group.Holders = Holders;
      Group.Boxes.push_back(Box);
      Group.Elements += ir::regionVolume(Box);
    }
    unsigned D = Rank;
    while (D > 0 && ++Cell[D - 1] + 1 >= Cuts[D - 1].size())
      Cell[--D] = 0;
    if (D == 0)
      break;
  }
  std::vector<GradientCells> Result;
  for (auto &Entry : Groups)
    Result.push_back(std::move(Entry.second));
  return Result;
}

TaskId TaskGraph::addAllReduce(TaskKind Kind, llvm::ArrayRef<DeviceId> Devices,
                               double Bytes, TaskKey Key, ir::OpId Op,
                               ir::TensorId Tensor) {
  Task Collective;
  Collective.Kind = Kind;
  Collective.Key = Key;
  Collective.Op = Op;
  Collective.Tensor = Tensor;
  Collective.Group.assign(Devices.begin(), Devices.end());
  std::sort(Collective.Group.begin(), Collective.Group.end());
  Collective.Device = Collective.Group.front();
  CollectiveCost C = allReduceCost(M, Collective.Group, Bytes);
  Collective.Duration = C.Time;
  Collective.Bytes = C.BytesPerDevice;
  // BatchNorm statistics are all-reduced in place (the program's own small
  // buffers); gradients are packed into the message buffer.
  if (Kind == TaskKind::GradAllReduce)
    Collective.MessageBytes = Bytes;
  for (LinkId L : C.Links)
    Collective.Resources.push_back(M.numDevices() + L);
  if (Options.SerialCommunication)
    for (DeviceId D : Collective.Group)
      Collective.Resources.push_back(commEngine(D));
  // Members wait in the call: always for BatchNorm's sums, which the next
  // phase reads; for gradients on CPU ranks, whose MPI all-reduce sums
  // inside the call (NCCL's runs beside the backward pass).
  if (Options.BlockingCalls && (Kind == TaskKind::StatsAllReduce ||
                                llvm::all_of(Collective.Group, [&](DeviceId D) {
                                  return M.deviceType(D).CudaArch.empty();
                                })))
    for (DeviceId D : Collective.Group)
      Collective.Resources.push_back(D);
  return addTask(std::move(Collective));
}

namespace {
/// The links a collective's messages use, each with how many of them cross
/// it (a count per link of the machine, and the links counted so far); the
/// collective's bandwidth time is the busiest link's. Flat, not a map: all-
/// reduces are costed for every config OptCNN's sum offers and every
/// synchronization the task graph builds.
struct LinkLoad {
  std::vector<unsigned> Count;
  llvm::SmallVector<LinkId, 16> Used;

  explicit LinkLoad(const Machine &M) : Count(M.numLinks(), 0) {}
  /// Adds the links of the route From -> To; returns its latency.
  double addRoute(const Machine &M, DeviceId From, DeviceId To) {
    for (LinkId L : M.route(From, To))
      if (Count[L]++ == 0)
        Used.push_back(L);
    return M.routeLatency(From, To);
  }
  double busiest(const Machine &M, double Bytes) const {
    double Time = 0;
    for (LinkId L : Used)
      Time = std::max(Time, Count[L] * Bytes / M.link(L).Bandwidth);
    return Time;
  }
};
} // namespace

CollectiveCost allReduceCost(const Machine &M, llvm::ArrayRef<DeviceId> Devices,
                             double Bytes) {
  // Ring (reduce-scatter then all-gather) over the devices in id order: each
  // ring hop carries 2(n-1)/n of the data; a link used by k hops carries k
  // times that; every one of the 2(n-1) steps pays the slowest hop's latency.
  size_t N = Devices.size();
  LinkLoad Ring(M);
  double RingLatency = 0;
  for (size_t I = 0; I < N; ++I)
    RingLatency = std::max(RingLatency,
                           Ring.addRoute(M, Devices[I], Devices[(I + 1) % N]));
  double PerDevice = 2.0 * double(N - 1) / double(N) * Bytes;
  double RingTime =
      2.0 * double(N - 1) * RingLatency + Ring.busiest(M, PerDevice);

  // Binary tree over the devices in id order (position i's parent is
  // (i-1)/2): the data goes up to the root, reduced on the way, and back
  // down, pipelined in chunks, so each level costs its latency once each way
  // and each tree edge carries the data once in each direction. Fewer
  // latency steps (2 log2 n instead of 2(n-1)): the better algorithm for
  // small messages (BatchNorm statistics) on many devices. Every device
  // still sends 2(n-1)/n of the data on average.
  LinkLoad Tree(M);
  double TreeLatency = 0;
  for (size_t I = 1; I < N; ++I) {
    DeviceId Child = Devices[I], Parent = Devices[(I - 1) / 2];
    TreeLatency = std::max({TreeLatency, Tree.addRoute(M, Child, Parent),
                            Tree.addRoute(M, Parent, Child)});
  }
  // The deepest position, n-1, is on level floor(log2 n).
  double TreeTime =
      2.0 * llvm::Log2_64(N) * TreeLatency + Tree.busiest(M, Bytes);

  CollectiveCost C;
  C.BytesPerDevice = PerDevice;
  C.Tree = TreeTime < RingTime;
  C.Time = C.Tree ? TreeTime : RingTime;
  // A measured time for a group of this shape replaces the model's; the
  // collective still holds the links of the algorithm the model would
  // choose, for contention.
  if (const SizeTable *Measured = M.allReduceTable(Devices))
    C.Time = Measured->time(Bytes);
  const LinkLoad &Used = C.Tree ? Tree : Ring;
  C.Links.assign(Used.Used.begin(), Used.Used.end());
  llvm::sort(C.Links); // in link order, as the task's resources
  return C;
}

double ringBytesSent(double Bytes, unsigned ElementSize, size_t N,
                     size_t Position) {
  if (N < 2)
    return 0;
  int64_t Count = std::llround(Bytes / ElementSize);
  int64_t Members = int64_t(N);
  auto Length = [&](int64_t C) {
    C %= Members;
    return Count * (C + 1) / Members - Count * C / Members;
  };
  // Reduce-scatter sends every chunk but Position + 1, all-gather every one
  // but Position + 2.
  int64_t P = int64_t(Position);
  return double(2 * Count - Length(P + 1) - Length(P + 2)) * ElementSize;
}

} // namespace onnx2soap::simulator
