//===- codegen/EmbeddedFiles.h - Sources carried by the binary -*- C++ -*-===//
//
// The runtime_lib sources and templates/ files a generated project copies,
// compiled into onnx2soap (cmake/EmbedFiles.cmake) so that the compiler works
// from any install location and every project gets exactly the runtime the
// compiler was built with.
//
//===----------------------------------------------------------------------===//
#ifndef ONNX2SOAP_CODEGEN_EMBEDDEDFILES_H
#define ONNX2SOAP_CODEGEN_EMBEDDEDFILES_H

#include <cstddef>

namespace onnx2soap::codegen {

struct EmbeddedFile {
  /// "runtime_lib/cpu/Pool.cpp", "templates/main.cpp", ...
  const char *Path;
  const char *Data;
  size_t Size;
};

/// Sorted by Path.
extern const EmbeddedFile EmbeddedFiles[];
extern const size_t NumEmbeddedFiles;

} // namespace onnx2soap::codegen

#endif
