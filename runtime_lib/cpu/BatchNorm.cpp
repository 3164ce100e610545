//===- runtime_lib/cpu/BatchNorm.cpp - BatchNorm, whole or in phases -----===//
//
// The CPU BatchNorm kernels: forward and backward of the whole op (which
// Normalization.cpp dispatches here) and the phases of a BatchNorm whose
// batch is split among partitions (Backend.h). Both share the per-channel
// arithmetic and differ only in where a channel's statistics come from: a
// pass over the local X, or sums the program has added up over every
// partition. Plain loops over f32 or f64 for Normalization.cpp's reasons
// (every output may carry a gradient); statistics accumulate in double.
// Backward recomputes what it needs from the inputs.
//
// Threads: channels are split between threads (Parallel.h); each channel's
// sums run in one thread, vectorized (`omp simd` reductions: a
// reassociation of the double-precision sums, no change of precision).
//
//===----------------------------------------------------------------------===//
#include "CpuKernels.h"
#include "Parallel.h"
#include <cmath>

namespace onnx2soap::rt::cpu {
namespace {

/// Runs Fn(T{}) with T the C++ type of a float element type (f32 or f64).
template <typename F>
void dispatchFloat(const OpCall &Call, const TensorView &V, const char *What,
                   F &&Fn) {
  if (V.Type == DType::Float32)
    return Fn(float{});
  if (V.Type == DType::Float64)
    return Fn(double{});
  failOp(Call, std::string(What) + " has element type " + dtypeName(V.Type) +
                   ", the CPU kernel needs f32 or f64");
}

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

/// An optional view (absent when out of range), checked dense and of Type.
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

struct BatchNormShape {
  int64_t N, C, S; // X is [N, C, S...]
};

BatchNormShape batchNormShape(const OpCall &Call) {
  const TensorView &X = inputAt(Call, 0, "X");
  if (X.Rank < 2)
    failOp(Call, "X must be [N,C,...]");
  int64_t S = 1;
  for (int I = 2; I < X.Rank; ++I)
    S *= X.Dims[I];
  BatchNormShape Sh{X.Dims[0], X.Dims[1], S};
  static const char *const Names[] = {"X", "scale", "bias", "mean", "var"};
  for (size_t I = 1; I < 5; ++I) {
    requireType(Call, inputAt(Call, I, Names[I]), X.Type, Names[I]);
    requireElements(Call, Call.Inputs[I], Sh.C, Names[I]);
  }
  return Sh;
}

bool isTraining(const OpCall &Call) { return Call.Attrs.getInt("training"); }

/// A phase's [2, C] Stats or Sums view: dense f32 or f64.
void requireSums(const OpCall &Call, const TensorView &V, int64_t C,
                 const char *What) {
  if (!V.present())
    failOp(Call, std::string("missing ") + What);
  requireContiguous(Call, V, What);
  if (V.Type != DType::Float32 && V.Type != DType::Float64)
    failOp(Call, std::string(What) + " must be f32 or f64");
  requireElements(Call, V, 2 * C, What);
}

void requireCount(const OpCall &Call, int64_t Count, const BatchNormShape &Sh) {
  if (Count < Sh.N * Sh.S)
    failOp(Call, "Count " + std::to_string(Count) +
                     " is below the partition's own " +
                     std::to_string(Sh.N * Sh.S) + " elements per channel");
}

double loadFloat(const TensorView &V, int64_t I) {
  return V.Type == DType::Float64 ? V.as<double>()[I] : V.as<float>()[I];
}
void storeFloat(const TensorView &V, int64_t I, double X) {
  if (V.Type == DType::Float64)
    V.as<double>()[I] = X;
  else
    V.as<float>()[I] = static_cast<float>(X);
}

/// The whole batch's mean and biased variance of channel Ch from summed
/// Stats (the variance clamped at 0 against cancellation).
void statsFromSums(const TensorView &Stats, int64_t C, int64_t Ch,
                   int64_t Count, double &Mean, double &Var) {
  double N = static_cast<double>(Count);
  Mean = Count ? loadFloat(Stats, Ch) / N : 0;
  Var = Count ? std::max(loadFloat(Stats, C + Ch) / N - Mean * Mean, 0.0) : 0;
}

/// Mean of channel Ch over N and the spatial dims.
template <typename T>
double channelMean(const T *X, const BatchNormShape &Sh, int64_t Ch) {
  double Sum = 0;
  for (int64_t N = 0; N < Sh.N; ++N) {
    const T *P = X + (N * Sh.C + Ch) * Sh.S;
#pragma omp simd reduction(+ : Sum)
    for (int64_t S = 0; S < Sh.S; ++S)
      Sum += P[S];
  }
  double Count = static_cast<double>(Sh.N * Sh.S);
  return Count ? Sum / Count : 0;
}

/// Biased mean and variance of channel Ch over N and the spatial dims.
template <typename T>
void channelStats(const T *X, const BatchNormShape &Sh, int64_t Ch,
                  double &Mean, double &Var) {
  Mean = channelMean(X, Sh, Ch);
  double Sq = 0, M = Mean;
  for (int64_t N = 0; N < Sh.N; ++N) {
    const T *P = X + (N * Sh.C + Ch) * Sh.S;
#pragma omp simd reduction(+ : Sq)
    for (int64_t S = 0; S < Sh.S; ++S)
      Sq += (P[S] - M) * (P[S] - M);
  }
  double Count = static_cast<double>(Sh.N * Sh.S);
  Var = Count ? Sq / Count : 0;
}

/// Sums over channel Ch of dy and dy * (x - Mean).
template <typename T>
void channelGradSums(const T *X, const T *DY, const BatchNormShape &Sh,
                     int64_t Ch, double Mean, double &SumG, double &SumGX) {
  SumG = SumGX = 0;
  if (!DY)
    return;
  for (int64_t N = 0; N < Sh.N; ++N) {
    int64_t Base = (N * Sh.C + Ch) * Sh.S;
    const T *XRow = X + Base, *GRow = DY + Base;
#pragma omp simd reduction(+ : SumG, SumGX)
    for (int64_t S = 0; S < Sh.S; ++S) {
      double Gv = GRow[S];
      SumG += Gv;
      SumGX += Gv * (XRow[S] - Mean);
    }
  }
}

//===-- Forward -----------------------------------------------------------===//

/// Y and, in training, the running statistics, given BatchStats(Ch, Mean,
/// Var) for the batch statistics a training call normalizes with.
template <typename T, typename F>
void forwardWith(const OpCall &Call, F &&BatchStats) {
  BatchNormShape Sh = batchNormShape(Call);
  const TensorView &X = Call.Inputs[0];
  const T *Scale = Call.Inputs[1].as<T>(), *Bias = Call.Inputs[2].as<T>(),
          *Mean = Call.Inputs[3].as<T>(), *Var = Call.Inputs[4].as<T>();
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
  parallelFor(Sh.C, Sh.N * Sh.S * 3, [&](int64_t Ch) {
    double M = Mean[Ch], V = Var[Ch];
    if (Training) {
      // ONNX BatchNormalization-15 semantics: normalize with the batch
      // statistics and blend the biased batch variance into the running
      // variance (PyTorch blends the unbiased one instead).
      double BatchMean, BatchVar;
      BatchStats(Ch, BatchMean, BatchVar);
      if (RunMean.present())
        RunMean.as<T>()[Ch] = M * Momentum + BatchMean * (1 - Momentum);
      if (RunVar.present())
        RunVar.as<T>()[Ch] = V * Momentum + BatchVar * (1 - Momentum);
      M = BatchMean;
      V = BatchVar;
    }
    double A = Scale[Ch] / std::sqrt(V + Eps), B = Bias[Ch] - M * A;
    for (int64_t N = 0; N < Sh.N; ++N) {
      int64_t Base = (N * Sh.C + Ch) * Sh.S;
      const T *In = X.as<T>() + Base;
      T *Out = Y.as<T>() + Base;
#pragma omp simd
      for (int64_t S = 0; S < Sh.S; ++S)
        Out[S] = static_cast<T>(In[S] * A + B);
    }
  });
}

template <typename T> void forwardWhole(const OpCall &Call) {
  BatchNormShape Sh = batchNormShape(Call);
  const T *X = Call.Inputs[0].as<T>();
  forwardWith<T>(Call, [&](int64_t Ch, double &Mean, double &Var) {
    channelStats(X, Sh, Ch, Mean, Var);
  });
}

template <typename T>
void partialStats(const OpCall &Call, const TensorView &Stats) {
  BatchNormShape Sh = batchNormShape(Call);
  requireSums(Call, Stats, Sh.C, "Stats");
  const T *X = Call.Inputs[0].as<T>();
  parallelFor(Sh.C, Sh.N * Sh.S * 2, [&](int64_t Ch) {
    double Sum = 0, Sq = 0;
    for (int64_t N = 0; N < Sh.N; ++N) {
      const T *P = X + (N * Sh.C + Ch) * Sh.S;
#pragma omp simd reduction(+ : Sum, Sq)
      for (int64_t S = 0; S < Sh.S; ++S) {
        double V = P[S];
        Sum += V;
        Sq += V * V;
      }
    }
    storeFloat(Stats, Ch, Sum);
    storeFloat(Stats, Sh.C + Ch, Sq);
  });
}

template <typename T>
void forwardWithStats(const OpCall &Call, const TensorView &Stats,
                      int64_t Count) {
  BatchNormShape Sh = batchNormShape(Call);
  if (!isTraining(Call))
    return forwardWhole<T>(Call);
  requireSums(Call, Stats, Sh.C, "Stats");
  requireCount(Call, Count, Sh);
  forwardWith<T>(Call, [&](int64_t Ch, double &Mean, double &Var) {
    statsFromSums(Stats, Sh.C, Ch, Count, Mean, Var);
  });
}

//===-- Backward ----------------------------------------------------------===//

/// What the shared backward needs of a channel: the statistics it was
/// normalized with, the sums over the whole batch of dy and dy * (x - mean)
/// (for dX) and over this call's elements (for dscale, dbias, dmean, dvar).
struct ChannelGrad {
  double Mean, Var, SumG, SumGX, LocalSumG, LocalSumGX;
};

/// Adds every requested input gradient, given ChannelSums(Ch) -> ChannelGrad
/// and Count, the elements per channel of the whole batch.
template <typename T, typename F>
void backwardWith(const OpCall &Call, const Views &OutGrads,
                  const Views &InGrads, int64_t WholeCount, F &&ChannelSums) {
  BatchNormShape Sh = batchNormShape(Call);
  DType Type = Call.Inputs[0].Type;
  const T *X = Call.Inputs[0].as<T>(), *Scale = Call.Inputs[1].as<T>();
  bool Training = isTraining(Call);
  double Eps = Call.Attrs.getFloat("epsilon", 1e-5);
  double Momentum = Call.Attrs.getFloat("momentum", 0.9);
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
  double Count = static_cast<double>(WholeCount);
  parallelFor(Sh.C, Sh.N * Sh.S * 4, [&](int64_t Ch) {
    ChannelGrad S = ChannelSums(Ch);
    double M = S.Mean, Inv = 1 / std::sqrt(S.Var + Eps);
    if (G[1].present())
      G[1].as<T>()[Ch] += static_cast<T>(S.LocalSumGX * Inv);
    if (G[2].present())
      G[2].as<T>()[Ch] += static_cast<T>(S.LocalSumG);
    double GRm = GRunMean.present() ? GRunMean.as<T>()[Ch] : 0;
    double GRv = GRunVar.present() ? GRunVar.as<T>()[Ch] : 0;
    if (Training) {
      // The inputs mean and var only feed the running statistics.
      if (G[3].present())
        G[3].as<T>()[Ch] += static_cast<T>(Momentum * GRm);
      if (G[4].present())
        G[4].as<T>()[Ch] += static_cast<T>(Momentum * GRv);
    } else {
      if (G[3].present())
        G[3].as<T>()[Ch] += static_cast<T>(-Scale[Ch] * Inv * S.LocalSumG);
      if (G[4].present())
        G[4].as<T>()[Ch] +=
            static_cast<T>(-0.5 * Scale[Ch] * Inv * Inv * Inv * S.LocalSumGX);
    }
    if (!G[0].present() || Count == 0)
      return;
    double A = Scale[Ch] * Inv;
    // Training: dx = A * (dy - SumG / Count - (x - mean) * Inv^2 * SumGX /
    // Count), Y's path through the batch mean and variance, plus the
    // running statistics' (1 - momentum) share of the batch statistics,
    // (1 - momentum) * (GRm + 2 GRv (x - mean)) / Count. Both are affine in
    // dy and (x - mean): dx = A * dy + CoefX * (x - mean) + Offset.
    double MeanG = S.SumG / Count;
    double CoefX = Training ? -A * Inv * Inv * S.SumGX / Count +
                                  (1 - Momentum) * 2 * GRv / Count
                            : 0;
    double Offset = Training ? -A * MeanG + (1 - Momentum) * GRm / Count : 0;
    const T *DY = OutGrads.size() && OutGrads[0].present() ? OutGrads[0].as<T>()
                                                           : nullptr;
    for (int64_t N = 0; N < Sh.N; ++N) {
      int64_t Base = (N * Sh.C + Ch) * Sh.S;
      T *DX = G[0].as<T>() + Base;
      const T *XRow = X + Base;
      if (!Training) {
        if (DY) {
          const T *GRow = DY + Base;
#pragma omp simd
          for (int64_t S = 0; S < Sh.S; ++S)
            DX[S] += static_cast<T>(A * GRow[S]);
        }
      } else if (DY) {
        const T *GRow = DY + Base;
#pragma omp simd
        for (int64_t S = 0; S < Sh.S; ++S)
          DX[S] += static_cast<T>(A * GRow[S] + CoefX * (XRow[S] - M) + Offset);
      } else {
#pragma omp simd
        for (int64_t S = 0; S < Sh.S; ++S)
          DX[S] += static_cast<T>(CoefX * (XRow[S] - M) + Offset);
      }
    }
  });
}

/// dY (OutGrads[0]) checked, or nullptr when absent.
template <typename T>
const T *outputGrad(const OpCall &Call, const Views &OutGrads,
                    const BatchNormShape &Sh) {
  TensorView GY = optionalAt(Call, OutGrads, 0, Call.Inputs[0].Type, "dY");
  requireElements(Call, GY, Sh.N * Sh.C * Sh.S, "dY");
  return GY.present() ? GY.as<T>() : nullptr;
}

template <typename T>
void backwardWhole(const OpCall &Call, const Views &OutGrads,
                   const Views &InGrads) {
  BatchNormShape Sh = batchNormShape(Call);
  const T *X = Call.Inputs[0].as<T>(), *Mean = Call.Inputs[3].as<T>(),
          *Var = Call.Inputs[4].as<T>();
  const T *DY = outputGrad<T>(Call, OutGrads, Sh);
  bool Training = isTraining(Call);
  backwardWith<T>(Call, OutGrads, InGrads, Sh.N * Sh.S, [&](int64_t Ch) {
    double M = Training ? channelMean(X, Sh, Ch) : double(Mean[Ch]);
    // Sums over the channel of dY and dY * (x - mean), and in training the
    // batch variance's sum of (x - mean)^2, in one pass over X.
    double SumG = 0, SumGX = 0, Sq = 0;
    for (int64_t N = 0; N < Sh.N; ++N) {
      int64_t Base = (N * Sh.C + Ch) * Sh.S;
      const T *XRow = X + Base;
      if (Training && DY) {
        const T *GRow = DY + Base;
#pragma omp simd reduction(+ : SumG, SumGX, Sq)
        for (int64_t S = 0; S < Sh.S; ++S) {
          double Gv = GRow[S];
          SumG += Gv;
          SumGX += Gv * (XRow[S] - M);
          Sq += (XRow[S] - M) * (XRow[S] - M);
        }
      } else if (DY) {
        const T *GRow = DY + Base;
#pragma omp simd reduction(+ : SumG, SumGX)
        for (int64_t S = 0; S < Sh.S; ++S) {
          double Gv = GRow[S];
          SumG += Gv;
          SumGX += Gv * (XRow[S] - M);
        }
      } else if (Training) {
#pragma omp simd reduction(+ : Sq)
        for (int64_t S = 0; S < Sh.S; ++S)
          Sq += (XRow[S] - M) * (XRow[S] - M);
      }
    }
    double Count = static_cast<double>(Sh.N * Sh.S);
    double V = Training ? (Count ? Sq / Count : 0) : double(Var[Ch]);
    return ChannelGrad{M, V, SumG, SumGX, SumG, SumGX};
  });
}

/// The statistics a phased backward normalizes with: the whole batch's
/// from Stats in training, the running ones otherwise.
template <typename T>
void phaseStats(const OpCall &Call, const TensorView &Stats, int64_t Count,
                const BatchNormShape &Sh, int64_t Ch, double &Mean,
                double &Var) {
  if (isTraining(Call))
    return statsFromSums(Stats, Sh.C, Ch, Count, Mean, Var);
  Mean = Call.Inputs[3].as<T>()[Ch];
  Var = Call.Inputs[4].as<T>()[Ch];
}

template <typename T>
void backwardPartialSums(const OpCall &Call, const TensorView &OutputGrad,
                         const TensorView &Stats, int64_t Count,
                         const TensorView &Sums) {
  BatchNormShape Sh = batchNormShape(Call);
  const T *DY = outputGrad<T>(Call, {OutputGrad}, Sh);
  if (isTraining(Call)) {
    requireSums(Call, Stats, Sh.C, "Stats");
    requireCount(Call, Count, Sh);
  }
  requireSums(Call, Sums, Sh.C, "Sums");
  const T *X = Call.Inputs[0].as<T>();
  double Eps = Call.Attrs.getFloat("epsilon", 1e-5);
  parallelFor(Sh.C, Sh.N * Sh.S * 2, [&](int64_t Ch) {
    double Mean, Var, SumG, SumGX;
    phaseStats<T>(Call, Stats, Count, Sh, Ch, Mean, Var);
    channelGradSums(X, DY, Sh, Ch, Mean, SumG, SumGX);
    storeFloat(Sums, Ch, SumG);
    storeFloat(Sums, Sh.C + Ch, SumGX / std::sqrt(Var + Eps));
  });
}

template <typename T>
void backwardWithSums(const OpCall &Call, const Views &OutGrads,
                      const Views &InGrads, const TensorView &Stats,
                      const TensorView &Sums, int64_t Count) {
  if (!isTraining(Call))
    return backwardWhole<T>(Call, OutGrads, InGrads);
  BatchNormShape Sh = batchNormShape(Call);
  const T *DY = outputGrad<T>(Call, OutGrads, Sh);
  requireSums(Call, Stats, Sh.C, "Stats");
  requireSums(Call, Sums, Sh.C, "Sums");
  requireCount(Call, Count, Sh);
  for (size_t I : {3, 4})
    if (I < InGrads.size() && InGrads[I].present())
      failOp(Call, "a BatchNorm split among partitions takes no gradient of "
                   "its mean and var inputs");
  const T *X = Call.Inputs[0].as<T>();
  double Eps = Call.Attrs.getFloat("epsilon", 1e-5);
  backwardWith<T>(Call, OutGrads, InGrads, Count, [&](int64_t Ch) {
    ChannelGrad S;
    statsFromSums(Stats, Sh.C, Ch, Count, S.Mean, S.Var);
    channelGradSums(X, DY, Sh, Ch, S.Mean, S.LocalSumG, S.LocalSumGX);
    // Sums holds dy * xhat; the shared arithmetic takes dy * (x - mean).
    S.SumG = loadFloat(Sums, Ch);
    S.SumGX = loadFloat(Sums, Sh.C + Ch) * std::sqrt(S.Var + Eps);
    return S;
  });
}

} // namespace

void forwardBatchNorm(Context &, const OpCall &Call) {
  dispatchFloat(Call, inputAt(Call, 0, "X"), "X",
                [&](auto T) { forwardWhole<decltype(T)>(Call); });
}

void backwardBatchNorm(Context &, const OpCall &Call, const Views &OutputGrads,
                       const Views &InputGrads) {
  dispatchFloat(Call, inputAt(Call, 0, "X"), "X", [&](auto T) {
    backwardWhole<decltype(T)>(Call, OutputGrads, InputGrads);
  });
}

void batchNormPartialStats(Context &, const OpCall &Call,
                           const TensorView &Stats) {
  dispatchFloat(Call, inputAt(Call, 0, "X"), "X",
                [&](auto T) { partialStats<decltype(T)>(Call, Stats); });
}

void batchNormForwardWithStats(Context &, const OpCall &Call,
                               const TensorView &Stats, int64_t Count) {
  dispatchFloat(Call, inputAt(Call, 0, "X"), "X", [&](auto T) {
    forwardWithStats<decltype(T)>(Call, Stats, Count);
  });
}

void batchNormBackwardPartialSums(Context &, const OpCall &Call,
                                  const TensorView &OutputGrad,
                                  const TensorView &Stats, int64_t Count,
                                  const TensorView &Sums) {
  dispatchFloat(Call, inputAt(Call, 0, "X"), "X", [&](auto T) {
    backwardPartialSums<decltype(T)>(Call, OutputGrad, Stats, Count, Sums);
  });
}

void batchNormBackwardWithSums(Context &, const OpCall &Call,
                               const Views &OutputGrads,
                               const Views &InputGrads, const TensorView &Stats,
                               const TensorView &Sums, int64_t Count) {
  dispatchFloat(Call, inputAt(Call, 0, "X"), "X", [&](auto T) {
    backwardWithSums<decltype(T)>(Call, OutputGrads, InputGrads, Stats, Sums,
                                  Count);
  });
}

} // namespace onnx2soap::rt::cpu
