//===- cli/Simulate.cpp - `onnx2soap simulate` ----------------------------===//
//
// Simulates one training iteration of a model on a cluster under a strategy
// (a strategy file or a built-in one) and prints the predicted iteration
// time, bytes moved, and per device compute time, bytes sent and peak memory
// against capacity. Also holds what `simulate` and `search` share: loading
// the model and cluster from the planning flags, --trace, and number
// formatting.
//
//===----------------------------------------------------------------------===//
#include "cli/Subcommands.h"
#include "codegen/ProgramPlan.h"
#include "ir/JsonText.h"
#include "simulator/ProfileCostModel.h"
#include "simulator/Trace.h"
#include "soap_search/Builtins.h"
#include "soap_search/Elimination.h"
#include "soap_search/Mcmc.h"
#include "soap_search/StrategyFile.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"
#include <cmath>
#include <cstdio>
#include <future>
#include <limits>

namespace onnx2soap::cli {

namespace cl = llvm::cl;
using simulator::Machine;

cl::SubCommand &simulateCommand() {
  static cl::SubCommand Command(
      "simulate", "Predict a training iteration's time and memory on a "
                  "cluster under a strategy");
  return Command;
}

// Flags shared with `search` (and those `calibrate` plans with).
static cl::OptionCategory PlanningCategory("Planning options");
static cl::opt<std::string>
    ClusterFlag("cluster",
                cl::desc("Cluster preset or cluster file (required)"),
                cl::value_desc("C"), cl::cat(PlanningCategory),
                cl::sub(simulateCommand()), cl::sub(searchCommand()),
                cl::sub(compileCommand()), cl::sub(calibrateCommand()));
static cl::opt<unsigned>
    Gpus("gpus", cl::desc("Use the cluster's first N devices"),
         cl::value_desc("N"), cl::init(0), cl::cat(PlanningCategory),
         cl::sub(simulateCommand()), cl::sub(searchCommand()),
         cl::sub(compileCommand()), cl::sub(calibrateCommand()));
static cl::opt<std::string>
    OptimizerFlag("optimizer",
                  cl::desc("Optimizer whose update and state are simulated "
                           "(adamw as adam); compile: also the program's "
                           "(default momentum)"),
                  cl::value_desc("sgd|momentum|adam|adamw"),
                  cl::init("momentum"), cl::cat(PlanningCategory),
                  cl::sub(simulateCommand()), cl::sub(searchCommand()),
                  cl::sub(compileCommand()));
static cl::opt<std::string> GradientBucketFlag(
    "gradient-bucket",
    cl::desc("All-reduce the gradients in buckets of about BYTES, in the "
             "order backward produces them (suffixes as 4MiB, 25MB; 0: one "
             "all-reduce per tensor); auto (the default, unless a strategy "
             "file records a size): the size of 0, 1, 4, 16 or 64 MiB the "
             "strategy runs fastest with"),
    cl::value_desc("BYTES|auto"), cl::init("auto"), cl::cat(PlanningCategory),
    cl::sub(simulateCommand()), cl::sub(searchCommand()),
    cl::sub(compileCommand()));
static cl::opt<std::string> CommModelFlag(
    "comm-model",
    cl::desc("program (default): each device takes part in one "
             "communication at a time, as generated programs run them; "
             "flexflow: FlexFlow's model, a device uses all its links at "
             "once"),
    cl::value_desc("program|flexflow"), cl::init("program"),
    cl::cat(PlanningCategory), cl::sub(simulateCommand()),
    cl::sub(searchCommand()), cl::sub(compileCommand()));
static cl::opt<std::string>
    LossFlag("loss",
             cl::desc("The loss appended to the model: cross-entropy over "
                      "the last dim (default), cross-entropy-channels (over "
                      "dim 1 of [N,C,...]), mse, or model (the model "
                      "computes its own)"),
             cl::value_desc("cross-entropy|cross-entropy-channels|mse|model"),
             cl::init("cross-entropy"), cl::cat(PlanningCategory),
             cl::sub(simulateCommand()), cl::sub(searchCommand()),
             cl::sub(compileCommand()), cl::sub(calibrateCommand()));
static cl::list<std::string>
    ProfileFlag("profile",
                cl::desc("Measured op times (onnx2soap calibrate) to use "
                         "instead of the analytic cost model where they have "
                         "an entry; repeatable, one per device type"),
                cl::value_desc("FILE"), cl::cat(PlanningCategory),
                cl::sub(simulateCommand()), cl::sub(searchCommand()),
                cl::sub(compileCommand()));
static cl::opt<std::string>
    TraceFile("trace",
              cl::desc("Write the simulated timeline as Chrome trace events "
                       "(opens in Perfetto)"),
              cl::value_desc("FILE"), cl::cat(PlanningCategory),
              cl::sub(simulateCommand()), cl::sub(searchCommand()));
static cl::opt<std::string> StrategyOutput(
    "o",
    cl::desc("Write the strategy file: search's answer, or the strategy "
             "simulated (a built-in one to edit by hand)"),
    cl::value_desc("strategy.json"), cl::cat(PlanningCategory),
    cl::sub(simulateCommand()), cl::sub(searchCommand()));
static cl::opt<bool> Json("json", cl::desc("Print one JSON value"),
                          cl::cat(PlanningCategory), cl::sub(simulateCommand()),
                          cl::sub(searchCommand()));

// `simulate` only.
static cl::opt<std::string> Model(cl::Positional, cl::Required,
                                  cl::desc("<model.onnx>"),
                                  cl::sub(simulateCommand()));
static cl::opt<std::string> StrategyFlag(
    "strategy",
    cl::desc("Strategy file, or data-parallel, model-parallel, expert or "
             "optcnn (required)"),
    cl::value_desc("S"), cl::sub(simulateCommand()));

/// "16GiB", "80GB", "1.5 T", "1000000": a whole, finite number of bytes, or
/// nothing.
std::optional<double> parseBytes(llvm::StringRef Text) {
  Text = Text.trim();
  size_t NumberEnd = Text.find_first_not_of("0123456789.");
  llvm::StringRef Number = Text.take_front(NumberEnd);
  std::string Unit = Text.drop_front(Number.size()).trim().lower();
  double Value;
  if (Number.empty() || Number.getAsDouble(Value))
    return std::nullopt;
  static const std::pair<const char *, double> Units[] = {
      {"", 1},
      {"b", 1},
      {"kb", 1e3},
      {"mb", 1e6},
      {"gb", 1e9},
      {"tb", 1e12},
      {"k", 1024.0},
      {"m", 1024.0 * 1024},
      {"g", 1024.0 * 1024 * 1024},
      {"t", 1099511627776.0},
      {"kib", 1024.0},
      {"mib", 1024.0 * 1024},
      {"gib", 1024.0 * 1024 * 1024},
      {"tib", 1099511627776.0}};
  for (const auto &[Name, Scale] : Units)
    if (Unit == Name) {
      // 400 digits read as infinity; half a byte was simulated as such
      // and written to strategy files as 0.
      double Bytes = Value * Scale;
      if (!std::isfinite(Bytes) || Bytes != std::floor(Bytes))
        return std::nullopt;
      return Bytes;
    }
  return std::nullopt;
}

llvm::Expected<simulator::Strategy>
namedStrategy(llvm::StringRef Flag, const Planning &P,
              const simulator::CostModel &Cost,
              std::optional<double> *FromFile) {
  // As for --cluster: a built-in's name that is a file here too is neither
  // (the built-in used to win silently).
  if ((soap_search::parseBuiltin(Flag) || Flag == "optcnn") &&
      llvm::sys::fs::exists(Flag))
    return usageError(llvm::formatv("--strategy {0}: a built-in strategy's "
                                    "name and a file in this folder; write "
                                    "./{0} for the file",
                                    Flag));
  if (auto Kind = soap_search::parseBuiltin(Flag))
    return soap_search::builtin(*Kind, P.Training.G, P.M, Cost);
  if (Flag == "optcnn") {
    // OptCNN's strategy over the configs generated programs can run, however
    // long costing the edges takes (search limits it; see planner.md).
    soap_search::ConfigSpaceOptions Options;
    Options.Accept = runnableConfigs(P.Training);
    soap_search::ConfigSpace Space(P.Training.G, P.M.numDevices(), Options);
    soap_search::AdditiveCost Additive(P.Training, P.M, Cost, P.Sim, Space);
    simulator::Simulator Sim(P.Training, P.M, Cost, P.Sim);
    return *soap_search::optcnnStrategy(
        Additive, Sim, soap_search::dataParallel(P.Training.G, P.M),
        std::numeric_limits<double>::infinity());
  }
  if (!llvm::sys::fs::exists(Flag))
    return usageError(llvm::formatv("--strategy {0}: no such file, and not a "
                                    "built-in strategy (data-parallel, "
                                    "model-parallel, expert, optcnn)",
                                    Flag));
  return soap_search::readStrategy(Flag, P.Training.G, P.Target, FromFile);
}

double gradientBucketFor(const Planning &P, const simulator::CostModel &Cost,
                         const simulator::Strategy &S,
                         std::optional<double> FromFile) {
  if (!P.TuneGradientBucket)
    return P.Sim.GradientBucketBytes;
  if (FromFile && !P.GradientBucketGiven)
    return *FromFile;
  return soap_search::bestGradientBucket(P.Training, P.M, Cost, P.Sim, S,
                                         soap_search::defaultGradientBuckets());
}

std::string formatGradientBucket(double Bytes) {
  if (Bytes == 0)
    return "0 (one all-reduce per tensor)";
  return formatBytes(Bytes);
}

llvm::json::Object communicationJson(const simulator::SimReport &Report) {
  return llvm::json::Object{
      {"transfers", int64_t(Report.Transfers)},
      {"measured_transfers", int64_t(Report.MeasuredTransfers)},
      {"all_reduces", int64_t(Report.AllReduces)},
      {"measured_all_reduces", int64_t(Report.MeasuredAllReduces)}};
}

std::string communicationLine(const simulator::Machine &M,
                              const simulator::SimReport &Report) {
  if (M.measuredTransfers().empty() && M.measuredAllReduces().empty())
    return "";
  return llvm::formatv("{0} of {1} transfers, {2} of {3} all-reduces timed by "
                       "the cluster's measured tables",
                       Report.MeasuredTransfers, Report.Transfers,
                       Report.MeasuredAllReduces, Report.AllReduces)
      .str();
}

bool gpusGiven() { return Gpus.getNumOccurrences() > 0; }
std::string planningOptimizerName() { return OptimizerFlag.getValue(); }
bool traceGiven() { return !TraceFile.empty(); }
const std::string &strategyOutput() { return StrategyOutput.getValue(); }
bool jsonOutput() { return Json; }

static llvm::Expected<simulator::OptimizerKind> optimizerKind() {
  if (OptimizerFlag == "sgd")
    return simulator::OptimizerKind::Sgd;
  if (OptimizerFlag == "momentum")
    return simulator::OptimizerKind::SgdMomentum;
  if (OptimizerFlag == "adam" || OptimizerFlag == "adamw")
    return simulator::OptimizerKind::Adam;
  return usageError(llvm::formatv("--optimizer {0}: expected sgd, momentum, "
                                  "adam or adamw",
                                  OptimizerFlag.getValue()));
}

static llvm::Expected<ir::LossKind> lossKind() {
  if (std::optional<ir::LossKind> Kind = ir::lossKindNamed(LossFlag))
    return *Kind;
  return usageError(llvm::formatv("--loss {0}: expected {1}",
                                  LossFlag.getValue(), ir::lossKindNames()));
}

/// -o and --trace, when given: files that can be written, not one file,
/// and none of the files read (the model, a cluster or profile file, the
/// strategy file for --trace), which they would replace. -o may rewrite
/// the strategy file it simulates.
llvm::Error checkNotAnInput(const std::string &Path, llvm::StringRef Flag,
                            const std::string &ModelPath,
                            const std::string &Also, llvm::StringRef AlsoWhat) {
  std::vector<std::pair<std::string, std::string>> Read{
      {ModelPath, "the model"}, {ClusterFlag, "--cluster"}};
  for (const std::string &Profile : ProfileFlag)
    Read.push_back({Profile, "--profile"});
  Read.push_back({Also, AlsoWhat.str()});
  for (const auto &[Input, What] : Read) {
    bool Same = false;
    if (!Path.empty() && !Input.empty() &&
        !llvm::sys::fs::equivalent(Input, Path, Same) && Same)
      return usageError(Flag + " " + Path + ": the same file as " + What +
                        "; it would be overwritten");
  }
  return llvm::Error::success();
}

/// Without --batch, a model whose inputs have fixed sizes has no batch dim:
/// its samples are not the Sample dim, so data parallelism splits the ops
/// whose kind says dim 0 is the samples (convolutions) and leaves the rest
/// whole. Says so, with the flag that fixes it.
static void noteNoBatchDim(const ir::Graph &G) {
  const ir::Tensor *First = nullptr;
  for (ir::TensorId In : G.inputs()) {
    const ir::Tensor &T = G.tensor(In);
    if (T.BatchDim >= 0)
      return;
    if (!First && T.Type.rank() > 0)
      First = &T;
  }
  if (!First || First->Type.Dims[0] < 2)
    return;
  llvm::errs() << llvm::formatv(
      "note: no input of the model has a batch dim (input '{0}' is {1}); give "
      "--batch {2} if dim 0 holds the samples, so that data parallelism and "
      "the search split them\n",
      First->Name, ir::formatShape(First->Type.Dims), First->Type.Dims[0]);
}

static llvm::Error checkOutputs(const std::string &ModelPath) {
  namespace fs = llvm::sys::fs;
  if (llvm::Error E = checkNotAnInput(StrategyOutput, "-o", ModelPath))
    return E;
  if (llvm::Error E = checkNotAnInput(TraceFile, "--trace", ModelPath,
                                      StrategyFlag, "--strategy"))
    return E;
  if (StrategyOutput.getNumOccurrences())
    if (llvm::Error E = checkOutputFile(StrategyOutput, "-o"))
      return E;
  if (TraceFile.getNumOccurrences())
    if (llvm::Error E = checkOutputFile(TraceFile, "--trace"))
      return E;
  if (StrategyOutput.empty() || TraceFile.empty())
    return llvm::Error::success();
  auto Absolute = [](llvm::StringRef Path) {
    llvm::SmallString<256> Full(Path);
    (void)fs::make_absolute(Full);
    llvm::sys::path::remove_dots(Full, /*remove_dot_dot=*/true);
    return std::string(Full);
  };
  if (Absolute(StrategyOutput) == Absolute(TraceFile) ||
      fs::equivalent(StrategyOutput, TraceFile))
    return usageError("-o " + StrategyOutput + " and --trace " + TraceFile +
                      " name one file; give each its own");
  return llvm::Error::success();
}

llvm::Expected<std::unique_ptr<Planning>>
loadPlanning(const std::string &ModelPath) {
  if (llvm::Error E = checkOutputs(ModelPath))
    return E;
  if (ClusterFlag.empty())
    return usageError("--cluster C is required: a preset (see 'onnx2soap "
                      "clusters') or a cluster file");
  auto Options = importOptions();
  if (!Options)
    return Options.takeError();
  auto Optimizer = optimizerKind();
  if (!Optimizer)
    return Optimizer.takeError();
  auto Loss = lossKind();
  if (!Loss)
    return Loss.takeError();
  bool TuneBucket = llvm::StringRef(GradientBucketFlag).trim() == "auto";
  std::optional<double> Bucket =
      TuneBucket ? 0.0 : parseBytes(GradientBucketFlag);
  if (!Bucket)
    return usageError(llvm::formatv("--gradient-bucket {0}: expected auto, "
                                    "or a size in bytes such as 25MiB, or 0",
                                    GradientBucketFlag.getValue()));
  // Far more than any model's gradients (one bucket holds them all), and
  // an integer in the strategy file.
  if (*Bucket > 0x1p50)
    return usageError(llvm::formatv("--gradient-bucket {0}: at most 1024TiB",
                                    GradientBucketFlag.getValue()));
  if (gpusGiven() && Gpus == 0)
    return usageError("--gpus 0: must be at least 1");

  auto Result = std::make_unique<Planning>();
  auto Cluster = Machine::load(ClusterFlag);
  if (!Cluster)
    return Cluster.takeError();
  Result->Cluster = std::move(*Cluster);
  if (gpusGiven()) {
    if (Gpus > Result->Cluster.numDevices())
      return usageError(llvm::formatv(
          "--gpus {0}: cluster '{1}' has only {2} devices", Gpus.getValue(),
          Result->Cluster.Name, Result->Cluster.numDevices()));
    auto Some = Result->Cluster.firstDevices(Gpus);
    if (!Some)
      return usageError("--gpus " + llvm::Twine(Gpus.getValue()) + ": " +
                        llvm::toString(Some.takeError()));
    Result->M = std::move(*Some);
  } else {
    Result->M = Result->Cluster;
  }

  soap_search::ModelSettings Settings;
  Settings.Batch = Options->Batch;
  Settings.Dims = Options->Dims;
  Settings.UnrollRnn = Options->UnrollRnn;
  Settings.FusePatterns = Options->FusePatterns;
  Settings.Loss = ir::lossKindName(*Loss).str();
  // The model's SHA-256 (a second read of a file of up to hundreds of MB)
  // is taken on another thread while the importer reads it.
  std::future<llvm::Expected<soap_search::StrategyTarget>> PendingTarget =
      std::async(std::launch::async, [&ModelPath, &Settings, &Result] {
        return soap_search::makeTarget(ModelPath, std::move(Settings),
                                       Result->M);
      });
  auto Imported = onnx_import::importModel(ModelPath, *Options);
  auto Target = PendingTarget.get();
  if (!Imported) {
    llvm::consumeError(Target.takeError());
    return Imported.takeError();
  }
  if (!Options->Batch)
    noteNoBatchDim(Imported->Graph);
  auto Training = ir::deriveTraining(std::move(Imported->Graph), *Loss);
  if (!Training) {
    llvm::consumeError(Target.takeError());
    return Training.takeError();
  }
  // Plan only what a generated program's kernels can run.
  if (llvm::Error E = codegen::checkKernelTypes(*Training)) {
    llvm::consumeError(Target.takeError());
    return E;
  }
  Result->Training = std::move(*Training);
  if (!Target)
    return Target.takeError();
  Result->Target = std::move(*Target);
  Result->Sim.Optimizer = *Optimizer;
  Result->Sim.GradientBucketBytes = *Bucket;
  if (CommModelFlag != "program" && CommModelFlag != "flexflow")
    return usageError(llvm::formatv("--comm-model {0}: expected program or "
                                    "flexflow",
                                    CommModelFlag.getValue()));
  Result->Sim.setProgramModel(CommModelFlag == "program");
  Result->TuneGradientBucket = TuneBucket;
  Result->GradientBucketGiven = GradientBucketFlag.getNumOccurrences() > 0;
  Result->OptimizerName =
      OptimizerFlag == "adamw" ? "adam" : OptimizerFlag.getValue();
  return Result;
}

namespace {
/// The analytic model a profile falls back to, a base so that it is built
/// before the profile model that refers to it.
struct AnalyticFallback {
  simulator::AnalyticCostModel Analytic;
};
/// A profile cost model owning its fallback. Every method is the profile
/// model's own: a wrapper that forwarded each one had missed copyTime, so
/// simulate timed copies analytically whatever the profile held.
class ProfiledCost : private AnalyticFallback,
                     public simulator::ProfileCostModel {
public:
  ProfiledCost() : ProfileCostModel(Analytic) {}
};
} // namespace

llvm::Expected<std::unique_ptr<simulator::CostModel>>
loadCostModel(const Machine &M) {
  if (ProfileFlag.empty())
    return std::make_unique<simulator::AnalyticCostModel>();
  auto Cost = std::make_unique<ProfiledCost>();
  for (const std::string &File : ProfileFlag) {
    auto Read = simulator::Profile::fromFile(File);
    if (!Read)
      return usageError("--profile " + File + ": " +
                        llvm::toString(Read.takeError()));
    std::vector<std::string> Names;
    for (const simulator::DeviceType &Type : M.deviceTypes())
      Names.push_back("'" + Type.Name + "'");
    if (!llvm::any_of(M.deviceTypes(), [&](const simulator::DeviceType &T) {
          return T.Name == Read->DeviceType;
        }))
      return usageError(llvm::formatv(
          "--profile {0}: measured on device type '{1}', but cluster '{2}' "
          "has {3}; calibrate on that cluster's devices",
          File, Read->DeviceType, M.Name, llvm::join(Names, ", ")));
    if (llvm::Error E = Cost->add(std::move(*Read), File))
      return usageError("--profile " + llvm::toString(std::move(E)));
  }
  return Cost;
}

llvm::Error writeTraceIfAsked(const simulator::Simulator &Sim) {
  if (TraceFile.empty())
    return llvm::Error::success();
  return writeFileAtomically(TraceFile, "--trace", [&](llvm::raw_ostream &OS) {
    simulator::writeChromeTrace(Sim.graph(), OS);
  });
}

soap_search::StrategyPrediction
strategyPrediction(const Planning &P, const simulator::SimReport &Report) {
  return {Report.Time, Report.PeakMemory, Report.Fits, P.OptimizerName,
          P.Sim.SerialCommunication ? "program" : "flexflow"};
}

llvm::Error writeStrategyIfAsked(const Planning &P,
                                 const simulator::Strategy &S,
                                 const simulator::SimReport &Report,
                                 double GradientBucketBytes) {
  if (StrategyOutput.empty())
    return llvm::Error::success();
  std::string Text = soap_search::writeStrategy(P.Training.G, S, P.Target,
                                                strategyPrediction(P, Report),
                                                GradientBucketBytes);
  return writeFileAtomically(StrategyOutput, "-o",
                             [&](llvm::raw_ostream &OS) { OS << Text; });
}

llvm::Error runSimulate() {
  if (StrategyFlag.empty())
    return usageError("--strategy S is required: a strategy file, or "
                      "data-parallel, model-parallel, expert or optcnn");
  auto Loaded = loadPlanning(Model);
  if (!Loaded)
    return Loaded.takeError();
  const Planning &P = **Loaded;
  auto CostModel = loadCostModel(P.M);
  if (!CostModel)
    return CostModel.takeError();
  const simulator::CostModel &Cost = **CostModel;

  std::optional<double> FileBucket;
  auto Named = namedStrategy(StrategyFlag, P, Cost, &FileBucket);
  if (!Named)
    return Named.takeError();
  const simulator::Strategy &S = *Named;

  simulator::SimOptions Options = P.Sim;
  Options.GradientBucketBytes = gradientBucketFor(P, Cost, S, FileBucket);
  simulator::Simulator Sim(P.Training, P.M, Cost, Options);
  Sim.simulate(S);
  simulator::SimReport Report = Sim.report();
  if (llvm::Error E = writeTraceIfAsked(Sim))
    return E;
  if (llvm::Error E =
          writeStrategyIfAsked(P, S, Report, Options.GradientBucketBytes))
    return E;

  unsigned NumDevices = P.M.numDevices();
  // Whether every device type's copies come from a profile's measurements.
  const auto *Profiled =
      dynamic_cast<const simulator::ProfileCostModel *>(&Cost);
  bool CopiesMeasured =
      Profiled && llvm::all_of(P.M.deviceTypes(), [&](const auto &Type) {
        return Profiled->timesCopies(Type.Name);
      });
  if (Json) {
    llvm::json::Array Devices, Peaks, Compute, Copies, Sent;
    for (simulator::DeviceId D = 0; D < NumDevices; ++D) {
      Peaks.push_back(Report.PeakMemory[D]);
      Compute.push_back(Report.ComputeTime[D]);
      Copies.push_back(Report.CopyTime[D]);
      Sent.push_back(Report.BytesSent[D]);
      Devices.push_back(llvm::json::Object{
          {"name", P.M.device(D).Name},
          {"compute_time", Report.ComputeTime[D]},
          {"copy_time", Report.CopyTime[D]},
          {"bytes_sent", Report.BytesSent[D]},
          {"peak_memory", Report.PeakMemory[D]},
          {"runtime_memory", Report.RuntimeMemory[D]},
          {"communicators", int64_t(Report.Communicators[D])},
          {"peers", int64_t(Report.Peers[D])},
          {"capacity", P.M.deviceType(D).MemoryCapacity}});
    }
    llvm::json::Object Out{{"model", P.Target.ModelFile},
                           {"cluster", P.M.Name},
                           {"num_devices", int64_t(NumDevices)},
                           {"strategy", StrategyFlag.getValue()},
                           {"optimizer", P.OptimizerName},
                           {"gradient_bucket", Options.GradientBucketBytes},
                           {"time", Report.Time},
                           {"bytes_transferred", Report.BytesTransferred},
                           {"peak_memory", std::move(Peaks)},
                           {"compute_time", std::move(Compute)},
                           {"copy_time", std::move(Copies)},
                           {"copies_measured", CopiesMeasured},
                           {"bytes_sent", std::move(Sent)},
                           {"fits", Report.Fits},
                           {"tasks", int64_t(Report.NumTasks)},
                           {"communication", communicationJson(Report)},
                           {"devices", std::move(Devices)}};
    if (!StrategyOutput.empty())
      Out["strategy_file"] = StrategyOutput.getValue();
    llvm::outs() << ir::jsonText(llvm::json::Value(std::move(Out))) << "\n";
    return llvm::Error::success();
  }

  llvm::raw_ostream &OS = llvm::outs();
  OS << llvm::formatv("model        {0}\n", P.Target.ModelFile);
  OS << llvm::formatv("cluster      {0}, {1} devices\n", P.M.Name, NumDevices);
  OS << llvm::formatv("strategy     {0}\n", StrategyFlag.getValue());
  OS << llvm::formatv("buckets      {0}\n",
                      formatGradientBucket(Options.GradientBucketBytes));
  OS << llvm::formatv("time         {0} per iteration\n",
                      formatSeconds(Report.Time));
  OS << llvm::formatv("transferred  {0}\n",
                      formatBytes(Report.BytesTransferred));
  std::string Measured = communicationLine(P.M, Report);
  if (!Measured.empty())
    OS << "measured     " << Measured << "\n";
  if (!ProfileFlag.empty())
    OS << "copies       "
       << (CopiesMeasured ? "timed by the profile's measured box copies"
                          : "timed by the memory-bandwidth formula (the "
                            "profile has no copy table for this cluster's "
                            "devices)")
       << "\n";
  OS << llvm::formatv("fits         {0}\n\n", Report.Fits ? "yes" : "no");
  size_t NameWidth = 6;
  for (const simulator::Device &D : P.M.devices())
    NameWidth = std::max(NameWidth, D.Name.size());
  auto Padded = [&](llvm::StringRef Name) {
    return Name.str() + std::string(NameWidth - Name.size(), ' ');
  };
  // On GPUs, the part of the peak that is the runtime's and NCCL's.
  bool Runtime = llvm::any_of(Report.RuntimeMemory,
                              [](double Bytes) { return Bytes > 0; });
  OS << llvm::formatv(
      "{0} {1,12} {2,12} {3,12} {4,12} {5}{6,12}\n", Padded("device"),
      "compute", "copies", "sent", "peak memory",
      Runtime ? llvm::formatv("{0,12} ", "runtime").str() : std::string(),
      "capacity");
  for (simulator::DeviceId D = 0; D < NumDevices; ++D) {
    double Capacity = double(P.M.deviceType(D).MemoryCapacity);
    OS << llvm::formatv(
        "{0} {1,12} {2,12} {3,12} {4,12} {5}{6,12}{7}\n",
        Padded(P.M.device(D).Name), formatSeconds(Report.ComputeTime[D]),
        formatSeconds(Report.CopyTime[D]), formatBytes(Report.BytesSent[D]),
        formatBytes(Report.PeakMemory[D]),
        Runtime ? llvm::formatv("{0,12} ", formatBytes(Report.RuntimeMemory[D]))
                      .str()
                : std::string(),
        formatBytes(Capacity), Report.PeakMemory[D] > Capacity ? "  over" : "");
  }
  if (!StrategyOutput.empty())
    OS << llvm::formatv("\nwrote        {0}\n", StrategyOutput.getValue());
  return llvm::Error::success();
}

} // namespace onnx2soap::cli
