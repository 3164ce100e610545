//===- soap_search/Elimination.h - OptCNN's graph elimination --*- C++ -*-===//
//
// A strategy chosen by dynamic programming over an additive cost, after
// OptCNN (Jia et al., ICML 2018; FlexFlow compares with it in §8.1.3). An
// op's cost under a config is its partition's forward and backward time,
// its BatchNorm statistics' all-reduces, and the all-reduce (in full or in
// part: setSyncWeight) and update of its weights' gradients (a weight read
// by several ops, such as an unrolled layer's cells, in equal shares or in
// full: SharedWeights); an edge's cost
// under a pair of configs is the time its transfers (activations forward, their
// gradients backward) keep the busiest link they cross (or, under the
// program's model of communication, device they leave or reach) busy. Node
// elimination
// (an op between two others becomes an edge between them, minimized over its
// configs), edge elimination (parallel edges add) and leaf elimination reduce
// the graph; each op's config is then read back in reverse. For chains and
// series-parallel graphs (AlexNet, ResNet, Inception) that is the additive
// cost's optimum over the configs offered; ops left in a graph that does
// not reduce are settled one at a time, each taking its best config given
// the others', until none changes.
//
// The sum ignores what the simulator models: overlap of transfers and
// all-reduces with compute, and contention between edges. So the minimum is
// taken under several charges (optcnnStrategy) and each simulated. The
// strategy is a candidate answer of the search, like any other; the configs
// offered are each op's shapes that split no Attribute dim (except for ops
// whose outputs are matrices: fully-connected layers and the activations
// and dropouts between them), on the first devices and, where the space has
// it, spread over the cluster (one part per node). Ops alike and edges
// alike (the same kinds, shapes and configs: a residual stage's repeated
// blocks) are costed once. The search refines the strategy along
// changesBySum().
//
//===----------------------------------------------------------------------===//
#ifndef ONNX2SOAP_SOAP_SEARCH_ELIMINATION_H
#define ONNX2SOAP_SOAP_SEARCH_ELIMINATION_H

#include "ir/Training.h"
#include "simulator/CostModel.h"
#include "simulator/Machine.h"
#include "simulator/Simulator.h"
#include "simulator/Strategy.h"
#include "simulator/TaskGraph.h"
#include "soap_search/ConfigSpace.h"
#include "llvm/ADT/STLExtras.h"
#include <atomic>
#include <condition_variable>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <vector>

namespace onnx2soap::soap_search {

/// How the synchronization of a weight read by several ops (an unrolled
/// layer's cells) is charged: in equal shares (once in all, as the
/// simulator runs it, when the readers agree), or in full to each reader.
/// The sum misjudges either way: the first ignores that such a weight's
/// all-reduce starts only after its last reader's backward (the first
/// step's), exposed at the end of the iteration; the second charges it
/// many times over. minimize() is run under both, and the simulator picks.
enum class SharedWeights : uint8_t { Once, PerReader };

/// OptCNN's cost of strategies over one space, and its minimum.
class AdditiveCost {
public:
  AdditiveCost(const ir::TrainingGraph &T, const simulator::Machine &M,
               const simulator::CostModel &Cost, simulator::SimOptions Options,
               const ConfigSpace &Space);

  /// The configs offered to Op (for ops with tasks: not weight-only).
  llvm::ArrayRef<simulator::ParallelConfig> configs(ir::OpId Op) const {
    return Configs[NodeOf[Op]];
  }
  /// The ops with tasks, in graph order.
  llvm::ArrayRef<ir::OpId> ops() const { return Ops; }
  /// The additive cost of S (any configs, offered or not).
  double of(const simulator::Strategy &S);
  /// A strategy of least additive cost among the configs offered: Base's
  /// configs for the weight-only ops (they have no tasks); ops that read
  /// the same weight then agree (shareConfigs). None when costing the
  /// edges would take more than MaxWork pairs of partitions (about 1e-8 s
  /// each on a 2.x GHz core); the edges are costed once per AdditiveCost.
  std::optional<simulator::Strategy> minimize(const simulator::Strategy &Base,
                                              double MaxWork);
  /// Costs edges for the first minimize(), on another thread, while it
  /// runs: both take whole edges from one list (the heaviest first) until
  /// none is left, each edge's table is its own, and the tables are added
  /// up in graph order, so they come out the same whichever thread costs
  /// which. Returns at once when no costing is under way (before it, after
  /// it, or with every edge taken). Safe to call from any thread at any
  /// time during this object's life.
  void helpCostEdges();
  /// The charge of shared weights of of() and minimize() (default Once).
  void setSharedWeights(SharedWeights Charge) { Shared = Charge; }
  /// The share of a weight's gradient all-reduce time its readers are
  /// charged (default 1; its update is charged in full). The simulator
  /// overlaps gradient all-reduces with the rest of the backward pass, so
  /// the sum overcharges them by a share the sum cannot know: minimize()
  /// is run under several (SyncWeights), and the simulator picks.
  void setSyncWeight(double Weight) { SyncWeight = Weight; }
  /// Whether some weight is read by several ops (else both charges agree).
  bool sharesWeights() const {
    return llvm::any_of(SyncedReaders, [](unsigned N) { return N > 1; });
  }
  /// One op of a strategy taking another config, and what that adds to the
  /// sum (negative where it saves).
  struct Change {
    ir::OpId Op;
    simulator::ParallelConfig Config;
    double Added;
  };
  /// Every change of one op of S to another config offered to it, least
  /// added first (ties in op and config order), under the charges set now:
  /// where the sum ranks strategies near its minimum nearly alike, the
  /// simulator tells them apart (optcnnStrategy's refinement in the
  /// search). Not changed: ops whose config in S, or a neighbour's, is not
  /// offered, and ops reading a weight other ops read too (an unrolled
  /// layer's cells move together). Empty until minimize() has costed the
  /// edges. Most: only the first so many (a refinement's walk tries a few
  /// dozen of thousands between two gains).
  std::vector<Change>
  changesBySum(const simulator::Strategy &S,
               size_t Most = std::numeric_limits<size_t>::max()) const;
  /// The work of costing the edges, in pairs of partitions (every pair of
  /// configs of an edge, every pair of their partitions): of the edges
  /// costed (edges alike are costed once), which minimize() holds against
  /// its MaxWork, and of every edge.
  struct EdgeWorkSize {
    double Costed = 0, All = 0;
  };
  EdgeWorkSize work();
  /// How many edges minimize() costed, and of how many: alike edges are
  /// costed once (0 of 0 before the first minimize()).
  std::pair<size_t, size_t> edgesCosted() const {
    if (!EdgesCosted)
      return {0, 0};
    return {Prepared->Order.size(), Prepared->Jobs.size()};
  }

  /// How many nodes (ops with tasks) minimize() costed, and of how many:
  /// nodes alike are costed once (0 of 0 before the first minimize()).
  std::pair<size_t, size_t> nodesCosted() const {
    return {NodesCosted, CostedParts.empty() ? 0 : Ops.size()};
  }

private:
  /// One reduction, undone in reverse to read the configs back.
  struct Step {
    enum KindT { Series, Leaf, Alone } Kind;
    unsigned Node = 0;
    /// Series: the neighbours (A < B); Leaf: the neighbour A.
    unsigned A = 0, B = 0;
    /// The node's best config per config of A (Leaf), per pair of A's and
    /// B's (Series, row-major), or its best (Alone).
    std::vector<uint32_t> Choice;
  };
  /// What the partitions of an edge's configs write and read.
  struct EdgeRegions {
    std::vector<std::vector<ir::Region>> Written, Needed;
    double ElementSize = 4;
    /// 2 where the gradient flows back, else 1.
    double Scale = 1;
  };

  std::vector<simulator::ParallelConfig> offered(ir::OpId Op) const;
  /// An op's cost under a config, in parts: its compute and BatchNorm
  /// statistics, then its weights' all-reduce and update under each
  /// charge of shared weights (indexed by SharedWeights).
  struct NodeParts {
    double Own = 0;
    double Reduce[2] = {0, 0}, Update[2] = {0, 0};
  };
  NodeParts nodeParts(const ir::Op &O,
                      const simulator::ParallelConfig &C) const;
  double ownTime(const ir::Op &O, const simulator::ParallelConfig &C) const;
  /// The parts charged under the charge and weight set now.
  double charge(const NodeParts &Parts) const;
  void addNodes();
  /// Fills CostedParts, nodes alike (alikeNodes()) costed once.
  void costTheNodes();
  /// Whether nodes A and B cost the same under every config offered.
  bool alikeNodes(unsigned A, unsigned B) const;
  /// Calls Visit(Producer, Output, Consumer, Slot) (nodes, not ops) for
  /// every activation a node reads from another.
  template <typename Fn> void forEachEdge(Fn &&Visit) const;
  /// Per node: the partitions of all its configs offered.
  std::vector<double> partitionsOffered() const;
  EdgeRegions
  regions(unsigned Producer, unsigned Output,
          llvm::ArrayRef<simulator::ParallelConfig> ProducerConfigs,
          unsigned Consumer, unsigned Slot,
          llvm::ArrayRef<simulator::ParallelConfig> ConsumerConfigs) const;
  /// An edge to cost: Producer's output Output, read by Consumer's input
  /// Slot (nodes, not ops).
  struct EdgeJob {
    unsigned Producer, Output, Consumer, Slot;
  };
  /// What edgeTime() adds up per link, engine and device, one per thread:
  /// seconds each link, then each device's communication engine
  /// (SimOptions::SerialCommunication), then each device, is busy with the
  /// edge being costed, and those touched.
  struct EdgeScratch {
    std::vector<double> Load;
    std::vector<unsigned> Touched;
  };
  EdgeScratch scratch() const {
    return {std::vector<double>(M.numLinks() + 2 * M.numDevices(), 0.0), {}};
  }
  /// The edges of the first minimize(), costed by it and helpCostEdges().
  struct EdgeWork {
    std::vector<EdgeJob> Jobs;
    /// Per job: its pairs of partitions (every pair of configs, every pair
    /// of their partitions), the work of costing it.
    std::vector<double> Pairs;
    /// The jobs by their ends' configs and the tensor's dims
    /// (groupEdges()): only jobs of one group can be alike.
    std::vector<std::vector<size_t>> Groups;
    /// Whether alikeEdges() has filled SameAs and Regions.
    bool Alike = false;
    /// Per job: the first job alike (alikeEdges()), whose table is its
    /// table; itself for the jobs costed.
    std::vector<size_t> SameAs;
    /// Per job: the regions of its shapes where alikeEdges() listed them,
    /// until it is costed.
    std::vector<std::optional<EdgeRegions>> Regions;
    /// The jobs costed, by work, the heaviest first: what the threads take
    /// in turn.
    std::vector<size_t> Order;
    /// Per job costed: its table, added to its edge's (and to those of the
    /// jobs alike) in graph order.
    std::vector<std::vector<double>> Tables;
    std::atomic<size_t> Next{0}, Done{0};
    std::mutex Lock;
    std::condition_variable AllDone;
  };
  /// Every edge, in graph order (forEachEdge()).
  std::vector<EdgeJob> edgeJobs() const;
  /// Work's Groups.
  void groupEdges(EdgeWork &Work) const;
  /// Work's SameAs (and Regions): per job, the first job of its group
  /// whose table costEdge() makes the same, since everything it reads is
  /// the same (the blocks of a residual stage, an Inception module's
  /// repeats); the job itself when none is.
  void alikeEdges(EdgeWork &Work) const;
  /// The regions of Job's ends' shapes (shapesOf()), as costEdge() reads
  /// them.
  EdgeRegions shapeRegions(const EdgeJob &Job) const;
  /// The edges to cost, grouped, listed once.
  std::shared_ptr<EdgeWork> prepareEdges();
  /// The same, with which are alike (listing the regions of the groups of
  /// more than one), once.
  std::shared_ptr<EdgeWork> listAlikeEdges();
  /// The pairs of partitions of one edge of each group: at most the work
  /// of the edges costed, known without listing any region.
  double leastWork();
  /// Costs every edge (on this thread and any that helps) into
  /// CostedEdges and CostedNeighbours.
  void costTheEdges();
  /// Takes jobs from Work until none is left.
  void costEdges(EdgeWork &Work) const;
  /// Job's table: the cost of its edge under each pair of configs,
  /// row-major with the lower node's config first.
  /// Listed: the regions alikeEdges() listed for it, if any.
  std::vector<double> costEdge(const EdgeJob &Job,
                               std::optional<EdgeRegions> Listed,
                               EdgeScratch &Scratch) const;
  /// A non-empty overlap of what a producer's partition writes and a
  /// consumer's partition reads: the bytes the consumer's needs from it.
  struct Overlap {
    uint32_t Consumer, Producer;
    double Bytes;
    /// On a cluster of one device type, with CopyTasks: the copy of these
    /// bytes, and their adding, there (else computed per device).
    double Copy = 0, Add = 0;
  };
  /// The overlaps of an edge's pair of shapes.
  struct EdgeOverlaps {
    /// Every non-empty overlap, consumer-major.
    std::vector<Overlap> List;
    /// Per consumer partition: the one producer partition that wrote
    /// exactly the region it reads (on the same device, a program's call
    /// reads that buffer as it is), or -1 (it gathers its input).
    std::vector<int32_t> Whole;
    /// The producer is split over its contraction: its parts are added.
    bool Summed = false;
    /// The gradient flows back.
    bool Gradient = false;
  };
  /// The overlaps of Written (per producer partition) and Needed (per
  /// consumer partition).
  EdgeOverlaps overlaps(llvm::ArrayRef<ir::Region> Written,
                        llvm::ArrayRef<ir::Region> Needed, double ElementSize,
                        bool Summed, bool Gradient) const;
  /// The edge's cost when the producer's partitions, on From's devices,
  /// send the consumer's, on To's, what Overlaps say, and their gradients
  /// come back: the time of the busiest link, communication engine
  /// (SimOptions::SerialCommunication) or device, busy with the transfers,
  /// the receives it waits in (BlockingCalls) and its box copies
  /// (CopyTasks), as the simulator runs them.
  double edgeTime(const EdgeOverlaps &Overlaps,
                  const simulator::ParallelConfig &From,
                  const simulator::ParallelConfig &To,
                  EdgeScratch &Scratch) const;
  /// Edge A-B's table in Tables (by lower node, higher node).
  using EdgeTables =
      std::map<std::pair<unsigned, unsigned>, std::vector<double>>;
  static std::vector<double> &edgeIn(EdgeTables &Tables, unsigned A,
                                     unsigned B) {
    return Tables[{std::min(A, B), std::max(A, B)}];
  }
  std::vector<double> &edge(unsigned A, unsigned B) {
    return edgeIn(Edges, A, B);
  }
  /// Edge table E of A-B's cost with A in config CA and B in CB.
  double entry(const std::vector<double> &E, unsigned A, uint32_t CA,
               unsigned B, uint32_t CB) const {
    return A < B ? E[size_t(CA) * Configs[B].size() + CB]
                 : E[size_t(CB) * Configs[A].size() + CA];
  }
  /// Edge A-B's cost (as reduced so far) with A in config CA and B in CB.
  double edgeCost(unsigned A, uint32_t CA, unsigned B, uint32_t CB) {
    return entry(edge(A, B), A, CA, B, CB);
  }
  /// Whether O reads a weight other ops read too (an unrolled layer's
  /// cells).
  bool readsSharedWeight(const ir::Op &O) const {
    return llvm::any_of(O.Inputs, [&](ir::TensorId Tensor) {
      return Tensor != ir::NoTensor && SyncedReaders[Tensor] > 1;
    });
  }
  void reduce();
  void eliminateSeries(unsigned J);
  void eliminateLeaf(unsigned J);
  void settleTheRest();
  void readBack();
  /// Ops that read the same weight (an unrolled layer's cells) but were
  /// given different configs all take the one of those under which S
  /// costs least: their shares of the weight's synchronization add up to
  /// it only when they agree, and the search moves them together.
  void shareConfigs(simulator::Strategy &S);

  const ir::TrainingGraph &T;
  const ir::Graph &G;
  const simulator::Machine &M;
  const simulator::CostModel &Cost;
  simulator::SimOptions Options;
  const ConfigSpace &Space;
  std::vector<bool> WeightOnly;
  /// Per tensor: whether its gradient is all-reduced and applied (as the
  /// task graph's synced tensors).
  std::vector<bool> Synced;
  /// Per synced tensor: how many ops with tasks read it and take its
  /// gradient (under SharedWeights::Once each pays that share of its
  /// synchronization).
  std::vector<unsigned> SyncedReaders;
  SharedWeights Shared = SharedWeights::Once;
  double SyncWeight = 1;
  /// The edge tables and neighbours as costed, before any reduction.
  bool EdgesCosted = false;
  std::map<std::pair<unsigned, unsigned>, std::vector<double>> CostedEdges;
  std::vector<std::set<unsigned>> CostedNeighbours;

  /// Nodes: the ops with tasks, their configs and (while minimizing) own
  /// costs, to which eliminated neighbours add theirs.
  std::vector<ir::OpId> Ops;
  std::vector<int> NodeOf;
  std::vector<std::vector<simulator::ParallelConfig>> Configs;
  std::vector<std::vector<double>> NodeCosts;
  /// Per node and offered config, costed by the first minimize().
  std::vector<std::vector<NodeParts>> CostedParts;
  size_t NodesCosted = 0;
  /// Edge tables by (lower node, higher node), and each node's neighbours.
  std::map<std::pair<unsigned, unsigned>, std::vector<double>> Edges;
  std::vector<std::set<unsigned>> Neighbours;
  std::vector<bool> Eliminated;
  std::vector<Step> Steps;
  std::vector<uint32_t> Chosen;

  /// of()'s.
  EdgeScratch Scratch;
  /// The costing of the first minimize() while it runs (helpCostEdges()),
  /// under SharingLock.
  std::shared_ptr<EdgeWork> Sharing;
  std::mutex SharingLock;
  /// prepareEdges()'s.
  std::shared_ptr<EdgeWork> Prepared;
  /// allReduceCost's time by (devices, bytes), as nodeParts asks for them.
  mutable std::map<std::pair<std::vector<simulator::DeviceId>, double>, double>
      ReduceTimes;
};

/// The weights of gradient all-reduces OptCNN's strategy is sought under
/// (AdditiveCost::setSyncWeight), the first the full charge.
constexpr double SyncWeights[] = {1, 0.5, 0.25, 0};

/// The candidates for OptCNN's strategy: Cost's minimum under each charge
/// of shared weights (one charge where no weight is shared) and each weight
/// of gradient all-reduces (SyncWeights; one costing of the edges serves
/// all), the distinct ones in that order. Empty where minimize() gives
/// none. Needs no simulator, so it can run before the simulator's options
/// (the gradient bucket size) are known.
std::vector<simulator::Strategy> optcnnMinima(AdditiveCost &Cost,
                                              const simulator::Strategy &Base,
                                              double MaxWork);

/// The fastest of Minima (not empty) as Sim simulates them, which leaves
/// Sim holding it (the first on a tie, the Once charge's at full weight).
simulator::Strategy fastestMinimum(simulator::Simulator &Sim,
                                   std::vector<simulator::Strategy> Minima);

/// OptCNN's strategy: the fastest of optcnnMinima(), left simulated in Sim.
/// None as minimize().
std::optional<simulator::Strategy>
optcnnStrategy(AdditiveCost &Cost, simulator::Simulator &Sim,
               const simulator::Strategy &Base, double MaxWork);

} // namespace onnx2soap::soap_search

#endif
