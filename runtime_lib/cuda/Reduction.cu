//===- runtime_lib/cuda/Reduction.cu - Softmax and reductions -------------===//
//
// CUDA twins of runtime_lib/cpu/Reduction.cpp. Softmax works on lanes: X
// viewed as [Outer, Axis, Inner], one lane per (outer, inner) pair; a block
// reduces a lane when the axis is the innermost dim (contiguous rows), one
// thread walks a lane otherwise (neighbouring threads then read
// neighbouring elements). Statistics are kept in double as on the CPU.
// Backward recomputes the softmax from X rather than reading the forward
// output. ReduceMean / ReduceSum are the strided reduction of
// KernelSupport.cuh; their backward broadcasts the output gradient back.
// ReduceMax / ReduceMin keep the CPU kernel's rule for NaN and share each
// output's gradient evenly among the inputs equal to it.
//
//===----------------------------------------------------------------------===//
#include "KernelSupport.cuh"
#include "NormalizationKernels.cuh"
#include <algorithm>
#include <type_traits>
#include <vector>

namespace onnx2soap::rt::cuda {
using namespace support;
namespace {

const TensorView &operand(const OpCall &Call, const Views &Vs, size_t I,
                          const char *What) {
  if (I >= Vs.size() || !Vs[I].present())
    failOp(Call, std::string("missing ") + What);
  requireContiguous(Call, Vs[I], What);
  return Vs[I];
}

TensorView gradientAt(const OpCall &Call, const Views &Vs, size_t I,
                      const TensorView &Like, const char *What) {
  if (I >= Vs.size() || !Vs[I].present())
    return TensorView::absent();
  requireContiguous(Call, Vs[I], What);
  requireType(Call, Vs[I], Like.Type, What);
  if (Vs[I].numElements() != Like.numElements())
    failOp(Call, std::string(What) + " does not match its tensor's shape");
  return Vs[I];
}

//===-- Softmax, LogSoftmax -----------------------------------------------===//

struct Lanes {
  int64_t Outer = 1, Axis = 1, Inner = 1;
};

Lanes softmaxLanes(const OpCall &Call, const TensorView &X) {
  int64_t Axis = Call.Attrs.getInt("axis");
  if (Axis < 0 || Axis >= X.Rank)
    failOp(Call, "axis " + std::to_string(Axis) + " is out of range");
  Lanes L;
  for (int I = 0; I < X.Rank; ++I)
    (I < Axis ? L.Outer : I == Axis ? L.Axis : L.Inner) *= X.Dims[I];
  return L;
}

/// The lanes this thread (Block: this thread's block) works on, and its
/// first element and step within a lane.
template <bool Block> struct LaneLoop {
  __device__ static int64_t first() {
    return Block ? blockIdx.x : blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  }
  __device__ static int64_t step() {
    return Block ? gridDim.x : int64_t(gridDim.x) * blockDim.x;
  }
  __device__ static int64_t start() { return Block ? threadIdx.x : 0; }
  __device__ static int64_t stride() { return Block ? blockDim.x : 1; }
};

/// log(sum(exp(x))) of a lane.
template <typename T, bool Block>
__device__ double laneLogSum(const T *In, int64_t Stride, int64_t Count) {
  using Loop = LaneLoop<Block>;
  double Max = -INFINITY;
  for (int64_t A = Loop::start(); A < Count; A += Loop::stride())
    Max = max(Max, static_cast<double>(In[A * Stride]));
  if constexpr (Block)
    Max = blockMax(Max);
  double Sum = 0;
  for (int64_t A = Loop::start(); A < Count; A += Loop::stride())
    Sum += exp(In[A * Stride] - Max);
  if constexpr (Block)
    Sum = blockSum(Sum);
  return Max + log(Sum);
}

template <typename T, bool Block>
__global__ void softmaxForwardKernel(Lanes L, const T *X, T *Y, bool Log) {
  using Loop = LaneLoop<Block>;
  int64_t Count = L.Outer * L.Inner;
  for (int64_t Lane = Loop::first(); Lane < Count; Lane += Loop::step()) {
    int64_t Base = (Lane / L.Inner) * L.Axis * L.Inner + Lane % L.Inner;
    const T *In = X + Base;
    T *Out = Y + Base;
    double LogSum = laneLogSum<T, Block>(In, L.Inner, L.Axis);
    for (int64_t A = Loop::start(); A < L.Axis; A += Loop::stride()) {
      double V = In[A * L.Inner] - LogSum;
      Out[A * L.Inner] = static_cast<T>(Log ? V : exp(V));
    }
  }
}

template <typename T, bool Block>
__global__ void softmaxBackwardKernel(Lanes L, const T *X, const T *GY, T *DX,
                                      bool Log) {
  using Loop = LaneLoop<Block>;
  int64_t Count = L.Outer * L.Inner;
  for (int64_t Lane = Loop::first(); Lane < Count; Lane += Loop::step()) {
    int64_t Base = (Lane / L.Inner) * L.Axis * L.Inner + Lane % L.Inner;
    const T *In = X + Base, *G = GY + Base;
    T *D = DX + Base;
    double LogSum = laneLogSum<T, Block>(In, L.Inner, L.Axis);
    // Softmax: dx = y (g - sum g y). LogSoftmax: dx = g - softmax sum g.
    double Sum = 0;
    for (int64_t A = Loop::start(); A < L.Axis; A += Loop::stride()) {
      double Gv = G[A * L.Inner];
      Sum += Log ? Gv : Gv * exp(In[A * L.Inner] - LogSum);
    }
    if constexpr (Block)
      Sum = blockSum(Sum);
    for (int64_t A = Loop::start(); A < L.Axis; A += Loop::stride()) {
      double Gv = G[A * L.Inner], P = exp(In[A * L.Inner] - LogSum);
      D[A * L.Inner] += static_cast<T>(Log ? Gv - P * Sum : P * (Gv - Sum));
    }
  }
}

/// Blocks for one block per lane, or threads for one thread per lane.
bool blockPerLane(const Lanes &L) { return L.Inner == 1 && L.Axis >= 64; }

unsigned laneGrid(const Lanes &L) {
  int64_t Count = L.Outer * L.Inner;
  return blockPerLane(L)
             ? static_cast<unsigned>(std::min<int64_t>(Count, 65535 * 8))
             : blocksFor(Count);
}

//===-- ReduceMean, ReduceSum ---------------------------------------------===//

/// The reduction of X into Y, and for each input dim the stride of its
/// output position (0 where reduced).
struct Reduction {
  ReducePlan Plan;
  int64_t OutStrides[MaxRank] = {};
  int64_t Reduced = 1;
};

Reduction reduction(const OpCall &Call, const TensorView &X,
                    const TensorView &Y) {
  const std::vector<int64_t> &Axes = Call.Attrs.getInts("axes");
  std::vector<bool> IsReduced(X.Rank, false);
  for (int64_t A : Axes) {
    if (A < 0 || A >= X.Rank)
      failOp(Call, "axis " + std::to_string(A) + " is out of range");
    IsReduced[A] = true;
  }
  Reduction R;
  int64_t OutCount = 1;
  for (int I = X.Rank - 1; I >= 0; --I) {
    if (IsReduced[I]) {
      R.Reduced *= X.Dims[I];
      continue;
    }
    R.OutStrides[I] = OutCount;
    OutCount *= X.Dims[I];
  }
  if (Y.numElements() != OutCount)
    failOp(Call, "output has " + std::to_string(Y.numElements()) +
                     " elements, the reduction gives " +
                     std::to_string(OutCount));
  int64_t Stride = 1, XStrides[MaxRank];
  for (int I = X.Rank - 1; I >= 0; --I) {
    XStrides[I] = Stride;
    Stride *= X.Dims[I];
  }
  for (int I = 0; I < X.Rank; ++I) {
    if (IsReduced[I])
      R.Plan.reduce(X.Dims[I], XStrides[I]);
    else
      R.Plan.keep(X.Dims[I], XStrides[I], R.OutStrides[I]);
  }
  return R;
}

struct Broadcast {
  int Rank = 0;
  int64_t Dims[MaxRank] = {}, OutStrides[MaxRank] = {};
};

template <typename T>
__global__ void reduceBackwardKernel(Broadcast B, int64_t Count, const T *G,
                                     T *D, double Scale) {
  for (int64_t I = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; I < Count;
       I += int64_t(gridDim.x) * blockDim.x)
    D[I] +=
        static_cast<T>(G[offsetOf(I, B.Rank, B.Dims, B.OutStrides)] * Scale);
}

template <typename T, typename Acc>
void reduceForward(Context &C, const OpCall &Call) {
  const TensorView &X = operand(Call, Call.Inputs, 0, "input");
  const TensorView &Y = operand(Call, Call.Outputs, 0, "output");
  requireType(Call, Y, X.Type, "output");
  Reduction R = reduction(Call, X, Y);
  stridedReduce<T, T, Acc>(C, Call, R.Plan, X.as<T>(), Y.as<T>(), false,
                           Call.Kind == OpKind::ReduceMean);
}

//===-- ReduceMax, ReduceMin ----------------------------------------------===//

/// Whether V replaces Best as the running extreme (the CPU kernel's rule):
/// larger for ReduceMax, smaller for ReduceMin; a NaN replaces anything and
/// nothing replaces a NaN.
template <typename T> __device__ bool replaces(T V, T Best, bool Max) {
  if constexpr (std::is_floating_point_v<T>) {
    if (isnan(Best))
      return false;
    if (isnan(V))
      return true;
  }
  return Max ? V > Best : V < Best;
}

/// The extreme of output O's inputs seen by this thread: all of them
/// (First 0, Step 1) or every Step-th from First; Found false when none.
template <typename T>
__device__ T threadExtreme(const ReducePlan &P, const T *X, int64_t Base,
                           int64_t First, int64_t Step, bool Max, bool &Found) {
  T Best{};
  Found = false;
  for (int64_t R = First; R < P.reducedCount(); R += Step) {
    T V = X[Base + offsetOf(R, P.RedRank, P.RedDims, P.RedSrc)];
    if (!Found || replaces(V, Best, Max)) {
      Best = V;
      Found = true;
    }
  }
  return Best;
}

/// The extreme over the block of each thread's (Best, Found); every thread
/// gets it. A fixed tree, so deterministic.
template <typename T> __device__ T blockExtreme(T Best, bool Found, bool Max) {
  __shared__ T Values[ThreadsPerBlock];
  __shared__ bool Seen[ThreadsPerBlock];
  Values[threadIdx.x] = Best;
  Seen[threadIdx.x] = Found;
  __syncthreads();
  for (int Half = ThreadsPerBlock / 2; Half > 0; Half /= 2) {
    if (threadIdx.x < Half) {
      T Other = Values[threadIdx.x + Half];
      bool OtherSeen = Seen[threadIdx.x + Half];
      if (OtherSeen &&
          (!Seen[threadIdx.x] || replaces(Other, Values[threadIdx.x], Max))) {
        Values[threadIdx.x] = Other;
        Seen[threadIdx.x] = true;
      }
    }
    __syncthreads();
  }
  T Result = Values[0];
  __syncthreads(); // before a later call writes Values again
  return Result;
}

template <typename T, bool BlockPerOutput>
__global__ void extremeForwardKernel(ReducePlan P, const T *X, T *Y, bool Max) {
  int64_t Kept = P.keptCount();
  int64_t O = BlockPerOutput ? blockIdx.x
                             : blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  int64_t Stride =
      BlockPerOutput ? int64_t(gridDim.x) : int64_t(gridDim.x) * blockDim.x;
  for (; O < Kept; O += Stride) {
    int64_t Base = offsetOf(O, P.KeptRank, P.KeptDims, P.KeptSrc);
    bool Found;
    T Best = BlockPerOutput ? threadExtreme(P, X, Base, threadIdx.x, blockDim.x,
                                            Max, Found)
                            : threadExtreme(P, X, Base, 0, 1, Max, Found);
    if (BlockPerOutput)
      Best = blockExtreme(Best, Found, Max);
    if (!BlockPerOutput || threadIdx.x == 0)
      Y[offsetOf(O, P.KeptRank, P.KeptDims, P.KeptDst)] = Best;
  }
}

/// Each output's gradient, shared evenly by the inputs equal to its
/// extreme (recomputed from X).
template <typename T, bool BlockPerOutput>
__global__ void extremeBackwardKernel(ReducePlan P, const T *X, const T *G,
                                      T *D, bool Max) {
  int64_t Kept = P.keptCount(), Red = P.reducedCount();
  int64_t O = BlockPerOutput ? blockIdx.x
                             : blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  int64_t Stride =
      BlockPerOutput ? int64_t(gridDim.x) : int64_t(gridDim.x) * blockDim.x;
  int64_t First = BlockPerOutput ? threadIdx.x : 0;
  int64_t Step = BlockPerOutput ? blockDim.x : 1;
  for (; O < Kept; O += Stride) {
    int64_t Base = offsetOf(O, P.KeptRank, P.KeptDims, P.KeptSrc);
    bool Found;
    T Best = threadExtreme(P, X, Base, First, Step, Max, Found);
    if (BlockPerOutput)
      Best = blockExtreme(Best, Found, Max);
    long long Ties = 0;
    for (int64_t R = First; R < Red; R += Step)
      Ties += X[Base + offsetOf(R, P.RedRank, P.RedDims, P.RedSrc)] == Best;
    if (BlockPerOutput)
      Ties = blockSum(Ties);
    if (Ties == 0)
      continue; // a NaN extreme: no input equals it
    T Share = G[offsetOf(O, P.KeptRank, P.KeptDims, P.KeptDst)] /
              static_cast<T>(Ties);
    for (int64_t R = First; R < Red; R += Step) {
      int64_t I = Base + offsetOf(R, P.RedRank, P.RedDims, P.RedSrc);
      if (X[I] == Best)
        D[I] += Share;
    }
  }
}

/// Blocks for Kept outputs: one per output for long reductions (Red >= 512,
/// as the sums), else a thread per output.
bool extremeBlockPerOutput(const ReducePlan &P) {
  return P.reducedCount() >= 512;
}

unsigned extremeGrid(const ReducePlan &P) {
  return extremeBlockPerOutput(P) ? static_cast<unsigned>(std::min<int64_t>(
                                        P.keptCount(), 65535 * 8))
                                  : blocksFor(P.keptCount());
}

template <typename T> void extremeForward(Context &C, const OpCall &Call) {
  const TensorView &X = operand(Call, Call.Inputs, 0, "input");
  const TensorView &Y = operand(Call, Call.Outputs, 0, "output");
  requireType(Call, Y, X.Type, "output");
  Reduction R = reduction(Call, X, Y);
  if (R.Reduced == 0)
    failOp(Call, "reduces an empty set");
  if (R.Plan.keptCount() == 0)
    return;
  bool Max = Call.Kind == OpKind::ReduceMax;
  if (extremeBlockPerOutput(R.Plan))
    extremeForwardKernel<T, true>
        <<<extremeGrid(R.Plan), ThreadsPerBlock, 0, C.Stream>>>(
            R.Plan, X.as<T>(), Y.as<T>(), Max);
  else
    extremeForwardKernel<T, false>
        <<<extremeGrid(R.Plan), ThreadsPerBlock, 0, C.Stream>>>(
            R.Plan, X.as<T>(), Y.as<T>(), Max);
  checkLaunch(Call, "reduce max/min kernel");
}

} // namespace

void forwardReduceExtreme(Context &C, const OpCall &Call) {
  switch (operand(Call, Call.Inputs, 0, "input").Type) {
  case DType::Float32:
    return extremeForward<float>(C, Call);
  case DType::Float64:
    return extremeForward<double>(C, Call);
  case DType::Int32:
    return extremeForward<int32_t>(C, Call);
  case DType::Int64:
    return extremeForward<int64_t>(C, Call);
  default:
    failOp(Call, std::string("element type ") + dtypeName(Call.Inputs[0].Type) +
                     " is not supported, the CUDA kernel needs f32, f64, "
                     "i32 or i64");
  }
}

void backwardReduceExtreme(Context &C, const OpCall &Call,
                           const Views &OutputGrads, const Views &InputGrads) {
  const TensorView &X = operand(Call, Call.Inputs, 0, "input");
  dispatchFloat(Call, X.Type, "input", [&](auto Zero) {
    using T = decltype(Zero);
    TensorView DX = gradientAt(Call, InputGrads, 0, X, "input gradient");
    if (!DX.present() || OutputGrads.empty() || !OutputGrads[0].present())
      return;
    const TensorView &GY = operand(Call, OutputGrads, 0, "output gradient");
    requireType(Call, GY, X.Type, "output gradient");
    Reduction R = reduction(Call, X, GY);
    if (R.Plan.keptCount() == 0 || R.Reduced == 0)
      return;
    bool Max = Call.Kind == OpKind::ReduceMax;
    if (extremeBlockPerOutput(R.Plan))
      extremeBackwardKernel<T, true>
          <<<extremeGrid(R.Plan), ThreadsPerBlock, 0, C.Stream>>>(
              R.Plan, X.as<T>(), GY.as<T>(), DX.as<T>(), Max);
    else
      extremeBackwardKernel<T, false>
          <<<extremeGrid(R.Plan), ThreadsPerBlock, 0, C.Stream>>>(
              R.Plan, X.as<T>(), GY.as<T>(), DX.as<T>(), Max);
    checkLaunch(Call, "reduce max/min backward kernel");
  });
}

//===-- CumSum ------------------------------------------------------------===//

namespace {

/// A thread per lane scans it in order, as the CPU kernel does: floats sum
/// in double, integers in unsigned 64 bits (wrapping as the type does).
/// Accumulate adds the sums to Out (backward) rather than writing them.
template <typename T>
__global__ void cumSumKernel(Lanes L, const T *In, T *Out, bool Exclusive,
                             bool Reverse, bool Accumulate) {
  using Sum = std::conditional_t<std::is_floating_point_v<T>, double,
                                 unsigned long long>;
  int64_t Count = L.Outer * L.Inner;
  for (int64_t Lane = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
       Lane < Count; Lane += int64_t(gridDim.x) * blockDim.x) {
    int64_t Base = (Lane / L.Inner) * L.Axis * L.Inner + Lane % L.Inner;
    Sum Running = 0;
    for (int64_t K = 0; K < L.Axis; ++K) {
      int64_t At = Base + (Reverse ? L.Axis - 1 - K : K) * L.Inner;
      Sum Before = Running;
      Running += static_cast<Sum>(In[At]);
      T V = static_cast<T>(Exclusive ? Before : Running);
      Out[At] = Accumulate ? static_cast<T>(Out[At] + V) : V;
    }
  }
}

template <typename T>
void cumSum(Context &C, const OpCall &Call, const TensorView &X,
            const TensorView &Y, bool Reverse, bool Accumulate) {
  Lanes L = softmaxLanes(Call, X);
  if (X.numElements() == 0)
    return;
  bool Exclusive = Call.Attrs.getInt("exclusive", 0) != 0;
  cumSumKernel<T>
      <<<blocksFor(L.Outer * L.Inner), ThreadsPerBlock, 0, C.Stream>>>(
          L, X.as<T>(), Y.as<T>(), Exclusive, Reverse, Accumulate);
  checkLaunch(Call, Accumulate ? "cumsum backward kernel" : "cumsum kernel");
}

} // namespace

void forwardCumSum(Context &C, const OpCall &Call) {
  const TensorView &X = operand(Call, Call.Inputs, 0, "input");
  const TensorView &Y = operand(Call, Call.Outputs, 0, "output");
  requireType(Call, Y, X.Type, "output");
  if (Y.numElements() != X.numElements())
    failOp(Call, "output does not match the input's shape");
  bool Reverse = Call.Attrs.getInt("reverse", 0) != 0;
  switch (X.Type) {
  case DType::Float32:
    return cumSum<float>(C, Call, X, Y, Reverse, false);
  case DType::Float64:
    return cumSum<double>(C, Call, X, Y, Reverse, false);
  case DType::Int32:
    return cumSum<int32_t>(C, Call, X, Y, Reverse, false);
  case DType::Int64:
    return cumSum<int64_t>(C, Call, X, Y, Reverse, false);
  default:
    failOp(Call, std::string("element type ") + dtypeName(X.Type) +
                     " is not supported, the CUDA kernel needs f32, f64, "
                     "i32 or i64");
  }
}

void backwardCumSum(Context &C, const OpCall &Call, const Views &OutputGrads,
                    const Views &InputGrads) {
  const TensorView &X = operand(Call, Call.Inputs, 0, "input");
  dispatchFloat(Call, X.Type, "input", [&](auto Zero) {
    using T = decltype(Zero);
    TensorView DX = gradientAt(Call, InputGrads, 0, X, "input gradient");
    TensorView GY = gradientAt(Call, OutputGrads, 0, X, "output gradient");
    if (!DX.present() || !GY.present())
      return;
    // The gradient's cumulative sum the other way (see the CPU kernel).
    bool Reverse = Call.Attrs.getInt("reverse", 0) != 0;
    cumSum<T>(C, Call, GY, DX, !Reverse, true);
  });
}

void forwardSoftmax(Context &C, const OpCall &Call) {
  const TensorView &X = operand(Call, Call.Inputs, 0, "input");
  dispatchFloat(Call, X.Type, "input", [&](auto Zero) {
    using T = decltype(Zero);
    const TensorView &Y = operand(Call, Call.Outputs, 0, "output");
    requireType(Call, Y, X.Type, "output");
    if (Y.numElements() != X.numElements())
      failOp(Call, "output does not match the input's shape");
    Lanes L = softmaxLanes(Call, X);
    if (X.numElements() == 0)
      return;
    bool Log = Call.Kind == OpKind::LogSoftmax;
    if (blockPerLane(L))
      softmaxForwardKernel<T, true>
          <<<laneGrid(L), ThreadsPerBlock, 0, C.Stream>>>(L, X.as<T>(),
                                                          Y.as<T>(), Log);
    else
      softmaxForwardKernel<T, false>
          <<<laneGrid(L), ThreadsPerBlock, 0, C.Stream>>>(L, X.as<T>(),
                                                          Y.as<T>(), Log);
    checkLaunch(Call, "softmax kernel");
  });
}

void backwardSoftmax(Context &C, const OpCall &Call, const Views &OutputGrads,
                     const Views &InputGrads) {
  const TensorView &X = operand(Call, Call.Inputs, 0, "input");
  dispatchFloat(Call, X.Type, "input", [&](auto Zero) {
    using T = decltype(Zero);
    TensorView DX = gradientAt(Call, InputGrads, 0, X, "input gradient");
    TensorView GY = gradientAt(Call, OutputGrads, 0, X, "output gradient");
    if (!DX.present() || !GY.present())
      return;
    Lanes L = softmaxLanes(Call, X);
    if (X.numElements() == 0)
      return;
    bool Log = Call.Kind == OpKind::LogSoftmax;
    if (blockPerLane(L))
      softmaxBackwardKernel<T, true>
          <<<laneGrid(L), ThreadsPerBlock, 0, C.Stream>>>(
              L, X.as<T>(), GY.as<T>(), DX.as<T>(), Log);
    else
      softmaxBackwardKernel<T, false>
          <<<laneGrid(L), ThreadsPerBlock, 0, C.Stream>>>(
              L, X.as<T>(), GY.as<T>(), DX.as<T>(), Log);
    checkLaunch(Call, "softmax backward kernel");
  });
}

void forwardReduce(Context &C, const OpCall &Call) {
  switch (operand(Call, Call.Inputs, 0, "input").Type) {
  case DType::Float32:
    return reduceForward<float, double>(C, Call);
  case DType::Float64:
    return reduceForward<double, double>(C, Call);
  case DType::Int32:
    return reduceForward<int32_t, long long>(C, Call);
  case DType::Int64:
    return reduceForward<int64_t, long long>(C, Call);
  default:
    failOp(Call, std::string("element type ") + dtypeName(Call.Inputs[0].Type) +
                     " is not supported, the CUDA kernel needs f32, f64, "
                     "i32 or i64");
  }
}

void backwardReduce(Context &C, const OpCall &Call, const Views &OutputGrads,
                    const Views &InputGrads) {
  const TensorView &X = operand(Call, Call.Inputs, 0, "input");
  dispatchFloat(Call, X.Type, "input", [&](auto Zero) {
    using T = decltype(Zero);
    TensorView DX = gradientAt(Call, InputGrads, 0, X, "input gradient");
    if (!DX.present() || OutputGrads.empty() || !OutputGrads[0].present())
      return;
    const TensorView &GY = operand(Call, OutputGrads, 0, "output gradient");
    requireType(Call, GY, X.Type, "output gradient");
    Reduction R = reduction(Call, X, GY);
    double Scale = Call.Kind == OpKind::ReduceMean && R.Reduced
                       ? 1.0 / static_cast<double>(R.Reduced)
                       : 1.0;
    Broadcast B;
    B.Rank = X.Rank;
    for (int I = 0; I < X.Rank; ++I) {
      B.Dims[I] = X.Dims[I];
      B.OutStrides[I] = R.OutStrides[I];
    }
    int64_t Count = X.numElements();
    if (Count == 0)
      return;
    reduceBackwardKernel<T><<<blocksFor(Count), ThreadsPerBlock, 0, C.Stream>>>(
        B, Count, GY.as<T>(), DX.as<T>(), Scale);
    checkLaunch(Call, "reduce backward kernel");
  });
}

} // namespace onnx2soap::rt::cuda
