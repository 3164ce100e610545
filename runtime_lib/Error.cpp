//===- runtime_lib/Error.cpp - Runtime failures ---------------------------===//
#include "Error.h"

namespace onnx2soap::rt {

void fail(const std::string &Where, const std::string &What) {
  throw RuntimeError(Where + ": " + What);
}

} // namespace onnx2soap::rt
