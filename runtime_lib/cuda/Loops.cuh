//===- runtime_lib/cuda/Loops.cuh - Strided, broadcast loops ---*- CUDA -*-===//
//
// The iteration helpers of the CUDA loop kernels (elementwise, loss,
// optimizer), the twins of runtime_lib/cpu/Loops.h: numpy broadcasting of a
// view onto an output shape (stride 0 on broadcast dims), an index space
// walked by several operands with their own strides (unit dims dropped,
// mergeable dims coalesced), a grid-stride kernel over such a space, and the
// deterministic broadcast reduction of backward kernels.
//
// The reduction does not use atomics: the destination's index space is split
// into kept dims (destination stride != 0) and reduced dims (stride 0); each
// destination element is owned by one thread, which walks the reduced dims in
// row-major order (the CPU's order of additions), or, when there are few
// destination elements and much to reduce, by one block, which reduces in a
// fixed tree. Either way a run gives the same bits every time.
//
//===----------------------------------------------------------------------===//
#ifndef ONNX2SOAP_RUNTIME_CUDA_LOOPS_CUH
#define ONNX2SOAP_RUNTIME_CUDA_LOOPS_CUH

#include "CudaKernels.h"
#include <algorithm>
#include <array>
#include <cstdint>
#include <string>

// A namespace of its own: other families' private helpers may use the same
// names, and inline functions and templates of one name must not differ.
namespace onnx2soap::rt::cuda::loops {

constexpr int BlockSize = 256;

/// Blocks for a grid-stride loop over Count items (at least 1).
inline unsigned gridFor(int64_t Count) {
  int64_t Blocks = (Count + BlockSize - 1) / BlockSize;
  return static_cast<unsigned>(std::clamp<int64_t>(Blocks, 1, 65535));
}

/// Fails naming the op when the last kernel launch was rejected.
inline void checkLaunch(const OpCall &Call, const char *Kernel) {
  checkCuda(Call, cudaGetLastError(), Kernel);
}

/// Carries an element type through a generic lambda, as cpu::TypeTag.
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

/// Element strides of V broadcast (numpy rules) to Dims[0..Rank): 0 on
/// every repeated dim. False when V's shape does not broadcast to Dims.
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

/// An index space walked by N operands, each with its own strides. Passed
/// to kernels by value.
template <int N> struct LoopSpace {
  int Rank = 0;
  int64_t Dims[MaxRank] = {};
  int64_t Strides[N][MaxRank] = {};

  int64_t count() const {
    int64_t Count = 1;
    for (int I = 0; I < Rank; ++I)
      Count *= Dims[I];
    return Count;
  }
};

/// The index space of Out (operand 0) with Operands[1..N) broadcast onto it.
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

inline std::string shapeString(const TensorView &V) {
  std::string S = "[";
  for (int I = 0; I < V.Rank; ++I)
    S += (I ? "," : "") + std::to_string(V.Dims[I]);
  return S + "]";
}

/// The coalesced loop space of Out and Operands broadcast onto it, or
/// failOp naming the shapes.
template <int N>
LoopSpace<N> space(const OpCall &Call, const TensorView &Out,
                   const std::array<const TensorView *, N> &Operands) {
  LoopSpace<N> S;
  if (!broadcastSpace<N>(Out, Operands, S)) {
    std::string List;
    for (const TensorView *V : Operands)
      List += " " + shapeString(*V);
    failOp(Call, "operand shapes" + List + " do not broadcast to " +
                     shapeString(Out));
  }
  coalesce(S);
  return S;
}

/// Adds to Offsets[J] operand J's offset of the row-major Index of S.
template <int N>
__device__ inline void addOffsets(const LoopSpace<N> &S, int64_t Index,
                                  int64_t *Offsets) {
  for (int D = S.Rank - 1; D >= 0; --D) {
    int64_t I = Index % S.Dims[D];
    Index /= S.Dims[D];
    for (int J = 0; J < N; ++J)
      Offsets[J] += I * S.Strides[J][D];
  }
}

template <int N, typename F>
__global__ void forEachIndexKernel(LoopSpace<N> S, int64_t Count, F Body) {
  for (int64_t I = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; I < Count;
       I += int64_t(gridDim.x) * blockDim.x) {
    int64_t Offsets[N] = {};
    addOffsets(S, I, Offsets);
    Body(static_cast<const int64_t *>(Offsets));
  }
}

/// Calls Body(Offsets) on the device for every index of S, in parallel: no
/// two indices may write the same element.
template <int N, typename F>
void forEachIndex(Context &C, const OpCall &Call, const LoopSpace<N> &S,
                  F Body) {
  int64_t Count = S.count();
  if (Count == 0)
    return;
  forEachIndexKernel<N>
      <<<gridFor(Count), BlockSize, 0, C.Stream>>>(S, Count, Body);
  checkLaunch(Call, "elementwise loop kernel");
}

/// Calls Body(I) on the device for I in [0, Count).
template <typename F> __global__ void forEachKernel(int64_t Count, F Body) {
  for (int64_t I = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; I < Count;
       I += int64_t(gridDim.x) * blockDim.x)
    Body(I);
}

template <typename F>
void forEach(Context &C, const OpCall &Call, int64_t Count, F Body) {
  if (Count == 0)
    return;
  forEachKernel<<<gridFor(Count), BlockSize, 0, C.Stream>>>(Count, Body);
  checkLaunch(Call, "elementwise kernel");
}

//===-- Broadcast reduction -----------------------------------------------===//

/// A loop space split for a reduction into operand N-1 (the destination):
/// Kept holds the dims where the destination has a stride, Reduced those
/// where it has none.
template <int N> struct ReduceSpace {
  LoopSpace<N> Kept, Reduced;
  int64_t KeptCount = 1, ReducedCount = 1;
};

template <int N> ReduceSpace<N> splitReduced(const LoopSpace<N> &S) {
  ReduceSpace<N> R;
  for (int I = 0; I < S.Rank; ++I) {
    LoopSpace<N> &Part = S.Strides[N - 1][I] != 0 ? R.Kept : R.Reduced;
    Part.Dims[Part.Rank] = S.Dims[I];
    for (int J = 0; J < N; ++J)
      Part.Strides[J][Part.Rank] = S.Strides[J][I];
    ++Part.Rank;
  }
  R.KeptCount = R.Kept.count();
  R.ReducedCount = R.Reduced.count();
  return R;
}

/// One thread per destination element: Dst += Term over the reduced dims in
/// row-major order (an odometer, no divisions in the inner loop).
template <typename T, int N, typename F>
__global__ void reduceByThreadKernel(ReduceSpace<N> R, T *Dst, F Term) {
  for (int64_t K = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
       K < R.KeptCount; K += int64_t(gridDim.x) * blockDim.x) {
    int64_t Offsets[N] = {};
    addOffsets(R.Kept, K, Offsets);
    T Acc = Dst[Offsets[N - 1]];
    int64_t Index[MaxRank] = {};
    for (int64_t Step = 0; Step < R.ReducedCount; ++Step) {
      Acc += Term(static_cast<const int64_t *>(Offsets));
      for (int D = R.Reduced.Rank - 1; D >= 0; --D) {
        for (int J = 0; J < N; ++J)
          Offsets[J] += R.Reduced.Strides[J][D];
        if (++Index[D] < R.Reduced.Dims[D])
          break;
        for (int J = 0; J < N; ++J)
          Offsets[J] -= R.Reduced.Strides[J][D] * R.Reduced.Dims[D];
        Index[D] = 0;
      }
    }
    Dst[Offsets[N - 1]] = Acc;
  }
}

/// One block per destination element: each thread sums a strided share of
/// the reduced dims, then a fixed shared-memory tree adds the shares.
template <typename T, int N, typename F>
__global__ void reduceByBlockKernel(ReduceSpace<N> R, T *Dst, F Term) {
  __shared__ T Partial[BlockSize];
  for (int64_t K = blockIdx.x; K < R.KeptCount; K += gridDim.x) {
    int64_t Base[N] = {};
    addOffsets(R.Kept, K, Base);
    T Acc = T(0);
    for (int64_t I = threadIdx.x; I < R.ReducedCount; I += blockDim.x) {
      int64_t Offsets[N];
      for (int J = 0; J < N; ++J)
        Offsets[J] = Base[J];
      addOffsets(R.Reduced, I, Offsets);
      Acc += Term(static_cast<const int64_t *>(Offsets));
    }
    Partial[threadIdx.x] = Acc;
    __syncthreads();
    for (int Width = BlockSize / 2; Width > 0; Width /= 2) {
      if (threadIdx.x < Width)
        Partial[threadIdx.x] += Partial[threadIdx.x + Width];
      __syncthreads();
    }
    if (threadIdx.x == 0)
      Dst[Base[N - 1]] += Partial[0];
    __syncthreads(); // Partial is reused by the next destination element
  }
}

/// Dst (operand N-1 of S, stride 0 on broadcast dims) += the sum of
/// Term(Offsets) over every index of S that maps to each of its elements.
/// Term sees the offsets of all N operands.
template <typename T, int N, typename F>
void reduceInto(Context &C, const OpCall &Call, const LoopSpace<N> &S, T *Dst,
                F Term) {
  if (S.count() == 0)
    return;
  ReduceSpace<N> R = splitReduced(S);
  // A block per element pays off when there are too few elements to fill
  // the GPU with threads and each has a long sum to do.
  if (R.ReducedCount >= 64 && R.KeptCount < 16384) {
    unsigned Blocks =
        static_cast<unsigned>(std::min<int64_t>(R.KeptCount, 65535));
    reduceByBlockKernel<T, N><<<Blocks, BlockSize, 0, C.Stream>>>(R, Dst, Term);
  } else {
    reduceByThreadKernel<T, N>
        <<<gridFor(R.KeptCount), BlockSize, 0, C.Stream>>>(R, Dst, Term);
  }
  checkLaunch(Call, "broadcast reduction kernel");
}

/// Device scratch memory on the stream, freed (stream-ordered) on scope exit.
class Scratch {
public:
  Scratch(Context &C, const OpCall &Call, size_t Bytes) : C(C) {
    checkCuda(Call,
              cudaMallocAsync(&Pointer, std::max<size_t>(Bytes, 1), C.Stream),
              "cudaMallocAsync (scratch)");
  }
  Scratch(const Scratch &) = delete;
  Scratch &operator=(const Scratch &) = delete;
  ~Scratch() { cudaFreeAsync(Pointer, C.Stream); }
  template <typename T> T *as() const { return static_cast<T *>(Pointer); }

private:
  Context &C;
  void *Pointer = nullptr;
};

} // namespace onnx2soap::rt::cuda::loops

#endif
