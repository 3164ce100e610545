//===- cli/Compile.cpp - `onnx2soap compile` ------------------------------===//
//
// Plans (a strategy file, a built-in strategy, or a search restricted to
// what generated programs can run), then writes the generated training
// project: the plan, the weight shards and the runtime sources
// (docs/generated-program.md).
//
//===----------------------------------------------------------------------===//
#include "cli/Subcommands.h"
#include "codegen/Project.h"
#include "ir/JsonText.h"
#include "soap_search/Builtins.h"
#include "soap_search/Mcmc.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"
#include <algorithm>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

namespace onnx2soap::cli {

namespace cl = llvm::cl;

cl::SubCommand &compileCommand() {
  static cl::SubCommand Command(
      "compile", "Write the generated training program for a model, a "
                 "cluster and a strategy");
  return Command;
}

static cl::opt<std::string> Model(cl::Positional, cl::Required,
                                  cl::desc("<model.onnx>"),
                                  cl::sub(compileCommand()));
static cl::opt<std::string> Output("o",
                                   cl::desc("The project folder (required)"),
                                   cl::value_desc("DIR"),
                                   cl::sub(compileCommand()));
static cl::opt<std::string> StrategyFlag(
    "strategy",
    cl::desc("Strategy file, or data-parallel, model-parallel, expert or "
             "optcnn (default: search for one)"),
    cl::value_desc("S"), cl::sub(compileCommand()));
static cl::opt<std::string> Init("init",
                                 cl::desc("Initial weights: onnx (the "
                                          "model's, default) or random"),
                                 cl::value_desc("onnx|random"),
                                 cl::init("onnx"), cl::sub(compileCommand()));
static cl::opt<double> Budget("budget",
                              cl::desc("Search time in seconds when no "
                                       "--strategy is given (default 10)"),
                              cl::value_desc("SEC"), cl::init(10),
                              cl::sub(compileCommand()));
static cl::opt<uint64_t> Iterations("iterations",
                                    cl::desc("Search steps per chain instead "
                                             "of a time budget"),
                                    cl::value_desc("N"), cl::init(0),
                                    cl::sub(compileCommand()));
static cl::opt<uint64_t> Seed("seed",
                              cl::desc("Seed of the search and of --init "
                                       "random (default 0)"),
                              cl::value_desc("N"), cl::init(0),
                              cl::sub(compileCommand()));
static cl::opt<double> Lr("lr", cl::desc("Learning rate (default 0.01)"),
                          cl::value_desc("X"), cl::init(0.01),
                          cl::sub(compileCommand()));
static cl::opt<double> Momentum("momentum",
                                cl::desc("SGD momentum (default 0.9 with "
                                         "--optimizer momentum, its default; "
                                         "0 with sgd)"),
                                cl::value_desc("X"), cl::init(-1),
                                cl::sub(compileCommand()));
static cl::opt<double> WeightDecay("weight-decay",
                                   cl::desc("Weight decay (default 0; 0.01 "
                                            "for adamw)"),
                                   cl::value_desc("X"), cl::init(-1),
                                   cl::sub(compileCommand()));

/// The optimizer the planning flag names, with the compile flags' values.
static llvm::Expected<rt::OptimizerConfig>
optimizerConfig(const std::string &Name) {
  rt::OptimizerConfig C;
  if (Name == "sgd" || Name == "momentum")
    C.Kind = rt::OptimizerKind::Sgd;
  else if (Name == "adam")
    C.Kind = rt::OptimizerKind::Adam;
  else if (Name == "adamw")
    C.Kind = rt::OptimizerKind::AdamW;
  else
    return usageError("--optimizer " + Name +
                      ": expected sgd, momentum, adam or adamw");
  if (!(Lr > 0))
    return usageError("--lr must be positive");
  constexpr double Infinity = std::numeric_limits<double>::infinity();
  if (llvm::Error E = checkSetting(Lr, 0, Infinity))
    return E;
  if (llvm::Error E = checkSetting(Momentum, 0, Infinity))
    return E;
  if (llvm::Error E = checkSetting(WeightDecay, 0, Infinity))
    return E;
  if (llvm::Error E = checkOptimizerFamily(
          Name, C.Kind == rt::OptimizerKind::Sgd, {&Momentum}, {}))
    return E;
  C.LearningRate = Lr;
  C.Momentum = Momentum >= 0        ? Momentum.getValue()
               : Name == "momentum" ? 0.9
                                    : 0.0;
  C.WeightDecay = WeightDecay >= 0                     ? WeightDecay.getValue()
                  : C.Kind == rt::OptimizerKind::AdamW ? 0.01
                                                       : 0.0;
  return C;
}

/// The optimizer the program runs, for its README: the same whichever
/// name --optimizer gave it ("--optimizer momentum --momentum 0" is SGD).
static std::string optimizerDescription(const rt::OptimizerConfig &C) {
  switch (C.Kind) {
  case rt::OptimizerKind::Sgd:
    return C.Momentum != 0
               ? "SGD with momentum " + ir::shortestNumber(C.Momentum)
               : std::string("SGD");
  case rt::OptimizerKind::Adam:
    return "Adam";
  case rt::OptimizerKind::AdamW:
    return "AdamW";
  }
  return "?";
}

/// What codegen::checkRunnable reads of an op: its kind, attributes, the
/// types of its inputs and outputs and output 0's batch dim. Ops alike in
/// all of these (a deep CNN's repeated layers, an unrolled RNN's steps) get
/// the same verdict for the same config.
static std::string runnableSignature(const ir::Graph &G, const ir::Op &O) {
  std::string Text;
  llvm::raw_string_ostream OS(Text);
  OS << ir::opKindName(O.Kind) << '|' << ir::formatAttributes(O.Attrs);
  for (ir::TensorId In : O.Inputs) {
    OS << "|in ";
    if (In != ir::NoTensor)
      OS << ir::dtypeName(G.tensor(In).Type.Type) << ' '
         << ir::formatShape(G.tensor(In).Type.Dims);
  }
  for (ir::TensorId Out : O.Outputs)
    OS << "|out " << ir::formatShape(G.tensor(Out).Type.Dims);
  OS << "|batch " << G.tensor(O.Outputs[0]).BatchDim;
  return OS.str();
}

std::function<bool(ir::OpId, const simulator::ParallelConfig &)>
runnableConfigs(const ir::TrainingGraph &T) {
  struct Cache {
    std::mutex Lock;
    /// By op: its signature's number, -1 until first asked.
    std::vector<int> SignatureOf;
    std::unordered_map<std::string, int> Signatures;
    /// By {signature, Reduction degree, degrees...}: the verdict does not
    /// depend on the devices.
    std::map<llvm::SmallVector<uint32_t, 8>, bool> Verdicts;
  };
  auto Shared = std::make_shared<Cache>();
  Shared->SignatureOf.assign(T.G.numOps(), -1);
  return [&T, Shared](ir::OpId Op, const simulator::ParallelConfig &C) {
    std::lock_guard<std::mutex> Guard(Shared->Lock);
    int &Signature = Shared->SignatureOf[Op];
    if (Signature < 0)
      Signature = Shared->Signatures
                      .try_emplace(runnableSignature(T.G, T.G.op(Op)),
                                   int(Shared->Signatures.size()))
                      .first->second;
    llvm::SmallVector<uint32_t, 8> Key{uint32_t(Signature), C.Reduction};
    Key.append(C.Degrees.begin(), C.Degrees.end());
    auto [It, New] = Shared->Verdicts.try_emplace(std::move(Key));
    if (New) {
      llvm::Error E = codegen::checkRunnable(T, T.G.op(Op), C);
      It->second = !E;
      llvm::consumeError(std::move(E));
    }
    return It->second;
  };
}

llvm::Error runCompile() {
  if (Output.empty())
    return usageError("-o DIR is required: the folder for the generated "
                      "project");
  if (Init != "onnx" && Init != "random")
    return usageError("--init " + Init + ": expected onnx or random");
  if (llvm::Error E =
          checkSearchWork(Budget.getNumOccurrences(), Budget,
                          Iterations.getNumOccurrences(), Iterations))
    return E;
  if (!StrategyFlag.empty() && Init == "onnx" && Seed.getNumOccurrences())
    return usageError("--seed seeds the search and --init random, neither of "
                      "which runs with --strategy " +
                      StrategyFlag + " and --init onnx");
  if (!StrategyFlag.empty() &&
      (Budget.getNumOccurrences() || Iterations.getNumOccurrences()))
    return usageError(llvm::Twine("--") +
                      (Budget.getNumOccurrences() ? "budget" : "iterations") +
                      " sizes the search, which --strategy " + StrategyFlag +
                      " skips: give one or the other");
  // Before the work: a folder it would refuse waited for the search.
  if (llvm::Error E = codegen::checkProjectFolder(Output))
    return E;
  auto Loaded = loadPlanning(Model);
  if (!Loaded)
    return Loaded.takeError();
  auto Optimizer = optimizerConfig(planningOptimizerName());
  if (!Optimizer)
    return Optimizer.takeError();
  // SGD keeps a momentum slot per parameter exactly when --momentum is
  // not 0, whichever name --optimizer gave it: the planner simulates the
  // update and counts the memory of what the program runs.
  if (Optimizer->Kind == rt::OptimizerKind::Sgd) {
    bool Slot = Optimizer->Momentum != 0;
    (*Loaded)->Sim.Optimizer = Slot ? simulator::OptimizerKind::SgdMomentum
                                    : simulator::OptimizerKind::Sgd;
    (*Loaded)->OptimizerName = Slot ? "momentum" : "sgd";
  }
  const Planning &P = **Loaded;
  const ir::TrainingGraph &T = P.Training;
  const ir::Graph &G = T.G;
  auto CostModel = loadCostModel(P.M);
  if (!CostModel)
    return CostModel.takeError();
  const simulator::CostModel &Cost = **CostModel;

  simulator::Strategy S;
  std::string StrategyName;
  // The gradient bucket size the program all-reduces with: the one the
  // search chose or the strategy file records, or the flag's.
  double Bucket = P.Sim.GradientBucketBytes;
  if (StrategyFlag.empty()) {
    soap_search::SearchOptions Options;
    if (P.TuneGradientBucket)
      Options.GradientBuckets = soap_search::defaultGradientBuckets();
    Options.BudgetSeconds = Budget;
    Options.Iterations = Iterations;
    Options.Seed = Seed;
    Options.Space.Accept = runnableConfigs(T);
    soap_search::SearchResult R =
        soap_search::search(T, P.M, Cost, P.Sim, Options);
    // A program that cannot start is not written (as search answers with
    // no strategy file then).
    if (!R.Best.Fits)
      return nothingFits(R, Options, P.M, "", /*Compile=*/true);
    S = R.Best.S;
    Bucket = R.Best.GradientBucketBytes;
    StrategyName = "searched";
  } else {
    std::optional<double> FileBucket;
    auto Named = namedStrategy(StrategyFlag, P, Cost, &FileBucket);
    if (!Named)
      return Named.takeError();
    S = std::move(*Named);
    Bucket = gradientBucketFor(P, Cost, S, FileBucket);
    StrategyName = StrategyFlag;
  }

  codegen::PlanOptions Options;
  Options.Optimizer = *Optimizer;
  Options.Sim = P.Sim;
  Options.Sim.GradientBucketBytes = Bucket;
  Options.Init =
      Init == "random" ? codegen::InitKind::Random : codegen::InitKind::Onnx;
  Options.Seed = Seed;
  auto Plan = codegen::buildProgramPlan(T, S, P.M, Cost, Options);
  if (!Plan)
    return usageError("cannot generate a program for strategy " + StrategyName +
                      ": " + llvm::toString(Plan.takeError()));

  auto ModelBytes = llvm::MemoryBuffer::getFile(Model);
  if (!ModelBytes)
    return usageError(Model + ": " + ModelBytes.getError().message());
  codegen::ProjectInputs In{
      *Plan, P.M, P.Target, (*ModelBytes)->getBuffer(),
      soap_search::writeStrategy(
          G, S, P.Target, strategyPrediction(P, Plan->Prediction), Bucket),
      optimizerDescription(*Optimizer), ir::lossKindName(T.Loss).str(),
      ONNX2SOAP_VERSION,
      // The plan hash heads the weight shard file: programs whose first
      // weights differ must not share it.
      Options.Init == codegen::InitKind::Random
          ? "random " + std::to_string(Options.Seed)
          : "onnx"};
  auto Files = codegen::projectFiles(In);
  if (!Files)
    return usageError(llvm::toString(Files.takeError()));
  if (llvm::Error E = codegen::writeProject(Output, *Files))
    return usageError(llvm::toString(std::move(E)));

  // What the program allocates (its buffers' arena and message buffer) and
  // the kernel scratch it takes on top are not what the planner's peak
  // counts (docs/planner.md, "Memory"): all are reported.
  std::vector<double> Allocated = Plan->allocatedBytes();
  size_t Fullest =
      std::max_element(Allocated.begin(), Allocated.end()) - Allocated.begin();
  llvm::outs() << llvm::formatv(
      "wrote {0}: {1} ranks on {2}, strategy {3}, predicted {4} per step\n"
      "memory: {5} allocated on rank {6} (the fullest; kernel scratch on "
      "top: {8}; the planner's peak there: {7})\n"
      "build: cmake -S {0} -B {0}/build && cmake --build {0}/build\n"
      "run:   mpirun -np {1} {0}/build/train --inputs INPUT.pb --labels "
      "LABELS.pb\n",
      Output.getValue(), Plan->NumRanks, P.M.Name, StrategyName,
      formatSeconds(Plan->Prediction.Time), formatBytes(Allocated[Fullest]),
      Fullest, formatBytes(Plan->Prediction.PeakMemory[Fullest]),
      formatBytes(double(Plan->ScratchBytes[Fullest])));
  for (size_t Rank = 0; Rank < Allocated.size(); ++Rank) {
    double Capacity = double(P.M.deviceType(Rank).MemoryCapacity);
    // On top of its buffers: kernel scratch, the libraries' workspace, and
    // the runtime's and NCCL's memory.
    double OnTop = double(Plan->ScratchBytes[Rank]) +
                   double(P.M.deviceType(Rank).libraryMemory()) +
                   Plan->Prediction.RuntimeMemory[Rank];
    if (Allocated[Rank] + OnTop > Capacity) {
      // A GPU rank checks its device's free memory at start; a CPU rank
      // has no such check and runs into the host's limits instead.
      bool Gpu = !P.M.deviceType(Rank).CudaArch.empty();
      llvm::errs() << llvm::formatv(
          "warning: rank {0} allocates {1} and takes {2} of kernel scratch{3}, "
          "more than its device's {4}: {5} (search with a lower "
          "--memory-limit and compile its strategy file, or use more "
          "devices)\n",
          Rank, formatBytes(Allocated[Rank]), formatBytes(OnTop),
          Gpu ? ", library workspace, CUDA context and NCCL buffers" : "",
          formatBytes(Capacity),
          Gpu ? "the program will fail to start there"
              : "the rank may run out of the host's memory");
      break;
    }
  }
  return llvm::Error::success();
}

} // namespace onnx2soap::cli
