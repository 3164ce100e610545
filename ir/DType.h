//===- ir/DType.h - Element types of IR tensors ----------------*- C++ -*-===//
//
// The element types a tensor of the IR can hold. The set mirrors what ONNX
// models trained with PyTorch use; exotic ONNX types (complex, float8, string)
// are rejected by the importer with a message naming the tensor.
//
//===----------------------------------------------------------------------===//
#ifndef ONNX2SOAP_IR_DTYPE_H
#define ONNX2SOAP_IR_DTYPE_H

#include "llvm/ADT/StringRef.h"
#include <cstdint>
#include <optional>

namespace onnx2soap::ir {

enum class DType : uint8_t {
  Float32,
  Float16,
  BFloat16,
  Float64,
  Int8,
  UInt8,
  Int16,
  UInt16,
  Int32,
  UInt32,
  Int64,
  UInt64,
  Bool,
};

/// Size of one element in bytes.
unsigned dtypeSize(DType Type);
/// Lower-case name as printed by `inspect` ("f32", "i64", ...).
llvm::StringRef dtypeName(DType Type);
/// Parses a name produced by dtypeName.
std::optional<DType> parseDType(llvm::StringRef Name);
bool isFloatingPoint(DType Type);

} // namespace onnx2soap::ir

#endif
