//===- tests/fuzz/StrategyFuzz.cpp - libFuzzer target over strategy files -===//
//
// Feeds arbitrary bytes to the strategy-file reader, checked against a small
// CNN (samples/tiny_cnn.onnx, batch 8) on the first 4 devices of paper-k80:
// it must return a strategy or an Error, never crash, hang or trip a
// sanitizer. A strategy it accepts is simulated (with the gradient bucket
// size the file gives) in both models of communication: the times must be
// numbers. The seed corpus (tests/fuzz/strategy-corpus) holds files the CLI
// wrote for that target.
//
//===----------------------------------------------------------------------===//
#include "PlannerFuzzModel.h"
#include "simulator/CostModel.h"
#include "simulator/Machine.h"
#include "simulator/Simulator.h"
#include "soap_search/StrategyFile.h"

using namespace onnx2soap;

namespace {
struct Target {
  simulator::Machine M;
  soap_search::StrategyTarget File;
};

const Target &target() {
  static const Target T = [] {
    auto Preset = simulator::Machine::preset("paper-k80");
    auto M = Preset ? Preset->firstDevices(4)
                    : llvm::Expected<simulator::Machine>(Preset.takeError());
    if (!M) {
      llvm::errs() << llvm::toString(M.takeError()) << "\n";
      std::abort();
    }
    soap_search::ModelSettings Settings;
    Settings.Batch = 8;
    auto File =
        soap_search::makeTarget(fuzz::TinyCnnPath, std::move(Settings), *M);
    if (!File) {
      llvm::errs() << llvm::toString(File.takeError()) << "\n";
      std::abort();
    }
    return Target{std::move(*M), std::move(*File)};
  }();
  return T;
}
} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *Data, size_t Size) {
  const ir::TrainingGraph &T = fuzz::tinyCnn();
  const Target &To = target();
  std::optional<double> Bucket;
  auto S = soap_search::parseStrategy(
      llvm::StringRef(reinterpret_cast<const char *>(Data), Size), "fuzz", T.G,
      To.File, &Bucket);
  if (!S) {
    llvm::consumeError(S.takeError());
    return 0;
  }
  simulator::AnalyticCostModel Cost;
  for (bool ProgramModel : {true, false}) {
    simulator::SimOptions Options;
    Options.setProgramModel(ProgramModel);
    if (Bucket)
      Options.GradientBucketBytes = *Bucket;
    simulator::Simulator Sim(T, To.M, Cost, Options);
    fuzz::checkTime(Sim.simulate(*S), "the strategy");
  }
  return 0;
}
