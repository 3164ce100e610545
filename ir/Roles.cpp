//===- ir/Roles.cpp - Telling parameters from state and constants ---------===//
//
// The rules are deliberately few; see docs/ir.md ("Parameters, state and
// constants").
//
//===----------------------------------------------------------------------===//
#include "ir/Roles.h"
#include "ir/Error.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/FormatVariadic.h"

namespace onnx2soap::ir {

llvm::Error assignRoles(Graph &G, const RoleOverrides &Overrides) {
  for (const Op &O : G.ops()) {
    uint32_t State = opKindInfo(O.Kind).StateInputs;
    for (unsigned I = 0; I < O.Inputs.size(); ++I)
      if ((State >> I & 1) && O.Inputs[I] != NoTensor &&
          G.tensor(O.Inputs[I]).Role == TensorRole::Parameter)
        G.tensor(O.Inputs[I]).Role = TensorRole::State;
  }

  llvm::StringMap<TensorId> Weights;
  for (const Tensor &T : G.tensors())
    if (T.Role != TensorRole::Activation && T.Role != TensorRole::Input)
      Weights[T.Name] = T.Id;
  auto Lookup = [&](const std::string &Name,
                    const char *Flag) -> llvm::Expected<TensorId> {
    auto It = Weights.find(Name);
    if (It == Weights.end())
      return fail(llvm::formatv("{0} {1}: the model has no initializer or "
                                "constant named '{1}'",
                                Flag, Name));
    return It->second;
  };
  for (const std::string &Name : Overrides.Trainable) {
    for (const std::string &Other : Overrides.Frozen)
      if (Other == Name)
        return fail(llvm::formatv(
            "'{0}' is given both to --trainable and to --frozen", Name));
    auto Id = Lookup(Name, "--trainable");
    if (!Id)
      return Id.takeError();
    Tensor &T = G.tensor(*Id);
    if (!isFloatingPoint(T.Type.Type))
      return fail(llvm::formatv("--trainable {0}: a {1} tensor cannot be "
                                "trained",
                                Name, dtypeName(T.Type.Type)));
    T.Role = TensorRole::Parameter;
  }
  for (const std::string &Name : Overrides.Frozen) {
    auto Id = Lookup(Name, "--frozen");
    if (!Id)
      return Id.takeError();
    G.tensor(*Id).Role = TensorRole::Constant;
  }
  return llvm::Error::success();
}

} // namespace onnx2soap::ir
