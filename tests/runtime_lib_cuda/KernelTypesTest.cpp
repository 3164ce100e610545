//===- tests/runtime_lib_cuda/KernelTypesTest.cpp - CUDA kernel types -----===//
//
// The CUDA backend's kernels take exactly the element types of
// runtime_lib/KernelTypes.h (KernelTypesCheck.h), where a GPU is present;
// the CPU backend's are checked in tests/runtime_lib/KernelTypesTest.cpp.
//
//===----------------------------------------------------------------------===//
#include "KernelTypesCheck.h"
#include "runtime_lib/cuda/CudaBackend.h"

using namespace onnx2soap::rt;
using namespace onnx2soap::rt::test;

namespace {

TEST(KernelTypes, CudaKernelsTakeExactlyTheTablesTypes) {
  std::string Why = cudaAvailability();
  if (!Why.empty())
    GTEST_SKIP() << Why;
  auto Gpu = createCudaBackend(0);
  kerneltypes::expectTableTypes(*Gpu);
}

} // namespace
