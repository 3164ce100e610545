//===- ir/Graph.cpp - The IR: ops and tensors with dense ids --------------===//
//
// Construction checks every op against its kind's shape rule, so a Graph is
// well-formed by construction; compact() is the one mutation that renumbers.
//
//===----------------------------------------------------------------------===//
#include "ir/Graph.h"
#include "ir/Error.h"
#include "llvm/Support/FormatVariadic.h"
#include <algorithm>
#include <cassert>
#include <queue>

namespace onnx2soap::ir {

llvm::StringRef tensorRoleName(TensorRole Role) {
  switch (Role) {
  case TensorRole::Activation:
    return "activation";
  case TensorRole::Input:
    return "input";
  case TensorRole::Parameter:
    return "parameter";
  case TensorRole::State:
    return "state";
  case TensorRole::Constant:
    return "constant";
  }
  llvm_unreachable("unknown TensorRole");
}

TensorId Graph::addTensor(std::string Name, TensorType Type, TensorRole Role,
                          TensorData Data) {
  Tensor T;
  T.Id = static_cast<TensorId>(Tensors.size());
  T.Name = std::move(Name);
  T.Type = std::move(Type);
  T.Role = Role;
  T.Data = std::move(Data);
  Tensors.push_back(std::move(T));
  return Tensors.back().Id;
}

const TensorType *Graph::inputType(const Op &O, unsigned I) const {
  if (I >= O.Inputs.size() || O.Inputs[I] == NoTensor)
    return nullptr;
  return &Tensors[O.Inputs[I]].Type;
}

llvm::Expected<OpId> Graph::addOp(OpKind Kind, std::string Name,
                                  llvm::ArrayRef<TensorId> Inputs,
                                  Attributes Attrs,
                                  llvm::ArrayRef<std::string> OutputNames) {
  const OpKindInfo &Info = opKindInfo(Kind);
  if (Inputs.size() < Info.MinInputs || Inputs.size() > Info.MaxInputs)
    return fail(llvm::formatv("{0} takes {1} to {2} inputs, got {3}",
                              opKindName(Kind), Info.MinInputs, Info.MaxInputs,
                              Inputs.size()));
  llvm::SmallVector<const TensorType *, 4> Types;
  for (unsigned I = 0; I < Inputs.size(); ++I) {
    TensorId Id = Inputs[I];
    assert((Id == NoTensor || Id < Tensors.size()) && "dangling tensor id");
    if (Id == NoTensor && I < Info.MinInputs)
      return fail(llvm::formatv("{0} requires input {1}", opKindName(Kind), I));
    Types.push_back(Id == NoTensor ? nullptr : &Tensors[Id].Type);
  }
  auto OutTypes = Info.InferTypes(Attrs, Types);
  if (!OutTypes)
    return OutTypes.takeError();
  for (const TensorType &T : *OutTypes)
    if (!checkedNumElements(T.Dims) ||
        *checkedNumElements(T.Dims) > MaxTensorExtent / dtypeSize(T.Type))
      return fail(llvm::formatv("output shape {0} is negative or too large",
                                formatShape(T.Dims)));

  Op O;
  O.Id = static_cast<OpId>(Ops.size());
  O.Kind = Kind;
  O.Name = std::move(Name);
  O.Inputs.assign(Inputs.begin(), Inputs.end());
  O.Attrs = std::move(Attrs);
  for (unsigned I = 0; I < OutTypes->size(); ++I) {
    std::string OutName = I < OutputNames.size() && !OutputNames[I].empty()
                              ? OutputNames[I]
                              : O.Name + ":" + std::to_string(I);
    TensorId Out =
        addTensor(std::move(OutName), (*OutTypes)[I], TensorRole::Activation);
    Tensors[Out].Producer = O.Id;
    O.Outputs.push_back(Out);
  }
  Ops.push_back(std::move(O));
  return Ops.back().Id;
}

llvm::SmallVector<OpId, 4> Graph::consumers(TensorId Id) const {
  llvm::SmallVector<OpId, 4> Result;
  for (const Op &O : Ops)
    for (TensorId In : O.Inputs)
      if (In == Id) {
        Result.push_back(O.Id);
        break;
      }
  return Result;
}

std::vector<llvm::SmallVector<OpId, 2>> Graph::allConsumers() const {
  std::vector<llvm::SmallVector<OpId, 2>> Result(Tensors.size());
  for (const Op &O : Ops)
    for (TensorId In : O.Inputs)
      if (In != NoTensor && (Result[In].empty() || Result[In].back() != O.Id))
        Result[In].push_back(O.Id);
  return Result;
}

void Graph::replaceAllUses(TensorId From, TensorId To) {
  for (Op &O : Ops)
    for (TensorId &In : O.Inputs)
      if (In == From)
        In = To;
  for (TensorId &Out : Outputs)
    if (Out == From)
      Out = To;
}

void Graph::compact() {
  // Liveness: ops that (transitively) feed a graph output.
  std::vector<bool> LiveOp(Ops.size(), false);
  std::vector<OpId> Work;
  auto MarkTensor = [&](TensorId T) {
    if (T == NoTensor)
      return;
    OpId P = Tensors[T].Producer;
    if (P != NoOp && !LiveOp[P]) {
      LiveOp[P] = true;
      Work.push_back(P);
    }
  };
  for (TensorId T : Outputs)
    MarkTensor(T);
  while (!Work.empty()) {
    OpId O = Work.back();
    Work.pop_back();
    for (TensorId In : Ops[O].Inputs)
      MarkTensor(In);
  }

  // Stable topological order of live ops (Kahn's, lowest old id first), so
  // ops appended by a rewrite move before their new readers.
  std::vector<unsigned> Pending(Ops.size(), 0);
  std::vector<llvm::SmallVector<OpId, 2>> Readers(Ops.size());
  for (const Op &O : Ops) {
    if (!LiveOp[O.Id])
      continue;
    for (TensorId In : O.Inputs) {
      if (In == NoTensor || Tensors[In].Producer == NoOp)
        continue;
      OpId P = Tensors[In].Producer;
      ++Pending[O.Id];
      Readers[P].push_back(O.Id);
    }
  }
  std::priority_queue<OpId, std::vector<OpId>, std::greater<OpId>> Ready;
  for (const Op &O : Ops)
    if (LiveOp[O.Id] && Pending[O.Id] == 0)
      Ready.push(O.Id);
  std::vector<OpId> Order;
  while (!Ready.empty()) {
    OpId O = Ready.top();
    Ready.pop();
    Order.push_back(O);
    for (OpId R : Readers[O])
      if (--Pending[R] == 0)
        Ready.push(R);
  }
  assert(Order.size() == static_cast<size_t>(
                             std::count(LiveOp.begin(), LiveOp.end(), true)) &&
         "cycle in IR graph");

  // Keep inputs, outputs and everything live ops touch, in old id order.
  std::vector<bool> KeepTensor(Tensors.size(), false);
  for (TensorId T : Inputs)
    KeepTensor[T] = true;
  for (TensorId T : Outputs)
    KeepTensor[T] = true;
  for (OpId O : Order) {
    for (TensorId T : Ops[O].Inputs)
      if (T != NoTensor)
        KeepTensor[T] = true;
    for (TensorId T : Ops[O].Outputs)
      KeepTensor[T] = true;
  }
  std::vector<TensorId> NewTensorId(Tensors.size(), NoTensor);
  std::vector<Tensor> NewTensors;
  for (Tensor &T : Tensors) {
    if (!KeepTensor[T.Id])
      continue;
    NewTensorId[T.Id] = static_cast<TensorId>(NewTensors.size());
    NewTensors.push_back(std::move(T));
    NewTensors.back().Id = NewTensorId[NewTensors.back().Id];
  }
  std::vector<Op> NewOps;
  for (OpId Old : Order) {
    Op O = std::move(Ops[Old]);
    O.Id = static_cast<OpId>(NewOps.size());
    for (TensorId &T : O.Inputs)
      if (T != NoTensor)
        T = NewTensorId[T];
    for (TensorId &T : O.Outputs) {
      T = NewTensorId[T];
      NewTensors[T].Producer = O.Id;
    }
    NewOps.push_back(std::move(O));
  }
  for (TensorId &T : Inputs)
    T = NewTensorId[T];
  for (TensorId &T : Outputs)
    T = NewTensorId[T];
  Tensors = std::move(NewTensors);
  Ops = std::move(NewOps);
}

int64_t countParameters(const Graph &G) {
  int64_t Count = 0;
  for (const Tensor &T : G.tensors())
    if (T.Role == TensorRole::Parameter)
      Count += T.Type.numElements();
  return Count;
}

} // namespace onnx2soap::ir
