//===- soap_search/Chain.h - One Markov chain over strategies --*- C++ -*-===//
//
// Internal to soap_search (search() in Mcmc.cpp runs the chains): one chain
// of FlexFlow's Metropolis-Hastings search (§6). Each step draws a unit (an
// op, or the ops that share weights or differ only in a trailing number)
// and a config for it, delta-simulates the change and accepts it by the
// Metropolis-Hastings rule on the simulated cost; a rejected step is
// reverted (Simulator::revert). The data-parallel chain (index 0) first
// places the heaviest units whole, splits the layers whose weights outweigh
// their activations and lets the ops around them follow, from data
// parallelism and from each alternative start. Every chain re-sizes its
// gradient buckets for its own strategy as it goes.
//
//===----------------------------------------------------------------------===//
#ifndef ONNX2SOAP_SOAP_SEARCH_CHAIN_H
#define ONNX2SOAP_SOAP_SEARCH_CHAIN_H

#include "soap_search/MessageCap.h"
#include "soap_search/SearchCommon.h"
#include <functional>

namespace onnx2soap::soap_search {

/// What one chain found.
struct ChainResult {
  Candidate Best;
  /// Objective::Frontier: the time / peak-memory pairs no other beats.
  std::vector<Candidate> Frontier;
  /// Each improvement of Best after the start.
  std::vector<Improvement> Improvements;
  /// Simulations it took.
  uint64_t Steps = 0;
};

/// Chain Index (its random numbers: chainRng(Options.Seed, Index)) from
/// Start, named StartName, under cost F. Index 0 also tries the heavy
/// units from each of Alternatives. It runs Options.Iterations steps, or
/// until Budget seconds from its own start or half of them without an
/// improvement; times it reports count from Begin. Aside, when set, runs
/// before each step (another thread's work the chain's thread helps with).
/// Cap, the search's bound on messages for Space's devices, is shared by
/// its chains.
ChainResult runChain(const ir::TrainingGraph &T, const simulator::Machine &M,
                     const simulator::CostModel &Cost,
                     simulator::SimOptions SimOpts,
                     const SearchOptions &Options, const ConfigSpace &Space,
                     const simulator::Strategy &Start,
                     llvm::StringRef StartName,
                     llvm::ArrayRef<simulator::Strategy> Alternatives,
                     CostFunction F, unsigned Index, SharedProgress &Progress,
                     Clock::time_point Begin, double Budget,
                     const MessageCap &Cap, const std::function<void()> &Aside);

} // namespace onnx2soap::soap_search

#endif
