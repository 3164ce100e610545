//===- codegen/PlanBuilder.h - ProgramPlan internals ------------*- C++ -*-===//
//
// Internal to codegen: the Builder buildProgramPlan() runs, and the small
// helpers its parts share. Its parts: ProgramPlan.cpp (the passes run in
// order, the tensor table, the calls), PlanBuffers.cpp (each rank's boxes of
// held tensors, the partitions' buffers and input bindings), PlanSteps.cpp
// (each rank's steps in the simulated order, and what --profile-comm
// measures), PlanWeights.cpp (the initial weight shards) and Runnable.cpp
// (which configs a generated program runs, and the attributes each
// partition's call sees).
//
//===----------------------------------------------------------------------===//
#ifndef ONNX2SOAP_CODEGEN_PLANBUILDER_H
#define ONNX2SOAP_CODEGEN_PLANBUILDER_H

#include "codegen/ProgramPlan.h"
#include "ir/BatchDims.h"
#include "ir/Error.h"
#include "llvm/Support/FormatVariadic.h"
#include <map>
#include <set>
#include <tuple>
#include <unordered_map>
#include <vector>

namespace onnx2soap::codegen::detail {

using rt::program::BufferKind;
using rt::program::CopyInfo;
using rt::program::StepInfo;
using rt::program::StepKind;
using simulator::DeviceId;
using simulator::isTrainingBatchNorm;
using simulator::outputIndex;
using simulator::ParallelConfig;
using simulator::Task;
using simulator::TaskId;
using simulator::TaskKind;

inline rt::DType toRuntime(ir::DType Type) {
  return static_cast<rt::DType>(static_cast<uint8_t>(Type));
}

inline bool sameRegion(llvm::ArrayRef<ir::Interval> A,
                       llvm::ArrayRef<ir::Interval> B) {
  return A.size() == B.size() && std::equal(A.begin(), A.end(), B.begin());
}

/// Partitions of a BatchNorm sharing a channel range must sum statistics.
inline bool needsGlobalStatistics(const ir::Op &O, const ParallelConfig &C) {
  return isTrainingBatchNorm(O) && C.numPartitions() / C.Degrees[1] > 1;
}

/// Inputs added once to a contraction's result (a bias): with a Reduction
/// split only the first slice's partition reads them, so partition P of
/// config C does not read input Slot.
inline bool skipsBias(const ir::Op &O, const ParallelConfig &C, unsigned P,
                      unsigned Slot) {
  return Slot == 2 && C.Reduction > 1 && C.reductionIndex(P) != 0 &&
         (O.Kind == ir::OpKind::Gemm || O.Kind == ir::OpKind::Conv);
}

/// Kinds whose kernels read positions in their input from attributes
/// (Slice's starts, the pads of windows and of Pad): each partition's call
/// gets its own, rebased on the input box it reads (CallInfo::FirstAttr).
bool readsPositions(ir::OpKind Kind);

/// The attributes a partition's call sees when it computes output box Out
/// reading input 0's box In (Runnable.cpp).
ir::Attributes localAttributes(const ir::Op &O,
                               llvm::ArrayRef<ir::Interval> Out,
                               llvm::ArrayRef<ir::Interval> In);

/// A step with no call, peer, group or buffers.
inline StepInfo blankStep() {
  StepInfo Step{};
  Step.Call = Step.Peer = Step.Group = Step.Buffer = Step.Gradient = -1;
  Step.State[0] = Step.State[1] = Step.State[2] = -1;
  Step.Type = rt::DType::Float32;
  return Step;
}

inline bool isHeld(const ir::Tensor &Value) {
  return Value.Role == ir::TensorRole::Parameter ||
         Value.Role == ir::TensorRole::State ||
         Value.Role == ir::TensorRole::Constant;
}

/// The box one rank holds of a parameter, state or constant tensor.
struct Box {
  ir::Region Region;
  int32_t Buffer = -1;
  int32_t Gradient = -1;
  int32_t State[3] = {-1, -1, -1};
};

/// How a partition reads one input.
struct Binding {
  ir::Region Needed;
  int32_t Buffer = -1;
  int32_t Gradient = -1;
  /// Gathered from producers: the buffer is this partition's own.
  bool Staged = false;
  bool Summed = false;
};

class Builder {
public:
  Builder(const ir::TrainingGraph &T, const simulator::Strategy &S,
          const simulator::Machine &M, const PlanOptions &Options,
          ProgramPlan &Out)
      : T(T), G(T.G), S(S), M(M), Options(Options), Out(Out) {}

  llvm::Error run(const simulator::Simulator &Sim);

private:
  int32_t tensorIndex(ir::TensorId Id, rt::program::TensorRole Role);
  int32_t addBuffer(DeviceId Rank, BufferKind Kind, ir::TensorId Tensor,
                    llvm::ArrayRef<ir::Interval> Region, ir::DType Type);
  CopyInfo copy(int32_t From, llvm::ArrayRef<ir::Interval> FromRegion,
                int32_t To, llvm::ArrayRef<ir::Interval> ToRegion,
                llvm::ArrayRef<ir::Interval> Box, bool Add,
                int64_t Offset = 0) const;
  llvm::Error makeBoxes();
  void makeOutputs();
  llvm::Error bindInputs();
  void makeCalls();
  llvm::Error makeSteps(const simulator::TaskGraph &TG);
  llvm::Error makeWeights();
  /// Appends one entry to the attribute table.
  void addAttribute(const std::string &Name, const ir::AttrValue &Value);

  /// The region of output Output partition P writes, computed once:
  /// binding inputs asks for every producer partition of every consumer
  /// partition (4096 per edge on 64 devices).
  const ir::Region &written(ir::OpId Op, unsigned Output, unsigned P) const {
    uint64_t Key = uint64_t(Op) << 40 | uint64_t(Output) << 32 | P;
    auto [It, New] = Written.try_emplace(Key);
    if (New) {
      const ir::Op &O = G.op(Op);
      const ParallelConfig &C = S[Op];
      It->second =
          ir::outputRegionOf(G, O, Output, simulator::outputRegion(G, O, C, P),
                             simulator::reductionSlice(G, O, C, P));
    }
    return It->second;
  }
  mutable std::unordered_map<uint64_t, ir::Region> Written;
  /// The region of input Slot partition P reads: the kind's rule, except
  /// that a bias is read by the first Reduction slice only.
  ir::Region needed(ir::OpId Op, unsigned Slot, unsigned P) const {
    const ir::Op &O = G.op(Op);
    const ParallelConfig &C = S[Op];
    if (skipsBias(O, C, P, Slot))
      return {};
    return ruleRegion(Op, Slot, P);
  }
  /// The kind's rule alone: what the planner counts the partition as using
  /// (every Reduction slice's partition takes part in its bias's gradient
  /// all-reduce, adding zeros).
  ir::Region ruleRegion(ir::OpId Op, unsigned Slot, unsigned P) const {
    const ir::Op &O = G.op(Op);
    const ParallelConfig &C = S[Op];
    return ir::opKindInfo(O.Kind).InputRegion(
        G, O, Slot, simulator::outputRegion(G, O, C, P),
        simulator::reductionSlice(G, O, C, P));
  }
  bool absentRegion(llvm::ArrayRef<ir::Interval> R, ir::TensorId Id) const {
    return R.size() != G.tensor(Id).Type.rank() || ir::regionVolume(R) == 0;
  }
  int32_t group(llvm::ArrayRef<DeviceId> Devices);
  /// The pairs and groups --profile-comm measures (Plan::ProfilePairs).
  void makeProfileComm();
  /// The gradient cells of a parameter as the task graph cuts them (its
  /// readers' rule regions, weight-only readers aside), computed once.
  const std::vector<simulator::GradientCells> &cellsOf(ir::TensorId Param);
  void addStep(DeviceId Rank, StepInfo Step) { PerRank[Rank].push_back(Step); }
  int32_t addCopies(llvm::ArrayRef<CopyInfo> Copies) {
    int32_t First = Out.Copies.size();
    Out.Copies.insert(Out.Copies.end(), Copies.begin(), Copies.end());
    return First;
  }

  const ir::TrainingGraph &T;
  const ir::Graph &G;
  const simulator::Strategy &S;
  const simulator::Machine &M;
  const PlanOptions &Options;
  ProgramPlan &Out;

  std::map<ir::TensorId, int32_t> TensorIndex;
  std::vector<ir::TensorId> TensorOfIndex;
  std::map<std::pair<ir::TensorId, DeviceId>, Box> Boxes;
  /// [op][partition][output]
  std::vector<std::vector<llvm::SmallVector<int32_t, 3>>> Outputs, OutGrads;
  /// [op][partition][slot]
  std::vector<std::vector<llvm::SmallVector<Binding, 3>>> Inputs;
  std::vector<std::vector<int32_t>> CallOf;
  /// [call]: copies before a forward / after a backward (local edges).
  std::vector<std::vector<CopyInfo>> Prologue, Epilogue;
  /// A part of a rank's box of a parameter, state or constant tensor that
  /// partitions read as a buffer of its own (the box holds more): one per
  /// rank, tensor and region, copied from the box once a step, before its
  /// first reader's forward, and its gradient, which the readers' backward
  /// calls add up, added back into the box's once, after the last one's.
  /// (One copy per reading call, as until 2026-11-25, copied an unrolled
  /// layer's weights at every step of the sequence and held a copy per
  /// step: RNNTC's cells split over hidden units on two CPU ranks copied
  /// 2.7 GB a training step and allocated 3 GB a rank.)
  struct Slice {
    int32_t Buffer = -1, Gradient = -1;
    CopyInfo Fill{}, AddBack{};
    bool Filled = false;
    /// Readers whose backward adds to Gradient, not yet emitted.
    unsigned GradientReaders = 0;
  };
  std::map<std::tuple<ir::TensorId, DeviceId, ir::Region>, Slice> Slices;
  /// [call]: the slices it reads, and those its backward adds to.
  std::vector<llvm::SmallVector<Slice *, 2>> SlicesRead, SlicesAdded;
  /// The copies of a call's forward step: the fills of the slices it reads
  /// that no earlier step filled, then its prologue.
  std::vector<CopyInfo> forwardCopies(int32_t Call);
  /// The copies after a call's backward: its epilogue, then the add-backs
  /// of the slices it was the last to add to.
  std::vector<CopyInfo> backwardCopies(int32_t Call);
  std::vector<std::vector<CopyInfo>> StateCopies; // by rank
  std::vector<std::vector<StepInfo>> PerRank;
  std::map<std::vector<DeviceId>, int32_t> GroupIndex;
  std::map<ir::TensorId, std::vector<simulator::GradientCells>> Cells;

  /// Weight-only ops (simulator::weightOnlyOps): every rank that reads
  /// their results computes them whole from whole weights, forward before
  /// its first step and backward after its last; their calls by rank.
  std::vector<bool> WeightOnly;
  std::vector<std::map<DeviceId, int32_t>> WeightOnlyCalls;
  /// Trainable parameters read only through weight-only ops: updated after
  /// the weight-only backward (the simulator has no tasks for them).
  std::set<ir::TensorId> ThroughWeightOnly;
  bool isDerived(ir::TensorId Id) const {
    const ir::Tensor &Value = G.tensor(Id);
    return Value.Role == ir::TensorRole::Activation &&
           WeightOnly[Value.Producer];
  }
  bool isBoxed(ir::TensorId Id) const {
    return isHeld(G.tensor(Id)) || isDerived(Id);
  }
};

} // namespace onnx2soap::codegen::detail

#endif
