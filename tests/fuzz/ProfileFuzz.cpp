//===- tests/fuzz/ProfileFuzz.cpp - libFuzzer target over profile files ---===//
//
// Feeds arbitrary bytes to the reader of measured op times (`calibrate`'s
// output, `--profile FILE`): it must return a profile or an Error, never
// crash, hang or trip a sanitizer. A profile it accepts times a small CNN's
// data parallelism on one and on two CPU ranks, over the analytic model:
// the times must be numbers. The seed corpus (tests/fuzz/profile-corpus)
// holds what `calibrate` measured for that CNN here.
//
//===----------------------------------------------------------------------===//
#include "PlannerFuzzModel.h"
#include "simulator/CostModel.h"
#include "simulator/Machine.h"
#include "simulator/ProfileCostModel.h"
#include "simulator/Simulator.h"
#include "soap_search/Builtins.h"

using namespace onnx2soap;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *Data, size_t Size) {
  const ir::TrainingGraph &T = fuzz::tinyCnn();
  auto P = simulator::Profile::fromJson(
      llvm::StringRef(reinterpret_cast<const char *>(Data), Size), "fuzz");
  if (!P) {
    llvm::consumeError(P.takeError());
    return 0;
  }
  simulator::AnalyticCostModel Analytic;
  simulator::ProfileCostModel Cost(Analytic);
  if (llvm::Error E = Cost.add(std::move(*P), "fuzz")) {
    llvm::consumeError(std::move(E));
    return 0;
  }
  for (const char *Cluster : {"cpu:1", "cpu:2"}) {
    auto M = simulator::Machine::preset(Cluster);
    if (!M) {
      llvm::errs() << llvm::toString(M.takeError()) << "\n";
      std::abort();
    }
    simulator::Simulator Sim(T, *M, Cost);
    fuzz::checkTime(Sim.simulate(soap_search::dataParallel(T.G, *M)),
                    "data parallelism");
  }
  return 0;
}
