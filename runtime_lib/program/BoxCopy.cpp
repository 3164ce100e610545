//===- runtime_lib/program/BoxCopy.cpp - Copying boxes of tensors ---------===//
//
// Device boxes are the backend's copyBox (a kernel on the GPU). Host boxes
// are walked with their innermost dim as a contiguous run (both sides are
// dense there), so a copy is a memcpy per run.
//
//===----------------------------------------------------------------------===//
#include "BoxCopy.h"
#include <cstring>

namespace onnx2soap::rt::program {

namespace {
/// Calls Run(ToOffset, FromOffset) (in elements) for every index of the
/// dims before the last, row-major.
template <typename Fn>
void forEachRow(const TensorView &To, const TensorView &From, Fn Run) {
  int Outer = To.Rank - 1;
  if (Outer <= 0) {
    Run(0, 0);
    return;
  }
  int64_t Index[MaxRank] = {};
  for (int D = 0; D < Outer; ++D)
    if (To.Dims[D] == 0)
      return;
  while (true) {
    int64_t ToOffset = 0, FromOffset = 0;
    for (int D = 0; D < Outer; ++D) {
      ToOffset += Index[D] * To.Strides[D];
      FromOffset += Index[D] * From.Strides[D];
    }
    Run(ToOffset, FromOffset);
    int D = Outer - 1;
    while (D >= 0 && ++Index[D] == To.Dims[D])
      Index[D--] = 0;
    if (D < 0)
      return;
  }
}
} // namespace

void copyBox(Backend &B, const TensorView &To, const TensorView &From,
             bool Add) {
  B.copyBox(To, From, Add);
}

static void hostBox(char *Box, char *Whole,
                    const std::vector<int64_t> &WholeDims,
                    const int64_t *Origin, const int64_t *Extent, int Dims,
                    size_t ElementSize, bool Paste) {
  // Dense views of both sides, the whole one offset to the box's corner.
  TensorView WholeView, BoxView;
  WholeView.Rank = BoxView.Rank = Dims;
  int64_t Stride = 1, Offset = 0;
  for (int D = Dims - 1; D >= 0; --D) {
    WholeView.Strides[D] = Stride;
    Offset += Origin[D] * Stride;
    Stride *= WholeDims[D];
  }
  Stride = 1;
  for (int D = Dims - 1; D >= 0; --D) {
    BoxView.Strides[D] = Stride;
    BoxView.Dims[D] = WholeView.Dims[D] = Extent[D];
    Stride *= Extent[D];
  }
  char *Corner = Whole + Offset * ElementSize;
  int64_t Inner = Dims ? Extent[Dims - 1] : 1;
  forEachRow(BoxView, WholeView, [&](int64_t BoxOffset, int64_t WholeOffset) {
    char *BoxRow = Box + BoxOffset * ElementSize;
    char *WholeRow = Corner + WholeOffset * ElementSize;
    if (Paste)
      std::memcpy(WholeRow, BoxRow, Inner * ElementSize);
    else
      std::memcpy(BoxRow, WholeRow, Inner * ElementSize);
  });
}

void copyHostBox(char *Box, const char *Whole,
                 const std::vector<int64_t> &WholeDims, const int64_t *Origin,
                 const int64_t *Extent, int Dims, size_t ElementSize) {
  hostBox(Box, const_cast<char *>(Whole), WholeDims, Origin, Extent, Dims,
          ElementSize, false);
}

void pasteHostBox(char *Whole, const char *Box,
                  const std::vector<int64_t> &WholeDims, const int64_t *Origin,
                  const int64_t *Extent, int Dims, size_t ElementSize) {
  hostBox(const_cast<char *>(Box), Whole, WholeDims, Origin, Extent, Dims,
          ElementSize, true);
}

} // namespace onnx2soap::rt::program
