//===- simulator/TaskGraph.h - Tasks of one training iteration -*- C++ -*-===//
//
// FlexFlow's task graph (paper §5.1) for one training iteration under a
// strategy: per partition a forward and a backward task on its device; per
// non-empty overlap between what a producer partition writes and what a
// consumer partition reads, on different devices, a transfer (forward) and
// the gradient's way back (backward); per parameter shard held by several
// devices a gradient all-reduce; per parameter and device an optimizer
// update; for BatchNorm split over samples or space, the all-reduce of its
// batch statistics (the generated program computes them over the global
// batch).
//
// A task occupies one or more resources, each a FIFO device: compute tasks
// their device, a transfer every link of its route at once (the message is
// pipelined across hops), a collective every link its ring uses. Links are
// resources NumDevices + LinkId.
//
// Every task has a structural key (op index, kind, partition, ...) that does
// not depend on the order tasks were created in; it orders tasks along every
// edge and breaks ties between equal ready times, so a graph updated in
// place for one op's new config (delta simulation) and one built from
// scratch produce the same timeline bit for bit.
//
//===----------------------------------------------------------------------===//
#ifndef ONNX2SOAP_SIMULATOR_TASKGRAPH_H
#define ONNX2SOAP_SIMULATOR_TASKGRAPH_H

#include "ir/Training.h"
#include "simulator/CostModel.h"
#include "simulator/Machine.h"
#include "simulator/Strategy.h"
#include "llvm/ADT/SmallVector.h"
#include <algorithm>
#include <tuple>
#include <vector>

namespace onnx2soap::simulator {

using TaskId = uint32_t;
constexpr TaskId NoTask = ~TaskId(0);
/// A FIFO device: a compute device (its DeviceId) or a link (NumDevices +
/// LinkId).
using ResourceId = uint32_t;

/// Takes the duplicates out of lists of task ids, first appearances kept in
/// order, by marking each id (all marks forgotten at once in O(1)) where
/// sorting the list cost a tenth of a search step (thousands of ids when a
/// layer in 64 parts meets 64 parts).
class TaskMarks {
public:
  void dedupe(std::vector<TaskId> &List) {
    if (++Epoch == 0) {
      std::fill(Stamps.begin(), Stamps.end(), 0);
      Epoch = 1;
    }
    List.erase(std::remove_if(List.begin(), List.end(),
                              [&](TaskId Id) {
                                if (Id >= Stamps.size())
                                  Stamps.resize(Id + 1, 0);
                                bool Seen = Stamps[Id] == Epoch;
                                Stamps[Id] = Epoch;
                                return Seen;
                              }),
               List.end());
  }

private:
  /// Per task: the epoch of its last mark.
  std::vector<uint32_t> Stamps;
  uint32_t Epoch = 0;
};

enum class TaskKind : uint8_t {
  Forward,
  Backward,
  /// Activation region sent from a producer to a consumer partition.
  Transfer,
  /// Gradient region sent back from a consumer to a producer partition.
  GradTransfer,
  /// All-reduce of BatchNorm statistics among partitions of one channel
  /// range (forward: mean and variance; backward: the two gradient sums).
  StatsAllReduce,
  /// All-reduce of a parameter shard's gradient among the devices holding
  /// it.
  GradAllReduce,
  /// Optimizer update of one parameter's shards on one device.
  Update,
  /// Box copies a generated program makes on one device around an edge
  /// (SimOptions::CopyTasks): a consumer partition gathering its input
  /// (from local producers, and unpacking what it received), a producer
  /// partition packing its messages, a consumer partition adding input
  /// gradients back to local producers and packing the rest, a producer
  /// partition adding received gradients.
  Copy,
};
llvm::StringRef taskKindName(TaskKind Kind);

/// The structural order of tasks: lexicographic over the fields.
struct TaskKey {
  uint32_t Level = 0;
  uint32_t Sub = 0;
  uint32_t A = 0;
  uint32_t B = 0;
  uint32_t C = 0;
  bool operator<(const TaskKey &O) const {
    return std::tie(Level, Sub, A, B, C) <
           std::tie(O.Level, O.Sub, O.A, O.B, O.C);
  }
  bool operator==(const TaskKey &O) const {
    return std::tie(Level, Sub, A, B, C) ==
           std::tie(O.Level, O.Sub, O.A, O.B, O.C);
  }
};

struct Task {
  // What simulation reads and writes, first: it touches every task it
  // schedules, so these share the first cache lines.
  double Ready = 0; ///< set by simulation
  double Start = 0; ///< set by simulation
  double End = 0;   ///< set by simulation
  double Duration = 0;
  TaskKey Key;
  TaskKind Kind = TaskKind::Forward;
  bool Alive = false;
  /// Held inline up to 12: a transfer between two nodes of FlexFlow's K80
  /// cluster crosses 8 links, and under the program's model of
  /// communication also holds both ends' engines and the receiver: no
  /// allocation per transfer task, nor a free when a rejected step is
  /// reverted. Under that model routes of 10 links or more (between
  /// TensorOpt's V100 nodes: up to 12) still allocate.
  llvm::SmallVector<ResourceId, 12> Resources;
  llvm::SmallVector<TaskId, 4> Preds;
  llvm::SmallVector<TaskId, 4> Succs;

  /// Bytes each sending device puts on the wire (transfers and collectives);
  /// for an update, the bytes of parameter it updates; for copies, the
  /// bytes copied.
  double Bytes = 0;
  /// The op (forward, backward, transfers, copies: the consumer; stats: the
  /// BatchNorm) or NoOp; for GradAllReduce and Update, the parameter
  /// tensor in Tensor; for copies, the activation.
  ir::OpId Op = ir::NoOp;
  ir::TensorId Tensor = ir::NoTensor;
  uint32_t Partition = 0;
  /// Compute device, or the sender of a transfer; Peer is a transfer's
  /// receiver.
  DeviceId Device = 0;
  DeviceId Peer = 0;
  /// Devices taking part in a collective, sorted (addAllReduce).
  llvm::SmallVector<DeviceId, 2> Group;
  /// Bytes this task keeps resident on its memory device (Peer for a
  /// transfer, Device otherwise) for the iteration: parameter shards with
  /// gradients and optimizer state (updates), non-learned tensors read
  /// (forward), activations written, read from the data or received
  /// (forward, transfers). See MemoryModel.h.
  double ParamMemory = 0;
  double FixedMemory = 0;
  double ActivationMemory = 0;
  /// Bytes of the message buffer it needs on each device it involves (a
  /// transfer's sender and receiver, a gradient all-reduce's members): its
  /// payload, packed. A generated program keeps one buffer per device, as
  /// large as its largest message.
  double MessageBytes = 0;
  /// Backward: bytes of the activation gradients its call reads and writes
  /// (its outputs' and its activation inputs'), live together while it
  /// runs. A device's largest is its gradient working set.
  double GradientMemory = 0;
  /// Forward and backward: the kernel scratch its call takes while it runs
  /// (a convolution's workspace, copies a kernel makes; KernelScratch.h). A
  /// device's largest is its scratch.
  double ScratchMemory = 0;
  /// The part of Duration spent in box copies (SimOptions::CopyTasks): all
  /// of a copy task's; an update's packing and unpacking of its
  /// all-reduced gradient cells.
  double CopySeconds = 0;
};

/// Options of the training step being simulated.
struct SimOptions {
  OptimizerKind Optimizer = OptimizerKind::SgdMomentum;
  /// Gradient buckets: the synced tensors, in the order backward produces
  /// their gradients, are cut into segments of about this many bytes
  /// (unsharded), and within a segment the gradient cells summed over the
  /// same devices (and of one element type) are all-reduced together, as
  /// one collective (what PyTorch's DDP does with its 25 MiB buckets): one
  /// latency instead of one per tensor. 0: one all-reduce per tensor's
  /// group of cells.
  double GradientBucketBytes = 0;
  /// Each device takes part in one communication at a time, as generated
  /// programs run them (docs/generated-program.md, "Communication"): every
  /// transfer also holds a communication engine of its two devices, every
  /// all-reduce those of its members. Off (`--comm-model flexflow`):
  /// FlexFlow's model, where a device sends and receives over all its links
  /// at once.
  bool SerialCommunication = true;
  /// The box copies generated programs make around edges are tasks on
  /// their device (TaskKind::Copy): wherever a partition does not read
  /// its producer's output buffer as it is (a part of one, or parts of
  /// several; always after a message), the copies that gather the input,
  /// pack and unpack messages and add gradients back. Off under FlexFlow's
  /// model, which charges none.
  bool CopyTasks = true;
  /// A communication call holds the compute device of a rank that waits in
  /// it, as generated programs run them: a transfer its receiver (the rank
  /// waits in the receive until the message is in), a BatchNorm statistics
  /// all-reduce its members (the next phase needs the sums), and on CPU
  /// devices a gradient all-reduce its members (MPI sums inside the call;
  /// NCCL's run beside the backward pass). Off under FlexFlow's model,
  /// where a device computes while it communicates.
  bool BlockingCalls = true;

  /// `--comm-model`: the program's model (the three above on) or
  /// FlexFlow's (all off).
  void setProgramModel(bool On) {
    SerialCommunication = CopyTasks = BlockingCalls = On;
  }
};

/// One tensor's gradient cells in a gradient all-reduce: the cells of
/// gradientCells(Tensor's uses) at index Cells (a bucket holds several).
struct BucketPart {
  ir::TensorId Tensor = ir::NoTensor;
  uint32_t Cells = 0;
};
/// The tensors of a gradient all-reduce's parts, each once, in order (a
/// tensor's parts are adjacent).
llvm::SmallVector<ir::TensorId, 4>
bucketTensors(llvm::ArrayRef<BucketPart> Parts);

/// Cells of a parameter whose gradients are summed over the same devices:
/// the parameter is cut at every boundary of the regions its readers'
/// partitions use, and each cell goes to the group of devices whose regions
/// contain it. The task graph all-reduces each group with two or more
/// devices; the generated program sends exactly these cells.
struct GradientCells {
  std::vector<DeviceId> Holders; ///< sorted
  std::vector<ir::Region> Boxes; ///< row-major cell order
  int64_t Elements = 0;
};
/// The task graph of one strategy, with what each op owns so that one op's
/// config can be replaced in place.
class TaskGraph {
public:
  TaskGraph(const ir::TrainingGraph &T, const Machine &M, const CostModel &Cost,
            SimOptions Options);

  /// Builds every task for S (which must pass checkStrategy).
  void build(const Strategy &S);
  /// Gradient buckets of about Bytes from now on
  /// (SimOptions::GradientBucketBytes): the next build() uses them.
  void setGradientBucket(double Bytes);
  /// Gradient buckets of about Bytes in the graph built: the all-reduces
  /// are replaced and the updates take their new segments' keys (nothing
  /// else depends on the size). Returns the live tasks whose predecessors
  /// or keys changed, as changeConfigs() does; removed(), created() and
  /// rewired() tell the rest. Not revertible (canRevert() is false after).
  std::vector<TaskId> changeGradientBucket(double Bytes);
  /// The synced tensors as cut into gradient buckets now, in the order
  /// backward produces their gradients: the same for every strategy, so
  /// two sizes that cut them alike simulate every strategy alike.
  const std::vector<std::vector<ir::TensorId>> &gradientSegments() const {
    return Segments;
  }
  /// Replaces op Op's config with C: removes the tasks that depend on it,
  /// adds the new ones, and returns the live tasks whose predecessors
  /// changed (new tasks, and tasks that gained or lost a predecessor). The
  /// removed tasks keep their timing until the next change (removed()).
  std::vector<TaskId> changeConfig(ir::OpId Op, const ParallelConfig &C);
  /// changeConfig for several ops at once (Ops[I] takes Configs[I]).
  std::vector<TaskId> changeConfigs(llvm::ArrayRef<ir::OpId> Ops,
                                    llvm::ArrayRef<ParallelConfig> Configs);
  /// Undoes the last changeConfigs (canRevert()): the ops take their old
  /// configs, the tasks it removed live again with the edges they had, the
  /// tasks it created are gone, and removed(), created() and rewired() are
  /// empty. Cheaper than changing the configs back: nothing is costed or
  /// intersected again, and the tasks keep their ids.
  void revert();
  /// Whether revert() may run: a change came last (not build(), nor
  /// another revert()).
  bool canRevert() const { return Undo.Open; }

  const Strategy &strategy() const { return S; }
  const Task &task(TaskId Id) const { return Tasks[Id]; }
  Task &task(TaskId Id) { return Tasks[Id]; }
  /// Every slot, live or free (check Task::Alive).
  size_t size() const { return Tasks.size(); }
  /// Devices, links, then (SerialCommunication) each device's
  /// communication engine.
  unsigned numResources() const {
    return M.numDevices() + M.numLinks() +
           (Options.SerialCommunication ? M.numDevices() : 0);
  }
  /// Device D's communication engine (SerialCommunication only).
  ResourceId commEngine(DeviceId D) const {
    return M.numDevices() + M.numLinks() + D;
  }

  const ir::TrainingGraph &training() const { return T; }
  const SimOptions &options() const { return Options; }
  const Machine &machine() const { return M; }

  /// Tasks removed by the last changeConfig, for the simulator to take out
  /// of its resource orders (their Resources and timing are still set).
  llvm::ArrayRef<TaskId> removed() const { return Removed; }
  /// Tasks added by the last changeConfig (not yet in any resource order).
  llvm::ArrayRef<TaskId> created() const { return Created; }
  /// Tasks whose Preds or Succs the last changeConfig changed (with
  /// repeats; may include removed and created tasks): what a copy of the
  /// edges must refresh.
  llvm::ArrayRef<TaskId> rewired() const { return Rewired; }
  /// A gradient all-reduce's tensors and cells, in the order the generated
  /// program packs them (empty for other tasks).
  llvm::ArrayRef<BucketPart> bucketParts(TaskId Id) const {
    return Id < Parts.size() ? llvm::ArrayRef<BucketPart>(Parts[Id])
                             : llvm::ArrayRef<BucketPart>();
  }

private:
  struct OpTasks {
    std::vector<TaskId> Forward, Backward;
    /// Tasks the consumers' edges start from / the producers' gradient
    /// edges end at, per partition: the forward (backward) task, or the
    /// stats all-reduce that completes it.
    std::vector<TaskId> ForwardDone, BackwardDone;
    std::vector<TaskId> Stats;
  };

  /// The start of a change: the slots the last one removed are free, and
  /// removed(), created() and rewired() empty.
  void beginChange();
  /// Its end: the tasks it created, then the live ones among Touched (lost
  /// a predecessor or changed key) and those that gained one, each once.
  std::vector<TaskId> changedTasks(std::vector<TaskId> &Touched);
  TaskId addTask(Task T);
  /// Before a change edits the edge lists of task Id: keeps the lists as
  /// they were, once per change (for revert()).
  void edit(TaskId Id);
  /// An edge From -> To; Fresh: the caller knows it is new (no search of
  /// From's successors).
  void addEdge(TaskId From, TaskId To, bool Fresh = false);
  void removeTask(TaskId Id, std::vector<TaskId> &Touched);

  void buildOp(ir::OpId Op);
  void buildInputEdges(ir::OpId Consumer, unsigned Slot);
  void segmentTensors();
  /// The (reader, input slot) pairs of Tensor whose backward writes a
  /// gradient of it, weight-only readers left out.
  llvm::SmallVector<std::pair<ir::OpId, unsigned>, 2>
  gradientReads(ir::TensorId Tensor) const;
  /// A synced tensor's uses and cells under the current configs of its
  /// readers, and its updates.
  void buildTensorSync(ir::TensorId Tensor);
  /// A segment's all-reduces, from its tensors' cells, and their edges.
  void buildBuckets(uint32_t Segment);
  void addStatsSync(ir::OpId Op, bool Backward);
  /// The bytes of one partition's output regions and input regions (0 for
  /// an absent input), each rounded as a program's buffer is.
  struct PartitionBytes {
    llvm::SmallVector<double, 2> Outputs;
    llvm::SmallVector<double, 4> Inputs;
  };
  PartitionBytes partitionBytes(const ir::Op &O,
                                llvm::ArrayRef<ir::Interval> Out,
                                ir::Interval Reduction) const;
  void setForwardMemory(Task &Forward, const PartitionBytes &Bytes) const;
  void setBackwardMemory(Task &Backward, const PartitionBytes &Bytes) const;
  /// A transfer task from one device to another (added to Owned), or a
  /// direct edge when they are the same.
  void connect(TaskId From, DeviceId FromDevice, TaskId To, DeviceId ToDevice,
               TaskKind Kind, double Bytes, TaskKey Key, ir::OpId Op,
               std::vector<TaskId> &Owned);
  /// A collective among Devices of Bytes per device.
  TaskId addAllReduce(TaskKind Kind, llvm::ArrayRef<DeviceId> Devices,
                      double Bytes, TaskKey Key, ir::OpId Op,
                      ir::TensorId Tensor);
  /// A copy task on Device (added to Owned); setCopyTime gives its
  /// duration once its bytes are known.
  TaskId addCopy(DeviceId Device, TaskKey Key, ir::OpId Op, ir::TensorId Tensor,
                 uint32_t Partition, std::vector<TaskId> &Owned);
  /// Copy task Id copies CopiedBytes in Copies boxes and adds AddedBytes in
  /// Adds boxes.
  void setCopyTime(TaskId Id, double CopiedBytes, unsigned Copies,
                   double AddedBytes, unsigned Adds);

  uint32_t forwardLevel(ir::OpId Op) const { return 3 * Op; }
  uint32_t backwardLevel(ir::OpId Op) const {
    return 3 * NumOps + 3 * (NumOps - 1 - Op);
  }

  const ir::TrainingGraph &T;
  const ir::Graph &G;
  const Machine &M;
  const CostModel &Cost;
  SimOptions Options;
  uint32_t NumOps;
  Strategy S;

  std::vector<Task> Tasks;
  std::vector<TaskId> Free;
  std::vector<OpTasks> PerOp;
  /// Per op and input slot: the transfers of that input (forward and
  /// backward).
  std::vector<llvm::SmallVector<std::vector<TaskId>, 3>> InputEdges;
  /// Synced tensors cut into bucket segments (in backward order: the
  /// tensor whose first reader is last comes first), each segment's key
  /// level (after every member's first reader's backward) and all-reduces,
  /// and per tensor its segment (or ~0).
  std::vector<std::vector<ir::TensorId>> Segments;
  std::vector<uint32_t> SegmentLevel;
  std::vector<std::vector<TaskId>> SegmentTasks;
  std::vector<uint32_t> SegmentOf;
  /// One partition's use of a synced tensor: the region its backward
  /// writes the gradient of, where, and which task.
  struct TensorUse {
    ir::Region Region;
    DeviceId Device;
    TaskId Backward;
  };
  /// Per synced tensor (indexed by tensor id): its uses, its gradient
  /// cells, and its updates (in device order). Rebuilt only when one of
  /// its readers changes config; the buckets of its segment read them.
  struct TensorSync {
    std::vector<TensorUse> Uses;
    std::vector<GradientCells> Cells;
    std::vector<TaskId> Updates;
  };
  std::vector<TensorSync> Syncs;
  /// Per task slot: the tensors and cells of a gradient all-reduce.
  std::vector<std::vector<BucketPart>> Parts;
  /// Per tensor: the ops reading it.
  std::vector<llvm::SmallVector<ir::OpId, 2>> Consumers;
  /// Per op: it reads only parameters, constants, state and outputs of
  /// such ops (exporters rebuild LSTM weights with Slice and Concat this
  /// way). These get no tasks: every device computes what it reads of them
  /// locally, as it holds parameters, and their outputs' gradients are
  /// summed and applied like parameters'.
  std::vector<bool> WeightOnly;
  /// Tensors whose gradients are all-reduced and updated: parameters read
  /// by ordinary ops, and outputs of weight-only ops that need gradients.
  std::vector<ir::TensorId> SyncedTensors;
  /// Per synced output of a weight-only op (a reshaped weight): the bytes
  /// of the tensors it is computed from that a device reading it holds
  /// whole for the whole step, as generated programs do: trained
  /// parameters with their gradients and optimizer slots, other weights
  /// alone (the weight-only ops' intermediate results live only while
  /// those ops run, in buffers others reuse).
  std::vector<double> SourceBytes;
  std::vector<TaskId> Removed;
  /// Tasks added, and tasks that gained a predecessor, since the last
  /// build or change.
  std::vector<TaskId> Created;
  std::vector<TaskId> Gained;
  std::vector<TaskId> Rewired;
  TaskMarks Marks;
  /// What the last changeConfigs replaced, for revert(): the slot count
  /// before it, the free slots it took (in order), the edge lists of the
  /// tasks it kept but edited (of the tasks it created none), and the old
  /// configs, task lists and gradient syncs it rebuilt.
  struct ChangeLog {
    bool Open = false;
    /// Between the start and the end of changeConfigs: edits are logged.
    bool Recording = false;
    size_t NumTasks = 0;
    std::vector<TaskId> Popped;
    /// An edited task's old lists: NumPreds ids from Begin in EditedIds,
    /// then NumSuccs (one flat array, its capacity kept from change to
    /// change: no allocation per task logged).
    struct Lists {
      TaskId Id;
      uint32_t Begin, NumPreds, NumSuccs;
    };
    std::vector<Lists> Edited;
    std::vector<TaskId> EditedIds;
    /// Per slot: the change that last logged (or created) it.
    std::vector<uint32_t> Stamps;
    uint32_t Epoch = 0;
    std::vector<std::pair<ir::OpId, ParallelConfig>> Configs;
    std::vector<std::pair<ir::OpId, OpTasks>> Ops;
    struct InputTasks {
      ir::OpId Consumer;
      unsigned Slot;
      std::vector<TaskId> Tasks;
    };
    std::vector<InputTasks> Inputs;
    std::vector<std::pair<uint32_t, std::vector<TaskId>>> Buckets;
    std::vector<std::pair<ir::TensorId, TensorSync>> Syncs;
  };
  ChangeLog Undo;
};

/// Generated programs place each buffer at a multiple of this many bytes
/// (rt::program::BufferAlignment), so the memory model rounds each buffer
/// up to it.
constexpr double BufferAlignment = 256;
/// Bytes rounded up to a multiple of BufferAlignment.
double alignedBufferBytes(double Bytes);

/// Per op: whether it reads only parameters, constants, state and outputs
/// of such ops (see TaskGraph::WeightOnly).
std::vector<bool> weightOnlyOps(const ir::Graph &G);
/// A BatchNorm normalizing with the batch's statistics (training mode),
/// whose partitions over samples or space sum them (addStatsSync).
bool isTrainingBatchNorm(const ir::Op &O);
/// The index of Tensor among O's outputs (Tensor must be one).
unsigned outputIndex(const ir::Op &O, ir::TensorId Tensor);
/// The messages that input Slot of op Consumer takes from its producer when
/// the producer has config PC and the consumer CC: the pairs of a producer
/// partition and a consumer partition on different devices whose regions
/// overlap (each a transfer, and one more for its gradient). 0 for an input
/// that is not an activation. Takes a region overlap per pair of
/// partitions; with StopAbove, stops counting past it (after the consumer
/// partition that passed it), for a caller that needs to know no more.
uint64_t inputMessages(const ir::Graph &G, ir::OpId Consumer, unsigned Slot,
                       const ParallelConfig &PC, const ParallelConfig &CC,
                       uint64_t StopAbove = UINT64_MAX);
/// Per tensor: whether its gradient is summed over its holders and applied
/// (synchronized): parameters, and outputs of weight-only ops that need a
/// gradient (a weight the exporter reshaped), read by some op that is not
/// weight-only.
std::vector<bool> syncedTensors(const ir::TrainingGraph &T,
                                const std::vector<bool> &WeightOnly);

/// The groups for a parameter of shape Dims read as Uses (region, device),
/// ordered by holder list.
std::vector<GradientCells>
gradientCells(const ir::Shape &Dims,
              llvm::ArrayRef<std::pair<ir::Region, DeviceId>> Uses);

/// Per device, the time a generated program spends packing the cells of a
/// gradient (elements of ElementSize bytes) that the device all-reduces with
/// others into its message buffer, and unpacking the sums (two box copies
/// of them): what the device's update is charged under
/// SimOptions::CopyTasks, in the simulator and in OptCNN's sum alike.
std::map<DeviceId, double> packingTimes(llvm::ArrayRef<GradientCells> Cells,
                                        double ElementSize,
                                        const CostModel &Cost,
                                        const Machine &M);

/// A ring all-reduce: its time, the bytes each device sends, and the links
/// it occupies.
struct CollectiveCost {
  double Time = 0;
  double BytesPerDevice = 0;
  llvm::SmallVector<LinkId, 8> Links;
  /// The tree was faster than the ring.
  bool Tree = false;
};
/// All-reduce of Bytes among Devices (sorted, at least two), by whichever
/// is faster: a ring (2(n-1) steps each sending Bytes/n to the next device;
/// a link carrying k of the ring's hops carries k times the traffic) or a
/// binary tree in device order (reduce up, broadcast down, pipelined: 2
/// log2(n) latency steps, each tree edge carrying Bytes each way).
CollectiveCost allReduceCost(const Machine &M, llvm::ArrayRef<DeviceId> Devices,
                             double Bytes);

/// The bytes the member at Position of an N-member ring all-reduce of Bytes
/// (elements of ElementSize bytes) sends, as generated programs cut the
/// elements into N chunks (chunk c is [Count c / N, Count (c+1) / N)): all
/// but one chunk in each half. 2(N-1)/N of Bytes on average.
double ringBytesSent(double Bytes, unsigned ElementSize, size_t N,
                     size_t Position);

} // namespace onnx2soap::simulator

#endif
