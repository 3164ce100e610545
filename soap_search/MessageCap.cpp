//===- soap_search/MessageCap.cpp - A bound on messages per tensor --------===//
//
// Counting a tensor's messages takes a region overlap per pair of
// partitions, so a pair of configs with no more pairs of partitions than the
// bound passes without counting, and counting stops past the bound: only
// configs of many partitions on both sides are counted, and each costs at
// most a few consumer partitions past the bound.
//
//===----------------------------------------------------------------------===//
#include "soap_search/MessageCap.h"
#include "simulator/TaskGraph.h"
#include <algorithm>

namespace onnx2soap::soap_search {

using simulator::ParallelConfig;
using simulator::Strategy;

uint64_t maxMessagesPerTensor(unsigned NumDevices) {
  return std::max<uint64_t>(4096, 16 * uint64_t(NumDevices));
}

MessageCap::MessageCap(const ir::Graph &G, unsigned NumDevices)
    : G(G), Max(maxMessagesPerTensor(NumDevices)),
      Reachable(uint64_t(NumDevices) * NumDevices > Max) {
  if (Reachable)
    Consumers = G.allConsumers();
}

bool MessageCap::tooMany(ir::OpId Consumer, unsigned Slot,
                         const ParallelConfig &PC,
                         const ParallelConfig &CC) const {
  if (uint64_t(PC.numPartitions()) * CC.numPartitions() <= Max)
    return false;
  return simulator::inputMessages(G, Consumer, Slot, PC, CC, Max) > Max;
}

bool MessageCap::inputsExceed(
    ir::OpId Op, const ParallelConfig &Own,
    llvm::function_ref<const ParallelConfig &(ir::OpId)> ConfigOf) const {
  const ir::Op &O = G.op(Op);
  for (unsigned Slot = 0; Slot < O.Inputs.size(); ++Slot) {
    ir::TensorId In = O.Inputs[Slot];
    if (In != ir::NoTensor && G.tensor(In).Producer != ir::NoOp &&
        tooMany(Op, Slot, ConfigOf(G.tensor(In).Producer), Own))
      return true;
  }
  return false;
}

bool MessageCap::exceeded(const Strategy &S, llvm::ArrayRef<ir::OpId> Unit,
                          const ParallelConfig &C) const {
  if (!Reachable)
    return false;
  auto InUnit = [&](ir::OpId Op) { return llvm::is_contained(Unit, Op); };
  auto ConfigOf = [&](ir::OpId Op) -> const ParallelConfig & {
    return InUnit(Op) ? C : S[Op];
  };
  for (ir::OpId Op : Unit) {
    if (inputsExceed(Op, C, ConfigOf))
      return true;
    // Consumers in the unit were judged by their inputs above.
    for (ir::TensorId Out : G.op(Op).Outputs)
      for (ir::OpId Reader : Consumers[Out]) {
        if (InUnit(Reader))
          continue;
        const ir::Op &R = G.op(Reader);
        for (unsigned Slot = 0; Slot < R.Inputs.size(); ++Slot)
          if (R.Inputs[Slot] == Out && tooMany(Reader, Slot, C, S[Reader]))
            return true;
      }
  }
  return false;
}

Strategy MessageCap::within(Strategy S, const Strategy &Fallback) const {
  if (!Reachable)
    return S;
  auto ConfigOf = [&](ir::OpId Op) -> const ParallelConfig & { return S[Op]; };
  for (const ir::Op &O : G.ops())
    if (inputsExceed(O.Id, S[O.Id], ConfigOf))
      S.Configs[O.Id] = Fallback[O.Id];
  return S;
}

Strategy MessageCap::randomWithin(const ConfigSpace &Space, Strategy Fallback,
                                  Rng &R) const {
  Strategy S = std::move(Fallback);
  for (const ir::Op &O : G.ops()) {
    ParallelConfig Drawn = Space.random(O.Id, R);
    bool Over = exceeded(S, O.Id, Drawn);
    for (int Again = 0; Over && Again < 8; ++Again) {
      Drawn = Space.random(O.Id, R);
      Over = exceeded(S, O.Id, Drawn);
    }
    if (!Over)
      S.Configs[O.Id] = Drawn;
  }
  return S;
}

} // namespace onnx2soap::soap_search
