//===- runtime_lib/cuda/Normalization.cu - Norms, softmax, reductions -----===//
//
// CUDA twins of runtime_lib/cpu/Normalization.cpp: LayerNorm as own
// kernels (BatchNorm is in BatchNorm.cu, softmax and reductions in
// Reduction.cu). Own kernels rather than cuDNN for the CPU kernel's
// reasons: every output may carry a gradient (LayerNorm's Mean and
// InvStdDev) and LayerNorm's scale may broadcast. f32 or f64; statistics
// accumulate in double in block-wide reductions (one block per row), so
// results are deterministic. Backward recomputes the statistics from the
// inputs, as the CPU kernel does.
//
//===----------------------------------------------------------------------===//
#include "KernelSupport.cuh"
#include "NormalizationKernels.cuh"
#include <vector>

namespace onnx2soap::rt::cuda {
using namespace support;
namespace {

const TensorView &inputAt(const OpCall &Call, size_t I, const char *What) {
  if (I >= Call.Inputs.size() || !Call.Inputs[I].present())
    failOp(Call, std::string("missing input ") + What);
  requireContiguous(Call, Call.Inputs[I], What);
  return Call.Inputs[I];
}

const TensorView &outputAt(const OpCall &Call, size_t I, const char *What) {
  if (I >= Call.Outputs.size() || !Call.Outputs[I].present())
    failOp(Call, std::string("missing output ") + What);
  requireContiguous(Call, Call.Outputs[I], What);
  return Call.Outputs[I];
}

TensorView optionalAt(const OpCall &Call, const Views &Vs, size_t I, DType Type,
                      const char *What) {
  if (I >= Vs.size() || !Vs[I].present())
    return TensorView::absent();
  requireContiguous(Call, Vs[I], What);
  requireType(Call, Vs[I], Type, What);
  return Vs[I];
}

void requireElements(const OpCall &Call, const TensorView &V, int64_t Count,
                     const char *What) {
  if (V.present() && V.numElements() != Count)
    failOp(Call, std::string(What) + " has " + std::to_string(V.numElements()) +
                     " elements, expected " + std::to_string(Count));
}

int64_t product(const TensorView &V, int Begin, int End) {
  int64_t P = 1;
  for (int I = Begin; I < End; ++I)
    P *= V.Dims[I];
  return P;
}

template <typename T> T *dataOrNull(const TensorView &V) {
  return V.present() ? V.as<T>() : nullptr;
}

//===-- LayerNorm ---------------------------------------------------------===//

/// Where column J of the normalized dims reads a broadcast weight: W's
/// stride for each normalized dim (0 where W broadcasts).
struct WeightMap {
  int Rank = 0;
  bool Identity = false; // W covers the normalized dims densely
  int64_t Dims[MaxRank] = {}, Strides[MaxRank] = {};
};

__device__ int64_t weightIndex(const WeightMap &M, int64_t J) {
  return M.Identity ? J : offsetOf(J, M.Rank, M.Dims, M.Strides);
}

WeightMap weightMap(const OpCall &Call, const TensorView &X, int Axis,
                    const TensorView &W, const char *What) {
  int NormRank = X.Rank - Axis;
  if (W.Rank > NormRank)
    failOp(Call,
           std::string(What) + " has more dims than the normalized shape");
  WeightMap M;
  M.Rank = NormRank;
  int64_t Stride = 1;
  for (int I = W.Rank - 1; I >= 0; --I) {
    int64_t XDim = X.Dims[X.Rank - W.Rank + I];
    if (W.Dims[I] != XDim && W.Dims[I] != 1)
      failOp(Call,
             std::string(What) + " does not broadcast to the normalized shape");
    M.Strides[NormRank - W.Rank + I] = W.Dims[I] == 1 ? 0 : Stride;
    Stride *= W.Dims[I];
  }
  M.Identity = W.numElements() == product(X, Axis, X.Rank);
  for (int D = 0; D < NormRank; ++D)
    M.Dims[D] = X.Dims[Axis + D];
  return M;
}

struct LayerNormShape {
  int64_t Rows, Cols; // X as [Rows, Cols]: leading dims by normalized dims
  int Axis;
  WeightMap Scale, Bias;
  bool HasBias;
};

LayerNormShape layerNormShape(const OpCall &Call) {
  const TensorView &X = inputAt(Call, 0, "X");
  int64_t Axis = Call.Attrs.getInt("axis");
  if (Axis < 0 || Axis >= X.Rank)
    failOp(Call, "axis " + std::to_string(Axis) + " is out of range");
  LayerNormShape Sh{product(X, 0, Axis),
                    product(X, Axis, X.Rank),
                    static_cast<int>(Axis),
                    {},
                    {},
                    false};
  const TensorView &Scale = inputAt(Call, 1, "scale");
  requireType(Call, Scale, X.Type, "scale");
  Sh.Scale = weightMap(Call, X, Sh.Axis, Scale, "scale");
  if (Call.Inputs.size() > 2 && Call.Inputs[2].present()) {
    const TensorView &Bias = inputAt(Call, 2, "bias");
    requireType(Call, Bias, X.Type, "bias");
    Sh.Bias = weightMap(Call, X, Sh.Axis, Bias, "bias");
    Sh.HasBias = true;
  }
  return Sh;
}

/// Mean and 1/sqrt(var + eps) of a row, two passes; every thread gets them.
template <typename T>
__device__ void rowStats(const T *Row, int64_t Cols, double Eps, double &Mean,
                         double &Inv) {
  double Sum = 0, Sq = 0;
  for (int64_t J = threadIdx.x; J < Cols; J += blockDim.x)
    Sum += Row[J];
  Mean = blockSum(Sum) / Cols;
  for (int64_t J = threadIdx.x; J < Cols; J += blockDim.x)
    Sq += (Row[J] - Mean) * (Row[J] - Mean);
  Inv = 1 / sqrt(blockSum(Sq) / Cols + Eps);
}

/// A f32 or f64 statistics view (LayerNorm's Mean, InvStdDev, or their
/// gradients), which need not have X's type.
struct StatsView {
  void *Data = nullptr;
  bool Double = false;
};

__device__ double loadStat(StatsView V, int64_t I) {
  return V.Double ? static_cast<const double *>(V.Data)[I]
                  : static_cast<const float *>(V.Data)[I];
}
__device__ void storeStat(StatsView V, int64_t I, double X) {
  if (V.Double)
    static_cast<double *>(V.Data)[I] = X;
  else
    static_cast<float *>(V.Data)[I] = static_cast<float>(X);
}

template <typename T>
__global__ void layerNormForwardKernel(LayerNormShape Sh, const T *X,
                                       const T *Scale, const T *Bias, T *Y,
                                       StatsView MeanOut, StatsView InvOut,
                                       double Eps) {
  for (int64_t R = blockIdx.x; R < Sh.Rows; R += gridDim.x) {
    const T *Row = X + R * Sh.Cols;
    double Mean, Inv;
    rowStats(Row, Sh.Cols, Eps, Mean, Inv);
    T *Out = Y + R * Sh.Cols;
    for (int64_t J = threadIdx.x; J < Sh.Cols; J += blockDim.x) {
      double V = (Row[J] - Mean) * Inv * Scale[weightIndex(Sh.Scale, J)];
      Out[J] = static_cast<T>(Bias ? V + Bias[weightIndex(Sh.Bias, J)] : V);
    }
    if (threadIdx.x == 0) {
      if (MeanOut.Data)
        storeStat(MeanOut, R, Mean);
      if (InvOut.Data)
        storeStat(InvOut, R, Inv);
    }
  }
}

/// Per row: statistics into RowStats (mean, inv) for the weight gradients,
/// and dX when wanted (DX may be null).
template <typename T>
__global__ void
layerNormBackwardRowKernel(LayerNormShape Sh, const T *X, const T *Scale,
                           const T *GY, StatsView GMean, StatsView GInv,
                           double Eps, T *DX, double *RowStats) {
  double Cols = static_cast<double>(Sh.Cols);
  for (int64_t R = blockIdx.x; R < Sh.Rows; R += gridDim.x) {
    const T *Row = X + R * Sh.Cols;
    const T *G = GY ? GY + R * Sh.Cols : nullptr;
    double Mean, Inv;
    rowStats(Row, Sh.Cols, Eps, Mean, Inv);
    if (threadIdx.x == 0 && RowStats) {
      RowStats[2 * R] = Mean;
      RowStats[2 * R + 1] = Inv;
    }
    if (!DX)
      continue;
    // Sums over the row of g = dY * scale and g * xhat.
    double SumG = 0, SumGXhat = 0;
    for (int64_t J = threadIdx.x; G && J < Sh.Cols; J += blockDim.x) {
      double Gs = G[J] * Scale[weightIndex(Sh.Scale, J)];
      SumG += Gs;
      SumGXhat += Gs * (Row[J] - Mean) * Inv;
    }
    SumG = blockSum(SumG);
    SumGXhat = blockSum(SumGXhat);
    double GM = GMean.Data ? loadStat(GMean, R) : 0;
    double GI = GInv.Data ? loadStat(GInv, R) : 0;
    T *D = DX + R * Sh.Cols;
    for (int64_t J = threadIdx.x; J < Sh.Cols; J += blockDim.x) {
      double Xhat = (Row[J] - Mean) * Inv;
      double Gs = G ? G[J] * Scale[weightIndex(Sh.Scale, J)] : 0;
      // d InvStdDev / dx_j = -Inv^3 (x_j - mean) / Cols.
      D[J] += static_cast<T>(Inv * (Gs - SumG / Cols - Xhat * SumGXhat / Cols) +
                             GM / Cols - GI * Inv * Inv * Xhat / Cols);
    }
  }
}

/// Per column: sums over the rows of dY * xhat and dY (one thread per
/// column, so reads are coalesced across the row).
template <typename T>
__global__ void layerNormColumnKernel(LayerNormShape Sh, const T *X,
                                      const T *GY, const double *RowStats,
                                      double *ScaleSums, double *BiasSums) {
  for (int64_t J = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; J < Sh.Cols;
       J += int64_t(gridDim.x) * blockDim.x) {
    double SumGXhat = 0, SumG = 0;
    for (int64_t R = 0; R < Sh.Rows; ++R) {
      double Gv = GY[R * Sh.Cols + J];
      SumGXhat +=
          Gv * (X[R * Sh.Cols + J] - RowStats[2 * R]) * RowStats[2 * R + 1];
      SumG += Gv;
    }
    if (ScaleSums)
      ScaleSums[J] = SumGXhat;
    if (BiasSums)
      BiasSums[J] = SumG;
  }
}

/// Column sums added into a weight gradient through its broadcast: a
/// strided reduction over the normalized dims the weight repeats along.
template <typename T>
void addColumnSums(Context &C, const OpCall &Call, const WeightMap &M,
                   const double *Sums, T *Grad) {
  ReducePlan P;
  int64_t Stride = 1, ColStrides[MaxRank];
  for (int D = M.Rank - 1; D >= 0; --D) {
    ColStrides[D] = Stride;
    Stride *= M.Dims[D];
  }
  for (int D = 0; D < M.Rank; ++D) {
    if (M.Dims[D] == 1)
      continue;
    if (M.Strides[D] == 0)
      P.reduce(M.Dims[D], ColStrides[D]);
    else
      P.keep(M.Dims[D], ColStrides[D], M.Strides[D]);
  }
  stridedReduce<double, T, double>(C, Call, P, Sums, Grad, true, false);
}

StatsView statsAt(const OpCall &Call, const Views &Vs, size_t I, int64_t Rows,
                  const char *What) {
  if (I >= Vs.size() || !Vs[I].present())
    return {};
  requireContiguous(Call, Vs[I], What);
  if (Vs[I].Type != DType::Float32 && Vs[I].Type != DType::Float64)
    failOp(Call, std::string(What) + " must be f32 or f64");
  requireElements(Call, Vs[I], Rows, What);
  return {Vs[I].Data, Vs[I].Type == DType::Float64};
}

unsigned rowGrid(int64_t Rows) {
  return static_cast<unsigned>(std::clamp<int64_t>(Rows, 1, 65535 * 8));
}

template <typename T> void layerNormForward(Context &C, const OpCall &Call) {
  LayerNormShape Sh = layerNormShape(Call);
  TensorView Y = outputAt(Call, 0, "Y");
  requireType(Call, Y, Call.Inputs[0].Type, "Y");
  requireElements(Call, Y, Sh.Rows * Sh.Cols, "Y");
  StatsView MeanOut = statsAt(Call, Call.Outputs, 1, Sh.Rows, "Mean");
  StatsView InvOut = statsAt(Call, Call.Outputs, 2, Sh.Rows, "InvStdDev");
  double Eps = Call.Attrs.getFloat("epsilon", 1e-5);
  if (Sh.Rows == 0)
    return;
  layerNormForwardKernel<T><<<rowGrid(Sh.Rows), ThreadsPerBlock, 0, C.Stream>>>(
      Sh, Call.Inputs[0].as<T>(), Call.Inputs[1].as<T>(),
      Sh.HasBias ? Call.Inputs[2].as<T>() : nullptr, Y.as<T>(), MeanOut, InvOut,
      Eps);
  checkLaunch(Call, "layer norm kernel");
}

template <typename T>
void layerNormBackward(Context &C, const OpCall &Call, const Views &OutGrads,
                       const Views &InGrads) {
  LayerNormShape Sh = layerNormShape(Call);
  DType Type = Call.Inputs[0].Type;
  TensorView GY = optionalAt(Call, OutGrads, 0, Type, "dY");
  requireElements(Call, GY, Sh.Rows * Sh.Cols, "dY");
  StatsView GMean = statsAt(Call, OutGrads, 1, Sh.Rows, "dMean");
  StatsView GInv = statsAt(Call, OutGrads, 2, Sh.Rows, "dInvStdDev");
  TensorView DX = optionalAt(Call, InGrads, 0, Type, "dX");
  TensorView DScale = optionalAt(Call, InGrads, 1, Type, "dscale");
  TensorView DBias = optionalAt(Call, InGrads, 2, Type, "dbias");
  requireElements(Call, DX, Sh.Rows * Sh.Cols, "dX");
  requireElements(Call, DScale, Call.Inputs[1].numElements(), "dscale");
  if (DBias.present() && !Sh.HasBias)
    failOp(Call, "dbias is given but bias is absent");
  if (DBias.present())
    requireElements(Call, DBias, Call.Inputs[2].numElements(), "dbias");
  double Eps = Call.Attrs.getFloat("epsilon", 1e-5);
  // The CPU kernel adds to dscale and dbias only where dY is present.
  bool Weights = GY.present() && (DScale.present() || DBias.present());
  if (Sh.Rows == 0 || (!DX.present() && !Weights))
    return;
  const T *X = Call.Inputs[0].as<T>();
  Scratch<double> RowStats;
  if (Weights)
    RowStats = Scratch<double>(Call, C, 2 * Sh.Rows);
  layerNormBackwardRowKernel<T>
      <<<rowGrid(Sh.Rows), ThreadsPerBlock, 0, C.Stream>>>(
          Sh, X, Call.Inputs[1].as<T>(), dataOrNull<T>(GY), GMean, GInv, Eps,
          dataOrNull<T>(DX), RowStats.get());
  checkLaunch(Call, "layer norm backward kernel");
  if (!Weights)
    return;
  Scratch<double> ScaleSums, BiasSums;
  if (DScale.present())
    ScaleSums = Scratch<double>(Call, C, Sh.Cols);
  if (DBias.present())
    BiasSums = Scratch<double>(Call, C, Sh.Cols);
  layerNormColumnKernel<T>
      <<<blocksFor(Sh.Cols), ThreadsPerBlock, 0, C.Stream>>>(
          Sh, X, GY.as<T>(), RowStats.get(), ScaleSums.get(), BiasSums.get());
  checkLaunch(Call, "layer norm weight gradient kernel");
  if (DScale.present())
    addColumnSums(C, Call, Sh.Scale, ScaleSums.get(), DScale.as<T>());
  if (DBias.present())
    addColumnSums(C, Call, Sh.Bias, BiasSums.get(), DBias.as<T>());
}

} // namespace

void forwardNormalization(Context &C, const OpCall &Call) {
  switch (Call.Kind) {
  case OpKind::BatchNorm:
    return forwardBatchNorm(C, Call);
  case OpKind::LayerNorm:
    return dispatchFloat(Call, inputAt(Call, 0, "X").Type, "X", [&](auto T) {
      layerNormForward<decltype(T)>(C, Call);
    });
  case OpKind::Softmax:
  case OpKind::LogSoftmax:
    return forwardSoftmax(C, Call);
  case OpKind::ReduceMean:
  case OpKind::ReduceSum:
    return forwardReduce(C, Call);
  case OpKind::ReduceMax:
  case OpKind::ReduceMin:
    return forwardReduceExtreme(C, Call);
  case OpKind::CumSum:
    return forwardCumSum(C, Call);
  default:
    failOp(Call, "is not a Normalization op");
  }
}

void backwardNormalization(Context &C, const OpCall &Call,
                           const Views &OutputGrads, const Views &InputGrads) {
  switch (Call.Kind) {
  case OpKind::BatchNorm:
    return backwardBatchNorm(C, Call, OutputGrads, InputGrads);
  case OpKind::LayerNorm:
    return dispatchFloat(Call, inputAt(Call, 0, "X").Type, "X", [&](auto T) {
      layerNormBackward<decltype(T)>(C, Call, OutputGrads, InputGrads);
    });
  case OpKind::Softmax:
  case OpKind::LogSoftmax:
    return backwardSoftmax(C, Call, OutputGrads, InputGrads);
  case OpKind::ReduceMean:
  case OpKind::ReduceSum:
    return backwardReduce(C, Call, OutputGrads, InputGrads);
  case OpKind::ReduceMax:
  case OpKind::ReduceMin:
    return backwardReduceExtreme(C, Call, OutputGrads, InputGrads);
  case OpKind::CumSum:
    return backwardCumSum(C, Call, OutputGrads, InputGrads);
  default:
    failOp(Call, "is not a Normalization op");
  }
}

} // namespace onnx2soap::rt::cuda
