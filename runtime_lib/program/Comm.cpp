//===- runtime_lib/program/Comm.cpp - What every Comm shares --------------===//
//
// The ring all-reduce's byte count, shared by both implementations and by
// the plan's byte prediction.
//
//===----------------------------------------------------------------------===//
#include "Comm.h"

namespace onnx2soap::rt::program {

Comm::~Comm() = default;

uint64_t Comm::ringSendBytes(int64_t Count, size_t ElementSize, int GroupSize,
                             int Position) {
  if (GroupSize < 2)
    return 0;
  auto Chunk = [&](int C) {
    int N = GroupSize;
    C = ((C % N) + N) % N;
    return Count * (C + 1) / N - Count * C / N;
  };
  // Reduce-scatter step s sends chunk (Position - s); all-gather step s
  // sends chunk (Position + 1 - s): every chunk but one, twice over.
  uint64_t Elements = 0;
  for (int Step = 0; Step < GroupSize - 1; ++Step)
    Elements += Chunk(Position - Step) + Chunk(Position + 1 - Step);
  return Elements * ElementSize;
}

} // namespace onnx2soap::rt::program
