//===- soap_search/SearchCommon.cpp - What search's parts share -----------===//
//
// See SearchCommon.h.
//
//===----------------------------------------------------------------------===//
#include "soap_search/SearchCommon.h"
#include <optional>

namespace onnx2soap::soap_search {
using simulator::ParallelConfig;
using simulator::Simulator;
using simulator::Strategy;

Candidate candidate(const Simulator &Sim, double Limit, std::string Source,
                    double FoundAt) {
  return {Sim.strategy(),   Sim.time(),
          Sim.peakMemory(), Sim.memoryOverflow(Limit) <= 0,
          FoundAt,          Sim.graph().options().GradientBucketBytes,
          std::move(Source)};
}

double propose(Simulator &Sim, llvm::ArrayRef<ir::OpId> Ops,
               llvm::ArrayRef<ParallelConfig> Configs, bool Full,
               double GiveUpAbove) {
  if (!Full)
    return Sim.changeUnless(Ops, Configs, GiveUpAbove);
  Strategy S = Sim.strategy();
  for (size_t I = 0; I < Ops.size(); ++I)
    S[Ops[I]] = Configs[I];
  return Sim.simulate(S, /*Revertible=*/true, GiveUpAbove);
}

std::vector<std::vector<ir::OpId>>
neighbours(const ir::Graph &G, const std::vector<bool> &WeightOnly) {
  std::vector<llvm::SmallVector<ir::OpId, 2>> Consumers = G.allConsumers();
  std::vector<std::vector<ir::OpId>> Near(G.numOps());
  for (const ir::Op &O : G.ops()) {
    if (WeightOnly[O.Id])
      continue;
    for (ir::TensorId In : O.Inputs) {
      if (In == ir::NoTensor)
        continue;
      ir::OpId P = G.tensor(In).Producer;
      if (P != ir::NoOp && !WeightOnly[P])
        Near[O.Id].push_back(P);
    }
    for (ir::TensorId Out : O.Outputs)
      for (ir::OpId C : Consumers[Out])
        Near[O.Id].push_back(C);
    llvm::sort(Near[O.Id]);
    Near[O.Id].erase(std::unique(Near[O.Id].begin(), Near[O.Id].end()),
                     Near[O.Id].end());
  }
  return Near;
}

size_t fastestOf(llvm::ArrayRef<double> Times, llvm::ArrayRef<char> Fits) {
  size_t Best = 0;
  for (size_t I = 1; I < Times.size(); ++I)
    if ((Fits[I] && !Fits[Best]) ||
        (Fits[I] == Fits[Best] && Times[I] < Times[Best] * (1 - 1e-9)))
      Best = I;
  return Best;
}

BucketChoice fastestBucket(Simulator &Sim, const Strategy &S,
                           llvm::ArrayRef<double> Candidates,
                           double MemoryLimit, bool Simulated) {
  assert(!Candidates.empty() && "no bucket size to choose from");
  BucketChoice Choice;
  // The size Sim holds S simulated with; Known: the one whose time and fit
  // are known without simulating it again.
  std::optional<double> Held, Known;
  double KnownTime = 0;
  char KnownFits = 0;
  if (Simulated) {
    Held = Known = Sim.graph().options().GradientBucketBytes;
    KnownTime = Sim.time();
    KnownFits = Sim.memoryOverflow(MemoryLimit) <= 0;
  }
  std::vector<double> Times;
  std::vector<char> Fits;
  // Once Sim holds S, each other size is a delta simulation of the
  // all-reduces and what follows them (a full one, with its graph built
  // anew, took most of the time of sizing a strategy: ResNet-101 on 4
  // K80s).
  auto SimulateWith = [&](double Bytes) {
    if (Held)
      return Sim.changeGradientBucket(Bytes);
    Sim.setGradientBucket(Bytes);
    return Sim.simulate(S);
  };
  for (double Bytes : Candidates) {
    if (Known && Bytes == *Known) {
      Times.push_back(KnownTime);
      Fits.push_back(KnownFits);
      Known.reset();
      continue;
    }
    Times.push_back(SimulateWith(Bytes));
    Fits.push_back(Sim.memoryOverflow(MemoryLimit) <= 0);
    ++Choice.Simulations;
    Held = Bytes;
  }
  Choice.Bytes = Candidates[fastestOf(Times, Fits)];
  if (Choice.Bytes != *Held) {
    SimulateWith(Choice.Bytes);
    ++Choice.Simulations;
  }
  return Choice;
}

} // namespace onnx2soap::soap_search
