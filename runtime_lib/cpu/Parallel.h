//===- runtime_lib/cpu/Parallel.h - Loop kernel threading -------*- C++ -*-===//
//
// How the CPU loop kernels use the cores: OpenMP, the runtime oneDNN already
// runs on, so the loops and oneDNN's primitives share one thread pool and
// one thread count (the backend's --threads, set with omp_set_num_threads).
// Work below a grain runs on the calling thread: a parallel region costs a
// few microseconds, which would dominate the small ops of a model like the
// Transformer fixture. Splitting never changes what one element computes;
// it only decides which thread computes it, so results are bit-identical to
// a serial run for any thread count.
//
//===----------------------------------------------------------------------===//
#ifndef ONNX2SOAP_RUNTIME_CPU_PARALLEL_H
#define ONNX2SOAP_RUNTIME_CPU_PARALLEL_H

#include <algorithm>
#include <cstdint>
#include <omp.h>

namespace onnx2soap::rt::cpu {

/// Elements of simple elementwise work below which a loop stays serial.
constexpr int64_t SerialGrain = 1 << 15;

/// Calls Body(Begin, End) on disjoint chunks covering [0, Count), in
/// parallel when Count * CostPerItem reaches SerialGrain. Body must only
/// write state owned by its chunk.
template <typename F>
void parallelChunks(int64_t Count, int64_t CostPerItem, F &&Body) {
  int Threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  if (Count <= 0)
    return;
  if (Threads <= 1 || Count < 2 ||
      Count * std::max<int64_t>(CostPerItem, 1) < SerialGrain) {
    Body(int64_t(0), Count);
    return;
  }
  int64_t Chunks = std::min<int64_t>(Count, Threads);
#pragma omp parallel for num_threads(Threads) schedule(static)
  for (int64_t Chunk = 0; Chunk < Chunks; ++Chunk)
    Body(Count * Chunk / Chunks, Count * (Chunk + 1) / Chunks);
}

/// Calls Body(I) for every I in [0, Count), in parallel when the work
/// (Count * CostPerItem) is large enough; Body(I) must only write what item
/// I owns.
template <typename F>
void parallelFor(int64_t Count, int64_t CostPerItem, F &&Body) {
  parallelChunks(Count, CostPerItem, [&](int64_t Begin, int64_t End) {
    for (int64_t I = Begin; I < End; ++I)
      Body(I);
  });
}

} // namespace onnx2soap::rt::cpu

#endif
