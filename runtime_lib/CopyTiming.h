//===- runtime_lib/CopyTiming.h - Timing a backend's box copies -*- C++ -*-===//
//
// How long one box copy of a given size takes on a backend: the table the
// planner times a generated program's copies from (gathering re-laid-out
// inputs, packing and unpacking messages; the profile file's "copies",
// docs/profile-format.md). `onnx2soap calibrate` measures it on the CPU
// backend, a generated program's --profile-ops on its own device.
//
//===----------------------------------------------------------------------===//
#ifndef ONNX2SOAP_RUNTIME_COPYTIMING_H
#define ONNX2SOAP_RUNTIME_COPYTIMING_H

#include "Backend.h"
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace onnx2soap::rt {

/// The bytes of the copies timed: from launch-bound to bandwidth-bound.
inline constexpr double CopyTimingSizes[] = {4096, 65536, 1 << 20, 16 << 20};

/// The median seconds of one copy of each size, and how many timed runs
/// each median summarizes.
struct CopyTiming {
  std::vector<double> SizesBytes;
  std::vector<double> Seconds;
  int64_t Samples = 0;
};

/// Times B.copyBox of one contiguous f32 box of each of CopyTimingSizes,
/// backend synchronized around each copy: once to warm up, then Repeats
/// (at least one) timed runs, BeforeEach (when given) before each of them
/// (calibrate evicts the CPU caches there); a size's runs stop early once
/// they have taken CapSeconds, BeforeEach's time included, and Samples is
/// the fewest runs of any size.
/// Allocates two buffers of the largest size on the backend and frees them.
CopyTiming timeBoxCopies(Backend &B, unsigned Repeats,
                         const std::function<void()> &BeforeEach = {},
                         double CapSeconds = 2.0);

/// Seconds as the profile file writes a copy's time: microseconds rounded
/// to the nanosecond (so the file is short), at least 1 ns.
inline double profileMicroseconds(double Seconds) {
  return std::max(std::round(Seconds * 1e9) / 1e3, 1e-3);
}

/// The table as the profile file's "copies" value: sizes in bytes, times in
/// microseconds rounded to the nanosecond (at least 1 ns).
std::string copyTimingJson(const CopyTiming &T);

} // namespace onnx2soap::rt

#endif
