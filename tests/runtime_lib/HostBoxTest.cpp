//===- tests/runtime_lib/HostBoxTest.cpp - Boxes of host tensors ----------===//
//
// copyHostBox and pasteHostBox against an element-by-element reference on
// random tensors and boxes of rank 0 to 4 and several element sizes, with
// boxes that span trailing dims whole (folded into one memcpy per row) and
// boxes that do not.
//
//===----------------------------------------------------------------------===//
#include "runtime_lib/HostBox.h"
#include <gtest/gtest.h>
#include <random>

using namespace onnx2soap::rt;

namespace {

/// Byte offset of element Index (in box coordinates plus Origin) of Dims.
int64_t offsetOf(const std::vector<int64_t> &Dims,
                 const std::vector<int64_t> &Index) {
  int64_t Flat = 0;
  for (size_t D = 0; D < Dims.size(); ++D)
    Flat = Flat * Dims[D] + Index[D];
  return Flat;
}

TEST(HostBox, CopyAndPasteMatchAnElementLoop) {
  std::mt19937 Rng(5);
  auto Uniform = [&](int64_t Low, int64_t High) {
    return std::uniform_int_distribution<int64_t>(Low, High)(Rng);
  };
  for (int Trial = 0; Trial < 2000; ++Trial) {
    int Rank = int(Uniform(0, 4));
    size_t ElementSize = size_t(1) << Uniform(0, 3);
    std::vector<int64_t> Whole(Rank), Origin(Rank), Extent(Rank);
    for (int D = 0; D < Rank; ++D) {
      Whole[D] = Uniform(1, 5);
      // Often whole along a dim, so trailing dims fold.
      if (Uniform(0, 2) == 0) {
        Origin[D] = 0;
        Extent[D] = Whole[D];
      } else {
        Origin[D] = Uniform(0, Whole[D] - 1);
        Extent[D] = Uniform(1, Whole[D] - Origin[D]);
      }
    }
    int64_t WholeCount = 1, BoxCount = 1;
    for (int D = 0; D < Rank; ++D) {
      WholeCount *= Whole[D];
      BoxCount *= Extent[D];
    }
    std::vector<char> Source(WholeCount * ElementSize);
    for (char &C : Source)
      C = char(Uniform(-128, 127));
    std::vector<char> Box(BoxCount * ElementSize, 0);
    copyHostBox(Box.data(), Source.data(), Whole, Origin.data(), Extent.data(),
                Rank, ElementSize);
    std::vector<char> Pasted(Source.size(), 0);
    pasteHostBox(Pasted.data(), Box.data(), Whole, Origin.data(), Extent.data(),
                 Rank, ElementSize);
    std::vector<char> WantPasted(Source.size(), 0);
    // Every element of the box, in row-major order.
    std::vector<int64_t> Index(Rank, 0);
    for (int64_t E = 0; E < BoxCount; ++E) {
      std::vector<int64_t> At(Rank);
      for (int D = 0; D < Rank; ++D)
        At[D] = Origin[D] + Index[D];
      int64_t From = offsetOf(Whole, At) * int64_t(ElementSize);
      for (size_t B = 0; B < ElementSize; ++B) {
        ASSERT_EQ(Box[E * ElementSize + B], Source[From + B])
            << "trial " << Trial << " element " << E;
        WantPasted[From + B] = Source[From + B];
      }
      for (int D = Rank - 1; D >= 0 && ++Index[D] == Extent[D]; --D)
        Index[D] = 0;
    }
    ASSERT_EQ(Pasted, WantPasted) << "trial " << Trial;
  }
}

TEST(HostBox, EmptyBoxesCopyNothing) {
  std::vector<int64_t> Whole{2, 3}, Origin{1, 0}, Extent{0, 3};
  std::vector<char> Source(6, 1), Box(1, 7);
  copyHostBox(Box.data(), Source.data(), Whole, Origin.data(), Extent.data(), 2,
              1);
  EXPECT_EQ(Box[0], 7);
}

} // namespace
