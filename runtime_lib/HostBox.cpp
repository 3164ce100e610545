//===- runtime_lib/HostBox.cpp - Boxes of dense host tensors --------------===//
//
// Both sides are dense along the innermost dim, so a box moves as one
// memcpy per row of its outer dims (trailing dims it spans whole included).
//
//===----------------------------------------------------------------------===//
#include "HostBox.h"
#include <cstring>

namespace onnx2soap::rt {

/// Calls Row(BoxOffset, WholeOffset, Bytes) for every row of the box. The
/// trailing dims the box spans whole fold into its rows, so a whole tensor
/// or a slab of leading-dim slices moves as one memcpy.
template <typename Fn>
static void forEachRow(const std::vector<int64_t> &WholeDims,
                       const int64_t *Origin, const int64_t *Extent, int Dims,
                       size_t ElementSize, Fn Row) {
  for (int D = 0; D < Dims; ++D)
    if (Extent[D] == 0)
      return;
  int Kept = Dims;
  int64_t Fold = 1;
  while (Kept > 1 && Origin[Kept - 1] == 0 &&
         Extent[Kept - 1] == WholeDims[Kept - 1])
    Fold *= WholeDims[--Kept];
  int64_t RowBytes = (Kept ? Extent[Kept - 1] : 1) * Fold * ElementSize;
  std::vector<int64_t> Index(Kept, 0);
  int64_t BoxOffset = 0;
  while (true) {
    int64_t Whole = 0;
    for (int D = 0; D < Kept; ++D)
      Whole = Whole * WholeDims[D] + Origin[D] + (D + 1 < Kept ? Index[D] : 0);
    Row(BoxOffset, Whole * Fold * int64_t(ElementSize), RowBytes);
    BoxOffset += RowBytes;
    int D = Kept - 2;
    while (D >= 0 && ++Index[D] == Extent[D])
      Index[D--] = 0;
    if (D < 0)
      return;
  }
}

void copyHostBox(char *Box, const char *Whole,
                 const std::vector<int64_t> &WholeDims, const int64_t *Origin,
                 const int64_t *Extent, int Dims, size_t ElementSize) {
  forEachRow(WholeDims, Origin, Extent, Dims, ElementSize,
             [&](int64_t To, int64_t From, int64_t Bytes) {
               std::memcpy(Box + To, Whole + From, Bytes);
             });
}

void pasteHostBox(char *Whole, const char *Box,
                  const std::vector<int64_t> &WholeDims, const int64_t *Origin,
                  const int64_t *Extent, int Dims, size_t ElementSize) {
  forEachRow(WholeDims, Origin, Extent, Dims, ElementSize,
             [&](int64_t From, int64_t To, int64_t Bytes) {
               std::memcpy(Whole + To, Box + From, Bytes);
             });
}

} // namespace onnx2soap::rt
