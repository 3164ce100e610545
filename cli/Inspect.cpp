//===- cli/Inspect.cpp - `onnx2soap inspect` ------------------------------===//
//
// Imports a model and prints its ops with shapes, parameters and FLOPs, as
// a table or (--json) as one JSON object.
//
//===----------------------------------------------------------------------===//
#include "cli/Subcommands.h"
#include "ir/BatchDims.h"
#include "ir/JsonText.h"
#include "ir/Printer.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"
#include <functional>
#include <map>

namespace onnx2soap::cli {

namespace cl = llvm::cl;

cl::SubCommand &inspectCommand() {
  static cl::SubCommand Command(
      "inspect", "Import a model and print its ops, shapes, parameters and "
                 "FLOPs");
  return Command;
}

static cl::opt<std::string> Model(cl::Positional, cl::Required,
                                  cl::desc("<model.onnx>"),
                                  cl::sub(inspectCommand()));
static cl::opt<bool> Json("json", cl::desc("Print one JSON object"),
                          cl::sub(inspectCommand()));
static cl::opt<bool> PrintIr("ir", cl::desc("Print the IR in its text form"),
                             cl::sub(inspectCommand()));

/// "1.23 G" style, for the table.
static std::string human(double Value) {
  const char *Units[] = {"", " K", " M", " G", " T", " P"};
  int U = 0;
  while (Value >= 1000 && U < 5) {
    Value /= 1000;
    ++U;
  }
  if (U == 0)
    return llvm::formatv("{0}", static_cast<int64_t>(Value));
  return llvm::formatv("{0:F2}{1}", Value, Units[U]);
}

static std::string padRight(llvm::StringRef Text, size_t Width) {
  std::string Out = Text.str();
  if (Out.size() < Width)
    Out.append(Width - Out.size(), ' ');
  return Out;
}

namespace {
struct Summary {
  std::vector<int64_t> OpParameters; // parameters first read by each op
  int64_t Parameters = 0, State = 0, Constants = 0;
  double FlopsForward = 0, FlopsBackward = 0, ActivationBytes = 0;
  std::map<std::string, int64_t> KindCounts;
};

Summary summarize(const ir::Graph &G) {
  Summary S;
  std::vector<bool> Counted(G.numTensors(), false);
  for (const ir::Op &O : G.ops()) {
    int64_t Params = 0;
    for (ir::TensorId T : O.Inputs) {
      if (T == ir::NoTensor || Counted[T])
        continue;
      const ir::Tensor &Tensor = G.tensor(T);
      if (Tensor.Role == ir::TensorRole::Parameter) {
        Params += Tensor.Type.numElements();
        Counted[T] = true;
      }
    }
    S.OpParameters.push_back(Params);
    ir::OpCost Cost = ir::opKindInfo(O.Kind).Cost(G, O);
    S.FlopsForward += Cost.FlopsForward;
    S.FlopsBackward += Cost.FlopsBackward;
    for (ir::TensorId T : O.Outputs)
      S.ActivationBytes += G.tensor(T).Type.byteSize();
    ++S.KindCounts[ir::opKindName(O.Kind).str()];
  }
  for (const ir::Tensor &T : G.tensors()) {
    if (T.Role == ir::TensorRole::Parameter)
      S.Parameters += T.Type.numElements();
    else if (T.Role == ir::TensorRole::State)
      S.State += T.Type.numElements();
    else if (T.Role == ir::TensorRole::Constant)
      S.Constants += T.Type.numElements();
  }
  return S;
}

/// Names: the names the tensors are known by, when not their own (the
/// graph outputs').
llvm::json::Array tensorList(const ir::Graph &G,
                             llvm::ArrayRef<ir::TensorId> Ids,
                             std::function<std::string(size_t)> Names = {}) {
  llvm::json::Array List;
  for (size_t I = 0; I < Ids.size(); ++I) {
    const ir::Tensor &T = G.tensor(Ids[I]);
    llvm::json::Array Shape;
    for (int64_t D : T.Type.Dims)
      Shape.push_back(D);
    List.push_back(llvm::json::Object{{"name", Names ? Names(I) : T.Name},
                                      {"shape", std::move(Shape)},
                                      {"dtype", ir::dtypeName(T.Type.Type)}});
  }
  return List;
}

void printJson(const onnx_import::ImportedModel &M, const Summary &S) {
  const ir::Graph &G = M.Graph;
  llvm::json::Object Kinds;
  for (const auto &[Kind, Count] : S.KindCounts)
    Kinds[Kind] = Count;
  llvm::json::Object Dims;
  for (const auto &[Name, Size] : M.BoundDims)
    Dims[Name] = Size;
  llvm::json::Object Root{
      {"model", Model.getValue()},
      {"opset", M.Opset},
      {"producer", M.Producer},
      {"ops", static_cast<int64_t>(G.numOps())},
      {"parameters", S.Parameters},
      {"state", S.State},
      {"flops_forward", S.FlopsForward},
      {"flops_backward", S.FlopsBackward},
      {"activation_bytes", S.ActivationBytes},
      {"inputs", tensorList(G, G.inputs())},
      {"outputs", tensorList(G, G.outputs(),
                             [&](size_t I) { return G.outputName(I).str(); })},
      {"op_kinds", std::move(Kinds)},
      {"bound_dims", std::move(Dims)},
      {"fused_patterns", static_cast<int64_t>(M.FusedPatterns)},
  };
  llvm::outs() << ir::jsonText(llvm::json::Value(std::move(Root))) << "\n";
}

void printTable(const onnx_import::ImportedModel &M, const Summary &S) {
  const ir::Graph &G = M.Graph;
  llvm::raw_ostream &OS = llvm::outs();
  OS << llvm::formatv("model {0}: opset {1}, {2}\n", Model.getValue(), M.Opset,
                      M.Producer.empty() ? "unknown producer" : M.Producer);
  for (const auto &[Name, Size] : M.BoundDims)
    OS << llvm::formatv("  dim {0} = {1}\n", Name, Size);
  size_t NameWidth = 4;
  for (const ir::Op &O : G.ops())
    NameWidth = std::max(NameWidth, std::min<size_t>(O.Name.size(), 48));
  OS << llvm::formatv("{0,5}  {1}  {2,-24}  {3,-22}  {4,10}  {5,10}  {6}\n",
                      "#", padRight("name", NameWidth), "kind", "output",
                      "params", "FLOPs", "parallel dims");
  for (const ir::Op &O : G.ops()) {
    ir::OpCost Cost = ir::opKindInfo(O.Kind).Cost(G, O);
    ir::ParallelDims P = ir::parallelDims(G, O);
    std::string Dims;
    for (ir::DimKind K : P.Output)
      Dims += ir::dimKindName(K).take_front(1).upper();
    if (P.ReductionExtent)
      Dims += "+R";
    llvm::StringRef Name = O.Name;
    if (Name.size() > 48)
      Name = Name.take_back(48);
    OS << llvm::formatv("{0,5}  {1}  {2,-24}  {3,-22}  {4,10}  {5,10}  {6}\n",
                        O.Id, padRight(Name, NameWidth), ir::opKindName(O.Kind),
                        ir::formatShape(G.outputType(O).Dims),
                        human(S.OpParameters[O.Id]), human(Cost.FlopsForward),
                        Dims);
  }
  OS << llvm::formatv("\n{0} ops; {1} trainable parameters ({2}), {3} "
                      "state values; forward {4}FLOP, backward {5}FLOP; "
                      "activations {6}B\n",
                      G.numOps(), S.Parameters, human(S.Parameters), S.State,
                      human(S.FlopsForward), human(S.FlopsBackward),
                      human(S.ActivationBytes));
  OS << "parallel dims: S sample, A attribute, P parameter, N none; +R: the "
        "contraction can be split\n";
}
} // namespace

llvm::Error runInspect() {
  auto Options = importOptions();
  if (!Options)
    return Options.takeError();
  auto Imported = onnx_import::importModel(Model, *Options);
  if (!Imported)
    return Imported.takeError();
  if (PrintIr) {
    ir::printGraph(Imported->Graph, llvm::outs());
    return llvm::Error::success();
  }
  Summary S = summarize(Imported->Graph);
  if (Json)
    printJson(*Imported, S);
  else
    printTable(*Imported, S);
  return llvm::Error::success();
}

} // namespace onnx2soap::cli
