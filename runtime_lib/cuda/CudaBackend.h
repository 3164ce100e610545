//===- runtime_lib/cuda/CudaBackend.h - The CUDA backend --------*- C++ -*-===//
//
// Host-side entry points of the CUDA backend (plain C++; no CUDA headers).
//
//===----------------------------------------------------------------------===//
#ifndef ONNX2SOAP_RUNTIME_CUDA_CUDABACKEND_H
#define ONNX2SOAP_RUNTIME_CUDA_CUDABACKEND_H

#include "../Backend.h"
#include <cstdint>
#include <memory>
#include <string>

namespace onnx2soap::rt {

/// Empty when a CUDA device can be used, else why not (no driver, no
/// device), for a clean message instead of a failure deep inside a call.
std::string cudaAvailability();

/// The CUDA backend on Device; throws RuntimeError when there is none.
/// Convolutions choose cuDNN algorithms whose workspace is at most
/// ConvWorkspaceLimit bytes (a generated program passes its plan's).
std::unique_ptr<Backend>
createCudaBackend(int Device = 0, size_t ConvWorkspaceLimit = SIZE_MAX);

} // namespace onnx2soap::rt

#endif
