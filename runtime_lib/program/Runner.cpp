//===- runtime_lib/program/Runner.cpp - Walking a plan
//---------------------===//
//
// A step: load this rank's regions of the batch, walk the rank's steps in
// plan order, zeroing each gradient and accumulation buffer right before the
// first step that adds into it, then move new running statistics into the
// state boxes. Buffers are whole regions at their plan offsets in one arena
// per rank (buffers whose lifetimes do not meet share memory); copies between
// them are boxes (Backend::copyBox). Every communication call is made in the
// plan's global order, which all ranks share.
//
//===----------------------------------------------------------------------===//
#include "Runner.h"
#include "../CopyTiming.h"
#include "../Error.h"
#include "../HostBox.h"
#include "BufferLifetimes.h"
#include "Dataset.h"
#include "ReportText.h"
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>

namespace onnx2soap::rt::program {

namespace {
/// The weight shard file: "O2SWGHT2", the plan hash (8 bytes, little
/// endian), then every distinct box any rank holds of a parameter, state or
/// constant; BufferInfo::WeightOffset is relative to the end of the header.
constexpr char WeightsMagic[8] = {'O', '2', 'S', 'W', 'G', 'H', 'T', '2'};
/// --profile-ops: timed runs of each box copy size (after a warm-up).
constexpr unsigned CopyRepeats = 5;
} // namespace

struct Runner::Impl {
  const Plan &P;
  Backend &B;
  Comm &C;
  int Rank;
  /// This rank's buffers, and by buffer id the dense view of each (absent
  /// for other ranks' buffers).
  DeviceBuffer Arena;
  std::vector<TensorView> Views;
  /// By the rank's step index + 1: the accumulators (gradients, sums) that
  /// start at zero before that step (index 0: at the start of a training
  /// step).
  std::vector<std::vector<int32_t>> ZeroedBefore;
  /// This rank's buffers that a step starts by loading (its regions of the
  /// batch), and those the loss is read from.
  std::vector<int32_t> Loaded, LossParts;
  /// By op, then the calls' own (CallInfo::FirstAttr).
  std::vector<OpAttrs> Attrs;
  /// Per call: its entry in Attrs, or -1 for its op's.
  std::vector<int32_t> CallAttrs;
  DeviceBuffer Message;
  /// The message send or gradient all-reduce running in Message
  /// (Comm::startSend, startAllReduceSum) while compute steps go on (an
  /// all-reduce's unpacking copies still to run); null when none.
  /// RunningSpans: the arena bytes those copies write.
  const StepInfo *Running = nullptr;
  std::vector<std::pair<int64_t, int64_t>> RunningSpans;
  /// Host copies of the global batch, by tensor index.
  std::vector<HostTensor> Batch;
  /// --data: the dataset, and each tensor's file in it (-1: none).
  std::shared_ptr<const Dataset> Data;
  std::vector<int> DataFileOf;
  /// --profile-ops: seconds of each call's forward and backward kernels,
  /// by call, one sample per step.
  bool Profiling = false;
  std::vector<std::vector<double>> ForwardSeconds, BackwardSeconds;
  /// --profile-ops: where this rank's steps went (Runner::breakdown).
  StepBreakdown Spent;
  /// --trace: whether the next step is traced, and its events, three
  /// numbers each: what (the rank's local step index, or -1 - index for
  /// the wait for that step's started send or all-reduce), begin and end
  /// seconds from the step's start.
  bool TraceNext = false, Traced = false;
  std::vector<double> TraceEvents;
  std::chrono::steady_clock::time_point TraceStart;

  /// Runs Body, recording its span as event What when tracing this step;
  /// the backend is synchronized after it, so that the span ends when its
  /// device work does.
  template <typename Fn> void traced(bool Tracing, double What, Fn Body) {
    if (!Tracing) {
      Body();
      return;
    }
    auto Seconds = [&] {
      return std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                           TraceStart)
          .count();
    };
    double Begin = Seconds();
    Body();
    B.synchronize();
    TraceEvents.insert(TraceEvents.end(), {What, Begin, Seconds()});
  }

  /// Seconds Body takes, between synchronizations of the backend (so that
  /// neither work queued before it nor what it queues escapes the count).
  template <typename Fn> double synchronizedSeconds(Fn Body) {
    B.synchronize();
    auto Start = std::chrono::steady_clock::now();
    Body();
    B.synchronize();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                         Start)
        .count();
  }

  /// Runs Body, adding its seconds to Bucket when profiling.
  template <typename Fn> void account(double &Bucket, Fn Body) {
    if (Profiling)
      Bucket += synchronizedSeconds(Body);
    else
      Body();
  }

  /// Runs Kernel, timing it when profiling.
  template <typename Fn>
  void timed(std::vector<std::vector<double>> &Samples, int32_t Call,
             Fn Kernel) {
    if (!Profiling) {
      Kernel();
      return;
    }
    double Seconds = synchronizedSeconds(Kernel);
    Samples[Call].push_back(Seconds);
    Spent.Kernels += Seconds;
  }

  Impl(const Plan &P, Backend &B, Comm &C) : P(P), B(B), C(C), Rank(C.rank()) {}

  TensorView view(int32_t Buffer) const {
    return Buffer < 0 ? TensorView::absent() : Views[Buffer];
  }
  void *data(int32_t Buffer) const { return Views[Buffer].Data; }

  void zeroBefore(int32_t LocalStep) {
    for (int32_t Id : ZeroedBefore[LocalStep + 1])
      B.fillZero(data(Id), Views[Id].byteSize());
  }

  /// The box of Copy's source or destination: a strided view into a buffer
  /// or a dense one in the message buffer (elements of Type).
  TensorView boxView(int32_t Buffer, const int64_t *Origin,
                     const CopyInfo &Copy, DType Type) const {
    if (Buffer < 0) {
      char *Base =
          static_cast<char *>(Message.data()) + Copy.Offset * dtypeSize(Type);
      return TensorView::contiguous(
          Type, std::vector<int64_t>(Copy.Extent, Copy.Extent + Copy.Dims),
          Base);
    }
    TensorView Whole = view(Buffer);
    TensorView Box = Whole;
    int64_t Offset = 0;
    for (int D = 0; D < Copy.Dims; ++D) {
      Offset += Origin[D] * Whole.Strides[D];
      Box.Dims[D] = Copy.Extent[D];
    }
    Box.Data = static_cast<char *>(Whole.Data) + Offset * dtypeSize(Whole.Type);
    return Box;
  }

  void runCopies(int32_t First, int32_t Count) {
    if (Count == 0)
      return;
    account(Spent.Copies, [&] {
      for (int32_t I = First; I < First + Count; ++I) {
        const CopyInfo &Copy = P.Copies[I];
        DType Type = Copy.From >= 0 ? P.Buffers[Copy.From].Type
                                    : P.Buffers[Copy.To].Type;
        B.copyBox(boxView(Copy.To, Copy.ToOrigin, Copy, Type),
                  boxView(Copy.From, Copy.FromOrigin, Copy, Type), Copy.Add);
      }
    });
  }

  OpCall call(const CallInfo &Info, int64_t Step) const {
    const OpInfo &Op = P.Ops[Info.Op];
    int32_t Own = CallAttrs[&Info - P.Calls.Data];
    OpCall Call{Op.Kind, Attrs[Own < 0 ? Info.Op : Own], Op.Name, {}, {}, Step};
    const int32_t *Operands = P.Operands.Data + Info.FirstOperand;
    for (int32_t I = 0; I < Info.NumInputs; ++I)
      Call.Inputs.push_back(view(Operands[I]));
    for (int32_t I = 0; I < Info.NumOutputs; ++I)
      Call.Outputs.push_back(view(Operands[Info.NumInputs + I]));
    if (Info.Sharded) {
      int Dims = Call.Outputs.empty() ? 0 : Call.Outputs[0].Rank;
      Call.GlobalOffset.assign(Info.GlobalOffset, Info.GlobalOffset + Dims);
      Call.GlobalDims.assign(Info.GlobalDims, Info.GlobalDims + Dims);
    }
    return Call;
  }

  void gradients(const CallInfo &Info, std::vector<TensorView> &OutGrads,
                 std::vector<TensorView> &InGrads) const {
    const int32_t *Operands =
        P.Operands.Data + Info.FirstOperand + Info.NumInputs + Info.NumOutputs;
    for (int32_t I = 0; I < Info.NumOutputs; ++I)
      OutGrads.push_back(view(Operands[I]));
    for (int32_t I = 0; I < Info.NumInputs; ++I)
      InGrads.push_back(view(Operands[Info.NumOutputs + I]));
  }

  /// Multiplies a scalar buffer by Scale (a Reduction-split mean).
  void scaleScalar(int32_t Buffer, double Scale, bool Set) {
    const BufferInfo &Info = P.Buffers[Buffer];
    if (Info.Type == DType::Float64) {
      double Value = 1;
      if (!Set)
        B.copyToHost(&Value, data(Buffer), sizeof Value);
      Value *= Scale;
      B.copyFromHost(data(Buffer), &Value, sizeof Value);
      return;
    }
    float Value = 1;
    if (!Set)
      B.copyToHost(&Value, data(Buffer), sizeof Value);
    Value = static_cast<float>(Value * Scale);
    B.copyFromHost(data(Buffer), &Value, sizeof Value);
  }

  void forward(const StepInfo &S, int64_t Step) {
    const CallInfo &Info = P.Calls[S.Call];
    runCopies(S.FirstCopy, S.NumCopies);
    OpCall Call = call(Info, Step);
    if (Info.Flags == CallFlags::GlobalStatistics) {
      B.batchNormPartialStats(Call, view(Info.Statistics));
      return;
    }
    timed(ForwardSeconds, S.Call, [&] { B.forward(Call); });
    if (Info.Scale != 1.0)
      scaleScalar(P.Operands[Info.FirstOperand + Info.NumInputs], Info.Scale,
                  false);
  }

  void statsForward(const StepInfo &S, int64_t Step) {
    const CallInfo &Info = P.Calls[S.Call];
    TensorView Stats = view(Info.Statistics);
    // The partial sums are written on the backend's stream, which does not
    // order the communication library's.
    B.synchronize();
    account(Spent.Communication, [&] {
      C.allReduceSum(S.Group, Stats.Data, Stats.numElements(), Stats.Type,
                     S.Label);
    });
    B.batchNormForwardWithStats(call(Info, Step), Stats, Info.StatisticsCount);
  }

  void backward(const StepInfo &S, int64_t Step) {
    const CallInfo &Info = P.Calls[S.Call];
    OpCall Call = call(Info, Step);
    std::vector<TensorView> OutGrads, InGrads;
    gradients(Info, OutGrads, InGrads);
    if (Info.SeedsLossGradient) {
      // d(loss)/d(loss) = 1, times this partition's share of a mean.
      int32_t Grad =
          P.Operands[Info.FirstOperand + Info.NumInputs + Info.NumOutputs];
      scaleScalar(Grad, Info.Scale, true);
    }
    if (Info.Flags == CallFlags::GlobalStatistics) {
      B.batchNormBackwardPartialSums(Call, OutGrads[0], view(Info.Statistics),
                                     Info.StatisticsCount,
                                     view(Info.GradientSums));
      return;
    }
    timed(BackwardSeconds, S.Call,
          [&] { B.backward(Call, OutGrads, InGrads); });
    runCopies(S.FirstCopy, S.NumCopies);
  }

  void statsBackward(const StepInfo &S, int64_t Step) {
    const CallInfo &Info = P.Calls[S.Call];
    TensorView Sums = view(Info.GradientSums);
    B.synchronize();
    account(Spent.Communication, [&] {
      C.allReduceSum(S.Group, Sums.Data, Sums.numElements(), Sums.Type,
                     S.Label);
    });
    std::vector<TensorView> OutGrads, InGrads;
    gradients(Info, OutGrads, InGrads);
    B.batchNormBackwardWithSums(call(Info, Step), OutGrads, InGrads,
                                view(Info.Statistics), Sums,
                                Info.StatisticsCount);
    runCopies(S.FirstCopy, S.NumCopies);
  }

  void update(const StepInfo &S, int64_t Step) {
    std::vector<TensorView> State;
    for (int32_t I = 0; I < S.NumState; ++I)
      State.push_back(view(S.State[I]));
    B.update(P.Optimizer, Step, view(S.Buffer), view(S.Gradient), State);
  }

  /// Waits for the running send or all-reduce, and unpacks the sums.
  void finishRunning() {
    if (!Running)
      return;
    account(Spent.Communication, [&] { C.finishStarted(); });
    if (Running->Kind == StepKind::AllReduce) {
      runCopies(Running->FirstPostCopy, Running->NumPostCopies);
      // The next message reuses the buffer the copies read.
      B.synchronize();
    }
    Running = nullptr;
    RunningSpans.clear();
  }

  /// Whether Buffer's arena bytes meet those the running all-reduce's
  /// unpacking copies write (buffers of disjoint lifetimes share bytes).
  bool touchesRunning(int32_t Buffer) const {
    if (Buffer < 0)
      return false;
    const BufferInfo &Info = P.Buffers[Buffer];
    int64_t Begin = Info.Offset;
    int64_t End = Begin + int64_t(bufferBytes(Info));
    for (auto [From, To] : RunningSpans)
      if (Begin < To && From < End)
        return true;
    return false;
  }

  /// Whether local step Local (S) may run while a send or all-reduce is
  /// running: a forward or backward call that, with the accumulators
  /// zeroed before it, neither touches the bytes an all-reduce will unpack
  /// into nor copies through the message buffer. Every other step communicates,
  /// and the Comm takes one call at a time; updates read the sums.
  bool runsBeside(const StepInfo &S, int32_t Local) const {
    if (S.Kind != StepKind::Forward && S.Kind != StepKind::Backward)
      return false;
    for (int32_t Id : ZeroedBefore[size_t(Local + 1)])
      if (touchesRunning(Id))
        return false;
    for (int32_t I = S.FirstCopy; I < S.FirstCopy + S.NumCopies; ++I) {
      const CopyInfo &Copy = P.Copies[I];
      if (Copy.From < 0 || Copy.To < 0 || touchesRunning(Copy.From) ||
          touchesRunning(Copy.To))
        return false;
    }
    const CallInfo &Info = P.Calls[S.Call];
    int32_t Operands =
        (Info.NumInputs + Info.NumOutputs) * (Info.HasBackward ? 2 : 1);
    for (int32_t I = 0; I < Operands; ++I)
      if (touchesRunning(P.Operands[Info.FirstOperand + I]))
        return false;
    return !touchesRunning(Info.Statistics) &&
           !touchesRunning(Info.GradientSums);
  }

  void run(const StepInfo &S, int64_t Step) {
    size_t Bytes = static_cast<size_t>(S.Elements) * dtypeSize(S.Type);
    switch (S.Kind) {
    case StepKind::Forward:
      return forward(S, Step);
    case StepKind::StatsForward:
      return statsForward(S, Step);
    case StepKind::Backward:
      return backward(S, Step);
    case StepKind::StatsBackward:
      return statsBackward(S, Step);
    case StepKind::Send:
      runCopies(S.FirstCopy, S.NumCopies);
      B.synchronize();
      // Sent while the next compute steps run (finishRunning).
      account(Spent.Communication,
              [&] { C.startSend(S.Peer, Message.data(), Bytes, S.Label); });
      Running = &S;
      return;
    case StepKind::Recv:
      account(Spent.Communication,
              [&] { C.recv(S.Peer, Message.data(), Bytes, S.Label); });
      runCopies(S.FirstCopy, S.NumCopies);
      // The next message reuses the buffer the copies read.
      B.synchronize();
      return;
    case StepKind::AllReduce:
      runCopies(S.FirstCopy, S.NumCopies);
      B.synchronize();
      // Runs while the next compute steps do (finishRunning).
      account(Spent.Communication, [&] {
        C.startAllReduceSum(S.Group, Message.data(), S.Elements, S.Type,
                            S.Label);
      });
      Running = &S;
      for (int32_t I = S.FirstPostCopy; I < S.FirstPostCopy + S.NumPostCopies;
           ++I) {
        if (P.Copies[I].To < 0)
          continue;
        const BufferInfo &To = P.Buffers[P.Copies[I].To];
        RunningSpans.emplace_back(To.Offset,
                                  To.Offset + int64_t(bufferBytes(To)));
      }
      return;
    case StepKind::Update:
      return update(S, Step);
    }
  }
};

/// "12884901888 bytes (12.0 GiB)".
static std::string bytesText(size_t Bytes) {
  char Text[64];
  std::snprintf(Text, sizeof Text, "%zu bytes (%.1f GiB)", Bytes,
                double(Bytes) / (1024.0 * 1024.0 * 1024.0));
  return Text;
}

void checkDeviceMemory(const Plan &P, int32_t Rank, size_t Free) {
  size_t Needed = allocatedBytes(P, Rank) + size_t(P.ScratchBytes[Rank]);
  if (Needed > Free)
    fail("device memory",
         "rank " + std::to_string(Rank) +
             "'s buffers and kernel scratch need " + bytesText(Needed) +
             ", the device has " + bytesText(Free) +
             " free (plan with a lower --memory-limit, or use more devices)");
}

/// Sets the attributes P.Attrs[First, First + Count) in Attrs.
static void setAttributes(const Plan &P, int32_t First, int32_t Count,
                          OpAttrs &Attrs) {
  if (First < 0 || Count < 0 || First + Count > P.Attrs.Size)
    fail("plan", "attributes out of range (regenerate the project)");
  for (int32_t A = First; A < First + Count; ++A) {
    const AttrInfo &Attr = P.Attrs[A];
    switch (Attr.Type) {
    case AttrType::Int:
      Attrs.set(Attr.Name, Attr.Int);
      break;
    case AttrType::Float:
      Attrs.set(Attr.Name, Attr.Float);
      break;
    case AttrType::Ints:
      Attrs.set(Attr.Name, std::vector<int64_t>(P.IntValues.Data + Attr.Int,
                                                P.IntValues.Data + Attr.Int +
                                                    Attr.Length));
      break;
    case AttrType::Floats:
      Attrs.set(Attr.Name, std::vector<double>(P.FloatValues.Data + Attr.Int,
                                               P.FloatValues.Data + Attr.Int +
                                                   Attr.Length));
      break;
    case AttrType::String:
      Attrs.set(Attr.Name, std::string(Attr.Text));
      break;
    }
  }
}

void checkRankCount(const Plan &P, const Comm &C) {
  if (C.size() != P.NumRanks)
    fail("train", "this program runs on " + std::to_string(P.NumRanks) +
                      " ranks, it was started on " + std::to_string(C.size()) +
                      " (mpirun -np " + std::to_string(P.NumRanks) + ")");
}

std::vector<std::vector<int>> rankGroups(Table<GroupInfo> Groups,
                                         Table<int32_t> Ranks) {
  std::vector<std::vector<int>> Out;
  for (const GroupInfo &Group : Groups)
    Out.emplace_back(Ranks.Data + Group.First,
                     Ranks.Data + Group.First + Group.Size);
  return Out;
}

Runner::Runner(const Plan &P, Backend &B, Comm &C,
               const std::string &WeightsDir)
    : I(new Impl(P, B, C)) {
  int Rank = C.rank();
  checkRankCount(P, C);
  // The communicators first: NCCL allocates their buffers as it creates
  // them, and the memory check below should see what is left.
  C.setGroups(rankGroups(P.Groups, P.GroupRanks));
  if (std::optional<size_t> Free = B.freeMemory())
    checkDeviceMemory(P, Rank, *Free);
  // Attributes, once: each op's, then each call's that replaces some.
  for (const OpInfo &Op : P.Ops) {
    OpAttrs Attrs;
    setAttributes(P, Op.FirstAttr, Op.NumAttrs, Attrs);
    I->Attrs.push_back(std::move(Attrs));
  }
  I->CallAttrs.assign(P.Calls.Size, -1);
  for (int32_t Id = 0; Id < P.Calls.Size; ++Id) {
    const CallInfo &Call = P.Calls[Id];
    if (Call.NumAttrs == 0)
      continue;
    OpAttrs Attrs = I->Attrs[Call.Op];
    setAttributes(P, Call.FirstAttr, Call.NumAttrs, Attrs);
    I->CallAttrs[Id] = int32_t(I->Attrs.size());
    I->Attrs.push_back(std::move(Attrs));
  }
  // Buffers of this rank in one zero-filled arena, and what each step does
  // with them.
  size_t ArenaBytes = size_t(P.ArenaBytes[Rank]);
  I->Arena = DeviceBuffer(B, ArenaBytes);
  I->Views.assign(P.Buffers.Size, TensorView::absent());
  std::vector<Lifetime> Live = bufferLifetimes(P, Rank);
  I->ZeroedBefore.resize(size_t(P.RankSteps[Rank].Count) + 1);
  for (int32_t Id = 0; Id < P.Buffers.Size; ++Id) {
    const BufferInfo &Info = P.Buffers[Id];
    if (Info.Rank != Rank)
      continue;
    if (Info.Offset < 0 || Info.Offset % BufferAlignment != 0 ||
        size_t(Info.Offset) + bufferBytes(Info) > ArenaBytes)
      fail("plan", "buffer " + std::to_string(Id) + " lies outside rank " +
                       std::to_string(Rank) +
                       "'s arena (regenerate the project)");
    std::vector<int64_t> Dims(Info.Extent, Info.Extent + Info.Dims);
    I->Views[Id] = TensorView::contiguous(
        Info.Type, Dims, static_cast<char *>(I->Arena.data()) + Info.Offset);
    if (isAccumulator(Info.Kind) && Live[Id].First < P.RankSteps[Rank].Count)
      I->ZeroedBefore[size_t(Live[Id].First + 1)].push_back(Id);
    if (Info.Kind == BufferKind::Input)
      I->Loaded.push_back(Id);
    if (Info.Kind == BufferKind::Activation && Info.Tensor == P.LossTensor)
      I->LossParts.push_back(Id);
  }
  // The largest message or packed all-reduce of this rank.
  I->Message = DeviceBuffer(B, messageBufferBytes(P, Rank));
  // A GPU backend zero-fills on its stream: done before any message lands
  // (a rank with nothing to load may receive first).
  B.synchronize();

  // Initial values of parameters, state and constants.
  std::string Path = WeightsDir + "/shards.bin";
  std::ifstream File(Path, std::ios::binary);
  if (!File)
    fail(Path, "cannot open the weight shards (pass --weights DIR)");
  char Magic[8];
  unsigned char HashBytes[8] = {};
  File.read(Magic, 8);
  File.read(reinterpret_cast<char *>(HashBytes), 8);
  uint64_t Hash = 0;
  for (int B = 7; B >= 0; --B)
    Hash = Hash << 8 | HashBytes[B];
  if (!File || std::memcmp(Magic, WeightsMagic, 8) != 0)
    fail(Path, "not an onnx2soap weight shard file");
  if (Hash != P.PlanHash)
    fail(Path, "was written for a different plan (regenerate the project)");
  std::vector<char> Bytes;
  for (int32_t Id = 0; Id < P.Buffers.Size; ++Id) {
    const BufferInfo &Info = P.Buffers[Id];
    if (Info.Rank != Rank || Info.WeightOffset < 0)
      continue;
    Bytes.resize(I->view(Id).byteSize());
    File.seekg(16 + Info.WeightOffset);
    File.read(Bytes.data(), Bytes.size());
    if (!File)
      fail(Path, "is truncated (buffer " + std::to_string(Id) + ")");
    B.copyFromHost(I->data(Id), Bytes.data(), Bytes.size());
  }
}

Runner::~Runner() = default;

size_t Runner::allocatedBytes() const {
  return I->Arena.size() + I->Message.size();
}

void Runner::setBatch(const std::vector<HostTensor> &Inputs,
                      const HostTensor *Labels) {
  const Plan &P = I->P;
  if (Inputs.size() != size_t(P.DataInputs.Size))
    fail("--inputs", "the model has " + std::to_string(P.DataInputs.Size) +
                         " inputs, " + std::to_string(Inputs.size()) +
                         " files were given");
  if ((P.Labels >= 0) != (Labels != nullptr))
    fail("--labels", P.Labels >= 0 ? "this model's loss needs labels"
                                   : "this model computes its own loss");
  I->Batch.assign(P.Tensors.Size, HostTensor());
  auto Take = [&](int32_t Tensor, const HostTensor &Value,
                  const std::string &Option) {
    const TensorInfo &Info = P.Tensors[Tensor];
    std::vector<int64_t> Dims(Info.Dims, Info.Dims + Info.Rank);
    if (Value.Type != Info.Type || Value.Dims != Dims)
      fail(Option, std::string("'") + Info.Name + "' must be " +
                       dtypeName(Info.Type) + " " + formatDims(Dims) +
                       ", the file holds " + dtypeName(Value.Type) + " " +
                       formatDims(Value.Dims));
    I->Batch[Tensor] = Value;
  };
  for (int32_t K = 0; K < P.DataInputs.Size; ++K)
    Take(P.DataInputs[K], Inputs[K], "--inputs");
  if (Labels)
    Take(P.Labels, *Labels, "--labels");
}

void Runner::setDataset(std::shared_ptr<const Dataset> D) {
  const Plan &P = I->P;
  I->Batch.clear();
  I->DataFileOf.assign(P.Tensors.Size, -1);
  for (int32_t K = 0; K < P.DataInputs.Size; ++K)
    I->DataFileOf[P.DataInputs[K]] = K;
  if (P.Labels >= 0)
    I->DataFileOf[P.Labels] = P.DataInputs.Size;
  I->Data = std::move(D);
}

double Runner::step() {
  const Plan &P = I->P;
  Backend &B = I->B;
  int Rank = I->Rank;
  ++Step;
  auto Start = std::chrono::steady_clock::now();
  bool Tracing = I->TraceNext;
  if (Tracing) {
    I->TraceNext = false;
    I->Traced = true;
    I->TraceEvents.clear();
    B.synchronize();
    I->TraceStart = Start = std::chrono::steady_clock::now();
  }
  // Inputs are this rank's regions of the batch; accumulators start at
  // zero, each right before its first step (until then its memory may hold
  // another buffer).
  I->zeroBefore(-1);
  std::vector<char> Host;
  for (int32_t Id : I->Loaded) {
    const BufferInfo &Info = P.Buffers[Id];
    Host.resize(I->view(Id).byteSize());
    if (I->Data) {
      // Step s takes the dataset's samples from (s - 1) * B on.
      int64_t First = (Step - 1) * P.Tensors[Info.Tensor].Dims[0];
      I->Data->readBox(size_t(I->DataFileOf[Info.Tensor]), First, Info.Origin,
                       Info.Extent, Host.data());
    } else {
      const HostTensor &Whole = I->Batch[Info.Tensor];
      if (Whole.Bytes.empty())
        fail("train", "no batch was given (--inputs, --labels or --data)");
      copyHostBox(Host.data(), Whole.Bytes.data(), Whole.Dims, Info.Origin,
                  Info.Extent, Info.Dims, dtypeSize(Info.Type));
    }
    B.copyFromHost(I->data(Id), Host.data(), Host.size());
  }
  const Range &Steps = P.RankSteps[Rank];
  // The wait for the running send or all-reduce, traced as -1 - its index.
  auto FinishRunning = [&] {
    if (I->Running)
      I->traced(Tracing, -1.0 - double(I->Running - &P.Steps[Steps.First]),
                [&] { I->finishRunning(); });
  };
  for (int32_t Local = 0; Local < Steps.Count; ++Local) {
    const StepInfo &S = P.Steps[Steps.First + Local];
    // A send or gradient all-reduce runs beside the compute steps after it
    // until one needs what it holds or the Comm (see runsBeside).
    if (I->Running && !I->runsBeside(S, Local))
      FinishRunning();
    I->zeroBefore(Local);
    I->traced(Tracing, double(Local), [&] { I->run(S, Step); });
  }
  FinishRunning();
  const Range &State = P.RankStateCopies[Rank];
  I->runCopies(State.First, State.Count);
  B.synchronize();
  if (I->Profiling) {
    I->Spent.Total +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - Start)
            .count();
    ++I->Spent.Steps;
  }

  // The loss: the sum of this rank's parts, summed over ranks.
  double Loss = 0;
  for (int32_t Id : I->LossParts) {
    if (P.Buffers[Id].Type == DType::Float64) {
      double Value;
      B.copyToHost(&Value, I->data(Id), sizeof Value);
      Loss += Value;
    } else {
      float Value;
      B.copyToHost(&Value, I->data(Id), sizeof Value);
      Loss += Value;
    }
  }
  return I->C.sumOverRanks(Loss);
}

std::vector<NamedBlob> Runner::persistentState() {
  const Plan &P = I->P;
  std::vector<NamedBlob> Result;
  for (int32_t Id = 0; Id < P.Buffers.Size; ++Id) {
    const BufferInfo &Info = P.Buffers[Id];
    if (Info.Rank != I->Rank ||
        (Info.Kind != BufferKind::Parameter && Info.Kind != BufferKind::State &&
         Info.Kind != BufferKind::OptimizerState))
      continue;
    std::vector<char> Bytes(I->view(Id).byteSize());
    I->B.copyToHost(Bytes.data(), I->data(Id), Bytes.size());
    Result.push_back({"buffer-" + std::to_string(Id), std::move(Bytes)});
  }
  return Result;
}

void Runner::restore(int64_t StepsDone, const std::vector<NamedBlob> &State) {
  const Plan &P = I->P;
  for (const NamedBlob &Blob : State) {
    const std::string &Name = Blob.Name;
    const std::vector<char> &Bytes = Blob.Bytes;
    int32_t Id = -1;
    if (Name.rfind("buffer-", 0) == 0)
      Id = std::atoi(Name.c_str() + 7);
    if (Id < 0 || Id >= P.Buffers.Size || P.Buffers[Id].Rank != I->Rank ||
        Bytes.size() != I->view(Id).byteSize())
      fail("checkpoint", "entry '" + Name + "' does not belong to this plan");
    I->B.copyFromHost(I->data(Id), Bytes.data(), Bytes.size());
  }
  Step = StepsDone;
}

StepBreakdown Runner::breakdown() const { return I->Spent; }

void Runner::startProfiling() {
  I->Profiling = true;
  I->Spent = {};
  I->ForwardSeconds.assign(I->P.Calls.Size, {});
  I->BackwardSeconds.assign(I->P.Calls.Size, {});
}

std::string Runner::profileJson(int Threads) {
  const Plan &P = I->P;
  Comm &C = I->C;
  // Every call's median goes to every rank (one sum per call: each call
  // runs on one rank), then rank 0 merges calls that share a key.
  struct Times {
    std::vector<double> Forward, Backward;
    int64_t Samples = 0;
  };
  std::map<std::string, Times> ByKey;
  for (int32_t Call = 0; Call < P.Calls.Size; ++Call) {
    auto Share = [&](const std::vector<double> &Samples) {
      double Mine = Samples.empty() ? 0 : median(Samples);
      double Count = C.sumOverRanks(double(Samples.size()));
      return std::make_pair(C.sumOverRanks(Mine), Count);
    };
    auto [Forward, ForwardCount] = Share(I->ForwardSeconds[Call]);
    auto [Backward, BackwardCount] = Share(I->BackwardSeconds[Call]);
    if (ForwardCount == 0)
      continue;
    Times &T = ByKey[P.Calls[Call].ProfileKey];
    T.Forward.push_back(Forward);
    if (BackwardCount > 0)
      T.Backward.push_back(Backward);
    T.Samples += int64_t(ForwardCount);
  }
  if (I->Rank != 0)
    return "";
  // Box copies on this device (every rank's is of the plan's one device
  // type): the planner times the program's copies from them. Their two
  // buffers come on top of the plan's memory; where the device has no room
  // left, the profile goes without them.
  std::string Copies;
  try {
    Copies =
        ",\n  \"copies\": " + copyTimingJson(timeBoxCopies(I->B, CopyRepeats));
  } catch (const RuntimeError &Failure) {
    std::fprintf(stderr,
                 "train: warning: --profile-ops: box copies not timed (%s); "
                 "the profile has no copy table\n",
                 Failure.what());
  }
  std::string Out =
      "{\n  \"format\": \"onnx2soap-profile\",\n  "
      "\"version\": 1,\n  \"device_type\": " +
      jsonString(P.DeviceType) +
      ",\n  \"measured_with\": {\"backend\": " + jsonString(I->B.name()) +
      ", \"threads\": " + std::to_string(Threads) +
      ", \"program\": " + jsonString(P.ModelName) + "}" + Copies +
      ",\n  \"entries\": [";
  bool First = true;
  for (const auto &[Key, T] : ByKey) {
    Out += First ? "\n" : ",\n";
    First = false;
    Out += "    {\"key\": " + jsonString(Key) +
           ", \"forward_s\": " + jsonNumber(median(T.Forward));
    if (!T.Backward.empty())
      Out += ", \"backward_s\": " + jsonNumber(median(T.Backward));
    Out += ", \"samples\": " + std::to_string(T.Samples) + "}";
  }
  return Out + "\n  ]\n}\n";
}

/// A trace event's category: what kind of step it is.
static const char *stepKindName(StepKind Kind) {
  switch (Kind) {
  case StepKind::Forward:
    return "forward";
  case StepKind::StatsForward:
    return "statistics forward";
  case StepKind::Backward:
    return "backward";
  case StepKind::StatsBackward:
    return "statistics backward";
  case StepKind::Send:
    return "send";
  case StepKind::Recv:
    return "receive";
  case StepKind::AllReduce:
    return "all-reduce";
  case StepKind::Update:
    return "update";
  }
  return "step";
}

void Runner::traceNextStep() { I->TraceNext = true; }

bool Runner::traced() const { return I->Traced; }

std::string Runner::traceJson() {
  const Plan &P = I->P;
  Comm &C = I->C;
  Backend &B = I->B;
  // Every rank's events go to rank 0 (as backend buffers, which the Comm
  // moves), which names them from the plan: every rank holds all of it.
  std::vector<std::vector<double>> ByRank(C.size());
  for (int From = 0; From < C.size(); ++From) {
    double Mine = From == I->Rank ? double(I->TraceEvents.size()) : 0;
    size_t Count = size_t(C.sumOverRanks(Mine));
    size_t Bytes = Count * sizeof(double);
    if (Count == 0)
      continue;
    if (From == 0) {
      if (I->Rank == 0)
        ByRank[0] = I->TraceEvents;
      continue;
    }
    if (I->Rank == From) {
      DeviceBuffer Out(B, Bytes);
      B.copyFromHost(Out.data(), I->TraceEvents.data(), Bytes);
      B.synchronize();
      C.send(0, Out.data(), Bytes, "gather trace");
    } else if (I->Rank == 0) {
      DeviceBuffer In(B, Bytes);
      B.synchronize(); // its zero fill before the message lands
      C.recv(From, In.data(), Bytes, "gather trace");
      ByRank[From].resize(Count);
      B.copyToHost(ByRank[From].data(), In.data(), Bytes);
    }
  }
  if (I->Rank != 0)
    return "";
  auto Micros = [](double Seconds) {
    char Text[40];
    std::snprintf(Text, sizeof Text, "%.3f", Seconds * 1e6);
    return std::string(Text);
  };
  std::string Out = "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [";
  bool First = true;
  auto Add = [&](const std::string &Event) {
    Out += First ? "\n  " : ",\n  ";
    Out += Event;
    First = false;
  };
  Add("{\"ph\": \"M\", \"pid\": 0, \"name\": \"process_name\", "
      "\"args\": {\"name\": " +
      jsonString(std::string("train: ") + P.ModelName) + "}}");
  for (int Rank = 0; Rank < C.size(); ++Rank)
    Add("{\"ph\": \"M\", \"pid\": 0, \"tid\": " + std::to_string(Rank) +
        ", \"name\": \"thread_name\", \"args\": {\"name\": \"rank " +
        std::to_string(Rank) + "\"}}");
  for (int Rank = 0; Rank < C.size(); ++Rank) {
    const Range &Steps = P.RankSteps[Rank];
    const std::vector<double> &E = ByRank[size_t(Rank)];
    for (size_t K = 0; K + 2 < E.size(); K += 3) {
      bool Wait = E[K] < 0;
      int32_t Local = int32_t(Wait ? -1 - E[K] : E[K]);
      if (Local < 0 || Local >= Steps.Count)
        continue;
      const StepInfo &S = P.Steps[Steps.First + Local];
      std::string Label = S.Label ? S.Label : "";
      std::string Name = Wait ? "wait: " + Label : Label;
      Add("{\"ph\": \"X\", \"pid\": 0, \"tid\": " + std::to_string(Rank) +
          ", \"name\": " + jsonString(Name) +
          ", \"cat\": " + jsonString(Wait ? "wait" : stepKindName(S.Kind)) +
          ", \"ts\": " + Micros(E[K + 1]) +
          ", \"dur\": " + Micros(E[K + 2] - E[K + 1]) + "}");
    }
  }
  return Out + "\n]}\n";
}

std::vector<HostTensor> Runner::gatherWeights() {
  const Plan &P = I->P;
  Comm &C = I->C;
  std::vector<HostTensor> Result;
  if (I->Rank == 0)
    for (const TensorInfo &Info : P.Tensors) {
      if (Info.Role != TensorRole::Parameter && Info.Role != TensorRole::State)
        continue;
      HostTensor T;
      T.Name = Info.Name;
      T.Type = Info.Type;
      T.Dims.assign(Info.Dims, Info.Dims + Info.Rank);
      int64_t Elements = 1;
      for (int64_t D : T.Dims)
        Elements *= D;
      T.Bytes.assign(Elements * dtypeSize(Info.Type), 0);
      Result.push_back(std::move(T));
    }
  // Every box of every parameter and state tensor goes to rank 0, in buffer
  // order (replicas hold equal values; the last one written wins). Messages
  // travel between backend buffers, as the backend's Comm requires.
  std::vector<char> Bytes;
  for (int32_t Id = 0; Id < P.Buffers.Size; ++Id) {
    const BufferInfo &Info = P.Buffers[Id];
    if (Info.Kind != BufferKind::Parameter && Info.Kind != BufferKind::State)
      continue;
    int64_t Elements = 1;
    for (int D = 0; D < Info.Dims; ++D)
      Elements *= Info.Extent[D];
    Bytes.resize(Elements * dtypeSize(Info.Type));
    if (Info.Rank == I->Rank && I->Rank != 0)
      C.send(0, I->data(Id), Bytes.size(), "gather weights");
    if (I->Rank != 0)
      continue;
    if (Info.Rank == 0) {
      I->B.copyToHost(Bytes.data(), I->data(Id), Bytes.size());
    } else {
      DeviceBuffer Incoming(I->B, Bytes.size());
      I->B.synchronize(); // its zero fill before the message lands
      C.recv(Info.Rank, Incoming.data(), Bytes.size(), "gather weights");
      I->B.copyToHost(Bytes.data(), Incoming.data(), Bytes.size());
    }
    const std::string &Name = P.Tensors[Info.Tensor].Name;
    for (HostTensor &T : Result)
      if (T.Name == Name)
        pasteHostBox(T.Bytes.data(), Bytes.data(), T.Dims, Info.Origin,
                     Info.Extent, Info.Dims, dtypeSize(Info.Type));
  }
  return Result;
}

} // namespace onnx2soap::rt::program
