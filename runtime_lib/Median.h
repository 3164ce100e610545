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
#include <vector>

namespace onnx2soap::rt {

/// The median of Values (non-empty); of an even count, the mean of the two
/// middle ones.
inline double median(std::vector<double> Values) {
  std::sort(Values.begin(), Values.end());
  size_t N = Values.size();
  return N % 2 ? Values[N / 2] : (Values[N / 2 - 1] + Values[N / 2]) / 2;
}

} // namespace onnx2soap::rt

#endif
