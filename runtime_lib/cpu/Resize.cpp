//===- runtime_lib/cpu/Resize.cpp - Resize of the spatial dims ------------===//
//
// ONNX Resize, nearest or (multi)linear, over the spatial dims of an
// [N,C,spatial...] f32 tensor; planes (N*C) are independent and run on
// several threads. Each spatial dim's taps (ResizeMap.h) are tabulated once
// per call. Forward sums an output element's taps; backward adds each
// output gradient into the taps it read, one plane per thread in output
// order, so the result does not depend on the thread count.
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

/// A call's resize (ResizeMap.h) with each spatial dim's taps tabulated.
struct ResizeSetup : ResizeGeometry {
  /// Per spatial dim, per output index: two input indices and weights.
  std::vector<int64_t> I0[MaxRank], I1[MaxRank];
  std::vector<float> W0[MaxRank], W1[MaxRank];
};

ResizeSetup setupResize(const OpCall &Call) {
  if (Call.Inputs.size() != 1 || Call.Outputs.size() != 1)
    failOp(Call, "expects one input and one output");
  requireDenseF32(Call, Call.Inputs[0], "input X");
  requireDenseF32(Call, Call.Outputs[0], "output Y");
  ResizeSetup S;
  if (std::string Why = describeResize(Call, S); !Why.empty())
    failOp(Call, Why);
  for (int D = 0; D < S.Spatial; ++D) {
    int64_t In = S.InDims[D];
    for (int64_t O = 0; O < S.OutDims[D]; ++O) {
      if (S.Linear) {
        ResizeTaps T = resizeLinear(S.Coordinates, O, In, S.Scales[D]);
        S.I0[D].push_back(T.I0);
        S.I1[D].push_back(T.I1);
        S.W0[D].push_back(static_cast<float>(1 - T.Weight1));
        S.W1[D].push_back(static_cast<float>(T.Weight1));
      } else {
        int64_t I =
            resizeNearest(S.Coordinates, S.Rounding, O, In, S.Scales[D]);
        S.I0[D].push_back(I);
        S.I1[D].push_back(I);
        S.W0[D].push_back(1);
        S.W1[D].push_back(0);
      }
    }
  }
  return S;
}

/// Calls Fn(input offset within the plane, weight) for each tap of output
/// element Index (row-major over the output's spatial dims); nearest has
/// one tap, linear 2^Spatial (those of zero weight skipped).
template <typename F>
void forEachTap(const ResizeSetup &S, int64_t Index, F Fn) {
  int64_t Coord[MaxRank];
  for (int D = S.Spatial - 1; D >= 0; --D) {
    Coord[D] = Index % S.OutDims[D];
    Index /= S.OutDims[D];
  }
  int Corners = S.Linear ? 1 << S.Spatial : 1;
  for (int Corner = 0; Corner < Corners; ++Corner) {
    int64_t Offset = 0;
    float Weight = 1;
    for (int D = 0; D < S.Spatial; ++D) {
      bool Second = (Corner >> (S.Spatial - 1 - D)) & 1;
      int64_t O = Coord[D];
      Offset = Offset * S.InDims[D] + (Second ? S.I1[D][O] : S.I0[D][O]);
      Weight *= Second ? S.W1[D][O] : S.W0[D][O];
    }
    if (Weight != 0)
      Fn(Offset, Weight);
  }
}

} // namespace

void forwardResize(const OpCall &Call) {
  ResizeSetup S = setupResize(Call);
  const float *X = Call.Inputs[0].as<float>();
  float *Y = Call.Outputs[0].as<float>();
  parallelFor(S.Planes, S.OutPlane, [&](int64_t P) {
    const float *In = X + P * S.InPlane;
    float *Out = Y + P * S.OutPlane;
    for (int64_t I = 0; I < S.OutPlane; ++I) {
      float Sum = 0;
      forEachTap(S, I, [&](int64_t Offset, float W) { Sum += W * In[Offset]; });
      Out[I] = Sum;
    }
  });
}

void backwardResize(const OpCall &Call, const Views &OutputGrads,
                    const Views &InputGrads) {
  if (OutputGrads.empty() || !OutputGrads[0].present() || InputGrads.empty() ||
      !InputGrads[0].present())
    return;
  ResizeSetup S = setupResize(Call);
  requireDenseF32(Call, OutputGrads[0], "output gradient");
  requireDenseF32(Call, InputGrads[0], "input gradient");
  if (OutputGrads[0].numElements() != Call.Outputs[0].numElements() ||
      InputGrads[0].numElements() != Call.Inputs[0].numElements())
    failOp(Call, "gradient shapes do not match the operands");
  const float *G = OutputGrads[0].as<float>();
  float *DX = InputGrads[0].as<float>();
  parallelFor(S.Planes, S.OutPlane, [&](int64_t P) {
    const float *Grad = G + P * S.OutPlane;
    float *Plane = DX + P * S.InPlane;
    for (int64_t I = 0; I < S.OutPlane; ++I)
      forEachTap(
          S, I, [&](int64_t Offset, float W) { Plane[Offset] += W * Grad[I]; });
  });
}

} // namespace onnx2soap::rt::cpu
