//===- runtime_lib/cpu/Loops.h - Strided and broadcast loops ---*- C++ -*-===//
//
// The iteration helpers of the CPU loop kernels: numpy broadcasting of a view
// onto an output shape (stride 0 on broadcast dims), a walk over a shared
// index space with several operands that each carry their own strides (unit
// dims dropped and mergeable dims coalesced, so a dense walk is one flat
// loop), and dispatch from a DType to the C++ element type. A backward
// kernel reduces over broadcast dims by walking the output's index space
// and adding into the input gradient through its stride-0 dims.
//
//===----------------------------------------------------------------------===//
#ifndef ONNX2SOAP_RUNTIME_CPU_LOOPS_H
#define ONNX2SOAP_RUNTIME_CPU_LOOPS_H

#include "../Types.h"
#include "Parallel.h"
#include <array>
#include <cstdint>

namespace onnx2soap::rt::cpu {

/// Carries an element type through a generic lambda: `[&](auto Tag) { using
/// T = typename decltype(Tag)::Type; ... }`.
template <typename T> struct TypeTag { using Type = T; };

/// Calls Fn(TypeTag<T>) for f32 and f64; false for other types.
template <typename F> bool visitFloat(DType Type, F &&Fn) {
  switch (Type) {
  case DType::Float32:
    Fn(TypeTag<float>());
    return true;
  case DType::Float64:
    Fn(TypeTag<double>());
    return true;
  default:
    return false;
  }
}

/// Calls Fn(TypeTag<T>) for f32, f64, i32 and i64; false for other types.
template <typename F> bool visitNumeric(DType Type, F &&Fn) {
  switch (Type) {
  case DType::Int32:
    Fn(TypeTag<int32_t>());
    return true;
  case DType::Int64:
    Fn(TypeTag<int64_t>());
    return true;
  default:
    return visitFloat(Type, Fn);
  }
}

/// Element strides of V broadcast (numpy rules: dims aligned on the right,
/// size-1 or missing dims repeat) to the shape Dims[0..Rank): 0 on every
/// repeated dim. False when V's shape does not broadcast to Dims.
inline bool broadcastStrides(const TensorView &V, int Rank, const int64_t *Dims,
                             int64_t *Strides) {
  if (V.Rank > Rank)
    return false;
  int Lead = Rank - V.Rank;
  for (int I = 0; I < Rank; ++I) {
    if (I < Lead) {
      Strides[I] = 0;
      continue;
    }
    int64_t D = V.Dims[I - Lead];
    if (D == Dims[I])
      Strides[I] = D == 1 ? 0 : V.Strides[I - Lead];
    else if (D == 1)
      Strides[I] = 0;
    else
      return false;
  }
  return true;
}

/// An index space walked by N operands, each with its own strides.
template <int N> struct LoopSpace {
  int Rank = 0;
  int64_t Dims[MaxRank] = {};
  int64_t Strides[N][MaxRank] = {};
};

/// The index space of Out (operand 0, its own strides) with Operands[1..N)
/// broadcast onto it. False when one of them does not broadcast.
template <int N>
bool broadcastSpace(const TensorView &Out,
                    const std::array<const TensorView *, N> &Operands,
                    LoopSpace<N> &Space) {
  Space.Rank = Out.Rank;
  for (int I = 0; I < Out.Rank; ++I)
    Space.Dims[I] = Out.Dims[I];
  for (int J = 0; J < N; ++J)
    if (!broadcastStrides(*Operands[J], Out.Rank, Out.Dims, Space.Strides[J]))
      return false;
  return true;
}

/// Drops unit dims and merges each dim into its outer neighbour when every
/// operand steps over both as over one dim.
template <int N> void coalesce(LoopSpace<N> &S) {
  int Rank = 0;
  for (int I = 0; I < S.Rank; ++I) {
    if (S.Dims[I] == 1)
      continue;
    bool Merge = Rank > 0;
    for (int J = 0; J < N && Merge; ++J)
      Merge = S.Strides[J][Rank - 1] == S.Strides[J][I] * S.Dims[I];
    if (Merge) {
      S.Dims[Rank - 1] *= S.Dims[I];
      for (int J = 0; J < N; ++J)
        S.Strides[J][Rank - 1] = S.Strides[J][I];
      continue;
    }
    S.Dims[Rank] = S.Dims[I];
    for (int J = 0; J < N; ++J)
      S.Strides[J][Rank] = S.Strides[J][I];
    ++Rank;
  }
  S.Rank = Rank;
}

/// Calls Body(Offsets) for every index of S in row-major order, where
/// Offsets[J] is Base[J] plus operand J's element offset.
template <int N, typename F>
void forEachIndexFrom(LoopSpace<N> S, const int64_t (&Base)[N], F &&Body) {
  coalesce(S);
  for (int I = 0; I < S.Rank; ++I)
    if (S.Dims[I] == 0)
      return;
  int64_t Offsets[N];
  for (int J = 0; J < N; ++J)
    Offsets[J] = Base[J];
  if (S.Rank == 0) {
    Body(static_cast<const int64_t *>(Offsets));
    return;
  }
  int Inner = S.Rank - 1;
  int64_t Index[MaxRank] = {};
  for (;;) {
    for (int64_t K = 0; K < S.Dims[Inner]; ++K) {
      Body(static_cast<const int64_t *>(Offsets));
      for (int J = 0; J < N; ++J)
        Offsets[J] += S.Strides[J][Inner];
    }
    for (int J = 0; J < N; ++J)
      Offsets[J] -= S.Strides[J][Inner] * S.Dims[Inner];
    int D = Inner - 1;
    for (; D >= 0; --D) {
      for (int J = 0; J < N; ++J)
        Offsets[J] += S.Strides[J][D];
      if (++Index[D] < S.Dims[D])
        break;
      for (int J = 0; J < N; ++J)
        Offsets[J] -= S.Strides[J][D] * S.Dims[D];
      Index[D] = 0;
    }
    if (D < 0)
      return;
  }
}

/// Calls Body(Offsets) for every index of S in row-major order, where
/// Offsets[J] is operand J's element offset. Serial: kernels that add into
/// stride-0 dims (broadcast reductions) rely on it.
template <int N, typename F>
void forEachIndex(const LoopSpace<N> &S, F &&Body) {
  const int64_t Base[N] = {};
  forEachIndexFrom(S, Base, Body);
}

/// forEachIndex with the outermost (coalesced) dim split between threads
/// when the space is large (Parallel.h). Body runs concurrently: only for
/// spaces where distinct indices write distinct elements (no written
/// operand has a stride-0 dim) and Body keeps no shared mutable state.
template <int N, typename F>
void forEachIndexParallel(LoopSpace<N> S, F &&Body) {
  coalesce(S);
  int64_t Total = 1;
  for (int I = 0; I < S.Rank; ++I)
    Total *= S.Dims[I];
  if (S.Rank == 0 || Total < SerialGrain)
    return forEachIndex(S, Body);
  int64_t Outer = S.Dims[0];
  parallelChunks(Outer, Total / Outer, [&](int64_t Begin, int64_t End) {
    LoopSpace<N> Part = S;
    Part.Dims[0] = End - Begin;
    int64_t Base[N];
    for (int J = 0; J < N; ++J)
      Base[J] = Begin * S.Strides[J][0];
    forEachIndexFrom(Part, Base, Body);
  });
}

} // namespace onnx2soap::rt::cpu

#endif
