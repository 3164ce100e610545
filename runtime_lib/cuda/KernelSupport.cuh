//===- runtime_lib/cuda/KernelSupport.cuh - Shared helpers -----*- CUDA -*-===//
//
// What the Normalization, Movement and Recurrent kernels share: launch
// geometry for grid-stride loops, stream-ordered scratch memory, block-wide
// sums, and a strided reduction (sum over a set of dims of a strided view
// into a dense output) that serves ReduceSum / ReduceMean forward and the
// backward of broadcasts (Expand, LayerNorm's broadcast scale and bias).
//
//===----------------------------------------------------------------------===//
#ifndef ONNX2SOAP_RUNTIME_CUDA_KERNELSUPPORT_CUH
#define ONNX2SOAP_RUNTIME_CUDA_KERNELSUPPORT_CUH

#include "CudaKernels.h"
#include <algorithm>
#include <cstdint>

namespace onnx2soap::rt::cuda::support {

constexpr int ThreadsPerBlock = 256;

/// Blocks for a grid-stride loop over Count elements (at least one; capped
/// so a huge tensor loops instead of launching a huge grid).
inline unsigned blocksFor(int64_t Count) {
  int64_t Blocks = (Count + ThreadsPerBlock - 1) / ThreadsPerBlock;
  return static_cast<unsigned>(std::clamp<int64_t>(Blocks, 1, 65535 * 8));
}

/// Checks the launch of the kernel just queued.
inline void checkLaunch(const OpCall &Call, const char *Kernel) {
  checkCuda(Call, cudaGetLastError(), Kernel);
}

/// Stream-ordered device scratch of Count elements of T, freed (stream
/// ordered too) when it goes out of scope, so kernels queued before the
/// free still see it.
template <typename T> class Scratch {
public:
  Scratch() = default;
  Scratch(const OpCall &Call, const Context &C, int64_t Count,
          bool Zero = false)
      : Stream(C.Stream) {
    size_t Bytes = std::max<int64_t>(Count, 1) * sizeof(T);
    checkCuda(
        Call,
        cudaMallocAsync(reinterpret_cast<void **>(&Pointer), Bytes, C.Stream),
        "cudaMallocAsync (scratch)");
    if (Zero)
      checkCuda(Call, cudaMemsetAsync(Pointer, 0, Bytes, C.Stream),
                "cudaMemsetAsync (scratch)");
  }
  Scratch(Scratch &&Other) noexcept { *this = std::move(Other); }
  Scratch &operator=(Scratch &&Other) noexcept {
    release();
    Pointer = Other.Pointer;
    Stream = Other.Stream;
    Other.Pointer = nullptr;
    return *this;
  }
  Scratch(const Scratch &) = delete;
  Scratch &operator=(const Scratch &) = delete;
  ~Scratch() { release(); }

  T *get() const { return Pointer; }

private:
  void release() {
    if (Pointer)
      cudaFreeAsync(Pointer, Stream); // a destructor cannot report failure
    Pointer = nullptr;
  }
  T *Pointer = nullptr;
  cudaStream_t Stream = nullptr;
};

/// Sum of V over the block (every thread gets it); blockDim.x must be a
/// multiple of 32 and at most 1024. The fixed reduction tree makes it
/// deterministic.
template <typename T> __device__ T blockSum(T V) {
  __shared__ T Partial[32];
  for (int Offset = 16; Offset > 0; Offset /= 2)
    V += __shfl_down_sync(0xffffffffu, V, Offset);
  int Lane = threadIdx.x % 32, Warp = threadIdx.x / 32;
  __syncthreads(); // Partial may still be read by a previous call
  if (Lane == 0)
    Partial[Warp] = V;
  __syncthreads();
  int Warps = blockDim.x / 32;
  V = Lane < Warps ? Partial[Lane] : T(0);
  if (Warp == 0)
    for (int Offset = 16; Offset > 0; Offset /= 2)
      V += __shfl_down_sync(0xffffffffu, V, Offset);
  if (threadIdx.x == 0)
    Partial[0] = V;
  __syncthreads();
  return Partial[0];
}

template <typename T> __device__ T blockMax(T V) {
  __shared__ T Partial[32];
  for (int Offset = 16; Offset > 0; Offset /= 2)
    V = max(V, __shfl_down_sync(0xffffffffu, V, Offset));
  int Lane = threadIdx.x % 32, Warp = threadIdx.x / 32;
  __syncthreads();
  if (Lane == 0)
    Partial[Warp] = V;
  __syncthreads();
  int Warps = blockDim.x / 32;
  V = Lane < Warps ? Partial[Lane] : -INFINITY;
  if (Warp == 0)
    for (int Offset = 16; Offset > 0; Offset /= 2)
      V = max(V, __shfl_down_sync(0xffffffffu, V, Offset));
  if (threadIdx.x == 0)
    Partial[0] = V;
  __syncthreads();
  return Partial[0];
}

/// Dst[o] (=|+=) sum over the reduced dims of Src, for every index o of the
/// kept dims: kept dim D walks Src by KeptSrc[D] and Dst by KeptDst[D];
/// reduced dim D walks Src by RedSrc[D].
struct ReducePlan {
  int KeptRank = 0, RedRank = 0;
  int64_t KeptDims[MaxRank] = {}, KeptSrc[MaxRank] = {}, KeptDst[MaxRank] = {};
  int64_t RedDims[MaxRank] = {}, RedSrc[MaxRank] = {};

  __host__ __device__ int64_t keptCount() const {
    int64_t N = 1;
    for (int I = 0; I < KeptRank; ++I)
      N *= KeptDims[I];
    return N;
  }
  __host__ __device__ int64_t reducedCount() const {
    int64_t N = 1;
    for (int I = 0; I < RedRank; ++I)
      N *= RedDims[I];
    return N;
  }
  void keep(int64_t Dim, int64_t Src, int64_t Dst) {
    KeptDims[KeptRank] = Dim;
    KeptSrc[KeptRank] = Src;
    KeptDst[KeptRank++] = Dst;
  }
  void reduce(int64_t Dim, int64_t Src) {
    RedDims[RedRank] = Dim;
    RedSrc[RedRank++] = Src;
  }
};

/// Offset of linear index I (row-major over Dims) through Strides.
__device__ inline int64_t offsetOf(int64_t I, int Rank, const int64_t *Dims,
                                   const int64_t *Strides) {
  int64_t Offset = 0;
  for (int D = Rank - 1; D >= 0; --D) {
    int64_t Q = I / Dims[D];
    Offset += (I - Q * Dims[D]) * Strides[D];
    I = Q;
  }
  return Offset;
}

/// Final value of a reduction: the sum, or the mean (integer division for
/// integer accumulators, as the CPU kernel does).
template <typename Acc>
__device__ Acc finishReduce(Acc Sum, int64_t Count, bool Mean) {
  return Mean && Count ? Sum / static_cast<Acc>(Count) : Sum;
}

/// One thread per output element: for short reductions.
template <typename In, typename Out, typename Acc>
__global__ void stridedReduceThreads(ReducePlan P, const In *Src, Out *Dst,
                                     bool Accumulate, bool Mean) {
  int64_t Kept = P.keptCount(), Red = P.reducedCount();
  for (int64_t O = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; O < Kept;
       O += int64_t(gridDim.x) * blockDim.x) {
    int64_t Base = offsetOf(O, P.KeptRank, P.KeptDims, P.KeptSrc);
    Acc Sum = 0;
    for (int64_t R = 0; R < Red; ++R)
      Sum += static_cast<Acc>(
          Src[Base + offsetOf(R, P.RedRank, P.RedDims, P.RedSrc)]);
    Out &D = Dst[offsetOf(O, P.KeptRank, P.KeptDims, P.KeptDst)];
    Out V = static_cast<Out>(finishReduce(Sum, Red, Mean));
    D = Accumulate ? static_cast<Out>(D + V) : V;
  }
}

/// One block per output element: for long reductions.
template <typename In, typename Out, typename Acc>
__global__ void stridedReduceBlocks(ReducePlan P, const In *Src, Out *Dst,
                                    bool Accumulate, bool Mean) {
  int64_t Kept = P.keptCount(), Red = P.reducedCount();
  for (int64_t O = blockIdx.x; O < Kept; O += gridDim.x) {
    int64_t Base = offsetOf(O, P.KeptRank, P.KeptDims, P.KeptSrc);
    Acc Sum = 0;
    for (int64_t R = threadIdx.x; R < Red; R += blockDim.x)
      Sum += static_cast<Acc>(
          Src[Base + offsetOf(R, P.RedRank, P.RedDims, P.RedSrc)]);
    Sum = blockSum(Sum);
    if (threadIdx.x == 0) {
      Out &D = Dst[offsetOf(O, P.KeptRank, P.KeptDims, P.KeptDst)];
      Out V = static_cast<Out>(finishReduce(Sum, Red, Mean));
      D = Accumulate ? static_cast<Out>(D + V) : V;
    }
  }
}

/// Queues the reduction of P on C's stream.
template <typename In, typename Out, typename Acc>
void stridedReduce(const Context &C, const OpCall &Call, const ReducePlan &P,
                   const In *Src, Out *Dst, bool Accumulate, bool Mean) {
  int64_t Kept = P.keptCount();
  if (Kept == 0)
    return;
  if (P.reducedCount() >= 512)
    stridedReduceBlocks<In, Out, Acc>
        <<<static_cast<unsigned>(std::min<int64_t>(Kept, 65535 * 8)),
           ThreadsPerBlock, 0, C.Stream>>>(P, Src, Dst, Accumulate, Mean);
  else
    stridedReduceThreads<In, Out, Acc>
        <<<blocksFor(Kept), ThreadsPerBlock, 0, C.Stream>>>(P, Src, Dst,
                                                            Accumulate, Mean);
  checkLaunch(Call, "strided reduction kernel");
}

/// Runs Fn(T{}) for a f32 or f64 element type, else fails naming What.
template <typename F>
void dispatchFloat(const OpCall &Call, DType Type, const char *What, F &&Fn) {
  if (Type == DType::Float32)
    return Fn(float{});
  if (Type == DType::Float64)
    return Fn(double{});
  failOp(Call, std::string(What) + " has element type " + dtypeName(Type) +
                   ", the CUDA kernel needs f32 or f64");
}

} // namespace onnx2soap::rt::cuda::support

#endif
