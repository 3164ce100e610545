//===- runtime_lib/cpu/Movement.cpp - Data movement kernels ---------------===//
//
// CPU kernels of the DataMovement family (ir/ops/DataMovement.cpp): Reshape,
// Transpose, Concat, Split, Slice, Pad, Expand and Gather. Every op is a
// strided copy between views: forward copies elements of any type as raw
// bytes, backward adds the output gradient (f32 or f64) back through the
// same index map, so elements read several times (Expand's broadcast dims,
// Pad's reflected borders, Gather's repeated indices) accumulate.
//
//===----------------------------------------------------------------------===//
#include "CpuKernels.h"
#include "PadGather.h"
#include <algorithm>
#include <cstring>
#include <vector>

namespace onnx2soap::rt::cpu {
namespace {

/// A walk over Dims with two element offsets (strides may be zero or
/// negative).
struct Walk {
  int Rank = 0;
  int64_t Dims[MaxRank] = {};
  int64_t StridesA[MaxRank] = {}, StridesB[MaxRank] = {};
  int64_t BaseA = 0, BaseB = 0;

  int64_t count() const {
    int64_t N = 1;
    for (int I = 0; I < Rank; ++I)
      N *= Dims[I];
    return N;
  }

  /// Calls Fn(A, B) for every index, in row-major order.
  template <typename F> void run(F &&Fn) const {
    if (count() == 0)
      return;
    if (Rank == 0)
      return Fn(BaseA, BaseB);
    int64_t Index[MaxRank] = {};
    int Last = Rank - 1;
    int64_t A = BaseA, B = BaseB;
    while (true) {
      for (int64_t J = 0; J < Dims[Last]; ++J)
        Fn(A + J * StridesA[Last], B + J * StridesB[Last]);
      int D = Last - 1;
      for (; D >= 0; --D) {
        A += StridesA[D];
        B += StridesB[D];
        if (++Index[D] < Dims[D])
          break;
        A -= Index[D] * StridesA[D];
        B -= Index[D] * StridesB[D];
        Index[D] = 0;
      }
      if (D < 0)
        return;
    }
  }
};

/// Row-major strides of V's dims (views are checked dense).
void denseStrides(const TensorView &V, int64_t *Strides) {
  int64_t S = 1;
  for (int I = V.Rank - 1; I >= 0; --I) {
    Strides[I] = S;
    S *= V.Dims[I];
  }
}

/// Runs Fn(U{}) with U an unsigned integer as wide as an element of Type.
template <typename F> void dispatchBytes(DType Type, F &&Fn) {
  switch (dtypeSize(Type)) {
  case 1:
    return Fn(uint8_t{});
  case 2:
    return Fn(uint16_t{});
  case 4:
    return Fn(uint32_t{});
  default:
    return Fn(uint64_t{});
  }
}

/// Forward: Dst[A] = Src[B] over the walk, for any element type.
void copyWalk(const Walk &W, DType Type, void *Dst, const void *Src) {
  dispatchBytes(Type, [&](auto U) {
    using T = decltype(U);
    T *D = static_cast<T *>(Dst);
    const T *S = static_cast<const T *>(Src);
    W.run([&](int64_t A, int64_t B) { D[A] = S[B]; });
  });
}

/// Backward: Dst[A] += Src[B] over the walk (f32 or f64).
void addWalk(const OpCall &Call, const Walk &W, DType Type, void *Dst,
             const void *Src) {
  auto Add = [&](auto Zero) {
    using T = decltype(Zero);
    T *D = static_cast<T *>(Dst);
    const T *S = static_cast<const T *>(Src);
    W.run([&](int64_t A, int64_t B) { D[A] += S[B]; });
  };
  if (Type == DType::Float32)
    return Add(float{});
  if (Type == DType::Float64)
    return Add(double{});
  failOp(Call, std::string("gradient of element type ") + dtypeName(Type) +
                   " is not supported, the CPU kernel needs f32 or f64");
}

const TensorView &operand(const OpCall &Call, const Views &Vs, size_t I,
                          const char *What) {
  if (I >= Vs.size() || !Vs[I].present())
    failOp(Call, std::string("missing ") + What + " " + std::to_string(I));
  requireContiguous(Call, Vs[I], What);
  return Vs[I];
}

/// The gradient view I when present and needed, checked against Like.
TensorView gradientAt(const OpCall &Call, const Views &Vs, size_t I,
                      const TensorView &Like, const char *What) {
  if (I >= Vs.size() || !Vs[I].present())
    return TensorView::absent();
  requireContiguous(Call, Vs[I], What);
  requireType(Call, Vs[I], Like.Type, What);
  if (Vs[I].numElements() != Like.numElements())
    failOp(Call, std::string(What) + " " + std::to_string(I) +
                     " does not match its tensor's shape");
  return Vs[I];
}

void requireSameType(const OpCall &Call, const TensorView &A,
                     const TensorView &B) {
  if (A.Type != B.Type)
    failOp(Call, std::string("input and output element types differ: ") +
                     dtypeName(A.Type) + " and " + dtypeName(B.Type));
}

void requireRank(const OpCall &Call, const TensorView &V, int Rank,
                 const char *What) {
  if (V.Rank != Rank)
    failOp(Call, std::string(What) + " has rank " + std::to_string(V.Rank) +
                     ", expected " + std::to_string(Rank));
}

//===-- Index maps of the ops ---------------------------------------------===//
//
// Each op is a list of (output view, input view, walk) triples: walk offsets
// A index the output, B the input. Forward copies B to A; backward adds A's
// gradient to B's.

struct Transfer {
  unsigned Output, Input;
  Walk W;
};

std::vector<Transfer> reshapeMap(const OpCall &Call) {
  const TensorView &X = operand(Call, Call.Inputs, 0, "input");
  const TensorView &Y = operand(Call, Call.Outputs, 0, "output");
  if (X.numElements() != Y.numElements())
    failOp(Call, "input and output element counts differ");
  Transfer T{0, 0, {}};
  T.W.Rank = 1;
  T.W.Dims[0] = X.numElements();
  T.W.StridesA[0] = T.W.StridesB[0] = 1;
  return {T};
}

std::vector<Transfer> transposeMap(const OpCall &Call) {
  const TensorView &X = operand(Call, Call.Inputs, 0, "input");
  const TensorView &Y = operand(Call, Call.Outputs, 0, "output");
  const std::vector<int64_t> &Perm = Call.Attrs.getInts("perm");
  requireRank(Call, Y, X.Rank, "output");
  if (static_cast<int>(Perm.size()) != X.Rank)
    failOp(Call, "perm does not match the input's rank");
  Transfer T{0, 0, {}};
  T.W.Rank = X.Rank;
  int64_t XStrides[MaxRank];
  denseStrides(X, XStrides);
  denseStrides(Y, T.W.StridesA);
  std::vector<bool> Seen(X.Rank, false);
  for (int I = 0; I < X.Rank; ++I) {
    int64_t P = Perm[I];
    if (P < 0 || P >= X.Rank || Seen[P] || Y.Dims[I] != X.Dims[P])
      failOp(Call, "perm is not a permutation matching the output shape");
    Seen[P] = true;
    T.W.Dims[I] = Y.Dims[I];
    T.W.StridesB[I] = XStrides[P];
  }
  return {T};
}

/// Concat (Many = inputs) and Split (Many = outputs): the one tensor's
/// blocks along Axis are the many tensors. Transfers always go from the
/// one side's index (as A when it is the output) to the many side's.
std::vector<Transfer> concatMap(const OpCall &Call, bool IsConcat) {
  const Views &ManyViews = IsConcat ? Call.Inputs : Call.Outputs;
  const TensorView &One = operand(Call, IsConcat ? Call.Outputs : Call.Inputs,
                                  0, IsConcat ? "output" : "input");
  int64_t Axis = Call.Attrs.getInt("axis");
  if (Axis < 0 || Axis >= One.Rank)
    failOp(Call, "axis " + std::to_string(Axis) + " is out of range");
  int64_t OneStrides[MaxRank];
  denseStrides(One, OneStrides);
  std::vector<Transfer> Map;
  int64_t Offset = 0;
  for (unsigned K = 0; K < ManyViews.size(); ++K) {
    // A partition of an op split along Axis may hold none of operand K
    // (generated programs pass it absent): it adds no block.
    if (!ManyViews[K].present())
      continue;
    const TensorView &M =
        operand(Call, ManyViews, K, IsConcat ? "input" : "output");
    requireRank(Call, M, One.Rank, IsConcat ? "an input" : "an output");
    requireSameType(Call, M, One);
    Walk W;
    W.Rank = One.Rank;
    int64_t MStrides[MaxRank];
    denseStrides(M, MStrides);
    for (int D = 0; D < One.Rank; ++D) {
      if (D != Axis && M.Dims[D] != One.Dims[D])
        failOp(Call, "operand " + std::to_string(K) +
                         " does not match outside the axis");
      W.Dims[D] = M.Dims[D];
    }
    int64_t *OneSide = IsConcat ? W.StridesA : W.StridesB;
    int64_t *ManySide = IsConcat ? W.StridesB : W.StridesA;
    std::copy(OneStrides, OneStrides + One.Rank, OneSide);
    std::copy(MStrides, MStrides + One.Rank, ManySide);
    (IsConcat ? W.BaseA : W.BaseB) = Offset * OneStrides[Axis];
    Offset += M.Dims[Axis];
    Map.push_back(Transfer{IsConcat ? 0 : K, IsConcat ? K : 0, W});
  }
  if (Offset != One.Dims[Axis])
    failOp(Call, "operand sizes along the axis do not add up");
  return Map;
}

std::vector<Transfer> sliceMap(const OpCall &Call) {
  const TensorView &X = operand(Call, Call.Inputs, 0, "input");
  const TensorView &Y = operand(Call, Call.Outputs, 0, "output");
  requireRank(Call, Y, X.Rank, "output");
  const std::vector<int64_t> &Starts = Call.Attrs.getInts("starts"),
                             &Steps = Call.Attrs.getInts("steps");
  if (static_cast<int>(Starts.size()) != X.Rank ||
      static_cast<int>(Steps.size()) != X.Rank)
    failOp(Call, "starts/steps do not cover the input's dims");
  Transfer T{0, 0, {}};
  T.W.Rank = X.Rank;
  int64_t XStrides[MaxRank];
  denseStrides(X, XStrides);
  denseStrides(Y, T.W.StridesA);
  for (int D = 0; D < X.Rank; ++D) {
    int64_t First = Starts[D], Last = First + (Y.Dims[D] - 1) * Steps[D];
    if (Y.Dims[D] > 0 && (std::min(First, Last) < 0 ||
                          std::max(First, Last) >= X.Dims[D] || !Steps[D]))
      failOp(Call,
             "slice of dim " + std::to_string(D) + " reads outside the input");
    T.W.Dims[D] = Y.Dims[D];
    T.W.StridesB[D] = Steps[D] * XStrides[D];
    T.W.BaseB += First * XStrides[D];
  }
  return {T};
}

std::vector<Transfer> expandMap(const OpCall &Call) {
  const TensorView &X = operand(Call, Call.Inputs, 0, "input");
  const TensorView &Y = operand(Call, Call.Outputs, 0, "output");
  if (X.Rank > Y.Rank)
    failOp(Call, "input has more dims than the output");
  Transfer T{0, 0, {}};
  T.W.Rank = Y.Rank;
  int64_t XStrides[MaxRank];
  denseStrides(X, XStrides);
  denseStrides(Y, T.W.StridesA);
  int Lead = Y.Rank - X.Rank;
  for (int D = 0; D < Y.Rank; ++D) {
    T.W.Dims[D] = Y.Dims[D];
    if (D < Lead)
      continue;
    int64_t XDim = X.Dims[D - Lead];
    if (XDim != Y.Dims[D] && XDim != 1)
      failOp(Call, "input does not broadcast to the output");
    T.W.StridesB[D] = XDim == 1 ? 0 : XStrides[D - Lead];
  }
  return {T};
}

std::vector<Transfer> transfers(const OpCall &Call) {
  switch (Call.Kind) {
  case OpKind::Reshape:
    return reshapeMap(Call);
  case OpKind::Transpose:
    return transposeMap(Call);
  case OpKind::Concat:
    return concatMap(Call, true);
  case OpKind::Split:
    return concatMap(Call, false);
  case OpKind::Slice:
    return sliceMap(Call);
  case OpKind::Expand:
    return expandMap(Call);
  default:
    failOp(Call, "has no strided index map");
  }
}

void forwardTransfers(const OpCall &Call) {
  for (const Transfer &T : transfers(Call)) {
    const TensorView &X = Call.Inputs[T.Input], &Y = Call.Outputs[T.Output];
    requireSameType(Call, X, Y);
    if (Call.Kind == OpKind::Reshape) {
      // A contiguous copy; an in-place reshape (same buffer) needs none.
      if (X.Data != Y.Data)
        std::memmove(Y.Data, X.Data, X.byteSize());
      continue;
    }
    copyWalk(T.W, X.Type, Y.Data, X.Data);
  }
}

void backwardTransfers(const OpCall &Call, const Views &OutGrads,
                       const Views &InGrads) {
  for (const Transfer &T : transfers(Call)) {
    TensorView DX =
        gradientAt(Call, InGrads, T.Input, Call.Inputs[T.Input], "gradient");
    TensorView GY = gradientAt(Call, OutGrads, T.Output, Call.Outputs[T.Output],
                               "output gradient");
    if (!DX.present() || !GY.present())
      continue;
    // Swap the walk's sides: accumulate into the input's offsets.
    Walk W = T.W;
    std::swap(W.StridesA, W.StridesB);
    std::swap(W.BaseA, W.BaseB);
    addWalk(Call, W, DX.Type, DX.Data, GY.Data);
  }
}

} // namespace

void forwardMovement(Context &, const OpCall &Call) {
  switch (Call.Kind) {
  case OpKind::Pad:
    return forwardPad(Call);
  case OpKind::Gather:
    return forwardGather(Call);
  case OpKind::GatherElements:
    return forwardGatherElements(Call);
  default:
    return forwardTransfers(Call);
  }
}

void backwardMovement(Context &, const OpCall &Call, const Views &OutputGrads,
                      const Views &InputGrads) {
  switch (Call.Kind) {
  case OpKind::Pad:
    return backwardPad(Call, OutputGrads, InputGrads);
  case OpKind::Gather:
    return backwardGather(Call, OutputGrads, InputGrads);
  case OpKind::GatherElements:
    return backwardGatherElements(Call, OutputGrads, InputGrads);
  default:
    return backwardTransfers(Call, OutputGrads, InputGrads);
  }
}

} // namespace onnx2soap::rt::cpu
