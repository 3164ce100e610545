//===- onnx_import/OpTable.h - The ONNX ops handled -------------*- C++ -*-===//
//
// The one table from ONNX op_type (and the model opsets it applies to) to the
// handler that converts a node and the folder that evaluates it when its
// inputs are known at import time. docs/onnx-support.md is generated from it
// (`onnx2soap ops --markdown`).
//
//===----------------------------------------------------------------------===//
#ifndef ONNX2SOAP_ONNX_IMPORT_OPTABLE_H
#define ONNX2SOAP_ONNX_IMPORT_OPTABLE_H

#include "onnx_import/NodeContext.h"
#include "llvm/ADT/ArrayRef.h"
#include <string>

namespace onnx2soap::onnx_import {

/// Default-domain opsets the importer reads.
constexpr int64_t MinOpset = 13;
constexpr int64_t MaxOpset = 21;
/// OnnxOp::MaxInputs of ops that take any number (Concat, Max, ...).
constexpr unsigned Variadic = 2147483647;

/// Converts a node into IR ops, or into constants when its inputs are known
/// at import time.
using Handler = llvm::Error (*)(NodeContext &);

struct OnnxOp {
  const char *OpType;
  int64_t FirstOpset;
  int64_t LastOpset;
  /// Inputs the op requires; the importer checks them before the handler
  /// runs, so handlers read inputs below this index without checking.
  unsigned MinInputs;
  /// The most inputs ONNX gives the op in the opsets of the row (Variadic
  /// for no limit): more are refused, not ignored.
  unsigned MaxInputs;
  Handler Convert;
  /// What it becomes in the IR, for the docs ("" when it always folds).
  const char *Becomes;
  /// Limits worth knowing, for the docs.
  const char *Notes;
};

/// Sorted by op type, then opset.
llvm::ArrayRef<OnnxOp> onnxOpTable();
/// The entry for op_type at the model's opset, or nullptr.
const OnnxOp *findOnnxOp(llvm::StringRef OpType, int64_t Opset);
/// Markdown table of the supported operators (docs/onnx-support.md).
std::string onnxSupportMarkdown();

} // namespace onnx2soap::onnx_import

#endif
