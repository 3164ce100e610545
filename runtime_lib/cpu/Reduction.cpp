//===- runtime_lib/cpu/Reduction.cpp - Softmax and reductions -------------===//
//
// Softmax / LogSoftmax over one axis and ReduceMean / ReduceSum over a set of
// axes, as loops (ir/ops/Normalization.cpp gives the semantics). Softmax
// works on lanes: X viewed as [Outer, Axis, Inner], one lane per (outer,
// inner) pair. Backward recomputes the softmax from X rather than reading
// the forward output.
//
//===----------------------------------------------------------------------===//
#include "Reduction.h"
#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

namespace onnx2soap::rt::cpu {
namespace {

const TensorView &operand(const OpCall &Call, const Views &Vs, size_t I,
                          const char *What) {
  if (I >= Vs.size() || !Vs[I].present())
    failOp(Call, std::string("missing ") + What);
  requireContiguous(Call, Vs[I], What);
  return Vs[I];
}

/// A present gradient view (absent otherwise), checked against Like.
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

template <typename F>
void dispatchFloat(const OpCall &Call, DType Type, F &&Fn) {
  if (Type == DType::Float32)
    return Fn(float{});
  if (Type == DType::Float64)
    return Fn(double{});
  failOp(Call, std::string("element type ") + dtypeName(Type) +
                   " is not supported, the CPU kernel needs f32 or f64");
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

/// Writes softmax (or log-softmax) of the lane starting at In (stride
/// Stride) into Out (stride OutStride).
template <typename T, typename U>
void softmaxLane(const T *In, int64_t Stride, U *Out, int64_t OutStride,
                 int64_t Count, bool Log) {
  double Max = -INFINITY;
  for (int64_t A = 0; A < Count; ++A)
    Max = std::max<double>(Max, In[A * Stride]);
  double Sum = 0;
  for (int64_t A = 0; A < Count; ++A)
    Sum += std::exp(In[A * Stride] - Max);
  double LogSum = Max + std::log(Sum);
  for (int64_t A = 0; A < Count; ++A) {
    double V = In[A * Stride] - LogSum;
    Out[A * OutStride] = static_cast<U>(Log ? V : std::exp(V));
  }
}

template <typename T> void softmaxForward(const OpCall &Call) {
  const TensorView &X = operand(Call, Call.Inputs, 0, "input");
  const TensorView &Y = operand(Call, Call.Outputs, 0, "output");
  requireType(Call, Y, X.Type, "output");
  if (Y.numElements() != X.numElements())
    failOp(Call, "output does not match the input's shape");
  Lanes L = softmaxLanes(Call, X);
  bool Log = Call.Kind == OpKind::LogSoftmax;
  for (int64_t O = 0; O < L.Outer; ++O)
    for (int64_t I = 0; I < L.Inner; ++I) {
      int64_t Base = O * L.Axis * L.Inner + I;
      softmaxLane(X.as<T>() + Base, L.Inner, Y.as<T>() + Base, L.Inner, L.Axis,
                  Log);
    }
}

template <typename T>
void softmaxBackward(const OpCall &Call, const Views &OutGrads,
                     const Views &InGrads) {
  const TensorView &X = operand(Call, Call.Inputs, 0, "input");
  TensorView DX = gradientAt(Call, InGrads, 0, X, "input gradient");
  TensorView GY = gradientAt(Call, OutGrads, 0, X, "output gradient");
  if (!DX.present() || !GY.present())
    return;
  Lanes L = softmaxLanes(Call, X);
  std::vector<double> Prob(L.Axis);
  bool Log = Call.Kind == OpKind::LogSoftmax;
  for (int64_t O = 0; O < L.Outer; ++O)
    for (int64_t I = 0; I < L.Inner; ++I) {
      int64_t Base = O * L.Axis * L.Inner + I;
      softmaxLane(X.as<T>() + Base, L.Inner, Prob.data(), 1, L.Axis, false);
      const T *G = GY.as<T>() + Base;
      T *D = DX.as<T>() + Base;
      // Softmax: dx = y (g - sum g y). LogSoftmax: dx = g - softmax sum g.
      double Sum = 0;
      for (int64_t A = 0; A < L.Axis; ++A)
        Sum += G[A * L.Inner] * (Log ? 1.0 : Prob[A]);
      for (int64_t A = 0; A < L.Axis; ++A) {
        double Gv = G[A * L.Inner];
        D[A * L.Inner] +=
            static_cast<T>(Log ? Gv - Prob[A] * Sum : Prob[A] * (Gv - Sum));
      }
    }
}

//===-- ReduceMean, ReduceSum ---------------------------------------------===//

struct Reduction {
  /// For each input dim, the stride of its output position (0 if reduced).
  std::vector<int64_t> OutStrides;
  int64_t OutCount = 1, Reduced = 1;
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
  R.OutStrides.assign(X.Rank, 0);
  for (int I = X.Rank - 1; I >= 0; --I) {
    if (IsReduced[I]) {
      R.Reduced *= X.Dims[I];
      continue;
    }
    R.OutStrides[I] = R.OutCount;
    R.OutCount *= X.Dims[I];
  }
  if (Y.numElements() != R.OutCount)
    failOp(Call, "output has " + std::to_string(Y.numElements()) +
                     " elements, the reduction gives " +
                     std::to_string(R.OutCount));
  return R;
}

/// Calls Fn(InIndex, OutIndex) for every element of X in row-major order.
template <typename F>
void forEachElement(const TensorView &X, const Reduction &R, F &&Fn) {
  int64_t Count = X.numElements();
  if (Count == 0)
    return;
  if (X.Rank == 0)
    return Fn(int64_t(0), int64_t(0));
  std::vector<int64_t> Index(X.Rank, 0);
  int Last = X.Rank - 1;
  int64_t Out = 0, InnerDim = X.Dims[Last], InnerStride = R.OutStrides[Last];
  for (int64_t In = 0; In < Count; In += InnerDim) {
    for (int64_t J = 0; J < InnerDim; ++J)
      Fn(In + J, Out + J * InnerStride);
    // Advance the odometer over the outer dims.
    for (int D = Last - 1; D >= 0; --D) {
      Out += R.OutStrides[D];
      if (++Index[D] < X.Dims[D])
        break;
      Out -= Index[D] * R.OutStrides[D];
      Index[D] = 0;
    }
  }
}

template <typename T, typename Acc> void reduceForward(const OpCall &Call) {
  const TensorView &X = operand(Call, Call.Inputs, 0, "input");
  const TensorView &Y = operand(Call, Call.Outputs, 0, "output");
  requireType(Call, Y, X.Type, "output");
  Reduction R = reduction(Call, X, Y);
  std::vector<Acc> Sum(R.OutCount, Acc(0));
  const T *In = X.as<T>();
  forEachElement(X, R, [&](int64_t I, int64_t O) { Sum[O] += In[I]; });
  bool Mean = Call.Kind == OpKind::ReduceMean;
  for (int64_t O = 0; O < R.OutCount; ++O)
    Y.as<T>()[O] = static_cast<T>(
        Mean && R.Reduced ? Sum[O] / static_cast<Acc>(R.Reduced) : Sum[O]);
}

template <typename T>
void reduceBackward(const OpCall &Call, const Views &OutGrads,
                    const Views &InGrads) {
  const TensorView &X = operand(Call, Call.Inputs, 0, "input");
  TensorView DX = gradientAt(Call, InGrads, 0, X, "input gradient");
  if (!DX.present() || OutGrads.empty() || !OutGrads[0].present())
    return;
  const TensorView &GY = operand(Call, OutGrads, 0, "output gradient");
  requireType(Call, GY, X.Type, "output gradient");
  Reduction R = reduction(Call, X, GY);
  double Scale = Call.Kind == OpKind::ReduceMean && R.Reduced
                     ? 1.0 / static_cast<double>(R.Reduced)
                     : 1.0;
  const T *G = GY.as<T>();
  T *D = DX.as<T>();
  forEachElement(X, R, [&](int64_t I, int64_t O) {
    D[I] += static_cast<T>(G[O] * Scale);
  });
}

//===-- ReduceMax, ReduceMin ----------------------------------------------===//

/// Whether V replaces Best as the running extreme: larger (ReduceMax) or
/// smaller; a NaN replaces anything and nothing replaces a NaN.
template <typename T> bool replaces(T V, T Best, bool Max) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(Best))
      return false;
    if (std::isnan(V))
      return true;
  }
  return Max ? V > Best : V < Best;
}

/// The extreme of each output's inputs.
template <typename T>
std::vector<T> extremes(const TensorView &X, const Reduction &R, bool Max) {
  std::vector<T> Best(R.OutCount);
  std::vector<bool> Seen(R.OutCount, false);
  const T *In = X.as<T>();
  forEachElement(X, R, [&](int64_t I, int64_t O) {
    if (!Seen[O] || replaces(In[I], Best[O], Max)) {
      Best[O] = In[I];
      Seen[O] = true;
    }
  });
  return Best;
}

template <typename T> void extremeForward(const OpCall &Call) {
  const TensorView &X = operand(Call, Call.Inputs, 0, "input");
  const TensorView &Y = operand(Call, Call.Outputs, 0, "output");
  requireType(Call, Y, X.Type, "output");
  Reduction R = reduction(Call, X, Y);
  if (R.Reduced == 0)
    failOp(Call, "reduces an empty set");
  std::vector<T> Best = extremes<T>(X, R, Call.Kind == OpKind::ReduceMax);
  std::copy(Best.begin(), Best.end(), Y.as<T>());
}

template <typename T>
void extremeBackward(const OpCall &Call, const Views &OutGrads,
                     const Views &InGrads) {
  const TensorView &X = operand(Call, Call.Inputs, 0, "input");
  TensorView DX = gradientAt(Call, InGrads, 0, X, "input gradient");
  if (!DX.present() || OutGrads.empty() || !OutGrads[0].present())
    return;
  const TensorView &GY = operand(Call, OutGrads, 0, "output gradient");
  requireType(Call, GY, X.Type, "output gradient");
  Reduction R = reduction(Call, X, GY);
  std::vector<T> Best = extremes<T>(X, R, Call.Kind == OpKind::ReduceMax);
  const T *In = X.as<T>();
  std::vector<int64_t> Ties(R.OutCount, 0);
  forEachElement(X, R,
                 [&](int64_t I, int64_t O) { Ties[O] += In[I] == Best[O]; });
  const T *G = GY.as<T>();
  T *D = DX.as<T>();
  forEachElement(X, R, [&](int64_t I, int64_t O) {
    if (In[I] == Best[O])
      D[I] += static_cast<T>(G[O] / static_cast<T>(Ties[O]));
  });
}

} // namespace

void forwardReduceExtreme(const OpCall &Call) {
  switch (operand(Call, Call.Inputs, 0, "input").Type) {
  case DType::Float32:
    return extremeForward<float>(Call);
  case DType::Float64:
    return extremeForward<double>(Call);
  case DType::Int32:
    return extremeForward<int32_t>(Call);
  case DType::Int64:
    return extremeForward<int64_t>(Call);
  default:
    failOp(Call, std::string("element type ") + dtypeName(Call.Inputs[0].Type) +
                     " is not supported, the CPU kernel needs f32, f64, "
                     "i32 or i64");
  }
}

void backwardReduceExtreme(const OpCall &Call, const Views &OutputGrads,
                           const Views &InputGrads) {
  dispatchFloat(Call, operand(Call, Call.Inputs, 0, "input").Type, [&](auto T) {
    extremeBackward<decltype(T)>(Call, OutputGrads, InputGrads);
  });
}

//===-- CumSum ------------------------------------------------------------===//

namespace {

/// Writes into Out (stride Stride) the running sums of the Count elements
/// of In (the same stride), from the last one back when Reverse, each sum
/// without its own element when Exclusive; with Accumulate, adds them to
/// Out instead. Floats sum in double, integers in uint64 (wrapping, as the
/// type does when stored back).
template <typename T>
void scanLane(const T *In, T *Out, int64_t Stride, int64_t Count,
              bool Exclusive, bool Reverse, bool Accumulate) {
  using Sum = std::conditional_t<std::is_floating_point_v<T>, double, uint64_t>;
  Sum Running = 0;
  for (int64_t K = 0; K < Count; ++K) {
    int64_t At = (Reverse ? Count - 1 - K : K) * Stride;
    Sum Before = Running;
    Running += static_cast<Sum>(In[At]);
    T V = static_cast<T>(Exclusive ? Before : Running);
    Out[At] = Accumulate ? static_cast<T>(Out[At] + V) : V;
  }
}

template <typename T>
void cumSum(const OpCall &Call, const TensorView &X, const TensorView &Y,
            bool Reverse, bool Accumulate) {
  Lanes L = softmaxLanes(Call, X);
  bool Exclusive = Call.Attrs.getInt("exclusive", 0) != 0;
  for (int64_t O = 0; O < L.Outer; ++O)
    for (int64_t I = 0; I < L.Inner; ++I) {
      int64_t Base = O * L.Axis * L.Inner + I;
      scanLane(X.as<T>() + Base, Y.as<T>() + Base, L.Inner, L.Axis, Exclusive,
               Reverse, Accumulate);
    }
}

} // namespace

void forwardCumSum(const OpCall &Call) {
  const TensorView &X = operand(Call, Call.Inputs, 0, "input");
  const TensorView &Y = operand(Call, Call.Outputs, 0, "output");
  requireType(Call, Y, X.Type, "output");
  if (Y.numElements() != X.numElements())
    failOp(Call, "output does not match the input's shape");
  bool Reverse = Call.Attrs.getInt("reverse", 0) != 0;
  switch (X.Type) {
  case DType::Float32:
    return cumSum<float>(Call, X, Y, Reverse, false);
  case DType::Float64:
    return cumSum<double>(Call, X, Y, Reverse, false);
  case DType::Int32:
    return cumSum<int32_t>(Call, X, Y, Reverse, false);
  case DType::Int64:
    return cumSum<int64_t>(Call, X, Y, Reverse, false);
  default:
    failOp(Call, std::string("element type ") + dtypeName(X.Type) +
                     " is not supported, the CPU kernel needs f32, f64, "
                     "i32 or i64");
  }
}

void backwardCumSum(const OpCall &Call, const Views &OutputGrads,
                    const Views &InputGrads) {
  const TensorView &X = operand(Call, Call.Inputs, 0, "input");
  dispatchFloat(Call, X.Type, [&](auto T) {
    using U = decltype(T);
    TensorView DX = gradientAt(Call, InputGrads, 0, X, "input gradient");
    TensorView GY = gradientAt(Call, OutputGrads, 0, X, "output gradient");
    if (!DX.present() || !GY.present())
      return;
    // Element i reaches the outputs after it (before it when reversed):
    // its gradient is theirs summed the other way, as exclusive as the op.
    bool Reverse = Call.Attrs.getInt("reverse", 0) != 0;
    cumSum<U>(Call, GY, DX, !Reverse, true);
  });
}

void forwardSoftmax(const OpCall &Call) {
  dispatchFloat(Call, operand(Call, Call.Inputs, 0, "input").Type,
                [&](auto T) { softmaxForward<decltype(T)>(Call); });
}

void backwardSoftmax(const OpCall &Call, const Views &OutputGrads,
                     const Views &InputGrads) {
  dispatchFloat(Call, operand(Call, Call.Inputs, 0, "input").Type, [&](auto T) {
    softmaxBackward<decltype(T)>(Call, OutputGrads, InputGrads);
  });
}

void forwardReduce(const OpCall &Call) {
  switch (operand(Call, Call.Inputs, 0, "input").Type) {
  case DType::Float32:
    return reduceForward<float, double>(Call);
  case DType::Float64:
    return reduceForward<double, double>(Call);
  case DType::Int32:
    return reduceForward<int32_t, int64_t>(Call);
  case DType::Int64:
    return reduceForward<int64_t, int64_t>(Call);
  default:
    failOp(Call, std::string("element type ") + dtypeName(Call.Inputs[0].Type) +
                     " is not supported, the CPU kernel needs f32, f64, "
                     "i32 or i64");
  }
}

void backwardReduce(const OpCall &Call, const Views &OutputGrads,
                    const Views &InputGrads) {
  dispatchFloat(Call, operand(Call, Call.Inputs, 0, "input").Type, [&](auto T) {
    reduceBackward<decltype(T)>(Call, OutputGrads, InputGrads);
  });
}

} // namespace onnx2soap::rt::cpu
