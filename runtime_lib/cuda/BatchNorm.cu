//===- runtime_lib/cuda/BatchNorm.cu - BatchNorm, whole or in phases -----===//
//
// CUDA twin of runtime_lib/cpu/BatchNorm.cpp: forward and backward of the
// whole op (which Normalization.cu dispatches here) and the phases of a
// BatchNorm whose batch is split among partitions (Backend.h). Own kernels
// rather than cuDNN: every output may carry a gradient (the running
// statistics, with ONNX semantics). f32 or f64; statistics accumulate in
// double in block-wide reductions (one block per channel), so results are
// deterministic. The whole op and the phases share the kernels; a channel's
// statistics come either from a pass over the local X or from Stats and
// Sums the program has added up over every partition.
//
//===----------------------------------------------------------------------===//
#include "KernelSupport.cuh"
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

template <typename T> T *dataOrNull(const TensorView &V) {
  return V.present() ? V.as<T>() : nullptr;
}

struct BatchNormShape {
  int64_t N, C, S; // X is [N, C, S...]
  /// Whether every flat index fits 32 bits (cheaper channel arithmetic).
  bool Narrow;
};

BatchNormShape batchNormShape(const OpCall &Call) {
  const TensorView &X = inputAt(Call, 0, "X");
  if (X.Rank < 2)
    failOp(Call, "X must be [N,C,...]");
  int64_t S = 1;
  for (int I = 2; I < X.Rank; ++I)
    S *= X.Dims[I];
  BatchNormShape Sh{X.Dims[0], X.Dims[1], S,
                    X.numElements() < (int64_t(1) << 32)};
  static const char *const Names[] = {"X", "scale", "bias", "mean", "var"};
  for (size_t I = 1; I < 5; ++I) {
    requireType(Call, inputAt(Call, I, Names[I]), X.Type, Names[I]);
    requireElements(Call, Call.Inputs[I], Sh.C, Names[I]);
  }
  return Sh;
}

bool isTraining(const OpCall &Call) { return Call.Attrs.getInt("training"); }

/// A phase's [2, C] Stats or Sums (f32 or f64); Data null: none, the
/// statistics come from the local X.
struct SumsView {
  void *Data = nullptr;
  bool Double = false;
};

__device__ double loadSum(SumsView V, int64_t I) {
  return V.Double ? static_cast<const double *>(V.Data)[I]
                  : static_cast<const float *>(V.Data)[I];
}
__device__ void storeSum(SumsView V, int64_t I, double X) {
  if (V.Double)
    static_cast<double *>(V.Data)[I] = X;
  else
    static_cast<float *>(V.Data)[I] = static_cast<float>(X);
}

SumsView sumsAt(const OpCall &Call, const TensorView &V, int64_t C,
                const char *What) {
  if (!V.present())
    failOp(Call, std::string("missing ") + What);
  requireContiguous(Call, V, What);
  if (V.Type != DType::Float32 && V.Type != DType::Float64)
    failOp(Call, std::string(What) + " must be f32 or f64");
  requireElements(Call, V, 2 * C, What);
  return {V.Data, V.Type == DType::Float64};
}

void requireCount(const OpCall &Call, int64_t Count, const BatchNormShape &Sh) {
  if (Count < Sh.N * Sh.S)
    failOp(Call, "Count " + std::to_string(Count) +
                     " is below the partition's own " +
                     std::to_string(Sh.N * Sh.S) + " elements per channel");
}

/// Calls F(I) for the flat index I of every element of channel Ch this
/// thread covers: the channel's elements e = n * S + s in the order
/// threadIdx.x, threadIdx.x + blockDim.x, ..., walking (n, s) without a
/// 64-bit division per element (which made the statistics passes
/// instruction-bound: 176 GB/s on an H100).
template <typename Fn>
__device__ void forChannelElements(const BatchNormShape &Sh, int64_t Ch, Fn F) {
  if (Sh.S <= 0)
    return;
  const int64_t StepN = blockDim.x / Sh.S, StepS = blockDim.x % Sh.S;
  const int64_t Plane = Sh.C * Sh.S;
  int64_t N = threadIdx.x / Sh.S, S = threadIdx.x % Sh.S;
  for (int64_t Base = Ch * Sh.S; N < Sh.N;) {
    F(N * Plane + Base + S);
    N += StepN;
    S += StepS;
    if (S >= Sh.S) {
      S -= Sh.S;
      ++N;
    }
  }
}

/// The channel of flat element E, in 32-bit arithmetic when the tensor
/// allows (a 64-bit division per element costs more than its memory
/// traffic).
__device__ int64_t channelOf(const BatchNormShape &Sh, int64_t E) {
  if (Sh.Narrow)
    return (static_cast<uint32_t>(E) / static_cast<uint32_t>(Sh.S)) %
           static_cast<uint32_t>(Sh.C);
  return (E / Sh.S) % Sh.C;
}

/// Biased mean and variance of channel Ch over N and the spatial dims, two
/// passes as on the CPU; every thread of the block gets them.
template <typename T>
__device__ void channelStats(const T *X, BatchNormShape Sh, int64_t Ch,
                             double &Mean, double &Var) {
  int64_t Count = Sh.N * Sh.S;
  double Sum = 0;
  forChannelElements(Sh, Ch, [&](int64_t I) { Sum += X[I]; });
  Sum = blockSum(Sum);
  Mean = Count ? Sum / Count : 0;
  double Sq = 0;
  forChannelElements(Sh, Ch, [&](int64_t I) {
    double D = X[I] - Mean;
    Sq += D * D;
  });
  Sq = blockSum(Sq);
  Var = Count ? Sq / Count : 0;
}

/// The whole batch's mean and biased variance of channel Ch from summed
/// Stats (the variance clamped at 0 against cancellation).
__device__ void statsFromSums(SumsView Stats, int64_t C, int64_t Ch,
                              int64_t Count, double &Mean, double &Var) {
  Mean = Count ? loadSum(Stats, Ch) / Count : 0;
  Var = Count ? fmax(loadSum(Stats, C + Ch) / Count - Mean * Mean, 0.0) : 0;
}

/// Sums over channel Ch of dy and dy * (x - Mean); every thread gets them.
template <typename T>
__device__ void channelGradSums(const T *X, const T *GY, BatchNormShape Sh,
                                int64_t Ch, double Mean, double &SumG,
                                double &SumGX) {
  SumG = SumGX = 0;
  if (!GY)
    return;
  forChannelElements(Sh, Ch, [&](int64_t I) {
    double Gv = GY[I];
    SumG += Gv;
    SumGX += Gv * (X[I] - Mean);
  });
  SumG = blockSum(SumG);
  SumGX = blockSum(SumGX);
}

unsigned channelGrid(int64_t Channels) {
  return static_cast<unsigned>(std::clamp<int64_t>(Channels, 1, 65535 * 8));
}

//===-- Forward -----------------------------------------------------------===//

template <typename T>
__global__ void batchNormPartialStatsKernel(BatchNormShape Sh, const T *X,
                                            SumsView Stats) {
  for (int64_t Ch = blockIdx.x; Ch < Sh.C; Ch += gridDim.x) {
    double Sum = 0, Sq = 0;
    forChannelElements(Sh, Ch, [&](int64_t I) {
      double V = X[I];
      Sum += V;
      Sq += V * V;
    });
    Sum = blockSum(Sum);
    Sq = blockSum(Sq);
    if (threadIdx.x == 0) {
      storeSum(Stats, Ch, Sum);
      storeSum(Stats, Sh.C + Ch, Sq);
    }
  }
}

/// Per channel: the affine map Y = X * Coef[2c] + Coef[2c+1], and in
/// training the running statistics (ONNX BatchNormalization-15: the biased
/// batch variance is blended in; PyTorch blends the unbiased one). The batch
/// statistics come from Stats over Count elements when given, else from X.
template <typename T>
__global__ void
batchNormStatsKernel(BatchNormShape Sh, const T *X, const T *Scale,
                     const T *Bias, const T *Mean, const T *Var, T *RunMean,
                     T *RunVar, bool Training, double Eps, double Momentum,
                     SumsView Stats, int64_t Count, double *Coef) {
  for (int64_t Ch = blockIdx.x; Ch < Sh.C; Ch += gridDim.x) {
    double M = Mean[Ch], V = Var[Ch];
    if (Training) {
      double BatchMean, BatchVar;
      if (Stats.Data)
        statsFromSums(Stats, Sh.C, Ch, Count, BatchMean, BatchVar);
      else
        channelStats(X, Sh, Ch, BatchMean, BatchVar);
      if (threadIdx.x == 0) {
        if (RunMean)
          RunMean[Ch] =
              static_cast<T>(M * Momentum + BatchMean * (1 - Momentum));
        if (RunVar)
          RunVar[Ch] = static_cast<T>(V * Momentum + BatchVar * (1 - Momentum));
      }
      M = BatchMean;
      V = BatchVar;
    }
    if (threadIdx.x == 0) {
      double A = Scale[Ch] / sqrt(V + Eps);
      Coef[2 * Ch] = A;
      Coef[2 * Ch + 1] = Bias[Ch] - M * A;
    }
  }
}

template <typename T>
__global__ void batchNormApplyKernel(BatchNormShape Sh, int64_t Count,
                                     const T *X, const double *Coef, T *Y) {
  for (int64_t E = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; E < Count;
       E += int64_t(gridDim.x) * blockDim.x) {
    int64_t Ch = channelOf(Sh, E);
    Y[E] = static_cast<T>(X[E] * Coef[2 * Ch] + Coef[2 * Ch + 1]);
  }
}

/// Forward of the whole op (Stats.Data null) or phase 2 of a split one.
template <typename T>
void forwardWith(Context &C, const OpCall &Call, SumsView Stats,
                 int64_t Count) {
  BatchNormShape Sh = batchNormShape(Call);
  const TensorView &X = Call.Inputs[0];
  TensorView Y = outputAt(Call, 0, "Y");
  requireType(Call, Y, X.Type, "Y");
  requireElements(Call, Y, X.numElements(), "Y");
  double Eps = Call.Attrs.getFloat("epsilon", 1e-5);
  double Momentum = Call.Attrs.getFloat("momentum", 0.9);
  bool Training = isTraining(Call);
  TensorView RunMean, RunVar;
  if (Training) {
    RunMean = optionalAt(Call, Call.Outputs, 1, X.Type, "running_mean");
    RunVar = optionalAt(Call, Call.Outputs, 2, X.Type, "running_var");
    requireElements(Call, RunMean, Sh.C, "running_mean");
    requireElements(Call, RunVar, Sh.C, "running_var");
  }
  if (Sh.C == 0)
    return;
  Scratch<double> Coef(Call, C, 2 * Sh.C);
  batchNormStatsKernel<T><<<channelGrid(Sh.C), ThreadsPerBlock, 0, C.Stream>>>(
      Sh, X.as<T>(), Call.Inputs[1].as<T>(), Call.Inputs[2].as<T>(),
      Call.Inputs[3].as<T>(), Call.Inputs[4].as<T>(), dataOrNull<T>(RunMean),
      dataOrNull<T>(RunVar), Training, Eps, Momentum, Stats, Count, Coef.get());
  checkLaunch(Call, "batch norm statistics kernel");
  int64_t Elements = X.numElements();
  if (Elements == 0)
    return;
  batchNormApplyKernel<T>
      <<<blocksFor(Elements), ThreadsPerBlock, 0, C.Stream>>>(
          Sh, Elements, X.as<T>(), Coef.get(), Y.as<T>());
  checkLaunch(Call, "batch norm kernel");
}

//===-- Backward ----------------------------------------------------------===//

/// What the dX kernel needs of a channel: the statistics it was normalized
/// with and the whole batch's sums of dy and dy * (x - mean).
struct ChannelGrad {
  double Mean, Inv, SumG, SumGX;
};

/// Where a channel's statistics come from: the local X (Stats.Data null),
/// or Stats and Sums summed over the partitions of a split call.
struct PhaseSums {
  SumsView Stats, Sums;
  int64_t Count = 0;
};

/// The statistics a channel is normalized with, for every thread.
template <typename T>
__device__ void normalizingStats(BatchNormShape Sh, const T *X, const T *Mean,
                                 const T *Var, bool Training, SumsView Stats,
                                 int64_t Count, int64_t Ch, double &M,
                                 double &V) {
  M = Mean[Ch];
  V = Var[Ch];
  if (Training && Stats.Data)
    statsFromSums(Stats, Sh.C, Ch, Count, M, V);
  else if (Training)
    channelStats(X, Sh, Ch, M, V);
}

/// Per channel: statistics, the local sums over dY, and the gradients of
/// scale, bias, mean and var from them (each partition's share when the
/// batch is split); the whole batch's sums from P.Sums when given.
template <typename T>
__global__ void
batchNormGradStatsKernel(BatchNormShape Sh, const T *X, const T *Scale,
                         const T *Mean, const T *Var, const T *GY,
                         const T *GRunMean, const T *GRunVar, T *DScale,
                         T *DBias, T *DMean, T *DVar, bool Training, double Eps,
                         double Momentum, PhaseSums P, ChannelGrad *Out) {
  for (int64_t Ch = blockIdx.x; Ch < Sh.C; Ch += gridDim.x) {
    double M, V;
    normalizingStats(Sh, X, Mean, Var, Training, P.Stats, P.Count, Ch, M, V);
    double Inv = 1 / sqrt(V + Eps);
    double SumG, SumGX;
    channelGradSums(X, GY, Sh, Ch, M, SumG, SumGX);
    if (threadIdx.x == 0) {
      // Sums holds dy * xhat; the dX kernel takes dy * (x - mean).
      Out[Ch] = P.Sums.Data
                    ? ChannelGrad{M, Inv, loadSum(P.Sums, Ch),
                                  loadSum(P.Sums, Sh.C + Ch) * sqrt(V + Eps)}
                    : ChannelGrad{M, Inv, SumG, SumGX};
      if (DScale)
        DScale[Ch] += static_cast<T>(SumGX * Inv);
      if (DBias)
        DBias[Ch] += static_cast<T>(SumG);
      double GRm = GRunMean ? GRunMean[Ch] : 0, GRv = GRunVar ? GRunVar[Ch] : 0;
      if (Training) {
        // The inputs mean and var only feed the running statistics.
        if (DMean)
          DMean[Ch] += static_cast<T>(Momentum * GRm);
        if (DVar)
          DVar[Ch] += static_cast<T>(Momentum * GRv);
      } else {
        if (DMean)
          DMean[Ch] += static_cast<T>(-Scale[Ch] * Inv * SumG);
        if (DVar)
          DVar[Ch] +=
              static_cast<T>(-0.5 * Scale[Ch] * Inv * Inv * Inv * SumGX);
      }
    }
  }
}

/// Backward phase 1: the local sums of dy and dy * xhat into Sums.
template <typename T>
__global__ void
batchNormPartialSumsKernel(BatchNormShape Sh, const T *X, const T *Mean,
                           const T *Var, const T *GY, bool Training, double Eps,
                           SumsView Stats, int64_t Count, SumsView Sums) {
  for (int64_t Ch = blockIdx.x; Ch < Sh.C; Ch += gridDim.x) {
    double M, V;
    normalizingStats(Sh, X, Mean, Var, Training, Stats, Count, Ch, M, V);
    double SumG, SumGX;
    channelGradSums(X, GY, Sh, Ch, M, SumG, SumGX);
    if (threadIdx.x == 0) {
      storeSum(Sums, Ch, SumG);
      storeSum(Sums, Sh.C + Ch, SumGX / sqrt(V + Eps));
    }
  }
}

template <typename T>
__global__ void batchNormGradInputKernel(
    BatchNormShape Sh, int64_t Elements, double Reduced, const T *X,
    const T *Scale, const T *GY, const T *GRunMean, const T *GRunVar,
    const ChannelGrad *Stats, bool Training, double Momentum, T *DX) {
  for (int64_t E = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; E < Elements;
       E += int64_t(gridDim.x) * blockDim.x) {
    int64_t Ch = channelOf(Sh, E);
    ChannelGrad S = Stats[Ch];
    double A = Scale[Ch] * S.Inv;
    double Gv = GY ? GY[E] : 0, Centered = X[E] - S.Mean, D;
    if (Training) {
      double GRm = GRunMean ? GRunMean[Ch] : 0, GRv = GRunVar ? GRunVar[Ch] : 0;
      // Y's path through the batch mean and variance, plus the running
      // statistics' (1 - momentum) share of the batch statistics.
      D = A * (Gv - S.SumG / Reduced -
               Centered * S.Inv * S.Inv * S.SumGX / Reduced) +
          (1 - Momentum) * (GRm + 2 * GRv * Centered) / Reduced;
    } else {
      D = A * Gv;
    }
    DX[E] += static_cast<T>(D);
  }
}

TensorView outputGrad(const OpCall &Call, const Views &OutGrads,
                      const BatchNormShape &Sh) {
  TensorView GY = optionalAt(Call, OutGrads, 0, Call.Inputs[0].Type, "dY");
  requireElements(Call, GY, Sh.N * Sh.C * Sh.S, "dY");
  return GY;
}

/// Backward of the whole op (P.Stats.Data null) or phase 2 of a split one.
template <typename T>
void backwardWith(Context &C, const OpCall &Call, const Views &OutGrads,
                  const Views &InGrads, PhaseSums P) {
  BatchNormShape Sh = batchNormShape(Call);
  DType Type = Call.Inputs[0].Type;
  bool Training = isTraining(Call);
  double Eps = Call.Attrs.getFloat("epsilon", 1e-5);
  double Momentum = Call.Attrs.getFloat("momentum", 0.9);
  TensorView GY = outputGrad(Call, OutGrads, Sh);
  TensorView GRunMean, GRunVar;
  if (Training) {
    GRunMean = optionalAt(Call, OutGrads, 1, Type, "d running_mean");
    GRunVar = optionalAt(Call, OutGrads, 2, Type, "d running_var");
    requireElements(Call, GRunMean, Sh.C, "d running_mean");
    requireElements(Call, GRunVar, Sh.C, "d running_var");
  }
  static const char *const Names[] = {"dX", "dscale", "dbias", "dmean", "dvar"};
  TensorView G[5];
  for (size_t I = 0; I < 5; ++I) {
    G[I] = optionalAt(Call, InGrads, I, Type, Names[I]);
    requireElements(Call, G[I], I ? Sh.C : Sh.N * Sh.C * Sh.S, Names[I]);
  }
  if (Sh.C == 0)
    return;
  const T *X = Call.Inputs[0].as<T>(), *Scale = Call.Inputs[1].as<T>();
  Scratch<ChannelGrad> Stats(Call, C, Sh.C);
  batchNormGradStatsKernel<T>
      <<<channelGrid(Sh.C), ThreadsPerBlock, 0, C.Stream>>>(
          Sh, X, Scale, Call.Inputs[3].as<T>(), Call.Inputs[4].as<T>(),
          dataOrNull<T>(GY), dataOrNull<T>(GRunMean), dataOrNull<T>(GRunVar),
          dataOrNull<T>(G[1]), dataOrNull<T>(G[2]), dataOrNull<T>(G[3]),
          dataOrNull<T>(G[4]), Training, Eps, Momentum, P, Stats.get());
  checkLaunch(Call, "batch norm gradient statistics kernel");
  int64_t Elements = Sh.N * Sh.C * Sh.S;
  int64_t Reduced = P.Stats.Data ? P.Count : Sh.N * Sh.S;
  if (!G[0].present() || Elements == 0 || Reduced == 0)
    return;
  batchNormGradInputKernel<T>
      <<<blocksFor(Elements), ThreadsPerBlock, 0, C.Stream>>>(
          Sh, Elements, static_cast<double>(Reduced), X, Scale,
          dataOrNull<T>(GY), dataOrNull<T>(GRunMean), dataOrNull<T>(GRunVar),
          Stats.get(), Training, Momentum, G[0].as<T>());
  checkLaunch(Call, "batch norm input gradient kernel");
}

template <typename T>
void partialStats(Context &C, const OpCall &Call, const TensorView &Stats) {
  BatchNormShape Sh = batchNormShape(Call);
  SumsView S = sumsAt(Call, Stats, Sh.C, "Stats");
  if (Sh.C == 0)
    return;
  batchNormPartialStatsKernel<T>
      <<<channelGrid(Sh.C), ThreadsPerBlock, 0, C.Stream>>>(
          Sh, Call.Inputs[0].as<T>(), S);
  checkLaunch(Call, "batch norm partial statistics kernel");
}

template <typename T>
void backwardPartialSums(Context &C, const OpCall &Call,
                         const TensorView &OutputGrad, const TensorView &Stats,
                         int64_t Count, const TensorView &Sums) {
  BatchNormShape Sh = batchNormShape(Call);
  TensorView GY = outputGrad(Call, {OutputGrad}, Sh);
  bool Training = isTraining(Call);
  SumsView S;
  if (Training) {
    S = sumsAt(Call, Stats, Sh.C, "Stats");
    requireCount(Call, Count, Sh);
  }
  SumsView Out = sumsAt(Call, Sums, Sh.C, "Sums");
  if (Sh.C == 0)
    return;
  batchNormPartialSumsKernel<T>
      <<<channelGrid(Sh.C), ThreadsPerBlock, 0, C.Stream>>>(
          Sh, Call.Inputs[0].as<T>(), Call.Inputs[3].as<T>(),
          Call.Inputs[4].as<T>(), dataOrNull<T>(GY), Training,
          Call.Attrs.getFloat("epsilon", 1e-5), S, Count, Out);
  checkLaunch(Call, "batch norm partial gradient sums kernel");
}

} // namespace

void forwardBatchNorm(Context &C, const OpCall &Call) {
  dispatchFloat(Call, inputAt(Call, 0, "X").Type, "X",
                [&](auto T) { forwardWith<decltype(T)>(C, Call, {}, 0); });
}

void backwardBatchNorm(Context &C, const OpCall &Call, const Views &OutputGrads,
                       const Views &InputGrads) {
  dispatchFloat(Call, inputAt(Call, 0, "X").Type, "X", [&](auto T) {
    backwardWith<decltype(T)>(C, Call, OutputGrads, InputGrads, {});
  });
}

void batchNormPartialStats(Context &C, const OpCall &Call,
                           const TensorView &Stats) {
  dispatchFloat(Call, inputAt(Call, 0, "X").Type, "X",
                [&](auto T) { partialStats<decltype(T)>(C, Call, Stats); });
}

void batchNormForwardWithStats(Context &C, const OpCall &Call,
                               const TensorView &Stats, int64_t Count) {
  dispatchFloat(Call, inputAt(Call, 0, "X").Type, "X", [&](auto T) {
    if (!isTraining(Call))
      return forwardWith<decltype(T)>(C, Call, {}, 0);
    BatchNormShape Sh = batchNormShape(Call);
    SumsView S = sumsAt(Call, Stats, Sh.C, "Stats");
    requireCount(Call, Count, Sh);
    forwardWith<decltype(T)>(C, Call, S, Count);
  });
}

void batchNormBackwardPartialSums(Context &C, const OpCall &Call,
                                  const TensorView &OutputGrad,
                                  const TensorView &Stats, int64_t Count,
                                  const TensorView &Sums) {
  dispatchFloat(Call, inputAt(Call, 0, "X").Type, "X", [&](auto T) {
    backwardPartialSums<decltype(T)>(C, Call, OutputGrad, Stats, Count, Sums);
  });
}

void batchNormBackwardWithSums(Context &C, const OpCall &Call,
                               const Views &OutputGrads,
                               const Views &InputGrads, const TensorView &Stats,
                               const TensorView &Sums, int64_t Count) {
  dispatchFloat(Call, inputAt(Call, 0, "X").Type, "X", [&](auto T) {
    if (!isTraining(Call))
      return backwardWith<decltype(T)>(C, Call, OutputGrads, InputGrads, {});
    BatchNormShape Sh = batchNormShape(Call);
    PhaseSums P;
    P.Stats = sumsAt(Call, Stats, Sh.C, "Stats");
    P.Sums = sumsAt(Call, Sums, Sh.C, "Sums");
    P.Count = Count;
    requireCount(Call, Count, Sh);
    for (size_t I : {3, 4})
      if (I < InputGrads.size() && InputGrads[I].present())
        failOp(Call, "a BatchNorm split among partitions takes no gradient "
                     "of its mean and var inputs");
    backwardWith<decltype(T)>(C, Call, OutputGrads, InputGrads, P);
  });
}

} // namespace onnx2soap::rt::cuda
