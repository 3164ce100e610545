//===- cli/Subcommands.h - The onnx2soap subcommands -----------*- C++ -*-===//
//
// Each subcommand is a cl::SubCommand with its options, defined in its own
// file, plus a run function. main() dispatches on the chosen subcommand.
//
//===----------------------------------------------------------------------===//
#ifndef ONNX2SOAP_CLI_SUBCOMMANDS_H
#define ONNX2SOAP_CLI_SUBCOMMANDS_H

#include "ir/Error.h"
#include "ir/JsonText.h"
#include "ir/Training.h"
#include "ir/Units.h"
#include "onnx_import/Importer.h"
#include "simulator/Simulator.h"
#include "soap_search/Mcmc.h"
#include "soap_search/StrategyFile.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"
#include <cmath>
#include <functional>
#include <memory>
#include <optional>

namespace onnx2soap::cli {

/// Constructed on first use, so options in any file can name them during
/// static initialization.
llvm::cl::SubCommand &calibrateCommand();
llvm::cl::SubCommand &clustersCommand();
llvm::cl::SubCommand &compileCommand();
llvm::cl::SubCommand &inspectCommand();
llvm::cl::SubCommand &opsCommand();
llvm::cl::SubCommand &runCommand();
llvm::cl::SubCommand &searchCommand();
llvm::cl::SubCommand &simulateCommand();
llvm::cl::SubCommand &trainCommand();

llvm::Error runCalibrate();
llvm::Error runClusters();
llvm::Error runCompile();
llvm::Error runInspect();
llvm::Error runOps();
/// The exit code: 0 when every output is within tolerance.
llvm::Expected<int> runRun();
llvm::Error runTrain();
llvm::Error runSearch();
llvm::Error runSimulate();

/// The model-reading flags shared by the subcommands that import a model
/// (--batch, --dim, --trainable, --frozen, --unroll-rnn, --no-fuse).
llvm::Expected<onnx_import::ImportOptions> importOptions();

/// A model and a cluster ready to plan: what the flags shared by `simulate`,
/// `search` and `calibrate` (--cluster, --gpus, --loss, --optimizer and the
/// model flags) say (cli/Simulate.cpp).
struct Planning {
  ir::TrainingGraph Training;
  /// The cluster as named by --cluster, and its first --gpus devices.
  simulator::Machine Cluster;
  simulator::Machine M;
  /// What a strategy file for this model and M records.
  soap_search::StrategyTarget Target;
  simulator::SimOptions Sim;
  std::string OptimizerName; ///< "sgd", "momentum", "adam"
  /// --gradient-bucket auto (the default): each strategy gets the size it
  /// runs fastest with (soap_search::defaultGradientBuckets()); Sim holds 0
  /// until then. GradientBucketGiven: the flag was on the command line.
  bool TuneGradientBucket = false;
  bool GradientBucketGiven = false;
};
llvm::Expected<std::unique_ptr<Planning>>
loadPlanning(const std::string &ModelPath);
/// The cost model the planning flags ask for: the analytic roofline, or,
/// with --profile FILE (repeatable), the measured times of those profiles
/// over it. A profile whose device type is none of M's is refused.
llvm::Expected<std::unique_ptr<simulator::CostModel>>
loadCostModel(const simulator::Machine &M);
/// The gradient bucket size to plan S with: --gradient-bucket's size when
/// given as one; else the one its strategy file records (FromFile); else
/// the one S runs fastest with. "auto" on the command line ignores the
/// file's.
double gradientBucketFor(const Planning &P, const simulator::CostModel &Cost,
                         const simulator::Strategy &S,
                         std::optional<double> FromFile);
/// The strategy `--strategy Flag` names: a built-in one (data-parallel,
/// model-parallel, expert) for P.M, or a strategy file made for P.Target
/// (refused, with the reason, when it was not); FromFile, when given,
/// receives the gradient bucket size the file records.
llvm::Expected<simulator::Strategy>
namedStrategy(llvm::StringRef Flag, const Planning &P,
              const simulator::CostModel &Cost,
              std::optional<double> *FromFile = nullptr);
/// What a strategy file planned under P records of Report (the `predicted`
/// object).
soap_search::StrategyPrediction
strategyPrediction(const Planning &P, const simulator::SimReport &Report);
/// "25 MiB", "0 (one all-reduce per tensor)": for tables.
std::string formatGradientBucket(double Bytes);
/// Report's communication tasks and how many the cluster's measured tables
/// timed: the `communication` object of simulate/search --json, and the
/// line their tables print when the cluster has tables ("" otherwise).
llvm::json::Object communicationJson(const simulator::SimReport &Report);
std::string communicationLine(const simulator::Machine &M,
                              const simulator::SimReport &Report);
/// Whether --gpus or --trace was given (search --sweep-gpus refuses them).
bool gpusGiven();
/// The --optimizer planning flag as given (sgd, momentum, adam, adamw).
std::string planningOptimizerName();
bool traceGiven();
/// Fails unless Path can be written as an output file: a path, not of a
/// folder, device, FIFO or socket, in a folder that exists and is
/// writable; Flag names the flag in errors. Checked before the work, so
/// that a bad path costs none.
llvm::Error checkOutputFile(llvm::StringRef Path, llvm::StringRef Flag);

/// Fails when the output Path of Flag is one of the files a planning
/// command reads: the model, the --cluster file, a --profile file (and
/// Also, when given: another input, named AlsoWhat), which writing it
/// would replace.
llvm::Error checkNotAnInput(const std::string &Path, llvm::StringRef Flag,
                            const std::string &ModelPath,
                            const std::string &Also = "",
                            llvm::StringRef AlsoWhat = "");
/// Writes the file at Path through a temporary file in its folder renamed
/// into place, so that no half-written file is ever left (an interrupt
/// removes it too); Flag names the flag in errors.
llvm::Error
writeFileAtomically(llvm::StringRef Path, llvm::StringRef Flag,
                    llvm::function_ref<void(llvm::raw_ostream &)> Write);
/// --trace FILE, when given: Sim's timeline as Chrome trace events.
llvm::Error writeTraceIfAsked(const simulator::Simulator &Sim);
/// Accepts the configs of T's ops that generated programs can run
/// (codegen::checkRunnable): the space `compile` and, unless --any-config,
/// `search` explore. T must outlive the function.
std::function<bool(ir::OpId, const simulator::ParallelConfig &)>
runnableConfigs(const ir::TrainingGraph &T);
/// -o FILE of simulate and search, or empty.
const std::string &strategyOutput();
/// -o FILE, when given: S as a strategy file with Report's prediction.
llvm::Error writeStrategyIfAsked(const Planning &P,
                                 const simulator::Strategy &S,
                                 const simulator::SimReport &Report,
                                 double GradientBucketBytes);
/// Whether --json was given.
bool jsonOutput();
/// "16GiB", "80GB", "1.5 T", "1000000": bytes (KB, MB, ... powers of 1000;
/// K, KiB, M, MiB, ... powers of 1024), a whole, finite number, or nothing.
std::optional<double> parseBytes(llvm::StringRef Text);

/// A serialized TensorProto file (cli/TensorFiles.cpp): a regular file
/// under 2 GiB (protobuf's limit).
llvm::Expected<onnx::TensorProto> readTensor(const std::string &Path);
/// Whether T holds a tensor of type Want (element type and dims).
bool tensorIs(const onnx::TensorProto &T, const ir::TensorType &Want);
/// T's type as errors say it: "f32 [8,3,16,16]" ("data_type 999 [...]"
/// for a type the IR does not know).
std::string describeTensor(const onnx::TensorProto &T);
/// T's bytes in the IR's element layout, when T holds a tensor of type
/// Want (element type and dims); Path names it in errors.
llvm::Expected<std::vector<char>> tensorBytes(const onnx::TensorProto &T,
                                              const std::string &Path,
                                              const ir::TensorType &Want);
/// readTensor then tensorBytes.
llvm::Expected<std::vector<char>> readTensorBytes(const std::string &Path,
                                                  const ir::TensorType &Want);

/// A flag given wrongly: a user-input error like any other (ir/Error.h),
/// printed as one line, exit code 2.
inline llvm::Error usageError(const llvm::Twine &Message) {
  return fail(Message);
}

/// The amount of search work `search` and `compile` take: --budget and
/// --iterations exclude each other, a budget is a positive finite number
/// of seconds (an infinite one never ends), and --iterations, when given,
/// is at least 1 (0 would fall back to the budget).
inline llvm::Error checkSearchWork(bool BudgetGiven, double Budget,
                                   bool IterationsGiven, uint64_t Iterations) {
  if (BudgetGiven && IterationsGiven)
    return usageError("--budget and --iterations exclude each other: give a "
                      "time budget or a number of steps");
  if (!(Budget > 0) || !std::isfinite(Budget))
    return usageError("--budget must be a positive number of seconds");
  if (IterationsGiven && Iterations == 0)
    return usageError("--iterations must be at least 1");
  return llvm::Error::success();
}

/// An optimizer flag's value checked when given: a finite number from Low
/// to High, High itself excluded when HighOpen ("--beta2 -1" trained on
/// into NaN losses).
inline llvm::Error checkSetting(const llvm::cl::opt<double> &Flag, double Low,
                                double High, bool HighOpen = false) {
  if (!Flag.getNumOccurrences())
    return llvm::Error::success();
  double V = Flag.getValue();
  if (std::isfinite(V) && V >= Low && (HighOpen ? V < High : V <= High))
    return llvm::Error::success();
  std::string Range =
      std::isinf(High)
          ? "a finite number of at least " + ir::shortestNumber(Low)
          : "from " + ir::shortestNumber(Low) + " to " +
                ir::shortestNumber(High) + (HighOpen ? " (not included)" : "");
  return usageError("--" + Flag.ArgStr + " " + ir::shortestNumber(V) +
                    ": expected " + Range);
}

/// The error when no strategy search R found fits O's memory limit (or the
/// devices' memory) on M, with the smallest peak found and what might help.
/// Devices: the device counts a sweep tried, as words ("1 or 2"; default:
/// M's count); Compile: the search was compile's, which takes no
/// --objective.
llvm::Error nothingFits(const soap_search::SearchResult &R,
                        const soap_search::SearchOptions &O,
                        const simulator::Machine &M, std::string Devices = "",
                        bool Compile = false);

/// The flags of the optimizer families the chosen one is not of, refused
/// when given ("--optimizer adam --momentum 0.5" trained without momentum):
/// Sgd says whether --optimizer Name is SGD.
inline llvm::Error
checkOptimizerFamily(llvm::StringRef Name, bool Sgd,
                     llvm::ArrayRef<const llvm::cl::Option *> SgdOnly,
                     llvm::ArrayRef<const llvm::cl::Option *> AdamOnly) {
  for (const llvm::cl::Option *Flag : Sgd ? AdamOnly : SgdOnly)
    if (Flag->getNumOccurrences())
      return usageError("--" + Flag->ArgStr + " is for " +
                        (Sgd ? "Adam and AdamW" : "SGD") +
                        " only, not --optimizer " + Name);
  return llvm::Error::success();
}

/// The most --threads any command takes: past it the kernels' thread pool
/// ran out of stack starting its threads (100,000 crashed calibrate).
constexpr int64_t MaxThreads = 1024;
/// --threads N checked: 0 (all cores) to MaxThreads.
inline llvm::Error checkThreads(int64_t N) {
  if (N < 0 || N > MaxThreads)
    return usageError("--threads " + llvm::Twine(N) +
                      ": expected 0 (all cores) to " + llvm::Twine(MaxThreads));
  return llvm::Error::success();
}

} // namespace onnx2soap::cli

#endif
