//===- runtime_lib/cpu/Normalization.cpp - Norms, softmax, reductions -----===//
//
// CPU kernels of the Normalization family (ir/ops/Normalization.cpp):
// LayerNorm here, BatchNorm in BatchNorm.cpp, Softmax, LogSoftmax,
// ReduceMean, ReduceSum, ReduceMax, ReduceMin and CumSum in Reduction.cpp, as
// plain loops over f32 or f64 operands. Loops rather than oneDNN because every
// output of these ops may carry a gradient (BatchNorm's running statistics,
// LayerNorm's Mean and InvStdDev) and LayerNorm's scale may broadcast, which
// oneDNN's primitives do not cover. Statistics accumulate in double.
// Backward kernels recompute what they need from the inputs, so they do not
// depend on the forward outputs still being intact.
//
// Threads: LayerNorm's forward splits its rows between threads
// (Parallel.h); each row's sums run in one thread. LayerNorm's backward adds
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

void forwardNormalization(Context &C, const OpCall &Call) {
  switch (Call.Kind) {
  case OpKind::BatchNorm:
    return forwardBatchNorm(C, Call);
  case OpKind::LayerNorm:
    return dispatchFloat(Call, inputAt(Call, 0, "X"), "X",
                         [&](auto T) { layerNormForward<decltype(T)>(Call); });
  case OpKind::Softmax:
  case OpKind::LogSoftmax:
    return forwardSoftmax(Call);
  case OpKind::ReduceMean:
  case OpKind::ReduceSum:
    return forwardReduce(Call);
  case OpKind::ReduceMax:
  case OpKind::ReduceMin:
    return forwardReduceExtreme(Call);
  case OpKind::CumSum:
    return forwardCumSum(Call);
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
    return dispatchFloat(Call, inputAt(Call, 0, "X"), "X", [&](auto T) {
      layerNormBackward<decltype(T)>(Call, OutputGrads, InputGrads);
    });
  case OpKind::Softmax:
  case OpKind::LogSoftmax:
    return backwardSoftmax(Call, OutputGrads, InputGrads);
  case OpKind::ReduceMean:
  case OpKind::ReduceSum:
    return backwardReduce(Call, OutputGrads, InputGrads);
  case OpKind::ReduceMax:
  case OpKind::ReduceMin:
    return backwardReduceExtreme(Call, OutputGrads, InputGrads);
  case OpKind::CumSum:
    return backwardCumSum(Call, OutputGrads, InputGrads);
  default:
    failOp(Call, "is not a Normalization op");
  }
}

} // namespace onnx2soap::rt::cpu
