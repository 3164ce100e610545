//===- runtime_lib/cuda/Resize.cu - Resize of the spatial dims ------------===//
//
// The CUDA twin of runtime_lib/cpu/Resize.cpp (same checks, same messages,
// the taps of ResizeMap.h). Forward is one thread per output element, its
// taps computed in place. Backward is one thread per plane (N*C), adding
// each output gradient into the taps it read in output order, as the CPU
// does: no atomics, the same sums in the same order, at the cost of
// parallelism only over planes.
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

/// Calls Fn(input offset within the plane, weight) for each tap of output
/// element Index of a plane, as the CPU's forEachTap.
template <typename F>
__device__ void forEachTap(const ResizeGeometry &P, int64_t Index, F Fn) {
  int64_t I0[MaxRank], I1[MaxRank];
  float W0[MaxRank], W1[MaxRank];
  for (int D = P.Spatial - 1; D >= 0; --D) {
    int64_t O = Index % P.OutDims[D];
    Index /= P.OutDims[D];
    if (P.Linear) {
      ResizeTaps T = resizeLinear(P.Coordinates, O, P.InDims[D], P.Scales[D]);
      I0[D] = T.I0;
      I1[D] = T.I1;
      W0[D] = static_cast<float>(1 - T.Weight1);
      W1[D] = static_cast<float>(T.Weight1);
    } else {
      I0[D] = I1[D] =
          resizeNearest(P.Coordinates, P.Rounding, O, P.InDims[D], P.Scales[D]);
      W0[D] = 1;
      W1[D] = 0;
    }
  }
  int Corners = P.Linear ? 1 << P.Spatial : 1;
  for (int Corner = 0; Corner < Corners; ++Corner) {
    int64_t Offset = 0;
    float Weight = 1;
    for (int D = 0; D < P.Spatial; ++D) {
      bool Second = (Corner >> (P.Spatial - 1 - D)) & 1;
      Offset = Offset * P.InDims[D] + (Second ? I1[D] : I0[D]);
      Weight *= Second ? W1[D] : W0[D];
    }
    if (Weight != 0)
      Fn(Offset, Weight);
  }
}

__global__ void resizeForwardKernel(ResizeGeometry P, const float *X,
                                    float *Y) {
  int64_t Count = P.Planes * P.OutPlane;
  for (int64_t I = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; I < Count;
       I += int64_t(gridDim.x) * blockDim.x) {
    const float *In = X + (I / P.OutPlane) * P.InPlane;
    float Sum = 0;
    forEachTap(P, I % P.OutPlane,
               [&](int64_t Offset, float W) { Sum += W * In[Offset]; });
    Y[I] = Sum;
  }
}

__global__ void resizeBackwardKernel(ResizeGeometry P, const float *G,
                                     float *DX) {
  for (int64_t Plane = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
       Plane < P.Planes; Plane += int64_t(gridDim.x) * blockDim.x) {
    const float *Grad = G + Plane * P.OutPlane;
    float *Out = DX + Plane * P.InPlane;
    for (int64_t I = 0; I < P.OutPlane; ++I)
      forEachTap(P, I,
                 [&](int64_t Offset, float W) { Out[Offset] += W * Grad[I]; });
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
  if (P.Planes == 0)
    return;
  resizeBackwardKernel<<<gridFor(P.Planes, 64), 64, 0, C.Stream>>>(
      P, OutputGrads[0].as<float>(), InputGrads[0].as<float>());
  checkCuda(Call, cudaGetLastError(), "resize backward kernel launch");
}

} // namespace onnx2soap::rt::cuda
