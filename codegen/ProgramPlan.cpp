//===- codegen/ProgramPlan.cpp - Deriving a generated program's plan ------===//
//
// Three passes over the training graph under the strategy, then one over
// the simulated schedule:
//   1. every non-activation tensor a rank reads (parameters, state,
//      constants) gets one box per rank: the bounding box of the regions its
//      partitions there read, with gradient and optimizer-state boxes for
//      trainable parameters;
//   2. every partition gets its output (and output-gradient) buffers;
//   3. every partition input is bound: straight to a producer's buffer when
//      one local producer partition wrote exactly the needed region, else to
//      a gathered (or, behind a Reduction split, summed) buffer filled by
//      local copies and received messages;
//   4. the simulator's tasks, in their simulated order, become each rank's
//      steps: a transfer becomes a Send on one rank and a Recv on the other,
//      an all-reduce one step on each member.
//
//===----------------------------------------------------------------------===//
#include "codegen/ProgramPlan.h"
#include "codegen/BufferLayout.h"
#include "ir/BatchDims.h"
#include "runtime_lib/HostBox.h"
#include "simulator/ProfileCostModel.h"
#include "simulator/Simulator.h"
#include "llvm/Support/FormatVariadic.h"
#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <numeric>
#include <optional>
#include <queue>
#include <set>
#include <thread>
#include <tuple>
#include <unordered_map>

namespace onnx2soap::codegen {

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

static llvm::Error fail(const llvm::Twine &Message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), Message.str());
}

static rt::DType toRuntime(ir::DType Type) {
  return static_cast<rt::DType>(static_cast<uint8_t>(Type));
}

static bool sameRegion(llvm::ArrayRef<ir::Interval> A,
                       llvm::ArrayRef<ir::Interval> B) {
  return A.size() == B.size() && std::equal(A.begin(), A.end(), B.begin());
}

/// Partitions of a BatchNorm sharing a channel range must sum statistics.
static bool needsGlobalStatistics(const ir::Op &O, const ParallelConfig &C) {
  return isTrainingBatchNorm(O) && C.numPartitions() / C.Degrees[1] > 1;
}

/// Inputs added once to a contraction's result (a bias): with a Reduction
/// split only the first slice's partition reads them, so partition P of
/// config C does not read input Slot.
static bool skipsBias(const ir::Op &O, const ParallelConfig &C, unsigned P,
                      unsigned Slot) {
  return Slot == 2 && C.Reduction > 1 && C.reductionIndex(P) != 0 &&
         (O.Kind == ir::OpKind::Gemm || O.Kind == ir::OpKind::Conv);
}

/// Window ops whose `pads` a spatial split rebases (localPads).
static bool isPaddedWindow(ir::OpKind Kind) {
  return Kind == ir::OpKind::Conv || Kind == ir::OpKind::MaxPool ||
         Kind == ir::OpKind::AveragePool;
}

/// Kinds whose kernels read positions in their input from attributes
/// (Slice's starts, the pads of windows and of Pad): each partition's call
/// gets its own, rebased on the input box it reads (CallInfo::FirstAttr).
static bool readsPositions(ir::OpKind Kind) {
  return Kind == ir::OpKind::Slice || isPaddedWindow(Kind) ||
         Kind == ir::OpKind::Pad;
}

/// The pads of a constant-mode Pad's partition that computes box Out from
/// input box In: per dim, the output before In's first element and after
/// its last (none inside the tensor; a crop, a negative pad, is already in
/// In's bounds).
static ir::IntList localConstantPads(const ir::Op &O,
                                     llvm::ArrayRef<ir::Interval> Out,
                                     llvm::ArrayRef<ir::Interval> In) {
  auto Pads = O.Attrs.getInts("pads");
  size_t Rank = Out.size();
  ir::IntList Local(Pads.begin(), Pads.end());
  for (size_t D = 0; D < Rank && D < In.size(); ++D) {
    if (Pads[D] == 0 && Pads[Rank + D] == 0)
      continue;
    Local[D] = std::max<int64_t>(In[D].Begin - (Out[D].Begin - Pads[D]), 0);
    Local[Rank + D] = std::max<int64_t>((Out[D].End - Pads[D]) - In[D].End, 0);
  }
  return Local;
}

/// The pads of a window op's partition (Conv, MaxPool, AveragePool) that
/// computes spatial box Out from input box In: the begin padding its first
/// window still reaches, and the end padding its last window reaches (at
/// most the op's: a ceil-mode pool's last window may reach beyond, which
/// the kernel handles as the whole op's). A partition inside the tensor has
/// none.
static ir::IntList localPads(const ir::Op &O, llvm::ArrayRef<ir::Interval> Out,
                             llvm::ArrayRef<ir::Interval> In) {
  auto Pads = O.Attrs.getInts("pads"), Strides = O.Attrs.getInts("strides"),
       Dilations = O.Attrs.getInts("dilations"),
       Kernel = O.Attrs.getInts("kernel_shape");
  size_t Spatial = Pads.size() / 2;
  ir::IntList Local(Pads.begin(), Pads.end());
  for (size_t I = 0; I < Spatial && 2 + I < Out.size(); ++I) {
    const ir::Interval &O2 = Out[2 + I], &I2 = In[2 + I];
    if (O2.empty())
      continue;
    int64_t Extent = (Kernel[I] - 1) * Dilations[I] + 1;
    int64_t First = O2.Begin * Strides[I] - Pads[I];
    int64_t LastEnd = (O2.End - 1) * Strides[I] - Pads[I] + Extent;
    Local[I] = std::clamp<int64_t>(I2.Begin - First, 0, Pads[I]);
    Local[Spatial + I] =
        std::clamp<int64_t>(LastEnd - I2.End, 0, Pads[Spatial + I]);
  }
  return Local;
}

/// The attributes partition's call sees when it computes output box Out
/// reading input 0's box In. Slice: starts and ends count from In's corner
/// (an end one past the last element read, or one before it for a negative
/// step, as the importer normalizes them). Conv, MaxPool, AveragePool: the
/// pads of the partition's windows (localPads), so that they split over
/// space; a constant-mode Pad: its padding around In (localConstantPads).
/// Reshape, Expand: the target shape is Out's (their kernels take it
/// from the output buffer). Other kinds: the op's own.
static ir::Attributes localAttributes(const ir::Op &O,
                                      llvm::ArrayRef<ir::Interval> Out,
                                      llvm::ArrayRef<ir::Interval> In) {
  ir::Attributes Attrs = O.Attrs;
  if (O.Kind == ir::OpKind::Reshape || O.Kind == ir::OpKind::Expand) {
    ir::IntList Shape;
    for (const ir::Interval &I : Out)
      Shape.push_back(I.size());
    Attrs.set("shape", Shape);
  } else if (O.Kind == ir::OpKind::Slice) {
    auto Starts = O.Attrs.getInts("starts"), Steps = O.Attrs.getInts("steps");
    ir::IntList LocalStarts, LocalEnds;
    for (size_t D = 0; D < Out.size() && D < In.size(); ++D) {
      int64_t Start = Starts[D] + Out[D].Begin * Steps[D] - In[D].Begin;
      int64_t Last = Start + (Out[D].size() - 1) * Steps[D];
      LocalStarts.push_back(Start);
      LocalEnds.push_back(Out[D].empty() ? Start
                                         : Last + (Steps[D] > 0 ? 1 : -1));
    }
    Attrs.set("starts", LocalStarts);
    Attrs.set("ends", LocalEnds);
  } else if (isPaddedWindow(O.Kind) && O.Attrs.has("pads")) {
    Attrs.set("pads", localPads(O, Out, In));
  } else if (O.Kind == ir::OpKind::Pad &&
             O.Attrs.getString("mode", "constant") == "constant") {
    Attrs.set("pads", localConstantPads(O, Out, In));
  }
  return Attrs;
}

llvm::Error checkRunnable(const ir::TrainingGraph &T, const ir::Op &O,
                          const ParallelConfig &C) {
  const ir::Graph &G = T.G;
  auto Refuse = [&](const llvm::Twine &Why) {
    return fail(llvm::formatv("op '{0}' ({1}) under config {2}: {3}", O.Name,
                              ir::opKindName(O.Kind), C.str(), Why.str()));
  };
  unsigned Parts = C.numPartitions();
  if (Parts == 1)
    return llvm::Error::success();
  if (C.Reduction > 1 && O.Kind == ir::OpKind::SoftmaxCrossEntropyLoss &&
      (O.Attrs.getInt("has_ignore_index", 0) ||
       (O.Inputs.size() > 2 && O.Inputs[2] != ir::NoTensor)))
    return Refuse("a Reduction split of a loss with class weights or "
                  "ignore_index (its mean divides by a data-dependent "
                  "count) is not supported by generated programs yet");
  if (C.Reduction > 1 && O.Kind != ir::OpKind::SoftmaxCrossEntropyLoss &&
      O.Kind != ir::OpKind::MatMul && O.Kind != ir::OpKind::Gemm &&
      O.Kind != ir::OpKind::Conv)
    return Refuse("Reduction splits run in generated programs only for "
                  "MatMul, Gemm, Conv and the cross-entropy loss");
  bool Recurrent = O.Kind == ir::OpKind::LSTM || O.Kind == ir::OpKind::GRU;
  const ir::Tensor &Out0 = G.tensor(O.Outputs[0]);
  for (unsigned D = 0; D < C.Degrees.size(); ++D) {
    if (C.Degrees[D] == 1)
      continue;
    if (Recurrent && static_cast<int>(D) != Out0.BatchDim)
      return Refuse("recurrent layers split only over the batch in "
                    "generated programs");
    if (O.Kind == ir::OpKind::Split)
      if (static_cast<int>(D) != Out0.BatchDim)
        return Refuse("this op kind splits only over the batch in generated "
                      "programs (its attributes hold absolute positions)");
  }
  // Every partition's local shapes must be what the op computes on its
  // local inputs: this catches splits whose attributes hold absolute
  // positions (convolution padding, concatenation axes, target shapes).
  const ir::OpKindInfo &Info = ir::opKindInfo(O.Kind);
  for (unsigned P = 0; P < Parts; ++P) {
    ir::Region Out = simulator::outputRegion(G, O, C, P);
    ir::Interval Reduction = simulator::reductionSlice(G, O, C, P);
    // Local types of the inputs (reserved: Types points into it).
    std::vector<ir::TensorType> Local;
    Local.reserve(O.Inputs.size());
    llvm::SmallVector<const ir::TensorType *, 4> Types;
    ir::Region In0;
    for (unsigned I = 0; I < O.Inputs.size(); ++I) {
      if (O.Inputs[I] == ir::NoTensor || skipsBias(O, C, P, I)) {
        Types.push_back(nullptr);
        continue;
      }
      ir::Region R = Info.InputRegion(G, O, I, Out, Reduction);
      if (I == 0)
        In0 = R;
      ir::TensorType Type = G.tensor(O.Inputs[I]).Type;
      for (unsigned D = 0; D < Type.rank(); ++D)
        Type.Dims[D] = R[D].size();
      Local.push_back(Type);
      Types.push_back(&Local.back());
    }
    if (O.Kind == ir::OpKind::Pad && ir::regionVolume(In0) == 0)
      return Refuse(llvm::formatv("partition {0} lies wholly in the padding "
                                  "and reads none of its input",
                                  P));
    // Absent trailing inputs are dropped, as the importer does.
    while (!Types.empty() && !Types.back())
      Types.pop_back();
    auto Inferred = Info.InferTypes(localAttributes(O, Out, In0), Types);
    if (!Inferred) {
      return Refuse(llvm::formatv("partition {0} cannot run on its own "
                                  "inputs ({1})",
                                  P, llvm::toString(Inferred.takeError())));
    }
    for (unsigned I = 0; I < O.Outputs.size() && I < Inferred->size(); ++I) {
      ir::Region Want = ir::outputRegionOf(G, O, I, Out, Reduction);
      const ir::Shape &Got = (*Inferred)[I].Dims;
      bool Same = Got.size() == Want.size();
      for (unsigned D = 0; Same && D < Got.size(); ++D)
        Same = Got[D] == Want[D].size();
      if (!Same)
        return Refuse(llvm::formatv(
            "partition {0} would compute {1} for output {2} region {3}; "
            "this split needs per-partition attributes that generated "
            "programs do not support yet",
            P, ir::formatShape(Got), I, ir::formatRegion(Want)));
    }
  }
  return llvm::Error::success();
}

/// A step with no call, peer, group or buffers.
static StepInfo blankStep() {
  StepInfo Step{};
  Step.Call = Step.Peer = Step.Group = Step.Buffer = Step.Gradient = -1;
  Step.State[0] = Step.State[1] = Step.State[2] = -1;
  Step.Type = rt::DType::Float32;
  return Step;
}

static bool isHeld(const ir::Tensor &Value) {
  return Value.Role == ir::TensorRole::Parameter ||
         Value.Role == ir::TensorRole::State ||
         Value.Role == ir::TensorRole::Constant;
}

namespace {

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

int32_t Builder::tensorIndex(ir::TensorId Id, rt::program::TensorRole Role) {
  auto [It, New] = TensorIndex.insert({Id, int32_t(Out.Tensors.size())});
  if (!New)
    return It->second;
  TensorOfIndex.push_back(Id);
  const ir::Tensor &Value = G.tensor(Id);
  rt::program::TensorInfo Info{};
  Info.Name = Out.intern(Value.Name);
  Info.Role = Role;
  Info.Type = toRuntime(Value.Type.Type);
  Info.Rank = Value.Type.rank();
  for (unsigned D = 0; D < Value.Type.rank(); ++D)
    Info.Dims[D] = Value.Type.Dims[D];
  Out.Tensors.push_back(Info);
  return It->second;
}

int32_t Builder::addBuffer(DeviceId Rank, BufferKind Kind, ir::TensorId Tensor,
                           llvm::ArrayRef<ir::Interval> Region,
                           ir::DType Type) {
  rt::program::BufferInfo Info{};
  Info.Rank = Rank;
  Info.Kind = Kind;
  Info.Type = toRuntime(Type);
  Info.Tensor = -1;
  if (Tensor != ir::NoTensor) {
    auto It = TensorIndex.find(Tensor);
    if (It != TensorIndex.end())
      Info.Tensor = It->second;
  }
  Info.WeightOffset = -1;
  Info.Dims = Region.size();
  for (unsigned D = 0; D < Region.size(); ++D) {
    Info.Extent[D] = Region[D].size();
    Info.Origin[D] = Region[D].Begin;
  }
  Out.Buffers.push_back(Info);
  return Out.Buffers.size() - 1;
}

CopyInfo Builder::copy(int32_t From, llvm::ArrayRef<ir::Interval> FromRegion,
                       int32_t To, llvm::ArrayRef<ir::Interval> ToRegion,
                       llvm::ArrayRef<ir::Interval> Box, bool Add,
                       int64_t Offset) const {
  CopyInfo C{};
  C.From = From;
  C.To = To;
  C.Add = Add;
  C.Dims = Box.size();
  C.Offset = Offset;
  for (unsigned D = 0; D < Box.size(); ++D) {
    C.Extent[D] = Box[D].size();
    C.FromOrigin[D] = From >= 0 ? Box[D].Begin - FromRegion[D].Begin : 0;
    C.ToOrigin[D] = To >= 0 ? Box[D].Begin - ToRegion[D].Begin : 0;
  }
  return C;
}

int32_t Builder::group(llvm::ArrayRef<DeviceId> Devices) {
  std::vector<DeviceId> Sorted(Devices.begin(), Devices.end());
  std::sort(Sorted.begin(), Sorted.end());
  auto [It, New] = GroupIndex.insert({Sorted, int32_t(Out.Groups.size())});
  if (New) {
    Out.Groups.push_back(
        {int32_t(Out.GroupRanks.size()), int32_t(Sorted.size())});
    for (DeviceId D : Sorted)
      Out.GroupRanks.push_back(D);
  }
  return It->second;
}

static rt::program::TensorRole heldRole(const ir::Tensor &Value) {
  switch (Value.Role) {
  case ir::TensorRole::Parameter:
    return rt::program::TensorRole::Parameter;
  case ir::TensorRole::State:
    return rt::program::TensorRole::State;
  default:
    return rt::program::TensorRole::Constant;
  }
}

const std::vector<simulator::GradientCells> &
Builder::cellsOf(ir::TensorId Param) {
  auto [It, New] = Cells.insert({Param, {}});
  if (!New)
    return It->second;
  std::vector<std::pair<ir::Region, DeviceId>> Uses;
  for (const ir::Op &O : G.ops())
    for (unsigned Slot = 0; Slot < O.Inputs.size(); ++Slot) {
      if (WeightOnly[O.Id] || O.Inputs[Slot] != Param ||
          !(T.BackwardInputs[O.Id] >> Slot & 1))
        continue;
      for (unsigned P = 0; P < S[O.Id].numPartitions(); ++P)
        Uses.push_back({ruleRegion(O.Id, Slot, P), S[O.Id].device(P)});
    }
  It->second = simulator::gradientCells(G.tensor(Param).Type.Dims, Uses);
  return It->second;
}

llvm::Error Builder::makeBoxes() {
  // Bounding boxes of what each rank's partitions read, buffers after, in
  // (tensor, rank) order. Weight-only results and the weights they come
  // from are held whole.
  auto Grow = [&](ir::TensorId Id, DeviceId Rank, const ir::Region &R) {
    auto [It, New] = Boxes.insert({{Id, Rank}, Box()});
    It->second.Region = New ? R : ir::enclose(It->second.Region, R);
  };
  std::set<ir::TensorId> ReadByCompute;
  for (const ir::Op &O : G.ops()) {
    if (WeightOnly[O.Id])
      continue;
    const ParallelConfig &C = S[O.Id];
    for (unsigned Slot = 0; Slot < O.Inputs.size(); ++Slot) {
      ir::TensorId In = O.Inputs[Slot];
      if (In == ir::NoTensor || !isBoxed(In))
        continue;
      ReadByCompute.insert(In);
      for (unsigned P = 0; P < C.numPartitions(); ++P) {
        ir::Region R = ruleRegion(O.Id, Slot, P);
        if (absentRegion(R, In))
          continue;
        Grow(In, C.device(P),
             isDerived(In) ? ir::fullRegion(G.tensor(In).Type.Dims) : R);
      }
    }
  }
  // Weight-only ops run on every rank holding one of their results, in
  // reverse order so a producer sees all its consumers' ranks.
  WeightOnlyCalls.assign(G.numOps(), {});
  for (size_t Index = G.numOps(); Index-- > 0;) {
    const ir::Op &O = G.op(static_cast<ir::OpId>(Index));
    if (!WeightOnly[O.Id])
      continue;
    std::set<DeviceId> Ranks;
    for (ir::TensorId Out : O.Outputs)
      for (auto It = Boxes.lower_bound({Out, 0});
           It != Boxes.end() && It->first.first == Out; ++It)
        Ranks.insert(It->first.second);
    for (DeviceId Rank : Ranks) {
      WeightOnlyCalls[O.Id][Rank] = -1;
      for (ir::TensorId Out : O.Outputs)
        Grow(Out, Rank, ir::fullRegion(G.tensor(Out).Type.Dims));
      for (ir::TensorId In : O.Inputs) {
        if (In == ir::NoTensor || !isBoxed(In))
          continue;
        if (isHeld(G.tensor(In)) && ReadByCompute.count(In))
          return fail(llvm::formatv(
              "weight '{0}' is read both directly and through weight-only "
              "op '{1}'; generated programs do not support that yet",
              G.tensor(In).Name, O.Name));
        if (G.tensor(In).Role == ir::TensorRole::Parameter)
          ThroughWeightOnly.insert(In);
        Grow(In, Rank, ir::fullRegion(G.tensor(In).Type.Dims));
      }
    }
  }
  int States = rt::optimizerStateCount(Options.Optimizer);
  for (auto &[Key, Held] : Boxes) {
    const ir::Tensor &Value = G.tensor(Key.first);
    bool Derived = isDerived(Key.first);
    if (!Derived)
      tensorIndex(Key.first, heldRole(Value));
    BufferKind Kind =
        Derived                                   ? BufferKind::Activation
        : Value.Role == ir::TensorRole::Parameter ? BufferKind::Parameter
        : Value.Role == ir::TensorRole::State     ? BufferKind::State
                                                  : BufferKind::Constant;
    Held.Buffer =
        addBuffer(Key.second, Kind, Key.first, Held.Region, Value.Type.Type);
    bool Trained =
        std::binary_search(T.Parameters.begin(), T.Parameters.end(), Key.first);
    if (Derived && T.NeedsGrad[Key.first])
      Held.Gradient = addBuffer(Key.second, BufferKind::Gradient, Key.first,
                                Held.Region, Value.Type.Type);
    if (!Trained)
      continue;
    Held.Gradient = addBuffer(Key.second, BufferKind::Gradient, Key.first,
                              Held.Region, Value.Type.Type);
    for (int I = 0; I < States; ++I)
      Held.State[I] = addBuffer(Key.second, BufferKind::OptimizerState,
                                Key.first, Held.Region, Value.Type.Type);
  }
  return llvm::Error::success();
}

void Builder::makeOutputs() {
  Outputs.resize(G.numOps());
  OutGrads.resize(G.numOps());
  for (const ir::Op &O : G.ops()) {
    const ParallelConfig &C = S[O.Id];
    Outputs[O.Id].resize(C.numPartitions());
    OutGrads[O.Id].resize(C.numPartitions());
    bool HasBackward = T.BackwardInputs[O.Id] != 0;
    if (WeightOnly[O.Id])
      continue; // their results are boxes
    for (unsigned P = 0; P < C.numPartitions(); ++P)
      for (unsigned I = 0; I < O.Outputs.size(); ++I) {
        ir::TensorId Id = O.Outputs[I];
        ir::Region R = written(O.Id, I, P);
        if (Id == T.LossTensor)
          tensorIndex(Id, rt::program::TensorRole::Loss);
        ir::DType Type = G.tensor(Id).Type.Type;
        Outputs[O.Id][P].push_back(
            addBuffer(C.device(P), BufferKind::Activation, Id, R, Type));
        OutGrads[O.Id][P].push_back(
            HasBackward && T.NeedsGrad[Id]
                ? addBuffer(C.device(P), BufferKind::Gradient, Id, R, Type)
                : -1);
      }
  }
}

llvm::Error Builder::bindInputs() {
  Inputs.resize(G.numOps());
  CallOf.resize(G.numOps());
  for (const ir::Op &O : G.ops()) {
    if (WeightOnly[O.Id])
      continue;
    const ParallelConfig &C = S[O.Id];
    Inputs[O.Id].resize(C.numPartitions());
    for (unsigned P = 0; P < C.numPartitions(); ++P) {
      CallOf[O.Id].push_back(Prologue.size());
      Prologue.emplace_back();
      Epilogue.emplace_back();
      SlicesRead.emplace_back();
      SlicesAdded.emplace_back();
    }
  }
  for (const ir::Op &O : G.ops()) {
    if (WeightOnly[O.Id])
      continue;
    const ParallelConfig &C = S[O.Id];
    for (unsigned P = 0; P < C.numPartitions(); ++P) {
      DeviceId Rank = C.device(P);
      int32_t Call = CallOf[O.Id][P];
      for (unsigned Slot = 0; Slot < O.Inputs.size(); ++Slot) {
        Binding B;
        ir::TensorId In = O.Inputs[Slot];
        bool WantGrad = T.BackwardInputs[O.Id] >> Slot & 1;
        if (In == ir::NoTensor) {
          Inputs[O.Id][P].push_back(B);
          continue;
        }
        const ir::Tensor &Value = G.tensor(In);
        B.Needed = needed(O.Id, Slot, P);
        if (absentRegion(B.Needed, In)) {
          Inputs[O.Id][P].push_back(B);
          continue;
        }
        ir::DType Type = Value.Type.Type;
        if (isBoxed(In)) {
          const Box &Held = Boxes.at({In, Rank});
          if (sameRegion(Held.Region, B.Needed)) {
            B.Buffer = Held.Buffer;
            B.Gradient = WantGrad ? Held.Gradient : -1;
          } else {
            auto [It, New] = Slices.try_emplace({In, Rank, B.Needed});
            Slice &Part = It->second;
            if (New) {
              Part.Buffer =
                  addBuffer(Rank, BufferKind::Gathered, In, B.Needed, Type);
              Part.Fill = copy(Held.Buffer, Held.Region, Part.Buffer, B.Needed,
                               B.Needed, false);
            }
            B.Buffer = Part.Buffer;
            SlicesRead[Call].push_back(&Part);
            if (WantGrad && Held.Gradient >= 0) {
              if (Part.Gradient < 0) {
                Part.Gradient =
                    addBuffer(Rank, BufferKind::Gradient, In, B.Needed, Type);
                Part.AddBack = copy(Part.Gradient, B.Needed, Held.Gradient,
                                    Held.Region, B.Needed, true);
              }
              B.Gradient = Part.Gradient;
              ++Part.GradientReaders;
              SlicesAdded[Call].push_back(&Part);
            }
          }
          Inputs[O.Id][P].push_back(B);
          continue;
        }
        if (Value.Role == ir::TensorRole::Input) {
          int32_t Index = tensorIndex(In, rt::program::TensorRole::Input);
          (void)Index;
          B.Buffer = addBuffer(Rank, BufferKind::Input, In, B.Needed, Type);
          Inputs[O.Id][P].push_back(B);
          continue;
        }
        // An activation: from the producer's partitions.
        const ir::Op &Producer = G.op(Value.Producer);
        const ParallelConfig &PC = S[Producer.Id];
        unsigned Output = outputIndex(Producer, In);
        bool GradFlows =
            WantGrad && T.NeedsGrad[In] && T.BackwardInputs[Producer.Id] != 0;
        llvm::SmallVector<unsigned, 4> Overlapping;
        for (unsigned Q = 0; Q < PC.numPartitions(); ++Q)
          if (ir::regionVolume(
                  ir::intersect(B.Needed, written(Producer.Id, Output, Q))) > 0)
            Overlapping.push_back(Q);
        if (Overlapping.size() == 1 && PC.Reduction == 1 &&
            PC.device(Overlapping[0]) == Rank &&
            sameRegion(written(Producer.Id, Output, Overlapping[0]),
                       B.Needed)) {
          B.Buffer = Outputs[Producer.Id][Overlapping[0]][Output];
          B.Gradient =
              GradFlows ? OutGrads[Producer.Id][Overlapping[0]][Output] : -1;
          Inputs[O.Id][P].push_back(B);
          continue;
        }
        B.Staged = true;
        B.Summed = PC.Reduction > 1;
        B.Buffer = addBuffer(
            Rank, B.Summed ? BufferKind::Accumulated : BufferKind::Gathered, In,
            B.Needed, Type);
        if (GradFlows)
          B.Gradient =
              addBuffer(Rank, BufferKind::Gradient, In, B.Needed, Type);
        for (unsigned Q : Overlapping) {
          if (PC.device(Q) != Rank)
            continue; // a message (makeSteps)
          ir::Region From = written(Producer.Id, Output, Q);
          ir::Region Part = ir::intersect(B.Needed, From);
          Prologue[Call].push_back(copy(Outputs[Producer.Id][Q][Output], From,
                                        B.Buffer, B.Needed, Part, B.Summed));
          if (B.Gradient >= 0 && OutGrads[Producer.Id][Q][Output] >= 0)
            Epilogue[Call].push_back(copy(B.Gradient, B.Needed,
                                          OutGrads[Producer.Id][Q][Output],
                                          From, Part, true));
        }
        Inputs[O.Id][P].push_back(B);
      }
    }
  }
  return llvm::Error::success();
}

void Builder::makeCalls() {
  for (const ir::Op &O : G.ops()) {
    if (WeightOnly[O.Id])
      continue;
    const ParallelConfig &C = S[O.Id];
    bool HasBackward = T.BackwardInputs[O.Id] != 0;
    bool Global = needsGlobalStatistics(O, C);
    const ir::TensorType &OutType = G.tensor(O.Outputs[0]).Type;
    for (unsigned P = 0; P < C.numPartitions(); ++P) {
      rt::program::CallInfo Call{};
      Call.Op = O.Id;
      Call.Partition = P;
      Call.FirstOperand = Out.Operands.size();
      Call.NumInputs = O.Inputs.size();
      Call.NumOutputs = O.Outputs.size();
      Call.HasBackward = HasBackward;
      Call.Flags = Global ? rt::program::CallFlags::GlobalStatistics
                          : rt::program::CallFlags::None;
      Call.Scale = 1.0;
      Call.SeedsLossGradient = HasBackward && O.Outputs[0] == T.LossTensor;
      Call.Statistics = Call.GradientSums = -1;
      if (C.Reduction > 1 && OutType.rank() == 0 &&
          O.Attrs.getString("reduction", "mean") == "mean") {
        ir::Interval Slice = simulator::reductionSlice(G, O, C, P);
        int64_t Extent = ir::parallelDims(G, O).ReductionExtent;
        Call.Scale = double(Slice.size()) / double(Extent);
      }
      ir::Region Region = simulator::outputRegion(G, O, C, P);
      Call.FirstAttr = Out.Attrs.size();
      if (readsPositions(O.Kind)) {
        ir::Attributes Local =
            localAttributes(O, Region, Inputs[O.Id][P][0].Needed);
        for (size_t A = 0; A < Local.entries().size(); ++A)
          if (Local.entries()[A] != O.Attrs.entries()[A])
            addAttribute(Local.entries()[A].first, Local.entries()[A].second);
      }
      Call.NumAttrs = Out.Attrs.size() - Call.FirstAttr;
      Call.ProfileKey = Out.intern(simulator::profileKey(
          {G, O, Region, simulator::reductionSlice(G, O, C, P)}));
      Call.Sharded = !sameRegion(Region, ir::fullRegion(OutType.Dims));
      for (unsigned D = 0; D < OutType.rank(); ++D) {
        Call.GlobalOffset[D] = Region[D].Begin;
        Call.GlobalDims[D] = OutType.Dims[D];
      }
      if (Global) {
        int64_t Channels = Region[1].size();
        ir::Region Stats{{0, 2}, {0, Channels}};
        Call.Statistics = addBuffer(C.device(P), BufferKind::Statistics,
                                    ir::NoTensor, Stats, ir::DType::Float32);
        if (HasBackward)
          Call.GradientSums =
              addBuffer(C.device(P), BufferKind::Statistics, ir::NoTensor,
                        Stats, ir::DType::Float32);
        Call.StatisticsCount = OutType.numElements() / OutType.Dims[1];
      }
      for (const Binding &B : Inputs[O.Id][P])
        Out.Operands.push_back(B.Buffer);
      for (int32_t Buffer : Outputs[O.Id][P])
        Out.Operands.push_back(Buffer);
      if (HasBackward) {
        for (int32_t Buffer : OutGrads[O.Id][P])
          Out.Operands.push_back(Buffer);
        for (const Binding &B : Inputs[O.Id][P])
          Out.Operands.push_back(B.Gradient);
      }
      Out.Calls.push_back(Call);
    }
    // New running statistics go to the state boxes after the step.
    uint32_t StateInputs = ir::opKindInfo(O.Kind).StateInputs;
    unsigned Output = 1;
    for (unsigned Slot = 0; Slot < O.Inputs.size() && StateInputs; ++Slot) {
      if (!(StateInputs >> Slot & 1))
        continue;
      if (Output < O.Outputs.size() && O.Inputs[Slot] != ir::NoTensor)
        for (unsigned P = 0; P < C.numPartitions(); ++P) {
          const Box &Held = Boxes.at({O.Inputs[Slot], C.device(P)});
          ir::Region From = written(O.Id, Output, P);
          StateCopies[C.device(P)].push_back(copy(Outputs[O.Id][P][Output],
                                                  From, Held.Buffer,
                                                  Held.Region, From, false));
        }
      ++Output;
    }
  }
  // Weight-only ops: one whole call per rank that needs them.
  for (const ir::Op &O : G.ops()) {
    if (!WeightOnly[O.Id])
      continue;
    bool HasBackward = T.BackwardInputs[O.Id] != 0;
    for (auto &[Rank, CallIndex] : WeightOnlyCalls[O.Id]) {
      rt::program::CallInfo Call{};
      Call.Op = O.Id;
      Call.Partition = 0;
      Call.ProfileKey = Out.intern(simulator::profileKey(
          {G, O, ir::fullRegion(G.tensor(O.Outputs[0]).Type.Dims),
           simulator::reductionSlice(G, O, S[O.Id], 0)}));
      Call.FirstOperand = Out.Operands.size();
      Call.NumInputs = O.Inputs.size();
      Call.NumOutputs = O.Outputs.size();
      Call.HasBackward = HasBackward;
      Call.Flags = rt::program::CallFlags::None;
      Call.Scale = 1.0;
      Call.Statistics = Call.GradientSums = -1;
      auto BoxOf = [&, Rank = Rank](ir::TensorId Id) -> const Box * {
        if (Id == ir::NoTensor)
          return nullptr;
        auto It = Boxes.find({Id, Rank});
        return It == Boxes.end() ? nullptr : &It->second;
      };
      for (ir::TensorId In : O.Inputs)
        Out.Operands.push_back(BoxOf(In) ? BoxOf(In)->Buffer : -1);
      for (ir::TensorId Output : O.Outputs)
        Out.Operands.push_back(BoxOf(Output)->Buffer);
      if (HasBackward) {
        for (ir::TensorId Output : O.Outputs)
          Out.Operands.push_back(BoxOf(Output)->Gradient);
        for (unsigned Slot = 0; Slot < O.Inputs.size(); ++Slot)
          Out.Operands.push_back((T.BackwardInputs[O.Id] >> Slot & 1) &&
                                         BoxOf(O.Inputs[Slot])
                                     ? BoxOf(O.Inputs[Slot])->Gradient
                                     : -1);
      }
      CallIndex = Out.Calls.size();
      Out.Calls.push_back(Call);
    }
  }
}

std::vector<CopyInfo> Builder::forwardCopies(int32_t Call) {
  std::vector<CopyInfo> Copies;
  for (Slice *Part : SlicesRead[Call])
    if (!Part->Filled) {
      Part->Filled = true;
      Copies.push_back(Part->Fill);
    }
  Copies.insert(Copies.end(), Prologue[Call].begin(), Prologue[Call].end());
  return Copies;
}

std::vector<CopyInfo> Builder::backwardCopies(int32_t Call) {
  std::vector<CopyInfo> Copies = Epilogue[Call];
  for (Slice *Part : SlicesAdded[Call])
    if (--Part->GradientReaders == 0)
      Copies.push_back(Part->AddBack);
  return Copies;
}

llvm::Error Builder::makeSteps(const simulator::TaskGraph &TG) {
  // The global order: a topological order of the task graph that follows
  // the simulated start times (ties: the structural key).
  size_t N = TG.size();
  std::vector<unsigned> Waiting(N, 0);
  using Entry = std::tuple<double, simulator::TaskKey, TaskId>;
  auto Later = [](const Entry &A, const Entry &B) {
    if (std::get<0>(A) != std::get<0>(B))
      return std::get<0>(A) > std::get<0>(B);
    if (!(std::get<1>(A) == std::get<1>(B)))
      return std::get<1>(B) < std::get<1>(A);
    return std::get<2>(A) > std::get<2>(B);
  };
  std::priority_queue<Entry, std::vector<Entry>, decltype(Later)> Ready(Later);
  for (TaskId Id = 0; Id < N; ++Id) {
    const Task &Node = TG.task(Id);
    if (!Node.Alive)
      continue;
    Waiting[Id] = Node.Preds.size();
    if (!Waiting[Id])
      Ready.push({Node.Start, Node.Key, Id});
  }
  int States = rt::optimizerStateCount(Options.Optimizer);
  while (!Ready.empty()) {
    TaskId Id = std::get<2>(Ready.top());
    Ready.pop();
    const Task &Node = TG.task(Id);
    for (TaskId Next : Node.Succs)
      if (--Waiting[Next] == 0)
        Ready.push({TG.task(Next).Start, TG.task(Next).Key, Next});

    StepInfo Step = blankStep();
    switch (Node.Kind) {
    case TaskKind::Forward:
    case TaskKind::Backward: {
      int32_t Call = CallOf[Node.Op][Node.Partition];
      bool Global =
          Out.Calls[Call].Flags == rt::program::CallFlags::GlobalStatistics;
      Step.Kind = Node.Kind == TaskKind::Forward ? StepKind::Forward
                                                 : StepKind::Backward;
      Step.Call = Call;
      Step.Label = Out.intern(G.op(Node.Op).Name);
      std::vector<CopyInfo> Copies;
      if (Node.Kind == TaskKind::Forward)
        Copies = forwardCopies(Call);
      else if (!Global)
        Copies = backwardCopies(Call);
      if (!(Global && Node.Kind == TaskKind::Backward)) {
        Step.FirstCopy = addCopies(Copies);
        Step.NumCopies = Copies.size();
      }
      addStep(Node.Device, Step);
      break;
    }
    case TaskKind::StatsAllReduce: {
      const ir::Op &O = G.op(Node.Op);
      const ParallelConfig &C = S[O.Id];
      bool Forward = Node.Key.Level == 3 * O.Id + 1;
      Step.Kind = Forward ? StepKind::StatsForward : StepKind::StatsBackward;
      Step.Group = group(Node.Group);
      Step.Elements = 2 * simulator::partInterval(G.outputType(O).Dims[1],
                                                  C.Degrees[1], Node.Key.A)
                              .size();
      Step.Label = Out.intern(
          O.Name + (Forward ? " statistics" : " gradient statistics"));
      for (unsigned P = 0; P < C.numPartitions(); ++P) {
        if (C.coordinate(P, 1) != Node.Key.A)
          continue;
        StepInfo Member = Step;
        Member.Call = CallOf[O.Id][P];
        if (!Forward) {
          std::vector<CopyInfo> Copies = backwardCopies(Member.Call);
          Member.FirstCopy = addCopies(Copies);
          Member.NumCopies = Copies.size();
        }
        addStep(C.device(P), Member);
      }
      break;
    }
    case TaskKind::Transfer:
    case TaskKind::GradTransfer: {
      bool Forward = Node.Kind == TaskKind::Transfer;
      ir::OpId ConsumerId = Node.Op;
      unsigned Slot = Node.Key.A, C = Node.Key.B, P = Node.Key.C;
      const ir::Op &Consumer = G.op(ConsumerId);
      ir::TensorId In = Consumer.Inputs[Slot];
      const ir::Op &Producer = G.op(G.tensor(In).Producer);
      unsigned Output = outputIndex(Producer, In);
      const Binding &B = Inputs[ConsumerId][C][Slot];
      ir::Region From = written(Producer.Id, Output, P);
      ir::Region Part = ir::intersect(B.Needed, From);
      Step.Type = toRuntime(G.tensor(In).Type.Type);
      Step.Elements = ir::regionVolume(Part);
      Step.Label = Out.intern((Forward ? "transfer " : "gradient transfer ") +
                              Producer.Name + (Forward ? " -> " : " <- ") +
                              Consumer.Name);
      int32_t ProducerBuffer = Forward ? Outputs[Producer.Id][P][Output]
                                       : OutGrads[Producer.Id][P][Output];
      int32_t ConsumerBuffer = Forward ? B.Buffer : B.Gradient;
      if (ProducerBuffer < 0 || ConsumerBuffer < 0 || !B.Staged)
        return fail(llvm::formatv("internal: transfer of '{0}' to '{1}' has "
                                  "no buffers",
                                  G.tensor(In).Name, Consumer.Name));
      StepInfo Send = Step, Recv = Step;
      Send.Kind = StepKind::Send;
      Recv.Kind = StepKind::Recv;
      Send.Peer = Node.Peer;
      Recv.Peer = Node.Device;
      CopyInfo Pack = Forward
                          ? copy(ProducerBuffer, From, -1, {}, Part, false)
                          : copy(ConsumerBuffer, B.Needed, -1, {}, Part, false);
      CopyInfo Unpack =
          Forward ? copy(-1, {}, ConsumerBuffer, B.Needed, Part, B.Summed)
                  : copy(-1, {}, ProducerBuffer, From, Part, true);
      Send.FirstCopy = addCopies({Pack});
      Send.NumCopies = 1;
      Recv.FirstCopy = addCopies({Unpack});
      Recv.NumCopies = 1;
      addStep(Node.Device, Send);
      addStep(Node.Peer, Recv);
      break;
    }
    case TaskKind::GradAllReduce: {
      // One message: every part's cells, packed tensor by tensor, cell by
      // cell, in the task graph's order (a gradient bucket holds several
      // tensors' cells).
      llvm::ArrayRef<simulator::BucketPart> Parts = TG.bucketParts(Id);
      if (Parts.empty())
        return fail("internal: a gradient all-reduce with no tensors");
      const ir::Tensor &First = G.tensor(Parts.front().Tensor);
      std::vector<const simulator::GradientCells *> Groups;
      for (const simulator::BucketPart &Part : Parts) {
        const std::vector<simulator::GradientCells> &Cells =
            cellsOf(Part.Tensor);
        if (Part.Cells >= Cells.size() ||
            G.tensor(Part.Tensor).Type.Type != First.Type.Type)
          return fail("internal: gradient cells differ from the task graph's");
        Groups.push_back(&Cells[Part.Cells]);
      }
      const std::vector<DeviceId> &Holders = Groups.front()->Holders;
      Step.Kind = StepKind::AllReduce;
      Step.Group = group(Holders);
      Step.Type = toRuntime(First.Type.Type);
      Step.Elements = 0;
      for (const simulator::GradientCells *Cells : Groups)
        Step.Elements += Cells->Elements;
      std::string Label = "gradient all-reduce " + First.Name;
      if (size_t More = simulator::bucketTensors(Parts).size() - 1)
        Label += " and " + std::to_string(More) + " more";
      Step.Label = Out.intern(Label);
      for (DeviceId Rank : Holders) {
        std::vector<CopyInfo> Pack, Unpack;
        int64_t Offset = 0;
        for (size_t I = 0; I < Parts.size(); ++I) {
          const Box &Held = Boxes.at({Parts[I].Tensor, Rank});
          for (const ir::Region &Part : Groups[I]->Boxes) {
            Pack.push_back(
                copy(Held.Gradient, Held.Region, -1, {}, Part, false, Offset));
            Unpack.push_back(
                copy(-1, {}, Held.Gradient, Held.Region, Part, false, Offset));
            Offset += ir::regionVolume(Part);
          }
        }
        StepInfo Member = Step;
        Member.FirstCopy = addCopies(Pack);
        Member.NumCopies = Pack.size();
        Member.FirstPostCopy = addCopies(Unpack);
        Member.NumPostCopies = Unpack.size();
        addStep(Rank, Member);
      }
      break;
    }
    case TaskKind::Copy:
      // The copies are the steps': a call's gathering and adding back, a
      // message's packing and unpacking (bindInputs, the transfers above).
      break;
    case TaskKind::Update: {
      // A weight-only result's update is its weights' update, after the
      // weight-only backward (below).
      if (isDerived(Node.Tensor))
        break;
      const Box &Held = Boxes.at({Node.Tensor, Node.Device});
      Step.Kind = StepKind::Update;
      Step.Buffer = Held.Buffer;
      Step.Gradient = Held.Gradient;
      for (int I = 0; I < States; ++I)
        Step.State[I] = Held.State[I];
      Step.NumState = States;
      Step.Label = Out.intern("update " + G.tensor(Node.Tensor).Name);
      addStep(Node.Device, Step);
      break;
    }
    }
  }
  // Weight-only ops: forward before everything, backward after everything,
  // then the updates of the weights only they read.
  for (unsigned Rank = 0; Rank < PerRank.size(); ++Rank) {
    std::vector<StepInfo> Before, After;
    auto Make = [&](StepKind Kind, int32_t Call, const ir::Op &O) {
      StepInfo Step = blankStep();
      Step.Kind = Kind;
      Step.Call = Call;
      Step.Label = Out.intern(O.Name);
      return Step;
    };
    for (const ir::Op &O : G.ops()) {
      if (!WeightOnly[O.Id] || !WeightOnlyCalls[O.Id].count(Rank))
        continue;
      Before.push_back(
          Make(StepKind::Forward, WeightOnlyCalls[O.Id].at(Rank), O));
    }
    for (size_t Index = G.numOps(); Index-- > 0;) {
      const ir::Op &O = G.op(static_cast<ir::OpId>(Index));
      if (!WeightOnly[O.Id] || !WeightOnlyCalls[O.Id].count(Rank) ||
          !T.BackwardInputs[O.Id])
        continue;
      After.push_back(
          Make(StepKind::Backward, WeightOnlyCalls[O.Id].at(Rank), O));
    }
    for (ir::TensorId Param : ThroughWeightOnly) {
      auto It = Boxes.find({Param, Rank});
      if (It == Boxes.end() || It->second.Gradient < 0)
        continue;
      StepInfo Step = blankStep();
      Step.Kind = StepKind::Update;
      Step.Buffer = It->second.Buffer;
      Step.Gradient = It->second.Gradient;
      for (int I = 0; I < States; ++I)
        Step.State[I] = It->second.State[I];
      Step.NumState = States;
      Step.Label = Out.intern("update " + G.tensor(Param).Name);
      After.push_back(Step);
    }
    PerRank[Rank].insert(PerRank[Rank].begin(), Before.begin(), Before.end());
    PerRank[Rank].insert(PerRank[Rank].end(), After.begin(), After.end());
  }
  for (unsigned Rank = 0; Rank < PerRank.size(); ++Rank) {
    Out.RankSteps.push_back(
        {int32_t(Out.Steps.size()), int32_t(PerRank[Rank].size())});
    Out.Steps.insert(Out.Steps.end(), PerRank[Rank].begin(),
                     PerRank[Rank].end());
  }
  for (unsigned Rank = 0; Rank < StateCopies.size(); ++Rank) {
    int32_t First = addCopies(StateCopies[Rank]);
    Out.RankStateCopies.push_back({First, int32_t(StateCopies[Rank].size())});
  }
  return llvm::Error::success();
}

/// SplitMix64 (Steele, Lea and Flood, "Fast splittable pseudorandom number
/// generators", OOPSLA 2014): a 64-bit state stepped by the golden ratio and
/// mixed; fast enough that drawing 24 M weights costs little, and defined
/// by its arithmetic alone, so every platform draws the same values.
class SplitMix64 {
public:
  explicit SplitMix64(uint64_t Seed) : State(Seed) {}
  uint64_t operator()() {
    uint64_t Z = (State += 0x9e3779b97f4a7c15ULL);
    Z = (Z ^ (Z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    Z = (Z ^ (Z >> 27)) * 0x94d049bb133111ebULL;
    return Z ^ (Z >> 31);
  }

private:
  uint64_t State;
};

/// uniform(-1/sqrt(fan_in), 1/sqrt(fan_in)) from a seeded generator, with
/// fan_in the product of the dims after the first (PyTorch's default for
/// linear and convolution weights; biases use their own length).
static std::vector<char> randomValues(const ir::Tensor &Value,
                                      SplitMix64 &Generator) {
  const ir::Shape &Dims = Value.Type.Dims;
  int64_t FanIn = 1;
  for (size_t D = 1; D < Dims.size(); ++D)
    FanIn *= Dims[D];
  if (Dims.size() == 1)
    FanIn = Dims[0];
  double Bound = 1.0 / std::sqrt(double(std::max<int64_t>(FanIn, 1)));
  int64_t Count = Value.Type.numElements();
  std::vector<char> Bytes(Value.Type.byteSize());
  for (int64_t I = 0; I < Count; ++I) {
    // 53 random bits -> [0, 1), portable across standard libraries.
    double Unit = double(Generator() >> 11) * (1.0 / 9007199254740992.0);
    double X = (2 * Unit - 1) * Bound;
    if (Value.Type.Type == ir::DType::Float64)
      reinterpret_cast<double *>(Bytes.data())[I] = X;
    else
      reinterpret_cast<float *>(Bytes.data())[I] = float(X);
  }
  return Bytes;
}

/// The value PyTorch's modules start a normalization's tensors at: scale
/// and running variance 1, shift and running mean 0.
static std::optional<double> normalizationDefault(const ir::Graph &G,
                                                  ir::TensorId Id) {
  for (const ir::Op &O : G.ops())
    for (unsigned Slot = 0; Slot < O.Inputs.size(); ++Slot) {
      if (O.Inputs[Slot] != Id)
        continue;
      if (O.Kind == ir::OpKind::BatchNorm && Slot >= 1)
        return Slot == 1 || Slot == 4 ? 1.0 : 0.0;
      if (O.Kind == ir::OpKind::LayerNorm && Slot >= 1)
        return Slot == 1 ? 1.0 : 0.0;
    }
  return std::nullopt;
}

static std::vector<char> filled(const ir::Tensor &Value, double X) {
  std::vector<char> Bytes(Value.Type.byteSize());
  for (int64_t I = 0; I < Value.Type.numElements(); ++I) {
    if (Value.Type.Type == ir::DType::Float64)
      reinterpret_cast<double *>(Bytes.data())[I] = X;
    else
      reinterpret_cast<float *>(Bytes.data())[I] = float(X);
  }
  return Bytes;
}

llvm::Error Builder::makeWeights() {
  Out.Weights.clear();
  // Each held tensor's whole value: a view of the model's bytes, or values
  // made here (--init random) kept in Made.
  std::map<ir::TensorId, llvm::ArrayRef<char>> Values;
  std::map<ir::TensorId, std::vector<char>> Made;
  // (tensor, origin, extent) -> offset: replicas share one copy.
  std::map<std::tuple<int32_t, std::vector<int64_t>, std::vector<int64_t>>,
           int64_t>
      Shared;
  // Random values: each tensor from its own generator, seeded with the
  // seed and the tensor's id, so they depend on neither the strategy nor
  // the order they are drawn in (two threads draw them).
  std::vector<const ir::Tensor *> Drawn;
  for (const ir::Tensor &Value : G.tensors()) {
    if (!isHeld(Value))
      continue;
    bool Float = Value.Type.Type == ir::DType::Float32 ||
                 Value.Type.Type == ir::DType::Float64;
    if (Options.Init == InitKind::Random && Float &&
        Value.Role != ir::TensorRole::Constant) {
      // Normalizations start at 1 / 0, other vectors (biases) at 0,
      // matrices and kernels uniform in +-1/sqrt(fan_in).
      std::vector<char> &V = Made[Value.Id];
      if (std::optional<double> X = normalizationDefault(G, Value.Id))
        V = filled(Value, *X);
      else if (Value.Type.rank() <= 1 || Value.Role == ir::TensorRole::State)
        V = filled(Value, 0.0);
      else
        Drawn.push_back(&Value);
      continue;
    }
    auto Bytes = Value.Data.bytes();
    if (!Bytes) {
      llvm::consumeError(Bytes.takeError());
      continue;
    }
    Values[Value.Id] = *Bytes;
  }
  auto Draw = [&](size_t First, size_t Step) {
    for (size_t I = First; I < Drawn.size(); I += Step) {
      const ir::Tensor &Value = *Drawn[I];
      // The tensor's own stream: the seed's and the id's bits mixed.
      SplitMix64 Generator(SplitMix64(Options.Seed)() ^
                           SplitMix64(uint64_t(Value.Id) << 32)());
      Made.find(Value.Id)->second = randomValues(Value, Generator);
    }
  };
  // Made's entries exist already: each thread fills its own.
  std::thread Helper(Draw, 1, 2);
  Draw(0, 2);
  Helper.join();
  for (const auto &[Id, V] : Made)
    Values[Id] = V;
  // Offsets first, then one allocation for every distinct box.
  struct Cut {
    size_t Buffer;
    size_t Start;
  };
  std::vector<Cut> Cuts;
  size_t Total = 0;
  for (size_t Id = 0; Id < Out.Buffers.size(); ++Id) {
    const rt::program::BufferInfo &Info = Out.Buffers[Id];
    if (Info.Kind != BufferKind::Parameter && Info.Kind != BufferKind::State &&
        Info.Kind != BufferKind::Constant)
      continue;
    const rt::program::TensorInfo &Tensor = Out.Tensors[Info.Tensor];
    ir::TensorId Source = TensorOfIndex[Info.Tensor];
    auto It = Values.find(Source);
    const ir::Tensor &Value = G.tensor(Source);
    if (It == Values.end() ||
        It->second.size() != size_t(Value.Type.byteSize()))
      return fail(llvm::formatv(
          "the weights of '{0}' are needed to generate the program and are "
          "absent (external data missing?); pass --init random to start "
          "from random weights",
          Tensor.Name));
    // Cut the box out of the whole value, once per distinct box.
    rt::program::BufferInfo &Target = Out.Buffers[Id];
    auto Key = std::make_tuple(
        Info.Tensor, std::vector<int64_t>(Info.Origin, Info.Origin + Info.Dims),
        std::vector<int64_t>(Info.Extent, Info.Extent + Info.Dims));
    auto [Entry, New] = Shared.insert({Key, int64_t(Total)});
    Target.WeightOffset = Entry->second;
    if (!New)
      continue;
    int64_t Elements = 1;
    for (int D = 0; D < Info.Dims; ++D)
      Elements *= Info.Extent[D];
    Cuts.push_back({Id, Total});
    Total += Elements * ir::dtypeSize(Value.Type.Type);
  }
  Out.Weights.resize(Total);
  for (const Cut &C : Cuts) {
    const rt::program::BufferInfo &Info = Out.Buffers[C.Buffer];
    const ir::Tensor &Value = G.tensor(TensorOfIndex[Info.Tensor]);
    rt::copyHostBox(
        &Out.Weights[C.Start], Values[Value.Id].data(),
        std::vector<int64_t>(Value.Type.Dims.begin(), Value.Type.Dims.end()),
        Info.Origin, Info.Extent, Info.Dims, ir::dtypeSize(Value.Type.Type));
  }
  return llvm::Error::success();
}

void Builder::addAttribute(const std::string &Name,
                           const ir::AttrValue &Value) {
  rt::program::AttrInfo A{};
  A.Name = Out.intern(Name);
  if (auto *I = std::get_if<int64_t>(&Value)) {
    A.Type = rt::program::AttrType::Int;
    A.Int = *I;
  } else if (auto *F = std::get_if<double>(&Value)) {
    A.Type = rt::program::AttrType::Float;
    A.Float = *F;
  } else if (auto *L = std::get_if<ir::IntList>(&Value)) {
    A.Type = rt::program::AttrType::Ints;
    A.Int = Out.IntValues.size();
    A.Length = L->size();
    Out.IntValues.insert(Out.IntValues.end(), L->begin(), L->end());
  } else if (auto *L = std::get_if<ir::FloatList>(&Value)) {
    A.Type = rt::program::AttrType::Floats;
    A.Int = Out.FloatValues.size();
    A.Length = L->size();
    Out.FloatValues.insert(Out.FloatValues.end(), L->begin(), L->end());
  } else {
    A.Type = rt::program::AttrType::String;
    A.Text = Out.intern(std::get<std::string>(Value));
  }
  Out.Attrs.push_back(A);
}

llvm::Error Builder::run(const simulator::Simulator &Sim) {
  const simulator::TaskGraph &TG = Sim.graph();
  Out.NumRanks = M.numDevices();
  Out.DeviceType = M.numDevices() ? M.deviceType(0).Name : "";
  for (simulator::DeviceId D = 0; D < M.numDevices(); ++D)
    Out.DeviceNames.push_back(Out.intern(M.device(D).Name));
  Out.Optimizer = Options.Optimizer;
  // The planner counted each device's own workspace: the smallest keeps
  // every rank within its count.
  Out.ConvWorkspaceBytes = INT64_MAX;
  for (simulator::DeviceId D = 0; D < M.numDevices(); ++D)
    Out.ConvWorkspaceBytes =
        std::min(Out.ConvWorkspaceBytes, M.deviceType(D).ConvWorkspace);
  Out.Prediction = Sim.report();
  Out.PredictedBytes.assign(Out.Prediction.BytesSent.begin(),
                            Out.Prediction.BytesSent.end());
  for (double Bytes : Out.Prediction.KernelScratch)
    Out.ScratchBytes.push_back(int64_t(std::ceil(Bytes)));
  PerRank.resize(Out.NumRanks);
  StateCopies.resize(Out.NumRanks);

  WeightOnly = simulator::weightOnlyOps(G);
  for (const ir::Op &O : G.ops())
    if (!WeightOnly[O.Id])
      if (llvm::Error E = checkRunnable(T, O, S[O.Id]))
        return E;
  // Data inputs and labels first, so their indices are stable.
  for (ir::TensorId In : G.inputs()) {
    int32_t Index = tensorIndex(In, rt::program::TensorRole::Input);
    if (In == T.Labels)
      Out.Labels = Index;
    else
      Out.DataInputs.push_back(Index);
  }
  tensorIndex(T.LossTensor, rt::program::TensorRole::Loss);
  Out.LossTensor = TensorIndex.at(T.LossTensor);

  // Ops and attributes.
  for (const ir::Op &O : G.ops()) {
    rt::program::OpInfo Info{};
    Info.Kind = static_cast<rt::OpKind>(static_cast<uint8_t>(O.Kind));
    Info.Name = Out.intern(O.Name);
    Info.FirstAttr = Out.Attrs.size();
    for (const auto &[Name, Value] : O.Attrs.entries())
      addAttribute(Name, Value);
    Info.NumAttrs = Out.Attrs.size() - Info.FirstAttr;
    Out.Ops.push_back(Info);
  }

  if (llvm::Error E = makeBoxes())
    return E;
  makeOutputs();
  if (llvm::Error E = bindInputs())
    return E;
  makeCalls();
  if (llvm::Error E = makeSteps(TG))
    return E;
  makeProfileComm();
  return makeWeights();
}

void Builder::makeProfileComm() {
  // One pair per kind of route and one group per ring shape: what a
  // measured table matches (simulator/Machine.h).
  std::vector<uint32_t> Shapes = M.routeShapes();
  std::set<uint32_t> Routes;
  for (DeviceId A = 0; A < M.numDevices(); ++A)
    for (DeviceId B = 0; B < M.numDevices(); ++B)
      if (A != B && Routes.insert(Shapes[A * M.numDevices() + B]).second) {
        Out.ProfilePairs.push_back(int32_t(A));
        Out.ProfilePairs.push_back(int32_t(B));
      }
  // Groups: the plan's, all devices, each node's, one device per node (by
  // local index).
  std::vector<std::vector<DeviceId>> Candidates;
  for (const rt::program::GroupInfo &G : Out.Groups)
    Candidates.emplace_back(Out.GroupRanks.begin() + G.First,
                            Out.GroupRanks.begin() + G.First + G.Size);
  std::vector<DeviceId> All(M.numDevices());
  std::iota(All.begin(), All.end(), 0);
  Candidates.push_back(All);
  std::map<unsigned, std::vector<DeviceId>> ByNode, ByLocal;
  for (DeviceId D = 0; D < M.numDevices(); ++D) {
    ByNode[M.device(D).Node].push_back(D);
    ByLocal[M.device(D).Local].push_back(D);
  }
  for (auto *Sets : {&ByNode, &ByLocal})
    for (auto &[Key, Devices] : *Sets)
      Candidates.push_back(Devices);
  std::set<std::vector<uint32_t>> Rings;
  for (const std::vector<DeviceId> &Group : Candidates) {
    if (Group.size() < 2 || !Rings.insert(M.ringShape(Shapes, Group)).second)
      continue;
    Out.ProfileGroups.push_back(
        {int32_t(Out.ProfileGroupRanks.size()), int32_t(Group.size())});
    Out.ProfileGroupRanks.insert(Out.ProfileGroupRanks.end(), Group.begin(),
                                 Group.end());
  }
}

} // namespace

std::vector<double> ProgramPlan::allocatedBytes() const {
  rt::program::Plan P = view("", "", 0);
  std::vector<double> Bytes(NumRanks);
  for (int32_t Rank = 0; Rank < NumRanks; ++Rank)
    Bytes[Rank] = double(rt::program::allocatedBytes(P, Rank));
  return Bytes;
}

rt::program::Plan ProgramPlan::view(const char *Generator,
                                    const char *ModelName,
                                    uint64_t Hash) const {
  auto Of = [](const auto &Vector) {
    using T = typename std::decay_t<decltype(Vector)>::value_type;
    return rt::program::Table<T>{Vector.data(), int32_t(Vector.size())};
  };
  rt::program::Plan P{};
  P.Generator = Generator;
  P.ModelName = ModelName;
  P.PlanHash = Hash;
  P.NumRanks = NumRanks;
  P.DeviceType = DeviceType.c_str();
  P.ConvWorkspaceBytes = ConvWorkspaceBytes;
  P.Optimizer = Optimizer;
  P.PredictedBytes = Of(PredictedBytes);
  P.Tensors = Of(Tensors);
  P.Ops = Of(Ops);
  P.Attrs = Of(Attrs);
  P.IntValues = Of(IntValues);
  P.FloatValues = Of(FloatValues);
  P.Buffers = Of(Buffers);
  P.Calls = Of(Calls);
  P.Operands = Of(Operands);
  P.Copies = Of(Copies);
  P.Steps = Of(Steps);
  P.Groups = Of(Groups);
  P.GroupRanks = Of(GroupRanks);
  P.RankSteps = Of(RankSteps);
  P.RankStateCopies = Of(RankStateCopies);
  P.ArenaBytes = Of(ArenaBytes);
  P.ScratchBytes = Of(ScratchBytes);
  P.LossTensor = LossTensor;
  P.DataInputs = Of(DataInputs);
  P.DeviceNames = Of(DeviceNames);
  P.ProfilePairs = Of(ProfilePairs);
  P.ProfileGroups = Of(ProfileGroups);
  P.ProfileGroupRanks = Of(ProfileGroupRanks);
  P.Labels = Labels;
  return P;
}

llvm::Expected<ProgramPlan> buildProgramPlan(const ir::TrainingGraph &T,
                                             const simulator::Strategy &S,
                                             const simulator::Machine &M,
                                             const simulator::CostModel &Cost,
                                             const PlanOptions &Options) {
  if (llvm::Error E = simulator::checkStrategy(T.G, S, M.numDevices()))
    return E;
  simulator::Simulator Sim(T, M, Cost, Options.Sim);
  Sim.simulate(S);
  ProgramPlan Plan;
  Builder B(T, S, M, Options, Plan);
  if (llvm::Error E = B.run(Sim))
    return E;
  layoutBuffers(Plan);
  return Plan;
}

} // namespace onnx2soap::codegen
