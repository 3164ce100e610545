//===- runtime_lib/cuda/Pool.cu - MaxPool, AveragePool, global pools ------===//
//
// The CUDA twin of runtime_lib/cpu/Pool.cpp (same checks, same messages).
// Windowed pools run on cuDNN's pooling where it expresses the IR's
// geometry: no dilation, and a symmetric pad equal to the begin pad whose
// floor-mode output size is the IR's (ceil mode often is, asymmetric pads
// sometimes are); AveragePool with count_include_pad also needs every
// window inside the attribute's padding, as cuDNN divides by the whole
// kernel. Everything else (dilation, asymmetric pads, ceil-mode windows
// past the end padding) runs on direct kernels with the CPU loops' rule:
// a max skips taps in padding, an average divides by the taps inside the
// input (exclude pad) or inside the padded input (include pad).
//
// Backward accumulates into dX: averages on cuDNN with beta = 1 where it
// pools; max pooling always, and averages elsewhere, on the direct
// backward, which gathers, one thread per input element over the windows
// that contain it, from the output gradient (and, for max, a per-output
// argmax computed first), so no atomics are needed and the result is
// deterministic. Ties in a max window go to the first tap, as on the CPU
// and in PyTorch; cuDNN does not say where it sends them, and a pool split
// over space would run its inner parts on cuDNN and its edges here. Global
// pools are warp-per-plane reductions.
//
//===----------------------------------------------------------------------===//
#include "ContractionCommon.cuh"
#include <algorithm>
#include <cfloat>
#include <climits>

namespace onnx2soap::rt::cuda {
using namespace contraction;

namespace {

void checkOperands(const OpCall &Call) {
  if (Call.Inputs.size() != 1 || Call.Outputs.size() != 1)
    failOp(Call, "expects one input and one output");
  const TensorView &X = Call.Inputs[0], &Y = Call.Outputs[0];
  requireDenseF32(Call, X, "input X");
  requireDenseF32(Call, Y, "output Y");
  if (X.Rank < 3 || Y.Rank != X.Rank || Y.Dims[0] != X.Dims[0] ||
      Y.Dims[1] != X.Dims[1])
    failOp(Call, "input " + formatDims(X) + " and output " + formatDims(Y) +
                     " must both be [N,C,spatial...] with equal N and C");
}

/// Returns the output gradient, or an absent view when there is nothing to
/// do; checks the input gradient.
TensorView backwardOperands(const OpCall &Call, const Views &OutputGrads,
                            const Views &InputGrads) {
  checkOperands(Call);
  if (OutputGrads.empty() || !OutputGrads[0].present() || InputGrads.empty() ||
      !InputGrads[0].present())
    return TensorView();
  requireDenseF32(Call, OutputGrads[0], "output gradient");
  requireDenseF32(Call, InputGrads[0], "input gradient");
  if (OutputGrads[0].numElements() != Call.Outputs[0].numElements() ||
      InputGrads[0].numElements() != Call.Inputs[0].numElements())
    failOp(Call, "gradient shapes do not match the operands");
  return OutputGrads[0];
}

//===-- Windowed pools ----------------------------------------------------===//

enum class PoolMode : int { Max, AverageExcludePad, AverageIncludePad };

/// The window geometry over [Planes, D, H, W] (fewer spatial dims padded
/// with leading unit dims), passed to the direct kernels by value.
struct Geometry {
  PoolMode Mode = PoolMode::Max;
  int64_t Planes = 1;
  int64_t In[3] = {1, 1, 1}, Out[3] = {1, 1, 1}, Kernel[3] = {1, 1, 1},
          Stride[3] = {1, 1, 1}, Dilation[3] = {1, 1, 1},
          PadBegin[3] = {0, 0, 0};
  /// In + the attribute's end pad: include-pad averages count taps below.
  int64_t Limit[3] = {1, 1, 1};
};

struct PoolSetup {
  Geometry G;
  size_t Spatial = 0;
  /// Whether cuDNN's pooling computes exactly this geometry.
  bool UseCudnn = true;
};

PoolSetup setupPool(const OpCall &Call) {
  checkOperands(Call);
  const TensorView &X = Call.Inputs[0], &Y = Call.Outputs[0];
  if (X.Rank > 5)
    failOp(Call, "supports 1 to 3 spatial dims, input is " + formatDims(X));
  size_t Spatial = X.Rank - 2;
  PoolSetup S;
  S.Spatial = Spatial;
  bool Max = Call.Kind == OpKind::MaxPool;
  bool IncludePad = !Max && Call.Attrs.getInt("count_include_pad") != 0;
  S.G.Mode = Max          ? PoolMode::Max
             : IncludePad ? PoolMode::AverageIncludePad
                          : PoolMode::AverageExcludePad;
  S.G.Planes = X.Dims[0] * X.Dims[1];
  auto Kernel = spatialAttr(Call, "kernel_shape", Spatial, 0);
  auto Strides = spatialAttr(Call, "strides", Spatial, 1);
  auto Dilations = spatialAttr(Call, "dilations", Spatial, 1);
  auto Pads = spatialAttr(Call, "pads", 2 * Spatial, 0);
  for (size_t I = 0; I < Spatial; ++I) {
    int64_t In = X.Dims[2 + I], Out = Y.Dims[2 + I];
    int64_t Stride = Strides[I], Begin = Pads[I], End = Pads[Spatial + I];
    if (Kernel[I] <= 0 || Stride <= 0 || Dilations[I] <= 0 || Begin < 0 ||
        End < 0)
      failOp(Call, "kernel_shape, strides and dilations must be positive, "
                   "pads non-negative");
    int64_t Extent = (Kernel[I] - 1) * Dilations[I] + 1;
    // Every window must start inside the input or its begin padding (what
    // the IR's ceil-mode correction guarantees) and end after the padding.
    if (Out <= 0 || (Out - 1) * Stride >= In + Begin || Extent <= Begin)
      failOp(Call, "output " + formatDims(Y) + " does not fit input " +
                       formatDims(X) + " and the window attributes");
    int64_t EndNeeded = (Out - 1) * Stride + Extent - In - Begin;
    size_t D = 3 - Spatial + I;
    S.G.In[D] = In;
    S.G.Out[D] = Out;
    S.G.Kernel[D] = Kernel[I];
    S.G.Stride[D] = Stride;
    S.G.Dilation[D] = Dilations[I];
    S.G.PadBegin[D] = Begin;
    S.G.Limit[D] = In + End;
    // cuDNN: symmetric pad Begin, floor output size; include-pad divides by
    // the kernel size, right only if no window passes the end pad.
    bool FloorFits = (In + 2 * Begin - Extent) / Stride + 1 == Out &&
                     In + 2 * Begin >= Extent;
    if (Dilations[I] != 1 || !FloorFits || (IncludePad && EndNeeded > End) ||
        In > INT_MAX || Kernel[I] > INT_MAX || Stride > INT_MAX)
      S.UseCudnn = false;
  }
  // cuDNN's descriptors hold 32-bit sizes and strides: a sample (or a
  // batch) past them runs on the direct kernels, which index in 64 bits.
  for (const TensorView *V : {&X, &Y}) {
    int64_t Sample = 1;
    for (int D = 1; D < V->Rank; ++D)
      Sample *= V->Dims[D];
    if (Sample > INT_MAX || V->Dims[0] > INT_MAX)
      S.UseCudnn = false;
  }
  return S;
}

/// Per spatial dim, how many taps of window O count in an average.
__device__ int64_t tapsCounted(const Geometry &G, int D, int64_t O) {
  int64_t Count = 0;
  for (int64_t K = 0; K < G.Kernel[D]; ++K) {
    int64_t P = O * G.Stride[D] - G.PadBegin[D] + K * G.Dilation[D];
    if (G.Mode == PoolMode::AverageIncludePad)
      Count += P < G.Limit[D];
    else
      Count += P >= 0 && P < G.In[D];
  }
  return Count;
}

__device__ double divisorOf(const Geometry &G, int64_t OD, int64_t OH,
                            int64_t OW) {
  return double(tapsCounted(G, 0, OD)) * double(tapsCounted(G, 1, OH)) *
         double(tapsCounted(G, 2, OW));
}

/// Forward: Y, and for max the in-plane index of each window's first
/// maximum (-1 for a window wholly in padding), when Arg is given.
__global__ void poolForwardKernel(const float *X, float *Y, int64_t *Arg,
                                  Geometry G) {
  int64_t OutPlane = G.Out[0] * G.Out[1] * G.Out[2];
  int64_t InPlane = G.In[0] * G.In[1] * G.In[2];
  int64_t Count = G.Planes * OutPlane;
  for (int64_t I = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; I < Count;
       I += int64_t(gridDim.x) * blockDim.x) {
    int64_t OW = I % G.Out[2], OH = (I / G.Out[2]) % G.Out[1],
            OD = (I / (G.Out[2] * G.Out[1])) % G.Out[0];
    const float *Plane = X + (I / OutPlane) * InPlane;
    float Best = -FLT_MAX;
    int64_t BestAt = -1;
    double Sum = 0;
    for (int64_t KD = 0; KD < G.Kernel[0]; ++KD) {
      int64_t PD = OD * G.Stride[0] - G.PadBegin[0] + KD * G.Dilation[0];
      if (PD < 0 || PD >= G.In[0])
        continue;
      for (int64_t KH = 0; KH < G.Kernel[1]; ++KH) {
        int64_t PH = OH * G.Stride[1] - G.PadBegin[1] + KH * G.Dilation[1];
        if (PH < 0 || PH >= G.In[1])
          continue;
        for (int64_t KW = 0; KW < G.Kernel[2]; ++KW) {
          int64_t PW = OW * G.Stride[2] - G.PadBegin[2] + KW * G.Dilation[2];
          if (PW < 0 || PW >= G.In[2])
            continue;
          int64_t At = (PD * G.In[1] + PH) * G.In[2] + PW;
          float V = Plane[At];
          if (G.Mode == PoolMode::Max) {
            if (BestAt < 0 || V > Best) {
              Best = V;
              BestAt = At;
            }
          } else {
            Sum += V;
          }
        }
      }
    }
    if (G.Mode == PoolMode::Max) {
      if (Y)
        Y[I] = Best;
      if (Arg)
        Arg[I] = BestAt;
    } else {
      double Divisor = divisorOf(G, OD, OH, OW);
      Y[I] = Divisor > 0 ? static_cast<float>(Sum / Divisor) : 0.0f;
    }
  }
}

/// Backward: dX[p] += the output gradients of the windows that take p
/// (for max: whose argmax is p; for averages: divided by the window's
/// divisor). One thread per input element visits each window once.
__global__ void poolBackwardKernel(const float *DY, const int64_t *Arg,
                                   float *DX, Geometry G) {
  int64_t OutPlane = G.Out[0] * G.Out[1] * G.Out[2];
  int64_t InPlane = G.In[0] * G.In[1] * G.In[2];
  int64_t Count = G.Planes * InPlane;
  for (int64_t I = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; I < Count;
       I += int64_t(gridDim.x) * blockDim.x) {
    int64_t At = I % InPlane;
    int64_t PW = At % G.In[2], PH = (At / G.In[2]) % G.In[1],
            PD = At / (G.In[2] * G.In[1]);
    int64_t Base = (I / InPlane) * OutPlane;
    float Sum = 0;
    for (int64_t KD = 0; KD < G.Kernel[0]; ++KD) {
      int64_t ND = PD + G.PadBegin[0] - KD * G.Dilation[0];
      if (ND < 0 || ND % G.Stride[0] != 0 || ND / G.Stride[0] >= G.Out[0])
        continue;
      int64_t OD = ND / G.Stride[0];
      for (int64_t KH = 0; KH < G.Kernel[1]; ++KH) {
        int64_t NH = PH + G.PadBegin[1] - KH * G.Dilation[1];
        if (NH < 0 || NH % G.Stride[1] != 0 || NH / G.Stride[1] >= G.Out[1])
          continue;
        int64_t OH = NH / G.Stride[1];
        for (int64_t KW = 0; KW < G.Kernel[2]; ++KW) {
          int64_t NW = PW + G.PadBegin[2] - KW * G.Dilation[2];
          if (NW < 0 || NW % G.Stride[2] != 0 || NW / G.Stride[2] >= G.Out[2])
            continue;
          int64_t OW = NW / G.Stride[2];
          int64_t O = Base + (OD * G.Out[1] + OH) * G.Out[2] + OW;
          if (G.Mode == PoolMode::Max) {
            if (Arg[O] == At)
              Sum += DY[O];
          } else {
            double Divisor = divisorOf(G, OD, OH, OW);
            if (Divisor > 0)
              Sum += static_cast<float>(DY[O] / Divisor);
          }
        }
      }
    }
    DX[I] += Sum;
  }
}

/// cuDNN's pooling and tensor descriptors of a call on its cuDNN path.
class PoolingDescs {
public:
  PoolingDescs(const OpCall &Call, const PoolSetup &S) : X(Call), Y(Call) {
    checkCudnn(Call, cudnnCreatePoolingDescriptor(&Pool),
               "cudnnCreatePoolingDescriptor");
    // cuDNN wants 2 or 3 spatial dims: 1-D keeps its leading unit dim.
    size_t Spatial = std::max<size_t>(S.Spatial, 2);
    size_t First = 3 - Spatial;
    int Window[3], Pad[3], Stride[3];
    const TensorView &In = Call.Inputs[0];
    std::vector<int64_t> XDims{In.Dims[0], In.Dims[1]}, YDims = XDims;
    for (size_t D = First; D < 3; ++D) {
      Window[D - First] = static_cast<int>(S.G.Kernel[D]);
      Pad[D - First] = static_cast<int>(S.G.PadBegin[D]);
      Stride[D - First] = static_cast<int>(S.G.Stride[D]);
      XDims.push_back(S.G.In[D]);
      YDims.push_back(S.G.Out[D]);
    }
    cudnnPoolingMode_t Mode = S.G.Mode == PoolMode::Max
                                  ? CUDNN_POOLING_MAX_DETERMINISTIC
                              : S.G.Mode == PoolMode::AverageIncludePad
                                  ? CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING
                                  : CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING;
    checkCudnn(Call,
               cudnnSetPoolingNdDescriptor(Pool, Mode, CUDNN_NOT_PROPAGATE_NAN,
                                           static_cast<int>(Spatial), Window,
                                           Pad, Stride),
               "cudnnSetPoolingNdDescriptor");
    X.set(Call, XDims);
    Y.set(Call, YDims);
  }
  PoolingDescs(const PoolingDescs &) = delete;
  PoolingDescs &operator=(const PoolingDescs &) = delete;
  ~PoolingDescs() { cudnnDestroyPoolingDescriptor(Pool); }

  cudnnPoolingDescriptor_t Pool = nullptr;
  TensorDesc X, Y;
};

int64_t outputCount(const Geometry &G) {
  return G.Planes * G.Out[0] * G.Out[1] * G.Out[2];
}

int64_t inputCount(const Geometry &G) {
  return G.Planes * G.In[0] * G.In[1] * G.In[2];
}

void forwardWindowPool(Context &C, const OpCall &Call) {
  PoolSetup S = setupPool(Call);
  const TensorView &X = Call.Inputs[0], &Y = Call.Outputs[0];
  if (Y.numElements() == 0)
    return;
  if (S.UseCudnn) {
    PoolingDescs D(Call, S);
    float Alpha = 1, Beta = 0;
    checkCudnn(Call,
               cudnnPoolingForward(C.Dnn, D.Pool, &Alpha, D.X, X.Data, &Beta,
                                   D.Y, Y.Data),
               "cudnnPoolingForward");
    return;
  }
  int64_t Count = outputCount(S.G);
  poolForwardKernel<<<gridFor(Count), 256, 0, C.Stream>>>(
      X.as<float>(), Y.as<float>(), nullptr, S.G);
  checkCuda(Call, cudaGetLastError(), "pooling forward kernel launch");
}

void backwardWindowPool(Context &C, const OpCall &Call,
                        const Views &OutputGrads, const Views &InputGrads) {
  TensorView DY = backwardOperands(Call, OutputGrads, InputGrads);
  if (!DY.present())
    return;
  PoolSetup S = setupPool(Call);
  const TensorView &X = Call.Inputs[0], &DX = InputGrads[0];
  if (DY.numElements() == 0 || X.numElements() == 0)
    return;
  bool Max = S.G.Mode == PoolMode::Max;
  // Averages through cuDNN, which ignores Y's values (the output view
  // stands in). Max pooling's gradient goes to the first maximum of each
  // window, as on the CPU and in PyTorch, which cuDNN does not promise
  // where values tie: our own kernels, on every geometry, so that a split
  // pool computes what the whole one does.
  if (S.UseCudnn && !Max) {
    PoolingDescs D(Call, S);
    float Alpha = 1, Beta = 1;
    const void *YData = Call.Outputs[0].Data;
    checkCudnn(Call,
               cudnnPoolingBackward(C.Dnn, D.Pool, &Alpha, D.Y, YData, D.Y,
                                    DY.Data, D.X, X.Data, &Beta, D.X, DX.Data),
               "cudnnPoolingBackward");
    return;
  }
  int64_t Outputs = outputCount(S.G);
  Scratch Arg(C, Call, Max ? Outputs * sizeof(int64_t) : 0);
  if (Max) {
    poolForwardKernel<<<gridFor(Outputs), 256, 0, C.Stream>>>(
        X.as<float>(), nullptr, Arg.as<int64_t>(), S.G);
    checkCuda(Call, cudaGetLastError(), "pooling argmax kernel launch");
  }
  poolBackwardKernel<<<gridFor(inputCount(S.G)), 256, 0, C.Stream>>>(
      DY.as<float>(), Arg.as<int64_t>(), DX.as<float>(), S.G);
  checkCuda(Call, cudaGetLastError(), "pooling backward kernel launch");
}

//===-- Global pools ------------------------------------------------------===//

/// Planes (N*C) and elements per plane of a global pool's input.
std::pair<int64_t, int64_t> globalExtent(const OpCall &Call) {
  checkOperands(Call);
  const TensorView &X = Call.Inputs[0], &Y = Call.Outputs[0];
  for (int I = 2; I < Y.Rank; ++I)
    if (Y.Dims[I] != 1)
      failOp(Call, "output " + formatDims(Y) + " must be [N,C,1...]");
  int64_t Planes = X.Dims[0] * X.Dims[1];
  int64_t Size = Planes ? X.numElements() / Planes : 0;
  if (Size == 0 && Planes != 0)
    failOp(Call, "input " + formatDims(X) + " has empty spatial dims");
  return {Planes, Size};
}

constexpr unsigned WarpsPerBlock = 8;

/// The first maximum of a plane, reduced across the warp (lane 0's result
/// is the plane's; ties go to the smaller index, as the CPU's scan does).
__device__ int64_t warpArgMax(const float *Plane, int64_t Size, float &Max) {
  unsigned Lane = threadIdx.x % 32;
  float Best = -INFINITY;
  int64_t BestAt = LLONG_MAX;
  for (int64_t I = Lane; I < Size; I += 32)
    if (BestAt == LLONG_MAX || Plane[I] > Best) {
      Best = Plane[I];
      BestAt = I;
    }
  for (unsigned Offset = 16; Offset > 0; Offset /= 2) {
    float OtherBest = __shfl_down_sync(0xffffffffu, Best, Offset);
    int64_t OtherAt = __shfl_down_sync(0xffffffffu, BestAt, Offset);
    bool Better =
        OtherAt != LLONG_MAX && (BestAt == LLONG_MAX || OtherBest > Best ||
                                 (OtherBest == Best && OtherAt < BestAt));
    if (Better) {
      Best = OtherBest;
      BestAt = OtherAt;
    }
  }
  Max = Best;
  return BestAt;
}

/// One warp per plane: Y = the plane's maximum or mean.
__global__ void globalPoolForwardKernel(const float *X, float *Y,
                                        int64_t Planes, int64_t Size,
                                        bool Max) {
  unsigned Lane = threadIdx.x % 32;
  for (int64_t P = blockIdx.x * int64_t(WarpsPerBlock) + threadIdx.x / 32;
       P < Planes; P += int64_t(gridDim.x) * WarpsPerBlock) {
    const float *Plane = X + P * Size;
    if (Max) {
      float Best;
      warpArgMax(Plane, Size, Best);
      if (Lane == 0)
        Y[P] = Best;
      continue;
    }
    double Sum = 0;
    for (int64_t I = Lane; I < Size; I += 32)
      Sum += Plane[I];
    for (unsigned Offset = 16; Offset > 0; Offset /= 2)
      Sum += __shfl_down_sync(0xffffffffu, Sum, Offset);
    if (Lane == 0)
      Y[P] = static_cast<float>(Sum / Size);
  }
}

/// GlobalMaxPool backward, one warp per plane: dX[argmax] += dY.
__global__ void globalMaxBackwardKernel(const float *X, const float *DY,
                                        float *DX, int64_t Planes,
                                        int64_t Size) {
  for (int64_t P = blockIdx.x * int64_t(WarpsPerBlock) + threadIdx.x / 32;
       P < Planes; P += int64_t(gridDim.x) * WarpsPerBlock) {
    float Best;
    int64_t At = warpArgMax(X + P * Size, Size, Best);
    if (threadIdx.x % 32 == 0)
      DX[P * Size + At] += DY[P];
  }
}

/// GlobalAveragePool backward: dX += dY / Size over each plane.
__global__ void globalAverageBackwardKernel(const float *DY, float *DX,
                                            int64_t Planes, int64_t Size) {
  for (int64_t I = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
       I < Planes * Size; I += int64_t(gridDim.x) * blockDim.x)
    DX[I] += DY[I / Size] / static_cast<float>(Size);
}

unsigned warpGridFor(int64_t Planes) {
  int64_t Blocks = (Planes + WarpsPerBlock - 1) / WarpsPerBlock;
  return static_cast<unsigned>(std::clamp<int64_t>(Blocks, 1, 65535));
}

void forwardGlobalPool(Context &C, const OpCall &Call) {
  auto [Planes, Size] = globalExtent(Call);
  if (Planes == 0)
    return;
  globalPoolForwardKernel<<<warpGridFor(Planes), WarpsPerBlock * 32, 0,
                            C.Stream>>>(
      Call.Inputs[0].as<float>(), Call.Outputs[0].as<float>(), Planes, Size,
      Call.Kind == OpKind::GlobalMaxPool);
  checkCuda(Call, cudaGetLastError(), "global pooling kernel launch");
}

void backwardGlobalPool(Context &C, const OpCall &Call,
                        const Views &OutputGrads, const Views &InputGrads) {
  TensorView DY = backwardOperands(Call, OutputGrads, InputGrads);
  if (!DY.present())
    return;
  auto [Planes, Size] = globalExtent(Call);
  if (Planes == 0)
    return;
  float *DX = InputGrads[0].as<float>();
  if (Call.Kind == OpKind::GlobalMaxPool)
    globalMaxBackwardKernel<<<warpGridFor(Planes), WarpsPerBlock * 32, 0,
                              C.Stream>>>(Call.Inputs[0].as<float>(),
                                          DY.as<float>(), DX, Planes, Size);
  else
    globalAverageBackwardKernel<<<gridFor(Planes * Size), 256, 0, C.Stream>>>(
        DY.as<float>(), DX, Planes, Size);
  checkCuda(Call, cudaGetLastError(), "global pooling backward kernel launch");
}

} // namespace

void forwardPool(Context &C, const OpCall &Call) {
  switch (Call.Kind) {
  case OpKind::MaxPool:
  case OpKind::AveragePool:
    return forwardWindowPool(C, Call);
  case OpKind::GlobalAveragePool:
  case OpKind::GlobalMaxPool:
    return forwardGlobalPool(C, Call);
  case OpKind::Resize:
    return forwardResize(C, Call);
  default:
    failOp(Call, "is not a pooling op");
  }
}

void backwardPool(Context &C, const OpCall &Call, const Views &OutputGrads,
                  const Views &InputGrads) {
  switch (Call.Kind) {
  case OpKind::MaxPool:
  case OpKind::AveragePool:
    return backwardWindowPool(C, Call, OutputGrads, InputGrads);
  case OpKind::GlobalAveragePool:
  case OpKind::GlobalMaxPool:
    return backwardGlobalPool(C, Call, OutputGrads, InputGrads);
  case OpKind::Resize:
    return backwardResize(C, Call, OutputGrads, InputGrads);
  default:
    failOp(Call, "is not a pooling op");
  }
}

} // namespace onnx2soap::rt::cuda
