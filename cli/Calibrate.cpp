//===- cli/Calibrate.cpp - `onnx2soap calibrate` --------------------------===//
//
// Measures, on the CPU backend of this machine, the forward and backward
// time of every distinct partition shape that some strategies give a model
// on a cluster of CPU ranks, and writes them as a profile file
// (docs/profile-format.md) that `simulate --profile` and `search --profile`
// prefer to the analytic cost model. Each partition runs alone: a one-op
// graph whose inputs have the shapes of the regions the partition reads,
// filled with random data, run by the reference executor's kernels; the
// time recorded is the median of the repeats after one warm-up, each repeat
// by default after the caches are filled with other data (--cache).
//
//===----------------------------------------------------------------------===//
#include "cli/Subcommands.h"
#include "executor/Executor.h"
#include "ir/BatchDims.h"
#include "ir/JsonText.h"
#include "runtime_lib/CopyTiming.h"
#include "runtime_lib/Error.h"
#include "runtime_lib/Median.h"
#include "simulator/ProfileCostModel.h"
#include "simulator/TaskGraph.h"
#include "soap_search/Builtins.h"
#include "soap_search/ConfigSpace.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <thread>

namespace onnx2soap::cli {

namespace cl = llvm::cl;
using simulator::ParallelConfig;

cl::SubCommand &calibrateCommand() {
  static cl::SubCommand Command(
      "calibrate", "Measure op partition times on this machine's CPU and "
                   "write a profile for --profile");
  return Command;
}

static cl::opt<std::string> Model(cl::Positional, cl::Required,
                                  cl::desc("<model.onnx>"),
                                  cl::sub(calibrateCommand()));
static cl::opt<std::string>
    StrategyFlag("strategy",
                 cl::desc("Measure the partitions of this strategy (a file, or "
                          "data-parallel, model-parallel, expert or optcnn) "
                          "instead of the three built-ins"),
                 cl::value_desc("S"), cl::sub(calibrateCommand()));
static cl::opt<unsigned>
    SearchConfigs("search-configs",
                  cl::desc("Also measure K random configs of every op, as the "
                           "search proposes them (default 0)"),
                  cl::value_desc("K"), cl::init(0),
                  cl::sub(calibrateCommand()));
static cl::opt<uint64_t> Seed("seed",
                              cl::desc("Seed of the random configs and data "
                                       "(default 0)"),
                              cl::value_desc("N"), cl::init(0),
                              cl::sub(calibrateCommand()));
static cl::opt<std::string>
    Output("o", cl::desc("The profile file to write (required)"),
           cl::value_desc("profile.json"), cl::sub(calibrateCommand()));
static cl::opt<unsigned> Repeat("repeat",
                                cl::desc("Timed runs per partition, after one "
                                         "warm-up (default 5)"),
                                cl::value_desc("R"), cl::init(5),
                                cl::sub(calibrateCommand()));
static cl::opt<unsigned>
    Threads("threads",
            cl::desc("CPU threads per kernel (0: the cores divided among the "
                     "cluster's devices)"),
            cl::value_desc("T"), cl::init(0), cl::sub(calibrateCommand()));

static cl::opt<std::string>
    CacheFlag("cache",
              cl::desc("cold (default): each timed run starts with the CPU "
                       "caches holding other data, as a kernel in a training "
                       "step finds them; warm: with the operands the run "
                       "before left there"),
              cl::value_desc("cold|warm"), cl::init("cold"),
              cl::sub(calibrateCommand()));

static cl::opt<double>
    Budget("budget",
           cl::desc("Stop measuring new shapes after SEC seconds and write "
                    "what was measured (default 300)"),
           cl::value_desc("SEC"), cl::init(300), cl::sub(calibrateCommand()));

/// A partition's repeats stop early once they have taken this long.
static constexpr double TimeCapSeconds = 2.0;

namespace {

/// One distinct partition shape to measure.
struct Partition {
  ir::OpId Op;
  ir::Region Out;
  ir::Interval Reduction;
  std::string Key;
};

/// What measuring one partition gave.
struct Measured {
  std::optional<simulator::ProfileEntry> Entry;
  /// Why nothing, or why no backward, was measured.
  std::string Note;
};

using Clock = std::chrono::steady_clock;

/// Bytes written between timed runs for --cache cold: twice the largest
/// last-level cache of the CPUs this was measured on (32 MiB, shared by all
/// cores), so that the run finds none of its operands cached.
static constexpr size_t EvictionBytes = 64u << 20;

/// Leaves the CPU caches holding other data than the kernels' (writes a
/// buffer larger than the last-level cache, one store per cache line).
void evictCaches() {
  static std::vector<unsigned char> Other(EvictionBytes);
  for (size_t I = 0; I < Other.size(); I += 64)
    ++Other[I];
}

/// Runs Body once to warm up, then up to Repeats times (fewer once
/// TimeCapSeconds have passed, evictions included), each after the caches
/// are evicted when Cold; the seconds of each timed run.
template <typename Fn>
std::vector<double> timeRuns(unsigned Repeats, bool Cold, Fn Body) {
  return rt::timeRepeats(
      Repeats, TimeCapSeconds,
      [&] {
        if (Cold)
          evictCaches();
      },
      [&] {
        auto Start = Clock::now();
        Body();
        return std::chrono::duration<double>(Clock::now() - Start).count();
      });
}

/// Host bytes of a tensor of Type: floats uniform in [0.5, 1.5) (valid for
/// every kernel: logarithms, square roots, variances), integers and bools
/// zero (valid indices and labels).
std::vector<char> randomBytes(const ir::TensorType &Type, soap_search::Rng &R) {
  std::vector<char> Bytes(Type.byteSize(), 0);
  int64_t N = Type.numElements();
  auto Uniform = [&] { return 0.5 + soap_search::uniformReal(R); };
  switch (Type.Type) {
  case ir::DType::Float32:
    for (int64_t I = 0; I < N; ++I) {
      float V = float(Uniform());
      std::memcpy(Bytes.data() + I * sizeof V, &V, sizeof V);
    }
    break;
  case ir::DType::Float64:
    for (int64_t I = 0; I < N; ++I) {
      double V = Uniform();
      std::memcpy(Bytes.data() + I * sizeof V, &V, sizeof V);
    }
    break;
  case ir::DType::Float16:
  case ir::DType::BFloat16: {
    // 1.0 in either format.
    uint16_t One = Type.Type == ir::DType::Float16 ? 0x3C00 : 0x3F80;
    for (int64_t I = 0; I < N; ++I)
      std::memcpy(Bytes.data() + I * sizeof One, &One, sizeof One);
    break;
  }
  case ir::DType::Int8:
  case ir::DType::UInt8:
  case ir::DType::Int16:
  case ir::DType::UInt16:
  case ir::DType::Int32:
  case ir::DType::UInt32:
  case ir::DType::Int64:
  case ir::DType::UInt64:
  case ir::DType::Bool:
    break;
  }
  return Bytes;
}

ir::TensorType regionType(ir::DType Type, llvm::ArrayRef<ir::Interval> R) {
  ir::TensorType T{Type, {}};
  for (const ir::Interval &I : R)
    T.Dims.push_back(I.size());
  return T;
}

/// Measures partition P of op P.Op of T on backend B.
Measured measure(const ir::TrainingGraph &T, const Partition &P, rt::Backend &B,
                 unsigned Repeats, bool Cold, soap_search::Rng &R) {
  const ir::Graph &G = T.G;
  const ir::Op &O = G.op(P.Op);
  const ir::OpKindInfo &Info = ir::opKindInfo(O.Kind);
  Measured Result;

  // The partition as a graph of its own.
  ir::Graph One;
  std::vector<ir::TensorId> Inputs;
  for (unsigned I = 0; I < O.Inputs.size(); ++I) {
    const ir::TensorType *Type = G.inputType(O, I);
    if (!Type) {
      Inputs.push_back(ir::NoTensor);
      continue;
    }
    ir::Region In = Info.InputRegion(G, O, I, P.Out, P.Reduction);
    Inputs.push_back(One.addTensor("in" + std::to_string(I),
                                   regionType(Type->Type, In),
                                   ir::TensorRole::Input));
  }
  ir::Attributes Attrs = O.Attrs;
  // A Reshape's target is the whole tensor's shape; a partition reshapes the
  // region it reads into the region it writes.
  if (O.Kind == ir::OpKind::Reshape)
    Attrs.set("shape",
              ir::IntList(regionType(G.outputType(O).Type, P.Out).Dims));
  auto Id = One.addOp(O.Kind, O.Name, Inputs, std::move(Attrs));
  if (!Id) {
    Result.Note = "skipped: the op does not apply to the partition's input "
                  "regions (" +
                  llvm::toString(Id.takeError()) + ")";
    return Result;
  }
  const ir::Op &Alone = One.op(*Id);
  // Output 0 decides what the partition computes. Other outputs (running
  // statistics, a loss's log-probabilities) are whatever the kernel writes
  // for those inputs: the planner's region for them (outputRegionOf) can be
  // the whole tensor where the kernel writes a slice.
  ir::TensorType Want = regionType(G.outputType(O).Type, P.Out);
  if (!(One.outputType(Alone) == Want)) {
    Result.Note = llvm::formatv("skipped: the op on the partition's input "
                                "regions computes {0}, not the partition's {1}",
                                ir::formatShape(One.outputType(Alone).Dims),
                                ir::formatShape(Want.Dims));
    return Result;
  }
  auto Exec = executor::Executor::create(One, B);
  if (!Exec) {
    Result.Note = "skipped: " + llvm::toString(Exec.takeError());
    return Result;
  }
  for (ir::TensorId In : Inputs)
    if (In != ir::NoTensor)
      if (llvm::Error E =
              (*Exec)->setInput(In, randomBytes(One.tensor(In).Type, R))) {
        Result.Note = "skipped: " + llvm::toString(std::move(E));
        return Result;
      }

  rt::OpCall Call = (*Exec)->call(*Id, /*Step=*/1);
  simulator::ProfileEntry Entry;
  Entry.Key = P.Key;
  try {
    std::vector<double> Times = timeRuns(Repeats, Cold, [&] {
      B.forward(Call);
      B.synchronize();
    });
    Entry.ForwardSeconds = rt::median(Times);
    Entry.Samples = Times.size();
  } catch (const std::exception &Failure) {
    Result.Note = std::string("skipped: forward failed: ") + Failure.what();
    return Result;
  }

  // Backward, as the Trainer runs it: gradients of the outputs the loss
  // depends on, into the inputs that need one.
  uint32_t Needed = T.BackwardInputs[P.Op];
  if (Needed) {
    std::vector<rt::DeviceBuffer> Buffers;
    std::vector<rt::TensorView> OutGrads, InGrads;
    auto GradView = [&](ir::TensorId Tensor, bool Random) {
      rt::TensorView V = (*Exec)->view(Tensor);
      Buffers.emplace_back(B, V.byteSize());
      if (Random) {
        std::vector<char> Bytes = randomBytes(One.tensor(Tensor).Type, R);
        B.copyFromHost(Buffers.back().data(), Bytes.data(), Bytes.size());
      }
      V.Data = Buffers.back().data();
      return V;
    };
    for (unsigned I = 0; I < O.Outputs.size(); ++I)
      OutGrads.push_back(T.NeedsGrad[O.Outputs[I]]
                             ? GradView(Alone.Outputs[I], true)
                             : rt::TensorView::absent());
    for (unsigned I = 0; I < O.Inputs.size(); ++I)
      InGrads.push_back(Needed >> I & 1 && Inputs[I] != ir::NoTensor
                            ? GradView(Inputs[I], false)
                            : rt::TensorView::absent());
    try {
      std::vector<double> Times = timeRuns(Repeats, Cold, [&] {
        B.backward(Call, OutGrads, InGrads);
        B.synchronize();
      });
      Entry.BackwardSeconds = rt::median(Times);
      Entry.Samples = std::min<int64_t>(Entry.Samples, Times.size());
    } catch (const std::exception &Failure) {
      Result.Note = std::string("backward not measured: ") + Failure.what();
    }
  }
  Result.Entry = std::move(Entry);
  return Result;
}

} // namespace

/// The strategies whose partitions are measured.
static llvm::Expected<std::vector<simulator::Strategy>>
strategiesToMeasure(const Planning &P) {
  const ir::Graph &G = P.Training.G;
  simulator::AnalyticCostModel Cost;
  std::vector<simulator::Strategy> Result;
  if (StrategyFlag.empty()) {
    for (soap_search::Builtin Kind :
         {soap_search::Builtin::DataParallel,
          soap_search::Builtin::ModelParallel, soap_search::Builtin::Expert})
      Result.push_back(soap_search::builtin(Kind, G, P.M, Cost));
    return Result;
  }
  auto Named = namedStrategy(StrategyFlag, P, Cost);
  if (!Named)
    return Named.takeError();
  Result.push_back(std::move(*Named));
  return Result;
}

llvm::Error runCalibrate() {
  if (llvm::Error E = checkThreads(Threads))
    return E;
  if (!Output.getNumOccurrences())
    return usageError("-o FILE is required: where to write the profile");
  if (llvm::Error E = checkOutputFile(Output, "-o"))
    return E;
  if (Repeat == 0)
    return usageError("--repeat must be at least 1");
  if (!(Budget > 0) || !std::isfinite(Budget))
    return usageError("--budget must be a positive number of seconds");
  if (CacheFlag != "cold" && CacheFlag != "warm")
    return usageError("--cache " + CacheFlag + ": expected cold or warm");
  bool Cold = CacheFlag == "cold";
  if (llvm::Error E = checkNotAnInput(Output, "-o", Model))
    return E;
  auto Loaded = loadPlanning(Model);
  if (!Loaded)
    return Loaded.takeError();
  const Planning &P = **Loaded;
  const ir::Graph &G = P.Training.G;

  // The times are this CPU's: they stand for a cluster of CPU devices only.
  const simulator::DeviceType &Device = P.M.deviceType(0);
  for (const simulator::DeviceType &Type : P.M.deviceTypes())
    if (!Type.CudaArch.empty() || Type.Name != Device.Name)
      return usageError(llvm::formatv(
          "--cluster {0}: calibrate measures on this machine's CPU, so the "
          "cluster must have one CPU device type (cpu:N); device type '{1}' "
          "is {2}. Profiles of GPUs are written by the generated program",
          P.M.Name, Type.Name,
          Type.CudaArch.empty() ? "a second device type" : "a GPU"));

  auto Strategies = strategiesToMeasure(P);
  if (!Strategies)
    return Strategies.takeError();

  // Distinct partition shapes, in the order first met: strategies, then the
  // random configs, op by op.
  std::vector<bool> WeightOnly = simulator::weightOnlyOps(G);
  std::vector<Partition> Todo;
  llvm::StringSet<> Seen;
  auto Collect = [&](ir::OpId Op, const ParallelConfig &C) {
    const ir::Op &O = G.op(Op);
    for (unsigned Part = 0; Part < C.numPartitions(); ++Part) {
      Partition New{Op,
                    simulator::outputRegion(G, O, C, Part),
                    simulator::reductionSlice(G, O, C, Part),
                    {}};
      New.Key = simulator::profileKey({G, O, New.Out, New.Reduction});
      if (Seen.insert(New.Key).second)
        Todo.push_back(std::move(New));
    }
  };
  for (const simulator::Strategy &S : *Strategies)
    for (const ir::Op &O : G.ops())
      if (!WeightOnly[O.Id])
        Collect(O.Id, S[O.Id]);
  soap_search::Rng Random(Seed);
  if (SearchConfigs > 0) {
    soap_search::ConfigSpace Space(G, P.M.numDevices());
    for (const ir::Op &O : G.ops())
      if (!WeightOnly[O.Id])
        for (unsigned K = 0; K < SearchConfigs; ++K)
          Collect(O.Id, Space.random(O.Id, Random));
  }

  unsigned ThreadCount = Threads;
  if (ThreadCount == 0)
    ThreadCount =
        std::max(1u, std::thread::hardware_concurrency() / P.M.numDevices());
  std::unique_ptr<rt::Backend> Backend = rt::createCpuBackend(ThreadCount);

  llvm::raw_ostream &OS = llvm::outs();
  OS << llvm::formatv("calibrating {0} partition shapes of {1} on the CPU "
                      "({2} thread{3}, median of {4} after a warm-up, {5} "
                      "caches)\n",
                      Todo.size(), P.Target.ModelFile, ThreadCount,
                      ThreadCount == 1 ? "" : "s", Repeat.getValue(),
                      CacheFlag.getValue());
  simulator::Profile Profile;
  Profile.DeviceType = Device.Name;
  Profile.MeasuredWith = llvm::json::Object{{"backend", "cpu"},
                                            {"threads", int64_t(ThreadCount)},
                                            {"repeat", int64_t(Repeat)},
                                            {"cache", CacheFlag.getValue()}};
  {
    rt::CopyTiming Timed = rt::timeBoxCopies(
        *Backend, Repeat, Cold ? std::function<void()>(evictCaches) : nullptr);
    simulator::CopyProfile Copies;
    Copies.SizesBytes = Timed.SizesBytes;
    for (double Seconds : Timed.Seconds)
      Copies.TimesUs.push_back(rt::profileMicroseconds(Seconds));
    Copies.Samples = Timed.Samples;
    Profile.Copies = std::move(Copies);
  }
  {
    std::string Line;
    for (size_t I = 0; I < Profile.Copies->SizesBytes.size(); ++I)
      Line += llvm::formatv("{0}{1} {2}", I ? ", " : "",
                            formatBytes(Profile.Copies->SizesBytes[I]),
                            formatSeconds(Profile.Copies->TimesUs[I] * 1e-6));
    OS << "box copies: " << Line << "\n";
  }
  unsigned Skipped = 0, NoBackward = 0;
  auto Start = Clock::now();
  for (size_t I = 0; I < Todo.size(); ++I) {
    double Elapsed =
        std::chrono::duration<double>(Clock::now() - Start).count();
    if (Elapsed > Budget) {
      OS << llvm::formatv("--budget {0} reached: {1} shapes not measured "
                          "(the analytic model answers for them)\n",
                          formatSeconds(Budget), Todo.size() - I);
      Skipped += Todo.size() - I;
      break;
    }
    const Partition &Part = Todo[I];
    const ir::Op &O = G.op(Part.Op);
    Measured M = measure(P.Training, Part, *Backend, Repeat, Cold, Random);
    std::string Times = "          -            -";
    if (M.Entry) {
      Times = llvm::formatv(
          "fwd {0,10} bwd {1,10}", formatSeconds(M.Entry->ForwardSeconds),
          M.Entry->BackwardSeconds ? formatSeconds(*M.Entry->BackwardSeconds)
                                   : std::string("-"));
      NoBackward +=
          !M.Entry->BackwardSeconds && P.Training.BackwardInputs[Part.Op] != 0;
      Profile.Entries.push_back(std::move(*M.Entry));
    } else {
      ++Skipped;
    }
    OS << llvm::formatv("[{0}/{1}] {2}  {3} ({4}) {5}\n", I + 1, Todo.size(),
                        Times, O.Name, ir::opKindName(O.Kind),
                        ir::formatRegion(Part.Out));
    if (!M.Note.empty())
      OS << "        " << M.Note << "\n";
    OS.flush();
  }

  std::string Text = ir::jsonText(llvm::json::Value(Profile.toJson()));
  if (llvm::Error E = writeFileAtomically(
          Output, "-o", [&](llvm::raw_ostream &File) { File << Text << "\n"; }))
    return E;
  OS << llvm::formatv("wrote {0}: {1} entries for device type '{2}'", Output,
                      Profile.Entries.size(), Device.Name);
  if (Skipped || NoBackward)
    OS << llvm::formatv(" ({0} shapes skipped, {1} without backward)", Skipped,
                        NoBackward);
  OS << "\n";
  return llvm::Error::success();
}

} // namespace onnx2soap::cli
