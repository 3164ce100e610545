//===- cli/ImportFlags.cpp - Flags that control reading a model -----------===//
//
// Registered on every subcommand that imports a model.
//
//===----------------------------------------------------------------------===//
#include "cli/Subcommands.h"
#include "llvm/Support/FormatVariadic.h"

namespace onnx2soap::cli {

namespace cl = llvm::cl;

static cl::OptionCategory ImportCategory("Model options");

static cl::opt<int64_t>
    Batch("batch", cl::desc("Global batch size: binds the model's batch dim"),
          cl::value_desc("N"), cl::init(0), cl::cat(ImportCategory),
          cl::sub(inspectCommand()), cl::sub(runCommand()),
          cl::sub(trainCommand()), cl::sub(simulateCommand()),
          cl::sub(searchCommand()), cl::sub(calibrateCommand()),
          cl::sub(compileCommand()));
static cl::list<std::string>
    Dims("dim", cl::desc("Size of a named symbolic dim"),
         cl::value_desc("NAME=V"), cl::cat(ImportCategory),
         cl::sub(inspectCommand()), cl::sub(runCommand()),
         cl::sub(trainCommand()), cl::sub(simulateCommand()),
         cl::sub(searchCommand()), cl::sub(calibrateCommand()),
         cl::sub(compileCommand()));
static cl::list<std::string>
    Trainable("trainable",
              cl::desc("Train this weight even if the rules "
                       "say it is state or a constant"),
              cl::value_desc("NAME"), cl::cat(ImportCategory),
              cl::sub(inspectCommand()), cl::sub(runCommand()),
              cl::sub(trainCommand()), cl::sub(simulateCommand()),
              cl::sub(searchCommand()), cl::sub(calibrateCommand()),
              cl::sub(compileCommand()));
static cl::list<std::string>
    Frozen("frozen", cl::desc("Keep this weight fixed (a constant)"),
           cl::value_desc("NAME"), cl::cat(ImportCategory),
           cl::sub(inspectCommand()), cl::sub(runCommand()),
           cl::sub(trainCommand()), cl::sub(simulateCommand()),
           cl::sub(searchCommand()), cl::sub(calibrateCommand()),
           cl::sub(compileCommand()));
static cl::opt<bool>
    UnrollRnn("unroll-rnn",
              cl::desc("Unroll LSTM/GRU layers into one cell op per step"),
              cl::cat(ImportCategory), cl::sub(inspectCommand()),
              cl::sub(runCommand()), cl::sub(trainCommand()),
              cl::sub(simulateCommand()), cl::sub(searchCommand()),
              cl::sub(calibrateCommand()), cl::sub(compileCommand()));
static cl::opt<bool>
    NoFuse("no-fuse",
           cl::desc("Keep decomposed LayerNorm / GELU chains as they are"),
           cl::cat(ImportCategory), cl::sub(inspectCommand()),
           cl::sub(runCommand()), cl::sub(trainCommand()),
           cl::sub(simulateCommand()), cl::sub(searchCommand()),
           cl::sub(calibrateCommand()), cl::sub(compileCommand()));

llvm::Expected<onnx_import::ImportOptions> importOptions() {
  onnx_import::ImportOptions Options;
  if (Batch.getNumOccurrences()) {
    if (Batch <= 0)
      return usageError(
          llvm::formatv("--batch {0}: must be positive", Batch.getValue()));
    Options.Batch = Batch;
  }
  for (const std::string &Entry : Dims) {
    llvm::StringRef Name, Value;
    std::tie(Name, Value) = llvm::StringRef(Entry).split('=');
    int64_t Size;
    if (Name.empty() || Value.getAsInteger(10, Size) || Size < 1)
      return usageError(llvm::formatv("--dim {0}: expected NAME=V with a "
                                      "positive integer V",
                                      Entry));
    // The last of two would have won silently.
    for (const auto &[Given, Value] : Options.Dims)
      if (Given == Name)
        return usageError(llvm::formatv("--dim {0}: the dim '{1}' is given "
                                        "twice",
                                        Entry, Name));
    Options.Dims.emplace_back(Name.str(), Size);
  }
  Options.Roles.Trainable.assign(Trainable.begin(), Trainable.end());
  Options.Roles.Frozen.assign(Frozen.begin(), Frozen.end());
  Options.UnrollRnn = UnrollRnn;
  Options.FusePatterns = !NoFuse;
  return Options;
}

} // namespace onnx2soap::cli
