//===- runtime_lib/program/RunnerImpl.h - A Runner's state -----*- C++ -*-===//
//
// Internal to Runner.cpp (a step: its steps walked in plan order) and
// RunnerReports.cpp (what --profile-ops, --trace and gathering the weights
// report): the state one rank keeps while it walks its steps, and the walk
// of one step.
//
//===----------------------------------------------------------------------===//
#ifndef ONNX2SOAP_RUNTIME_LIB_PROGRAM_RUNNERIMPL_H
#define ONNX2SOAP_RUNTIME_LIB_PROGRAM_RUNNERIMPL_H

#include "../Error.h"
#include "BufferLifetimes.h"
#include "Dataset.h"
#include "Runner.h"
#include <chrono>
#include <cstring>

namespace onnx2soap::rt::program {

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

} // namespace onnx2soap::rt::program

#endif
