//===- cli/Subcommands.h - The onnx2soap subcommands -----------*- C++ -*-===//
//
// Each subcommand is a cl::SubCommand with its options, defined in its own
// file, plus a run function. main() dispatches on the chosen subcommand.
//
//===----------------------------------------------------------------------===//
#ifndef ONNX2SOAP_CLI_SUBCOMMANDS_H
#define ONNX2SOAP_CLI_SUBCOMMANDS_H

#include "onnx_import/Importer.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Error.h"

namespace onnx2soap::cli {

/// Constructed on first use, so options in any file can name them during
/// static initialization.
llvm::cl::SubCommand &clustersCommand();
llvm::cl::SubCommand &inspectCommand();
llvm::cl::SubCommand &opsCommand();
llvm::cl::SubCommand &runCommand();
llvm::cl::SubCommand &trainCommand();

llvm::Error runClusters();
llvm::Error runInspect();
llvm::Error runOps();
/// The exit code: 0 when every output is within tolerance.
llvm::Expected<int> runRun();
llvm::Error runTrain();

/// The model-reading flags shared by the subcommands that import a model
/// (--batch, --dim, --trainable, --frozen, --unroll-rnn, --no-fuse).
llvm::Expected<onnx_import::ImportOptions> importOptions();

/// A serialized TensorProto file (cli/TensorFiles.cpp).
llvm::Expected<onnx::TensorProto> readTensor(const std::string &Path);
/// T's bytes in the IR's element layout; Path names it in errors.
llvm::Expected<std::vector<char>> tensorBytes(const onnx::TensorProto &T,
                                              const std::string &Path);
/// readTensor then tensorBytes.
llvm::Expected<std::vector<char>> readTensorBytes(const std::string &Path);

/// A user-input error: printed as one line, exit code 2.
llvm::Error usageError(const llvm::Twine &Message);

} // namespace onnx2soap::cli

#endif
