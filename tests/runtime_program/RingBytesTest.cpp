//===- tests/runtime_program/RingBytesTest.cpp - Comm::ringSendBytes ------===//
//
// The bytes a member sends in one ring all-reduce, which both Comm
// implementations count and the plan predicts: hand-worked tables for
// groups of one, counts of zero, counts smaller than the group and counts
// that do not divide, plus two independent derivations over a grid (each
// member sends every chunk but one in each phase; the group as a whole sends
// 2(n-1) times the data).
//
//===----------------------------------------------------------------------===//
#include "runtime_lib/program/Comm.h"

#include <gtest/gtest.h>

using onnx2soap::rt::program::Comm;

namespace {

struct RingCase {
  int64_t Count;
  size_t ElementSize;
  int GroupSize;
  int Position;
  uint64_t Bytes;
};

TEST(RingBytesTest, HandWorkedCases) {
  const RingCase Cases[] = {
      // No ring: one member or none sends nothing.
      {1000, 4, 1, 0, 0},
      {1000, 4, 0, 0, 0},
      // Nothing to send.
      {0, 4, 2, 0, 0},
      {0, 8, 4, 3, 0},
      // Two members: each sends half the data once per phase.
      {10, 4, 2, 0, 40},
      {10, 4, 2, 1, 40},
      // Odd count, two members: chunks [0,5) and [5,11).
      {11, 4, 2, 0, 4 * (5 + 6)},
      {11, 8, 2, 1, 8 * (6 + 5)},
      // Divisible: 2(n-1)/n of the data, 8 floats among 4 -> 6 chunks of 2.
      {8, 4, 4, 0, 48},
      {8, 4, 4, 3, 48},
      // Count < n: only chunk 3 of [0,0),[0,0),[0,0),[0,1) is non-empty.
      // Position p skips chunk p+1 in reduce-scatter and p+2 in all-gather.
      {1, 4, 4, 0, 8},
      {1, 4, 4, 1, 4},
      {1, 4, 4, 2, 4},
      {1, 4, 4, 3, 8},
      // 10 among 3: chunks of 3, 3, 4.
      {10, 4, 3, 0, 4 * ((10 - 3) + (10 - 4))},
      {10, 4, 3, 1, 4 * ((10 - 4) + (10 - 3))},
      {10, 4, 3, 2, 4 * ((10 - 3) + (10 - 3))},
      // Past 2^32 elements: no 32-bit overflow.
      {int64_t(1) << 40, 8, 4, 1, uint64_t(8) * 6 * (uint64_t(1) << 38)},
  };
  for (const RingCase &C : Cases)
    EXPECT_EQ(
        Comm::ringSendBytes(C.Count, C.ElementSize, C.GroupSize, C.Position),
        C.Bytes)
        << "count " << C.Count << ", element size " << C.ElementSize
        << ", group size " << C.GroupSize << ", position " << C.Position;
}

TEST(RingBytesTest, EveryChunkButOnePerPhase) {
  for (int N = 2; N <= 9; ++N)
    for (int64_t Count : {1, 2, 5, 7, 64, 1000, 1001, 65537}) {
      auto Length = [&](int C) {
        C = ((C % N) + N) % N;
        return uint64_t(Count * (C + 1) / N - Count * C / N);
      };
      uint64_t GroupTotal = 0;
      for (int P = 0; P < N; ++P) {
        uint64_t Bytes = Comm::ringSendBytes(Count, 2, N, P);
        // Reduce-scatter ends with P owning chunk P+1 (never sent); the
        // all-gather's chunk P+2 arrives last and is not passed on.
        EXPECT_EQ(Bytes,
                  2 * (2 * uint64_t(Count) - Length(P + 1) - Length(P + 2)))
            << "count " << Count << ", n " << N << ", position " << P;
        GroupTotal += Bytes;
      }
      EXPECT_EQ(GroupTotal, 2 * 2 * uint64_t(N - 1) * uint64_t(Count))
          << "count " << Count << ", n " << N;
    }
}

} // namespace
