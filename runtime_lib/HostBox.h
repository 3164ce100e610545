//===- runtime_lib/HostBox.h - Boxes of dense host tensors ------*- C++ -*-===//
//
// Cutting a rectangular region ("box") out of a dense row-major tensor in
// host memory, and writing one back: the code generator cuts weight shards
// this way, a generated program its share of the batch and the trained
// weights it gathers. Boxes in backend memory are Backend::copyBox.
//
//===----------------------------------------------------------------------===//
#ifndef ONNX2SOAP_RUNTIME_HOSTBOX_H
#define ONNX2SOAP_RUNTIME_HOSTBOX_H

#include <cstddef>
#include <cstdint>
#include <vector>

namespace onnx2soap::rt {

/// Copies the box [Origin, Origin + Extent) of a dense host tensor of dims
/// WholeDims into a dense Box.
void copyHostBox(char *Box, const char *Whole,
                 const std::vector<int64_t> &WholeDims, const int64_t *Origin,
                 const int64_t *Extent, int Dims, size_t ElementSize);
/// The reverse: writes a dense Box into the whole tensor.
void pasteHostBox(char *Whole, const char *Box,
                  const std::vector<int64_t> &WholeDims, const int64_t *Origin,
                  const int64_t *Extent, int Dims, size_t ElementSize);

} // namespace onnx2soap::rt

#endif
