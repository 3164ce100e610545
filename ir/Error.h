//===- ir/Error.h - An error for the user, in one line ---------*- C++ -*-===//
//
// The errors that user input causes (a model, a cluster file, a strategy
// file, a project directory) are llvm::Errors holding one line that names
// what and where; the CLI prints it and exits with status 2. Every library
// links this one, so the helper that makes them lives here.
//
//===----------------------------------------------------------------------===//
#ifndef ONNX2SOAP_IR_ERROR_H
#define ONNX2SOAP_IR_ERROR_H

#include "llvm/ADT/Twine.h"
#include "llvm/Support/Error.h"

namespace onnx2soap {

/// An error holding Message (a string, a Twine or a formatv object).
inline llvm::Error fail(const llvm::Twine &Message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), Message);
}

} // namespace onnx2soap

#endif
