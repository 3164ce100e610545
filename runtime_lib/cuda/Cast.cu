//===- runtime_lib/cuda/Cast.cu - Cast between element types -------------===//
//
// Cast for every pair of element types, the twin of runtime_lib/cpu/Cast.cpp
// with the same conversions written as host/device code, so both backends
// give the same bits: f16 and bf16 are encoded from a double with
// round-to-nearest-even (overflow gives infinity, NaN stays NaN); floats
// convert to integers by truncation toward zero, saturating at the integer's
// range (NaN gives 0); anything to bool is `!= 0`. The backward casts the
// output gradient back onto the input's float type; a cast from or to a
// non-float type passes no gradient.
//
//===----------------------------------------------------------------------===//
#include "Elementwise.cuh"
#include "Loops.cuh"
#include <limits>
#include <type_traits>

namespace onnx2soap::rt::cuda {
namespace {
using namespace loops;

/// Encodes V in a binary float format with ExpBits exponent and ManBits
/// stored mantissa bits, rounding to nearest even.
template <int ExpBits, int ManBits>
__host__ __device__ uint16_t encodeSmallFloat(double V) {
  constexpr int Bias = (1 << (ExpBits - 1)) - 1;
  constexpr int MinExp = 1 - Bias;
  constexpr uint16_t Inf = ((1u << ExpBits) - 1) << ManBits;
  uint16_t Sign = signbit(V) ? uint16_t(1u << (ExpBits + ManBits)) : 0;
  if (V != V)
    return Sign | Inf | uint16_t(1u << (ManBits - 1));
  double A = fabs(V);
  // Halfway between the largest finite value and 2^(Bias+1) rounds to the
  // even neighbour, infinity.
  if (A >= ldexp(2.0 - ldexp(1.0, -(ManBits + 1)), Bias))
    return Sign | Inf;
  if (A < ldexp(1.0, MinExp)) // subnormal (may round up to the minimum normal)
    return Sign | static_cast<uint16_t>(nearbyint(ldexp(A, ManBits - MinExp)));
  int E = ilogb(A);
  double Mantissa = nearbyint(ldexp(ldexp(A, -E) - 1.0, ManBits));
  // A mantissa that rounds up to 2^ManBits carries into the exponent, which
  // the addition below does by itself.
  return Sign | static_cast<uint16_t>(((E + Bias) << ManBits) +
                                      static_cast<uint32_t>(Mantissa));
}

template <int ExpBits, int ManBits>
__host__ __device__ double decodeSmallFloat(uint16_t Bits) {
  constexpr int Bias = (1 << (ExpBits - 1)) - 1;
  constexpr uint32_t ExpMask = (1u << ExpBits) - 1;
  double Sign = (Bits >> (ExpBits + ManBits)) & 1 ? -1.0 : 1.0;
  uint32_t Exp = (Bits >> ManBits) & ExpMask;
  uint32_t Man = Bits & ((1u << ManBits) - 1);
  if (Exp == ExpMask)
    return Man ? nan("") : Sign * HUGE_VAL;
  if (Exp == 0)
    return Sign * ldexp(double(Man), 1 - Bias - ManBits);
  return Sign * ldexp(double(Man | (1u << ManBits)), int(Exp) - Bias - ManBits);
}

/// Storage of f16 (IEEE binary16) and bf16 (bfloat16) elements.
template <int ExpBits, int ManBits> struct SmallFloat {
  uint16_t Bits;
  __host__ __device__ static SmallFloat fromDouble(double V) {
    return {encodeSmallFloat<ExpBits, ManBits>(V)};
  }
  __host__ __device__ double toDouble() const {
    return decodeSmallFloat<ExpBits, ManBits>(Bits);
  }
};
using Half = SmallFloat<5, 10>;
using BFloat = SmallFloat<8, 7>;

template <typename T> constexpr bool IsSmallFloat = false;
template <int E, int M> constexpr bool IsSmallFloat<SmallFloat<E, M>> = true;
template <typename T>
constexpr bool IsFloat = std::is_floating_point_v<T> || IsSmallFloat<T>;

/// Bool elements are bytes 0/1.
struct Boolean {
  uint8_t Byte;
};

template <typename T> __device__ double toDouble(T V) {
  if constexpr (IsSmallFloat<T>)
    return V.toDouble();
  else if constexpr (std::is_same_v<T, Boolean>)
    return V.Byte != 0;
  else
    return static_cast<double>(V);
}

template <typename To, typename From> __device__ To convert(From V) {
  if constexpr (std::is_same_v<To, Boolean>) {
    if constexpr (std::is_same_v<From, Boolean>)
      return {uint8_t(V.Byte != 0)};
    else if constexpr (IsFloat<From>)
      return {uint8_t(toDouble(V) != 0)};
    else
      return {uint8_t(V != 0)};
  } else if constexpr (std::is_same_v<From, Boolean>) {
    return convert<To>(uint8_t(V.Byte != 0));
  } else if constexpr (IsSmallFloat<To>) {
    if constexpr (std::is_same_v<From, To>)
      return V;
    else // double holds every f16, bf16, f32 and i32 value exactly
      return To::fromDouble(toDouble(V));
  } else if constexpr (IsSmallFloat<From>) {
    return convert<To>(V.toDouble());
  } else if constexpr (std::is_integral_v<To> &&
                       std::is_floating_point_v<From>) {
    if (V != V)
      return 0;
    // Saturate. The CPU compares in long double; double gives the same
    // answers: the bounds are exact in double or (2^63 - 1, 2^64 - 1) round
    // up to powers of two with no double strictly between bound and power.
    double L = trunc(static_cast<double>(V));
    if (L <= static_cast<double>(std::numeric_limits<To>::min()))
      return std::numeric_limits<To>::min();
    if (L >= static_cast<double>(std::numeric_limits<To>::max()))
      return std::numeric_limits<To>::max();
    return static_cast<To>(L);
  } else {
    return static_cast<To>(V);
  }
}

/// Calls Fn(TypeTag<T>) with T the storage type of any DType.
template <typename F> void visitAny(DType Type, F &&Fn) {
  switch (Type) {
  case DType::Float32:
    return Fn(TypeTag<float>());
  case DType::Float16:
    return Fn(TypeTag<Half>());
  case DType::BFloat16:
    return Fn(TypeTag<BFloat>());
  case DType::Float64:
    return Fn(TypeTag<double>());
  case DType::Int8:
    return Fn(TypeTag<int8_t>());
  case DType::UInt8:
    return Fn(TypeTag<uint8_t>());
  case DType::Int16:
    return Fn(TypeTag<int16_t>());
  case DType::UInt16:
    return Fn(TypeTag<uint16_t>());
  case DType::Int32:
    return Fn(TypeTag<int32_t>());
  case DType::UInt32:
    return Fn(TypeTag<uint32_t>());
  case DType::Int64:
    return Fn(TypeTag<int64_t>());
  case DType::UInt64:
    return Fn(TypeTag<uint64_t>());
  case DType::Bool:
    return Fn(TypeTag<Boolean>());
  }
}

bool isFloat(DType Type) {
  return Type == DType::Float32 || Type == DType::Float16 ||
         Type == DType::BFloat16 || Type == DType::Float64;
}

template <typename To, typename From> struct CastBody {
  const From *Src;
  To *Dst;
  __device__ void operator()(int64_t I) const { Dst[I] = convert<To>(Src[I]); }
};

/// Dst += Src across float types, rounding once into Dst's type.
template <typename To, typename From> struct CastAccumulateBody {
  const From *Src;
  To *Dst;
  __device__ void operator()(int64_t I) const {
    if constexpr (std::is_same_v<To, float>)
      Dst[I] += static_cast<float>(toDouble(Src[I]));
    else
      Dst[I] = convert<To>(toDouble(Dst[I]) + toDouble(Src[I]));
  }
};

/// Out[i] = convert(In[i]), or Out[i] += In[i] when Accumulate (float types
/// only).
void castElements(Context &C, const OpCall &Call, const TensorView &In,
                  const TensorView &Out, bool Accumulate) {
  int64_t Count = In.numElements();
  visitAny(In.Type, [&](auto FromTag) {
    using From = typename decltype(FromTag)::Type;
    visitAny(Out.Type, [&](auto ToTag) {
      using To = typename decltype(ToTag)::Type;
      const From *Src = In.as<const From>();
      To *Dst = Out.as<To>();
      if (!Accumulate)
        return forEach(C, Call, Count, CastBody<To, From>{Src, Dst});
      if constexpr (IsFloat<From> && IsFloat<To>)
        forEach(C, Call, Count, CastAccumulateBody<To, From>{Src, Dst});
    });
  });
}

DType castTarget(const OpCall &Call) {
  const std::string &To = Call.Attrs.getString("to");
  for (unsigned I = 0; I <= static_cast<unsigned>(DType::Bool); ++I)
    if (To == dtypeName(static_cast<DType>(I)))
      return static_cast<DType>(I);
  failOp(Call, "has no valid 'to' type ('" + To + "')");
}

void requireCastOperands(const OpCall &Call) {
  if (Call.Inputs.empty() || Call.Outputs.empty() ||
      !Call.Inputs[0].present() || !Call.Outputs[0].present())
    failOp(Call, "expects one input and one output");
  const TensorView &X = Call.Inputs[0], &Y = Call.Outputs[0];
  requireContiguous(Call, X, "input");
  requireContiguous(Call, Y, "output");
  if (X.numElements() != Y.numElements())
    failOp(Call, "output has " + std::to_string(Y.numElements()) +
                     " elements, input has " + std::to_string(X.numElements()));
  requireType(Call, Y, castTarget(Call), "output");
}

} // namespace

void forwardCast(Context &C, const OpCall &Call) {
  requireCastOperands(Call);
  castElements(C, Call, Call.Inputs[0], Call.Outputs[0], /*Accumulate=*/false);
}

void backwardCast(Context &C, const OpCall &Call, const Views &OutputGrads,
                  const Views &InputGrads) {
  if (InputGrads.empty() || !InputGrads[0].present() || OutputGrads.empty() ||
      !OutputGrads[0].present())
    return;
  requireCastOperands(Call);
  const TensorView &X = Call.Inputs[0], &DY = OutputGrads[0],
                   &DX = InputGrads[0];
  if (!isFloat(X.Type) || !isFloat(Call.Outputs[0].Type))
    return; // zero gradient across non-float types
  requireType(Call, DY, Call.Outputs[0].Type, "output gradient");
  requireType(Call, DX, X.Type, "input gradient");
  requireContiguous(Call, DY, "output gradient");
  requireContiguous(Call, DX, "input gradient");
  if (DY.numElements() != X.numElements() ||
      DX.numElements() != X.numElements())
    failOp(Call, "gradient element counts do not match the input's");
  castElements(C, Call, DY, DX, /*Accumulate=*/true);
}

} // namespace onnx2soap::rt::cuda
