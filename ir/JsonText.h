//===- ir/JsonText.h - JSON as people read it ------------------*- C++ -*-===//
//
// LLVM's JSON writer prints every non-integer number with 17 significant
// digits, so a figure read as 21.2 comes back as 21.199999999999999. The
// files and reports people read and edit (clusters --show, --json reports,
// profiles, manifests) are printed here instead: the same layout (keys
// sorted, Indent spaces per level), each number in the fewest digits that
// read back as the same double. Values are unchanged; only their spelling.
// Text that is hashed (a strategy file's cluster) keeps LLVM's spelling.
//
//===----------------------------------------------------------------------===//
#ifndef ONNX2SOAP_IR_JSONTEXT_H
#define ONNX2SOAP_IR_JSONTEXT_H

#include "llvm/Support/JSON.h"
#include <string>

namespace onnx2soap::ir {

/// The shortest "%.*g" spelling of Value that reads back as Value (Value
/// finite).
std::string shortestNumber(double Value);

/// V as JSON text, Indent spaces per level (0: on one line), numbers in
/// their shortest spelling, NaN and infinities as null.
std::string jsonText(const llvm::json::Value &V, unsigned Indent = 2);

} // namespace onnx2soap::ir

#endif
