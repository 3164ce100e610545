//===- onnx_import/Initializers.h - Initializer data ------------*- C++ -*-===//
//
// Checks each initializer (type, dims, byte length, external-data location)
// and turns it into an IR tensor that borrows its bytes from the mapped model
// or names its slice of an external-data file, without reading weights.
//
//===----------------------------------------------------------------------===//
#ifndef ONNX2SOAP_ONNX_IMPORT_INITIALIZERS_H
#define ONNX2SOAP_ONNX_IMPORT_INITIALIZERS_H

#include "onnx_import/ModelReader.h"
#include "onnx_import/NodeContext.h"

namespace onnx2soap::onnx_import {

/// Adds the initializer to the graph and the value table. Integer and bool
/// initializers small enough to fold also get their values (read from the
/// file or from external data when it is present).
llvm::Error addInitializer(ImportState &State, const ModelFile &File,
                           const Initializer &Init, llvm::StringRef ModelDir);

/// Resolves an external-data location against ModelDir, refusing absolute
/// paths and paths that leave the folder.
llvm::Expected<std::string> resolveExternalPath(llvm::StringRef Location,
                                                llvm::StringRef ModelDir,
                                                llvm::StringRef TensorName);

} // namespace onnx2soap::onnx_import

#endif
