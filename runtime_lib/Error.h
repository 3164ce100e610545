//===- runtime_lib/Error.h - Runtime failures ------------------*- C++ -*-===//
//
// A kernel or library call that fails throws RuntimeError with a message
// naming the op and the library call; the generated program's main() and
// the reference executor catch it and report it as one line.
//
//===----------------------------------------------------------------------===//
#ifndef ONNX2SOAP_RUNTIME_ERROR_H
#define ONNX2SOAP_RUNTIME_ERROR_H

#include <stdexcept>
#include <string>

namespace onnx2soap::rt {

class RuntimeError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// Throws RuntimeError("<Where>: <What>").
[[noreturn]] void fail(const std::string &Where, const std::string &What);

} // namespace onnx2soap::rt

#endif
