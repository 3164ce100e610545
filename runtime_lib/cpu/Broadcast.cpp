//===- runtime_lib/cpu/Broadcast.cpp - Broadcasting elementwise ops -------===//
//
// Add, Sub, Mul, Div, Pow, Max, Min (variadic), Equal, Less, Greater and
// Where with numpy broadcasting up to rank 8, as loops over the output's
// index space (Loops.h). Arithmetic takes f32, f64, i32 and i64 (Pow's
// exponent any of those, independently of the base); comparisons also bool;
// Where any element type. Gradients (f32/f64) are reduced over the
// broadcast dims by adding through stride-0 dims of the input gradient.
//
// Max/Min ties: the gradient is split equally among the inputs that hold
// the selected value (torch.maximum gives half to each of two tied inputs;
// with k tied inputs each gets 1/k). NaN propagates in the forward.
//
//===----------------------------------------------------------------------===//
#include "Elementwise.h"
#include "Loops.h"
#include <atomic>
#include <cmath>
#include <string>
#include <type_traits>
#include <vector>

namespace onnx2soap::rt::cpu {
namespace {

bool isVariadic(OpKind Kind) {
  return Kind == OpKind::Max || Kind == OpKind::Min;
}

/// Checks operand counts, presence and density.
void requireBroadcastOperands(const OpCall &Call) {
  size_t Expected = Call.Kind == OpKind::Where ? 3 : 2;
  bool CountOk = isVariadic(Call.Kind) ? !Call.Inputs.empty()
                                       : Call.Inputs.size() == Expected;
  if (!CountOk || Call.Outputs.empty())
    failOp(Call, "has " + std::to_string(Call.Inputs.size()) + " inputs and " +
                     std::to_string(Call.Outputs.size()) + " outputs");
  for (size_t I = 0; I < Call.Inputs.size(); ++I) {
    if (!Call.Inputs[I].present())
      failOp(Call, "input " + std::to_string(I) + " is absent");
    requireContiguous(Call, Call.Inputs[I], "input");
  }
  if (!Call.Outputs[0].present())
    failOp(Call, "output is absent");
  requireContiguous(Call, Call.Outputs[0], "output");
}

std::string shapeString(const TensorView &V) {
  std::string S = "[";
  for (int I = 0; I < V.Rank; ++I)
    S += (I ? "," : "") + std::to_string(V.Dims[I]);
  return S + "]";
}

/// The loop space of Out and Operands broadcast onto it, or failOp.
template <int N>
LoopSpace<N> space(const OpCall &Call, const TensorView &Out,
                   const std::array<const TensorView *, N> &Operands) {
  LoopSpace<N> S;
  if (!broadcastSpace<N>(Out, Operands, S)) {
    std::string List;
    for (const TensorView *V : Operands)
      List += " " + shapeString(*V);
    failOp(Call, "operand shapes" + List + " do not broadcast to " +
                     shapeString(Out));
  }
  return S;
}

[[noreturn]] void unsupportedType(const OpCall &Call, DType Type,
                                  const char *Supported) {
  failOp(Call, std::string("element type ") + dtypeName(Type) +
                   " is not supported by the CPU kernel (" + Supported + ")");
}

/// Calls Fn(TypeTag<T>) for the numeric types and bool (as uint8_t).
template <typename F> bool visitComparable(DType Type, F &&Fn) {
  if (Type == DType::Bool || Type == DType::UInt8) {
    Fn(TypeTag<uint8_t>());
    return true;
  }
  return visitNumeric(Type, Fn);
}

//===-- Forward -----------------------------------------------------------===//

template <typename T> void forwardArithmetic(const OpCall &Call) {
  const TensorView &A = Call.Inputs[0], &B = Call.Inputs[1],
                   &Y = Call.Outputs[0];
  auto S = space<3>(Call, Y, {&Y, &A, &B});
  const T *PA = A.as<T>(), *PB = B.as<T>();
  T *PY = Y.as<T>();
  auto Run = [&](auto Fn) {
    forEachIndexParallel(
        S, [&](const int64_t *O) { PY[O[0]] = Fn(PA[O[1]], PB[O[2]]); });
  };
  switch (Call.Kind) {
  case OpKind::Add:
    return Run([](T X, T Z) { return T(X + Z); });
  case OpKind::Sub:
    return Run([](T X, T Z) { return T(X - Z); });
  case OpKind::Mul:
    return Run([](T X, T Z) { return T(X * Z); });
  case OpKind::Div:
    if constexpr (std::is_integral_v<T>) {
      std::atomic<bool> DivideByZero = false;
      Run([&](T X, T Z) {
        if (Z == 0) {
          DivideByZero.store(true, std::memory_order_relaxed);
          return T(0);
        }
        // INT_MIN / -1 overflows; wrap as the hardware-independent choice.
        return Z == -1 ? T(0 - static_cast<std::make_unsigned_t<T>>(X))
                       : T(X / Z);
      });
      if (DivideByZero)
        failOp(Call, "integer division by zero");
      return;
    } else {
      return Run([](T X, T Z) { return X / Z; });
    }
  default:
    failOp(Call, "is not an arithmetic op");
  }
}

template <typename T, typename E> T power(T Base, E Exponent) {
  if constexpr (std::is_floating_point_v<T>)
    return std::pow(Base, static_cast<T>(Exponent));
  else
    return static_cast<T>(
        std::pow(static_cast<double>(Base), static_cast<double>(Exponent)));
}

void forwardPow(const OpCall &Call) {
  const TensorView &A = Call.Inputs[0], &B = Call.Inputs[1],
                   &Y = Call.Outputs[0];
  requireType(Call, Y, A.Type, "output");
  auto S = space<3>(Call, Y, {&Y, &A, &B});
  bool Ok = visitNumeric(A.Type, [&](auto BaseTag) {
    using T = typename decltype(BaseTag)::Type;
    if (!visitNumeric(B.Type, [&](auto ExpTag) {
          using E = typename decltype(ExpTag)::Type;
          const T *PA = A.as<T>();
          const E *PB = B.as<E>();
          T *PY = Y.as<T>();
          forEachIndex(S, [&](const int64_t *O) {
            PY[O[0]] = power(PA[O[1]], PB[O[2]]);
          });
        }))
      unsupportedType(Call, B.Type, "exponent: f32, f64, i32, i64");
  });
  if (!Ok)
    unsupportedType(Call, A.Type, "base: f32, f64, i32, i64");
}

/// The Max/Min choice: keeps Acc unless X is selected; NaN wins.
template <typename T> T select(bool IsMax, T Acc, T X) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(Acc))
      return Acc;
    if (std::isnan(X))
      return X;
  }
  return (IsMax ? X > Acc : X < Acc) ? X : Acc;
}

/// Out = Max/Min of the inputs broadcast to Out's shape.
template <typename T> void extremum(const OpCall &Call, const TensorView &Out) {
  bool IsMax = Call.Kind == OpKind::Max;
  T *PY = Out.as<T>();
  const TensorView &X0 = Call.Inputs[0];
  const T *P0 = X0.as<T>();
  forEachIndex(space<2>(Call, Out, {&Out, &X0}),
               [&](const int64_t *O) { PY[O[0]] = P0[O[1]]; });
  for (size_t I = 1; I < Call.Inputs.size(); ++I) {
    const TensorView &X = Call.Inputs[I];
    const T *PX = X.as<T>();
    forEachIndex(space<2>(Call, Out, {&Out, &X}), [&](const int64_t *O) {
      PY[O[0]] = select(IsMax, PY[O[0]], PX[O[1]]);
    });
  }
}

template <typename T> void forwardComparison(const OpCall &Call) {
  const TensorView &A = Call.Inputs[0], &B = Call.Inputs[1],
                   &Y = Call.Outputs[0];
  auto S = space<3>(Call, Y, {&Y, &A, &B});
  const T *PA = A.as<T>(), *PB = B.as<T>();
  uint8_t *PY = Y.as<uint8_t>();
  auto Run = [&](auto Fn) {
    forEachIndex(S, [&](const int64_t *O) {
      PY[O[0]] = Fn(PA[O[1]], PB[O[2]]) ? 1 : 0;
    });
  };
  switch (Call.Kind) {
  case OpKind::Equal:
    return Run([](T X, T Z) { return X == Z; });
  case OpKind::Less:
    return Run([](T X, T Z) { return X < Z; });
  case OpKind::Greater:
    return Run([](T X, T Z) { return X > Z; });
  default:
    failOp(Call, "is not a comparison");
  }
}

/// Where on elements of Bytes bytes (any element type).
template <typename Bits> void forwardWhereBits(const OpCall &Call) {
  const TensorView &C = Call.Inputs[0], &X = Call.Inputs[1],
                   &Z = Call.Inputs[2], &Y = Call.Outputs[0];
  const uint8_t *PC = C.as<uint8_t>();
  const Bits *PX = X.as<Bits>(), *PZ = Z.as<Bits>();
  Bits *PY = Y.as<Bits>();
  forEachIndex(space<4>(Call, Y, {&Y, &C, &X, &Z}), [&](const int64_t *O) {
    PY[O[0]] = PC[O[1]] ? PX[O[2]] : PZ[O[3]];
  });
}

void forwardWhere(const OpCall &Call) {
  const TensorView &C = Call.Inputs[0], &X = Call.Inputs[1],
                   &Z = Call.Inputs[2], &Y = Call.Outputs[0];
  requireType(Call, C, DType::Bool, "condition");
  requireType(Call, Z, X.Type, "input 2");
  requireType(Call, Y, X.Type, "output");
  switch (dtypeSize(X.Type)) {
  case 1:
    return forwardWhereBits<uint8_t>(Call);
  case 2:
    return forwardWhereBits<uint16_t>(Call);
  case 4:
    return forwardWhereBits<uint32_t>(Call);
  case 8:
    return forwardWhereBits<uint64_t>(Call);
  default:
    unsupportedType(Call, X.Type, "1, 2, 4 or 8 byte elements");
  }
}

//===-- Backward ----------------------------------------------------------===//

/// The present gradient of input I (checked against the input), or nullptr.
const TensorView *inputGrad(const OpCall &Call, const Views &InputGrads,
                            size_t I) {
  if (I >= InputGrads.size() || !InputGrads[I].present())
    return nullptr;
  const TensorView &G = InputGrads[I], &X = Call.Inputs[I];
  requireContiguous(Call, G, "input gradient");
  requireType(Call, G, X.Type, "input gradient");
  if (G.dims() != X.dims())
    failOp(Call, "input gradient " + std::to_string(I) + " has shape " +
                     shapeString(G) + ", the input " + shapeString(X));
  return &G;
}

template <typename T>
void backwardArithmetic(const OpCall &Call, const TensorView &DY,
                        const TensorView *DA, const TensorView *DB) {
  const TensorView &A = Call.Inputs[0], &B = Call.Inputs[1];
  const T *PA = A.as<T>(), *PB = B.as<T>(), *G = DY.as<T>();
  // Operands: output gradient, A, B, the input gradient being filled.
  auto Accumulate = [&](const TensorView *D, auto Fn) {
    if (!D)
      return;
    T *PD = D->as<T>();
    auto Body = [&](const int64_t *O) {
      PD[O[3]] += Fn(G[O[0]], PA[O[1]], PB[O[2]]);
    };
    // Threads only when no two indices add into one element of D.
    auto S = space<4>(Call, DY, {&DY, &A, &B, D});
    if (D->numElements() == DY.numElements())
      forEachIndexParallel(S, Body);
    else
      forEachIndex(S, Body);
  };
  switch (Call.Kind) {
  case OpKind::Add:
    Accumulate(DA, [](T Dy, T, T) { return Dy; });
    return Accumulate(DB, [](T Dy, T, T) { return Dy; });
  case OpKind::Sub:
    Accumulate(DA, [](T Dy, T, T) { return Dy; });
    return Accumulate(DB, [](T Dy, T, T) { return -Dy; });
  case OpKind::Mul:
    Accumulate(DA, [](T Dy, T, T Z) { return Dy * Z; });
    return Accumulate(DB, [](T Dy, T X, T) { return Dy * X; });
  case OpKind::Div:
    Accumulate(DA, [](T Dy, T, T Z) { return Dy / Z; });
    return Accumulate(DB, [](T Dy, T X, T Z) { return -Dy * X / (Z * Z); });
  default:
    failOp(Call, "is not an arithmetic op");
  }
}

template <typename T, typename E>
void backwardPowTyped(const OpCall &Call, const TensorView &DY,
                      const TensorView *DA, const TensorView *DB) {
  const TensorView &A = Call.Inputs[0], &B = Call.Inputs[1];
  const T *PA = A.as<T>(), *G = DY.as<T>();
  const E *PB = B.as<E>();
  if (DA) {
    T *PD = DA->as<T>();
    forEachIndex(space<4>(Call, DY, {&DY, &A, &B, DA}), [&](const int64_t *O) {
      T X = PA[O[1]], P = static_cast<T>(PB[O[2]]);
      // d/dx x^p = p x^(p-1), 0 where p == 0 (x^0 is constant, even at 0).
      PD[O[3]] += P == 0 ? T(0) : G[O[0]] * P * std::pow(X, P - T(1));
    });
  }
  if constexpr (std::is_floating_point_v<E>) {
    if (DB) {
      E *PD = DB->as<E>();
      forEachIndex(
          space<4>(Call, DY, {&DY, &A, &B, DB}), [&](const int64_t *O) {
            T X = PA[O[1]], P = static_cast<T>(PB[O[2]]);
            // PyTorch masks x == 0, p >= 0 (where log x is -inf).
            if (X == 0 && P >= 0)
              return;
            PD[O[3]] += static_cast<E>(G[O[0]] * std::pow(X, P) * std::log(X));
          });
    }
  }
}

void backwardPow(const OpCall &Call, const TensorView &DY, const TensorView *DA,
                 const TensorView *DB) {
  const TensorView &A = Call.Inputs[0], &B = Call.Inputs[1];
  if (!visitFloat(A.Type, [&](auto BaseTag) {
        using T = typename decltype(BaseTag)::Type;
        if (!visitNumeric(B.Type, [&](auto ExpTag) {
              using E = typename decltype(ExpTag)::Type;
              backwardPowTyped<T, E>(Call, DY, DA, DB);
            }))
          unsupportedType(Call, B.Type, "exponent: f32, f64, i32, i64");
      }))
    unsupportedType(Call, A.Type, "gradients need an f32 or f64 base");
}

template <typename T>
void backwardExtremum(const OpCall &Call, const TensorView &DY,
                      const Views &InputGrads) {
  // Recompute the selected value and count the inputs that hold it.
  // Both are dense with DY's shape, so they share its offsets.
  std::vector<T> Selected(DY.numElements()), Ties(DY.numElements(), T(0));
  TensorView Sel = TensorView::contiguous(DY.Type, DY.dims(), Selected.data());
  extremum<T>(Call, Sel);
  for (const TensorView &X : Call.Inputs) {
    const T *PX = X.as<T>();
    forEachIndex(space<2>(Call, Sel, {&Sel, &X}), [&](const int64_t *O) {
      if (PX[O[1]] == Selected[O[0]])
        Ties[O[0]] += T(1);
    });
  }
  const T *G = DY.as<T>();
  for (size_t I = 0; I < Call.Inputs.size(); ++I) {
    const TensorView *D = inputGrad(Call, InputGrads, I);
    if (!D)
      continue;
    const TensorView &X = Call.Inputs[I];
    const T *PX = X.as<T>();
    T *PD = D->as<T>();
    forEachIndex(space<3>(Call, DY, {&DY, &X, D}), [&](const int64_t *O) {
      if (PX[O[1]] == Selected[O[0]])
        PD[O[2]] += G[O[0]] / Ties[O[0]];
    });
  }
}

template <typename T>
void backwardWhere(const OpCall &Call, const TensorView &DY,
                   const TensorView *DX, const TensorView *DZ) {
  const TensorView &C = Call.Inputs[0];
  const uint8_t *PC = C.as<uint8_t>();
  const T *G = DY.as<T>();
  auto Accumulate = [&](const TensorView *D, bool WhenTrue) {
    if (!D)
      return;
    T *PD = D->as<T>();
    forEachIndex(space<3>(Call, DY, {&DY, &C, D}), [&](const int64_t *O) {
      if ((PC[O[1]] != 0) == WhenTrue)
        PD[O[2]] += G[O[0]];
    });
  };
  Accumulate(DX, true);
  Accumulate(DZ, false);
}

} // namespace

void forwardBroadcast(const OpCall &Call) {
  switch (Call.Kind) {
  case OpKind::Add:
  case OpKind::Sub:
  case OpKind::Mul:
  case OpKind::Div:
  case OpKind::Pow:
  case OpKind::Max:
  case OpKind::Min:
  case OpKind::Equal:
  case OpKind::Less:
  case OpKind::Greater:
  case OpKind::Where:
    break;
  default:
    failOp(Call, "is not an elementwise op");
  }
  requireBroadcastOperands(Call);
  const TensorView &A = Call.Inputs[0], &Y = Call.Outputs[0];
  switch (Call.Kind) {
  case OpKind::Pow:
    return forwardPow(Call);
  case OpKind::Where:
    return forwardWhere(Call);
  case OpKind::Equal:
  case OpKind::Less:
  case OpKind::Greater:
    requireType(Call, Call.Inputs[1], A.Type, "input 1");
    requireType(Call, Y, DType::Bool, "output");
    if (!visitComparable(A.Type, [&](auto Tag) {
          forwardComparison<typename decltype(Tag)::Type>(Call);
        }))
      unsupportedType(Call, A.Type, "f32, f64, i32, i64, bool");
    return;
  default:
    break;
  }
  for (size_t I = 1; I < Call.Inputs.size(); ++I)
    requireType(Call, Call.Inputs[I], A.Type, "input");
  requireType(Call, Y, A.Type, "output");
  if (!visitNumeric(A.Type, [&](auto Tag) {
        using T = typename decltype(Tag)::Type;
        if (isVariadic(Call.Kind))
          extremum<T>(Call, Y);
        else
          forwardArithmetic<T>(Call);
      }))
    unsupportedType(Call, A.Type, "f32, f64, i32, i64");
}

void backwardBroadcast(const OpCall &Call, const Views &OutputGrads,
                       const Views &InputGrads) {
  switch (Call.Kind) {
  case OpKind::Equal:
  case OpKind::Less:
  case OpKind::Greater:
    return; // bool outputs: zero gradient
  case OpKind::Add:
  case OpKind::Sub:
  case OpKind::Mul:
  case OpKind::Div:
  case OpKind::Pow:
  case OpKind::Max:
  case OpKind::Min:
  case OpKind::Where:
    break;
  default:
    failOp(Call, "is not an elementwise op");
  }
  bool Any = false;
  for (const TensorView &G : InputGrads)
    Any |= G.present();
  if (!Any || OutputGrads.empty() || !OutputGrads[0].present())
    return;
  requireBroadcastOperands(Call);
  const TensorView &DY = OutputGrads[0], &Y = Call.Outputs[0];
  requireContiguous(Call, DY, "output gradient");
  requireType(Call, DY, Y.Type, "output gradient");
  if (DY.dims() != Y.dims())
    failOp(Call, "output gradient has shape " + shapeString(DY) +
                     ", the output " + shapeString(Y));
  if (Call.Kind == OpKind::Pow)
    return backwardPow(Call, DY, inputGrad(Call, InputGrads, 0),
                       inputGrad(Call, InputGrads, 1));
  if (Call.Kind == OpKind::Where) {
    // The condition is bool: no gradient.
    const TensorView *DX = inputGrad(Call, InputGrads, 1),
                     *DZ = inputGrad(Call, InputGrads, 2);
    if (!visitFloat(DY.Type, [&](auto Tag) {
          backwardWhere<typename decltype(Tag)::Type>(Call, DY, DX, DZ);
        }))
      unsupportedType(Call, DY.Type, "gradients need f32 or f64");
    return;
  }
  if (!visitFloat(DY.Type, [&](auto Tag) {
        using T = typename decltype(Tag)::Type;
        if (isVariadic(Call.Kind))
          backwardExtremum<T>(Call, DY, InputGrads);
        else
          backwardArithmetic<T>(Call, DY, inputGrad(Call, InputGrads, 0),
                                inputGrad(Call, InputGrads, 1));
      }))
    unsupportedType(Call, DY.Type, "gradients need f32 or f64");
}

} // namespace onnx2soap::rt::cpu
