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
