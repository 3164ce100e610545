//===- runtime_lib/ResizeMap.h - Resize's source coordinates ----*- C++ -*-===//
//
// Where output index O of a resized dim reads its input, the one rule both
// backends' Resize kernels follow (ONNX Resize, opsets 13-21): the
// coordinate transformation maps O to a real source coordinate; "nearest"
// rounds it by the nearest mode, "linear" takes the two neighbours with
// weights. Source coordinates are clamped into [0, In - 1], which gives the
// values of ONNX's reference (it pads with edge values) and PyTorch's
// indices and weights. Plain C++ that host and device code (nvcc) both
// compile; describeResize, which reads a call's geometry and modes for
// either backend, is host code.
//
//===----------------------------------------------------------------------===//
#ifndef ONNX2SOAP_RUNTIME_RESIZEMAP_H
#define ONNX2SOAP_RUNTIME_RESIZEMAP_H

#include "Backend.h"
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#if defined(__CUDACC__)
#define ONNX2SOAP_RESIZE_HD __host__ __device__
#else
#define ONNX2SOAP_RESIZE_HD
#endif

namespace onnx2soap::rt {

/// ONNX's coordinate_transformation_mode values the IR carries.
enum class ResizeCoordinates : int32_t {
  HalfPixel,
  PytorchHalfPixel,
  AlignCorners,
  Asymmetric
};

/// ONNX's nearest_mode values.
enum class ResizeRounding : int32_t {
  RoundPreferFloor,
  RoundPreferCeil,
  Floor,
  Ceil
};

/// The source coordinate of output index O of a dim of In elements resized
/// by Scale (Out / In when the model gives sizes). The output's length is
/// Scale * In, not rounded, as in ONNX's reference (align_corners with
/// scales that do not divide evenly).
ONNX2SOAP_RESIZE_HD inline double
resizeSource(ResizeCoordinates Mode, int64_t O, int64_t In, double Scale) {
  double X = static_cast<double>(O);
  // Rounded once, as on the host: nvcc would fuse Length - 1 into a
  // multiply-add, which moves align_corners' ties by a rounding.
#if defined(__CUDA_ARCH__)
  double Length = __dmul_rn(Scale, static_cast<double>(In));
#else
  double Length = Scale * static_cast<double>(In);
#endif
  switch (Mode) {
  case ResizeCoordinates::HalfPixel:
    return (X + 0.5) / Scale - 0.5;
  case ResizeCoordinates::PytorchHalfPixel:
    return Length > 1 ? (X + 0.5) / Scale - 0.5 : 0.0;
  case ResizeCoordinates::AlignCorners:
    return Length == 1 ? 0.0 : X * static_cast<double>(In - 1) / (Length - 1);
  case ResizeCoordinates::Asymmetric:
  default:
    return X / Scale;
  }
}

/// Clamps a source index into [0, In - 1].
ONNX2SOAP_RESIZE_HD inline int64_t resizeClamp(int64_t I, int64_t In) {
  return I < 0 ? 0 : (I > In - 1 ? In - 1 : I);
}

/// The input index "nearest" reads for output index O.
ONNX2SOAP_RESIZE_HD inline int64_t resizeNearest(ResizeCoordinates Mode,
                                                 ResizeRounding Rounding,
                                                 int64_t O, int64_t In,
                                                 double Scale) {
  double X = resizeSource(Mode, O, In, Scale);
  double Floor = std::floor(X);
  double Pick;
  switch (Rounding) {
  case ResizeRounding::RoundPreferFloor:
    Pick = X - Floor == 0.5 ? Floor : std::round(X);
    break;
  case ResizeRounding::RoundPreferCeil:
    Pick = X - Floor == 0.5 ? Floor + 1 : std::round(X);
    break;
  case ResizeRounding::Floor:
    Pick = Floor;
    break;
  case ResizeRounding::Ceil:
  default:
    Pick = std::ceil(X);
    break;
  }
  return resizeClamp(static_cast<int64_t>(Pick), In);
}

/// The two input indices "linear" reads for output index O and the weight
/// of the second (the first's is 1 - Weight1).
struct ResizeTaps {
  int64_t I0, I1;
  double Weight1;
};

ONNX2SOAP_RESIZE_HD inline ResizeTaps
resizeLinear(ResizeCoordinates Mode, int64_t O, int64_t In, double Scale) {
  double X = resizeSource(Mode, O, In, Scale);
  double Max = static_cast<double>(In - 1);
  X = X < 0 ? 0 : (X > Max ? Max : X);
  int64_t I0 = static_cast<int64_t>(std::floor(X));
  int64_t I1 = I0 < In - 1 ? I0 + 1 : I0;
  return {I0, I1, X - static_cast<double>(I0)};
}

/// A Resize call's planes, spatial dims, scales and modes, as both
/// backends' kernels take it (trivially copyable, passed to CUDA kernels by
/// value).
struct ResizeGeometry {
  int64_t Planes = 0, InPlane = 1, OutPlane = 1;
  int Spatial = 0;
  int64_t InDims[MaxRank] = {}, OutDims[MaxRank] = {};
  double Scales[MaxRank] = {};
  ResizeCoordinates Coordinates = ResizeCoordinates::HalfPixel;
  ResizeRounding Rounding = ResizeRounding::RoundPreferFloor;
  bool Linear = false;
};

/// The two input indices output index O of spatial dim D reads and their
/// weights, as floats: nearest's one tap is I0 (I1 the same, weight 0).
struct ResizeDimTaps {
  int64_t I0, I1;
  float W0, W1;
};

ONNX2SOAP_RESIZE_HD inline ResizeDimTaps resizeDimTaps(const ResizeGeometry &G,
                                                       int D, int64_t O) {
  if (G.Linear) {
    ResizeTaps T = resizeLinear(G.Coordinates, O, G.InDims[D], G.Scales[D]);
    return {T.I0, T.I1, static_cast<float>(1 - T.Weight1),
            static_cast<float>(T.Weight1)};
  }
  int64_t I =
      resizeNearest(G.Coordinates, G.Rounding, O, G.InDims[D], G.Scales[D]);
  return {I, I, 1.0f, 0.0f};
}

/// Calls Fn(input offset within the plane, weight) for each tap of output
/// element Index (row-major over the output's spatial dims): nearest has
/// one tap, linear 2^Spatial in corner order (dim 0's choice the most
/// significant bit), those of zero weight skipped. Forward sums them;
/// the gradient of an input is the sum of what they give it.
template <typename F>
ONNX2SOAP_RESIZE_HD void resizeForEachTap(const ResizeGeometry &G,
                                          int64_t Index, F &&Fn) {
  ResizeDimTaps Taps[MaxRank];
  for (int D = G.Spatial - 1; D >= 0; --D) {
    Taps[D] = resizeDimTaps(G, D, Index % G.OutDims[D]);
    Index /= G.OutDims[D];
  }
  int Corners = G.Linear ? 1 << G.Spatial : 1;
  for (int Corner = 0; Corner < Corners; ++Corner) {
    int64_t Offset = 0;
    float Weight = 1;
    for (int D = 0; D < G.Spatial; ++D) {
      bool Second = (Corner >> (G.Spatial - 1 - D)) & 1;
      Offset = Offset * G.InDims[D] + (Second ? Taps[D].I1 : Taps[D].I0);
      Weight *= Second ? Taps[D].W1 : Taps[D].W0;
    }
    if (Weight != 0)
      Fn(Offset, Weight);
  }
}

/// The output indices of spatial dim D whose taps may read input index I:
/// [Lo, Hi], empty when Lo > Hi. Taps are non-decreasing in the output
/// index and I1 - I0 <= 1, so they are the outputs with I0 <= I <= I1,
/// found by bisection.
ONNX2SOAP_RESIZE_HD inline void resizeTappedBy(const ResizeGeometry &G, int D,
                                               int64_t I, int64_t &Lo,
                                               int64_t &Hi) {
  int64_t Out = G.OutDims[D];
  // Lo: the first output whose I1 >= I (Out when none).
  int64_t A = 0, B = Out;
  while (A < B) {
    int64_t M = A + (B - A) / 2;
    if (resizeDimTaps(G, D, M).I1 >= I)
      B = M;
    else
      A = M + 1;
  }
  Lo = A;
  // Hi: the last output whose I0 <= I (-1 when none).
  A = 0, B = Out;
  while (A < B) {
    int64_t M = A + (B - A) / 2;
    if (resizeDimTaps(G, D, M).I0 <= I)
      A = M + 1;
    else
      B = M;
  }
  Hi = A - 1;
}

/// Acc plus the gradient input element In (an offset within its plane)
/// gets from the plane's output gradient Grad: every output that reads it,
/// in increasing output order, adding W * Grad[output] for each of its taps
/// that reads In in corner order: the order in which adding each output
/// gradient into its taps would add them, and the same whatever thread
/// computes which input, so the gradient is deterministic.
ONNX2SOAP_RESIZE_HD inline float resizeGatherGradient(const ResizeGeometry &G,
                                                      const float *Grad,
                                                      int64_t In, float Acc) {
  int64_t Lo[MaxRank], Hi[MaxRank], Coord[MaxRank];
  int64_t Rest = In;
  for (int D = G.Spatial - 1; D >= 0; --D) {
    resizeTappedBy(G, D, Rest % G.InDims[D], Lo[D], Hi[D]);
    Rest /= G.InDims[D];
    if (Lo[D] > Hi[D])
      return Acc;
    Coord[D] = Lo[D];
  }
  // The outputs of the box [Lo, Hi] in row-major order.
  for (;;) {
    int64_t Index = 0;
    for (int D = 0; D < G.Spatial; ++D)
      Index = Index * G.OutDims[D] + Coord[D];
    float Gradient = Grad[Index];
    resizeForEachTap(G, Index, [&](int64_t Offset, float Weight) {
      if (Offset == In)
        Acc += Weight * Gradient;
    });
    int D = G.Spatial - 1;
    while (D >= 0 && Coord[D] == Hi[D]) {
      Coord[D] = Lo[D];
      --D;
    }
    if (D < 0)
      return Acc;
    ++Coord[D];
  }
}

/// Fills G from Call's operands X -> Y (present) and attributes; returns
/// what is wrong with them, or "".
inline std::string describeResize(const OpCall &Call, ResizeGeometry &G) {
  const TensorView &X = Call.Inputs[0], &Y = Call.Outputs[0];
  if (X.Rank < 3 || Y.Rank != X.Rank || Y.Dims[0] != X.Dims[0] ||
      Y.Dims[1] != X.Dims[1])
    return "input and output must be [N,C,spatial...] with the same N and C";
  const std::vector<double> &Scales = Call.Attrs.getFloats("scales");
  if (Scales.size() != static_cast<size_t>(X.Rank))
    return "attribute 'scales' has " + std::to_string(Scales.size()) +
           " values, expected " + std::to_string(X.Rank);
  const std::string &Mode = Call.Attrs.getString("mode", "nearest");
  if (Mode != "nearest" && Mode != "linear")
    return "mode '" + Mode + "' is not supported";
  G.Linear = Mode == "linear";
  const std::string &Coordinates =
      Call.Attrs.getString("coordinate_transformation_mode", "half_pixel");
  if (Coordinates == "half_pixel")
    G.Coordinates = ResizeCoordinates::HalfPixel;
  else if (Coordinates == "pytorch_half_pixel")
    G.Coordinates = ResizeCoordinates::PytorchHalfPixel;
  else if (Coordinates == "align_corners")
    G.Coordinates = ResizeCoordinates::AlignCorners;
  else if (Coordinates == "asymmetric")
    G.Coordinates = ResizeCoordinates::Asymmetric;
  else
    return "coordinate_transformation_mode '" + Coordinates +
           "' is not supported";
  const std::string &Rounding =
      Call.Attrs.getString("nearest_mode", "round_prefer_floor");
  if (Rounding == "round_prefer_floor")
    G.Rounding = ResizeRounding::RoundPreferFloor;
  else if (Rounding == "round_prefer_ceil")
    G.Rounding = ResizeRounding::RoundPreferCeil;
  else if (Rounding == "floor")
    G.Rounding = ResizeRounding::Floor;
  else if (Rounding == "ceil")
    G.Rounding = ResizeRounding::Ceil;
  else
    return "nearest_mode '" + Rounding + "' is not supported";
  G.Planes = X.Dims[0] * X.Dims[1];
  G.Spatial = X.Rank - 2;
  for (int D = 0; D < G.Spatial; ++D) {
    G.InDims[D] = X.Dims[2 + D];
    G.OutDims[D] = Y.Dims[2 + D];
    G.Scales[D] = Scales[2 + D];
    G.InPlane *= G.InDims[D];
    G.OutPlane *= G.OutDims[D];
  }
  return "";
}

} // namespace onnx2soap::rt

#endif
