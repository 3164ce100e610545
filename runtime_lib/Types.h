//===- runtime_lib/Types.h - Types, op kinds, views -------------*- C++ -*-===//
//
// The vocabulary shared by every backend and by generated programs. The
// runtime depends on nothing of the compiler: op kinds come from the same
// X-macro list the IR uses (ir/OpKinds.def, copied into generated projects),
// element types mirror the IR's, and a tensor is a view (shape and strides
// over memory the backend owns).
//
//===----------------------------------------------------------------------===//
#ifndef ONNX2SOAP_RUNTIME_TYPES_H
#define ONNX2SOAP_RUNTIME_TYPES_H

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <vector>

namespace onnx2soap::rt {

/// Same enumerators, same order as ir::DType.
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

size_t dtypeSize(DType Type);
const char *dtypeName(DType Type);

enum class OpKind : uint8_t {
#define OP_KIND(Name) Name,
#include "OpKinds.def"
};
const char *opKindName(OpKind Kind);

constexpr int MaxRank = 8;

/// A tensor as kernels see it: element type, dims, strides (in elements)
/// and a pointer into backend memory. Rank -1 marks an absent optional
/// operand.
struct TensorView {
  DType Type = DType::Float32;
  int Rank = -1;
  int64_t Dims[MaxRank] = {};
  int64_t Strides[MaxRank] = {};
  void *Data = nullptr;

  /// A dense row-major view of Dims over Data.
  static TensorView contiguous(DType Type, const std::vector<int64_t> &Dims,
                               void *Data);
  static TensorView absent() { return TensorView(); }

  bool present() const { return Rank >= 0; }
  int64_t numElements() const;
  size_t byteSize() const { return numElements() * dtypeSize(Type); }
  bool isContiguous() const;
  std::vector<int64_t> dims() const { return {Dims, Dims + Rank}; }
  template <typename T> T *as() const { return static_cast<T *>(Data); }
};

} // namespace onnx2soap::rt

#endif
