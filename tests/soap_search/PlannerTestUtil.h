//===- tests/soap_search/PlannerTestUtil.h - Test models --------*- C++ -*-===//
//
// The training graph of a model file of the repository and a preset cluster
// cut to its first devices, for the planner's tests.
//
//===----------------------------------------------------------------------===//
#ifndef ONNX2SOAP_TESTS_SOAP_SEARCH_PLANNERTESTUTIL_H
#define ONNX2SOAP_TESTS_SOAP_SEARCH_PLANNERTESTUTIL_H

#include "ir/Training.h"
#include "onnx_import/Importer.h"
#include "simulator/Machine.h"
#include "soap_search/Mcmc.h"
#include "gtest/gtest.h"
#include <string>

namespace onnx2soap::test {

/// Path is relative to the repository, e.g. "samples/alexnet.onnx".
inline ir::TrainingGraph training(const std::string &Path, int64_t Batch,
                                  bool Unroll = false) {
  onnx_import::ImportOptions Options;
  Options.Batch = Batch;
  Options.UnrollRnn = Unroll;
  auto Model =
      onnx_import::importModel(ONNX2SOAP_SOURCE_DIR "/" + Path, Options);
  if (!Model) {
    ADD_FAILURE() << Path << ": " << llvm::toString(Model.takeError());
    return {};
  }
  auto T =
      ir::deriveTraining(std::move(Model->Graph), ir::LossKind::CrossEntropy);
  if (!T) {
    ADD_FAILURE() << Path << ": " << llvm::toString(T.takeError());
    return {};
  }
  return std::move(*T);
}

/// The graph of samples/<Name>.onnx.
inline ir::TrainingGraph sample(const std::string &Name, int64_t Batch,
                                bool Unroll = false) {
  return training("samples/" + Name + ".onnx", Batch, Unroll);
}

inline simulator::Machine machine(const std::string &Preset, unsigned Devices) {
  auto M = simulator::Machine::preset(Preset);
  EXPECT_TRUE(static_cast<bool>(M)) << llvm::toString(M.takeError());
  auto Some = M->firstDevices(Devices);
  EXPECT_TRUE(static_cast<bool>(Some)) << llvm::toString(Some.takeError());
  return std::move(*Some);
}

/// A fixed amount of search: 150 steps of each of 4 chains.
inline soap_search::SearchOptions fixedWork(uint64_t Seed) {
  soap_search::SearchOptions O;
  O.Iterations = 150;
  O.Seed = Seed;
  O.Chains = 4;
  return O;
}

} // namespace onnx2soap::test

#endif
