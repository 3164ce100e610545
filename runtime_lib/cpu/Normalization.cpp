//===- runtime_lib/cpu/Normalization.cpp - Norms, softmax, reductions -----===//
//
// CPU kernels of the Normalization family (ir/ops/Normalization.cpp):
// BatchNorm, LayerNorm, Softmax, LogSoftmax, ReduceMean and ReduceSum, as
// plain loops over f32 or f64 operands. Loops rather than oneDNN because
// every output of these ops may carry a gradient (BatchNorm's running
// statistics, LayerNorm's Mean and InvStdDev) and LayerNorm's scale may
// broadcast, which oneDNN's primitives do not cover. Statistics accumulate
// in double. Backward kernels recompute what they need from the inputs, so
// they do not depend on the forward outputs still being intact.
//
// Threads: BatchNorm splits its channels, LayerNorm's forward its rows,
// between threads (Parallel.h); each channel's or row's sums run in one
// thread, vectorized (`omp simd` reductions: a reassociation of the
// double-precision sums, no change of precision). LayerNorm's backward adds
// every row into dscale and dbias, so it stays serial.
//
//===----------------------------------------------------------------------===//
#include "CpuKernels.h"
#include "Parallel.h"
#include "Reduction.h"
#include <cmath>
#include <vector>

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

int64_t product(const TensorView &V, int Begin, int End) {
  int64_t P = 1;
  for (int I = Begin; I < End; ++I)
    P *= V.Dims[I];
  return P;
}

/// Reads element I of a f32 or f64 view (LayerNorm's statistics are f32
/// even for f64 inputs).
double loadFloat(const TensorView &V, int64_t I) {
  return V.Type == DType::Float64 ? V.as<double>()[I] : V.as<float>()[I];
}
void storeFloat(const TensorView &V, int64_t I, double X) {
  if (V.Type == DType::Float64)
    V.as<double>()[I] = X;
  else
    V.as<float>()[I] = static_cast<float>(X);
}

//===-- BatchNorm ---------------------------------------------------------===//

struct BatchNormShape {
  int64_t N, C, S; // X is [N, C, S...]
};

BatchNormShape batchNormShape(const OpCall &Call) {
  const TensorView &X = inputAt(Call, 0, "X");
  if (X.Rank < 2)
    failOp(Call, "X must be [N,C,...]");
  BatchNormShape Sh{X.Dims[0], X.Dims[1], product(X, 2, X.Rank)};
  static const char *const Names[] = {"X", "scale", "bias", "mean", "var"};
  for (size_t I = 1; I < 5; ++I) {
    requireType(Call, inputAt(Call, I, Names[I]), X.Type, Names[I]);
    requireElements(Call, Call.Inputs[I], Sh.C, Names[I]);
  }
  return Sh;
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

template <typename T> void batchNormForward(const OpCall &Call) {
  BatchNormShape Sh = batchNormShape(Call);
  const TensorView &X = Call.Inputs[0];
  const T *Scale = Call.Inputs[1].as<T>(), *Bias = Call.Inputs[2].as<T>(),
          *Mean = Call.Inputs[3].as<T>(), *Var = Call.Inputs[4].as<T>();
  TensorView Y = outputAt(Call, 0, "Y");
  requireType(Call, Y, X.Type, "Y");
  requireElements(Call, Y, X.numElements(), "Y");
  double Eps = Call.Attrs.getFloat("epsilon", 1e-5);
  double Momentum = Call.Attrs.getFloat("momentum", 0.9);
  bool Training = Call.Attrs.getInt("training");
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
      channelStats(X.as<T>(), Sh, Ch, BatchMean, BatchVar);
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

template <typename T>
void batchNormBackward(const OpCall &Call, const Views &OutGrads,
                       const Views &InGrads) {
  BatchNormShape Sh = batchNormShape(Call);
  DType Type = Call.Inputs[0].Type;
  const T *X = Call.Inputs[0].as<T>(), *Scale = Call.Inputs[1].as<T>(),
          *Mean = Call.Inputs[3].as<T>(), *Var = Call.Inputs[4].as<T>();
  bool Training = Call.Attrs.getInt("training");
  double Eps = Call.Attrs.getFloat("epsilon", 1e-5);
  double Momentum = Call.Attrs.getFloat("momentum", 0.9);
  TensorView GY = optionalAt(Call, OutGrads, 0, Type, "dY");
  TensorView GRunMean, GRunVar;
  if (Training) {
    GRunMean = optionalAt(Call, OutGrads, 1, Type, "d running_mean");
    GRunVar = optionalAt(Call, OutGrads, 2, Type, "d running_var");
  }
  requireElements(Call, GY, Sh.N * Sh.C * Sh.S, "dY");
  static const char *const Names[] = {"dX", "dscale", "dbias", "dmean", "dvar"};
  TensorView G[5];
  for (size_t I = 0; I < 5; ++I) {
    G[I] = optionalAt(Call, InGrads, I, Type, Names[I]);
    requireElements(Call, G[I], I ? Sh.C : Sh.N * Sh.C * Sh.S, Names[I]);
  }
  double Count = static_cast<double>(Sh.N * Sh.S);
  const T *DY = GY.present() ? GY.as<T>() : nullptr;
  parallelFor(Sh.C, Sh.N * Sh.S * 4, [&](int64_t Ch) {
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
    double V = Training ? (Count ? Sq / Count : 0) : double(Var[Ch]);
    double Inv = 1 / std::sqrt(V + Eps);
    if (G[1].present())
      G[1].as<T>()[Ch] += static_cast<T>(SumGX * Inv);
    if (G[2].present())
      G[2].as<T>()[Ch] += static_cast<T>(SumG);
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
        G[3].as<T>()[Ch] += static_cast<T>(-Scale[Ch] * Inv * SumG);
      if (G[4].present())
        G[4].as<T>()[Ch] +=
            static_cast<T>(-0.5 * Scale[Ch] * Inv * Inv * Inv * SumGX);
    }
    if (!G[0].present() || Count == 0)
      return;
    double A = Scale[Ch] * Inv;
    // Training: dx = A * (dy - SumG / Count - (x - mean) * Inv^2 * SumGX /
    // Count), Y's path through the batch mean and variance, plus the
    // running statistics' (1 - momentum) share of the batch statistics,
    // (1 - momentum) * (GRm + 2 GRv (x - mean)) / Count. Both are affine in
    // dy and (x - mean): dx = A * dy + CoefX * (x - mean) + Offset.
    double MeanG = SumG / Count;
    double CoefX = Training ? -A * Inv * Inv * SumGX / Count +
                                  (1 - Momentum) * 2 * GRv / Count
                            : 0;
    double Offset = Training ? -A * MeanG + (1 - Momentum) * GRm / Count : 0;
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

//===-- LayerNorm ---------------------------------------------------------===//

struct LayerNormShape {
  int64_t Rows, Cols; // X as [Rows, Cols]: leading dims by normalized dims
  std::vector<int64_t> ScaleIndex, BiasIndex; // per column, broadcast
};

/// Column J's element of a weight that broadcasts to X's normalized dims.
std::vector<int64_t> broadcastIndex(const OpCall &Call, const TensorView &X,
                                    int Axis, const TensorView &W,
                                    const char *What) {
  int NormRank = X.Rank - Axis;
  if (W.Rank > NormRank)
    failOp(Call,
           std::string(What) + " has more dims than the normalized shape");
  // Stride in W of each normalized dim (0 where W broadcasts).
  std::vector<int64_t> Strides(NormRank, 0);
  int64_t Stride = 1;
  for (int I = W.Rank - 1; I >= 0; --I) {
    int64_t XDim = X.Dims[X.Rank - W.Rank + I];
    if (W.Dims[I] != XDim && W.Dims[I] != 1)
      failOp(Call,
             std::string(What) + " does not broadcast to the normalized shape");
    Strides[NormRank - W.Rank + I] = W.Dims[I] == 1 ? 0 : Stride;
    Stride *= W.Dims[I];
  }
  int64_t Cols = product(X, Axis, X.Rank);
  std::vector<int64_t> Index(Cols);
  for (int64_t J = 0; J < Cols; ++J) {
    int64_t Rest = J, Offset = 0;
    for (int D = NormRank - 1; D >= 0; --D) {
      int64_t Dim = X.Dims[Axis + D];
      Offset += (Rest % Dim) * Strides[D];
      Rest /= Dim;
    }
    Index[J] = Offset;
  }
  return Index;
}

LayerNormShape layerNormShape(const OpCall &Call) {
  const TensorView &X = inputAt(Call, 0, "X");
  int64_t Axis = Call.Attrs.getInt("axis");
  if (Axis < 0 || Axis >= X.Rank)
    failOp(Call, "axis " + std::to_string(Axis) + " is out of range");
  LayerNormShape Sh{product(X, 0, Axis), product(X, Axis, X.Rank), {}, {}};
  const TensorView &Scale = inputAt(Call, 1, "scale");
  requireType(Call, Scale, X.Type, "scale");
  Sh.ScaleIndex = broadcastIndex(Call, X, Axis, Scale, "scale");
  if (Call.Inputs.size() > 2 && Call.Inputs[2].present()) {
    const TensorView &Bias = inputAt(Call, 2, "bias");
    requireType(Call, Bias, X.Type, "bias");
    Sh.BiasIndex = broadcastIndex(Call, X, Axis, Bias, "bias");
  }
  return Sh;
}

template <typename T>
void rowStats(const T *Row, int64_t Cols, double Eps, double &Mean,
              double &Inv) {
  double Sum = 0, Sq = 0;
  for (int64_t J = 0; J < Cols; ++J)
    Sum += Row[J];
  Mean = Sum / Cols;
  for (int64_t J = 0; J < Cols; ++J)
    Sq += (Row[J] - Mean) * (Row[J] - Mean);
  Inv = 1 / std::sqrt(Sq / Cols + Eps);
}

/// LayerNorm's Mean or InvStdDev (or its gradient): absent, or f32 / f64
/// with one element per row.
TensorView statsAt(const OpCall &Call, const Views &Vs, size_t I, int64_t Rows,
                   const char *What) {
  if (I >= Vs.size() || !Vs[I].present())
    return TensorView::absent();
  requireContiguous(Call, Vs[I], What);
  if (Vs[I].Type != DType::Float32 && Vs[I].Type != DType::Float64)
    failOp(Call, std::string(What) + " must be f32 or f64");
  requireElements(Call, Vs[I], Rows, What);
  return Vs[I];
}

template <typename T> void layerNormForward(const OpCall &Call) {
  LayerNormShape Sh = layerNormShape(Call);
  const T *X = Call.Inputs[0].as<T>(), *Scale = Call.Inputs[1].as<T>();
  const T *Bias = Sh.BiasIndex.empty() ? nullptr : Call.Inputs[2].as<T>();
  TensorView Y = outputAt(Call, 0, "Y");
  requireType(Call, Y, Call.Inputs[0].Type, "Y");
  requireElements(Call, Y, Sh.Rows * Sh.Cols, "Y");
  TensorView MeanOut = statsAt(Call, Call.Outputs, 1, Sh.Rows, "Mean");
  TensorView InvOut = statsAt(Call, Call.Outputs, 2, Sh.Rows, "InvStdDev");
  double Eps = Call.Attrs.getFloat("epsilon", 1e-5);
  parallelFor(Sh.Rows, Sh.Cols * 3, [&](int64_t R) {
    const T *Row = X + R * Sh.Cols;
    double Mean, Inv;
    rowStats(Row, Sh.Cols, Eps, Mean, Inv);
    T *Out = Y.as<T>() + R * Sh.Cols;
    for (int64_t J = 0; J < Sh.Cols; ++J) {
      double V = (Row[J] - Mean) * Inv * Scale[Sh.ScaleIndex[J]];
      Out[J] = static_cast<T>(Bias ? V + Bias[Sh.BiasIndex[J]] : V);
    }
    if (MeanOut.present())
      storeFloat(MeanOut, R, Mean);
    if (InvOut.present())
      storeFloat(InvOut, R, Inv);
  });
}

template <typename T>
void layerNormBackward(const OpCall &Call, const Views &OutGrads,
                       const Views &InGrads) {
  LayerNormShape Sh = layerNormShape(Call);
  DType Type = Call.Inputs[0].Type;
  const T *X = Call.Inputs[0].as<T>(), *Scale = Call.Inputs[1].as<T>();
  TensorView GY = optionalAt(Call, OutGrads, 0, Type, "dY");
  requireElements(Call, GY, Sh.Rows * Sh.Cols, "dY");
  TensorView GMean = statsAt(Call, OutGrads, 1, Sh.Rows, "dMean");
  TensorView GInv = statsAt(Call, OutGrads, 2, Sh.Rows, "dInvStdDev");
  TensorView DX = optionalAt(Call, InGrads, 0, Type, "dX");
  TensorView DScale = optionalAt(Call, InGrads, 1, Type, "dscale");
  TensorView DBias = optionalAt(Call, InGrads, 2, Type, "dbias");
  requireElements(Call, DX, Sh.Rows * Sh.Cols, "dX");
  requireElements(Call, DScale, Call.Inputs[1].numElements(), "dscale");
  if (DBias.present() && Sh.BiasIndex.empty())
    failOp(Call, "dbias is given but bias is absent");
  if (DBias.present())
    requireElements(Call, DBias, Call.Inputs[2].numElements(), "dbias");
  double Eps = Call.Attrs.getFloat("epsilon", 1e-5);
  for (int64_t R = 0; R < Sh.Rows; ++R) {
    const T *Row = X + R * Sh.Cols;
    const T *G = GY.present() ? GY.as<T>() + R * Sh.Cols : nullptr;
    double Mean, Inv;
    rowStats(Row, Sh.Cols, Eps, Mean, Inv);
    // Sums over the row of g = dY * scale and g * xhat.
    double SumG = 0, SumGXhat = 0;
    for (int64_t J = 0; G && J < Sh.Cols; ++J) {
      double Xhat = (Row[J] - Mean) * Inv;
      double Gs = G[J] * Scale[Sh.ScaleIndex[J]];
      SumG += Gs;
      SumGXhat += Gs * Xhat;
      if (DScale.present())
        DScale.as<T>()[Sh.ScaleIndex[J]] += static_cast<T>(G[J] * Xhat);
      if (DBias.present())
        DBias.as<T>()[Sh.BiasIndex[J]] += static_cast<T>(G[J]);
    }
    if (!DX.present())
      continue;
    double GM = GMean.present() ? loadFloat(GMean, R) : 0;
    double GI = GInv.present() ? loadFloat(GInv, R) : 0;
    double Cols = static_cast<double>(Sh.Cols);
    T *D = DX.as<T>() + R * Sh.Cols;
    for (int64_t J = 0; J < Sh.Cols; ++J) {
      double Xhat = (Row[J] - Mean) * Inv;
      double Gs = G ? G[J] * Scale[Sh.ScaleIndex[J]] : 0;
      // d InvStdDev / dx_j = -Inv^3 (x_j - mean) / Cols.
      D[J] += static_cast<T>(Inv * (Gs - SumG / Cols - Xhat * SumGXhat / Cols) +
                             GM / Cols - GI * Inv * Inv * Xhat / Cols);
    }
  }
}

} // namespace

void forwardNormalization(Context &, const OpCall &Call) {
  switch (Call.Kind) {
  case OpKind::BatchNorm:
    return dispatchFloat(Call, inputAt(Call, 0, "X"), "X",
                         [&](auto T) { batchNormForward<decltype(T)>(Call); });
  case OpKind::LayerNorm:
    return dispatchFloat(Call, inputAt(Call, 0, "X"), "X",
                         [&](auto T) { layerNormForward<decltype(T)>(Call); });
  case OpKind::Softmax:
  case OpKind::LogSoftmax:
    return forwardSoftmax(Call);
  case OpKind::ReduceMean:
  case OpKind::ReduceSum:
    return forwardReduce(Call);
  default:
    failOp(Call, "is not a Normalization op");
  }
}

void backwardNormalization(Context &, const OpCall &Call,
                           const Views &OutputGrads, const Views &InputGrads) {
  switch (Call.Kind) {
  case OpKind::BatchNorm:
    return dispatchFloat(Call, inputAt(Call, 0, "X"), "X", [&](auto T) {
      batchNormBackward<decltype(T)>(Call, OutputGrads, InputGrads);
    });
  case OpKind::LayerNorm:
    return dispatchFloat(Call, inputAt(Call, 0, "X"), "X", [&](auto T) {
      layerNormBackward<decltype(T)>(Call, OutputGrads, InputGrads);
    });
  case OpKind::Softmax:
  case OpKind::LogSoftmax:
    return backwardSoftmax(Call, OutputGrads, InputGrads);
  case OpKind::ReduceMean:
  case OpKind::ReduceSum:
    return backwardReduce(Call, OutputGrads, InputGrads);
  default:
    failOp(Call, "is not a Normalization op");
  }
}

} // namespace onnx2soap::rt::cpu
