//===- onnx_import/NodeContext.h - What an op handler sees -----*- C++ -*-===//
//
// Handlers (onnx_import/handlers/) translate one ONNX node into IR ops or
// into constants. NodeContext gives them typed attribute access with errors
// that name the node, the node's inputs as IR tensors or known constant
// values, and ways to bind the node's outputs.
//
//===----------------------------------------------------------------------===//
#ifndef ONNX2SOAP_ONNX_IMPORT_NODECONTEXT_H
#define ONNX2SOAP_ONNX_IMPORT_NODECONTEXT_H

#include "ir/Graph.h"
#include "onnx_import/ConstTensor.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/FormatVariadic.h"
#include <map>
#include <onnx/onnx_pb.h>
#include <optional>

namespace onnx2soap::onnx_import {

/// An ONNX value (a name in the graph) during import.
struct Value {
  ir::TensorType Type;
  /// The IR tensor holding it; NoTensor until an IR op needs it.
  ir::TensorId Tensor = ir::NoTensor;
  /// Its value, when known at import time.
  std::optional<ConstTensor> Const;
  /// A graph input's value given for this run (ImportOptions::InputHints):
  /// used only where a value is required at import time.
  std::optional<ConstTensor> Hint;
  /// A small floating-point initializer's value as stored in the file: a
  /// weight, never folded, but read where a handler needs a value at import
  /// time (requireConstant), which ImportState::ReadAtImport records.
  std::optional<ConstTensor> Stored;
  /// Why a small initializer's value is not known (its external data absent
  /// or unreadable), for the handler that needs it.
  std::string Unknown;
};

/// The importer's state shared by all handlers.
struct ImportState {
  ir::Graph Graph;
  llvm::StringMap<Value> Values;
  /// Names already used for IR tensors and ops (to make fresh ones).
  unsigned FreshCounter = 0;
  /// Floating-point initializers whose stored value a handler read, each
  /// with who read it ("node 'pad' (constant_value)"): they must not also
  /// be trained.
  std::map<std::string, std::string> ReadAtImport;
};

/// Node Index's name in messages: its own, or "<op_type>_<Index>" when it
/// has none (errors about the graph's structure and the node's own).
inline std::string nodeName(const onnx::NodeProto &N, unsigned Index) {
  return N.name().empty() ? N.op_type() + "_" + std::to_string(Index)
                          : N.name();
}

class NodeContext {
public:
  NodeContext(ImportState &State, const onnx::NodeProto &Node, unsigned Index,
              int64_t Opset)
      : State(State), Node(Node), Index(Index), Opset(Opset) {}

  llvm::StringRef opType() const { return Node.op_type(); }
  /// The IR graph being built (types of the tensors handlers emitted).
  const ir::Graph &graph() const { return State.Graph; }
  int64_t opset() const { return Opset; }
  /// The node's name, or "<op_type>_<index>" when it has none.
  std::string name() const { return nodeName(Node, Index); }

  /// An error prefixed with where it is: "node 'n' (#3, op Conv): ...".
  template <typename... Ts>
  llvm::Error error(const char *Format, Ts &&...Vals) const {
    return makeError(llvm::formatv(Format, std::forward<Ts>(Vals)...).str());
  }
  llvm::Error makeError(const std::string &Message) const;
  /// Prefixes an Error from elsewhere (a shape rule) with the node.
  llvm::Error wrap(llvm::Error E) const;

  //===-- Attributes
  //-------------------------------------------------------===//
  const onnx::AttributeProto *attr(llvm::StringRef Name) const;
  llvm::Expected<int64_t> getInt(llvm::StringRef Name, int64_t Default) const;
  llvm::Expected<double> getFloat(llvm::StringRef Name, double Default) const;
  llvm::Expected<std::string> getString(llvm::StringRef Name,
                                        llvm::StringRef Default) const;
  /// The list, or nullopt when absent.
  llvm::Expected<std::optional<ir::IntList>>
  getInts(llvm::StringRef Name) const;
  llvm::Expected<std::optional<ir::FloatList>>
  getFloats(llvm::StringRef Name) const;
  /// Fails when an attribute not in Known is present (so unsupported options
  /// are reported rather than ignored).
  llvm::Error checkAttributes(llvm::ArrayRef<llvm::StringRef> Known) const;

  //===-- Inputs
  //-----------------------------------------------------------===//
  unsigned numInputs() const { return Node.input_size(); }
  /// The name of input I in the model.
  llvm::StringRef inputName(unsigned I) const { return Node.input(I); }
  /// Input I is given (optional inputs may be absent or named "").
  bool hasInput(unsigned I) const {
    return I < static_cast<unsigned>(Node.input_size()) &&
           !Node.input(I).empty();
  }
  const ir::TensorType &inputType(unsigned I) const;
  /// The value of input I when known at import time, else nullptr.
  const ConstTensor *constant(unsigned I) const;
  /// The value of input I, or an error saying it must be known.
  llvm::Expected<const ConstTensor *>
  requireConstant(unsigned I, llvm::StringRef What) const;
  /// The IR tensor of input I (known values become IR constants).
  llvm::Expected<ir::TensorId> tensor(unsigned I);
  /// A new IR constant holding C, named after the node and Base.
  ir::TensorId constantTensor(const ConstTensor &C, llvm::StringRef Base);

  //===-- Outputs
  //----------------------------------------------------------===//
  unsigned numOutputs() const { return Node.output_size(); }
  bool hasOutput(unsigned I) const {
    return I < static_cast<unsigned>(Node.output_size()) &&
           !Node.output(I).empty();
  }
  /// Adds an IR op named after the node and binds the node's outputs to the
  /// op's outputs in order. Fails if the node has more outputs than the op.
  llvm::Expected<ir::OpId> emit(ir::OpKind Kind,
                                llvm::ArrayRef<ir::TensorId> Inputs,
                                ir::Attributes Attrs);
  /// Like emit, but when every input in NodeInputs (node input indices; -1
  /// for an absent optional input) is a known constant and the result is
  /// small, computes the outputs at import time instead.
  llvm::Error emitOrFold(ir::OpKind Kind, llvm::ArrayRef<int> NodeInputs,
                         ir::Attributes Attrs);
  /// Adds a helper IR op whose output 0 is returned, not bound.
  llvm::Expected<ir::TensorId> emitHelper(ir::OpKind Kind,
                                          llvm::ArrayRef<ir::TensorId> Inputs,
                                          ir::Attributes Attrs);
  /// Output I of the node is the IR tensor T.
  void bindOutput(unsigned I, ir::TensorId T);
  /// Output I of the node is input J (Identity and no-op casts).
  void aliasOutput(unsigned I, unsigned J);
  /// Output I of the node is the known value C.
  void bindConstant(unsigned I, ConstTensor C);

private:
  const Value &input(unsigned I) const;
  std::string freshName(llvm::StringRef Base);

  ImportState &State;
  const onnx::NodeProto &Node;
  unsigned Index;
  int64_t Opset;
};

} // namespace onnx2soap::onnx_import

#endif
