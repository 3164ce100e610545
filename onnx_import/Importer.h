//===- onnx_import/Importer.h - ONNX model -> IR graph ---------*- C++ -*-===//
//
// The importer's entry point: reads a model (without copying its weights),
// checks it as a whole, binds symbolic dims, folds shape computations and
// maps every node onto IR ops through the op table.
//
//===----------------------------------------------------------------------===//
#ifndef ONNX2SOAP_ONNX_IMPORT_IMPORTER_H
#define ONNX2SOAP_ONNX_IMPORT_IMPORTER_H

#include "ir/Graph.h"
#include "ir/Roles.h"
#include "onnx_import/ModelReader.h"
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace onnx2soap::onnx_import {

struct ImportOptions {
  /// Size of the batch dim (--batch): binds the dim PyTorch names for the
  /// batch ("batch", "batch_size", ...) or, when the inputs have exactly one
  /// symbolic leading dim, that one.
  std::optional<int64_t> Batch;
  /// Sizes of named symbolic dims (--dim NAME=V).
  std::vector<std::pair<std::string, int64_t>> Dims;
  /// --trainable / --frozen.
  ir::RoleOverrides Roles;
  /// Replace LSTM / GRU layers by per-step cells (--unroll-rnn).
  bool UnrollRnn = false;
  /// Recognize decomposed LayerNorm and GELU.
  bool FusePatterns = true;
  /// Values for graph inputs, by name: such inputs become constants (the
  /// ONNX backend tests feed shapes and axes this way).
  std::map<std::string, onnx::TensorProto> InputValues;
  /// Values for graph inputs, by name, used only where the importer needs a
  /// value (a Reshape's shape fed as an input); the inputs stay inputs.
  std::map<std::string, onnx::TensorProto> InputHints;
};

struct ImportedModel {
  ir::Graph Graph;
  int64_t IrVersion = 0;
  int64_t Opset = 0;
  std::string Producer;
  /// Bytes of the .onnx file.
  uint64_t FileSize = 0;
  /// Symbolic dims and the sizes they were bound to, sorted by name.
  std::vector<std::pair<std::string, int64_t>> BoundDims;
  /// How many LayerNorm / GELU chains were recognized.
  unsigned FusedPatterns = 0;
};

/// Imports the model at Path; external data is looked up relative to its
/// folder.
llvm::Expected<ImportedModel> importModel(llvm::StringRef Path,
                                          const ImportOptions &Options);
/// Imports an already read model whose external data lives in ModelDir.
llvm::Expected<ImportedModel> importModel(ModelFile File,
                                          llvm::StringRef ModelDir,
                                          const ImportOptions &Options);

} // namespace onnx2soap::onnx_import

#endif
