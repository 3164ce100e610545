//===- runtime_lib/program/BoxCopy.cpp - Copying boxes of tensors ---------===//
//
// Boxes are walked with their innermost dim as a contiguous run when both
// sides are dense there (the usual case: regions cut along outer dims), so a
// copy is a memcpy per run.
//
//===----------------------------------------------------------------------===//
#include "BoxCopy.h"
#include "../Error.h"
#include <cstring>
#include <string>

namespace onnx2soap::rt::program {

namespace {
template <typename T>
void addRun(char *To, const char *From, int64_t Count, int64_t ToStride,
            int64_t FromStride) {
  T *Out = reinterpret_cast<T *>(To);
  const T *In = reinterpret_cast<const T *>(From);
  for (int64_t I = 0; I < Count; ++I)
    Out[I * ToStride] += In[I * FromStride];
}

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
  if (To.Type != From.Type || To.Rank != From.Rank)
    fail("box copy", "source and destination differ in type or rank");
  for (int D = 0; D < To.Rank; ++D)
    if (To.Dims[D] != From.Dims[D])
      fail("box copy", "source and destination differ in extent");
  if (std::string(B.name()) != "cpu")
    fail("box copy",
         std::string("not implemented on the ") + B.name() + " backend yet");
  if (To.numElements() == 0)
    return;
  size_t Size = dtypeSize(To.Type);
  int64_t Inner = To.Rank ? To.Dims[To.Rank - 1] : 1;
  int64_t ToStep = To.Rank ? To.Strides[To.Rank - 1] : 1;
  int64_t FromStep = From.Rank ? From.Strides[From.Rank - 1] : 1;
  char *ToBase = static_cast<char *>(To.Data);
  const char *FromBase = static_cast<const char *>(From.Data);
  forEachRow(To, From, [&](int64_t ToOffset, int64_t FromOffset) {
    char *Out = ToBase + ToOffset * Size;
    const char *In = FromBase + FromOffset * Size;
    if (Add) {
      if (To.Type == DType::Float32)
        addRun<float>(Out, In, Inner, ToStep, FromStep);
      else if (To.Type == DType::Float64)
        addRun<double>(Out, In, Inner, ToStep, FromStep);
      else
        fail("box copy", std::string("cannot add ") + dtypeName(To.Type));
      return;
    }
    if (ToStep == 1 && FromStep == 1) {
      std::memcpy(Out, In, Inner * Size);
      return;
    }
    for (int64_t I = 0; I < Inner; ++I)
      std::memcpy(Out + I * ToStep * Size, In + I * FromStep * Size, Size);
  });
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
