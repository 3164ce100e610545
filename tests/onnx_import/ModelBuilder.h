//===- tests/onnx_import/ModelBuilder.h - Small ONNX models -----*- C++ -*-===//
//
// Builds ONNX models in C++ with the protobuf classes, so a test can start
// from a valid model, break one thing, and write it to a temporary folder.
// The base model is x[batch,4] -> MatMul(W[4,3]) -> Add(b[3]) -> Relu -> y.
//
//===----------------------------------------------------------------------===//
#ifndef ONNX2SOAP_TESTS_ONNX_IMPORT_MODELBUILDER_H
#define ONNX2SOAP_TESTS_ONNX_IMPORT_MODELBUILDER_H

#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"
#include <cstdint>
#include <initializer_list>
#include <onnx/onnx_pb.h>
#include <string>
#include <vector>

namespace onnx2soap::testing {

/// One dim of a graph input: a size or a symbolic name.
struct Dim {
  Dim(int64_t Size) : Size(Size) {}
  Dim(const char *Name) : Name(Name) {}
  int64_t Size = 0;
  std::string Name;
};

inline onnx::ValueInfoProto *
addInput(onnx::GraphProto &Graph, const std::string &Name,
         std::initializer_list<Dim> Dims,
         int32_t ElemType = onnx::TensorProto::FLOAT) {
  onnx::ValueInfoProto *In = Graph.add_input();
  In->set_name(Name);
  auto *Tensor = In->mutable_type()->mutable_tensor_type();
  Tensor->set_elem_type(ElemType);
  auto *Shape = Tensor->mutable_shape();
  for (const Dim &D : Dims) {
    auto *Entry = Shape->add_dim();
    if (D.Name.empty())
      Entry->set_dim_value(D.Size);
    else
      Entry->set_dim_param(D.Name);
  }
  return In;
}

inline onnx::ValueInfoProto *addOutput(onnx::GraphProto &Graph,
                                       const std::string &Name) {
  onnx::ValueInfoProto *Out = Graph.add_output();
  Out->set_name(Name);
  Out->mutable_type()->mutable_tensor_type()->set_elem_type(
      onnx::TensorProto::FLOAT);
  return Out;
}

/// A float initializer holding Count(Dims) values 0, 1, 2, ... in raw_data.
inline onnx::TensorProto *addFloatInitializer(onnx::GraphProto &Graph,
                                              const std::string &Name,
                                              std::vector<int64_t> Dims) {
  onnx::TensorProto *T = Graph.add_initializer();
  T->set_name(Name);
  T->set_data_type(onnx::TensorProto::FLOAT);
  int64_t Count = 1;
  for (int64_t D : Dims) {
    T->add_dims(D);
    Count *= D;
  }
  std::vector<float> Values(Count > 0 ? Count : 0);
  for (size_t I = 0; I < Values.size(); ++I)
    Values[I] = static_cast<float>(I);
  T->set_raw_data(std::string(reinterpret_cast<const char *>(Values.data()),
                              Values.size() * sizeof(float)));
  return T;
}

/// An int64 initializer with the given values in raw_data (shapes, axes).
inline onnx::TensorProto *addInt64Initializer(onnx::GraphProto &Graph,
                                              const std::string &Name,
                                              std::vector<int64_t> Values) {
  onnx::TensorProto *T = Graph.add_initializer();
  T->set_name(Name);
  T->set_data_type(onnx::TensorProto::INT64);
  T->add_dims(static_cast<int64_t>(Values.size()));
  T->set_raw_data(std::string(reinterpret_cast<const char *>(Values.data()),
                              Values.size() * sizeof(int64_t)));
  return T;
}

inline onnx::NodeProto *addNode(onnx::GraphProto &Graph,
                                const std::string &OpType,
                                std::initializer_list<std::string> Inputs,
                                std::initializer_list<std::string> Outputs,
                                const std::string &Name = "") {
  onnx::NodeProto *N = Graph.add_node();
  N->set_op_type(OpType);
  N->set_name(Name);
  for (const std::string &In : Inputs)
    N->add_input(In);
  for (const std::string &Out : Outputs)
    N->add_output(Out);
  return N;
}

inline onnx::AttributeProto *
addIntAttr(onnx::NodeProto &Node, const std::string &Name, int64_t Value) {
  onnx::AttributeProto *A = Node.add_attribute();
  A->set_name(Name);
  A->set_type(onnx::AttributeProto::INT);
  A->set_i(Value);
  return A;
}

inline onnx::AttributeProto *
addFloatAttr(onnx::NodeProto &Node, const std::string &Name, float Value) {
  onnx::AttributeProto *A = Node.add_attribute();
  A->set_name(Name);
  A->set_type(onnx::AttributeProto::FLOAT);
  A->set_f(Value);
  return A;
}

inline onnx::AttributeProto *
addIntsAttr(onnx::NodeProto &Node, const std::string &Name,
            std::initializer_list<int64_t> Values) {
  onnx::AttributeProto *A = Node.add_attribute();
  A->set_name(Name);
  A->set_type(onnx::AttributeProto::INTS);
  for (int64_t V : Values)
    A->add_ints(V);
  return A;
}

inline onnx::AttributeProto *addStringAttr(onnx::NodeProto &Node,
                                           const std::string &Name,
                                           const std::string &Value) {
  onnx::AttributeProto *A = Node.add_attribute();
  A->set_name(Name);
  A->set_type(onnx::AttributeProto::STRING);
  A->set_s(Value);
  return A;
}

/// Marks T as stored in an external file (onnx/external_data_helper.py).
inline void setExternalData(onnx::TensorProto &T, const std::string &Location,
                            int64_t Offset, int64_t Length) {
  T.clear_raw_data();
  T.set_data_location(onnx::TensorProto::EXTERNAL);
  auto Add = [&](const char *Key, const std::string &Value) {
    onnx::StringStringEntryProto *E = T.add_external_data();
    E->set_key(Key);
    E->set_value(Value);
  };
  Add("location", Location);
  if (Offset >= 0)
    Add("offset", std::to_string(Offset));
  if (Length >= 0)
    Add("length", std::to_string(Length));
}

/// The valid base model: x[batch,4] -> MatMul W[4,3] -> Add b[3] -> Relu -> y
/// at ai.onnx opset 17, IR version 8. Node names are "matmul", "add",
/// "relu".
inline onnx::ModelProto makeModel() {
  onnx::ModelProto Model;
  Model.set_ir_version(8);
  Model.set_producer_name("ModelBuilder");
  onnx::OperatorSetIdProto *Opset = Model.add_opset_import();
  Opset->set_domain("");
  Opset->set_version(17);
  onnx::GraphProto &Graph = *Model.mutable_graph();
  Graph.set_name("tiny");
  addInput(Graph, "x", {"batch", 4});
  addFloatInitializer(Graph, "W", {4, 3});
  addFloatInitializer(Graph, "b", {3});
  addNode(Graph, "MatMul", {"x", "W"}, {"h"}, "matmul");
  addNode(Graph, "Add", {"h", "b"}, {"a"}, "add");
  addNode(Graph, "Relu", {"a"}, {"y"}, "relu");
  addOutput(Graph, "y");
  return Model;
}

inline onnx::TensorProto *findInitializer(onnx::GraphProto &Graph,
                                          llvm::StringRef Name) {
  for (onnx::TensorProto &T : *Graph.mutable_initializer())
    if (T.name() == Name)
      return &T;
  return nullptr;
}

/// Writes Bytes to Path; false on failure.
inline bool writeBytes(llvm::StringRef Path, llvm::StringRef Bytes) {
  std::error_code EC;
  llvm::raw_fd_ostream OS(Path, EC, llvm::sys::fs::OF_None);
  if (EC)
    return false;
  OS << Bytes;
  return !OS.has_error();
}

inline bool writeModel(const onnx::ModelProto &Model, llvm::StringRef Path) {
  std::string Bytes;
  if (!Model.SerializeToString(&Bytes))
    return false;
  return writeBytes(Path, Bytes);
}

/// A fresh temporary folder, removed with everything in it on destruction.
class TempDir {
public:
  explicit TempDir(llvm::StringRef Prefix = "onnx2soap-test") {
    if (llvm::sys::fs::createUniqueDirectory(Prefix, Path))
      Path.clear();
  }
  ~TempDir() {
    if (!Path.empty())
      llvm::sys::fs::remove_directories(Path);
  }
  TempDir(const TempDir &) = delete;
  TempDir &operator=(const TempDir &) = delete;

  bool valid() const { return !Path.empty(); }
  llvm::StringRef path() const { return Path; }
  /// Path of Name inside the folder.
  std::string file(llvm::StringRef Name) const {
    llvm::SmallString<256> Result(Path);
    llvm::sys::path::append(Result, Name);
    return std::string(Result);
  }

private:
  llvm::SmallString<256> Path;
};

} // namespace onnx2soap::testing

#endif
