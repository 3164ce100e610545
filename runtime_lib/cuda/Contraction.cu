//===- runtime_lib/cuda/Contraction.cu - The contraction family -----------===//
//
// Dispatch of the CUDA contraction family (Conv, ConvTranspose, Gemm,
// MatMul) to Convolution.cu and MatMul.cu, mirroring
// runtime_lib/cpu/Contraction.cpp, and the helpers of ContractionCommon.cuh
// that the contraction and pooling kernels share.
//
//===----------------------------------------------------------------------===//
#include "ContractionCommon.cuh"
#include <algorithm>
#include <climits>

namespace onnx2soap::rt::cuda {

void forwardContraction(Context &C, const OpCall &Call) {
  switch (Call.Kind) {
  case OpKind::Conv:
    return forwardConv(C, Call, /*Transposed=*/false);
  case OpKind::ConvTranspose:
    return forwardConv(C, Call, /*Transposed=*/true);
  case OpKind::Gemm:
    return forwardGemm(C, Call);
  case OpKind::MatMul:
    return forwardMatMul(C, Call);
  default:
    failOp(Call, "is not a contraction op");
  }
}

void backwardContraction(Context &C, const OpCall &Call,
                         const Views &OutputGrads, const Views &InputGrads) {
  switch (Call.Kind) {
  case OpKind::Conv:
    return backwardConv(C, Call, false, OutputGrads, InputGrads);
  case OpKind::ConvTranspose:
    return backwardConv(C, Call, true, OutputGrads, InputGrads);
  case OpKind::Gemm:
    return backwardGemm(C, Call, OutputGrads, InputGrads);
  case OpKind::MatMul:
    return backwardMatMul(C, Call, OutputGrads, InputGrads);
  default:
    failOp(Call, "is not a contraction op");
  }
}

namespace contraction {

void TensorDesc::set(const OpCall &Call, const std::vector<int64_t> &Dims) {
  int Rank = static_cast<int>(Dims.size());
  int DimsInt[MaxRank], StridesInt[MaxRank];
  int64_t Stride = 1;
  for (int I = Rank; I-- > 0;) {
    if (Dims[I] > INT_MAX || Stride > INT_MAX)
      failOp(Call, "tensor " + formatDims(Dims) +
                       " is too large for cuDNN's 32-bit descriptors");
    DimsInt[I] = static_cast<int>(Dims[I]);
    StridesInt[I] = static_cast<int>(Stride);
    Stride *= std::max<int64_t>(Dims[I], 1);
  }
  checkCudnn(Call,
             cudnnSetTensorNdDescriptor(Desc, CUDNN_DATA_FLOAT, Rank, DimsInt,
                                        StridesInt),
             "cudnnSetTensorNdDescriptor");
}

std::string formatDims(const std::vector<int64_t> &Dims) {
  std::string S = "[";
  for (size_t I = 0; I < Dims.size(); ++I)
    S += (I ? "," : "") + std::to_string(Dims[I]);
  return S + "]";
}

std::string formatDims(const TensorView &V) { return formatDims(V.dims()); }

std::vector<int64_t> spatialAttr(const OpCall &Call, const char *Name,
                                 size_t Count, int64_t Default) {
  std::vector<int64_t> V = Call.Attrs.getInts(Name);
  if (V.empty())
    V.assign(Count, Default);
  if (V.size() != Count)
    failOp(Call, std::string("attribute '") + Name + "' has " +
                     std::to_string(V.size()) + " values, expected " +
                     std::to_string(Count));
  return V;
}

void requireDenseF32(const OpCall &Call, const TensorView &V,
                     const char *What) {
  if (!V.present())
    failOp(Call, std::string(What) + " is missing");
  requireType(Call, V, DType::Float32, What);
  requireContiguous(Call, V, What);
}

unsigned gridFor(int64_t Count, unsigned BlockSize) {
  // Grid-stride loops cover the rest; 65535 * 256 threads saturate any GPU.
  int64_t Blocks = (Count + BlockSize - 1) / BlockSize;
  return static_cast<unsigned>(std::clamp<int64_t>(Blocks, 1, 65535));
}

namespace {

struct ShiftParams {
  int64_t Planes;
  int64_t Src[3], Dst[3], Offset[3];
};

template <bool Accumulate>
__global__ void shiftCopyKernel(const float *Src, float *Dst, ShiftParams P) {
  int64_t DstPlane = P.Dst[0] * P.Dst[1] * P.Dst[2];
  int64_t Count = P.Planes * DstPlane;
  for (int64_t I = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; I < Count;
       I += int64_t(gridDim.x) * blockDim.x) {
    int64_t W = I % P.Dst[2];
    int64_t H = (I / P.Dst[2]) % P.Dst[1];
    int64_t D = (I / (P.Dst[2] * P.Dst[1])) % P.Dst[0];
    int64_t Plane = I / DstPlane;
    int64_t SD = D - P.Offset[0], SH = H - P.Offset[1], SW = W - P.Offset[2];
    bool Inside = SD >= 0 && SD < P.Src[0] && SH >= 0 && SH < P.Src[1] &&
                  SW >= 0 && SW < P.Src[2];
    float Value = 0;
    if (Inside)
      Value = Src[((Plane * P.Src[0] + SD) * P.Src[1] + SH) * P.Src[2] + SW];
    if (Accumulate)
      Dst[I] += Value;
    else
      Dst[I] = Value;
  }
}

/// Reduction layout: output element T has kept coordinates (decomposed over
/// KeptDims) and is summed over ReducedDims; strides are into Full.
struct ReduceParams {
  int KeptRank = 0, ReducedRank = 0;
  int64_t KeptDims[MaxRank], KeptStrides[MaxRank];
  int64_t ReducedDims[MaxRank], ReducedStrides[MaxRank];
  int64_t Outputs = 1, Reduced = 1;
  float Scale = 1;
};

__device__ int64_t offsetOf(int64_t Flat, int Rank, const int64_t *Dims,
                            const int64_t *Strides) {
  int64_t Offset = 0;
  for (int I = Rank; I-- > 0;) {
    Offset += (Flat % Dims[I]) * Strides[I];
    Flat /= Dims[I];
  }
  return Offset;
}

/// One thread per output element (few summands each).
__global__ void reduceByThreadKernel(const float *Full, float *Dst,
                                     ReduceParams P) {
  for (int64_t T = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
       T < P.Outputs; T += int64_t(gridDim.x) * blockDim.x) {
    int64_t Base = offsetOf(T, P.KeptRank, P.KeptDims, P.KeptStrides);
    double Sum = 0;
    for (int64_t R = 0; R < P.Reduced; ++R)
      Sum += Full[Base +
                  offsetOf(R, P.ReducedRank, P.ReducedDims, P.ReducedStrides)];
    Dst[T] += P.Scale * static_cast<float>(Sum);
  }
}

constexpr unsigned ReduceBlock = 256;

/// One block per output element (many summands each), a fixed-shape tree.
__global__ void reduceByBlockKernel(const float *Full, float *Dst,
                                    ReduceParams P) {
  __shared__ double Partial[ReduceBlock];
  for (int64_t T = blockIdx.x; T < P.Outputs; T += gridDim.x) {
    int64_t Base = offsetOf(T, P.KeptRank, P.KeptDims, P.KeptStrides);
    double Sum = 0;
    for (int64_t R = threadIdx.x; R < P.Reduced; R += blockDim.x)
      Sum += Full[Base +
                  offsetOf(R, P.ReducedRank, P.ReducedDims, P.ReducedStrides)];
    Partial[threadIdx.x] = Sum;
    __syncthreads();
    for (unsigned Half = blockDim.x / 2; Half > 0; Half /= 2) {
      if (threadIdx.x < Half)
        Partial[threadIdx.x] += Partial[threadIdx.x + Half];
      __syncthreads();
    }
    if (threadIdx.x == 0)
      Dst[T] += P.Scale * static_cast<float>(Partial[0]);
    __syncthreads();
  }
}

} // namespace

void shiftCopy(Context &C, const OpCall &Call, const float *Src,
               const PlaneShape &SrcShape, float *Dst,
               const PlaneShape &DstShape, const int64_t Offset[3],
               bool Accumulate) {
  ShiftParams P;
  P.Planes = DstShape.Planes;
  for (int I = 0; I < 3; ++I) {
    P.Src[I] = SrcShape.Spatial[I];
    P.Dst[I] = DstShape.Spatial[I];
    P.Offset[I] = Offset[I];
  }
  int64_t Count = P.Planes * DstShape.Spatial[0] * DstShape.Spatial[1] *
                  DstShape.Spatial[2];
  if (Count == 0)
    return;
  if (Accumulate)
    shiftCopyKernel<true><<<gridFor(Count), 256, 0, C.Stream>>>(Src, Dst, P);
  else
    shiftCopyKernel<false><<<gridFor(Count), 256, 0, C.Stream>>>(Src, Dst, P);
  checkCuda(Call, cudaGetLastError(), "shifted copy kernel launch");
}

void reduceBroadcastInto(Context &C, const OpCall &Call, const float *Full,
                         const std::vector<int64_t> &FullDims, float *Dst,
                         const std::vector<int64_t> &DstDims, float Scale) {
  if (FullDims.size() != DstDims.size() || FullDims.size() > size_t(MaxRank))
    failOp(Call, "cannot reduce " + formatDims(FullDims) + " to " +
                     formatDims(DstDims));
  ReduceParams P;
  P.Scale = Scale;
  int64_t Stride = 1;
  // Dims are collected innermost first, then reversed to outermost first.
  for (size_t I = FullDims.size(); I-- > 0;) {
    int64_t D = FullDims[I];
    if (DstDims[I] == D) {
      P.KeptDims[P.KeptRank] = D;
      P.KeptStrides[P.KeptRank++] = Stride;
      P.Outputs *= D;
    } else if (DstDims[I] == 1) {
      P.ReducedDims[P.ReducedRank] = D;
      P.ReducedStrides[P.ReducedRank++] = Stride;
      P.Reduced *= D;
    } else {
      failOp(Call, "cannot reduce " + formatDims(FullDims) + " to " +
                       formatDims(DstDims));
    }
    Stride *= D;
  }
  std::reverse(P.KeptDims, P.KeptDims + P.KeptRank);
  std::reverse(P.KeptStrides, P.KeptStrides + P.KeptRank);
  std::reverse(P.ReducedDims, P.ReducedDims + P.ReducedRank);
  std::reverse(P.ReducedStrides, P.ReducedStrides + P.ReducedRank);
  if (P.Outputs == 0 || P.Reduced == 0)
    return;
  // Many short sums: a thread each; few long ones: a block each.
  if (P.Reduced < 64 || P.Outputs >= 64 * 1024)
    reduceByThreadKernel<<<gridFor(P.Outputs), 256, 0, C.Stream>>>(Full, Dst,
                                                                   P);
  else
    reduceByBlockKernel<<<static_cast<unsigned>(
                              std::min<int64_t>(P.Outputs, 65535)),
                          ReduceBlock, 0, C.Stream>>>(Full, Dst, P);
  checkCuda(Call, cudaGetLastError(), "broadcast reduction kernel launch");
}

} // namespace contraction
} // namespace onnx2soap::rt::cuda
