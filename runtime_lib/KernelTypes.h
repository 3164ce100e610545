//===- runtime_lib/KernelTypes.h - Types the kernels take -------*- C++ -*-===//
//
// Which element types each op kind's kernels take, on both backends: the
// one table the compiler checks a model against before it plans, trains or
// generates anything, so that a model the kernels cannot run is refused up
// front with the op's name, not by a generated program on the cluster.
// tests/runtime_lib/KernelTypesTest.cpp runs every kernel case of the CPU
// backend at every element type and fails where the kernels and this table
// disagree (tests/runtime_lib_cuda/ the CUDA backend's, where a GPU is
// present).
//
//===----------------------------------------------------------------------===//
#ifndef ONNX2SOAP_RUNTIME_KERNELTYPES_H
#define ONNX2SOAP_RUNTIME_KERNELTYPES_H

#include "Types.h"
#include <string>

namespace onnx2soap::rt {

/// A set of element types: bit T for DType T.
using TypeSet = uint16_t;

constexpr TypeSet typeBit(DType Type) {
  return static_cast<TypeSet>(1u << static_cast<unsigned>(Type));
}
constexpr bool contains(TypeSet Set, DType Type) {
  return (Set & typeBit(Type)) != 0;
}

struct KernelTypes {
  /// The input whose element type selects the kernel (ONNX's "T"): 0 but
  /// for Where (1; its condition is bool). The op's other operands of that
  /// type have it too; indices, labels and conditions keep their own.
  unsigned TypedInput = 0;
  /// The types forward takes for it.
  TypeSet Forward = 0;
  /// The floating-point types backward takes for it (a gradient flows only
  /// through floating-point operands; backward is never called at others).
  TypeSet Backward = 0;
  /// An operand whose type is its own, and the types forward takes for it
  /// (Pow's exponent); -1 when there is none.
  int OtherInput = -1;
  TypeSet Other = 0;
};

const KernelTypes &kernelTypes(OpKind Kind);

/// The types an optimizer updates parameters of.
TypeSet optimizerTypes();

/// "f32, f64, i32 or i64".
std::string typeSetText(TypeSet Set);

/// The table as the "Element types" section of docs/onnx-support.md.
std::string kernelTypesMarkdown();

} // namespace onnx2soap::rt

#endif
