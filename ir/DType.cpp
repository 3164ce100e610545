//===- ir/DType.cpp - Element types of IR tensors -------------------------===//
//
// Sizes and names of the IR's element types.
//
//===----------------------------------------------------------------------===//
#include "ir/DType.h"
#include "llvm/Support/ErrorHandling.h"

namespace onnx2soap::ir {

unsigned dtypeSize(DType Type) {
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
  llvm_unreachable("unknown DType");
}

llvm::StringRef dtypeName(DType Type) {
  switch (Type) {
  case DType::Float32:
    return "f32";
  case DType::Float16:
    return "f16";
  case DType::BFloat16:
    return "bf16";
  case DType::Float64:
    return "f64";
  case DType::Int8:
    return "i8";
  case DType::UInt8:
    return "u8";
  case DType::Int16:
    return "i16";
  case DType::UInt16:
    return "u16";
  case DType::Int32:
    return "i32";
  case DType::UInt32:
    return "u32";
  case DType::Int64:
    return "i64";
  case DType::UInt64:
    return "u64";
  case DType::Bool:
    return "bool";
  }
  llvm_unreachable("unknown DType");
}

std::optional<DType> parseDType(llvm::StringRef Name) {
  for (unsigned I = 0; I <= static_cast<unsigned>(DType::Bool); ++I)
    if (dtypeName(static_cast<DType>(I)) == Name)
      return static_cast<DType>(I);
  return std::nullopt;
}

bool isFloatingPoint(DType Type) {
  return Type == DType::Float32 || Type == DType::Float16 ||
         Type == DType::BFloat16 || Type == DType::Float64;
}

} // namespace onnx2soap::ir
