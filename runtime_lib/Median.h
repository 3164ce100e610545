//===- runtime_lib/Median.h - The median of repeated timings ----*- C++ -*-===//
//
// What every measurement here reports of repeated timings: calibrate's
// kernel times, the box-copy table, a generated program's --profile-ops and
// --profile-comm.
//
//===----------------------------------------------------------------------===//
#ifndef ONNX2SOAP_RUNTIME_MEDIAN_H
#define ONNX2SOAP_RUNTIME_MEDIAN_H

#include <algorithm>
#include <chrono>
#include <vector>

namespace onnx2soap::rt {

/// The median of Values (non-empty); of an even count, the mean of the two
/// middle ones.
inline double median(std::vector<double> Values) {
  std::sort(Values.begin(), Values.end());
  size_t N = Values.size();
  return N % 2 ? Values[N / 2] : (Values[N / 2 - 1] + Values[N / 2]) / 2;
}

/// The seconds of Repeats timed runs of Once (which times itself), after one
/// run to warm up, each after BeforeEach (calibrate evicts the CPU caches
/// there); the runs stop early, after at least one, once they have taken
/// CapSeconds, BeforeEach's time included.
template <typename Before, typename Timed>
std::vector<double> timeRepeats(unsigned Repeats, double CapSeconds,
                                Before &&BeforeEach, Timed &&Once) {
  using Clock = std::chrono::steady_clock;
  Once();
  std::vector<double> Times;
  auto First = Clock::now();
  auto Spent = [&] {
    return std::chrono::duration<double>(Clock::now() - First).count();
  };
  for (unsigned I = 0; I < Repeats && (I == 0 || Spent() < CapSeconds); ++I) {
    BeforeEach();
    Times.push_back(Once());
  }
  return Times;
}

} // namespace onnx2soap::rt

#endif
