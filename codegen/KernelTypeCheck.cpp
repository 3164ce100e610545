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

/// The type of O's operand that selects its kernel.
ir::DType typedType(const ir::Graph &G, const ir::Op &O) {
  auto Kind = static_cast<rt::OpKind>(O.Kind);
  unsigned Typed = rt::kernelTypes(Kind).TypedInput;
  return G.tensor(O.Inputs[Typed]).Type.Type;
}

llvm::Error checkForward(const ir::Graph &G, const ir::Op &O) {
  const rt::KernelTypes &Row = rt::kernelTypes(static_cast<rt::OpKind>(O.Kind));
  ir::DType Type = typedType(G, O);
  if (Row.Forward & typeBit(Type))
    return llvm::Error::success();
  return fail(llvm::formatv("op '{0}' ({1}): no kernel takes {2} operands "
                            "(the kernels take {3}){4}",
                            O.Name, ir::opKindName(O.Kind), ir::dtypeName(Type),
                            rt::typeSetText(Row.Forward), hint(Type)));
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
    ir::DType Type = typedType(G, O);
    if (!(Row.Backward & typeBit(Type)))
      return fail(llvm::formatv(
          "op '{0}' ({1}): no gradient kernel takes {2} operands (the "
          "gradient kernels take {3}){4}",
          O.Name, ir::opKindName(O.Kind), ir::dtypeName(Type),
          rt::typeSetText(Row.Backward), hint(Type)));
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
