//===- runtime_lib/cuda/Broadcast.cu - Broadcasting elementwise ops -------===//
//
// Add, Sub, Mul, Div, Pow, Max, Min (variadic), Equal, Less, Greater and
// Where with numpy broadcasting up to rank 8, twins of
// runtime_lib/cpu/Broadcast.cpp: a grid-stride kernel over the output's
// index space (Loops.cuh). Arithmetic takes f32, f64, i32 and i64 (Pow's
// exponent any of those, independently of the base); comparisons also bool;
// Where any element type. Gradients (f32/f64) are reduced over the
// broadcast dims by the deterministic reduction of Loops.cuh (no atomics).
//
// Max/Min ties: the gradient is split equally among the inputs that hold
// the selected value. NaN propagates in the forward.
//
// Integer Div by zero fails, as on the CPU: the kernel raises a device flag
// that the host must read, so an integer Div waits for its stream (the one
// synchronization in this family; float Div needs none).
//
//===----------------------------------------------------------------------===//
#include "Elementwise.cuh"
#include "Loops.cuh"
#include <string>
#include <type_traits>
#include <vector>

namespace onnx2soap::rt::cuda {
namespace {
using namespace loops;

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

[[noreturn]] void unsupportedType(const OpCall &Call, DType Type,
                                  const char *Supported) {
  failOp(Call, std::string("element type ") + dtypeName(Type) +
                   " is not supported by the CUDA kernel (" + Supported + ")");
}

/// Calls Fn(TypeTag<T>) for the numeric types and bool (as uint8_t).
template <typename F> bool visitComparable(DType Type, F &&Fn) {
  if (Type == DType::Bool || Type == DType::UInt8) {
    Fn(TypeTag<uint8_t>());
    return true;
  }
  return visitNumeric(Type, Fn);
}

__device__ inline float mathPow(float X, float P) { return powf(X, P); }
__device__ inline double mathPow(double X, double P) { return pow(X, P); }
__device__ inline float mathLog(float X) { return logf(X); }
__device__ inline double mathLog(double X) { return log(X); }

template <typename T> __device__ bool isNan(T V) {
  if constexpr (std::is_floating_point_v<T>)
    return V != V;
  else
    return false;
}

//===-- Forward -----------------------------------------------------------===//

enum class Arith { Add, Sub, Mul, Div };

template <typename T, Arith Op> struct ArithmeticBody {
  const T *A, *B;
  T *Y;
  int *DivideByZero; // integer Div only
  __device__ void operator()(const int64_t *O) const {
    T X = A[O[1]], Z = B[O[2]];
    if constexpr (Op == Arith::Add) {
      Y[O[0]] = T(X + Z);
    } else if constexpr (Op == Arith::Sub) {
      Y[O[0]] = T(X - Z);
    } else if constexpr (Op == Arith::Mul) {
      Y[O[0]] = T(X * Z);
    } else if constexpr (std::is_integral_v<T>) {
      if (Z == 0) {
        *DivideByZero = 1;
        Y[O[0]] = T(0);
      } else {
        // INT_MIN / -1 overflows; wrap as the hardware-independent choice.
        Y[O[0]] =
            Z == -1 ? T(0 - static_cast<std::make_unsigned_t<T>>(X)) : T(X / Z);
      }
    } else {
      Y[O[0]] = X / Z;
    }
  }
};

template <typename T> void forwardArithmetic(Context &C, const OpCall &Call) {
  const TensorView &A = Call.Inputs[0], &B = Call.Inputs[1],
                   &Y = Call.Outputs[0];
  auto S = space<3>(Call, Y, {&Y, &A, &B});
  const T *PA = A.as<const T>(), *PB = B.as<const T>();
  T *PY = Y.as<T>();
  switch (Call.Kind) {
  case OpKind::Add:
    return forEachIndex(C, Call, S,
                        ArithmeticBody<T, Arith::Add>{PA, PB, PY, nullptr});
  case OpKind::Sub:
    return forEachIndex(C, Call, S,
                        ArithmeticBody<T, Arith::Sub>{PA, PB, PY, nullptr});
  case OpKind::Mul:
    return forEachIndex(C, Call, S,
                        ArithmeticBody<T, Arith::Mul>{PA, PB, PY, nullptr});
  case OpKind::Div:
    if constexpr (std::is_integral_v<T>) {
      // The host needs the flag to fail like the CPU: read it back.
      Scratch Flag(C, Call, sizeof(int));
      checkCuda(Call, cudaMemsetAsync(Flag.as<int>(), 0, sizeof(int), C.Stream),
                "cudaMemsetAsync (division flag)");
      forEachIndex(C, Call, S,
                   ArithmeticBody<T, Arith::Div>{PA, PB, PY, Flag.as<int>()});
      int DivideByZero = 0;
      checkCuda(Call,
                cudaMemcpyAsync(&DivideByZero, Flag.as<int>(), sizeof(int),
                                cudaMemcpyDeviceToHost, C.Stream),
                "cudaMemcpyAsync (division flag)");
      checkCuda(Call, cudaStreamSynchronize(C.Stream),
                "cudaStreamSynchronize (division flag)");
      if (DivideByZero)
        failOp(Call, "integer division by zero");
      return;
    } else {
      return forEachIndex(C, Call, S,
                          ArithmeticBody<T, Arith::Div>{PA, PB, PY, nullptr});
    }
  default:
    failOp(Call, "is not an arithmetic op");
  }
}

template <typename T, typename E> __device__ T power(T Base, E Exponent) {
  if constexpr (std::is_floating_point_v<T>)
    return mathPow(Base, static_cast<T>(Exponent));
  else
    return static_cast<T>(
        pow(static_cast<double>(Base), static_cast<double>(Exponent)));
}

template <typename T, typename E> struct PowBody {
  const T *A;
  const E *B;
  T *Y;
  __device__ void operator()(const int64_t *O) const {
    Y[O[0]] = power(A[O[1]], B[O[2]]);
  }
};

void forwardPow(Context &C, const OpCall &Call) {
  const TensorView &A = Call.Inputs[0], &B = Call.Inputs[1],
                   &Y = Call.Outputs[0];
  requireType(Call, Y, A.Type, "output");
  auto S = space<3>(Call, Y, {&Y, &A, &B});
  bool Ok = visitNumeric(A.Type, [&](auto BaseTag) {
    using T = typename decltype(BaseTag)::Type;
    if (!visitNumeric(B.Type, [&](auto ExpTag) {
          using E = typename decltype(ExpTag)::Type;
          forEachIndex(
              C, Call, S,
              PowBody<T, E>{A.as<const T>(), B.as<const E>(), Y.as<T>()});
        }))
      unsupportedType(Call, B.Type, "exponent: f32, f64, i32, i64");
  });
  if (!Ok)
    unsupportedType(Call, A.Type, "base: f32, f64, i32, i64");
}

/// The Max/Min choice: keeps Acc unless X is selected; NaN wins.
template <typename T> __device__ T select(bool IsMax, T Acc, T X) {
  if (isNan(Acc))
    return Acc;
  if (isNan(X))
    return X;
  return (IsMax ? X > Acc : X < Acc) ? X : Acc;
}

template <typename T> struct CopyBody {
  const T *X;
  T *Y;
  __device__ void operator()(const int64_t *O) const { Y[O[0]] = X[O[1]]; }
};

template <typename T> struct SelectBody {
  const T *X;
  T *Y;
  bool IsMax;
  __device__ void operator()(const int64_t *O) const {
    Y[O[0]] = select(IsMax, Y[O[0]], X[O[1]]);
  }
};

/// Out = Max/Min of the inputs broadcast to Out's shape, one pass per input
/// in input order (the CPU's order, so ties and NaNs resolve the same way).
template <typename T>
void extremum(Context &C, const OpCall &Call, const TensorView &Out) {
  bool IsMax = Call.Kind == OpKind::Max;
  const TensorView &X0 = Call.Inputs[0];
  forEachIndex(C, Call, space<2>(Call, Out, {&Out, &X0}),
               CopyBody<T>{X0.as<const T>(), Out.as<T>()});
  for (size_t I = 1; I < Call.Inputs.size(); ++I) {
    const TensorView &X = Call.Inputs[I];
    forEachIndex(C, Call, space<2>(Call, Out, {&Out, &X}),
                 SelectBody<T>{X.as<const T>(), Out.as<T>(), IsMax});
  }
}

enum class Compare { Equal, Less, Greater };

template <typename T, Compare Op> struct CompareBody {
  const T *A, *B;
  uint8_t *Y;
  __device__ void operator()(const int64_t *O) const {
    T X = A[O[1]], Z = B[O[2]];
    bool R;
    if constexpr (Op == Compare::Equal)
      R = X == Z;
    else if constexpr (Op == Compare::Less)
      R = X < Z;
    else
      R = X > Z;
    Y[O[0]] = R ? 1 : 0;
  }
};

template <typename T> void forwardComparison(Context &C, const OpCall &Call) {
  const TensorView &A = Call.Inputs[0], &B = Call.Inputs[1],
                   &Y = Call.Outputs[0];
  auto S = space<3>(Call, Y, {&Y, &A, &B});
  const T *PA = A.as<const T>(), *PB = B.as<const T>();
  uint8_t *PY = Y.as<uint8_t>();
  switch (Call.Kind) {
  case OpKind::Equal:
    return forEachIndex(C, Call, S, CompareBody<T, Compare::Equal>{PA, PB, PY});
  case OpKind::Less:
    return forEachIndex(C, Call, S, CompareBody<T, Compare::Less>{PA, PB, PY});
  case OpKind::Greater:
    return forEachIndex(C, Call, S,
                        CompareBody<T, Compare::Greater>{PA, PB, PY});
  default:
    failOp(Call, "is not a comparison");
  }
}

template <typename Bits> struct WhereBody {
  const uint8_t *Cond;
  const Bits *X, *Z;
  Bits *Y;
  __device__ void operator()(const int64_t *O) const {
    Y[O[0]] = Cond[O[1]] ? X[O[2]] : Z[O[3]];
  }
};

/// Where on elements of sizeof(Bits) bytes (any element type).
template <typename Bits> void forwardWhereBits(Context &C, const OpCall &Call) {
  const TensorView &Cond = Call.Inputs[0], &X = Call.Inputs[1],
                   &Z = Call.Inputs[2], &Y = Call.Outputs[0];
  forEachIndex(C, Call, space<4>(Call, Y, {&Y, &Cond, &X, &Z}),
               WhereBody<Bits>{Cond.as<const uint8_t>(), X.as<const Bits>(),
                               Z.as<const Bits>(), Y.as<Bits>()});
}

void forwardWhere(Context &C, const OpCall &Call) {
  const TensorView &Cond = Call.Inputs[0], &X = Call.Inputs[1],
                   &Z = Call.Inputs[2], &Y = Call.Outputs[0];
  requireType(Call, Cond, DType::Bool, "condition");
  requireType(Call, Z, X.Type, "input 2");
  requireType(Call, Y, X.Type, "output");
  switch (dtypeSize(X.Type)) {
  case 1:
    return forwardWhereBits<uint8_t>(C, Call);
  case 2:
    return forwardWhereBits<uint16_t>(C, Call);
  case 4:
    return forwardWhereBits<uint32_t>(C, Call);
  case 8:
    return forwardWhereBits<uint64_t>(C, Call);
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

/// The gradient term of A (ForB false) or B of an arithmetic op; operands
/// are output gradient, A, B, the input gradient.
template <typename T, Arith Op, bool ForB> struct ArithmeticTerm {
  const T *G, *A, *B;
  __device__ T operator()(const int64_t *O) const {
    T Dy = G[O[0]];
    if constexpr (Op == Arith::Add)
      return Dy;
    else if constexpr (Op == Arith::Sub)
      return ForB ? -Dy : Dy;
    else if constexpr (Op == Arith::Mul)
      return ForB ? Dy * A[O[1]] : Dy * B[O[2]];
    else if constexpr (ForB)
      return -Dy * A[O[1]] / (B[O[2]] * B[O[2]]);
    else
      return Dy / B[O[2]];
  }
};

template <typename T, Arith Op>
void accumulateArithmetic(Context &C, const OpCall &Call, const TensorView &DY,
                          const TensorView *DA, const TensorView *DB) {
  const TensorView &A = Call.Inputs[0], &B = Call.Inputs[1];
  const T *PA = A.as<const T>(), *PB = B.as<const T>(), *G = DY.as<const T>();
  if (DA)
    reduceInto<T, 4>(C, Call, space<4>(Call, DY, {&DY, &A, &B, DA}),
                     DA->as<T>(), ArithmeticTerm<T, Op, false>{G, PA, PB});
  if (DB)
    reduceInto<T, 4>(C, Call, space<4>(Call, DY, {&DY, &A, &B, DB}),
                     DB->as<T>(), ArithmeticTerm<T, Op, true>{G, PA, PB});
}

template <typename T>
void backwardArithmetic(Context &C, const OpCall &Call, const TensorView &DY,
                        const TensorView *DA, const TensorView *DB) {
  switch (Call.Kind) {
  case OpKind::Add:
    return accumulateArithmetic<T, Arith::Add>(C, Call, DY, DA, DB);
  case OpKind::Sub:
    return accumulateArithmetic<T, Arith::Sub>(C, Call, DY, DA, DB);
  case OpKind::Mul:
    return accumulateArithmetic<T, Arith::Mul>(C, Call, DY, DA, DB);
  case OpKind::Div:
    return accumulateArithmetic<T, Arith::Div>(C, Call, DY, DA, DB);
  default:
    failOp(Call, "is not an arithmetic op");
  }
}

template <typename T, typename E> struct PowBaseTerm {
  const T *G, *A;
  const E *B;
  __device__ T operator()(const int64_t *O) const {
    T X = A[O[1]], P = static_cast<T>(B[O[2]]);
    // d/dx x^p = p x^(p-1), 0 where p == 0 (x^0 is constant, even at 0).
    return P == 0 ? T(0) : G[O[0]] * P * mathPow(X, P - T(1));
  }
};

template <typename T, typename E> struct PowExponentTerm {
  const T *G, *A;
  const E *B;
  __device__ E operator()(const int64_t *O) const {
    T X = A[O[1]], P = static_cast<T>(B[O[2]]);
    // PyTorch masks x == 0, p >= 0 (where log x is -inf).
    if (X == 0 && P >= 0)
      return E(0);
    return static_cast<E>(G[O[0]] * mathPow(X, P) * mathLog(X));
  }
};

template <typename T, typename E>
void backwardPowTyped(Context &C, const OpCall &Call, const TensorView &DY,
                      const TensorView *DA, const TensorView *DB) {
  const TensorView &A = Call.Inputs[0], &B = Call.Inputs[1];
  const T *PA = A.as<const T>(), *G = DY.as<const T>();
  const E *PB = B.as<const E>();
  if (DA)
    reduceInto<T, 4>(C, Call, space<4>(Call, DY, {&DY, &A, &B, DA}),
                     DA->as<T>(), PowBaseTerm<T, E>{G, PA, PB});
  if constexpr (std::is_floating_point_v<E>) {
    if (DB)
      reduceInto<E, 4>(C, Call, space<4>(Call, DY, {&DY, &A, &B, DB}),
                       DB->as<E>(), PowExponentTerm<T, E>{G, PA, PB});
  }
}

void backwardPow(Context &C, const OpCall &Call, const TensorView &DY,
                 const TensorView *DA, const TensorView *DB) {
  const TensorView &A = Call.Inputs[0], &B = Call.Inputs[1];
  if (!visitFloat(A.Type, [&](auto BaseTag) {
        using T = typename decltype(BaseTag)::Type;
        if (!visitNumeric(B.Type, [&](auto ExpTag) {
              using E = typename decltype(ExpTag)::Type;
              backwardPowTyped<T, E>(C, Call, DY, DA, DB);
            }))
          unsupportedType(Call, B.Type, "exponent: f32, f64, i32, i64");
      }))
    unsupportedType(Call, A.Type, "gradients need an f32 or f64 base");
}

template <typename T> struct TieBody {
  const T *X, *Selected;
  T *Ties;
  __device__ void operator()(const int64_t *O) const {
    if (X[O[1]] == Selected[O[0]])
      Ties[O[0]] += T(1);
  }
};

/// Operands: output gradient (Selected and Ties share its dense offsets),
/// the input, its gradient.
template <typename T> struct ExtremumTerm {
  const T *G, *X, *Selected, *Ties;
  __device__ T operator()(const int64_t *O) const {
    return X[O[1]] == Selected[O[0]] ? G[O[0]] / Ties[O[0]] : T(0);
  }
};

template <typename T>
void backwardExtremum(Context &C, const OpCall &Call, const TensorView &DY,
                      const Views &InputGrads) {
  // Recompute the selected value and count the inputs that hold it.
  int64_t Count = DY.numElements();
  Scratch Selected(C, Call, Count * sizeof(T)),
      Ties(C, Call, Count * sizeof(T));
  checkCuda(Call, cudaMemsetAsync(Ties.as<T>(), 0, Count * sizeof(T), C.Stream),
            "cudaMemsetAsync (ties)");
  TensorView Sel =
      TensorView::contiguous(DY.Type, DY.dims(), Selected.as<void>());
  extremum<T>(C, Call, Sel);
  for (const TensorView &X : Call.Inputs)
    forEachIndex(
        C, Call, space<2>(Call, Sel, {&Sel, &X}),
        TieBody<T>{X.as<const T>(), Selected.as<const T>(), Ties.as<T>()});
  for (size_t I = 0; I < Call.Inputs.size(); ++I) {
    const TensorView *D = inputGrad(Call, InputGrads, I);
    if (!D)
      continue;
    const TensorView &X = Call.Inputs[I];
    reduceInto<T, 3>(C, Call, space<3>(Call, DY, {&DY, &X, D}), D->as<T>(),
                     ExtremumTerm<T>{DY.as<const T>(), X.as<const T>(),
                                     Selected.as<const T>(),
                                     Ties.as<const T>()});
  }
}

/// Operands: output gradient, condition, the input gradient.
template <typename T> struct WhereTerm {
  const T *G;
  const uint8_t *Cond;
  bool WhenTrue;
  __device__ T operator()(const int64_t *O) const {
    return (Cond[O[1]] != 0) == WhenTrue ? G[O[0]] : T(0);
  }
};

template <typename T>
void backwardWhere(Context &C, const OpCall &Call, const TensorView &DY,
                   const TensorView *DX, const TensorView *DZ) {
  const TensorView &Cond = Call.Inputs[0];
  for (const TensorView *D : {DX, DZ})
    if (D)
      reduceInto<T, 3>(
          C, Call, space<3>(Call, DY, {&DY, &Cond, D}), D->as<T>(),
          WhereTerm<T>{DY.as<const T>(), Cond.as<const uint8_t>(), D == DX});
}

} // namespace

void forwardBroadcast(Context &C, const OpCall &Call) {
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
    return forwardPow(C, Call);
  case OpKind::Where:
    return forwardWhere(C, Call);
  case OpKind::Equal:
  case OpKind::Less:
  case OpKind::Greater:
    requireType(Call, Call.Inputs[1], A.Type, "input 1");
    requireType(Call, Y, DType::Bool, "output");
    if (!visitComparable(A.Type, [&](auto Tag) {
          forwardComparison<typename decltype(Tag)::Type>(C, Call);
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
          extremum<T>(C, Call, Y);
        else
          forwardArithmetic<T>(C, Call);
      }))
    unsupportedType(Call, A.Type, "f32, f64, i32, i64");
}

void backwardBroadcast(Context &C, const OpCall &Call, const Views &OutputGrads,
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
    return backwardPow(C, Call, DY, inputGrad(Call, InputGrads, 0),
                       inputGrad(Call, InputGrads, 1));
  if (Call.Kind == OpKind::Where) {
    // The condition is bool: no gradient.
    const TensorView *DX = inputGrad(Call, InputGrads, 1),
                     *DZ = inputGrad(Call, InputGrads, 2);
    if (!visitFloat(DY.Type, [&](auto Tag) {
          backwardWhere<typename decltype(Tag)::Type>(C, Call, DY, DX, DZ);
        }))
      unsupportedType(Call, DY.Type, "gradients need f32 or f64");
    return;
  }
  if (!visitFloat(DY.Type, [&](auto Tag) {
        using T = typename decltype(Tag)::Type;
        if (isVariadic(Call.Kind))
          backwardExtremum<T>(C, Call, DY, InputGrads);
        else
          backwardArithmetic<T>(C, Call, DY, inputGrad(Call, InputGrads, 0),
                                inputGrad(Call, InputGrads, 1));
      }))
    unsupportedType(Call, DY.Type, "gradients need f32 or f64");
}

} // namespace onnx2soap::rt::cuda
