//===- runtime_lib/CopyTiming.cpp - Timing a backend's box copies ---------===//
#include "CopyTiming.h"
#include "Median.h"
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iterator>

namespace onnx2soap::rt {

CopyTiming timeBoxCopies(Backend &B, unsigned Repeats,
                         const std::function<void()> &BeforeEach,
                         double CapSeconds) {
  Repeats = std::max(Repeats, 1u);
  size_t Largest = size_t(CopyTimingSizes[std::size(CopyTimingSizes) - 1]);
  // Both buffers are zero-filled by allocate: the copies move real bytes.
  DeviceBuffer From(B, Largest), To(B, Largest);
  CopyTiming T;
  T.Samples = Repeats;
  // Lowered to the fewest runs a size had.
  for (double Bytes : CopyTimingSizes) {
    std::vector<int64_t> Dims{int64_t(Bytes) / 4};
    TensorView Source =
        TensorView::contiguous(DType::Float32, Dims, From.data());
    TensorView Target = TensorView::contiguous(DType::Float32, Dims, To.data());
    auto Once = [&] {
      B.synchronize();
      auto Start = std::chrono::steady_clock::now();
      B.copyBox(Target, Source, /*Add=*/false);
      B.synchronize();
      return std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                           Start)
          .count();
    };
    std::vector<double> Times = timeRepeats(
        Repeats, CapSeconds,
        [&] {
          if (BeforeEach)
            BeforeEach();
        },
        Once);
    T.Samples = std::min(T.Samples, int64_t(Times.size()));
    T.SizesBytes.push_back(Bytes);
    T.Seconds.push_back(median(std::move(Times)));
  }
  return T;
}

std::string copyTimingJson(const CopyTiming &T) {
  auto List = [](const std::vector<double> &Values, bool Times) {
    std::string Out = "[";
    for (size_t I = 0; I < Values.size(); ++I) {
      char Text[40];
      std::snprintf(Text, sizeof Text, "%s%.10g", I ? ", " : "",
                    Times ? profileMicroseconds(Values[I]) : Values[I]);
      Out += Text;
    }
    return Out + "]";
  };
  return "{\"sizes_bytes\": " + List(T.SizesBytes, false) +
         ", \"times_us\": " + List(T.Seconds, true) +
         ", \"samples\": " + std::to_string(T.Samples) + "}";
}

} // namespace onnx2soap::rt
