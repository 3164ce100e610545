//===- cli/Run.cpp - `onnx2soap run` --------------------------------------===//
//
// Runs a model's forward pass on the CPU backend over inputs stored in the
// ONNX backend-test layout (DIR/input_N.pb, serialized TensorProtos), writes
// the outputs (--out) and compares them with DIR/output_N.pb when present.
//
//===----------------------------------------------------------------------===//
#include "cli/Subcommands.h"
#include "codegen/ProgramPlan.h"
#include "executor/Executor.h"
#include "onnx_import/ConstTensor.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"
#include <cmath>
#include <cstring>
#include <set>

namespace onnx2soap::cli {

namespace cl = llvm::cl;

cl::SubCommand &runCommand() {
  static cl::SubCommand Command(
      "run", "Run a model's forward pass on the CPU over stored inputs");
  return Command;
}

static cl::opt<std::string> Model(cl::Positional, cl::Required,
                                  cl::desc("<model.onnx>"),
                                  cl::sub(runCommand()));
static cl::opt<std::string>
    Data("data", cl::Required,
         cl::desc("Folder with input_N.pb (and output_N.pb to compare)"),
         cl::value_desc("DIR"), cl::sub(runCommand()));
static cl::opt<std::string> Out("out", cl::desc("Write output_N.pb here"),
                                cl::value_desc("DIR"), cl::sub(runCommand()));
static cl::opt<double> Rtol("rtol",
                            cl::desc("Relative tolerance (default 1e-3)"),
                            cl::value_desc("X"), cl::init(1e-3),
                            cl::sub(runCommand()));
static cl::opt<double> Atol("atol",
                            cl::desc("Absolute tolerance (default 1e-4)"),
                            cl::value_desc("X"), cl::init(1e-4),
                            cl::sub(runCommand()));
static cl::opt<int> Threads("threads", cl::desc("CPU threads (0: all cores)"),
                            cl::value_desc("N"), cl::init(0),
                            cl::sub(runCommand()));

/// Element I of bytes in type Type as a double.
static double elementAt(const std::vector<char> &Bytes, ir::DType Type,
                        int64_t I) {
  auto Get = [&](auto Tag) {
    decltype(Tag) V;
    std::memcpy(&V, Bytes.data() + I * sizeof V, sizeof V);
    return static_cast<double>(V);
  };
  switch (Type) {
  case ir::DType::Float32:
    return Get(float());
  case ir::DType::Float64:
    return Get(double());
  case ir::DType::Float16: {
    uint16_t Bits;
    std::memcpy(&Bits, Bytes.data() + 2 * I, 2);
    return onnx_import::halfToFloat(Bits);
  }
  case ir::DType::BFloat16: {
    uint16_t Bits;
    std::memcpy(&Bits, Bytes.data() + 2 * I, 2);
    uint32_t Wide = static_cast<uint32_t>(Bits) << 16;
    float F;
    std::memcpy(&F, &Wide, 4);
    return F;
  }
  case ir::DType::Int8:
    return Get(int8_t());
  case ir::DType::UInt8:
  case ir::DType::Bool:
    return Get(uint8_t());
  case ir::DType::Int16:
    return Get(int16_t());
  case ir::DType::UInt16:
    return Get(uint16_t());
  case ir::DType::Int32:
    return Get(int32_t());
  case ir::DType::UInt32:
    return Get(uint32_t());
  case ir::DType::Int64:
    return Get(int64_t());
  case ir::DType::UInt64:
    return Get(uint64_t());
  }
  return 0;
}

static int32_t onnxType(ir::DType Type) {
  switch (Type) {
  case ir::DType::Float32:
    return onnx::TensorProto::FLOAT;
  case ir::DType::Float16:
    return onnx::TensorProto::FLOAT16;
  case ir::DType::BFloat16:
    return onnx::TensorProto::BFLOAT16;
  case ir::DType::Float64:
    return onnx::TensorProto::DOUBLE;
  case ir::DType::Int8:
    return onnx::TensorProto::INT8;
  case ir::DType::UInt8:
    return onnx::TensorProto::UINT8;
  case ir::DType::Int16:
    return onnx::TensorProto::INT16;
  case ir::DType::UInt16:
    return onnx::TensorProto::UINT16;
  case ir::DType::Int32:
    return onnx::TensorProto::INT32;
  case ir::DType::UInt32:
    return onnx::TensorProto::UINT32;
  case ir::DType::Int64:
    return onnx::TensorProto::INT64;
  case ir::DType::UInt64:
    return onnx::TensorProto::UINT64;
  case ir::DType::Bool:
    return onnx::TensorProto::BOOL;
  }
  return 0;
}

/// Exit code when outputs differ from the expected ones.
constexpr int OutputsDiffer = 3;

llvm::Expected<int> runRun() {
  if (llvm::Error E = checkThreads(Threads))
    return E;
  // The outputs would replace the expected ones before they are read, and
  // every run would pass.
  bool Same = false;
  if (!Out.empty() && !llvm::sys::fs::equivalent(Out, Data, Same) && Same)
    return usageError("--out " + Out +
                      ": the folder of --data, whose output_N.pb are the "
                      "expected outputs; write elsewhere");
  auto Options = importOptions();
  if (!Options)
    return Options.takeError();
  std::vector<onnx::TensorProto> Inputs;
  for (int I = 0;; ++I) {
    std::string Path = llvm::formatv("{0}/input_{1}.pb", Data.getValue(), I);
    if (!llvm::sys::fs::exists(Path))
      break;
    auto T = readTensor(Path);
    if (!T)
      return T.takeError();
    Inputs.push_back(std::move(*T));
  }
  // Hints let inputs that feed shapes be read at import time.
  auto File = onnx_import::readModelFile(Model);
  if (!File)
    return File.takeError();
  std::set<std::string> Initializers;
  for (const onnx_import::Initializer &Init : File->Initializers)
    Initializers.insert(Init.Meta.name());
  std::vector<std::string> Names;
  for (const onnx::ValueInfoProto &In : File->Model.graph().input())
    if (!Initializers.count(In.name()))
      Names.push_back(In.name());
  if (Inputs.size() != Names.size())
    return usageError(llvm::formatv("the model has {0} inputs but '{1}' holds "
                                    "{2} input_N.pb files",
                                    Names.size(), Data.getValue(),
                                    Inputs.size()));
  for (size_t I = 0; I < Names.size(); ++I)
    Options->InputHints[Names[I]] = Inputs[I];
  auto Imported = onnx_import::importModel(Model, *Options);
  if (!Imported)
    return Imported.takeError();
  const ir::Graph &G = Imported->Graph;
  if (llvm::Error E = codegen::checkKernelTypes(G))
    return E;

  auto Backend = rt::createCpuBackend(Threads);
  auto Exec = executor::Executor::create(G, *Backend);
  if (!Exec)
    return Exec.takeError();
  for (size_t I = 0; I < G.inputs().size(); ++I) {
    std::string Path = llvm::formatv("{0}/input_{1}.pb", Data.getValue(), I);
    auto Bytes = tensorBytes(Inputs[I], Path, G.tensor(G.inputs()[I]).Type);
    if (!Bytes)
      return Bytes.takeError();
    if (auto E = (*Exec)->setInput(G.inputs()[I], *Bytes))
      return usageError(
          llvm::formatv("'{0}': {1}", Path, llvm::toString(std::move(E))));
  }
  if (auto E = (*Exec)->forward())
    return E;

  bool AllWithin = true;
  for (size_t I = 0; I < G.outputs().size(); ++I) {
    const ir::Tensor &T = G.tensor(G.outputs()[I]);
    std::vector<char> Got = (*Exec)->read(T.Id);
    if (!Out.empty()) {
      onnx::TensorProto Proto;
      Proto.set_name(G.outputName(I).str());
      Proto.set_data_type(onnxType(T.Type.Type));
      for (int64_t D : T.Type.Dims)
        Proto.add_dims(D);
      Proto.set_raw_data(std::string(Got.begin(), Got.end()));
      std::string Path = llvm::formatv("{0}/output_{1}.pb", Out.getValue(), I);
      if (std::error_code EC =
              llvm::sys::fs::create_directories(Out.getValue()))
        return usageError(llvm::formatv("--out {0}: cannot create it: {1}",
                                        Out.getValue(), EC.message()));
      // Never half-written (a full disk, an interrupt).
      if (llvm::Error E =
              writeFileAtomically(Path, "--out", [&](llvm::raw_ostream &File) {
                File << Proto.SerializeAsString();
              }))
        return E;
    }
    std::string Expected =
        llvm::formatv("{0}/output_{1}.pb", Data.getValue(), I);
    if (!llvm::sys::fs::exists(Expected)) {
      llvm::outs() << llvm::formatv("output {0} '{1}': {2} {3}\n", I,
                                    G.outputName(I), ir::dtypeName(T.Type.Type),
                                    ir::formatShape(T.Type.Dims));
      continue;
    }
    auto Reference = readTensor(Expected);
    if (!Reference)
      return Reference.takeError();
    // An output of another type or shape than the reference's differs
    // from it (exit 3); the reference is compared in its own type only.
    if (!tensorIs(*Reference, T.Type)) {
      llvm::outs() << llvm::formatv(
          "output {0} '{1}': {2} {3}, expected {4}: FAIL\n", I, G.outputName(I),
          ir::dtypeName(T.Type.Type), ir::formatShape(T.Type.Dims),
          describeTensor(*Reference));
      AllWithin = false;
      continue;
    }
    auto Want = tensorBytes(*Reference, Expected, T.Type);
    if (!Want)
      return Want.takeError();
    double MaxAbs = 0, MaxRel = 0;
    bool Within = true;
    int64_t BothNan = 0; // equal, but said: the errors leave them out
    for (int64_t E = 0; E < T.Type.numElements(); ++E) {
      double A = elementAt(Got, T.Type.Type, E),
             B = elementAt(*Want, T.Type.Type, E);
      if (std::isnan(A) && std::isnan(B)) {
        ++BothNan;
        continue;
      }
      double Diff = std::fabs(A - B);
      if (std::isnan(Diff) || ((std::isinf(A) || std::isinf(B)) && A != B))
        Diff = INFINITY;
      MaxAbs = std::max(MaxAbs, Diff);
      MaxRel = std::max(MaxRel, Diff / std::max(std::fabs(B), 1e-30));
      if (!(Diff <= Atol + Rtol * std::fabs(B)))
        Within = false;
    }
    AllWithin &= Within;
    std::string Nans = BothNan == 0
                           ? ""
                           : llvm::formatv(" ({0} element{1} NaN in both)",
                                           BothNan, BothNan == 1 ? "" : "s")
                                 .str();
    llvm::outs() << llvm::formatv(
        "output {0} '{1}': max abs error {2:e}, max rel error {3:e}{4}: {5}\n",
        I, G.outputName(I), MaxAbs, MaxRel, Nans, Within ? "ok" : "FAIL");
  }
  return AllWithin ? 0 : OutputsDiffer;
}

} // namespace onnx2soap::cli
