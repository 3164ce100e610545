//===- runtime_lib/LibraryMemory.h - Memory of the libraries --*- C++ -*-===//
//
// Device memory the CUDA backend gives its libraries for the whole run, in
// one place so that the planner counts what the backend allocates (plain
// C++; no CUDA headers).
//
//===----------------------------------------------------------------------===//
#ifndef ONNX2SOAP_RUNTIME_LIBRARYMEMORY_H
#define ONNX2SOAP_RUNTIME_LIBRARYMEMORY_H

#include <cstddef>

namespace onnx2soap::rt {

/// The workspace the CUDA backend gives its cuBLAS handle
/// (cublasSetWorkspace) on a GPU of compute capability Major.x: the sizes
/// NVIDIA's cuBLAS reference recommends, 32 MiB from Hopper (9.x) on and
/// 4 MiB before it.
constexpr size_t blasWorkspaceBytes(int ComputeMajor) {
  return (ComputeMajor >= 9 ? size_t(32) : size_t(4)) << 20;
}

} // namespace onnx2soap::rt

#endif
