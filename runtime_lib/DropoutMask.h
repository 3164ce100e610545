//===- runtime_lib/DropoutMask.h - Dropout's mask contract -----*- C++ -*-===//
//
// Dropout's keep/drop decision, which every backend must compute bit for bit
// the same way: a counter-based hash (splitmix64) of the seed attribute, the
// training step and the element index, so the mask needs no state and a CPU
// run reproduces a GPU run's mask exactly. Plain constexpr C++ that host and
// device code (nvcc) both compile.
//
//===----------------------------------------------------------------------===//
#ifndef ONNX2SOAP_RUNTIME_DROPOUTMASK_H
#define ONNX2SOAP_RUNTIME_DROPOUTMASK_H

#include <cstdint>

#if defined(__CUDACC__)
#define ONNX2SOAP_HOST_DEVICE __host__ __device__
#else
#define ONNX2SOAP_HOST_DEVICE
#endif

namespace onnx2soap::rt {

/// splitmix64's output function (Steele, Lea, Flood 2014).
ONNX2SOAP_HOST_DEVICE constexpr uint64_t splitMix64(uint64_t Z) {
  Z += 0x9e3779b97f4a7c15ull;
  Z = (Z ^ (Z >> 30)) * 0xbf58476d1ce4e5b9ull;
  Z = (Z ^ (Z >> 27)) * 0x94d049bb133111ebull;
  return Z ^ (Z >> 31);
}

/// Dropout's mask, the contract every backend implements identically:
/// element Index (row-major, over the whole tensor) of the call at training
/// step Step with attribute seed Seed is kept iff
///   H = splitMix64(splitMix64(splitMix64(Seed) ^ Step) + Index)
///   (H >> 11) >= Threshold,  Threshold = uint64(Ratio * 2^53)
/// (all arithmetic modulo 2^64; Ratio * 2^53 is exact in double, the
/// conversion truncates). Kept elements are multiplied by the element type's
/// rounding of the double 1 / (1 - Ratio).
ONNX2SOAP_HOST_DEVICE constexpr uint64_t dropoutThreshold(double Ratio) {
  return static_cast<uint64_t>(Ratio * 9007199254740992.0);
}
ONNX2SOAP_HOST_DEVICE constexpr uint64_t dropoutStream(int64_t Seed,
                                                       int64_t Step) {
  return splitMix64(splitMix64(static_cast<uint64_t>(Seed)) ^
                    static_cast<uint64_t>(Step));
}
ONNX2SOAP_HOST_DEVICE constexpr bool dropoutKeep(uint64_t Stream, int64_t Index,
                                                 uint64_t Threshold) {
  return (splitMix64(Stream + static_cast<uint64_t>(Index)) >> 11) >= Threshold;
}

} // namespace onnx2soap::rt

#endif
