//===- simulator/Simulator.h - Full and delta simulation -------*- C++ -*-===//
//
// Turns a task graph into a timeline under FlexFlow's assumptions (§5): a
// task is ready when its predecessors have ended; each resource runs its
// tasks one at a time in the order of their ready times (ties broken by the
// tasks' structural keys); a task occupying several resources (a transfer
// along a route, a collective) starts when all of them are free. The
// resources are the devices, the links and, by default
// (SimOptions::SerialCommunication), each device's communication engine.
//
// Full simulation (paper Algorithm 1) builds the graph and schedules every
// task with a priority queue. Delta simulation replaces one op's config in
// the existing graph and re-simulates only the part of the timeline the
// change can reach: it finds a time tau no changed task can be ready before
// (the earliest ready time of a task that gained, lost or replaced a
// neighbour, or a lower bound of a new task's), keeps every task that was
// ready before tau as it is, and runs Algorithm 1 again on the rest from the
// state the kept tasks leave. Because Algorithm 1 schedules tasks in
// (ready time, key) order and nothing before tau changed, the repaired
// timeline is the one full simulation produces, bit for bit (a property
// test checks it on thousands of proposals). A new gradient bucket size is
// delta simulated the same way (changeGradientBucket()). The paper's
// Algorithm 2 propagates updates Bellman-Ford style instead; with ready =
// max over predecessors, times that decrease make it revisit tasks many
// times.
//
//===----------------------------------------------------------------------===//
#ifndef ONNX2SOAP_SIMULATOR_SIMULATOR_H
#define ONNX2SOAP_SIMULATOR_SIMULATOR_H

#include "simulator/MemoryModel.h"
#include "simulator/TaskGraph.h"
#include <limits>
#include <memory>

namespace onnx2soap::simulator {

/// What one simulated iteration costs, per device and in total.
struct SimReport {
  /// Seconds per training iteration.
  double Time = 0;
  /// Bytes all devices put on the wire (transfers and collectives).
  double BytesTransferred = 0;
  /// Per device: busy computing (kernels and updates), busy with box
  /// copies (SimOptions::CopyTasks: around edges, and packing and
  /// unpacking all-reduced gradients), and bytes it sends.
  std::vector<double> ComputeTime;
  std::vector<double> CopyTime;
  std::vector<double> BytesSent;
  /// Per device: peak bytes of memory (see MemoryModel.h).
  std::vector<double> PeakMemory;
  /// Per device: the part of PeakMemory that is kernel scratch (taken and
  /// freed by each call; KernelScratch.h).
  std::vector<double> KernelScratch;
  /// Per device: the part of PeakMemory outside a generated program's
  /// buffers (the runtime's own and NCCL's), and how many communicators
  /// it joins and devices it exchanges messages with (MemoryModel.h).
  std::vector<double> RuntimeMemory;
  std::vector<unsigned> Communicators, Peers;
  /// Whether every device's peak fits its capacity.
  bool Fits = true;
  unsigned NumTasks = 0;
  /// Communication tasks (transfers of activations and their gradients;
  /// gradient and BatchNorm-statistics all-reduces), and how many of them
  /// the cluster's measured tables timed rather than the link model.
  unsigned Transfers = 0, MeasuredTransfers = 0;
  unsigned AllReduces = 0, MeasuredAllReduces = 0;
};

class Simulator {
public:
  Simulator(const ir::TrainingGraph &T, const Machine &M, const CostModel &Cost,
            SimOptions Options = {});

  /// Full simulation of S from scratch; returns the iteration time.
  /// Revertible: keep the graph and timeline before it for revert() (a
  /// second graph's memory; what a search without delta simulation does
  /// with each proposal). A revertible simulation may give up above
  /// GiveUpAbove as changeUnless() does (returning +infinity; only
  /// revert() may follow), so that a search by full simulation saves on
  /// the steps it rejects what a search by delta simulation saves.
  double simulate(const Strategy &S, bool Revertible = false,
                  double GiveUpAbove = std::numeric_limits<double>::infinity());
  /// Gradient buckets of about Bytes (SimOptions::GradientBucketBytes)
  /// from the next simulate() on, which must come before any change(),
  /// changeGradientBucket() or revert().
  void setGradientBucket(double Bytes);
  /// Delta simulation: op Op takes config C (checked by the caller);
  /// returns the new iteration time. simulate() must have run first.
  double change(ir::OpId Op, const ParallelConfig &C);
  /// Delta simulation of several ops changing at once (Ops[I] takes
  /// Configs[I]): one re-simulation for all of them.
  double change(llvm::ArrayRef<ir::OpId> Ops,
                llvm::ArrayRef<ParallelConfig> Configs);
  /// change() for a step the caller rejects if the iteration takes longer
  /// than GiveUpAbove: once it is sure to (some resource's last end so far
  /// plus the durations of its tasks still to run exceeds it, by more than
  /// a relative 1e-9 for rounding), it stops and returns +infinity, and
  /// only revert() may follow. The rest of the timeline is not scheduled:
  /// what a search saves on the steps it rejects.
  double changeUnless(llvm::ArrayRef<ir::OpId> Ops,
                      llvm::ArrayRef<ParallelConfig> Configs,
                      double GiveUpAbove);
  /// S simulated: as a delta simulation of the ops where it differs from
  /// the strategy simulated when they are at most a third of the ops, else
  /// in full (simulate()). The same timeline either way. Past a third the
  /// delta costs as much or more, far less below (from the first of
  /// OptCNN's minima found to the fastest: ResNet-101 on 16 K80s, 116 of
  /// 348 ops, 11.3 ms against 11.1 in full; Inception-v3 on 32, 158 of 322,
  /// 34 ms against 23; on 8 K80s, 62 of 348, 3.1 ms against 4.4, and 38 of
  /// 322, 2.3 against 6.8).
  double moveTo(const Strategy &S);
  /// Whether moveTo() delta simulates a strategy that differs from the one
  /// simulated in Changed of its Ops ops (at most a third).
  static bool movesByChange(size_t Changed, size_t Ops) {
    return 3 * Changed <= Ops;
  }
  /// Whether a strategy is simulated (simulate() ran, and no
  /// setGradientBucket() since).
  bool simulated() const { return Simulated; }
  /// Delta simulation of a new gradient bucket size
  /// (SimOptions::GradientBucketBytes) for the strategy simulated: only the
  /// all-reduces and the updates after them change, so only the timeline
  /// from the first of them on is simulated again (bit for bit what
  /// setGradientBucket() and simulate() give). simulate() must have run
  /// first. Not revertible.
  double changeGradientBucket(double Bytes);
  /// Undoes the last change() or revertible simulate() (canRevert()): the
  /// strategy, task graph, timeline and memory are those before it, bit for
  /// bit. What a search does with a proposal it rejects: it costs a copy of
  /// the scheduler's arrays, taken before each change, instead of a second
  /// change that re-simulates (after simulate(), a swap with the graph
  /// before it).
  void revert();
  /// Whether revert() may run: a change() or a revertible simulate() that
  /// followed another simulation came last.
  bool canRevert() const { return Undoable != Last::None; }

  /// The iteration time of the current strategy.
  double time() const;
  const Strategy &strategy() const { return Graph->strategy(); }
  /// The task graph, its tasks' Ready, Start and End those of the last
  /// simulation (copied in from the scheduler's own arrays on first access
  /// after a change).
  const TaskGraph &graph() const;
  /// The largest device's memory (kept up to date by delta simulation).
  double peakMemory() const;
  /// Each device's memory, kept up to date by delta simulation (report()
  /// sums the tasks again).
  const MemoryBreakdown &memory() const { return Now.Memory; }
  /// How many bytes the fullest device is over its capacity (or over
  /// Limit, when Limit > 0 and less); 0 or less when everything fits.
  double memoryOverflow(double Limit) const;
  /// Totals, per-device figures and memory of the current strategy.
  SimReport report() const;

  /// Every live task's (key, start, end), in key order: what a test
  /// compares between full and delta simulation.
  struct TimelineEntry {
    TaskKey Key;
    TaskKind Kind;
    double Start;
    double End;
    bool operator==(const TimelineEntry &O) const {
      return Key == O.Key && Kind == O.Kind && Start == O.Start && End == O.End;
    }
  };
  std::vector<TimelineEntry> timeline() const;

private:
  /// What scheduling reads and writes of one task, in one cache line: the
  /// Task records (about 300 bytes, edges in three SmallVectors) cost a
  /// few cache misses each, and a re-simulated suffix visits most tasks.
  /// Nodes mirror the graph's tasks (refreshed after each change for the
  /// tasks it created, removed or rewired); their edges lie in Now.EdgePool.
  struct alignas(64) Node {
    double Ready = 0;
    double End = 0;
    double Duration = 0;
    TaskKey Key;
    /// Preds, Succs, Resources, then per resource the task that ran on it
    /// just before this one (NoTask if none), in Now.EdgePool.
    uint32_t EdgeBegin = 0;
    uint32_t NumPreds = 0;
    uint32_t NumSuccs = 0;
    /// Predecessors still to be scheduled (scratch of schedule()).
    uint32_t Waiting = 0;
    uint16_t NumResources = 0;
    /// Being (re)scheduled.
    bool Pending = false;
    bool Alive = false;
  };
  static_assert(sizeof(Node) == 64, "a node is one cache line");
  /// A scheduled task, with its ready time, so that finding the suffix to
  /// cut reads no node.
  struct Slot {
    double Ready;
    TaskId Id;
  };

  llvm::ArrayRef<uint32_t> preds(const Node &N) const {
    return {Now.EdgePool.data() + N.EdgeBegin, N.NumPreds};
  }
  llvm::ArrayRef<uint32_t> succs(const Node &N) const {
    return {Now.EdgePool.data() + N.EdgeBegin + N.NumPreds, N.NumSuccs};
  }
  llvm::ArrayRef<uint32_t> resources(const Node &N) const {
    return {Now.EdgePool.data() + N.EdgeBegin + N.NumPreds + N.NumSuccs,
            N.NumResources};
  }
  llvm::MutableArrayRef<uint32_t> previous(Node &N) {
    return {Now.EdgePool.data() + N.EdgeBegin + N.NumPreds + N.NumSuccs +
                N.NumResources,
            N.NumResources};
  }
  /// The delta simulation after the graph changed (Changed: what its
  /// change returned): tau, the cut, and the suffix scheduled again.
  double resimulate(const std::vector<TaskId> &Changed, double GiveUpAbove);
  /// Copies task Id's duration, key, liveness and edges into its node.
  void syncNode(TaskId Id);
  /// Rebuilds every node's edges, in task order, when most of the edge
  /// pool is left over from replaced lists.
  void compactEdges();
  /// Algorithm 1 over the tasks marked Pending (Dirty lists them), after
  /// the tasks already in the resource orders.
  /// Stops, returning false, once some resource's tail plus its pending
  /// tasks' durations exceeds Limit (+infinity: never).
  bool schedule(double Limit = std::numeric_limits<double>::infinity());

  const ir::TrainingGraph &T;
  const Machine &M;
  const CostModel &Cost;
  /// Mutable only so that graph() can bring the tasks' timing up to date.
  /// Spare: after a revertible simulate() that followed another, the graph
  /// before it (for revert()); else null.
  mutable std::unique_ptr<TaskGraph> Graph;
  std::unique_ptr<TaskGraph> Spare;
  /// What revert() undoes.
  enum class Last { None, Change, Simulate };
  Last Undoable = Last::None;
  bool Simulated = false;
  mutable bool TimesStale = false;
  /// What scheduling keeps between simulations: the state now, and the
  /// state before the last change() or simulate() (for revert()).
  struct State {
    std::vector<Node> Nodes;
    /// Per task: its start time (read only by timeline() and graph()).
    std::vector<double> Starts;
    std::vector<uint32_t> EdgePool;
    /// Entries of EdgePool no node points to any more.
    size_t DeadEdges = 0;
    /// Every scheduled task in the order Algorithm 1 scheduled it (by ready
    /// time, then key): each resource runs its tasks in this order. Rather
    /// than a list per resource (writes scattered over hundreds of lists),
    /// each task records its predecessor on each of its resources, and
    /// cutting a suffix walks it back to restore each resource's last task.
    std::vector<Slot> Sequence;
    /// Per resource: its last task so far (NoTask when none) and that task's
    /// end (-infinity when none).
    std::vector<TaskId> TailTasks;
    std::vector<double> Tails;
    MemoryBreakdown Memory;
  };
  State Now, Saved;
  /// Scratch of change() and schedule().
  std::vector<TaskId> Dirty, Rewired;
  TaskMarks Marks;
  /// A task ready to be scheduled; the heap yields the smallest (ready
  /// time, key) first.
  struct QueueEntry {
    double Ready;
    TaskKey Key;
    TaskId Id;
    /// Whether this entry comes after one ready at OtherReady with
    /// OtherKey.
    bool after(double OtherReady, const TaskKey &OtherKey) const {
      if (Ready != OtherReady)
        return Ready > OtherReady;
      return OtherKey < Key;
    }
    bool operator>(const QueueEntry &O) const { return after(O.Ready, O.Key); }
  };
  std::vector<QueueEntry> Heap;
  /// Per resource: the durations of its tasks still to be scheduled (a
  /// bounded schedule() only; zero between runs), and the resources with
  /// any.
  std::vector<double> Remaining;
  std::vector<ResourceId> Loaded;
};

} // namespace onnx2soap::simulator

#endif
