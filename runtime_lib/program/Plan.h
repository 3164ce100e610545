//===- runtime_lib/program/Plan.h - A program's plan ------------*- C++ -*-===//
//
// A generated training program is a plan plus this library: the plan is
// data (constant tables that codegen writes into the project's plan.cpp),
// the library walks it. The tables say, for every rank, which buffers it
// holds (each a region of one tensor of the training graph, with its shape
// fixed at generation time), and the rank's slice of the planner's schedule
// as a list of steps in one global order: forward and backward calls of op
// partitions, messages to and from peers, all-reduces of gradient cells and
// BatchNorm statistics, optimizer updates. Because every rank walks its steps
// in the same global order, blocking communication cannot deadlock.
//
// The types are plain aggregates so codegen can emit them as constexpr
// arrays; a Plan is a set of pointer/count views over those arrays (or over
// vectors, when a test builds a plan in memory).
//
//===----------------------------------------------------------------------===//
#ifndef ONNX2SOAP_RUNTIME_PROGRAM_PLAN_H
#define ONNX2SOAP_RUNTIME_PROGRAM_PLAN_H

#include "../Backend.h"
#include "../Types.h"
#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace onnx2soap::rt::program {

/// A pointer and a count: a view of one plan table.
template <typename T> struct Table {
  const T *Data = nullptr;
  int32_t Size = 0;
  const T &operator[](int32_t I) const { return Data[I]; }
  const T *begin() const { return Data; }
  const T *end() const { return Data + Size; }
};

/// Whole tensors of the training graph that the program reads or writes by
/// name: graph inputs (data, labels), parameters, state, the loss.
enum class TensorRole : uint8_t { Input, Parameter, State, Constant, Loss };

struct TensorInfo {
  const char *Name;
  TensorRole Role;
  DType Type;
  int32_t Rank;
  int64_t Dims[MaxRank];
  /// The dim the samples of the batch lie along where it is not dim 0 (a
  /// time-major RNN input: 1); else 0. A dataset folder holds samples along
  /// dim 0, so --data refuses an input or labels with another.
  int32_t SampleDim;
};

/// What a buffer holds, which says how a step begins for it.
enum class BufferKind : uint8_t {
  Activation,     ///< a partition's output, written by its forward call
  Gathered,       ///< an input region gathered from producers by copies
  Accumulated,    ///< an input region summed from partial producers
  Gradient,       ///< a gradient, accumulated by backward calls
  Input,          ///< a region of a graph input, loaded each step
  Parameter,      ///< this rank's box of a trainable parameter
  OptimizerState, ///< a slot of the optimizer for a parameter box
  State,          ///< this rank's box of non-learned state
  Constant,       ///< this rank's box of a constant
  Statistics,     ///< BatchNorm's per-channel sums ([2, C], f32)
};

/// One buffer on one rank: a region of tensor Tensor (an index into the
/// tensor table, or -1) whose corner in the whole tensor is Origin.
struct BufferInfo {
  int32_t Rank;
  BufferKind Kind;
  DType Type;
  int32_t Tensor;
  int32_t Dims; ///< number of dims
  int64_t Extent[MaxRank];
  int64_t Origin[MaxRank];
  /// Parameter, State, Constant: the byte offset of the initial value in
  /// weights/shards.bin (ranks holding the same box share it); else -1.
  int64_t WeightOffset;
  /// Where the buffer lies in its rank's arena (bytes, a multiple of
  /// BufferAlignment). Buffers whose lifetimes do not meet
  /// (BufferLifetimes.h) may share memory.
  int64_t Offset;
};

/// Every buffer starts at a multiple of this many bytes in its arena (what
/// cudaMalloc guarantees, and more than any kernel needs).
constexpr int64_t BufferAlignment = 256;

/// Attribute values of the op table; lists live in the IntValues and
/// FloatValues tables, strings in Text.
enum class AttrType : uint8_t { Int, Float, Ints, Floats, String };
struct AttrInfo {
  const char *Name;
  AttrType Type;
  int64_t Int;    ///< Int; for lists the first index into the value table
  double Float;   ///< Float
  int32_t Length; ///< list length
  const char *Text;
};

/// An op of the training graph; its attributes are Attrs[First, First+Count).
struct OpInfo {
  OpKind Kind;
  const char *Name;
  int32_t FirstAttr;
  int32_t NumAttrs;
};

/// How a partition's call differs from running the kernel on its views.
enum class CallFlags : uint8_t {
  None = 0,
  /// BatchNorm in training mode whose statistics are summed over the
  /// partitions of its channel range: forward and backward run in phases
  /// around StatsForward / StatsBackward steps.
  GlobalStatistics = 1,
};

/// One partition of one op. Operands are buffer ids (-1: absent) in
/// Operands[First...]: NumInputs inputs, NumOutputs outputs, then for ops
/// with a backward NumOutputs output gradients and NumInputs input gradients.
struct CallInfo {
  int32_t Op;
  int32_t Partition;
  int32_t FirstOperand;
  int32_t NumInputs;
  int32_t NumOutputs;
  bool HasBackward;
  CallFlags Flags;
  /// Scalar outputs of a Reduction-split mean (the loss): the kernel's mean
  /// over its slice times Scale is the slice's share of the global mean;
  /// the output gradient is scaled the same way. 1 otherwise.
  double Scale;
  /// Output 0 is the loss: backward starts from d(loss)/d(output) = Scale.
  bool SeedsLossGradient;
  /// The partition's key in the planner's profile format
  /// (docs/profile-format.md), for --profile-ops.
  const char *ProfileKey;
  /// GlobalStatistics: the Statistics buffers of forward and backward and
  /// the global number of elements per channel.
  int32_t Statistics;
  int32_t GradientSums;
  int64_t StatisticsCount;
  /// Where output 0's region lies in the whole tensor (Dropout's mask is a
  /// function of the global element index); Sharded false: the whole tensor.
  bool Sharded;
  int64_t GlobalOffset[MaxRank];
  int64_t GlobalDims[MaxRank];
  /// Attributes that replace the op's of the same name for this call,
  /// Attrs[FirstAttr, FirstAttr + NumAttrs): positions rebased on the input
  /// box the partition reads (a split Slice's starts and ends).
  int32_t FirstAttr;
  int32_t NumAttrs;
};

/// A box copy on one rank from one buffer to another (or to / from the
/// message buffer, id -1, where the box is packed densely starting at
/// element Offset). Add sums into the destination instead of overwriting.
struct CopyInfo {
  int32_t From;
  int32_t To;
  bool Add;
  int32_t Dims;
  int64_t FromOrigin[MaxRank]; ///< corner in From's region coordinates
  int64_t ToOrigin[MaxRank];
  int64_t Extent[MaxRank];
  int64_t Offset; ///< element offset in the message buffer
};

enum class StepKind : uint8_t {
  /// Copies (gathering inputs), then the call's forward (or the first phase
  /// of a GlobalStatistics BatchNorm).
  Forward,
  /// Sum Statistics over Group, then the call's second forward phase.
  StatsForward,
  /// The call's backward (or its first phase), then copies (gradients back
  /// to local producers and parameter boxes).
  Backward,
  /// Sum GradientSums over Group, second backward phase, then copies.
  StatsBackward,
  /// Copies pack the message; send it to Peer.
  Send,
  /// Receive a message from Peer; copies unpack it.
  Recv,
  /// Copies pack gradient cells; sum them over Group; PostCopies unpack.
  AllReduce,
  /// Optimizer update of parameter box Buffer with gradient Gradient and
  /// optimizer state buffers State[0..NumState).
  Update,
};

struct StepInfo {
  StepKind Kind;
  int32_t Call;  ///< Forward, StatsForward, Backward, StatsBackward
  int32_t Peer;  ///< Send, Recv
  int32_t Group; ///< StatsForward, StatsBackward, AllReduce
  DType Type;    ///< element type of the message / all-reduce
  int64_t Elements;
  int32_t FirstCopy;
  int32_t NumCopies;
  int32_t FirstPostCopy;
  int32_t NumPostCopies;
  int32_t Buffer;   ///< Update: the parameter box
  int32_t Gradient; ///< Update: its gradient
  int32_t State[3]; ///< Update: optimizer slots
  int32_t NumState;
  const char *Label; ///< for messages: "transfer conv1 -> relu1", ...
};

/// A group of ranks that all-reduces together.
struct GroupInfo {
  int32_t First; ///< into GroupRanks
  int32_t Size;
};

/// A rank's share of a table: [First, First + Count).
struct Range {
  int32_t First;
  int32_t Count;
};

struct Plan {
  /// "onnx2soap 0.1.0", the model's name, SHA-256 of the plan's inputs.
  const char *Generator;
  const char *ModelName;
  uint64_t PlanHash;
  int32_t NumRanks;
  /// The cluster's device type name ("cpu", "H100-SXM"): a --profile-ops
  /// file's device_type.
  const char *DeviceType;
  /// The most workspace a convolution algorithm may take on a rank's device
  /// (the cluster's conv_workspace_MiB; counted by the planner).
  int64_t ConvWorkspaceBytes;
  OptimizerConfig Optimizer;
  /// Per-rank bytes the planner predicts this rank sends per step.
  Table<double> PredictedBytes;

  Table<TensorInfo> Tensors;
  Table<OpInfo> Ops;
  Table<AttrInfo> Attrs;
  Table<int64_t> IntValues;
  Table<double> FloatValues;
  Table<BufferInfo> Buffers;
  Table<CallInfo> Calls;
  Table<int32_t> Operands;
  Table<CopyInfo> Copies;
  Table<StepInfo> Steps;
  Table<GroupInfo> Groups;
  Table<int32_t> GroupRanks;
  /// Per rank: its steps, and its state copies run after the last step
  /// (new BatchNorm running statistics into the state boxes).
  Table<Range> RankSteps;
  Table<Range> RankStateCopies;
  /// Per rank: the bytes of its arena, which holds all of its buffers.
  Table<int64_t> ArenaBytes;
  /// Per rank: the kernel scratch the planner counts (its largest call's:
  /// convolution workspace, copies kernels make), taken and freed by each
  /// call on top of the arena.
  Table<int64_t> ScratchBytes;
  /// Index of the loss tensor and of the graph inputs in Tensors, in the
  /// order the program's --inputs / --labels options give them.
  int32_t LossTensor;
  Table<int32_t> DataInputs;
  int32_t Labels; ///< -1 when the model computes its own loss
  /// Per rank: its device's name in the cluster ("node0/gpu1"), for
  /// --profile-comm's tables.
  Table<const char *> DeviceNames;
  /// What --profile-comm measures: one (sender, receiver) pair of ranks per
  /// kind of route in the cluster (flattened), and all-reduce groups (the
  /// plan's, all ranks, a node's, one rank per node), one per ring shape:
  /// the planner's tables time all communication of those kinds.
  Table<int32_t> ProfilePairs;
  Table<GroupInfo> ProfileGroups;
  Table<int32_t> ProfileGroupRanks;
};

/// The smallest message buffer a runner allocates.
constexpr size_t MinMessageBufferBytes = 64;

/// The message buffer the runner allocates on Rank: as large as its largest
/// message or packed all-reduce, and at least MinMessageBufferBytes.
inline size_t messageBufferBytes(const Plan &P, int32_t Rank) {
  size_t Bytes = 0;
  const Range &Steps = P.RankSteps[Rank];
  for (int32_t S = Steps.First; S < Steps.First + Steps.Count; ++S)
    Bytes = std::max(Bytes,
                     size_t(P.Steps[S].Elements) * dtypeSize(P.Steps[S].Type));
  return std::max(Bytes, MinMessageBufferBytes);
}

/// Bytes of one buffer as the runner allocates it (at least one).
inline size_t bufferBytes(const BufferInfo &Info) {
  size_t Elements = 1;
  for (int32_t D = 0; D < Info.Dims; ++D)
    Elements *= size_t(Info.Extent[D]);
  return std::max<size_t>(1, Elements * dtypeSize(Info.Type));
}

/// Bytes of one buffer in its arena: bufferBytes rounded up to
/// BufferAlignment.
inline int64_t alignedBufferBytes(const BufferInfo &Info) {
  return (int64_t(bufferBytes(Info)) + BufferAlignment - 1) / BufferAlignment *
         BufferAlignment;
}

/// Device memory the runner allocates for Rank and holds for the whole run:
/// the arena of its buffers and its message buffer. Kernels' scratch memory
/// (Plan::ScratchBytes at most) and the communication library's own buffers
/// come on top.
inline size_t allocatedBytes(const Plan &P, int32_t Rank) {
  return size_t(P.ArenaBytes[Rank]) + messageBufferBytes(P, Rank);
}

} // namespace onnx2soap::rt::program

#endif
