//===- soap_search/Random.h - Seeded, portable random choices --*- C++ -*-===//
//
// Every random choice of the search draws from a generator passed in and
// seeded from --seed. std::mt19937_64's sequence is fixed by the standard;
// the distributions of <random> are not (libstdc++ and libc++ differ), so
// the choices below are our own: same seed, same strategy, on any platform.
//
//===----------------------------------------------------------------------===//
#ifndef ONNX2SOAP_SOAP_SEARCH_RANDOM_H
#define ONNX2SOAP_SOAP_SEARCH_RANDOM_H

#include <cstdint>
#include <random>

namespace onnx2soap::soap_search {

using Rng = std::mt19937_64;

/// Uniform in [0, N) for N >= 1 (Lemire's multiply-shift with rejection).
inline uint64_t uniformIndex(Rng &R, uint64_t N) {
  unsigned __int128 M = (unsigned __int128)R() * N;
  uint64_t Low = uint64_t(M);
  if (Low < N) {
    uint64_t Threshold = -N % N;
    while (Low < Threshold) {
      M = (unsigned __int128)R() * N;
      Low = uint64_t(M);
    }
  }
  return uint64_t(M >> 64);
}

/// Uniform in [0, 1), from the top 53 bits.
inline double uniformReal(Rng &R) { return double(R() >> 11) * 0x1.0p-53; }

/// The generator of chain Chain of a search seeded with Seed.
inline Rng chainRng(uint64_t Seed, unsigned Chain) {
  std::seed_seq Sequence{uint32_t(Seed), uint32_t(Seed >> 32), uint32_t(Chain)};
  return Rng(Sequence);
}

} // namespace onnx2soap::soap_search

#endif
