//===- cli/Search.cpp - `onnx2soap search` --------------------------------===//
//
// Searches the SOAP space for the fastest strategy that fits (or the
// smallest, or the time/memory frontier), reports it against the built-in
// strategies, and writes it as a strategy file. --sweep-gpus repeats the
// search on the cluster's first N devices for several N (TensorOpt's
// profiling mode). While searching, a progress line is kept up to date on
// stderr when stderr is a terminal, and nothing is printed otherwise.
//
//===----------------------------------------------------------------------===//
#include "cli/Subcommands.h"
#include "ir/JsonText.h"
#include "soap_search/Mcmc.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/raw_ostream.h"
#include <algorithm>
#include <cmath>

namespace onnx2soap::cli {

namespace cl = llvm::cl;
using soap_search::Candidate;
using soap_search::Improvement;
using soap_search::Objective;
using soap_search::SearchOptions;
using soap_search::SearchResult;

cl::SubCommand &searchCommand() {
  static cl::SubCommand Command(
      "search", "Search for the fastest strategy that fits a cluster");
  return Command;
}

static cl::opt<std::string> Model(cl::Positional, cl::Required,
                                  cl::desc("<model.onnx>"),
                                  cl::sub(searchCommand()));
static cl::opt<double> Budget("budget",
                              cl::desc("Search for at most SEC seconds "
                                       "(default 30)"),
                              cl::value_desc("SEC"), cl::init(30),
                              cl::sub(searchCommand()));
static cl::opt<uint64_t>
    Iterations("iterations",
               cl::desc("Steps per chain instead of a time budget; the result "
                        "then depends only on --seed"),
               cl::value_desc("N"), cl::init(0), cl::sub(searchCommand()));
static cl::opt<uint64_t> Seed("seed", cl::desc("Random seed (default 0)"),
                              cl::value_desc("N"), cl::init(0),
                              cl::sub(searchCommand()));
static cl::opt<bool> FullSimulation(
    "full-simulation",
    cl::desc("Simulate every proposal from scratch instead of by delta "
             "simulation (for comparing the two; same result, slower)"),
    cl::sub(searchCommand()), cl::Hidden);
static cl::opt<bool> AnyConfig(
    "any-config",
    cl::desc("Also explore configs generated programs cannot run yet (an "
             "LSTM op split over its hidden units, a Split over its axis, "
             "...): the planner's whole SOAP space, for comparison; "
             "`compile` refuses such a strategy"),
    cl::sub(searchCommand()));
static cl::opt<unsigned> Chains("chains", cl::desc("Markov chains (default 4)"),
                                cl::value_desc("N"), cl::init(4),
                                cl::sub(searchCommand()));
static cl::opt<unsigned>
    Threads("threads", cl::desc("Threads running chains (0: all cores)"),
            cl::value_desc("N"), cl::init(0), cl::sub(searchCommand()));
static cl::opt<unsigned> RefineHelpers(
    "refine-helpers",
    cl::desc("Threads beside the chains' that help refine OptCNN's "
             "strategy, for cores the chains leave idle (default 0); each "
             "holds a simulator. The answer is the same with any number"),
    cl::value_desc("N"), cl::sub(searchCommand()));
static cl::opt<std::string>
    ObjectiveFlag("objective",
                  cl::desc("time (default): the fastest strategy that fits; "
                           "memory: the one of least peak memory; frontier: "
                           "the time/memory Pareto set"),
                  cl::value_desc("time|memory|frontier"), cl::init("time"),
                  cl::sub(searchCommand()));
static cl::opt<std::string> MemoryLimitFlag(
    "memory-limit",
    cl::desc("Bytes per device a strategy may use (default: each device's "
             "capacity); suffixes KB, MB, GB, TB (powers of 1000) and K, M, "
             "G, T, KiB, MiB, GiB, TiB (powers of 1024)"),
    cl::value_desc("BYTES"), cl::sub(searchCommand()));
static cl::opt<std::string>
    SweepGpus("sweep-gpus",
              cl::desc("Search on the first N devices for each N listed and "
                       "print the best time per count"),
              cl::value_desc("N,N,..."), cl::sub(searchCommand()));

static llvm::Expected<std::vector<unsigned>> parseSweep() {
  std::vector<unsigned> Counts;
  llvm::SmallVector<llvm::StringRef, 8> Parts;
  llvm::StringRef(SweepGpus).split(Parts, ',');
  for (llvm::StringRef Part : Parts) {
    unsigned N;
    if (Part.trim().getAsInteger(10, N) || N == 0)
      return usageError(llvm::formatv("--sweep-gpus {0}: expected a "
                                      "comma-separated list of device counts "
                                      "(1,2,4,...)",
                                      SweepGpus.getValue()));
    Counts.push_back(N);
  }
  return Counts;
}

static llvm::Expected<SearchOptions> searchOptions() {
  SearchOptions O;
  if (llvm::Error E =
          checkSearchWork(Budget.getNumOccurrences(), Budget,
                          Iterations.getNumOccurrences(), Iterations))
    return E;
  // Each chain holds a simulator of its own.
  if (Chains == 0 || Chains > 1024)
    return usageError(
        llvm::formatv("--chains {0}: expected 1 to 1024", Chains.getValue()));
  O.BudgetSeconds = Budget;
  O.Iterations = Iterations;
  O.Seed = Seed;
  O.Chains = Chains;
  O.FullSimulation = FullSimulation;
  O.Threads = Threads;
  if (RefineHelpers.getNumOccurrences()) {
    if (RefineHelpers > 64)
      return usageError(llvm::formatv("--refine-helpers {0}: at most 64",
                                      RefineHelpers.getValue()));
    if (Threads == 1 && RefineHelpers > 0)
      return usageError("--refine-helpers needs --threads 2 or more (they "
                        "help a refinement that has a thread of its own)");
    O.RefineHelpers = RefineHelpers;
  }
  if (ObjectiveFlag == "time")
    O.Goal = Objective::Time;
  else if (ObjectiveFlag == "memory")
    O.Goal = Objective::Memory;
  else if (ObjectiveFlag == "frontier")
    O.Goal = Objective::Frontier;
  else
    return usageError(llvm::formatv("--objective {0}: expected time, memory "
                                    "or frontier",
                                    ObjectiveFlag.getValue()));
  if (MemoryLimitFlag.getNumOccurrences()) {
    std::optional<double> Limit = parseBytes(MemoryLimitFlag);
    if (!Limit || !(*Limit > 0))
      return usageError(llvm::formatv(
          "--memory-limit {0}: expected a positive, whole number of bytes, "
          "optionally with a suffix (16GiB, 80GB, 512MiB)",
          MemoryLimitFlag.getValue()));
    O.MemoryLimit = *Limit;
  }
  return O;
}

/// The smallest and the largest memory capacity of M's devices.
static std::pair<double, double> capacities(const simulator::Machine &M) {
  double Smallest = INFINITY, Largest = 0;
  for (simulator::DeviceId D = 0; D < M.numDevices(); ++D) {
    double Capacity = double(M.deviceType(D).MemoryCapacity);
    Smallest = std::min(Smallest, Capacity);
    Largest = std::max(Largest, Capacity);
  }
  return {Smallest, Largest};
}

/// The memory limit a search used: the flag, or the smallest capacity.
static double effectiveLimit(const SearchOptions &O,
                             const simulator::Machine &M) {
  double Smallest = capacities(M).first;
  return O.MemoryLimit > 0 ? std::min(O.MemoryLimit, Smallest) : Smallest;
}

/// --memory-limit lowers the devices' memory: a limit above all of it would
/// plan strategies that cannot run.
static llvm::Error checkMemoryLimit(const SearchOptions &O,
                                    const simulator::Machine &M) {
  double Largest = capacities(M).second;
  if (O.MemoryLimit > Largest)
    return usageError(llvm::formatv(
        "--memory-limit {0}: more than the devices' memory ({1}); the limit "
        "can only lower it",
        MemoryLimitFlag.getValue(), formatBytes(Largest)));
  return llvm::Error::success();
}

/// The strategy the search answers with: the best, or with the frontier
/// objective the fastest point of the frontier (which all fit); nullptr when
/// nothing found fits.
static const Candidate *chosen(const SearchResult &R, Objective Goal) {
  if (Goal == Objective::Frontier)
    return R.Frontier.empty() ? nullptr : &R.Frontier.back();
  return R.Best.Fits ? &R.Best : nullptr;
}

/// Items joined by ", " but the last, joined by Last ("a, b or c").
static std::string listOf(const std::vector<std::string> &Items,
                          llvm::StringRef Last) {
  std::string Text;
  for (size_t I = 0; I < Items.size(); ++I)
    Text += (I == 0                  ? ""
             : I + 1 == Items.size() ? Last.str()
                                     : ", ") +
            Items[I];
  return Text;
}

llvm::Error nothingFits(const SearchResult &R, const SearchOptions &O,
                        const simulator::Machine &M, std::string Devices,
                        bool Compile) {
  bool Sweep = !Devices.empty();
  if (!Sweep)
    Devices = M.numDevices() == 1 ? "1 device"
                                  : std::to_string(M.numDevices()) + " devices";
  else
    Devices += " devices";
  const Candidate *Smallest = &R.Best;
  for (const Candidate *C : {&R.DataParallel, &R.Expert, &R.ModelParallel})
    if (C->PeakMemory < Smallest->PeakMemory)
      Smallest = C;
  // What might help: more devices; a limit the flag set lower than the
  // devices' memory raised; the objective that looks for the smallest.
  std::vector<std::string> Tries{Sweep ? "give more devices (--sweep-gpus)"
                                       : "give more devices (--gpus)"};
  if (O.MemoryLimit > 0 && O.MemoryLimit < capacities(M).first)
    Tries.push_back("a larger --memory-limit");
  if (Compile)
    Tries.push_back("compile the strategy file of a search with --objective "
                    "memory");
  else if (O.Goal != Objective::Memory)
    Tries.push_back("try --objective memory");
  std::string Advice = listOf(Tries, ", or ");
  return usageError(llvm::formatv(
      "no strategy found fits in {0} per device on {1}: the smallest "
      "peak found is {2}; {3}",
      formatBytes(effectiveLimit(O, M)), Devices,
      formatBytes(Smallest->PeakMemory), Advice));
}

/// A progress callback that rewrites one line on stderr, or none when
/// stderr is not a terminal.
static std::function<void(const soap_search::SearchProgress &)>
progressLine(std::string Prefix) {
  if (!llvm::sys::Process::StandardErrIsDisplayed())
    return nullptr;
  return [Prefix](const soap_search::SearchProgress &P) {
    double Rate = P.Seconds > 0 ? P.Iterations / P.Seconds : 0;
    llvm::errs() << llvm::formatv(
        "\r\x1b[K{0}{1} iterations ({2:F0}/s), best {3}, {4:F1} s", Prefix,
        P.Iterations, Rate, formatSeconds(P.BestTime), P.Seconds);
    llvm::errs().flush();
  };
}

static void clearProgressLine() {
  if (llvm::sys::Process::StandardErrIsDisplayed()) {
    llvm::errs() << "\r\x1b[K";
    llvm::errs().flush();
  }
}

static double speedup(double Base, double Time) {
  return Time > 0 ? Base / Time : 0;
}

static llvm::Error runSweep(const Planning &P, SearchOptions O) {
  if (gpusGiven())
    return usageError("--sweep-gpus and --gpus exclude each other");
  if (!strategyOutput().empty() || traceGiven())
    return usageError("-o and --trace write one strategy's files; they cannot "
                      "be combined with --sweep-gpus");
  if (O.Goal == Objective::Frontier)
    return usageError("--objective frontier finds one device count's "
                      "frontier; it cannot be combined with --sweep-gpus");
  auto Counts = parseSweep();
  if (!Counts)
    return Counts.takeError();
  for (unsigned N : *Counts)
    if (N > P.Cluster.numDevices())
      return usageError(llvm::formatv(
          "--sweep-gpus {0}: cluster '{1}' has only {2} devices",
          SweepGpus.getValue(), P.Cluster.Name, P.Cluster.numDevices()));
  auto CostModel = loadCostModel(P.Cluster);
  if (!CostModel)
    return CostModel.takeError();
  const simulator::CostModel &Cost = **CostModel;
  struct Row {
    unsigned Devices;
    SearchResult Result;
    /// The device count whose search found Result.Best.
    unsigned FoundOn;
  };
  // Fewest devices first: a strategy for the first N devices is one for
  // more of them, so each count's answer is at least as good as every
  // smaller count's (the best time with up to N devices, never more
  // than with fewer).
  llvm::sort(*Counts);
  Counts->erase(std::unique(Counts->begin(), Counts->end()), Counts->end());
  std::vector<Row> Rows;
  for (unsigned N : *Counts) {
    auto M = P.Cluster.firstDevices(N);
    if (!M)
      return usageError("--sweep-gpus " + llvm::Twine(N) + ": " +
                        llvm::toString(M.takeError()));
    O.Progress = progressLine(llvm::formatv("[{0} devices] ", N).str());
    Row R{N, soap_search::search(P.Training, *M, Cost, P.Sim, O), N};
    clearProgressLine();
    for (const Row &Fewer : Rows) {
      Candidate C = soap_search::evaluate(P.Training, *M, Cost, P.Sim,
                                          Fewer.Result.Best, O.MemoryLimit);
      if (soap_search::better(O.Goal, C, R.Result.Best)) {
        R.Result.Best = std::move(C);
        R.FoundOn = Fewer.FoundOn;
      }
    }
    Rows.push_back(std::move(R));
  }
  // Counts where nothing fits stay in the table; none at all is an error,
  // as for one count.
  if (llvm::none_of(Rows, [](const Row &R) { return R.Result.Best.Fits; })) {
    const Row *Smallest = &Rows.front();
    for (const Row &R : Rows)
      if (R.Result.Best.PeakMemory < Smallest->Result.Best.PeakMemory)
        Smallest = &R;
    auto M = P.Cluster.firstDevices(Smallest->Devices);
    if (!M)
      return M.takeError();
    std::vector<std::string> Counts;
    for (const Row &R : Rows)
      Counts.push_back(std::to_string(R.Devices));
    return nothingFits(Smallest->Result, O, *M, listOf(Counts, " or "));
  }

  if (jsonOutput()) {
    llvm::json::Array List;
    for (const Row &R : Rows) {
      const SearchResult &S = R.Result;
      List.push_back(
          llvm::json::Object{{"devices", int64_t(R.Devices)},
                             {"time", S.Best.Time},
                             {"peak_memory", S.Best.PeakMemory},
                             {"fits", S.Best.Fits},
                             {"data_parallel_time", S.DataParallel.Time},
                             {"expert_time", S.Expert.Time},
                             {"model_parallel_time", S.ModelParallel.Time},
                             {"speedup_vs_data_parallel",
                              speedup(S.DataParallel.Time, S.Best.Time)},
                             {"iterations", int64_t(S.Iterations)},
                             {"search_seconds", S.Seconds},
                             {"gradient_bucket", S.Best.GradientBucketBytes},
                             {"found_on_devices", int64_t(R.FoundOn)}});
    }
    llvm::outs() << ir::jsonText(llvm::json::Value(std::move(List))) << "\n";
    return llvm::Error::success();
  }
  llvm::raw_ostream &OS = llvm::outs();
  OS << llvm::formatv("{0,7} {1,12} {2,12} {3,12} {4,8} {5,12} {6,5} {7,8}\n",
                      "devices", "best", "data par.", "expert", "speedup",
                      "peak memory", "fits", "found on");
  for (const Row &R : Rows) {
    const SearchResult &S = R.Result;
    OS << llvm::formatv(
        "{0,7} {1,12} {2,12} {3,12} {4,7:F2}x {5,12} {6,5} {7,8}\n", R.Devices,
        formatSeconds(S.Best.Time), formatSeconds(S.DataParallel.Time),
        formatSeconds(S.Expert.Time), speedup(S.DataParallel.Time, S.Best.Time),
        formatBytes(S.Best.PeakMemory), S.Best.Fits ? "yes" : "no", R.FoundOn);
  }
  return llvm::Error::success();
}

llvm::Error runSearch() {
  if (llvm::Error E = checkThreads(Threads))
    return E;
  auto Options = searchOptions();
  if (!Options)
    return Options.takeError();
  auto Loaded = loadPlanning(Model);
  if (!Loaded)
    return Loaded.takeError();
  const Planning &P = **Loaded;
  if (llvm::Error E = checkMemoryLimit(*Options, P.M))
    return E;
  if (P.TuneGradientBucket)
    Options->GradientBuckets = soap_search::defaultGradientBuckets();
  if (!AnyConfig)
    Options->Space.Accept = runnableConfigs(P.Training);
  if (SweepGpus.getNumOccurrences())
    return runSweep(P, *Options);

  auto CostModel = loadCostModel(P.M);
  if (!CostModel)
    return CostModel.takeError();
  const simulator::CostModel &Cost = **CostModel;
  Options->Progress = progressLine("");
  SearchResult R = soap_search::search(P.Training, P.M, Cost, P.Sim, *Options);
  clearProgressLine();
  const Candidate *Answer = chosen(R, Options->Goal);
  if (!Answer)
    return nothingFits(R, *Options, P.M);

  // Simulate the answer from scratch: the figures reported are what
  // `simulate` gives for the strategy file (which records the bucket size).
  simulator::SimOptions Planned = P.Sim;
  Planned.GradientBucketBytes = Answer->GradientBucketBytes;
  simulator::Simulator Sim(P.Training, P.M, Cost, Planned);
  Sim.simulate(Answer->S);
  simulator::SimReport Report = Sim.report();
  if (llvm::Error E = writeStrategyIfAsked(P, Answer->S, Report,
                                           Answer->GradientBucketBytes))
    return E;
  if (llvm::Error E = writeTraceIfAsked(Sim))
    return E;

  double MaxPeak = 0;
  for (double Peak : Report.PeakMemory)
    MaxPeak = std::max(MaxPeak, Peak);
  double Limit = effectiveLimit(*Options, P.M);
  bool Fits = Report.Fits && MaxPeak <= Limit;
  if (jsonOutput()) {
    llvm::json::Array Peaks;
    for (double Peak : Report.PeakMemory)
      Peaks.push_back(Peak);
    llvm::json::Object Out{
        {"model", P.Target.ModelFile},
        {"cluster", P.M.Name},
        {"num_devices", int64_t(P.M.numDevices())},
        {"objective", ObjectiveFlag.getValue()},
        {"seed", int64_t(Seed)},
        {"time", Report.Time},
        {"data_parallel_time", R.DataParallel.Time},
        {"expert_time", R.Expert.Time},
        {"model_parallel_time", R.ModelParallel.Time},
        {"speedup_vs_data_parallel", speedup(R.DataParallel.Time, Report.Time)},
        {"bytes_transferred", Report.BytesTransferred},
        {"communication", communicationJson(Report)},
        {"peak_memory", std::move(Peaks)},
        {"max_peak_memory", MaxPeak},
        {"memory_limit", Limit},
        {"fits", Fits},
        {"iterations", int64_t(R.Iterations)},
        {"chains_run", int64_t(R.ChainsRun)},
        {"search_seconds", R.Seconds},
        {"best_found_seconds", R.BestFoundSeconds},
        {"found_by", Answer->Source},
        {"gradient_bucket", Answer->GradientBucketBytes}};
    llvm::json::Array Progression;
    for (const Improvement &I : R.Progression)
      Progression.push_back(llvm::json::Object{{"seconds", I.Seconds},
                                               {"time", I.Time},
                                               {"peak_memory", I.PeakMemory},
                                               {"fits", I.Fits},
                                               {"found_by", I.Source}});
    Out["progression"] = std::move(Progression);
    llvm::json::Array Refinements;
    for (const soap_search::Refinement &W : R.Refinements)
      Refinements.push_back(
          llvm::json::Object{{"minimum", W.Source},
                             {"start_time", W.Start},
                             {"probed_time", W.Probed},
                             {"time", W.Time},
                             {"tries", int64_t(W.Tries)},
                             {"helped_tries", int64_t(W.HelpedTries)},
                             {"started_seconds", W.StartedAt},
                             {"ended_seconds", W.EndedAt}});
    Out["refinements"] = std::move(Refinements);
    if (Options->Goal == Objective::Frontier) {
      llvm::json::Array Frontier;
      for (const Candidate &C : R.Frontier)
        Frontier.push_back(llvm::json::Object{{"time", C.Time},
                                              {"peak_memory", C.PeakMemory}});
      Out["frontier"] = std::move(Frontier);
    }
    if (!strategyOutput().empty())
      Out["strategy_file"] = strategyOutput();
    llvm::outs() << ir::jsonText(llvm::json::Value(std::move(Out))) << "\n";
    return llvm::Error::success();
  }

  llvm::raw_ostream &OS = llvm::outs();
  OS << llvm::formatv("model           {0}\n", P.Target.ModelFile);
  OS << llvm::formatv("cluster         {0}, {1} devices\n", P.M.Name,
                      P.M.numDevices());
  OS << llvm::formatv("best            {0} per iteration ({1:F2}x data "
                      "parallel)\n",
                      formatSeconds(Report.Time),
                      speedup(R.DataParallel.Time, Report.Time));
  OS << llvm::formatv("data parallel   {0}\n",
                      formatSeconds(R.DataParallel.Time));
  OS << llvm::formatv("expert          {0}\n", formatSeconds(R.Expert.Time));
  OS << llvm::formatv("model parallel  {0}\n",
                      formatSeconds(R.ModelParallel.Time));
  OS << llvm::formatv("transferred     {0}\n",
                      formatBytes(Report.BytesTransferred));
  std::string Measured = communicationLine(P.M, Report);
  if (!Measured.empty())
    OS << "measured        " << Measured << "\n";
  OS << llvm::formatv("buckets         {0}\n",
                      formatGradientBucket(Answer->GradientBucketBytes));
  OS << llvm::formatv("peak memory     {0} (largest device; limit {1}): {2}\n",
                      formatBytes(MaxPeak), formatBytes(Limit),
                      Fits ? "fits" : "does not fit");
  OS << llvm::formatv("search          {0} iterations in {1:F2} s\n",
                      R.Iterations, R.Seconds);
  OS << llvm::formatv("found by        {0}, after {1:F2} s\n", Answer->Source,
                      Answer->FoundAt);
  if (Options->Goal == Objective::Frontier) {
    OS << llvm::formatv("frontier        {0} strategies (time, peak memory):\n",
                        R.Frontier.size());
    for (const Candidate &C : R.Frontier)
      OS << llvm::formatv("  {0,12} {1,12}\n", formatSeconds(C.Time),
                          formatBytes(C.PeakMemory));
  }
  if (!strategyOutput().empty())
    OS << llvm::formatv("wrote           {0}{1}\n", strategyOutput(),
                        Options->Goal == Objective::Frontier
                            ? " (the fastest strategy of the frontier)"
                            : "");
  return llvm::Error::success();
}

} // namespace onnx2soap::cli
