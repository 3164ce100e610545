//===- onnx_import/NodeContext.cpp - What an op handler sees --------------===//
//
// Attribute accessors check the attribute's declared type, so a model with a
// FLOAT where an INT belongs is reported, not misread.
//
//===----------------------------------------------------------------------===//
#include "onnx_import/NodeContext.h"
#include "ir/Error.h"
#include "onnx_import/Evaluate.h"
#include "llvm/ADT/STLExtras.h"
#include <cassert>

namespace onnx2soap::onnx_import {

llvm::Error NodeContext::makeError(const std::string &Message) const {
  return fail(llvm::formatv("node '{0}' (#{1}, op {2}): {3}", name(), Index,
                            Node.op_type(), Message));
}

llvm::Error NodeContext::wrap(llvm::Error E) const {
  if (!E)
    return E;
  return makeError(llvm::toString(std::move(E)));
}

//===-- Attributes --------------------------------------------------------===//

const onnx::AttributeProto *NodeContext::attr(llvm::StringRef Name) const {
  for (const onnx::AttributeProto &A : Node.attribute())
    if (A.name() == Name)
      return &A;
  return nullptr;
}

llvm::Expected<int64_t> NodeContext::getInt(llvm::StringRef Name,
                                            int64_t Default) const {
  const onnx::AttributeProto *A = attr(Name);
  if (!A)
    return Default;
  if (A->type() != onnx::AttributeProto::INT &&
      !(A->type() == onnx::AttributeProto::UNDEFINED && A->has_i()))
    return error("attribute '{0}' must be an INT", Name);
  return A->i();
}

llvm::Expected<double> NodeContext::getFloat(llvm::StringRef Name,
                                             double Default) const {
  const onnx::AttributeProto *A = attr(Name);
  if (!A)
    return Default;
  if (A->type() != onnx::AttributeProto::FLOAT &&
      !(A->type() == onnx::AttributeProto::UNDEFINED && A->has_f()))
    return error("attribute '{0}' must be a FLOAT", Name);
  return A->f();
}

llvm::Expected<std::string>
NodeContext::getString(llvm::StringRef Name, llvm::StringRef Default) const {
  const onnx::AttributeProto *A = attr(Name);
  if (!A)
    return Default.str();
  if (A->type() != onnx::AttributeProto::STRING &&
      !(A->type() == onnx::AttributeProto::UNDEFINED && A->has_s()))
    return error("attribute '{0}' must be a STRING", Name);
  return A->s();
}

llvm::Expected<std::optional<ir::IntList>>
NodeContext::getInts(llvm::StringRef Name) const {
  const onnx::AttributeProto *A = attr(Name);
  if (!A)
    return std::nullopt;
  if (A->type() != onnx::AttributeProto::INTS &&
      A->type() != onnx::AttributeProto::UNDEFINED)
    return error("attribute '{0}' must be INTS", Name);
  return ir::IntList(A->ints().begin(), A->ints().end());
}

llvm::Expected<std::optional<ir::FloatList>>
NodeContext::getFloats(llvm::StringRef Name) const {
  const onnx::AttributeProto *A = attr(Name);
  if (!A)
    return std::nullopt;
  if (A->type() != onnx::AttributeProto::FLOATS &&
      A->type() != onnx::AttributeProto::UNDEFINED)
    return error("attribute '{0}' must be FLOATS", Name);
  return ir::FloatList(A->floats().begin(), A->floats().end());
}

llvm::Error
NodeContext::checkAttributes(llvm::ArrayRef<llvm::StringRef> Known) const {
  for (const onnx::AttributeProto &A : Node.attribute())
    if (std::find(Known.begin(), Known.end(), A.name()) == Known.end())
      return error("attribute '{0}' is not supported", A.name());
  return llvm::Error::success();
}

//===-- Inputs ------------------------------------------------------------===//

const Value &NodeContext::input(unsigned I) const {
  assert(hasInput(I) && "handlers read only required or present inputs");
  auto It = State.Values.find(Node.input(I));
  assert(It != State.Values.end() && "inputs are checked before conversion");
  return It->second;
}

const ir::TensorType &NodeContext::inputType(unsigned I) const {
  return input(I).Type;
}

const ConstTensor *NodeContext::constant(unsigned I) const {
  if (!hasInput(I))
    return nullptr;
  const Value &V = input(I);
  return V.Const ? &*V.Const : nullptr;
}

llvm::Expected<const ConstTensor *>
NodeContext::requireConstant(unsigned I, llvm::StringRef What) const {
  if (const ConstTensor *C = constant(I))
    return C;
  if (hasInput(I) && input(I).Hint)
    return &*input(I).Hint;
  if (hasInput(I) && input(I).Stored) {
    // Under the initializer's own tensor's name: an Identity (or a no-op
    // Cast, an inference Dropout) gives its value another name but not
    // another tensor.
    const Value &V = input(I);
    State.ReadAtImport.try_emplace(
        State.Graph.tensor(V.Tensor).Name,
        llvm::formatv("node '{0}' ({1})", name(), What).str());
    return &*V.Stored;
  }
  if (!hasInput(I))
    return error("input {0} ({1}) is required but missing", I, What);
  if (!input(I).Unknown.empty())
    return error("input '{0}' ({1}) is needed at import time, but {2}",
                 Node.input(I), What, input(I).Unknown);
  return error("input '{0}' ({1}) must be a constant or computable from "
               "static shapes at import time ({1} known only at run time is "
               "not supported)",
               Node.input(I), What);
}

std::string NodeContext::freshName(llvm::StringRef Base) {
  std::string Name;
  do
    Name = llvm::formatv("{0}#{1}", Base, State.FreshCounter++).str();
  while (State.Values.count(Name));
  return Name;
}

llvm::Expected<ir::TensorId> NodeContext::tensor(unsigned I) {
  if (!hasInput(I))
    return error("input {0} is required but missing", I);
  Value &V = State.Values.find(Node.input(I))->second;
  if (V.Tensor != ir::NoTensor)
    return V.Tensor;
  assert(V.Const && "a value is either a tensor or a constant");
  V.Tensor =
      State.Graph.addTensor(Node.input(I), V.Type, ir::TensorRole::Constant,
                            ir::TensorData::owned(V.Const->toBytes()));
  return V.Tensor;
}

ir::TensorId NodeContext::constantTensor(const ConstTensor &C,
                                         llvm::StringRef Base) {
  ir::TensorType Type;
  Type.Type = C.Type;
  Type.Dims = C.Dims;
  return State.Graph.addTensor(freshName(name() + "/" + Base.str()), Type,
                               ir::TensorRole::Constant,
                               ir::TensorData::owned(C.toBytes()));
}

//===-- Outputs -----------------------------------------------------------===//

llvm::Expected<ir::OpId> NodeContext::emit(ir::OpKind Kind,
                                           llvm::ArrayRef<ir::TensorId> Inputs,
                                           ir::Attributes Attrs) {
  std::vector<std::string> Names(Node.output().begin(), Node.output().end());
  auto Id = State.Graph.addOp(Kind, name(), Inputs, std::move(Attrs), Names);
  if (!Id)
    return wrap(Id.takeError());
  const ir::Op &O = State.Graph.op(*Id);
  for (unsigned I = 0; I < numOutputs(); ++I) {
    if (!hasOutput(I))
      continue;
    if (I >= O.Outputs.size())
      return error("output {0} ('{1}') is not supported", I, Node.output(I));
    bindOutput(I, O.Outputs[I]);
  }
  return *Id;
}

llvm::Error NodeContext::emitOrFold(ir::OpKind Kind,
                                    llvm::ArrayRef<int> NodeInputs,
                                    ir::Attributes Attrs) {
  llvm::SmallVector<const ConstTensor *, 4> Values;
  llvm::SmallVector<const ir::TensorType *, 4> Types;
  bool AllKnown = true;
  for (int I : NodeInputs) {
    const ConstTensor *C = I >= 0 ? constant(I) : nullptr;
    AllKnown &= I < 0 || C != nullptr;
    // Folding computes on int64: a uint64 of 2^63 or more would read as
    // negative (Cast gave -9.2e18, Less false). The kernels compute it.
    if (C && C->Type == ir::DType::UInt64 &&
        llvm::any_of(C->Ints, [](int64_t V) { return V < 0; }))
      AllKnown = false;
    Values.push_back(C);
    Types.push_back(I >= 0 ? &inputType(I) : nullptr);
  }
  if (AllKnown && !NodeInputs.empty()) {
    const ir::OpKindInfo &Info = ir::opKindInfo(Kind);
    auto OutTypes = Info.InferTypes(Attrs, Types);
    if (!OutTypes)
      return wrap(OutTypes.takeError());
    if (auto Results = evaluate(Kind, Attrs, Values, *OutTypes)) {
      if (numOutputs() > Results->size())
        return error("output {0} is not supported", Results->size());
      for (unsigned I = 0; I < numOutputs(); ++I)
        if (hasOutput(I))
          bindConstant(I, std::move((*Results)[I]));
      return llvm::Error::success();
    }
  }
  llvm::SmallVector<ir::TensorId, 4> Inputs;
  for (int I : NodeInputs) {
    if (I < 0) {
      Inputs.push_back(ir::NoTensor);
      continue;
    }
    auto T = tensor(I);
    if (!T)
      return T.takeError();
    Inputs.push_back(*T);
  }
  return emit(Kind, Inputs, std::move(Attrs)).takeError();
}

llvm::Expected<ir::TensorId>
NodeContext::emitHelper(ir::OpKind Kind, llvm::ArrayRef<ir::TensorId> Inputs,
                        ir::Attributes Attrs) {
  auto Id = State.Graph.addOp(
      Kind, freshName(name() + "/" + ir::opKindName(Kind).str()), Inputs,
      std::move(Attrs));
  if (!Id)
    return wrap(Id.takeError());
  return State.Graph.op(*Id).Outputs[0];
}

// Binding an output the node does not name is a no-op: nothing can read it.
void NodeContext::bindOutput(unsigned I, ir::TensorId T) {
  if (!hasOutput(I))
    return;
  Value V;
  V.Type = State.Graph.tensor(T).Type;
  V.Tensor = T;
  State.Values[Node.output(I)] = std::move(V);
}

void NodeContext::aliasOutput(unsigned I, unsigned J) {
  if (!hasOutput(I))
    return;
  Value V = input(J);
  State.Values[Node.output(I)] = std::move(V);
}

void NodeContext::bindConstant(unsigned I, ConstTensor C) {
  if (!hasOutput(I))
    return;
  Value V;
  V.Type = ir::TensorType{C.Type, C.Dims};
  V.Const = std::move(C);
  State.Values[Node.output(I)] = std::move(V);
}

} // namespace onnx2soap::onnx_import
