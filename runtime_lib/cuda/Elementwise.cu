//===- runtime_lib/cuda/Elementwise.cu - Elementwise kernels --------------===//
//
// The CUDA elementwise family's entry points and its unary kinds, twins of
// runtime_lib/cpu/Elementwise.cpp: activations and math (grid-stride loops
// over dense operands, f32 or f64; Relu, Neg, Abs and Clip also i32/i64
// forward),
// Not, and Dropout with the counter-based mask of runtime_lib/DropoutMask.h
// (drawn at each element's index in the whole tensor when the call computes
// one partition, OpCall::GlobalOffset),
// so a GPU run drops exactly the elements a CPU run drops. Cast and the
// broadcasting kinds live in Cast.cu and Broadcast.cu.
//
// Backward kernels recompute what they need from the forward input X rather
// than reading the forward output; Dropout reads its mask output when
// present (and recomputes it otherwise).
//
//===----------------------------------------------------------------------===//
#include "../DropoutMask.h"
#include "Elementwise.cuh"
#include "Loops.cuh"
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>

namespace onnx2soap::rt::cuda {
namespace {
using namespace loops;

constexpr double TwoOverSqrtPi = 1.1283791670955126;  // 2/sqrt(pi)
constexpr double InvSqrt2 = 0.70710678118654752;      // 1/sqrt(2)
constexpr double InvSqrt2Pi = 0.39894228040143268;    // 1/sqrt(2 pi)
constexpr double SqrtTwoOverPi = 0.79788456080286536; // sqrt(2/pi)
constexpr double GeluCubic = 0.044715;

// The f32 and f64 device math functions under one overloaded name each.
#define ONNX2SOAP_DEVICE_MATH(Name, Float, Double)                             \
  __device__ inline float Name(float V) { return Float(V); }                   \
  __device__ inline double Name(double V) { return Double(V); }
ONNX2SOAP_DEVICE_MATH(mathExp, expf, exp)
ONNX2SOAP_DEVICE_MATH(mathTanh, tanhf, tanh)
ONNX2SOAP_DEVICE_MATH(mathErf, erff, erf)
ONNX2SOAP_DEVICE_MATH(mathSqrt, sqrtf, sqrt)
ONNX2SOAP_DEVICE_MATH(mathLog, logf, log)
ONNX2SOAP_DEVICE_MATH(mathAbs, fabsf, fabs)
ONNX2SOAP_DEVICE_MATH(mathExpm1, expm1f, expm1)
ONNX2SOAP_DEVICE_MATH(mathLog1p, log1pf, log1p)
ONNX2SOAP_DEVICE_MATH(mathSin, sinf, sin)
ONNX2SOAP_DEVICE_MATH(mathCos, cosf, cos)
ONNX2SOAP_DEVICE_MATH(mathFloor, floorf, floor)
ONNX2SOAP_DEVICE_MATH(mathCeil, ceilf, ceil)
ONNX2SOAP_DEVICE_MATH(mathRint, rintf, rint)
#undef ONNX2SOAP_DEVICE_MATH

enum class Unary {
  Relu,
  LeakyRelu,
  Sigmoid,
  Tanh,
  Erf,
  GeluErf,
  GeluTanh,
  Sqrt,
  Exp,
  Log,
  Neg,
  Abs,
  Reciprocal,
  Clip,
  HardSigmoid,
  HardSwish,
  Elu,
  Softplus,
  Sin,
  Cos,
  Floor,
  Ceil,
  Round
};

/// Op at V. Alpha and Beta are the kind's parameters (unaryParams): Clip's
/// bounds, HardSigmoid's slope and offset, LeakyRelu's and Elu's alpha.
template <Unary Op, typename T>
__device__ T unaryForward(T V, T Alpha, T Beta) {
  if constexpr (Op == Unary::Relu) {
    return V < 0 ? T(0) : V; // NaN passes through, as in PyTorch
  } else if constexpr (Op == Unary::Neg) {
    if constexpr (std::is_integral_v<T>) // wraps at the minimum
      return T(0 - static_cast<std::make_unsigned_t<T>>(V));
    else
      return -V;
  } else if constexpr (Op == Unary::Abs) {
    if constexpr (std::is_integral_v<T>)
      return V < 0 ? T(0 - static_cast<std::make_unsigned_t<T>>(V)) : V;
    else
      return mathAbs(V);
  } else if constexpr (Op == Unary::LeakyRelu) {
    return V < 0 ? Alpha * V : V;
  } else if constexpr (Op == Unary::Sigmoid) {
    return T(1) / (T(1) + mathExp(-V));
  } else if constexpr (Op == Unary::Tanh) {
    return mathTanh(V);
  } else if constexpr (Op == Unary::Erf) {
    return mathErf(V);
  } else if constexpr (Op == Unary::GeluErf) {
    return T(0.5) * V * (T(1) + mathErf(V * T(InvSqrt2)));
  } else if constexpr (Op == Unary::GeluTanh) {
    T U = T(SqrtTwoOverPi) * (V + T(GeluCubic) * V * V * V);
    return T(0.5) * V * (T(1) + mathTanh(U));
  } else if constexpr (Op == Unary::Sqrt) {
    return mathSqrt(V);
  } else if constexpr (Op == Unary::Exp) {
    return mathExp(V);
  } else if constexpr (Op == Unary::Log) {
    return mathLog(V);
  } else if constexpr (Op == Unary::Clip) {
    // min(max(x, min), max): max wins when min > max; NaN passes.
    T Low = V < Alpha ? Alpha : V;
    return Low > Beta ? Beta : Low;
  } else if constexpr (Op == Unary::HardSigmoid) {
    T Z = Alpha * V + Beta;
    return Z < 0 ? T(0) : (Z > 1 ? T(1) : Z);
  } else if constexpr (Op == Unary::HardSwish) {
    T Z = V + T(3); // x * relu6(x + 3) / 6, as PyTorch computes it
    return V * (Z < 0 ? T(0) : (Z > 6 ? T(6) : Z)) / T(6);
  } else if constexpr (Op == Unary::Elu) {
    return V > 0 ? V : Alpha * mathExpm1(V);
  } else if constexpr (Op == Unary::Softplus) {
    return V > T(20) ? V : mathLog1p(mathExp(V)); // PyTorch's threshold
  } else if constexpr (Op == Unary::Sin) {
    return mathSin(V);
  } else if constexpr (Op == Unary::Cos) {
    return mathCos(V);
  } else if constexpr (Op == Unary::Floor) {
    return mathFloor(V);
  } else if constexpr (Op == Unary::Ceil) {
    return mathCeil(V);
  } else if constexpr (Op == Unary::Round) {
    return mathRint(V); // halves to even, as ONNX
  } else {
    static_assert(Op == Unary::Reciprocal);
    return T(1) / V;
  }
}

/// d(op)/dx at V times the output gradient G.
template <Unary Op, typename T>
__device__ T unaryBackward(T V, T G, T Alpha, T Beta) {
  if constexpr (Op == Unary::Relu) {
    return V > 0 ? G : T(0);
  } else if constexpr (Op == Unary::LeakyRelu) {
    return V > 0 ? G : Alpha * G;
  } else if constexpr (Op == Unary::Sigmoid) {
    T S = T(1) / (T(1) + mathExp(-V));
    return G * S * (T(1) - S);
  } else if constexpr (Op == Unary::Tanh) {
    T Y = mathTanh(V);
    return G * (T(1) - Y * Y);
  } else if constexpr (Op == Unary::Erf) {
    return G * T(TwoOverSqrtPi) * mathExp(-V * V);
  } else if constexpr (Op == Unary::GeluErf) {
    T Cdf = T(0.5) * (T(1) + mathErf(V * T(InvSqrt2)));
    T Pdf = T(InvSqrt2Pi) * mathExp(T(-0.5) * V * V);
    return G * (Cdf + V * Pdf);
  } else if constexpr (Op == Unary::GeluTanh) {
    T U = T(SqrtTwoOverPi) * (V + T(GeluCubic) * V * V * V);
    T Th = mathTanh(U);
    T DU = T(SqrtTwoOverPi) * (T(1) + T(3 * GeluCubic) * V * V);
    return G * (T(0.5) * (T(1) + Th) + T(0.5) * V * (T(1) - Th * Th) * DU);
  } else if constexpr (Op == Unary::Sqrt) {
    return G * T(0.5) / mathSqrt(V);
  } else if constexpr (Op == Unary::Exp) {
    return G * mathExp(V);
  } else if constexpr (Op == Unary::Log) {
    return G / V;
  } else if constexpr (Op == Unary::Neg) {
    return -G;
  } else if constexpr (Op == Unary::Abs) {
    return V > 0 ? G : (V < 0 ? -G : T(0)); // sign(0) = 0, as PyTorch
  } else if constexpr (Op == Unary::Clip) {
    return V > Alpha && V < Beta ? G : T(0); // as PyTorch's hardtanh
  } else if constexpr (Op == Unary::HardSigmoid) {
    T Z = Alpha * V + Beta;
    return Z > 0 && Z < 1 ? Alpha * G : T(0);
  } else if constexpr (Op == Unary::HardSwish) {
    return V < T(-3) ? T(0) : (V <= T(3) ? G * (V / T(3) + T(0.5)) : G);
  } else if constexpr (Op == Unary::Elu) {
    return V > 0 ? G : G * Alpha * mathExp(V);
  } else if constexpr (Op == Unary::Softplus) {
    if (V > T(20))
      return G;
    T E = mathExp(V);
    return G * E / (E + T(1));
  } else if constexpr (Op == Unary::Sin) {
    return G * mathCos(V);
  } else if constexpr (Op == Unary::Cos) {
    return -G * mathSin(V);
  } else if constexpr (Op == Unary::Floor || Op == Unary::Ceil ||
                       Op == Unary::Round) {
    return T(0); // a step function, as PyTorch's gradient
  } else {
    static_assert(Op == Unary::Reciprocal);
    return -G / (V * V);
  }
}

template <Unary Op, typename T> struct ForwardBody {
  const T *In;
  T *Out;
  T Alpha, Beta;
  __device__ void operator()(int64_t I) const {
    Out[I] = unaryForward<Op>(In[I], Alpha, Beta);
  }
};

template <Unary Op, typename T> struct BackwardBody {
  const T *In, *Grad;
  T *Out;
  T Alpha, Beta;
  __device__ void operator()(int64_t I) const {
    Out[I] += unaryBackward<Op>(In[I], Grad[I], Alpha, Beta);
  }
};

void requireOperands(const OpCall &Call, size_t Inputs, size_t Outputs) {
  if (Call.Inputs.size() < Inputs || Call.Outputs.size() < Outputs)
    failOp(Call, "expects " + std::to_string(Inputs) + " input(s) and " +
                     std::to_string(Outputs) + " output(s), got " +
                     std::to_string(Call.Inputs.size()) + " and " +
                     std::to_string(Call.Outputs.size()));
  for (size_t I = 0; I < Inputs; ++I)
    if (!Call.Inputs[I].present())
      failOp(Call, "input " + std::to_string(I) + " is absent");
  for (size_t I = 0; I < Outputs; ++I)
    if (!Call.Outputs[I].present())
      failOp(Call, "output " + std::to_string(I) + " is absent");
}

/// Fails unless V is dense and has X's element count.
void requireLike(const OpCall &Call, const TensorView &V, const TensorView &X,
                 const char *What) {
  requireContiguous(Call, V, What);
  if (V.numElements() != X.numElements())
    failOp(Call, std::string(What) + " has " + std::to_string(V.numElements()) +
                     " elements, input has " + std::to_string(X.numElements()));
}

[[noreturn]] void unsupportedType(const OpCall &Call, DType Type,
                                  const char *Supported) {
  failOp(Call, std::string("element type ") + dtypeName(Type) +
                   " is not supported by the CUDA kernel (" + Supported + ")");
}

Unary unaryOf(const OpCall &Call) {
  switch (Call.Kind) {
  case OpKind::Relu:
    return Unary::Relu;
  case OpKind::LeakyRelu:
    return Unary::LeakyRelu;
  case OpKind::Sigmoid:
    return Unary::Sigmoid;
  case OpKind::Tanh:
    return Unary::Tanh;
  case OpKind::Erf:
    return Unary::Erf;
  case OpKind::Gelu:
    return Call.Attrs.getString("approximate", "none") == "tanh"
               ? Unary::GeluTanh
               : Unary::GeluErf;
  case OpKind::Sqrt:
    return Unary::Sqrt;
  case OpKind::Exp:
    return Unary::Exp;
  case OpKind::Log:
    return Unary::Log;
  case OpKind::Neg:
    return Unary::Neg;
  case OpKind::Abs:
    return Unary::Abs;
  case OpKind::Reciprocal:
    return Unary::Reciprocal;
  case OpKind::Clip:
    return Unary::Clip;
  case OpKind::HardSigmoid:
    return Unary::HardSigmoid;
  case OpKind::HardSwish:
    return Unary::HardSwish;
  case OpKind::Elu:
    return Unary::Elu;
  case OpKind::Softplus:
    return Unary::Softplus;
  case OpKind::Sin:
    return Unary::Sin;
  case OpKind::Cos:
    return Unary::Cos;
  case OpKind::Floor:
    return Unary::Floor;
  case OpKind::Ceil:
    return Unary::Ceil;
  case OpKind::Round:
    return Unary::Round;
  default:
    failOp(Call, "is not a unary elementwise op");
  }
}

/// Launches Body<Op, T>{Args...} over Count elements for the runtime Op.
template <typename T, template <Unary, typename> class Body, typename... A>
void launchUnary(Context &C, const OpCall &Call, Unary Op, int64_t Count,
                 A... Args) {
#define ONNX2SOAP_UNARY_CASE(Name)                                             \
  case Unary::Name:                                                            \
    return forEach(C, Call, Count, Body<Unary::Name, T>{Args...});
  switch (Op) {
    ONNX2SOAP_UNARY_CASE(Relu)
    ONNX2SOAP_UNARY_CASE(LeakyRelu)
    ONNX2SOAP_UNARY_CASE(Sigmoid)
    ONNX2SOAP_UNARY_CASE(Tanh)
    ONNX2SOAP_UNARY_CASE(Erf)
    ONNX2SOAP_UNARY_CASE(GeluErf)
    ONNX2SOAP_UNARY_CASE(GeluTanh)
    ONNX2SOAP_UNARY_CASE(Sqrt)
    ONNX2SOAP_UNARY_CASE(Exp)
    ONNX2SOAP_UNARY_CASE(Log)
    ONNX2SOAP_UNARY_CASE(Neg)
    ONNX2SOAP_UNARY_CASE(Abs)
    ONNX2SOAP_UNARY_CASE(Reciprocal)
    ONNX2SOAP_UNARY_CASE(Clip)
    ONNX2SOAP_UNARY_CASE(HardSigmoid)
    ONNX2SOAP_UNARY_CASE(HardSwish)
    ONNX2SOAP_UNARY_CASE(Elu)
    ONNX2SOAP_UNARY_CASE(Softplus)
    ONNX2SOAP_UNARY_CASE(Sin)
    ONNX2SOAP_UNARY_CASE(Cos)
    ONNX2SOAP_UNARY_CASE(Floor)
    ONNX2SOAP_UNARY_CASE(Ceil)
    ONNX2SOAP_UNARY_CASE(Round)
  }
#undef ONNX2SOAP_UNARY_CASE
}

/// The kind's two parameters for unaryForward / unaryBackward.
std::pair<double, double> unaryParams(const OpCall &Call, Unary Op) {
  switch (Op) {
  case Unary::Clip:
    return {Call.Attrs.getFloat("min", -INFINITY),
            Call.Attrs.getFloat("max", INFINITY)};
  case Unary::HardSigmoid:
    return {Call.Attrs.getFloat("alpha", 0.2),
            Call.Attrs.getFloat("beta", 0.5)};
  case Unary::Elu:
    return {Call.Attrs.getFloat("alpha", 1.0), 0.0};
  default:
    return {Call.Attrs.getFloat("alpha", 0.01), 0.0};
  }
}

void forwardUnary(Context &C, const OpCall &Call) {
  requireOperands(Call, 1, 1);
  const TensorView &X = Call.Inputs[0], &Y = Call.Outputs[0];
  requireContiguous(Call, X, "input");
  requireLike(Call, Y, X, "output");
  requireType(Call, Y, X.Type, "output");
  Unary Op = unaryOf(Call);
  std::pair<double, double> Params = unaryParams(Call, Op);
  double Alpha = Params.first, Beta = Params.second;
  int64_t Count = X.numElements();
  if (visitFloat(X.Type, [&](auto Tag) {
        using T = typename decltype(Tag)::Type;
        launchUnary<T, ForwardBody>(C, Call, Op, Count, X.as<const T>(),
                                    Y.as<T>(), static_cast<T>(Alpha),
                                    static_cast<T>(Beta));
      }))
    return;
  bool IntegerKind = Op == Unary::Relu || Op == Unary::Neg ||
                     Op == Unary::Abs || Op == Unary::Clip;
  if (!IntegerKind || (X.Type != DType::Int32 && X.Type != DType::Int64))
    unsupportedType(Call, X.Type,
                    IntegerKind ? "f32, f64, i32, i64" : "f32, f64");
  // Integers carry no gradient: forward only.
  visitNumeric(X.Type, [&](auto Tag) {
    using T = typename decltype(Tag)::Type;
    if constexpr (std::is_integral_v<T>) {
      const T *In = X.as<const T>();
      T *Out = Y.as<T>();
      if (Op == Unary::Relu)
        forEach(C, Call, Count,
                ForwardBody<Unary::Relu, T>{In, Out, T(0), T(0)});
      else if (Op == Unary::Neg)
        forEach(C, Call, Count,
                ForwardBody<Unary::Neg, T>{In, Out, T(0), T(0)});
      else if (Op == Unary::Clip)
        forEach(
            C, Call, Count,
            ForwardBody<Unary::Clip, T>{
                In, Out,
                attrAs<T>(Call.Attrs, "min", std::numeric_limits<T>::lowest()),
                attrAs<T>(Call.Attrs, "max", std::numeric_limits<T>::max())});
      else
        forEach(C, Call, Count,
                ForwardBody<Unary::Abs, T>{In, Out, T(0), T(0)});
    }
  });
}

void backwardUnary(Context &C, const OpCall &Call, const Views &OutputGrads,
                   const Views &InputGrads) {
  if (InputGrads.empty() || !InputGrads[0].present())
    return;
  requireOperands(Call, 1, 1);
  const TensorView &X = Call.Inputs[0], &DX = InputGrads[0];
  if (OutputGrads.empty() || !OutputGrads[0].present())
    return; // nothing depends on the output: its gradient is zero
  const TensorView &DY = OutputGrads[0];
  requireContiguous(Call, X, "input");
  requireLike(Call, DY, X, "output gradient");
  requireLike(Call, DX, X, "input gradient");
  requireType(Call, DY, X.Type, "output gradient");
  requireType(Call, DX, X.Type, "input gradient");
  Unary Op = unaryOf(Call);
  std::pair<double, double> Params = unaryParams(Call, Op);
  double Alpha = Params.first, Beta = Params.second;
  if (!visitFloat(X.Type, [&](auto Tag) {
        using T = typename decltype(Tag)::Type;
        launchUnary<T, BackwardBody>(
            C, Call, Op, X.numElements(), X.as<const T>(), DY.as<const T>(),
            DX.as<T>(), static_cast<T>(Alpha), static_cast<T>(Beta));
      }))
    unsupportedType(Call, X.Type, "gradients need f32 or f64");
}

struct NotBody {
  const uint8_t *In;
  uint8_t *Out;
  __device__ void operator()(int64_t I) const { Out[I] = In[I] == 0; }
};

void forwardNot(Context &C, const OpCall &Call) {
  requireOperands(Call, 1, 1);
  const TensorView &X = Call.Inputs[0], &Y = Call.Outputs[0];
  requireType(Call, X, DType::Bool, "input");
  requireType(Call, Y, DType::Bool, "output");
  requireContiguous(Call, X, "input");
  requireLike(Call, Y, X, "output");
  forEach(C, Call, X.numElements(),
          NotBody{X.as<const uint8_t>(), Y.as<uint8_t>()});
}

//===-- Dropout -----------------------------------------------------------===//

/// Where a call's elements lie in the whole tensor (OpCall::GlobalOffset,
/// GlobalDims): element I of the call's row-major view is element
/// global(I) of the whole tensor's, as on the CPU.
struct DropoutIndex {
  bool Identity = true; // the call covers the whole tensor
  int Rank = 0;
  int64_t Dims[MaxRank] = {};    // the call's dims
  int64_t Strides[MaxRank] = {}; // the whole tensor's row-major strides
  int64_t Base = 0;              // global index of the call's first element

  __device__ int64_t global(int64_t I) const {
    if (Identity)
      return I;
    int64_t G = Base;
    for (int D = Rank - 1; D >= 0; --D) {
      G += (I % Dims[D]) * Strides[D];
      I /= Dims[D];
    }
    return G;
  }
};

DropoutIndex dropoutIndex(const OpCall &Call) {
  DropoutIndex M;
  if (Call.GlobalOffset.empty() && Call.GlobalDims.empty())
    return M;
  const TensorView &Y = Call.Outputs[0];
  if (Call.GlobalOffset.size() != size_t(Y.Rank) ||
      Call.GlobalDims.size() != size_t(Y.Rank))
    failOp(Call, "the global offset and dims must have the output's rank " +
                     std::to_string(Y.Rank));
  M.Identity = false;
  M.Rank = Y.Rank;
  int64_t Stride = 1;
  for (int D = Y.Rank - 1; D >= 0; --D) {
    int64_t Offset = Call.GlobalOffset[D], Whole = Call.GlobalDims[D];
    if (Offset < 0 || Offset + Y.Dims[D] > Whole)
      failOp(Call, "dim " + std::to_string(D) + ": the output's " +
                       std::to_string(Y.Dims[D]) + " elements at offset " +
                       std::to_string(Offset) + " lie outside the whole " +
                       std::to_string(Whole));
    M.Dims[D] = Y.Dims[D];
    M.Strides[D] = Stride;
    M.Base += Offset * Stride;
    Stride *= Whole;
  }
  return M;
}

struct DropoutParams {
  bool Training;
  uint64_t Stream;
  uint64_t Threshold;
  double Scale;
  DropoutIndex Index;
};

DropoutParams dropoutParams(const OpCall &Call) {
  double Ratio = Call.Attrs.getFloat("ratio", 0.5);
  if (!(Ratio >= 0.0 && Ratio < 1.0))
    failOp(Call, "ratio " + std::to_string(Ratio) + " is outside [0, 1)");
  DropoutParams P;
  P.Training = Call.Attrs.getInt("training", 0) != 0;
  P.Stream = dropoutStream(Call.Attrs.getInt("seed", 0), Call.Step);
  P.Threshold = dropoutThreshold(Ratio);
  P.Scale = 1.0 / (1.0 - Ratio);
  P.Index = dropoutIndex(Call);
  return P;
}

/// The mask output when the call has one, else nullptr.
const TensorView *maskOutput(const OpCall &Call) {
  if (Call.Outputs.size() < 2 || !Call.Outputs[1].present())
    return nullptr;
  const TensorView &M = Call.Outputs[1];
  requireType(Call, M, DType::Bool, "mask");
  requireLike(Call, M, Call.Inputs[0], "mask");
  return &M;
}

template <typename T> struct DropoutForwardBody {
  const T *In;
  T *Out;
  uint8_t *Mask; // nullable
  bool Training;
  uint64_t Stream, Threshold;
  T Scale;
  DropoutIndex Index;
  __device__ void operator()(int64_t I) const {
    bool Keep = !Training || dropoutKeep(Stream, Index.global(I), Threshold);
    Out[I] = !Training ? In[I] : (Keep ? In[I] * Scale : T(0));
    if (Mask)
      Mask[I] = Keep;
  }
};

template <typename T> struct DropoutBackwardBody {
  const T *Grad;
  T *Out;
  const uint8_t *Mask; // nullable: recompute
  bool Training;
  uint64_t Stream, Threshold;
  T Scale;
  DropoutIndex Index;
  __device__ void operator()(int64_t I) const {
    if (!Training) {
      Out[I] += Grad[I];
      return;
    }
    bool Keep =
        Mask ? Mask[I] != 0 : dropoutKeep(Stream, Index.global(I), Threshold);
    if (Keep)
      Out[I] += Grad[I] * Scale;
  }
};

void forwardDropout(Context &C, const OpCall &Call) {
  requireOperands(Call, 1, 1);
  const TensorView &X = Call.Inputs[0], &Y = Call.Outputs[0];
  requireContiguous(Call, X, "input");
  requireLike(Call, Y, X, "output");
  requireType(Call, Y, X.Type, "output");
  if (!visitFloat(X.Type, [&](auto Tag) {
        using T = typename decltype(Tag)::Type;
        const TensorView *M = maskOutput(Call);
        DropoutParams P = dropoutParams(Call);
        forEach(C, Call, X.numElements(),
                DropoutForwardBody<T>{X.as<const T>(), Y.as<T>(),
                                      M ? M->as<uint8_t>() : nullptr,
                                      P.Training, P.Stream, P.Threshold,
                                      static_cast<T>(P.Scale), P.Index});
      }))
    unsupportedType(Call, X.Type, "f32, f64");
}

void backwardDropout(Context &C, const OpCall &Call, const Views &OutputGrads,
                     const Views &InputGrads) {
  if (InputGrads.empty() || !InputGrads[0].present() || OutputGrads.empty() ||
      !OutputGrads[0].present())
    return; // the mask output carries no gradient
  requireOperands(Call, 1, 1);
  const TensorView &X = Call.Inputs[0], &DY = OutputGrads[0],
                   &DX = InputGrads[0];
  requireLike(Call, DY, X, "output gradient");
  requireLike(Call, DX, X, "input gradient");
  requireType(Call, DY, X.Type, "output gradient");
  requireType(Call, DX, X.Type, "input gradient");
  if (!visitFloat(X.Type, [&](auto Tag) {
        using T = typename decltype(Tag)::Type;
        DropoutParams P = dropoutParams(Call);
        const TensorView *M = maskOutput(Call);
        forEach(C, Call, DX.numElements(),
                DropoutBackwardBody<T>{DY.as<const T>(), DX.as<T>(),
                                       M ? M->as<const uint8_t>() : nullptr,
                                       P.Training, P.Stream, P.Threshold,
                                       static_cast<T>(P.Scale), P.Index});
      }))
    unsupportedType(Call, X.Type, "f32, f64");
}

} // namespace

void forwardElementwise(Context &C, const OpCall &Call) {
  switch (Call.Kind) {
  case OpKind::Relu:
  case OpKind::LeakyRelu:
  case OpKind::Sigmoid:
  case OpKind::Tanh:
  case OpKind::Erf:
  case OpKind::Gelu:
  case OpKind::Sqrt:
  case OpKind::Exp:
  case OpKind::Log:
  case OpKind::Neg:
  case OpKind::Abs:
  case OpKind::Reciprocal:
  case OpKind::Clip:
  case OpKind::HardSigmoid:
  case OpKind::HardSwish:
  case OpKind::Elu:
  case OpKind::Softplus:
  case OpKind::Sin:
  case OpKind::Cos:
  case OpKind::Floor:
  case OpKind::Ceil:
  case OpKind::Round:
    return forwardUnary(C, Call);
  case OpKind::Not:
    return forwardNot(C, Call);
  case OpKind::Cast:
    return forwardCast(C, Call);
  case OpKind::Dropout:
    return forwardDropout(C, Call);
  default:
    // The broadcasting kinds; Broadcast.cu rejects anything else.
    return forwardBroadcast(C, Call);
  }
}

void backwardElementwise(Context &C, const OpCall &Call,
                         const Views &OutputGrads, const Views &InputGrads) {
  switch (Call.Kind) {
  case OpKind::Relu:
  case OpKind::LeakyRelu:
  case OpKind::Sigmoid:
  case OpKind::Tanh:
  case OpKind::Erf:
  case OpKind::Gelu:
  case OpKind::Sqrt:
  case OpKind::Exp:
  case OpKind::Log:
  case OpKind::Neg:
  case OpKind::Abs:
  case OpKind::Reciprocal:
  case OpKind::Clip:
  case OpKind::HardSigmoid:
  case OpKind::HardSwish:
  case OpKind::Elu:
  case OpKind::Softplus:
  case OpKind::Sin:
  case OpKind::Cos:
  case OpKind::Floor:
  case OpKind::Ceil:
  case OpKind::Round:
    return backwardUnary(C, Call, OutputGrads, InputGrads);
  case OpKind::Not:
    return; // bool in, bool out: no gradient
  case OpKind::Cast:
    return backwardCast(C, Call, OutputGrads, InputGrads);
  case OpKind::Dropout:
    return backwardDropout(C, Call, OutputGrads, InputGrads);
  default:
    return backwardBroadcast(C, Call, OutputGrads, InputGrads);
  }
}

} // namespace onnx2soap::rt::cuda
