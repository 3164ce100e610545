//===- codegen/KernelTypeCheck.cpp - Types the kernels cannot run ---------===//
//
// checkKernelTypes(): a model's ops against runtime_lib/KernelTypes.h, so
// that planning, training and code generation refuse, naming the op, what
// the generated program's kernels would refuse on the cluster.
//
//===----------------------------------------------------------------------===//
#include "codegen/ProgramPlan.h"
#include "ir/Error.h"
#include "runtime_lib/KernelTypes.h"
#include "llvm/Support/FormatVariadic.h"
#include <optional>

namespace onnx2soap::codegen {

namespace {

rt::TypeSet typeBit(ir::DType Type) {
  return rt::typeBit(static_cast<rt::DType>(Type));
}

/// What to do about type T where the kernels take f32: half precision is
/// the usual reason a model holds types no kernel takes.
std::string hint(ir::DType Type) {
  if (Type == ir::DType::Float16 || Type == ir::DType::BFloat16)
    return "; half precision is not supported yet: export the model in "
           "float32";
  return "";
}

/// The type of O's input I, or none when it is absent.
std::optional<ir::DType> inputType(const ir::Graph &G, const ir::Op &O, int I) {
  if (I < 0 || static_cast<size_t>(I) >= O.Inputs.size() ||
      O.Inputs[I] == ir::NoTensor)
    return std::nullopt;
  return G.tensor(O.Inputs[I]).Type.Type;
}

llvm::Error refuse(const ir::Op &O, const char *Kernels, ir::DType Type,
                   rt::TypeSet Takes) {
  return fail(llvm::formatv("op '{0}' ({1}): no {2} takes {3} operands (the "
                            "{2}s take {4}){5}",
                            O.Name, ir::opKindName(O.Kind), Kernels,
                            ir::dtypeName(Type), rt::typeSetText(Takes),
                            hint(Type)));
}

llvm::Error checkForward(const ir::Graph &G, const ir::Op &O) {
  const rt::KernelTypes &Row = rt::kernelTypes(static_cast<rt::OpKind>(O.Kind));
  std::optional<ir::DType> Type = inputType(G, O, Row.TypedInput);
  if (!Type)
    return fail(llvm::formatv("op '{0}' ({1}): input {2} is absent", O.Name,
                              ir::opKindName(O.Kind), Row.TypedInput));
  if (!(Row.Forward & typeBit(*Type)))
    return refuse(O, "kernel", *Type, Row.Forward);
  std::optional<ir::DType> Other = inputType(G, O, Row.OtherInput);
  if (Other && !(Row.Other & typeBit(*Other)))
    return fail(llvm::formatv("op '{0}' ({1}): no kernel takes input {2} "
                              "of type {3} (the kernels take {4} there){5}",
                              O.Name, ir::opKindName(O.Kind), Row.OtherInput,
                              ir::dtypeName(*Other), rt::typeSetText(Row.Other),
                              hint(*Other)));
  return llvm::Error::success();
}

} // namespace

llvm::Error checkKernelTypes(const ir::Graph &G) {
  for (const ir::Op &O : G.ops())
    if (llvm::Error E = checkForward(G, O))
      return E;
  return llvm::Error::success();
}

llvm::Error checkKernelTypes(const ir::TrainingGraph &T) {
  const ir::Graph &G = T.G;
  for (const ir::Op &O : G.ops()) {
    if (llvm::Error E = checkForward(G, O))
      return E;
    if (T.BackwardInputs[O.Id] == 0)
      continue;
    const rt::KernelTypes &Row =
        rt::kernelTypes(static_cast<rt::OpKind>(O.Kind));
    ir::DType Type = *inputType(G, O, Row.TypedInput); // checkForward's
    if (!(Row.Backward & typeBit(Type)))
      return refuse(O, "gradient kernel", Type, Row.Backward);
  }
  for (ir::TensorId P : T.Parameters) {
    const ir::Tensor &W = G.tensor(P);
    if (!(rt::optimizerTypes() & typeBit(W.Type.Type)))
      return fail(llvm::formatv(
          "weight '{0}': the optimizer updates {1} weights, not {2}; keep "
          "it fixed with --frozen {0}{3}",
          W.Name, rt::typeSetText(rt::optimizerTypes()),
          ir::dtypeName(W.Type.Type), hint(W.Type.Type)));
  }
  return llvm::Error::success();
}

} // namespace onnx2soap::codegen
