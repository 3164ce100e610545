//===- onnx_import/Importer.cpp - ONNX model -> IR graph ------------------===//
//
// Order of checks: versions, then every unsupported operator at once, then
// the graph's structure (names, cycles), then initializers and inputs, then
// node-by-node conversion. Each failure is one line that names what and
// where.
//
//===----------------------------------------------------------------------===//
#include "onnx_import/Importer.h"
#include "ir/BatchDims.h"
#include "ir/Error.h"
#include "ir/Fusion.h"
#include "ir/RnnUnroll.h"
#include "onnx_import/Initializers.h"
#include "onnx_import/OpTable.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"
#include <map>
#include <queue>
#include <set>

namespace onnx2soap::onnx_import {

/// Oldest and newest ONNX IR versions read. IR 10 goes with opset 21; IR 11
/// to 14 (onnx 1.18 on; onnx 1.23 writes 14) add only element types
/// (FLOAT4E2M1, FLOAT8E8M0, INT2, UINT2, FLOAT6E2M3, FLOAT6E3M2, refused by
/// name where they appear) and multi-device sharding hints (ignored: the
/// planner chooses the placement), so a model they wrote with an opset up to 21
/// means what it meant under IR 10. A later IR may change more.
constexpr int64_t MinIrVersion = 3;
constexpr int64_t MaxIrVersion = 14;

static bool isDefaultDomain(llvm::StringRef Domain) {
  return Domain.empty() || Domain == "ai.onnx";
}

static llvm::Error checkOperators(const onnx::GraphProto &Graph, int64_t Opset);

static llvm::Expected<int64_t> checkVersions(const onnx::ModelProto &Model) {
  if (!Model.has_ir_version())
    return fail("not a valid ONNX model: it has no ir_version");
  int64_t Ir = Model.ir_version();
  if (Ir < MinIrVersion || Ir > MaxIrVersion)
    return fail(llvm::formatv("ONNX IR version {0} is not supported (onnx2soap "
                              "reads IR versions {1} to {2})",
                              Ir, MinIrVersion, MaxIrVersion));
  std::optional<int64_t> Opset;
  for (const onnx::OperatorSetIdProto &Id : Model.opset_import()) {
    if (!isDefaultDomain(Id.domain()))
      continue;
    if (Opset && *Opset != Id.version())
      return fail(llvm::formatv("the model imports the ai.onnx opset twice, "
                                "as {0} and as {1}",
                                *Opset, Id.version()));
    Opset = Id.version();
  }
  if (!Opset) {
    // A graph made only of other domains' operators (the training preview
    // ops) is valid ONNX; what we lack is those operators.
    const onnx::GraphProto &Graph = Model.graph();
    bool AllOtherDomains = Graph.node_size() > 0;
    for (const onnx::NodeProto &N : Graph.node())
      AllOtherDomains &= !isDefaultDomain(N.domain());
    if (AllOtherDomains)
      if (auto E = checkOperators(Graph, 0))
        return E;
    return fail("the model imports no default-domain (ai.onnx) opset");
  }
  if (*Opset < MinOpset || *Opset > MaxOpset)
    return fail(llvm::formatv(
        "the model uses ai.onnx opset {0}; onnx2soap supports opsets {1} to "
        "{2} (convert it with onnx.version_converter.convert_version(model, "
        "17) or export with opset_version=17)",
        *Opset, MinOpset, MaxOpset));
  return *Opset;
}

/// Every operator the table lacks, in one sorted message.
static llvm::Error checkOperators(const onnx::GraphProto &Graph,
                                  int64_t Opset) {
  std::map<std::string, std::vector<std::string>> Missing;
  for (int I = 0; I < Graph.node_size(); ++I) {
    const onnx::NodeProto &N = Graph.node(I);
    std::string Where = nodeName(N, static_cast<unsigned>(I));
    if (!isDefaultDomain(N.domain()))
      Missing[N.domain() + "." + N.op_type()].push_back(Where);
    else if (!findOnnxOp(N.op_type(), Opset))
      Missing[llvm::formatv("{0} (opset {1})", N.op_type(), Opset)].push_back(
          Where);
  }
  if (Missing.empty())
    return llvm::Error::success();
  std::string Message = "unsupported ONNX operators: ";
  bool First = true;
  for (const auto &[Op, Nodes] : Missing) {
    Message += First ? "" : "; ";
    First = false;
    Message += llvm::formatv("{0} at '{1}'", Op, Nodes[0]);
    if (Nodes.size() > 1)
      Message += llvm::formatv(" and {0} more", Nodes.size() - 1);
  }
  return fail(Message + " (see docs/onnx-support.md)");
}

/// Checks value names (defined once, inputs defined) and returns the nodes
/// in a topological order, or the cycle.
static llvm::Expected<std::vector<int>>
checkStructure(const onnx::GraphProto &Graph, const ModelFile &File) {
  llvm::StringMap<int> Producer; // value -> node index, -1 for graph values
  auto Define = [&](const std::string &Name, int Node,
                    const char *What) -> llvm::Error {
    if (Name.empty())
      return llvm::Error::success();
    auto [It, New] = Producer.try_emplace(Name, Node);
    if (!New)
      return fail(
          llvm::formatv("value '{0}' is defined twice ({1})", Name, What));
    return llvm::Error::success();
  };
  for (const Initializer &Init : File.Initializers)
    if (auto E = Define(Init.Meta.name(), -1, "initializer"))
      return E;
  llvm::StringSet<> InitializerNames;
  for (const Initializer &Init : File.Initializers)
    InitializerNames.insert(Init.Meta.name());
  for (const onnx::ValueInfoProto &In : Graph.input())
    if (!InitializerNames.count(In.name()))
      if (auto E = Define(In.name(), -1, "graph input"))
        return E;
  for (int I = 0; I < Graph.node_size(); ++I)
    for (const std::string &Out : Graph.node(I).output())
      if (auto E = Define(
              Out, I, llvm::formatv("output of node #{0}", I).str().c_str()))
        return E;

  // Kahn's algorithm over node indices, lowest index first (stable).
  std::vector<unsigned> Pending(Graph.node_size(), 0);
  std::vector<std::vector<int>> Readers(Graph.node_size());
  for (int I = 0; I < Graph.node_size(); ++I) {
    const onnx::NodeProto &N = Graph.node(I);
    for (const std::string &In : N.input()) {
      if (In.empty())
        continue;
      auto It = Producer.find(In);
      if (It == Producer.end())
        return fail(llvm::formatv("node '{0}' (#{1}, op {2}) reads '{3}', "
                                  "which no node, input or initializer "
                                  "defines",
                                  nodeName(N, static_cast<unsigned>(I)), I,
                                  N.op_type(), In));
      if (It->second >= 0) {
        ++Pending[I];
        Readers[It->second].push_back(I);
      }
    }
  }
  std::priority_queue<int, std::vector<int>, std::greater<int>> Ready;
  for (int I = 0; I < Graph.node_size(); ++I)
    if (!Pending[I])
      Ready.push(I);
  std::vector<int> Order;
  while (!Ready.empty()) {
    int I = Ready.top();
    Ready.pop();
    Order.push_back(I);
    for (int R : Readers[I])
      if (--Pending[R] == 0)
        Ready.push(R);
  }
  if (Order.size() != static_cast<size_t>(Graph.node_size())) {
    for (int I = 0; I < Graph.node_size(); ++I)
      if (Pending[I])
        return fail(
            llvm::formatv("the graph has a cycle through node '{0}' "
                          "(#{1}, op {2})",
                          nodeName(Graph.node(I), static_cast<unsigned>(I)), I,
                          Graph.node(I).op_type()));
  }
  llvm::StringSet<> Outputs;
  for (const onnx::ValueInfoProto &Out : Graph.output()) {
    if (!Producer.count(Out.name()))
      return fail(
          llvm::formatv("graph output '{0}' is not defined", Out.name()));
    if (!Outputs.insert(Out.name()).second)
      return fail(
          llvm::formatv("graph output '{0}' is listed twice", Out.name()));
  }
  return Order;
}

namespace {
/// Binds symbolic dims of graph inputs from --batch and --dim.
class DimBinder {
public:
  DimBinder(const onnx::GraphProto &Graph, const ImportOptions &Options,
            const llvm::StringSet<> &Initializers) {
    for (const auto &[Name, Size] : Options.Dims)
      Sizes[Name] = Size;
    // The batch: PyTorch's usual names, else the one symbolic leading dim
    // (a time-major input [seq, batch, ...] has its batch at dim 1).
    static const char *const UsualNames[] = {"batch", "batch_size", "N", "B",
                                             "batch_dim"};
    std::set<std::string> Leading;
    bool UsualNameUsed = false;
    for (const onnx::ValueInfoProto &In : Graph.input()) {
      if (Initializers.count(In.name()) || !In.type().has_tensor_type())
        continue;
      const auto &Shape = In.type().tensor_type().shape();
      if (Shape.dim_size() > 0 && Shape.dim(0).has_dim_param())
        Leading.insert(Shape.dim(0).dim_param());
      for (const auto &Dim : Shape.dim())
        UsualNameUsed |= Dim.has_dim_param() &&
                         llvm::is_contained(UsualNames, Dim.dim_param());
    }
    // A usual name is the batch also when --dim gives its size (without
    // --batch): its dim must still be the Sample dim.
    for (const char *Name : UsualNames)
      BatchNames.insert(Name);
    if (Options.Batch && Leading.size() == 1 && !UsualNameUsed)
      BatchNames.insert(*Leading.begin());
    Batch = Options.Batch;
  }

  /// The size of dim D of input In; sets IsBatch when it is the batch.
  llvm::Expected<int64_t> bind(const onnx::ValueInfoProto &In, int D,
                               bool &IsBatch) {
    const auto &Dim = In.type().tensor_type().shape().dim(D);
    IsBatch = false;
    if (Dim.has_dim_value()) {
      if (Dim.dim_value() < 0)
        return fail(llvm::formatv("input '{0}' has negative dim {1} ({2})",
                                  In.name(), D, Dim.dim_value()));
      // A fixed leading dim of the --batch size is the batch (exporters
      // often freeze it), so the planner sees the Sample dim.
      IsBatch = Batch && D == 0 && Dim.dim_value() == *Batch;
      BatchBound |= IsBatch;
      if (Batch && D == 0 && !IsBatch && FixedLeading.empty())
        FixedLeading = llvm::formatv(
            "input '{0}' dim 0 is fixed at {1}: give --batch {1}, or export "
            "the model with a symbolic batch dim",
            In.name(), Dim.dim_value());
      return Dim.dim_value();
    }
    std::string Name = Dim.has_dim_param() ? Dim.dim_param() : "";
    if (!Name.empty()) {
      auto It = Sizes.find(Name);
      if (It != Sizes.end()) {
        Used.insert(Name);
        Bound[Name] = It->second;
        IsBatch = BatchNames.count(Name) > 0;
        BatchBound |= IsBatch;
        if (IsBatch && Batch && It->second != *Batch)
          return fail(llvm::formatv("--dim {0}={1}: '{0}' is the model's "
                                    "batch dim, which --batch {2} binds to {2}",
                                    Name, It->second, *Batch));
        return It->second;
      }
    }
    if (Batch && (BatchNames.count(Name) || (Name.empty() && D == 0))) {
      IsBatch = BatchBound = true;
      Bound[Name.empty() ? "(unnamed batch)" : Name] = *Batch;
      return *Batch;
    }
    // --batch binds an unnamed dim 0 only; no flag can name another.
    if (Name.empty() && D == 0)
      return fail(llvm::formatv("input '{0}' dim {1} has no size; give the "
                                "batch with --batch N",
                                In.name(), D));
    if (Name.empty())
      return fail(llvm::formatv("input '{0}' dim {1} has neither a size nor "
                                "a name, so no flag can give it one; export "
                                "the model with a fixed or named dim there",
                                In.name(), D));
    return fail(llvm::formatv("input '{0}' dim {1} is symbolic ('{2}'); give "
                              "its size with {3}",
                              In.name(), D, Name,
                              Batch ? "--dim " + Name + "=N"
                                    : "--batch N or --dim " + Name + "=N"));
  }

  llvm::Error checkAllUsed() const {
    for (const auto &[Name, Size] : Sizes)
      if (!Used.count(Name))
        return fail(llvm::formatv("--dim {0}={1}: the model's inputs have "
                                  "no symbolic dim '{0}'",
                                  Name, Size));
    // A --batch no input takes would leave the model's own sizes in place
    // silently.
    if (Batch && !BatchBound)
      return fail(llvm::formatv(
          "--batch {0}: no input of the model has a batch dim to bind ({1})",
          *Batch,
          FixedLeading.empty()
              ? std::string("no input has a dim named batch or a "
                            "symbolic leading dim")
              : FixedLeading));
    return llvm::Error::success();
  }

  std::map<std::string, int64_t> Bound;

private:
  std::map<std::string, int64_t> Sizes;
  std::set<std::string> BatchNames, Used;
  std::optional<int64_t> Batch;
  bool BatchBound = false;
  std::string FixedLeading; ///< Why a --batch bound nothing, when it did not
};
} // namespace

static llvm::Error addGraphInput(ImportState &State,
                                 const onnx::ValueInfoProto &In,
                                 DimBinder &Binder,
                                 const ImportOptions &Options) {
  if (!In.type().has_tensor_type())
    return fail(llvm::formatv("input '{0}' is not a tensor (sequences, maps "
                              "and optionals are not supported)",
                              In.name()));
  const onnx::TypeProto::Tensor &TT = In.type().tensor_type();
  std::optional<ir::DType> Type = dtypeFromOnnx(TT.elem_type());
  if (!Type)
    return fail(llvm::formatv("input '{0}' has element type {1}, which is "
                              "not supported",
                              In.name(), onnxTypeName(TT.elem_type())));
  if (!TT.has_shape())
    return fail(llvm::formatv("input '{0}' has no shape", In.name()));
  ir::Shape Dims;
  int8_t BatchDim = -1;
  for (int D = 0; D < TT.shape().dim_size(); ++D) {
    bool IsBatch = false;
    auto Size = Binder.bind(In, D, IsBatch);
    if (!Size)
      return Size.takeError();
    if (IsBatch && BatchDim < 0)
      BatchDim = static_cast<int8_t>(D);
    Dims.push_back(*Size);
  }
  auto Count = ir::checkedNumElements(Dims);
  if (!Count || *Count > ir::MaxTensorExtent / ir::dtypeSize(*Type))
    return fail(llvm::formatv("input '{0}' shape {1} is too large", In.name(),
                              ir::formatShape(Dims)));
  Value V;
  V.Type = ir::TensorType{*Type, Dims};
  auto Given = Options.InputValues.find(In.name());
  if (Given != Options.InputValues.end()) {
    const onnx::TensorProto &T = Given->second;
    auto Decoded = decodeTensor(T, T.raw_data(), T.has_raw_data());
    if (!Decoded)
      return fail(llvm::formatv("value given for input '{0}': {1}", In.name(),
                                llvm::toString(Decoded.takeError())));
    if (Decoded->Type != *Type || Decoded->Dims != Dims)
      return fail(llvm::formatv("value given for input '{0}' is {1} {2}, "
                                "but the input is {3} {4}",
                                In.name(), ir::dtypeName(Decoded->Type),
                                ir::formatShape(Decoded->Dims),
                                ir::dtypeName(*Type), ir::formatShape(Dims)));
    V.Const = std::move(*Decoded);
  } else {
    auto Hint = Options.InputHints.find(In.name());
    if (Hint != Options.InputHints.end()) {
      // A hint too large to fold is simply not used at import time.
      const onnx::TensorProto &T = Hint->second;
      auto Decoded = decodeTensor(T, T.raw_data(), T.has_raw_data());
      if (!Decoded)
        llvm::consumeError(Decoded.takeError());
      else if (Decoded->Type == *Type && Decoded->Dims == Dims)
        V.Hint = std::move(*Decoded);
    }
    V.Tensor = State.Graph.addTensor(In.name(), V.Type, ir::TensorRole::Input);
    State.Graph.tensor(V.Tensor).BatchDim = BatchDim;
    State.Graph.addInput(V.Tensor);
  }
  State.Values[In.name()] = std::move(V);
  return llvm::Error::success();
}

/// A float initializer a handler read at import time keeps that value
/// there; training it elsewhere would make the two disagree.
static llvm::Error
checkReadAtImport(const ir::Graph &G,
                  const std::map<std::string, std::string> &ReadAtImport) {
  for (const ir::Tensor &T : G.tensors()) {
    if (T.Role != ir::TensorRole::Parameter)
      continue;
    auto It = ReadAtImport.find(T.Name);
    if (It != ReadAtImport.end())
      return fail(llvm::formatv("initializer '{0}' is read at import time by "
                                "{1} and also trained as a weight; keep it "
                                "fixed with --frozen {0}",
                                T.Name, It->second));
  }
  return llvm::Error::success();
}

llvm::Expected<ImportedModel> importModel(ModelFile File,
                                          llvm::StringRef ModelDir,
                                          const ImportOptions &Options) {
  const onnx::ModelProto &Model = File.Model;
  if (Options.Batch && *Options.Batch <= 0)
    return fail(llvm::formatv("--batch {0}: must be positive", *Options.Batch));
  for (const auto &[Name, Size] : Options.Dims)
    if (Size < 0)
      return fail(
          llvm::formatv("--dim {0}={1}: must not be negative", Name, Size));
  auto Opset = checkVersions(Model);
  if (!Opset)
    return Opset.takeError();
  const onnx::GraphProto &Graph = Model.graph();
  if (Graph.sparse_initializer_size())
    return fail(llvm::formatv(
        "sparse initializer '{0}' is not supported (store it dense)",
        Graph.sparse_initializer(0).values().name()));
  if (auto E = checkOperators(Graph, *Opset))
    return E;
  if (Graph.output_size() == 0)
    return fail("the model's graph has no outputs");
  auto Order = checkStructure(Graph, File);
  if (!Order)
    return Order.takeError();

  ImportState State;
  State.Graph.Name = Graph.name();
  llvm::StringSet<> InitializerNames;
  for (const Initializer &Init : File.Initializers) {
    InitializerNames.insert(Init.Meta.name());
    if (auto E = addInitializer(State, File, Init, ModelDir))
      return E;
  }
  DimBinder Binder(Graph, Options, InitializerNames);
  for (const onnx::ValueInfoProto &In : Graph.input())
    if (!InitializerNames.count(In.name()))
      if (auto E = addGraphInput(State, In, Binder, Options))
        return E;
  if (auto E = Binder.checkAllUsed())
    return E;

  for (int I : *Order) {
    const onnx::NodeProto &Node = Graph.node(I);
    NodeContext Context(State, Node, static_cast<unsigned>(I), *Opset);
    const OnnxOp *Entry = findOnnxOp(Node.op_type(), *Opset);
    for (unsigned In = 0; In < Entry->MinInputs; ++In)
      if (!Context.hasInput(In))
        return Context.error("required input {0} is missing (the node has {1} "
                             "input{2})",
                             In, Node.input_size(),
                             Node.input_size() == 1 ? "" : "s");
    // Trailing "" (absent optional inputs) aside; Softmax(x, x) read x
    // once and dropped the rest.
    unsigned Given = Node.input_size();
    while (Given > 0 && Node.input(Given - 1).empty())
      --Given;
    if (Given > Entry->MaxInputs)
      return Context.error("{0} takes at most {1} input{2}, the node has {3}",
                           Node.op_type(), Entry->MaxInputs,
                           Entry->MaxInputs == 1 ? "" : "s", Given);
    if (auto E = Entry->Convert(Context))
      return E;
    for (int O = 0; O < Node.output_size(); ++O)
      if (!Node.output(O).empty() && !State.Values.count(Node.output(O)))
        return Context.error("output {0} ('{1}') is not supported", O,
                             Node.output(O));
  }

  for (const onnx::ValueInfoProto &Out : Graph.output()) {
    Value &V = State.Values.find(Out.name())->second;
    if (V.Tensor == ir::NoTensor)
      V.Tensor =
          State.Graph.addTensor(Out.name(), V.Type, ir::TensorRole::Constant,
                                ir::TensorData::owned(V.Const->toBytes()));
    State.Graph.addOutput(V.Tensor, Out.name());
  }

  ImportedModel Result;
  ir::Graph &G = State.Graph;
  G.compact();
  if (Options.FusePatterns)
    Result.FusedPatterns = ir::fusePatterns(G);
  if (auto E = ir::assignRoles(G, Options.Roles))
    return E;
  if (auto E = checkReadAtImport(G, State.ReadAtImport))
    return E;
  if (Options.UnrollRnn) {
    auto Changed = ir::unrollRecurrent(G);
    if (!Changed)
      return Changed.takeError();
  }
  ir::inferBatchDims(G);

  Result.Graph = std::move(G);
  Result.IrVersion = Model.ir_version();
  Result.Opset = *Opset;
  Result.Producer = Model.producer_name();
  if (!Model.producer_version().empty())
    Result.Producer += " " + Model.producer_version();
  Result.FileSize = File.Buffer->getBufferSize();
  Result.BoundDims.assign(Binder.Bound.begin(), Binder.Bound.end());
  return Result;
}

llvm::Expected<ImportedModel> importModel(llvm::StringRef Path,
                                          const ImportOptions &Options) {
  auto File = readModelFile(Path);
  if (!File)
    return File.takeError();
  llvm::SmallString<256> Dir(Path);
  llvm::sys::path::remove_filename(Dir);
  if (Dir.empty())
    Dir = ".";
  return importModel(std::move(*File), Dir, Options);
}

} // namespace onnx2soap::onnx_import
