//===- tests/ir/IrTestUtil.h - Helpers for building IR in tests -*- C++ -*-===//
//
// Terse construction of attributes, types and small graphs for the IR tests.
//
//===----------------------------------------------------------------------===//
#ifndef ONNX2SOAP_TESTS_IR_IRTESTUTIL_H
#define ONNX2SOAP_TESTS_IR_IRTESTUTIL_H

#include "ir/Graph.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include <cstring>
#include <initializer_list>

namespace onnx2soap::ir::test {

inline TensorType f32(std::initializer_list<int64_t> Dims) {
  return TensorType{DType::Float32, Shape(Dims)};
}
inline TensorType i64(std::initializer_list<int64_t> Dims) {
  return TensorType{DType::Int64, Shape(Dims)};
}

/// Attributes from name/value pairs.
inline Attributes
attrs(std::initializer_list<std::pair<const char *, AttrValue>> Pairs) {
  Attributes A;
  for (const auto &[Name, Value] : Pairs)
    A.set(Name, Value);
  return A;
}

inline IntList ints(std::initializer_list<int64_t> V) { return IntList(V); }

/// A float scalar constant (of shape Dims: [1, 1] broadcasts as [] does
/// but raises the rank of what it meets).
inline TensorId scalar(Graph &G, const std::string &Name, float Value,
                       Shape Dims = {}) {
  std::vector<char> Bytes(sizeof Value);
  std::memcpy(Bytes.data(), &Value, sizeof Value);
  return G.addTensor(Name, TensorType{DType::Float32, std::move(Dims)},
                     TensorRole::Constant, TensorData::owned(std::move(Bytes)));
}

/// Adds an op that must be valid; returns its first output.
inline TensorId add(Graph &G, OpKind Kind, std::initializer_list<TensorId> In,
                    Attributes A = {}, const std::string &Name = "") {
  auto Id = G.addOp(Kind, Name.empty() ? std::string(opKindName(Kind)) : Name,
                    std::vector<TensorId>(In), std::move(A));
  if (!Id) {
    ADD_FAILURE() << llvm::toString(Id.takeError());
    return NoTensor;
  }
  return G.op(*Id).Outputs[0];
}

} // namespace onnx2soap::ir::test

#endif
