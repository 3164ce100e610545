//===- onnx_import/ModelReader.h - Reading .onnx files without copying weights
//-*- C++ -*-===//
//
// Parses an ONNX ModelProto from a memory-mapped file with libprotobuf, but
// leaves every initializer's raw_data in the mapping: the reader walks the
// wire format of ModelProto -> GraphProto -> TensorProto with protobuf's
// CodedInputStream, hands every other field to the generated classes, and
// records where each raw_data lies. A 100 MB model costs its graph's few
// hundred KB, and planning never touches the weight pages.
//
//===----------------------------------------------------------------------===//
#ifndef ONNX2SOAP_ONNX_IMPORT_MODELREADER_H
#define ONNX2SOAP_ONNX_IMPORT_MODELREADER_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/MemoryBuffer.h"
#include <memory>
#include <onnx/onnx_pb.h>
#include <vector>

namespace onnx2soap::onnx_import {

/// One graph initializer: its metadata (raw_data cleared) and its bytes.
struct Initializer {
  onnx::TensorProto Meta;
  /// Slice of the model buffer; empty when the tensor has no raw_data.
  llvm::StringRef RawData;
  bool HasRawData = false;
};

struct ModelFile {
  std::shared_ptr<llvm::MemoryBuffer> Buffer;
  /// The model with its graph, but with no initializers in the graph.
  onnx::ModelProto Model;
  std::vector<Initializer> Initializers;
};

/// Memory-maps Path and reads it.
llvm::Expected<ModelFile> readModelFile(llvm::StringRef Path);
/// Reads a model held in Buffer (shared with the returned ModelFile).
llvm::Expected<ModelFile> readModel(std::shared_ptr<llvm::MemoryBuffer> Buffer);

} // namespace onnx2soap::onnx_import

#endif
