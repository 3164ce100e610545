//===- simulator/Simulator.h - Full and delta simulation -------*- C++ -*-===//
//
// Turns a task graph into a timeline under FlexFlow's assumptions (§5): a
// task is ready when its predecessors have ended; each resource runs its
// tasks one at a time in the order of their ready times (ties broken by the
// tasks' structural keys); a task occupying several resources (a transfer
// along a route, a collective) starts when all of them are free.
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
// test checks it on thousands of proposals). The paper's Algorithm 2
// propagates updates Bellman-Ford style instead; with ready = max over
// predecessors, times that decrease make it revisit tasks many times.
//
//===----------------------------------------------------------------------===//
#ifndef ONNX2SOAP_SIMULATOR_SIMULATOR_H
#define ONNX2SOAP_SIMULATOR_SIMULATOR_H

#include "simulator/MemoryModel.h"
#include "simulator/TaskGraph.h"

namespace onnx2soap::simulator {

/// What one simulated iteration costs, per device and in total.
struct SimReport {
  /// Seconds per training iteration.
  double Time = 0;
  /// Bytes all devices put on the wire (transfers and collectives).
  double BytesTransferred = 0;
  /// Per device: busy computing, and bytes it sends.
  std::vector<double> ComputeTime;
  std::vector<double> BytesSent;
  /// Per device: peak bytes of memory (see MemoryModel.h).
  std::vector<double> PeakMemory;
  /// Whether every device's peak fits its capacity.
  bool Fits = true;
  unsigned NumTasks = 0;
};

class Simulator {
public:
  Simulator(const ir::TrainingGraph &T, const Machine &M, const CostModel &Cost,
            SimOptions Options = {});

  /// Full simulation of S from scratch; returns the iteration time.
  double simulate(const Strategy &S);
  /// Delta simulation: op Op takes config C (checked by the caller);
  /// returns the new iteration time. simulate() must have run first.
  double change(ir::OpId Op, const ParallelConfig &C);
  /// Delta simulation of several ops changing at once (Ops[I] takes
  /// Configs[I]): one re-simulation for all of them.
  double change(llvm::ArrayRef<ir::OpId> Ops,
                llvm::ArrayRef<ParallelConfig> Configs);

  /// The iteration time of the current strategy.
  double time() const;
  const Strategy &strategy() const { return Graph.strategy(); }
  const TaskGraph &graph() const { return Graph; }
  /// The largest device's memory (kept up to date by delta simulation).
  double peakMemory() const;
  /// How many bytes the fullest device is over its capacity (or over
  /// Limit, when Limit > 0); 0 or less when everything fits.
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
  /// Algorithm 1 over the tasks marked in Pending (Dirty lists them), after
  /// the tasks already in the resource orders.
  void schedule(const std::vector<TaskId> &Dirty);

  TaskGraph Graph;
  /// Per resource, its tasks in the order it runs them (by ready time, then
  /// key).
  std::vector<std::vector<TaskId>> Orders;
  MemoryBreakdown Memory;
  /// Scratch: per task, whether it is being (re)scheduled, and how many of
  /// its predecessors are still to come.
  std::vector<uint8_t> Pending;
  std::vector<uint32_t> Waiting;
};

} // namespace onnx2soap::simulator

#endif
