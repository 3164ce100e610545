//===- onnx_import/ConstTensor.h - Import-time tensors ----------*- C++ -*-===//
//
// Values the importer computes with: Constant nodes, integer initializers,
// the outputs of Shape and of the arithmetic that exporters wrap around it.
// Integers and bools are held as int64, floating-point values as double, so
// folding arithmetic is written once for all element types.
//
//===----------------------------------------------------------------------===//
#ifndef ONNX2SOAP_ONNX_IMPORT_CONSTTENSOR_H
#define ONNX2SOAP_ONNX_IMPORT_CONSTTENSOR_H

#include "ir/Shape.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include <onnx/onnx_pb.h>
#include <optional>
#include <vector>

namespace onnx2soap::onnx_import {

/// Tensors above this many elements are not folded (4 Mi elements).
constexpr int64_t MaxFoldedElements = int64_t(1) << 22;
/// Floating-point initializers of at most this many elements keep their
/// values for handlers that need them at import time (Value::Stored).
constexpr int64_t MaxStoredFloatElements = 64;

struct ConstTensor {
  ir::DType Type = ir::DType::Int64;
  ir::Shape Dims;
  /// Values of integer and bool tensors.
  std::vector<int64_t> Ints;
  /// Values of floating-point tensors.
  std::vector<double> Floats;

  bool isFloat() const { return ir::isFloatingPoint(Type); }
  int64_t numElements() const { return ir::numElements(Dims); }
  /// Element I as a double / an int64, whatever the type.
  double floatAt(int64_t I) const { return isFloat() ? Floats[I] : Ints[I]; }
  int64_t intAt(int64_t I) const {
    return isFloat() ? static_cast<int64_t>(Floats[I]) : Ints[I];
  }
  /// A tensor of Type and Dims filled with zeros.
  static ConstTensor zeros(ir::DType Type, ir::Shape Dims);
  /// Converts the values to Type (ONNX Cast semantics).
  ConstTensor cast(ir::DType To) const;
  /// Little-endian bytes in Type's layout, as the IR stores constants.
  std::vector<char> toBytes() const;
};

/// Maps an ONNX TensorProto data type to the IR's, or nullopt when the IR has
/// no such type (strings, complex, float8, 4-bit).
std::optional<ir::DType> dtypeFromOnnx(int32_t OnnxType);
/// The ONNX data type name ("FLOAT", "COMPLEX64", ...).
llvm::StringRef onnxTypeName(int32_t OnnxType);

/// Reads the values of a tensor given its metadata and its raw bytes (empty
/// when the data is in the typed fields). The element count must be checked
/// by the caller.
llvm::Expected<ConstTensor> decodeTensor(const onnx::TensorProto &Meta,
                                         llvm::StringRef Raw, bool HasRaw);

/// IEEE half / bfloat16 conversions for reading and writing such tensors.
float halfToFloat(uint16_t Bits);
uint16_t floatToHalf(float Value);

} // namespace onnx2soap::onnx_import

#endif
