//===- runtime_lib/program/ProtoWire.h - Protobuf wire format ---*- C++ -*-===//
//
// As much of protobuf's wire format as ONNX files need, without protobuf: a
// bounds-checked reader of one message's fields (varints, length-delimited
// and fixed-width fields) and the appends that encode them. TensorFile.h
// decodes and encodes TensorProtos with it; OnnxWeights.h rewrites a model's
// initializers.
//
//===----------------------------------------------------------------------===//
#ifndef ONNX2SOAP_RUNTIME_PROGRAM_PROTOWIRE_H
#define ONNX2SOAP_RUNTIME_PROGRAM_PROTOWIRE_H

#include <cstddef>
#include <cstdint>
#include <string>

namespace onnx2soap::rt::program {

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
