//===- runtime_lib/cuda/Resize.cu - Resize of the spatial dims ------------===//
//
// The CUDA twin of runtime_lib/cpu/Resize.cpp (same checks, same messages,
// the taps and sums of ResizeMap.h). Forward is one thread per output
// element, its taps computed in place. Backward is one thread per input
// element, gathering its gradient from the outputs that read it in output
// order (resizeGatherGradient), as the CPU does: no atomics, deterministic,
// and parallel over every input element.
//
//===----------------------------------------------------------------------===//
#include "../ResizeMap.h"
#include "ContractionCommon.cuh"
#include <string>
#include <vector>

namespace onnx2soap::rt::cuda {
using namespace contraction;

namespace {

ResizeGeometry setupResize(const OpCall &Call) {
  if (Call.Inputs.size() != 1 || Call.Outputs.size() != 1)
    failOp(Call, "expects one input and one output");
  requireDenseF32(Call, Call.Inputs[0], "input X");
  requireDenseF32(Call, Call.Outputs[0], "output Y");
  ResizeGeometry P;
  if (std::string Why = describeResize(Call, P); !Why.empty())
    failOp(Call, Why);
  return P;
}

__global__ void resizeForwardKernel(ResizeGeometry P, const float *X,
                                    float *Y) {
  int64_t Count = P.Planes * P.OutPlane;
  for (int64_t I = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; I < Count;
       I += int64_t(gridDim.x) * blockDim.x) {
    const float *In = X + (I / P.OutPlane) * P.InPlane;
    float Sum = 0;
    resizeForEachTap(P, I % P.OutPlane,
                     [&](int64_t Offset, float W) { Sum += W * In[Offset]; });
    Y[I] = Sum;
  }
}

/// One thread per input element, gathering its gradient from the outputs
/// that read it.
__global__ void resizeBackwardKernel(ResizeGeometry P, const float *G,
                                     float *DX) {
  int64_t Count = P.Planes * P.InPlane;
  for (int64_t I = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; I < Count;
       I += int64_t(gridDim.x) * blockDim.x) {
    int64_t Plane = I / P.InPlane;
    DX[I] =
        resizeGatherGradient(P, G + Plane * P.OutPlane, I % P.InPlane, DX[I]);
  }
}

} // namespace

void forwardResize(Context &C, const OpCall &Call) {
  ResizeGeometry P = setupResize(Call);
  int64_t Count = P.Planes * P.OutPlane;
  if (Count == 0)
    return;
  resizeForwardKernel<<<gridFor(Count), 256, 0, C.Stream>>>(
      P, Call.Inputs[0].as<float>(), Call.Outputs[0].as<float>());
  checkCuda(Call, cudaGetLastError(), "resize kernel launch");
}

void backwardResize(Context &C, const OpCall &Call, const Views &OutputGrads,
                    const Views &InputGrads) {
  if (OutputGrads.empty() || !OutputGrads[0].present() || InputGrads.empty() ||
      !InputGrads[0].present())
    return;
  ResizeGeometry P = setupResize(Call);
  requireDenseF32(Call, OutputGrads[0], "output gradient");
  requireDenseF32(Call, InputGrads[0], "input gradient");
  if (OutputGrads[0].numElements() != Call.Outputs[0].numElements() ||
      InputGrads[0].numElements() != Call.Inputs[0].numElements())
    failOp(Call, "gradient shapes do not match the operands");
  int64_t Count = P.Planes * P.InPlane;
  if (Count == 0)
    return;
  resizeBackwardKernel<<<gridFor(Count), 256, 0, C.Stream>>>(
      P, OutputGrads[0].as<float>(), InputGrads[0].as<float>());
  checkCuda(Call, cudaGetLastError(), "resize backward kernel launch");
}

} // namespace onnx2soap::rt::cuda
