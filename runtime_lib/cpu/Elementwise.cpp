//===- runtime_lib/cpu/Elementwise.cpp - Elementwise kernels --------------===//
//
// The elementwise family's entry points and its unary kinds: activations and
// math (plain loops over dense operands, f32 or f64; Relu, Neg, Abs and Clip
// also i32/i64 forward), Not, and Dropout with its counter-based mask. Cast and
// the broadcasting kinds live in Cast.cpp and Broadcast.cpp.
//
// Backward kernels recompute what they need from the forward input X rather
// than reading the forward output, so they work whatever the executor keeps;
// Dropout reads its mask output when present (and recomputes it otherwise).
// A Dropout call on one partition of the tensor (OpCall::GlobalOffset and
// GlobalDims) draws each element's mask bit at its index in the whole
// tensor, so the partitions' masks make up the whole call's. Large tensors are
// split between threads (Parallel.h); every element is computed as in a serial
// loop.
//
//===----------------------------------------------------------------------===//
#include "Elementwise.h"
#include "Loops.h"
#include "Parallel.h"
#include <cmath>
#include <limits>
#include <string>
#include <type_traits>

namespace onnx2soap::rt::cpu {
namespace {

constexpr double TwoOverSqrtPi = 1.1283791670955126;  // 2/sqrt(pi)
constexpr double InvSqrt2 = 0.70710678118654752;      // 1/sqrt(2)
constexpr double InvSqrt2Pi = 0.39894228040143268;    // 1/sqrt(2 pi)
constexpr double SqrtTwoOverPi = 0.79788456080286536; // sqrt(2/pi)
constexpr double GeluCubic = 0.044715;

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
                   " is not supported by the CPU kernel (" + Supported + ")");
}

template <typename T, typename F>
void mapUnary(const TensorView &X, const TensorView &Y, F Fn) {
  const T *In = X.as<T>();
  T *Out = Y.as<T>();
  parallelChunks(X.numElements(), 1, [&](int64_t Begin, int64_t End) {
    for (int64_t I = Begin; I < End; ++I)
      Out[I] = Fn(In[I]);
  });
}

/// dX += Fn(x, dy) elementwise.
template <typename T, typename F>
void accumulateUnary(const TensorView &X, const TensorView &DY,
                     const TensorView &DX, F Fn) {
  const T *In = X.as<T>(), *G = DY.as<T>();
  T *Out = DX.as<T>();
  parallelChunks(X.numElements(), 1, [&](int64_t Begin, int64_t End) {
    for (int64_t I = Begin; I < End; ++I)
      Out[I] += Fn(In[I], G[I]);
  });
}

/// -V of an integer, wrapping at the most negative value.
template <typename T> T negateWrapping(T V) {
  return static_cast<T>(0 - static_cast<std::make_unsigned_t<T>>(V));
}

/// Relu, Neg, Abs and Clip on i32/i64 (forward only: integers carry no
/// gradient).
template <typename T> void forwardIntegerUnary(const OpCall &Call) {
  const TensorView &X = Call.Inputs[0], &Y = Call.Outputs[0];
  switch (Call.Kind) {
  case OpKind::Clip: {
    T Lo = attrAs<T>(Call.Attrs, "min", std::numeric_limits<T>::lowest());
    T Hi = attrAs<T>(Call.Attrs, "max", std::numeric_limits<T>::max());
    return mapUnary<T>(X, Y, [=](T V) {
      T Low = V < Lo ? Lo : V;
      return Low > Hi ? Hi : Low;
    });
  }
  case OpKind::Relu:
    return mapUnary<T>(X, Y, [](T V) { return V < 0 ? T(0) : V; });
  // In unsigned arithmetic: the most negative value wraps to itself, as on
  // CUDA, with no signed overflow.
  case OpKind::Neg:
    return mapUnary<T>(X, Y, [](T V) { return negateWrapping(V); });
  case OpKind::Abs:
    return mapUnary<T>(X, Y, [](T V) { return V < 0 ? negateWrapping(V) : V; });
  default:
    unsupportedType(Call, X.Type, "f32, f64");
  }
}

template <typename T> void forwardFloatUnary(const OpCall &Call) {
  const TensorView &X = Call.Inputs[0], &Y = Call.Outputs[0];
  switch (Call.Kind) {
  case OpKind::Relu:
    // Written so that NaN passes through, as in PyTorch.
    return mapUnary<T>(X, Y, [](T V) { return V < 0 ? T(0) : V; });
  case OpKind::LeakyRelu: {
    T Alpha = static_cast<T>(Call.Attrs.getFloat("alpha", 0.01));
    return mapUnary<T>(X, Y, [=](T V) { return V < 0 ? Alpha * V : V; });
  }
  case OpKind::Sigmoid:
    return mapUnary<T>(X, Y, [](T V) { return T(1) / (T(1) + std::exp(-V)); });
  case OpKind::Tanh:
    return mapUnary<T>(X, Y, [](T V) { return std::tanh(V); });
  case OpKind::Erf:
    return mapUnary<T>(X, Y, [](T V) { return std::erf(V); });
  case OpKind::Gelu:
    if (Call.Attrs.getString("approximate", "none") == "tanh")
      return mapUnary<T>(X, Y, [](T V) {
        T U = T(SqrtTwoOverPi) * (V + T(GeluCubic) * V * V * V);
        return T(0.5) * V * (T(1) + std::tanh(U));
      });
    return mapUnary<T>(X, Y, [](T V) {
      return T(0.5) * V * (T(1) + std::erf(V * T(InvSqrt2)));
    });
  case OpKind::Sqrt:
    return mapUnary<T>(X, Y, [](T V) { return std::sqrt(V); });
  case OpKind::Exp:
    return mapUnary<T>(X, Y, [](T V) { return std::exp(V); });
  case OpKind::Log:
    return mapUnary<T>(X, Y, [](T V) { return std::log(V); });
  case OpKind::Neg:
    return mapUnary<T>(X, Y, [](T V) { return -V; });
  case OpKind::Abs:
    return mapUnary<T>(X, Y, [](T V) { return std::fabs(V); });
  case OpKind::Reciprocal:
    return mapUnary<T>(X, Y, [](T V) { return T(1) / V; });
  case OpKind::Clip: {
    // min(max(x, min), max): max wins when min > max; NaN passes.
    T Lo = attrAs<T>(Call.Attrs, "min", -std::numeric_limits<T>::infinity());
    T Hi = attrAs<T>(Call.Attrs, "max", std::numeric_limits<T>::infinity());
    return mapUnary<T>(X, Y, [=](T V) {
      T Low = V < Lo ? Lo : V;
      return Low > Hi ? Hi : Low;
    });
  }
  case OpKind::HardSigmoid: {
    T Alpha = static_cast<T>(Call.Attrs.getFloat("alpha", 0.2));
    T Beta = static_cast<T>(Call.Attrs.getFloat("beta", 0.5));
    return mapUnary<T>(X, Y, [=](T V) {
      T Z = Alpha * V + Beta;
      return Z < 0 ? T(0) : (Z > 1 ? T(1) : Z);
    });
  }
  case OpKind::HardSwish:
    // x * relu6(x + 3) / 6, as PyTorch computes it.
    return mapUnary<T>(X, Y, [](T V) {
      T Z = V + T(3);
      return V * (Z < 0 ? T(0) : (Z > 6 ? T(6) : Z)) / T(6);
    });
  case OpKind::Elu: {
    T Alpha = static_cast<T>(Call.Attrs.getFloat("alpha", 1.0));
    return mapUnary<T>(X, Y,
                       [=](T V) { return V > 0 ? V : Alpha * std::expm1(V); });
  }
  case OpKind::Softplus:
    // PyTorch's threshold of 20, where log1p(exp(x)) rounds to x.
    return mapUnary<T>(
        X, Y, [](T V) { return V > T(20) ? V : std::log1p(std::exp(V)); });
  case OpKind::Sin:
    return mapUnary<T>(X, Y, [](T V) { return std::sin(V); });
  case OpKind::Cos:
    return mapUnary<T>(X, Y, [](T V) { return std::cos(V); });
  case OpKind::Floor:
    return mapUnary<T>(X, Y, [](T V) { return std::floor(V); });
  case OpKind::Ceil:
    return mapUnary<T>(X, Y, [](T V) { return std::ceil(V); });
  case OpKind::Round:
    // Halves to even (ONNX's and PyTorch's round): the default rounding
    // mode, which nothing here changes.
    return mapUnary<T>(X, Y, [](T V) { return std::nearbyint(V); });
  default:
    failOp(Call, "is not a unary elementwise op");
  }
}

template <typename T>
void backwardFloatUnary(const OpCall &Call, const TensorView &DY,
                        const TensorView &DX) {
  const TensorView &X = Call.Inputs[0];
  switch (Call.Kind) {
  case OpKind::Relu:
    return accumulateUnary<T>(X, DY, DX,
                              [](T V, T G) { return V > 0 ? G : T(0); });
  case OpKind::LeakyRelu: {
    T Alpha = static_cast<T>(Call.Attrs.getFloat("alpha", 0.01));
    return accumulateUnary<T>(X, DY, DX,
                              [=](T V, T G) { return V > 0 ? G : Alpha * G; });
  }
  case OpKind::Sigmoid:
    return accumulateUnary<T>(X, DY, DX, [](T V, T G) {
      T S = T(1) / (T(1) + std::exp(-V));
      return G * S * (T(1) - S);
    });
  case OpKind::Tanh:
    return accumulateUnary<T>(X, DY, DX, [](T V, T G) {
      T Y = std::tanh(V);
      return G * (T(1) - Y * Y);
    });
  case OpKind::Erf:
    return accumulateUnary<T>(X, DY, DX, [](T V, T G) {
      return G * T(TwoOverSqrtPi) * std::exp(-V * V);
    });
  case OpKind::Gelu:
    if (Call.Attrs.getString("approximate", "none") == "tanh")
      return accumulateUnary<T>(X, DY, DX, [](T V, T G) {
        T U = T(SqrtTwoOverPi) * (V + T(GeluCubic) * V * V * V);
        T Th = std::tanh(U);
        T DU = T(SqrtTwoOverPi) * (T(1) + T(3 * GeluCubic) * V * V);
        return G * (T(0.5) * (T(1) + Th) + T(0.5) * V * (T(1) - Th * Th) * DU);
      });
    return accumulateUnary<T>(X, DY, DX, [](T V, T G) {
      T Cdf = T(0.5) * (T(1) + std::erf(V * T(InvSqrt2)));
      T Pdf = T(InvSqrt2Pi) * std::exp(T(-0.5) * V * V);
      return G * (Cdf + V * Pdf);
    });
  case OpKind::Sqrt:
    return accumulateUnary<T>(
        X, DY, DX, [](T V, T G) { return G * T(0.5) / std::sqrt(V); });
  case OpKind::Exp:
    return accumulateUnary<T>(X, DY, DX,
                              [](T V, T G) { return G * std::exp(V); });
  case OpKind::Log:
    return accumulateUnary<T>(X, DY, DX, [](T V, T G) { return G / V; });
  case OpKind::Neg:
    return accumulateUnary<T>(X, DY, DX, [](T, T G) { return -G; });
  case OpKind::Abs:
    // sign(x) * dy with sign(0) = 0, as PyTorch.
    return accumulateUnary<T>(
        X, DY, DX, [](T V, T G) { return V > 0 ? G : (V < 0 ? -G : T(0)); });
  case OpKind::Reciprocal:
    return accumulateUnary<T>(X, DY, DX, [](T V, T G) { return -G / (V * V); });
  case OpKind::Clip: {
    // Zero at the bounds, as PyTorch's hardtanh (ReLU6).
    T Lo = attrAs<T>(Call.Attrs, "min", -std::numeric_limits<T>::infinity());
    T Hi = attrAs<T>(Call.Attrs, "max", std::numeric_limits<T>::infinity());
    return accumulateUnary<T>(
        X, DY, DX, [=](T V, T G) { return V > Lo && V < Hi ? G : T(0); });
  }
  case OpKind::HardSigmoid: {
    T Alpha = static_cast<T>(Call.Attrs.getFloat("alpha", 0.2));
    T Beta = static_cast<T>(Call.Attrs.getFloat("beta", 0.5));
    return accumulateUnary<T>(X, DY, DX, [=](T V, T G) {
      T Z = Alpha * V + Beta;
      return Z > 0 && Z < 1 ? Alpha * G : T(0);
    });
  }
  case OpKind::HardSwish:
    return accumulateUnary<T>(X, DY, DX, [](T V, T G) {
      return V < T(-3) ? T(0) : (V <= T(3) ? G * (V / T(3) + T(0.5)) : G);
    });
  case OpKind::Elu: {
    T Alpha = static_cast<T>(Call.Attrs.getFloat("alpha", 1.0));
    return accumulateUnary<T>(X, DY, DX, [=](T V, T G) {
      return V > 0 ? G : G * Alpha * std::exp(V);
    });
  }
  case OpKind::Softplus:
    return accumulateUnary<T>(X, DY, DX, [](T V, T G) {
      if (V > T(20))
        return G;
      T E = std::exp(V);
      return G * E / (E + T(1));
    });
  case OpKind::Sin:
    return accumulateUnary<T>(X, DY, DX,
                              [](T V, T G) { return G * std::cos(V); });
  case OpKind::Cos:
    return accumulateUnary<T>(X, DY, DX,
                              [](T V, T G) { return -G * std::sin(V); });
  case OpKind::Floor:
  case OpKind::Ceil:
  case OpKind::Round:
    return; // a step function: zero almost everywhere, as PyTorch's
  default:
    failOp(Call, "is not a unary elementwise op");
  }
}

void forwardUnary(const OpCall &Call) {
  requireOperands(Call, 1, 1);
  const TensorView &X = Call.Inputs[0], &Y = Call.Outputs[0];
  requireContiguous(Call, X, "input");
  requireLike(Call, Y, X, "output");
  requireType(Call, Y, X.Type, "output");
  if (visitFloat(X.Type, [&](auto Tag) {
        forwardFloatUnary<typename decltype(Tag)::Type>(Call);
      }))
    return;
  bool IntegerKind = Call.Kind == OpKind::Relu || Call.Kind == OpKind::Neg ||
                     Call.Kind == OpKind::Abs || Call.Kind == OpKind::Clip;
  if (IntegerKind && X.Type == DType::Int32)
    return forwardIntegerUnary<int32_t>(Call);
  if (IntegerKind && X.Type == DType::Int64)
    return forwardIntegerUnary<int64_t>(Call);
  unsupportedType(Call, X.Type,
                  IntegerKind ? "f32, f64, i32, i64" : "f32, f64");
}

void backwardUnary(const OpCall &Call, const Views &OutputGrads,
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
  if (!visitFloat(X.Type, [&](auto Tag) {
        backwardFloatUnary<typename decltype(Tag)::Type>(Call, DY, DX);
      }))
    unsupportedType(Call, X.Type, "gradients need f32 or f64");
}

void forwardNot(const OpCall &Call) {
  requireOperands(Call, 1, 1);
  const TensorView &X = Call.Inputs[0], &Y = Call.Outputs[0];
  requireType(Call, X, DType::Bool, "input");
  requireType(Call, Y, DType::Bool, "output");
  requireContiguous(Call, X, "input");
  requireLike(Call, Y, X, "output");
  mapUnary<uint8_t>(X, Y, [](uint8_t V) { return uint8_t(V == 0); });
}

//===-- Dropout -----------------------------------------------------------===//

/// Where a call's elements lie in the whole tensor (OpCall::GlobalOffset,
/// GlobalDims): element I of the call's row-major view is element
/// global(I) of the whole tensor's.
struct DropoutIndex {
  bool Identity = true; // the call covers the whole tensor
  int Rank = 0;
  int64_t Dims[MaxRank] = {};    // the call's dims
  int64_t Strides[MaxRank] = {}; // the whole tensor's row-major strides
  int64_t Base = 0;              // global index of the call's first element

  int64_t global(int64_t I) const {
    if (Identity)
      return I;
    int64_t G = Base;
    for (int D = Rank - 1; D >= 0; --D) {
      G += (I % Dims[D]) * Strides[D];
      I /= Dims[D];
    }
    return G;
  }
  /// The length of the innermost dim, along which global indices step by 1.
  int64_t row() const { return Identity || Rank == 0 ? 0 : Dims[Rank - 1]; }
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

  /// Calls Fn(I, Keep) for I in [Begin, End), Keep being element I's mask
  /// bit in training: the global index steps by one along a row and is
  /// recomputed at each row's start.
  template <typename F>
  void forRange(int64_t Begin, int64_t End, F &&Fn) const {
    int64_t Row = Index.row(), G = Index.global(Begin);
    for (int64_t I = Begin; I < End; ++I, ++G) {
      if (Row && I != Begin && I % Row == 0)
        G = Index.global(I);
      Fn(I, dropoutKeep(Stream, G, Threshold));
    }
  }
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

template <typename T> void forwardDropoutTyped(const OpCall &Call) {
  const TensorView &X = Call.Inputs[0], &Y = Call.Outputs[0];
  const TensorView *M = maskOutput(Call);
  DropoutParams P = dropoutParams(Call);
  const T *In = X.as<T>();
  T *Out = Y.as<T>();
  uint8_t *Mask = M ? M->as<uint8_t>() : nullptr;
  int64_t N = X.numElements();
  T Scale = static_cast<T>(P.Scale);
  if (!P.Training) {
    parallelChunks(N, 1, [&](int64_t Begin, int64_t End) {
      for (int64_t I = Begin; I < End; ++I) {
        Out[I] = In[I];
        if (Mask)
          Mask[I] = true;
      }
    });
    return;
  }
  parallelChunks(N, 4, [&](int64_t Begin, int64_t End) {
    P.forRange(Begin, End, [&](int64_t I, bool Keep) {
      Out[I] = Keep ? In[I] * Scale : T(0);
      if (Mask)
        Mask[I] = Keep;
    });
  });
}

template <typename T>
void backwardDropoutTyped(const OpCall &Call, const TensorView &DY,
                          const TensorView &DX) {
  DropoutParams P = dropoutParams(Call);
  const TensorView *M = maskOutput(Call);
  const T *G = DY.as<T>();
  T *Out = DX.as<T>();
  int64_t N = DX.numElements();
  if (!P.Training) {
    parallelChunks(N, 1, [&](int64_t Begin, int64_t End) {
      for (int64_t I = Begin; I < End; ++I)
        Out[I] += G[I];
    });
    return;
  }
  const uint8_t *Mask = M ? M->as<uint8_t>() : nullptr;
  T Scale = static_cast<T>(P.Scale);
  if (Mask) {
    parallelChunks(N, 1, [&](int64_t Begin, int64_t End) {
      for (int64_t I = Begin; I < End; ++I)
        if (Mask[I])
          Out[I] += G[I] * Scale;
    });
    return;
  }
  parallelChunks(N, 4, [&](int64_t Begin, int64_t End) {
    P.forRange(Begin, End, [&](int64_t I, bool Keep) {
      if (Keep)
        Out[I] += G[I] * Scale;
    });
  });
}

void forwardDropout(const OpCall &Call) {
  requireOperands(Call, 1, 1);
  const TensorView &X = Call.Inputs[0], &Y = Call.Outputs[0];
  requireContiguous(Call, X, "input");
  requireLike(Call, Y, X, "output");
  requireType(Call, Y, X.Type, "output");
  if (!visitFloat(X.Type, [&](auto Tag) {
        forwardDropoutTyped<typename decltype(Tag)::Type>(Call);
      }))
    unsupportedType(Call, X.Type, "f32, f64");
}

void backwardDropout(const OpCall &Call, const Views &OutputGrads,
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
        backwardDropoutTyped<typename decltype(Tag)::Type>(Call, DY, DX);
      }))
    unsupportedType(Call, X.Type, "f32, f64");
}

} // namespace

void forwardElementwise(Context &, const OpCall &Call) {
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
    return forwardUnary(Call);
  case OpKind::Not:
    return forwardNot(Call);
  case OpKind::Cast:
    return forwardCast(Call);
  case OpKind::Dropout:
    return forwardDropout(Call);
  default:
    // The broadcasting kinds; Broadcast.cpp rejects anything else.
    return forwardBroadcast(Call);
  }
}

void backwardElementwise(Context &, const OpCall &Call,
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
    return backwardUnary(Call, OutputGrads, InputGrads);
  case OpKind::Not:
    return; // bool in, bool out: no gradient
  case OpKind::Cast:
    return backwardCast(Call, OutputGrads, InputGrads);
  case OpKind::Dropout:
    return backwardDropout(Call, OutputGrads, InputGrads);
  default:
    return backwardBroadcast(Call, OutputGrads, InputGrads);
  }
}

} // namespace onnx2soap::rt::cpu
