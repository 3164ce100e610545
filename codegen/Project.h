//===- codegen/Project.h - Writing a generated project ----------*- C++ -*-===//
//
// The files of one generated training project (docs/generated-program.md):
// the plan as C++ tables, main.cpp and CMakeLists.txt from templates/, the
// runtime_lib sources, one weight shard per rank, the model, the strategy,
// a README and a manifest with the SHA-256 of everything. The files are
// computed in memory (ordered, no timestamps, no absolute paths, so the
// same inputs give a byte-identical tree), then written to a temporary
// folder renamed into place.
//
//===----------------------------------------------------------------------===//
#ifndef ONNX2SOAP_CODEGEN_PROJECT_H
#define ONNX2SOAP_CODEGEN_PROJECT_H

#include "codegen/ProgramPlan.h"
#include "soap_search/StrategyFile.h"
#include <map>
#include <string>

namespace onnx2soap::codegen {

struct ProjectInputs {
  const ProgramPlan &Plan;
  const simulator::Machine &M;
  const soap_search::StrategyTarget &Target;
  /// The model file's bytes (copied for --save-onnx) and the strategy
  /// file's text.
  std::string ModelBytes;
  std::string StrategyText;
  std::string OptimizerName; ///< "sgd", "adam", ... for the README
  std::string LossName;
  std::string Version; ///< onnx2soap's version
  /// Where the initial weights come from ("onnx", "random 7"): part of the
  /// plan hash, which must change when the weights do.
  std::string WeightsSource;
};

/// Path (relative, '/'-separated) -> contents, sorted by path.
using ProjectFiles = std::map<std::string, std::string>;

/// Every file of the project. Fails when the cluster's devices need a CUDA
/// architecture set this generator cannot express (mixed device types).
llvm::Expected<ProjectFiles> projectFiles(const ProjectInputs &In);

/// Writes Files under Dir, replacing a previous generated project there
/// (one with a manifest.json); refuses a non-empty folder that is not one.
/// Nothing is left half-written: the tree goes to a temporary sibling first.
llvm::Error writeProject(const std::string &Dir, const ProjectFiles &Files);

} // namespace onnx2soap::codegen

#endif
