//===- runtime_lib/cuda/CudaBackend.h - Creating the CUDA backend -*- C++
//-*-===//
//
// Host-side entry points of the CUDA backend (plain C++; no CUDA headers).
//
//===----------------------------------------------------------------------===//
#ifndef ONNX2SOAP_RUNTIME_CUDA_CUDABACKEND_H
#define ONNX2SOAP_RUNTIME_CUDA_CUDABACKEND_H

#include "../Backend.h"
#include <memory>
#include <string>

namespace onnx2soap::rt {

/// Empty when a CUDA device can be used, else why not (no driver, no
/// device), for a clean message instead of a failure deep inside a call.
std::string cudaAvailability();

/// The CUDA backend on Device; throws RuntimeError when there is none.
std::unique_ptr<Backend> createCudaBackend(int Device = 0);

} // namespace onnx2soap::rt

#endif
