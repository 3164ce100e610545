//===- cli/Ops.cpp - `onnx2soap ops` --------------------------------------===//
//
// Prints the importer's operator table; `--markdown` is how
// docs/onnx-support.md is generated (with the kernels' element types).
//
//===----------------------------------------------------------------------===//
#include "cli/Subcommands.h"
#include "onnx_import/OpTable.h"
#include "runtime_lib/KernelTypes.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

namespace onnx2soap::cli {

namespace cl = llvm::cl;

cl::SubCommand &opsCommand() {
  static cl::SubCommand Command("ops", "List the supported ONNX operators");
  return Command;
}

static cl::opt<bool> Markdown("markdown",
                              cl::desc("Print docs/onnx-support.md"),
                              cl::sub(opsCommand()));

llvm::Error runOps() {
  if (Markdown) {
    llvm::outs() << onnx_import::onnxSupportMarkdown()
                 << rt::kernelTypesMarkdown();
    return llvm::Error::success();
  }
  for (const onnx_import::OnnxOp &Op : onnx_import::onnxOpTable())
    llvm::outs() << llvm::formatv("{0,-26} opsets {1}-{2}  -> {3}\n", Op.OpType,
                                  Op.FirstOpset, Op.LastOpset,
                                  *Op.Becomes ? Op.Becomes : "(folded)");
  return llvm::Error::success();
}

} // namespace onnx2soap::cli
