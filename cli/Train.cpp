//===- cli/Train.cpp - `onnx2soap train` ----------------------------------===//
//
// Trains a model on one batch for K steps on one CPU device with the
// reference executor and prints `step <i> loss <value>` per step: the
// single-device truth that generated programs are compared with.
//
//===----------------------------------------------------------------------===//
#include "cli/Subcommands.h"
#include "codegen/ProgramPlan.h"
#include "executor/Trainer.h"
#include "onnx_import/ConstTensor.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"
#include <chrono>
#include <cstdio>
#include <limits>

namespace onnx2soap::cli {

namespace cl = llvm::cl;

cl::SubCommand &trainCommand() {
  static cl::SubCommand Command(
      "train", "Train a model on one batch on the CPU and print the losses");
  return Command;
}

static cl::opt<std::string> Model(cl::Positional, cl::Required,
                                  cl::desc("<model.onnx>"),
                                  cl::sub(trainCommand()));
static cl::list<std::string>
    InputFiles("inputs",
               cl::desc("The batch for each model input, in input order "
                        "(one per input; required)"),
               cl::value_desc("FILE.pb"), cl::sub(trainCommand()));
static cl::opt<std::string>
    LabelFile("labels", cl::desc("Labels (cross-entropy) or targets (mse)"),
              cl::value_desc("FILE.pb"), cl::sub(trainCommand()));
static cl::opt<int> Steps("steps", cl::desc("Training steps (default 5)"),
                          cl::value_desc("N"), cl::init(5),
                          cl::sub(trainCommand()));
static cl::opt<std::string> Optimizer("optimizer",
                                      cl::desc("sgd (default), adam or adamw"),
                                      cl::value_desc("sgd|adam|adamw"),
                                      cl::init("sgd"), cl::sub(trainCommand()));
static cl::opt<double> Lr("lr", cl::desc("Learning rate (default 0.01)"),
                          cl::value_desc("X"), cl::init(0.01),
                          cl::sub(trainCommand()));
static cl::opt<double> Momentum("momentum",
                                cl::desc("SGD momentum (default 0)"),
                                cl::value_desc("X"), cl::init(0),
                                cl::sub(trainCommand()));
static cl::opt<double> Dampening("dampening",
                                 cl::desc("SGD dampening (default 0)"),
                                 cl::value_desc("X"), cl::init(0),
                                 cl::sub(trainCommand()));
static cl::opt<bool> Nesterov("nesterov",
                              cl::desc("Nesterov momentum (needs --momentum "
                                       "above 0 and no dampening)"),
                              cl::sub(trainCommand()));
static cl::opt<double> WeightDecay("weight-decay",
                                   cl::desc("Weight decay (default 0; 0.01 "
                                            "for adamw)"),
                                   cl::value_desc("X"), cl::init(-1),
                                   cl::sub(trainCommand()));
static cl::opt<double> Beta1("beta1", cl::desc("Adam beta1 (default 0.9)"),
                             cl::value_desc("X"), cl::init(0.9),
                             cl::sub(trainCommand()));
static cl::opt<double> Beta2("beta2", cl::desc("Adam beta2 (default 0.999)"),
                             cl::value_desc("X"), cl::init(0.999),
                             cl::sub(trainCommand()));
static cl::opt<double> Epsilon("eps", cl::desc("Adam epsilon (default 1e-8)"),
                               cl::value_desc("X"), cl::init(1e-8),
                               cl::sub(trainCommand()));
static cl::opt<std::string>
    Loss("loss",
         cl::desc("The loss appended to the model: cross-entropy over the "
                  "last dim (default), cross-entropy-channels (over dim 1 of "
                  "[N,C,...]), mse, or model (the model computes its own)"),
         cl::value_desc("cross-entropy|cross-entropy-channels|mse|model"),
         cl::init("cross-entropy"), cl::sub(trainCommand()));
static cl::opt<int> TrainThreads("threads",
                                 cl::desc("CPU threads (0: all cores)"),
                                 cl::value_desc("N"), cl::init(0),
                                 cl::sub(trainCommand()));
static cl::opt<bool>
    TimeSteps("time",
              cl::desc("Also print each step's wall time: `time <seconds>`"),
              cl::sub(trainCommand()));

static llvm::Expected<rt::OptimizerConfig> optimizerConfig() {
  rt::OptimizerConfig C;
  if (Optimizer == "sgd")
    C.Kind = rt::OptimizerKind::Sgd;
  else if (Optimizer == "adam")
    C.Kind = rt::OptimizerKind::Adam;
  else if (Optimizer == "adamw")
    C.Kind = rt::OptimizerKind::AdamW;
  else
    return usageError(llvm::formatv("--optimizer {0}: expected sgd, adam or "
                                    "adamw",
                                    Optimizer.getValue()));
  if (!(Lr > 0))
    return usageError("--lr must be positive");
  constexpr double Infinity = std::numeric_limits<double>::infinity();
  if (llvm::Error E = checkSetting(Lr, 0, Infinity))
    return E;
  if (llvm::Error E = checkSetting(Momentum, 0, Infinity))
    return E;
  if (llvm::Error E = checkSetting(Dampening, 0, 1))
    return E;
  if (llvm::Error E = checkSetting(WeightDecay, 0, Infinity))
    return E;
  if (llvm::Error E = checkSetting(Beta1, 0, 1, /*HighOpen=*/true))
    return E;
  if (llvm::Error E = checkSetting(Beta2, 0, 1, /*HighOpen=*/true))
    return E;
  if (llvm::Error E = checkSetting(Epsilon, 0, Infinity))
    return E;
  if (llvm::Error E = checkOptimizerFamily(
          Optimizer, C.Kind == rt::OptimizerKind::Sgd,
          {&Momentum, &Dampening, &Nesterov}, {&Beta1, &Beta2, &Epsilon}))
    return E;
  C.LearningRate = Lr;
  C.Momentum = Momentum;
  C.Dampening = Dampening;
  C.Nesterov = Nesterov;
  // PyTorch's defaults: AdamW decays by 0.01, the others not at all.
  C.WeightDecay = WeightDecay >= 0                     ? WeightDecay.getValue()
                  : C.Kind == rt::OptimizerKind::AdamW ? 0.01
                                                       : 0.0;
  C.Beta1 = Beta1;
  C.Beta2 = Beta2;
  C.Epsilon = Epsilon;
  if (C.Nesterov && (C.Momentum <= 0 || C.Dampening != 0))
    return usageError("--nesterov needs --momentum > 0 and no dampening");
  return C;
}

llvm::Error runTrain() {
  if (llvm::Error E = checkThreads(TrainThreads))
    return E;
  auto Options = importOptions();
  if (!Options)
    return Options.takeError();
  auto Config = optimizerConfig();
  if (!Config)
    return Config.takeError();
  std::optional<ir::LossKind> Kind = ir::lossKindNamed(Loss);
  if (!Kind)
    return usageError(llvm::formatv("--loss {0}: expected {1}", Loss.getValue(),
                                    ir::lossKindNames()));
  if (Steps < 1)
    return usageError("--steps must be at least 1");
  auto Imported = onnx_import::importModel(Model, *Options);
  if (!Imported)
    return Imported.takeError();
  auto Training = ir::deriveTraining(std::move(Imported->Graph), *Kind);
  if (!Training)
    return Training.takeError();
  if (llvm::Error E = codegen::checkKernelTypes(*Training))
    return E;
  const ir::Graph &G = Training->G;

  auto Backend = rt::createCpuBackend(TrainThreads);
  auto Trainer = executor::Trainer::create(*Training, *Backend, *Config);
  if (!Trainer)
    return Trainer.takeError();
  // Model inputs first, in order, then the labels.
  std::vector<ir::TensorId> ModelInputs;
  for (ir::TensorId In : G.inputs())
    if (In != Training->Labels)
      ModelInputs.push_back(In);
  if (InputFiles.size() != ModelInputs.size())
    return usageError(llvm::formatv("the model has {0} inputs; give each with "
                                    "--inputs FILE.pb ({1} given)",
                                    ModelInputs.size(), InputFiles.size()));
  for (size_t I = 0; I < ModelInputs.size(); ++I) {
    auto Bytes = readTensorBytes(InputFiles[I], G.tensor(ModelInputs[I]).Type);
    if (!Bytes)
      return usageError("--inputs: " + llvm::toString(Bytes.takeError()));
    if (auto E = (*Trainer)->executor().setInput(ModelInputs[I], *Bytes))
      return usageError(llvm::formatv("--inputs {0}: {1}", InputFiles[I],
                                      llvm::toString(std::move(E))));
  }
  if (Training->Labels != ir::NoTensor) {
    if (LabelFile.empty())
      return usageError(
          llvm::formatv("--loss {0} needs --labels FILE.pb", Loss.getValue()));
    auto Bytes = readTensorBytes(LabelFile, G.tensor(Training->Labels).Type);
    if (!Bytes)
      return usageError("--labels: " + llvm::toString(Bytes.takeError()));
    if (auto E = (*Trainer)->executor().setInput(Training->Labels, *Bytes))
      return usageError(llvm::formatv("--labels {0}: {1}", LabelFile.getValue(),
                                      llvm::toString(std::move(E))));
  }
  for (int I = 0; I < Steps; ++I) {
    auto Start = std::chrono::steady_clock::now();
    auto Value = (*Trainer)->step();
    std::chrono::duration<double> Elapsed =
        std::chrono::steady_clock::now() - Start;
    if (!Value)
      return Value.takeError();
    char Text[64];
    std::snprintf(Text, sizeof Text, "%.9g", *Value);
    llvm::outs() << "step " << I << " loss " << Text;
    if (TimeSteps) {
      std::snprintf(Text, sizeof Text, "%.6f", Elapsed.count());
      llvm::outs() << " time " << Text;
    }
    llvm::outs() << "\n";
    llvm::outs().flush();
  }
  return llvm::Error::success();
}

} // namespace onnx2soap::cli
