//===- runtime_lib/program/TensorFile.h - TensorProto files -*- C++ -*-----===//
//
// A generated program reads its training data and writes its outputs as ONNX
// TensorProto files (the ONNX backend-test layout, what `onnx2soap run` and
// `train` take), but links neither protobuf nor ONNX: a small reader of the
// protobuf wire format (varints, length-delimited and fixed-width fields,
// every read bounds-checked) decodes the few TensorProto fields it needs and
// skips the rest. Malformed bytes are a RuntimeError naming the file and the
// byte offset, never a crash. The wire reader (ProtoWire.h) is also what
// rewrites the initializers of a model (OnnxWeights.h).
//
//===----------------------------------------------------------------------===//
#ifndef ONNX2SOAP_RUNTIME_PROGRAM_TENSORFILE_H
#define ONNX2SOAP_RUNTIME_PROGRAM_TENSORFILE_H

#include "../Types.h"
#include "ProtoWire.h"
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace onnx2soap::rt::program {

/// A tensor in host memory: dense row-major little-endian element data.
struct HostTensor {
  std::string Name;
  DType Type = DType::Float32;
  std::vector<int64_t> Dims;
  std::vector<char> Bytes;

  /// Product of Dims (1 for a scalar).
  int64_t numElements() const;
};

/// Dims as messages spell them: "[8,3,32,32]".
std::string formatDims(const std::vector<int64_t> &Dims);

/// ONNX's TensorProto.DataType number for Type (FLOAT = 1, ...).
int32_t onnxDataType(DType Type);
/// The DType of an ONNX data type, or nullopt for those the runtime has no
/// type for (strings, complex, float8, 4-bit).
std::optional<DType> dtypeFromOnnx(int32_t OnnxType);
/// ONNX's name of a data type ("FLOAT", "STRING", "<type 99>" if unknown).
std::string onnxDataTypeName(int32_t OnnxType);

/// Decodes a serialized TensorProto. Where prefixes error messages (the file
/// name). Strings, segments and external data are rejected, as are dims that
/// disagree with the amount of data.
HostTensor parseTensorProto(const char *Data, size_t Size,
                            const std::string &Where);
/// Reads and decodes the TensorProto file at Path.
HostTensor readTensorFile(const std::string &Path);

/// A TensorProto file opened for its data: the whole value when the file
/// holds it; for ONNX external data (data_location EXTERNAL, with
/// external_data "location", optional "offset" and "length") only the
/// header (Value.Bytes empty) and where the raw little-endian bytes lie, so
/// a reader can take just the rows it needs from a file of any size. The
/// location must be relative and stay inside the .pb file's folder; the data
/// file must be long enough.
struct TensorFileRef {
  HostTensor Value;
  bool External = false;
  std::string DataPath; ///< the location, resolved against Path's folder
  uint64_t Offset = 0;
};
TensorFileRef openTensorFile(const std::string &Path);
/// The TensorProto of T: dims, data_type, name (when not empty), raw_data,
/// in field order, which is also how protobuf itself serializes it.
std::string serializeTensorProto(const HostTensor &T);
/// Writes serializeTensorProto(T) to Path atomically (AtomicFile.h).
void writeTensorFile(const std::string &Path, const HostTensor &T);

} // namespace onnx2soap::rt::program

#endif
