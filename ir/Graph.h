//===- ir/Graph.h - The IR: ops and tensors with dense ids -----*- C++ -*-===//
//
// A Graph is a DAG of ops over tensors, both addressed by dense integer ids,
// ops kept in topological order. Tensors are activations, graph inputs,
// learnable parameters, non-learned state or constants; parameters and
// constants may carry their bytes (borrowed from the memory-mapped model or
// an external-data file, never copied) for code generation and execution.
//
//===----------------------------------------------------------------------===//
#ifndef ONNX2SOAP_IR_GRAPH_H
#define ONNX2SOAP_IR_GRAPH_H

#include "ir/Attributes.h"
#include "ir/OpKind.h"
#include "ir/Shape.h"
#include "ir/TensorData.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/Error.h"
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace onnx2soap::ir {

using TensorId = uint32_t;
using OpId = uint32_t;
constexpr TensorId NoTensor = std::numeric_limits<TensorId>::max();
constexpr OpId NoOp = std::numeric_limits<OpId>::max();

enum class TensorRole : uint8_t {
  Activation, ///< computed by an op
  Input,      ///< fed by the training data each step
  Parameter,  ///< learnable weight
  State,      ///< updated but not learned (BatchNorm running statistics)
  Constant,   ///< fixed value (folded shapes, masks, frozen weights)
};
llvm::StringRef tensorRoleName(TensorRole Role);

struct Tensor {
  TensorId Id = NoTensor;
  std::string Name;
  TensorType Type;
  TensorRole Role = TensorRole::Activation;
  /// The op computing it (activations only).
  OpId Producer = NoOp;
  /// Where the bytes are, for parameters, state and constants.
  TensorData Data;
  /// The dim holding the samples of the batch, or -1 (see BatchDims.h).
  int8_t BatchDim = -1;
};

struct Op {
  OpId Id = NoOp;
  OpKind Kind = OpKind::Relu;
  std::string Name;
  /// Input tensors in the kind's operand order; NoTensor for an absent
  /// optional input.
  llvm::SmallVector<TensorId, 3> Inputs;
  llvm::SmallVector<TensorId, 1> Outputs;
  Attributes Attrs;
};

class Graph {
public:
  /// Adds a tensor not computed by an op (input, parameter, state, constant).
  TensorId addTensor(std::string Name, TensorType Type, TensorRole Role,
                     TensorData Data = {});
  /// Adds an op after checking its inputs against the kind's arity and shape
  /// rule; creates its outputs named OutputNames (fresh names from the op's
  /// name where fewer are given). The Error says what is wrong with the op.
  llvm::Expected<OpId> addOp(OpKind Kind, std::string Name,
                             llvm::ArrayRef<TensorId> Inputs, Attributes Attrs,
                             llvm::ArrayRef<std::string> OutputNames = {});

  const Tensor &tensor(TensorId Id) const { return Tensors[Id]; }
  Tensor &tensor(TensorId Id) { return Tensors[Id]; }
  const Op &op(OpId Id) const { return Ops[Id]; }
  Op &op(OpId Id) { return Ops[Id]; }
  llvm::ArrayRef<Tensor> tensors() const { return Tensors; }
  /// In topological order.
  llvm::ArrayRef<Op> ops() const { return Ops; }
  size_t numTensors() const { return Tensors.size(); }
  size_t numOps() const { return Ops.size(); }

  /// Type of an op's input I, or nullptr when that optional input is absent.
  const TensorType *inputType(const Op &O, unsigned I) const;
  const TensorType &outputType(const Op &O, unsigned I = 0) const {
    return Tensors[O.Outputs[I]].Type;
  }

  llvm::ArrayRef<TensorId> inputs() const { return Inputs; }
  llvm::ArrayRef<TensorId> outputs() const { return Outputs; }
  void addInput(TensorId Id) { Inputs.push_back(Id); }
  /// Adds graph output Id, known as Name (default: the tensor's name).
  void addOutput(TensorId Id, std::string Name = "") {
    Outputs.push_back(Id);
    OutputNames.push_back(Name.empty() ? Tensors[Id].Name : std::move(Name));
  }
  /// The name graph output I is known by: the model's, which its tensor
  /// may not have (y = Identity(x) is x's tensor; a rewrite such as RNN
  /// unrolling makes it another op's).
  llvm::StringRef outputName(size_t I) const { return OutputNames[I]; }

  /// Ops reading tensor Id, in op order (computed on demand; O(ops)).
  llvm::SmallVector<OpId, 4> consumers(TensorId Id) const;
  /// For every tensor, the ops reading it (one pass over the graph).
  std::vector<llvm::SmallVector<OpId, 2>> allConsumers() const;

  /// Makes every reader of From (ops and graph outputs) read To instead.
  void replaceAllUses(TensorId From, TensorId To);
  /// Removes ops not needed for the graph outputs and tensors nobody uses,
  /// restores topological order and renumbers ids densely. Inputs are kept.
  void compact();

  std::string Name;

private:
  std::vector<Tensor> Tensors;
  std::vector<Op> Ops;
  llvm::SmallVector<TensorId, 4> Inputs;
  llvm::SmallVector<TensorId, 4> Outputs;
  llvm::SmallVector<std::string, 4> OutputNames;
};

/// Number of learnable scalars (tensors with role Parameter).
int64_t countParameters(const Graph &G);

} // namespace onnx2soap::ir

#endif
