//===- onnx_import/ConstTensor.cpp - Small tensors known at import time ---===//
//
// Decoding follows onnx.proto: raw_data is little-endian in the element
// type's layout; otherwise float_data holds FLOAT, int32_data the narrow
// integer, bool and 16-bit float types (as bit patterns for the floats),
// int64_data INT64, double_data DOUBLE and uint64_data UINT32 / UINT64.
//
//===----------------------------------------------------------------------===//
#include "onnx_import/ConstTensor.h"
#include "ir/Error.h"
#include "llvm/Support/FormatVariadic.h"
#include <cmath>
#include <cstring>
#include <limits>

namespace onnx2soap::onnx_import {

using ir::DType;

std::optional<DType> dtypeFromOnnx(int32_t OnnxType) {
  switch (OnnxType) {
  case onnx::TensorProto::FLOAT:
    return DType::Float32;
  case onnx::TensorProto::UINT8:
    return DType::UInt8;
  case onnx::TensorProto::INT8:
    return DType::Int8;
  case onnx::TensorProto::UINT16:
    return DType::UInt16;
  case onnx::TensorProto::INT16:
    return DType::Int16;
  case onnx::TensorProto::INT32:
    return DType::Int32;
  case onnx::TensorProto::INT64:
    return DType::Int64;
  case onnx::TensorProto::BOOL:
    return DType::Bool;
  case onnx::TensorProto::FLOAT16:
    return DType::Float16;
  case onnx::TensorProto::DOUBLE:
    return DType::Float64;
  case onnx::TensorProto::UINT32:
    return DType::UInt32;
  case onnx::TensorProto::UINT64:
    return DType::UInt64;
  case onnx::TensorProto::BFLOAT16:
    return DType::BFloat16;
  default:
    return std::nullopt;
  }
}

llvm::StringRef onnxTypeName(int32_t OnnxType) {
  if (onnx::TensorProto::DataType_IsValid(OnnxType))
    return onnx::TensorProto::DataType_Name(
        static_cast<onnx::TensorProto::DataType>(OnnxType));
  switch (OnnxType) { // added after onnx 1.12's proto
  case 17:
    return "FLOAT8E4M3FN";
  case 18:
    return "FLOAT8E4M3FNUZ";
  case 19:
    return "FLOAT8E5M2";
  case 20:
    return "FLOAT8E5M2FNUZ";
  case 21:
    return "UINT4";
  case 22:
    return "INT4";
  case 23:
    return "FLOAT4E2M1";
  case 24:
    return "FLOAT8E8M0";
  case 25:
    return "UINT2";
  case 26:
    return "INT2";
  case 27:
    return "FLOAT6E2M3";
  case 28:
    return "FLOAT6E3M2";
  default:
    return "unknown type";
  }
}

float halfToFloat(uint16_t Bits) {
  uint32_t Sign = (Bits >> 15) & 1, Exponent = (Bits >> 10) & 0x1f,
           Mantissa = Bits & 0x3ff;
  float Value;
  if (Exponent == 0)
    Value = std::ldexp(static_cast<float>(Mantissa), -24);
  else if (Exponent == 31)
    Value = Mantissa ? NAN : INFINITY;
  else
    Value = std::ldexp(static_cast<float>(Mantissa | 0x400),
                       static_cast<int>(Exponent) - 25);
  return Sign ? -Value : Value;
}

uint16_t floatToHalf(float Value) {
  uint32_t Bits;
  std::memcpy(&Bits, &Value, sizeof Bits);
  uint32_t Sign = (Bits >> 16) & 0x8000;
  int32_t Exponent = static_cast<int32_t>((Bits >> 23) & 0xff) - 127 + 15;
  uint32_t Mantissa = Bits & 0x7fffff;
  if (((Bits >> 23) & 0xff) == 0xff)
    return Sign | 0x7c00 | (Mantissa ? 0x200 : 0);
  if (Exponent >= 31)
    return Sign | 0x7c00;
  if (Exponent <= 0) {
    if (Exponent < -10)
      return Sign;
    Mantissa |= 0x800000;
    uint32_t Shift = 14 - Exponent;
    uint32_t Half = Mantissa >> Shift;
    uint32_t Rest = Mantissa & ((1u << Shift) - 1), Mid = 1u << (Shift - 1);
    if (Rest > Mid || (Rest == Mid && (Half & 1)))
      ++Half;
    return Sign | Half;
  }
  uint32_t Half = Sign | (Exponent << 10) | (Mantissa >> 13);
  uint32_t Rest = Mantissa & 0x1fff;
  if (Rest > 0x1000 || (Rest == 0x1000 && (Half & 1)))
    ++Half; // may carry into the exponent, which is the correct rounding
  return Half;
}

static float bfloatToFloat(uint16_t Bits) {
  uint32_t Wide = static_cast<uint32_t>(Bits) << 16;
  float Value;
  std::memcpy(&Value, &Wide, sizeof Value);
  return Value;
}

static uint16_t floatToBfloat(float Value) {
  uint32_t Bits;
  std::memcpy(&Bits, &Value, sizeof Bits);
  if ((Bits & 0x7fffffff) > 0x7f800000)
    return 0x7fc0;
  Bits += 0x7fff + ((Bits >> 16) & 1); // round to nearest even
  return static_cast<uint16_t>(Bits >> 16);
}

ConstTensor ConstTensor::zeros(DType Type, ir::Shape Dims) {
  ConstTensor T;
  T.Type = Type;
  T.Dims = std::move(Dims);
  if (T.isFloat())
    T.Floats.assign(T.numElements(), 0.0);
  else
    T.Ints.assign(T.numElements(), 0);
  return T;
}

/// Wraps V into the range of an integer type, as a C cast would.
static int64_t wrapInt(int64_t V, DType Type) {
  switch (Type) {
  case DType::Int8:
    return static_cast<int8_t>(V);
  case DType::UInt8:
    return static_cast<uint8_t>(V);
  case DType::Int16:
    return static_cast<int16_t>(V);
  case DType::UInt16:
    return static_cast<uint16_t>(V);
  case DType::Int32:
    return static_cast<int32_t>(V);
  case DType::UInt32:
    return static_cast<uint32_t>(V);
  case DType::Bool:
    return V != 0;
  default:
    return V;
  }
}

/// The integer of T nearest to L (an integral value), as int64 (uint64 by
/// its bits).
template <typename T> static int64_t clampTo(long double L) {
  if (L <= static_cast<long double>(std::numeric_limits<T>::min()))
    return static_cast<int64_t>(std::numeric_limits<T>::min());
  if (L >= static_cast<long double>(std::numeric_limits<T>::max()))
    return static_cast<int64_t>(std::numeric_limits<T>::max());
  return static_cast<int64_t>(static_cast<T>(L));
}

/// V truncated toward zero and saturated at Type's range, NaN as 0: what
/// the kernels' Cast computes (runtime_lib/cpu/Cast.cpp; CUDA's conversions
/// saturate too), so that a Cast folded at import time gives the values the
/// program would. ONNX leaves out-of-range casts undefined.
static int64_t saturatingInt(double V, DType Type) {
  if (std::isnan(V))
    return 0;
  long double L = std::trunc(static_cast<long double>(V));
  switch (Type) {
  case DType::Int8:
    return clampTo<int8_t>(L);
  case DType::UInt8:
    return clampTo<uint8_t>(L);
  case DType::Int16:
    return clampTo<int16_t>(L);
  case DType::UInt16:
    return clampTo<uint16_t>(L);
  case DType::Int32:
    return clampTo<int32_t>(L);
  case DType::UInt32:
    return clampTo<uint32_t>(L);
  case DType::UInt64:
    return clampTo<uint64_t>(L);
  default:
    return clampTo<int64_t>(L);
  }
}

ConstTensor ConstTensor::cast(DType To) const {
  ConstTensor Out;
  Out.Type = To;
  Out.Dims = Dims;
  int64_t N = numElements();
  if (ir::isFloatingPoint(To)) {
    Out.Floats.resize(N);
    for (int64_t I = 0; I < N; ++I) {
      double V = floatAt(I);
      if (To == DType::Float32)
        V = static_cast<float>(V);
      else if (To == DType::Float16)
        V = halfToFloat(floatToHalf(static_cast<float>(V)));
      else if (To == DType::BFloat16)
        V = bfloatToFloat(floatToBfloat(static_cast<float>(V)));
      Out.Floats[I] = V;
    }
  } else {
    Out.Ints.resize(N);
    for (int64_t I = 0; I < N; ++I) {
      if (!isFloat()) {
        Out.Ints[I] = wrapInt(Ints[I], To);
        continue;
      }
      double V = Floats[I];
      if (To == DType::Bool)
        Out.Ints[I] = V != 0.0;
      else
        Out.Ints[I] = saturatingInt(V, To);
    }
  }
  return Out;
}

template <typename T> static void put(std::vector<char> &Out, T Value) {
  char Bytes[sizeof(T)];
  std::memcpy(Bytes, &Value, sizeof(T));
  Out.insert(Out.end(), Bytes, Bytes + sizeof(T));
}

std::vector<char> ConstTensor::toBytes() const {
  std::vector<char> Out;
  int64_t N = numElements();
  Out.reserve(N * ir::dtypeSize(Type));
  for (int64_t I = 0; I < N; ++I) {
    switch (Type) {
    case DType::Float32:
      put<float>(Out, static_cast<float>(Floats[I]));
      break;
    case DType::Float64:
      put<double>(Out, Floats[I]);
      break;
    case DType::Float16:
      put<uint16_t>(Out, floatToHalf(static_cast<float>(Floats[I])));
      break;
    case DType::BFloat16:
      put<uint16_t>(Out, floatToBfloat(static_cast<float>(Floats[I])));
      break;
    case DType::Int8:
      put<int8_t>(Out, static_cast<int8_t>(Ints[I]));
      break;
    case DType::UInt8:
    case DType::Bool:
      put<uint8_t>(Out, static_cast<uint8_t>(Ints[I]));
      break;
    case DType::Int16:
      put<int16_t>(Out, static_cast<int16_t>(Ints[I]));
      break;
    case DType::UInt16:
      put<uint16_t>(Out, static_cast<uint16_t>(Ints[I]));
      break;
    case DType::Int32:
      put<int32_t>(Out, static_cast<int32_t>(Ints[I]));
      break;
    case DType::UInt32:
      put<uint32_t>(Out, static_cast<uint32_t>(Ints[I]));
      break;
    case DType::Int64:
    case DType::UInt64:
      put<int64_t>(Out, Ints[I]);
      break;
    }
  }
  return Out;
}

template <typename T> static T get(const char *Data, int64_t I) {
  T Value;
  std::memcpy(&Value, Data + I * sizeof(T), sizeof(T));
  return Value;
}

static llvm::Error countMismatch(const onnx::TensorProto &Meta, int64_t Have,
                                 int64_t Want) {
  return fail(
      llvm::formatv("tensor '{0}' holds {1} values but its shape {2} needs {3}",
                    Meta.name(), Have,
                    ir::formatShape(llvm::ArrayRef<int64_t>(
                        Meta.dims().data(), Meta.dims().size())),
                    Want));
}

llvm::Expected<ConstTensor> decodeTensor(const onnx::TensorProto &Meta,
                                         llvm::StringRef Raw, bool HasRaw) {
  std::optional<DType> Type = dtypeFromOnnx(Meta.data_type());
  if (!Type)
    return fail(llvm::formatv("tensor '{0}' has unsupported element type {1}",
                              Meta.name(), onnxTypeName(Meta.data_type())));
  ConstTensor T;
  T.Type = *Type;
  T.Dims.assign(Meta.dims().begin(), Meta.dims().end());
  auto Count = ir::checkedNumElements(T.Dims);
  if (!Count || *Count > MaxFoldedElements)
    return fail(llvm::formatv("tensor '{0}' has invalid or too large dims {1}",
                              Meta.name(), ir::formatShape(T.Dims)));
  int64_t N = *Count;
  bool Float = T.isFloat();
  if (Float)
    T.Floats.resize(N);
  else
    T.Ints.resize(N);

  if (HasRaw) {
    int64_t Size = ir::dtypeSize(*Type);
    if (static_cast<int64_t>(Raw.size()) != N * Size)
      return countMismatch(Meta, Raw.size() / Size, N);
    const char *D = Raw.data();
    for (int64_t I = 0; I < N; ++I) {
      switch (*Type) {
      case DType::Float32:
        T.Floats[I] = get<float>(D, I);
        break;
      case DType::Float64:
        T.Floats[I] = get<double>(D, I);
        break;
      case DType::Float16:
        T.Floats[I] = halfToFloat(get<uint16_t>(D, I));
        break;
      case DType::BFloat16:
        T.Floats[I] = bfloatToFloat(get<uint16_t>(D, I));
        break;
      case DType::Int8:
        T.Ints[I] = get<int8_t>(D, I);
        break;
      case DType::UInt8:
        T.Ints[I] = get<uint8_t>(D, I);
        break;
      case DType::Bool:
        T.Ints[I] = get<uint8_t>(D, I) != 0;
        break;
      case DType::Int16:
        T.Ints[I] = get<int16_t>(D, I);
        break;
      case DType::UInt16:
        T.Ints[I] = get<uint16_t>(D, I);
        break;
      case DType::Int32:
        T.Ints[I] = get<int32_t>(D, I);
        break;
      case DType::UInt32:
        T.Ints[I] = get<uint32_t>(D, I);
        break;
      case DType::Int64:
      case DType::UInt64:
        T.Ints[I] = get<int64_t>(D, I);
        break;
      }
    }
    return T;
  }

  switch (*Type) {
  case DType::Float32:
    if (Meta.float_data_size() != N)
      return countMismatch(Meta, Meta.float_data_size(), N);
    for (int64_t I = 0; I < N; ++I)
      T.Floats[I] = Meta.float_data(I);
    break;
  case DType::Float64:
    if (Meta.double_data_size() != N)
      return countMismatch(Meta, Meta.double_data_size(), N);
    for (int64_t I = 0; I < N; ++I)
      T.Floats[I] = Meta.double_data(I);
    break;
  case DType::Float16:
  case DType::BFloat16:
    if (Meta.int32_data_size() != N)
      return countMismatch(Meta, Meta.int32_data_size(), N);
    for (int64_t I = 0; I < N; ++I) {
      uint16_t Bits = static_cast<uint16_t>(Meta.int32_data(I));
      T.Floats[I] =
          *Type == DType::Float16 ? halfToFloat(Bits) : bfloatToFloat(Bits);
    }
    break;
  case DType::Int64:
    if (Meta.int64_data_size() != N)
      return countMismatch(Meta, Meta.int64_data_size(), N);
    for (int64_t I = 0; I < N; ++I)
      T.Ints[I] = Meta.int64_data(I);
    break;
  case DType::UInt32:
  case DType::UInt64:
    if (Meta.uint64_data_size() != N)
      return countMismatch(Meta, Meta.uint64_data_size(), N);
    for (int64_t I = 0; I < N; ++I)
      T.Ints[I] = static_cast<int64_t>(Meta.uint64_data(I));
    break;
  default: // narrow integers and bool
    if (Meta.int32_data_size() != N)
      return countMismatch(Meta, Meta.int32_data_size(), N);
    for (int64_t I = 0; I < N; ++I)
      T.Ints[I] = wrapInt(Meta.int32_data(I), *Type);
    break;
  }
  return T;
}

} // namespace onnx2soap::onnx_import
