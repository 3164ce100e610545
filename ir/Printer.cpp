//===- ir/Printer.cpp - Text form of a graph ------------------------------===//
//
// Tensors print as %<id>; names are quoted once, where a tensor is defined.
//
//===----------------------------------------------------------------------===//
#include "ir/Printer.h"
#include "llvm/Support/FormatVariadic.h"

namespace onnx2soap::ir {

static std::string typeText(const Tensor &T) {
  std::string Text = (dtypeName(T.Type.Type) + formatShape(T.Type.Dims)).str();
  if (T.BatchDim >= 0)
    Text += llvm::formatv(" batch={0}", int(T.BatchDim)).str();
  return Text;
}

void printGraph(const Graph &G, llvm::raw_ostream &OS) {
  OS << "graph \"" << G.Name << "\" {\n";
  for (const Tensor &T : G.tensors())
    if (T.Role != TensorRole::Activation)
      OS << llvm::formatv("  {0} %{1} \"{2}\": {3}\n", tensorRoleName(T.Role),
                          T.Id, T.Name, typeText(T));
  for (const Op &O : G.ops()) {
    OS << "  ";
    for (size_t I = 0; I < O.Outputs.size(); ++I) {
      const Tensor &Out = G.tensor(O.Outputs[I]);
      OS << (I ? ", " : "")
         << llvm::formatv("%{0} \"{1}\": {2}", Out.Id, Out.Name, typeText(Out));
    }
    OS << " = " << opKindName(O.Kind) << "(";
    for (size_t I = 0; I < O.Inputs.size(); ++I) {
      OS << (I ? ", " : "");
      if (O.Inputs[I] == NoTensor)
        OS << "none";
      else
        OS << "%" << O.Inputs[I];
    }
    OS << ")";
    std::string Attrs = formatAttributes(O.Attrs);
    if (!Attrs.empty())
      OS << " {" << Attrs << "}";
    OS << "  # " << O.Name << "\n";
  }
  OS << "  outputs";
  for (TensorId T : G.outputs())
    OS << " %" << T;
  OS << "\n}\n";
}

} // namespace onnx2soap::ir
