//===- tests/fuzz/PlannerFuzzModel.h - A model for the planner fuzzers ----===//
//
// The training graph of samples/tiny_cnn.onnx (batch 8), read once: the
// planner's fuzzers simulate what they parse on it.
//
//===----------------------------------------------------------------------===//
#ifndef ONNX2SOAP_TESTS_FUZZ_PLANNERFUZZMODEL_H
#define ONNX2SOAP_TESTS_FUZZ_PLANNERFUZZMODEL_H

#include "ir/Training.h"
#include "onnx_import/Importer.h"
#include "llvm/Support/raw_ostream.h"
#include <cmath>
#include <cstdlib>

namespace onnx2soap::fuzz {

inline const char *TinyCnnPath = ONNX2SOAP_SOURCE_DIR "/samples/tiny_cnn.onnx";

inline const ir::TrainingGraph &tinyCnn() {
  static const ir::TrainingGraph T = [] {
    onnx_import::ImportOptions Options;
    Options.Batch = 8;
    auto Model = onnx_import::importModel(TinyCnnPath, Options);
    if (!Model) {
      llvm::errs() << llvm::toString(Model.takeError()) << "\n";
      std::abort();
    }
    auto Training =
        ir::deriveTraining(std::move(Model->Graph), ir::LossKind::CrossEntropy);
    if (!Training) {
      llvm::errs() << llvm::toString(Training.takeError()) << "\n";
      std::abort();
    }
    return std::move(*Training);
  }();
  return T;
}

/// A simulated time a valid input led to must be a number of seconds.
inline void checkTime(double Seconds, const char *What) {
  if (!std::isfinite(Seconds) || Seconds < 0) {
    llvm::errs() << What << ": simulated time " << Seconds << "\n";
    std::abort();
  }
}

} // namespace onnx2soap::fuzz

#endif
