//===- tests/runtime_program/DeviceMemoryTest.cpp - What a rank allocates -===//
//
// allocatedBytes: the rank's arena, as the plan sizes it, and one message
// buffer as large as the rank's largest message (at least 64 bytes), on a
// hand-made plan; checkDeviceMemory refuses a device with less free memory
// than that and the rank's kernel scratch, naming the rank and both sizes.
//
//===----------------------------------------------------------------------===//
#include "runtime_lib/program/Runner.h"

#include <gtest/gtest.h>
#include <stdexcept>
#include <vector>

using namespace onnx2soap::rt;
using namespace onnx2soap::rt::program;

namespace {

BufferInfo buffer(int32_t Rank, DType Type, std::vector<int64_t> Extent) {
  BufferInfo B{};
  B.Rank = Rank;
  B.Kind = BufferKind::Activation;
  B.Type = Type;
  B.Dims = int32_t(Extent.size());
  for (size_t D = 0; D < Extent.size(); ++D)
    B.Extent[D] = Extent[D];
  B.WeightOffset = -1;
  return B;
}

StepInfo message(int64_t Elements, DType Type) {
  StepInfo S{};
  S.Elements = Elements;
  S.Type = Type;
  return S;
}

template <typename T> Table<T> table(const std::vector<T> &V) {
  return {V.data(), int32_t(V.size())};
}

struct TwoRanks {
  // Rank 0: 2x3 floats, 5 int64 and an empty region in an arena of 768
  // bytes; its largest message 30 floats (120 bytes). Rank 1: 4 halves in
  // 256 bytes, no message (the buffer is still 64 bytes). Kernel scratch:
  // 1000 bytes on rank 0, none on rank 1.
  std::vector<BufferInfo> Buffers{
      buffer(0, DType::Float32, {2, 3}), buffer(1, DType::Float16, {4}),
      buffer(0, DType::Int64, {5}), buffer(0, DType::Float32, {0, 7})};
  std::vector<StepInfo> Steps{message(10, DType::Float32),
                              message(30, DType::Float32)};
  std::vector<Range> RankSteps{{0, 2}, {2, 0}};
  std::vector<int64_t> ArenaBytes{768, 256};
  std::vector<int64_t> ScratchBytes{1000, 0};
  Plan P{};
  TwoRanks() {
    P.NumRanks = 2;
    P.Buffers = table(Buffers);
    P.Steps = table(Steps);
    P.RankSteps = table(RankSteps);
    P.ArenaBytes = table(ArenaBytes);
    P.ScratchBytes = table(ScratchBytes);
  }
};

TEST(DeviceMemoryTest, TheArenaAndTheMessageBuffer) {
  TwoRanks Plan;
  EXPECT_EQ(messageBufferBytes(Plan.P, 0), 120u);
  EXPECT_EQ(messageBufferBytes(Plan.P, 1), 64u);
  EXPECT_EQ(allocatedBytes(Plan.P, 0), 768u + 120u);
  EXPECT_EQ(allocatedBytes(Plan.P, 1), 256u + 64u);
}

TEST(DeviceMemoryTest, RefusesADeviceWithTooLittleFreeMemory) {
  TwoRanks Plan;
  checkDeviceMemory(Plan.P, 0, 1888); // exactly enough
  checkDeviceMemory(Plan.P, 1, 320);
  try {
    checkDeviceMemory(Plan.P, 0, 1887);
    FAIL() << "no error";
  } catch (const std::exception &E) {
    EXPECT_EQ(std::string(E.what()),
              "device memory: rank 0's buffers and kernel scratch need 1888 "
              "bytes (0.0 GiB), the device has 1887 bytes (0.0 GiB) free "
              "(plan with a lower --memory-limit, or use more devices)");
  }
}

} // namespace
