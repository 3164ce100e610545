//===- runtime_lib/program/BoxCopy.h - Copying boxes of tensors -*- C++ -*-===//
//
// Moving rectangular regions ("boxes") between buffers: gathering a
// partition's input from its producers' outputs, packing and unpacking
// messages, adding gradient regions back. Device boxes go through the
// backend; host boxes (the batch, gathered weights) are plain loops.
//
//===----------------------------------------------------------------------===//
#ifndef ONNX2SOAP_RUNTIME_PROGRAM_BOXCOPY_H
#define ONNX2SOAP_RUNTIME_PROGRAM_BOXCOPY_H

#include "../Backend.h"
#include <vector>

namespace onnx2soap::rt::program {

/// To = From, or To += From when Add (floating-point types only): two
/// strided views of the same type and dims in backend memory.
void copyBox(Backend &B, const TensorView &To, const TensorView &From,
             bool Add);

/// Copies the box [Origin, Origin + Extent) of a dense host tensor of dims
/// WholeDims into a dense Box.
void copyHostBox(char *Box, const char *Whole,
                 const std::vector<int64_t> &WholeDims, const int64_t *Origin,
                 const int64_t *Extent, int Dims, size_t ElementSize);
/// The reverse: writes a dense Box into the whole tensor.
void pasteHostBox(char *Whole, const char *Box,
                  const std::vector<int64_t> &WholeDims, const int64_t *Origin,
                  const int64_t *Extent, int Dims, size_t ElementSize);

} // namespace onnx2soap::rt::program

#endif
