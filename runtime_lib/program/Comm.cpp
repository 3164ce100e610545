//===- runtime_lib/program/Comm.cpp - What every Comm shares --------------===//
//
// The interface's out-of-line anchor.
//
//===----------------------------------------------------------------------===//
#include "Comm.h"

namespace onnx2soap::rt::program {

Comm::~Comm() = default;

} // namespace onnx2soap::rt::program
