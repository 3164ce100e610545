//===- runtime_lib/program/Main.cpp - A generated program's main ----------===//
//
// Option parsing is by hand (a generated program links no option library);
// the project's README.md (templates/README.md.in) lists the options.
//
//===----------------------------------------------------------------------===//
#include "Main.h"
#include "../Error.h"
#include "AtomicFile.h"
#include "Checkpoint.h"
#include "CommProfile.h"
#include "Dataset.h"
#include "OnnxWeights.h"
#include "Placement.h"
#include "Runner.h"
#include "TensorFile.h"
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

namespace onnx2soap::rt::program {

namespace {

struct Options {
  int64_t Steps = 5;
  std::vector<std::string> Inputs;
  std::string Labels;
  std::string Data;
  std::string Weights;
  std::string Checkpoint;
  int64_t CheckpointEvery = 0;
  bool Resume = false;
  std::string SaveOnnx;
  std::string ProfileOps;
  std::string Trace;
  std::string ProfileComm;
  int64_t ProfileCommMax = 0; // 0: the plan's largest message
  std::string Model;
  int Threads = 0;
  double Timeout = 300;
  bool Quiet = false;
};

const char *Usage =
    "usage: train [--steps N] (--inputs FILE.pb [--inputs ...] [--labels "
    "FILE.pb] | --data DIR)\n"
    "             [--checkpoint DIR [--checkpoint-every N] [--resume]]\n"
    "             [--save-onnx OUT.onnx] [--profile-ops FILE.json]\n"
    "             [--trace FILE.json]\n"
    "             [--weights DIR] [--model FILE]\n"
    "             [--threads N] [--timeout SEC] [--quiet]\n"
    "   or: train --profile-comm FILE.json [--profile-comm-max BYTES]\n"
    "             [--threads N] [--timeout SEC] [--quiet]\n"
    "Run one MPI rank per device: mpirun -np <ranks> ./train ...\n";

/// The folder holding the executable (for the default weights folder).
std::string executableDir() {
  char Path[4096];
  ssize_t Length = readlink("/proc/self/exe", Path, sizeof Path - 1);
  if (Length <= 0)
    return ".";
  Path[Length] = 0;
  std::string Text(Path);
  size_t Slash = Text.rfind('/');
  return Slash == std::string::npos ? "." : Text.substr(0, Slash);
}

/// Fails unless Path can be written where only rank 0 writes it: its folder
/// exists and is writable and Path is not a folder. Checked at start, since
/// an output that cannot be written would otherwise fail after the
/// training it reports on.
void checkWritable(const char *Flag, const std::string &Path) {
  if (Path.empty())
    return;
  struct stat Info;
  if (stat(Path.c_str(), &Info) == 0 && S_ISDIR(Info.st_mode))
    fail(Flag, Path + " is a folder; expected a file to write");
  size_t Slash = Path.rfind('/');
  std::string Dir = Slash == std::string::npos ? "."
                    : Slash == 0               ? "/"
                                               : Path.substr(0, Slash);
  if (stat(Dir.c_str(), &Info) != 0 || !S_ISDIR(Info.st_mode))
    fail(Flag, Path + ": folder " + Dir + " does not exist");
  if (access(Dir.c_str(), W_OK) != 0)
    fail(Flag, Path + ": folder " + Dir + " is not writable");
}

/// Text as an integer from 0 to Max.
int64_t parseCount(const std::string &Flag, const char *Text,
                   int64_t Max = INT64_MAX) {
  char *End = nullptr;
  errno = 0;
  long long Value = std::strtoll(Text, &End, 10);
  if (!*Text || *End || Value < 0)
    fail(Flag,
         std::string("expected a non-negative integer, got '") + Text + "'");
  if (errno == ERANGE || Value > Max)
    fail(Flag,
         std::string("'") + Text + "' is more than " + std::to_string(Max));
  return Value;
}

Options parseOptions(int Argc, char **Argv) {
  Options O;
  std::string Dir = executableDir();
  O.Weights = Dir + "/../weights";
  O.Model = Dir + "/../model.onnx";
  std::string TrainingFlag;
  for (int I = 1; I < Argc; ++I) {
    std::string Flag = Argv[I];
    auto Value = [&]() -> const char * {
      if (I + 1 >= Argc || !*Argv[I + 1])
        fail(Flag, "needs a value");
      return Argv[++I];
    };
    // The first flag that trains (--profile-comm does not).
    static const char *const Training[] = {
        "--steps",   "--inputs",    "--labels",      "--data",
        "--weights", "--model",     "--checkpoint",  "--checkpoint-every",
        "--resume",  "--save-onnx", "--profile-ops", "--trace"};
    if (TrainingFlag.empty())
      for (const char *Name : Training)
        if (Flag == Name)
          TrainingFlag = Flag;
    if (Flag == "--steps")
      O.Steps = parseCount(Flag, Value());
    else if (Flag == "--inputs")
      O.Inputs.push_back(Value());
    else if (Flag == "--labels")
      O.Labels = Value();
    else if (Flag == "--data")
      O.Data = Value();
    else if (Flag == "--weights")
      O.Weights = Value();
    else if (Flag == "--model")
      O.Model = Value();
    else if (Flag == "--checkpoint")
      O.Checkpoint = Value();
    else if (Flag == "--checkpoint-every")
      O.CheckpointEvery = parseCount(Flag, Value());
    else if (Flag == "--resume")
      O.Resume = true;
    else if (Flag == "--save-onnx")
      O.SaveOnnx = Value();
    else if (Flag == "--profile-ops")
      O.ProfileOps = Value();
    else if (Flag == "--trace")
      O.Trace = Value();
    else if (Flag == "--profile-comm")
      O.ProfileComm = Value();
    else if (Flag == "--profile-comm-max")
      O.ProfileCommMax = parseCount(Flag, Value());
    else if (Flag == "--threads")
      // Past about a thousand the kernels' thread pool runs out of stack.
      O.Threads = int(parseCount(Flag, Value(), 1024));
    else if (Flag == "--timeout") {
      O.Timeout = double(parseCount(Flag, Value()));
      if (O.Timeout < 1)
        fail(Flag, "must be at least 1 (second)");
    } else if (Flag == "--quiet")
      O.Quiet = true;
    else if (Flag == "--help" || Flag == "-h") {
      std::fputs(Usage, stdout);
      std::exit(0);
    } else
      fail(Flag, "unknown option (train --help lists them)");
  }
  if (O.ProfileCommMax != 0 && O.ProfileComm.empty())
    fail("--profile-comm-max", "goes with --profile-comm");
  if (O.CheckpointEvery != 0 && O.Checkpoint.empty())
    fail("--checkpoint-every", "goes with --checkpoint DIR");
  if (O.ProfileCommMax != 0 && O.ProfileCommMax < 8)
    fail("--profile-comm-max", "must be at least 8 (bytes)");
  // Measuring communication needs no batch and trains nothing: a training
  // flag beside it would be ignored.
  if (!O.ProfileComm.empty()) {
    if (!TrainingFlag.empty())
      fail("--profile-comm", "measures communication and trains nothing; " +
                                 TrainingFlag + " does not go with it");
    return O;
  }
  if (!O.Data.empty() && (!O.Inputs.empty() || !O.Labels.empty()))
    fail("--data", "takes the place of --inputs and --labels; give one or "
                   "the other");
  if (O.Inputs.empty() && O.Data.empty())
    fail("train", "--inputs FILE.pb (one per model input: the global batch) "
                  "or --data DIR (a dataset folder) is required");
  if (O.Resume && O.Checkpoint.empty())
    fail("--resume", "needs --checkpoint DIR");
  return O;
}

int localRank() {
  for (const char *Name :
       {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"})
    if (const char *Value = std::getenv(Name))
      return std::atoi(Value);
  return 0;
}

void saveCheckpoint(Runner &R, Comm &C, const Plan &P, const std::string &Dir) {
  writeRankCheckpoint(Dir, R.stepsDone(), P.PlanHash, C.rank(),
                      R.persistentState());
  C.barrier();
  if (C.rank() == 0)
    commitCheckpoint(Dir, R.stepsDone(), 2);
  C.barrier();
}

int run(const Plan &P, const Platform &Platform, int Argc, char **Argv) {
  // Options are checked before MPI starts so a typo costs no launch.
  Options O = parseOptions(Argc, Argv);
  std::unique_ptr<Backend> B = Platform.CreateBackend(localRank(), O.Threads);
  CommOptions CO;
  CO.TimeoutSeconds = O.Timeout;
  std::unique_ptr<Comm> C = Platform.CreateComm(&Argc, &Argv, CO, *B);
  int Rank = C->rank();
  // A failure from here on ends this rank at once, without the orderly
  // MPI shutdown a destructor would attempt (it would wait for peers that
  // are waiting for this rank); mpirun then ends the others.
  try {
    // Where the launcher put the ranks against the plan's nodes: a warning
    // (the step is still right, only slower than planned).
    std::vector<std::string> Devices;
    for (int32_t R = 0; R < P.DeviceNames.Size; ++R)
      Devices.push_back(P.DeviceNames[R]);
    std::string Misplaced = placementWarning(Devices, rankHosts(*C));
    if (Rank == 0 && !Misplaced.empty())
      std::fprintf(stderr, "train: warning: %s\n", Misplaced.c_str());
    // Rank 0 writes the output files: their folders must be there now.
    if (Rank == 0) {
      checkWritable("--profile-comm", O.ProfileComm);
      checkWritable("--profile-ops", O.ProfileOps);
      checkWritable("--trace", O.Trace);
      checkWritable("--save-onnx", O.SaveOnnx);
    }
    if (!O.ProfileComm.empty()) {
      size_t Max =
          O.ProfileCommMax ? size_t(O.ProfileCommMax) : largestMessageBytes(P);
      std::string Json = profileCommunication(P, *B, *C, Max, 5);
      if (Rank == 0) {
        writeFileAtomically(O.ProfileComm, Json.data(), Json.size());
        if (!O.Quiet)
          std::printf("wrote %s\n", O.ProfileComm.c_str());
      }
      C->barrier();
      return 0;
    }
    Runner R(P, *B, *C, O.Weights);

    if (!O.Data.empty()) {
      R.setDataset(std::make_shared<Dataset>(O.Data, datasetFiles(P)));
    } else {
      std::vector<HostTensor> Inputs;
      for (const std::string &Path : O.Inputs)
        Inputs.push_back(readTensorFile(Path));
      HostTensor Labels;
      if (!O.Labels.empty())
        Labels = readTensorFile(O.Labels);
      R.setBatch(Inputs, O.Labels.empty() ? nullptr : &Labels);
    }

    if (O.Resume) {
      LoadedCheckpoint Loaded =
          readRankCheckpoint(O.Checkpoint, P.PlanHash, Rank);
      R.restore(Loaded.Step, Loaded.Blobs);
      if (Rank == 0 && !O.Quiet)
        std::printf("resumed from step %lld\n", (long long)Loaded.Step);
    }

    int64_t FirstStep = R.stepsDone();
    if (!O.ProfileOps.empty())
      R.startProfiling();
    while (R.stepsDone() < O.Steps) {
      // --trace records the last step.
      if (!O.Trace.empty() && R.stepsDone() + 1 == O.Steps)
        R.traceNextStep();
      C->barrier();
      auto Start = std::chrono::steady_clock::now();
      double Loss = R.step();
      double Seconds = std::chrono::duration<double>(
                           std::chrono::steady_clock::now() - Start)
                           .count();
      Seconds = C->maxOverRanks(Seconds);
      if (Rank == 0) {
        std::printf("step %lld loss %.9g time %.6f s\n",
                    (long long)R.stepsDone(), Loss, Seconds);
        std::fflush(stdout);
      }
      if (!O.Checkpoint.empty() && O.CheckpointEvery > 0 &&
          R.stepsDone() % O.CheckpointEvery == 0)
        saveCheckpoint(R, *C, P, O.Checkpoint);
    }
    if (!O.Checkpoint.empty() &&
        (O.CheckpointEvery == 0 || R.stepsDone() % O.CheckpointEvery != 0))
      saveCheckpoint(R, *C, P, O.Checkpoint);

    // Bytes each rank sent per step against the planner's prediction, and
    // the device memory it allocated against the plan's, all printed by
    // rank 0 (ranks' output streams interleave arbitrarily).
    int64_t StepsRun = R.stepsDone() - FirstStep;
    for (int Other = 0; Other < C->size(); ++Other) {
      double Held =
          C->sumOverRanks(Other == Rank ? double(R.allocatedBytes()) : 0);
      if (Rank == 0 && !O.Quiet)
        std::printf("rank %d allocated %.17g bytes (plan: %.17g)\n", Other,
                    Held, double(allocatedBytes(P, Other)));
    }
    for (int Other = 0; Other < C->size(); ++Other) {
      double Sent = C->sumOverRanks(Other == Rank ? double(C->bytesSent()) : 0);
      if (Rank == 0 && !O.Quiet && StepsRun > 0)
        std::printf("rank %d sent %.17g bytes per step (planner: %.17g)\n",
                    Other, Sent / double(StepsRun),
                    Other < P.PredictedBytes.Size ? P.PredictedBytes[Other]
                                                  : 0.0);
    }
    std::fflush(stdout);

    if (!O.ProfileOps.empty()) {
      // Where each rank's steps went, per step (kernels timed one by one,
      // so slower than an unprofiled step).
      StepBreakdown Mine = R.breakdown();
      for (int Other = 0; Other < C->size(); ++Other) {
        auto Of = [&](double Value) {
          return C->sumOverRanks(Other == Rank ? Value : 0);
        };
        double Steps = Of(double(Mine.Steps));
        double Kernels = Of(Mine.Kernels), Copies = Of(Mine.Copies);
        double Communication = Of(Mine.Communication), Total = Of(Mine.Total);
        if (Rank == 0 && !O.Quiet && Steps > 0)
          std::printf("rank %d per profiled step: %.6f s = kernels %.6f s, "
                      "copies %.6f s, communication %.6f s, other %.6f s\n",
                      Other, Total / Steps, Kernels / Steps, Copies / Steps,
                      Communication / Steps,
                      (Total - Kernels - Copies - Communication) / Steps);
      }
      std::string Json = R.profileJson(O.Threads);
      if (Rank == 0) {
        writeFileAtomically(O.ProfileOps, Json.data(), Json.size());
        if (!O.Quiet)
          std::printf("wrote %s\n", O.ProfileOps.c_str());
      }
    }
    if (!O.Trace.empty()) {
      if (!R.traced()) {
        if (Rank == 0)
          std::fprintf(stderr,
                       "train: warning: --trace: no step ran (resumed at step "
                       "%lld of %lld); %s not written\n",
                       (long long)R.stepsDone(), (long long)O.Steps,
                       O.Trace.c_str());
      } else {
        std::string Json = R.traceJson();
        if (Rank == 0) {
          writeFileAtomically(O.Trace, Json.data(), Json.size());
          if (!O.Quiet)
            std::printf("wrote %s\n", O.Trace.c_str());
        }
      }
    }
    if (!O.SaveOnnx.empty()) {
      std::vector<HostTensor> Weights = R.gatherWeights();
      if (Rank == 0) {
        std::vector<char> Model = readWholeFile(O.Model);
        std::string Updated = replaceInitializers(
            std::string(Model.begin(), Model.end()), Weights);
        writeFileAtomically(O.SaveOnnx, Updated.data(), Updated.size());
        if (!O.Quiet)
          std::printf("saved %s\n", O.SaveOnnx.c_str());
      }
      C->barrier();
    }
  } catch (const std::exception &Failure) {
    std::fprintf(stderr, "train: error: rank %d: %s\n", Rank, Failure.what());
    std::fflush(stderr);
    std::fflush(stdout);
    std::_Exit(2);
  }
  return 0;
}

} // namespace

int trainMain(const Plan &P, const Platform &Platform, int Argc, char **Argv) {
  try {
    return run(P, Platform, Argc, Argv);
  } catch (const RuntimeError &Failure) {
    std::fprintf(stderr, "train: error: %s\n", Failure.what());
    std::fflush(stderr);
    // Other ranks may be waiting on this one: end them all.
    std::_Exit(2);
  }
}

} // namespace onnx2soap::rt::program
