//===- runtime_lib/program/BufferLifetimes.h - Lifetimes --------*- C++ -*-===//
//
// A rank walks its steps in one order every training step, so each buffer
// it holds is needed over a fixed range of those steps: from the first step
// that reads or writes it to the last. Buffers whose ranges do not meet can
// share memory. Codegen lays the buffers out in one arena per rank from
// these ranges (codegen/BufferLayout.h); the runner computes the same ranges
// to zero each accumulator right before its first step (its memory held
// another buffer until then) and to check the layout it was given.
//
// Step -1 is the start of a training step (graph inputs are loaded then)
// and step Count (the number of the rank's steps) its end (the loss is read
// and new running statistics are copied into the state boxes then).
// Parameters, optimizer slots, state and constants keep their values from
// one training step to the next: they are live over [-1, Count].
//
//===----------------------------------------------------------------------===//
#ifndef ONNX2SOAP_RUNTIME_PROGRAM_BUFFERLIFETIMES_H
#define ONNX2SOAP_RUNTIME_PROGRAM_BUFFERLIFETIMES_H

#include "Plan.h"
#include <algorithm>
#include <climits>
#include <vector>

namespace onnx2soap::rt::program {

/// Whether buffers of this kind keep their values between training steps.
inline bool isPersistent(BufferKind Kind) {
  switch (Kind) {
  case BufferKind::Parameter:
  case BufferKind::OptimizerState:
  case BufferKind::State:
  case BufferKind::Constant:
    return true;
  case BufferKind::Activation:
  case BufferKind::Gathered:
  case BufferKind::Accumulated:
  case BufferKind::Gradient:
  case BufferKind::Input:
  case BufferKind::Statistics:
    return false;
  }
  return true;
}

/// Whether a step starts by zeroing buffers of this kind (backward calls and
/// copies add into them).
inline bool isAccumulator(BufferKind Kind) {
  return Kind == BufferKind::Gradient || Kind == BufferKind::Accumulated;
}

/// Whether the backward kernels of Kind read only the gradients: ops that
/// move elements (both backends add the output gradient back along the
/// forward's index map, which the views' shapes give), so their backward
/// steps do not keep their inputs and outputs live.
inline bool backwardReadsOnlyGradients(OpKind Kind) {
  return Kind == OpKind::Reshape || Kind == OpKind::Transpose ||
         Kind == OpKind::Concat || Kind == OpKind::Split ||
         Kind == OpKind::Slice || Kind == OpKind::Expand;
}

/// The steps [First, Last] of its rank over which a buffer is live, in the
/// rank's step indices (0 is the rank's first step; -1 and Count as above).
struct Lifetime {
  int32_t First;
  int32_t Last;
  bool meets(const Lifetime &Other) const {
    return First <= Other.Last && Other.First <= Last;
  }
};

/// The lifetime of every buffer of Rank, by buffer id (other ranks' buffers
/// get an empty range, First > Last). A buffer of Rank that no step touches
/// is live over the whole training step, as a persistent one. What a step
/// touches follows the Runner's walk (RunnerImpl.h): a forward call its inputs,
/// outputs and statistics; a backward call all of its operands (only the
/// gradients for ops that move elements); messages and all-reduces their
/// copies; an update its parameter, gradient and slots. Header-only: codegen,
/// which does not link the program library, lays out buffers with it.
inline std::vector<Lifetime> bufferLifetimes(const Plan &P, int32_t Rank) {
  std::vector<Lifetime> Live(P.Buffers.Size, Lifetime{INT32_MAX, INT32_MIN});
  auto Use = [&](int32_t Buffer, int32_t Step) {
    if (Buffer < 0)
      return;
    Lifetime &L = Live[Buffer];
    L.First = std::min(L.First, Step);
    L.Last = std::max(L.Last, Step);
  };
  auto UseCopies = [&](int32_t First, int32_t Count, int32_t Step) {
    for (int32_t I = First; I < First + Count; ++I) {
      Use(P.Copies[I].From, Step);
      Use(P.Copies[I].To, Step);
    }
  };
  const Range &Steps = P.RankSteps[Rank];
  const int32_t End = Steps.Count;
  for (int32_t Local = 0; Local < Steps.Count; ++Local) {
    const StepInfo &S = P.Steps[Steps.First + Local];
    UseCopies(S.FirstCopy, S.NumCopies, Local);
    UseCopies(S.FirstPostCopy, S.NumPostCopies, Local);
    switch (S.Kind) {
    case StepKind::Forward:
    case StepKind::StatsForward:
    case StepKind::Backward:
    case StepKind::StatsBackward: {
      const CallInfo &Call = P.Calls[S.Call];
      bool Backward =
          S.Kind == StepKind::Backward || S.Kind == StepKind::StatsBackward;
      int32_t Values = Call.NumInputs + Call.NumOutputs;
      int32_t First = 0, Count = Values;
      if (Backward && Call.HasBackward) {
        Count = 2 * Values;
        if (backwardReadsOnlyGradients(P.Ops[Call.Op].Kind))
          First = Values;
      }
      for (int32_t I = First; I < Count; ++I)
        Use(P.Operands[Call.FirstOperand + I], Local);
      if (Call.Flags == CallFlags::GlobalStatistics) {
        Use(Call.Statistics, Local);
        if (Backward)
          Use(Call.GradientSums, Local);
      }
      break;
    }
    case StepKind::Send:
    case StepKind::Recv:
    case StepKind::AllReduce:
      break;
    case StepKind::Update:
      Use(S.Buffer, Local);
      Use(S.Gradient, Local);
      for (int32_t I = 0; I < S.NumState; ++I)
        Use(S.State[I], Local);
      break;
    }
  }
  // The end of a step: new running statistics into the state boxes, and
  // the loss read.
  UseCopies(P.RankStateCopies[Rank].First, P.RankStateCopies[Rank].Count, End);
  for (int32_t Id = 0; Id < P.Buffers.Size; ++Id) {
    const BufferInfo &Info = P.Buffers[Id];
    if (Info.Rank != Rank)
      continue;
    Lifetime &L = Live[Id];
    if (isPersistent(Info.Kind) || L.First > L.Last) {
      L = {-1, End};
      continue;
    }
    if (Info.Kind == BufferKind::Input)
      L.First = -1;
    if (Info.Kind == BufferKind::Activation && Info.Tensor == P.LossTensor)
      L.Last = End;
  }
  return Live;
}

} // namespace onnx2soap::rt::program

#endif
