//===- runtime_lib/cpu/Resize.cpp - Resize of the spatial dims ------------===//
//
// ONNX Resize, nearest or (multi)linear, over the spatial dims of an
// [N,C,spatial...] f32 tensor; planes (N*C) are independent and run on
// several threads. The taps and the order of the sums are ResizeMap.h's,
// shared with the CUDA kernels: forward sums an output element's taps;
// backward gathers each input element's gradient from the outputs that
// read it (resizeGatherGradient), so the result does not depend on the
// thread count, and the CUDA kernel, which takes an input element per
// thread, computes the same sums.
//
//===----------------------------------------------------------------------===//
#include "../ResizeMap.h"
#include "ContractionKernels.h"
#include "Parallel.h"
#include <string>
#include <vector>

namespace onnx2soap::rt::cpu {
using dnnl_util::requireDenseF32;

namespace {

ResizeGeometry setupResize(const OpCall &Call) {
  if (Call.Inputs.size() != 1 || Call.Outputs.size() != 1)
    failOp(Call, "expects one input and one output");
  requireDenseF32(Call, Call.Inputs[0], "input X");
  requireDenseF32(Call, Call.Outputs[0], "output Y");
  ResizeGeometry G;
  if (std::string Why = describeResize(Call, G); !Why.empty())
    failOp(Call, Why);
  return G;
}

} // namespace

void forwardResize(const OpCall &Call) {
  ResizeGeometry G = setupResize(Call);
  const float *X = Call.Inputs[0].as<float>();
  float *Y = Call.Outputs[0].as<float>();
  parallelFor(G.Planes, G.OutPlane, [&](int64_t P) {
    const float *In = X + P * G.InPlane;
    float *Out = Y + P * G.OutPlane;
    for (int64_t I = 0; I < G.OutPlane; ++I) {
      float Sum = 0;
      resizeForEachTap(G, I,
                       [&](int64_t Offset, float W) { Sum += W * In[Offset]; });
      Out[I] = Sum;
    }
  });
}

void backwardResize(const OpCall &Call, const Views &OutputGrads,
                    const Views &InputGrads) {
  if (OutputGrads.empty() || !OutputGrads[0].present() || InputGrads.empty() ||
      !InputGrads[0].present())
    return;
  ResizeGeometry G = setupResize(Call);
  requireDenseF32(Call, OutputGrads[0], "output gradient");
  requireDenseF32(Call, InputGrads[0], "input gradient");
  if (OutputGrads[0].numElements() != Call.Outputs[0].numElements() ||
      InputGrads[0].numElements() != Call.Inputs[0].numElements())
    failOp(Call, "gradient shapes do not match the operands");
  const float *Grad = OutputGrads[0].as<float>();
  float *DX = InputGrads[0].as<float>();
  parallelFor(G.Planes, G.InPlane, [&](int64_t P) {
    const float *PlaneGrad = Grad + P * G.OutPlane;
    float *Plane = DX + P * G.InPlane;
    for (int64_t I = 0; I < G.InPlane; ++I)
      Plane[I] = resizeGatherGradient(G, PlaneGrad, I, Plane[I]);
  });
}

} // namespace onnx2soap::rt::cpu
