//===- runtime_lib/Types.cpp - Element types, op kinds, tensor views ------===//
//
// Names and sizes; row-major view construction.
//
//===----------------------------------------------------------------------===//
#include "Types.h"

namespace onnx2soap::rt {

size_t dtypeSize(DType Type) {
  switch (Type) {
  case DType::Float64:
  case DType::Int64:
  case DType::UInt64:
    return 8;
  case DType::Float32:
  case DType::Int32:
  case DType::UInt32:
    return 4;
  case DType::Float16:
  case DType::BFloat16:
  case DType::Int16:
  case DType::UInt16:
    return 2;
  case DType::Int8:
  case DType::UInt8:
  case DType::Bool:
    return 1;
  }
  return 0;
}

const char *dtypeName(DType Type) {
  static const char *const Names[] = {"f32", "f16", "bf16", "f64", "i8",
                                      "u8",  "i16", "u16",  "i32", "u32",
                                      "i64", "u64", "bool"};
  return Names[static_cast<unsigned>(Type)];
}

const char *opKindName(OpKind Kind) {
  static const char *const Names[] = {
#define OP_KIND(Name) #Name,
#include "OpKinds.def"
  };
  return Names[static_cast<unsigned>(Kind)];
}

TensorView TensorView::contiguous(DType Type, const std::vector<int64_t> &Dims,
                                  void *Data) {
  TensorView V;
  V.Type = Type;
  V.Rank = static_cast<int>(Dims.size());
  V.Data = Data;
  int64_t Stride = 1;
  for (int I = V.Rank - 1; I >= 0; --I) {
    V.Dims[I] = Dims[I];
    V.Strides[I] = Stride;
    Stride *= Dims[I];
  }
  return V;
}

int64_t TensorView::numElements() const {
  int64_t N = 1;
  for (int I = 0; I < Rank; ++I)
    N *= Dims[I];
  return Rank < 0 ? 0 : N;
}

bool TensorView::isContiguous() const {
  int64_t Stride = 1;
  for (int I = Rank - 1; I >= 0; --I) {
    if (Dims[I] != 1 && Strides[I] != Stride)
      return false;
    Stride *= Dims[I];
  }
  return true;
}

} // namespace onnx2soap::rt
