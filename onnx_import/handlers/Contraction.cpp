//===- onnx_import/handlers/Contraction.cpp - Gemm, MatMul, LSTM, GRU -----===//
//
// Recurrent layers keep ONNX's operand order; options the IR does not model
// (custom activations, clipping, coupled input-forget gates) are reported.
//
//===----------------------------------------------------------------------===//
#include "onnx_import/handlers/Handlers.h"

namespace onnx2soap::onnx_import::handlers {

using ir::OpKind;

llvm::Error gemm(NodeContext &C) {
  if (auto E = C.checkAttributes({"alpha", "beta", "transA", "transB"}))
    return E;
  auto Alpha = C.getFloat("alpha", 1.0);
  auto Beta = C.getFloat("beta", 1.0);
  auto TransA = C.getInt("transA", 0);
  auto TransB = C.getInt("transB", 0);
  if (!Alpha)
    return Alpha.takeError();
  if (!Beta)
    return Beta.takeError();
  if (!TransA)
    return TransA.takeError();
  if (!TransB)
    return TransB.takeError();
  ir::Attributes Attrs;
  Attrs.set("alpha", *Alpha);
  Attrs.set("beta", *Beta);
  Attrs.set("transA", *TransA ? int64_t(1) : int64_t(0));
  Attrs.set("transB", *TransB ? int64_t(1) : int64_t(0));
  return C.emitOrFold(OpKind::Gemm, {0, 1, C.hasInput(2) ? 2 : -1},
                      std::move(Attrs));
}

llvm::Error matMul(NodeContext &C) {
  if (auto E = C.checkAttributes({}))
    return E;
  return C.emitOrFold(OpKind::MatMul, {0, 1}, {});
}

llvm::Error recurrent(NodeContext &C, OpKind Kind) {
  bool Lstm = Kind == OpKind::LSTM;
  if (auto E =
          Lstm ? C.checkAttributes({"activation_alpha", "activation_beta",
                                    "activations", "clip", "direction",
                                    "hidden_size", "input_forget", "layout"})
               : C.checkAttributes({"activation_alpha", "activation_beta",
                                    "activations", "clip", "direction",
                                    "hidden_size", "layout",
                                    "linear_before_reset"}))
    return E;
  if (C.attr("clip"))
    return C.error("cell clipping ('clip') is not supported");
  if (C.attr("activation_alpha") || C.attr("activation_beta"))
    return C.error("activation_alpha/activation_beta are not supported");
  auto Direction = C.getString("direction", "forward");
  auto Hidden = C.getInt("hidden_size", 0);
  auto Layout = C.getInt("layout", 0);
  auto InputForget = C.getInt("input_forget", 0);
  auto LinearBeforeReset = C.getInt("linear_before_reset", 0);
  if (!Direction)
    return Direction.takeError();
  if (!Hidden)
    return Hidden.takeError();
  if (!Layout)
    return Layout.takeError();
  if (!InputForget)
    return InputForget.takeError();
  if (!LinearBeforeReset)
    return LinearBeforeReset.takeError();
  if (*InputForget)
    return C.error("input_forget=1 is not supported");
  if (const onnx::AttributeProto *A = C.attr("activations")) {
    // Only the defaults: f=Sigmoid, g=h=Tanh per direction.
    static const char *const LstmDefault[] = {"Sigmoid", "Tanh", "Tanh"};
    static const char *const GruDefault[] = {"Sigmoid", "Tanh"};
    unsigned PerDirection = Lstm ? 3 : 2;
    for (int I = 0; I < A->strings_size(); ++I) {
      const char *Expected =
          Lstm ? LstmDefault[I % PerDirection] : GruDefault[I % PerDirection];
      if (A->strings(I) != Expected)
        return C.error("activation '{0}' is not supported (only the "
                       "defaults Sigmoid/Tanh)",
                       A->strings(I));
    }
  }
  if (*Layout != 0 && *Layout != 1)
    return C.error("layout must be 0 or 1");
  int64_t H = *Hidden;
  if (H <= 0) {
    // hidden_size is optional in the spec: take it from R [D, gates*H, H].
    const ir::Shape &R = C.inputType(2).Dims;
    if (R.size() != 3)
      return C.error("hidden_size is missing and R {0} is not 3-D",
                     ir::formatShape(R));
    H = R[2];
  }
  ir::Attributes Attrs;
  Attrs.set("hidden_size", H);
  Attrs.set("direction", *Direction);
  Attrs.set("layout", *Layout);
  if (!Lstm)
    Attrs.set("linear_before_reset",
              *LinearBeforeReset ? int64_t(1) : int64_t(0));
  unsigned MaxInputs = Lstm ? 8 : 6;
  if (C.numInputs() > MaxInputs)
    return C.error("too many inputs ({0})", C.numInputs());
  llvm::SmallVector<int, 8> Inputs;
  for (unsigned I = 0; I < C.numInputs(); ++I)
    Inputs.push_back(C.hasInput(I) ? static_cast<int>(I) : -1);
  while (!Inputs.empty() && Inputs.back() < 0)
    Inputs.pop_back();
  return C.emitOrFold(Kind, Inputs, std::move(Attrs));
}

} // namespace onnx2soap::onnx_import::handlers
