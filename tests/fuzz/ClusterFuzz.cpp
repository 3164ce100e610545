//===- tests/fuzz/ClusterFuzz.cpp - libFuzzer target over cluster files ---===//
//
// Feeds arbitrary bytes to the cluster-file parser: it must return a machine
// or an Error, never crash, hang or trip a sanitizer. A machine it accepts
// (up to 64 devices, to bound the work per input) is routed, cut to its
// first devices, and simulates the built-in strategies of a small CNN: the
// times must be numbers. The seed corpus (tests/fuzz/cluster-corpus) holds
// the presets and the documented example.
//
//===----------------------------------------------------------------------===//
#include "PlannerFuzzModel.h"
#include "simulator/CostModel.h"
#include "simulator/Machine.h"
#include "simulator/Simulator.h"
#include "soap_search/Builtins.h"

using namespace onnx2soap;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *Data, size_t Size) {
  const ir::TrainingGraph &T = fuzz::tinyCnn();
  auto M = simulator::Machine::fromJson(
      llvm::StringRef(reinterpret_cast<const char *>(Data), Size), "fuzz");
  if (!M) {
    llvm::consumeError(M.takeError());
    return 0;
  }
  if (M->numDevices() > 64)
    return 0;
  simulator::AnalyticCostModel Cost;
  for (unsigned Devices : {M->numDevices(), (M->numDevices() + 1) / 2}) {
    auto Some = M->firstDevices(Devices);
    if (!Some) {
      llvm::consumeError(Some.takeError());
      continue;
    }
    for (bool ProgramModel : {true, false}) {
      simulator::SimOptions Options;
      Options.setProgramModel(ProgramModel);
      simulator::Simulator Sim(T, *Some, Cost, Options);
      fuzz::checkTime(Sim.simulate(soap_search::dataParallel(T.G, *Some)),
                      "data parallelism");
      fuzz::checkTime(Sim.simulate(soap_search::expert(T.G, *Some)),
                      "the expert strategy");
    }
  }
  return 0;
}
