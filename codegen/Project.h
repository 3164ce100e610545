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
#include <vector>

namespace onnx2soap::codegen {

struct ProjectInputs {
  const ProgramPlan &Plan;
  const simulator::Machine &M;
  const soap_search::StrategyTarget &Target;
  /// The model file's bytes (copied for --save-onnx; the caller keeps them
  /// alive until the project is written) and the strategy file's text.
  llvm::StringRef ModelBytes;
  std::string StrategyText;
  std::string OptimizerName; ///< "SGD with momentum 0.9", "AdamW": the README
  std::string LossName;
  std::string Version; ///< onnx2soap's version
  /// Where the initial weights come from ("onnx", "random 7"): part of the
  /// plan hash, which must change when the weights do.
  std::string WeightsSource;
};

/// A file's contents: Text made here, then views of bytes that outlive the
/// project's writing (the model, the plan's weights: no copies of hundreds
/// of MB).
struct FileContents {
  std::string Text;
  std::vector<llvm::StringRef> Borrowed;
  FileContents() = default;
  FileContents(std::string T) : Text(std::move(T)) {}
  static FileContents borrow(llvm::StringRef Bytes) {
    FileContents C;
    C.Borrowed.push_back(Bytes);
    return C;
  }
  size_t size() const {
    size_t Size = Text.size();
    for (llvm::StringRef Piece : Borrowed)
      Size += Piece.size();
    return Size;
  }
  /// Calls F with each piece in order.
  template <typename Fn> void forEachPiece(Fn F) const {
    F(llvm::StringRef(Text));
    for (llvm::StringRef Piece : Borrowed)
      F(Piece);
  }
};

/// Path (relative, '/'-separated) -> contents, sorted by path.
using ProjectFiles = std::map<std::string, FileContents>;

/// Every file of the project. Fails when the cluster's devices need a CUDA
/// architecture set this generator cannot express (mixed device types). The
/// files borrow In.ModelBytes and In.Plan's weights: keep both alive until
/// the files are written.
llvm::Expected<ProjectFiles> projectFiles(const ProjectInputs &In);

/// Whether Dir may take a project: it does not exist, is empty, or holds a
/// generated project and nothing else (a build/ folder aside). compile
/// asks before its work too, so that a folder it would refuse does not
/// wait for the search.
llvm::Error checkProjectFolder(const std::string &Dir);

/// Writes Files under Dir, replacing a previous generated project there
/// (one with a manifest.json); refuses a non-empty folder that is not one.
/// Nothing is left half-written: the tree goes to a temporary sibling first.
llvm::Error writeProject(const std::string &Dir, const ProjectFiles &Files);

} // namespace onnx2soap::codegen

#endif
