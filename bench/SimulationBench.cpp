//===- bench/SimulationBench.cpp - Full vs delta simulation speed ---------===//
//
// Usage: simulation_bench MODEL.onnx BATCH CLUSTER DEVICES [--unroll-rnn]
//
// Imports the model, draws a random strategy from the search's config space
// (seed 7), then times one full simulation, a run of random single-op delta
// simulations, and full simulations of the same strategies: the per-proposal
// cost of the two algorithms on the same task graphs.
//
//===----------------------------------------------------------------------===//
#include "onnx_import/Importer.h"
#include "simulator/Simulator.h"
#include "soap_search/ConfigSpace.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"
#include <chrono>
#include <cstdlib>

using namespace onnx2soap;
using namespace onnx2soap::simulator;
using namespace onnx2soap::soap_search;
using Clock = std::chrono::steady_clock;

static double since(Clock::time_point Start) {
  return std::chrono::duration<double>(Clock::now() - Start).count();
}

int main(int argc, char **argv) {
  if (argc < 5) {
    llvm::errs() << "usage: simulation_bench MODEL BATCH CLUSTER DEVICES "
                    "[--unroll-rnn]\n";
    return 2;
  }
  onnx_import::ImportOptions Options;
  Options.Batch = std::atoll(argv[2]);
  Options.UnrollRnn = argc > 5 && llvm::StringRef(argv[5]) == "--unroll-rnn";
  auto Model = onnx_import::importModel(argv[1], Options);
  if (!Model) {
    llvm::errs() << llvm::toString(Model.takeError()) << "\n";
    return 1;
  }
  auto T =
      ir::deriveTraining(std::move(Model->Graph), ir::LossKind::CrossEntropy);
  if (!T) {
    llvm::errs() << llvm::toString(T.takeError()) << "\n";
    return 1;
  }
  auto Cluster = Machine::load(argv[3]);
  if (!Cluster) {
    llvm::errs() << llvm::toString(Cluster.takeError()) << "\n";
    return 1;
  }
  auto M = Cluster->firstDevices(std::atoi(argv[4]));
  if (!M) {
    llvm::errs() << llvm::toString(M.takeError()) << "\n";
    return 1;
  }
  AnalyticCostModel Cost;
  ConfigSpace Space(T->G, M->numDevices());
  Rng R = chainRng(7, 0);
  Strategy S;
  for (const ir::Op &O : T->G.ops())
    S.Configs.push_back(Space.random(O.Id, R));

  Simulator Sim(*T, *M, Cost);
  Clock::time_point Start = Clock::now();
  Sim.simulate(S);
  double First = since(Start);
  const unsigned Proposals = 200;
  std::vector<Strategy> Seen;
  Start = Clock::now();
  for (unsigned I = 0; I < Proposals; ++I) {
    ir::OpId Op = uniformIndex(R, T->G.numOps());
    Sim.change(Op, Space.random(Op, R));
    if (I % 10 == 0)
      Seen.push_back(Sim.strategy());
  }
  double Delta = since(Start) / Proposals;
  Simulator Full(*T, *M, Cost);
  Start = Clock::now();
  for (const Strategy &Each : Seen)
    Full.simulate(Each);
  double FullTime = since(Start) / Seen.size();
  llvm::outs() << llvm::formatv(
      "{0} ops, {1} tasks; first full simulation {2:f2} ms; full {3:f3} "
      "ms/proposal, delta {4:f3} ms/proposal ({5:f1}x)\n",
      T->G.numOps(), Sim.report().NumTasks, First * 1e3, FullTime * 1e3,
      Delta * 1e3, FullTime / Delta);
  return 0;
}
