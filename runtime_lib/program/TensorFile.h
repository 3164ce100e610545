//===- runtime_lib/program/TensorFile.h - TensorProto files -*- C++ -*-----===//
//
// A generated program reads its training data and writes its outputs as ONNX
// TensorProto files (the ONNX backend-test layout, what `onnx2soap run` and
// `train` take), but links neither protobuf nor ONNX: a small reader of the
// protobuf wire format (varints, length-delimited and fixed-width fields,
// every read bounds-checked) decodes the few TensorProto fields it needs and
// skips the rest. Malformed bytes are a RuntimeError naming the file and the
// byte offset, never a crash. The wire reader is also what rewrites the
// initializers of a model (OnnxWeights.h).
//
//===----------------------------------------------------------------------===//
#ifndef ONNX2SOAP_RUNTIME_PROGRAM_TENSORFILE_H
#define ONNX2SOAP_RUNTIME_PROGRAM_TENSORFILE_H

#include "../Types.h"
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

/// The protobuf wire format, as much of it as ONNX files need.
namespace wire {

enum class WireType : uint8_t {
  Varint = 0,
  Fixed64 = 1,
  LengthDelimited = 2,
  Fixed32 = 5,
};

/// One field of a message.
struct Field {
  uint32_t Number = 0;
  WireType Type = WireType::Varint;
  /// The value of a varint field, or the bits of a fixed-width one.
  uint64_t Value = 0;
  /// The payload of a length-delimited field.
  const char *Data = nullptr;
  size_t Size = 0;
  /// Where the whole field (tag included) lies in the reader's bytes.
  size_t Begin = 0;
  size_t End = 0;
};

/// Walks the fields of one message. Every malformation (a varint longer than
/// ten bytes or cut off, a length past the end, a group or unknown wire type,
/// field number 0) throws RuntimeError "<Where>: malformed protobuf at byte
/// N: ...", N counted from the start of the outermost message.
class Reader {
public:
  /// BaseOffset: where Data lies in the outermost message (for messages).
  Reader(const char *Data, size_t Size, const std::string &Where,
         size_t BaseOffset = 0);

  /// Reads the next field into F; false at the end of the message.
  bool next(Field &F);
  /// A reader over the payload of a length-delimited field F of this one.
  Reader nested(const Field &F) const;
  /// Throws "<Where>: <What>" (with this reader's Where).
  [[noreturn]] void fail(const std::string &What) const;
  /// Throws the malformed-protobuf error at offset Pos of this reader.
  [[noreturn]] void malformed(size_t Pos, const std::string &What) const;
  /// Reads a varint at Pos (advanced past it), bounded by End.
  uint64_t readVarint(size_t &Pos, size_t End) const;

  const char *data() const { return Data; }
  size_t size() const { return Size; }
  const std::string &where() const { return Where; }

private:
  const char *Data;
  size_t Size;
  std::string Where;
  size_t BaseOffset;
  size_t Pos = 0;
};

void appendVarint(std::string &Out, uint64_t Value);
void appendTag(std::string &Out, uint32_t Number, WireType Type);
/// Tag, length and payload of a length-delimited field.
void appendBytesField(std::string &Out, uint32_t Number, const char *Data,
                      size_t Size);

} // namespace wire

} // namespace onnx2soap::rt::program

#endif
