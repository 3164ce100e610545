//===- runtime_lib/program/ProtoWire.cpp - The protobuf wire format -------===//
//
// See ProtoWire.h. Offsets in errors count from the start of the outermost
// message, so that a user can find the bad byte in the file.
//
//===----------------------------------------------------------------------===//
#include "ProtoWire.h"
#include "../Error.h"

namespace onnx2soap::rt::program {

namespace wire {

Reader::Reader(const char *Data, size_t Size, const std::string &Where,
               size_t BaseOffset)
    : Data(Data), Size(Size), Where(Where), BaseOffset(BaseOffset) {}

void Reader::fail(const std::string &What) const { rt::fail(Where, What); }

void Reader::malformed(size_t At, const std::string &What) const {
  rt::fail(Where, "malformed protobuf at byte " +
                      std::to_string(BaseOffset + At) + ": " + What);
}

uint64_t Reader::readVarint(size_t &At, size_t End) const {
  uint64_t Value = 0;
  size_t Start = At;
  for (int Shift = 0; Shift < 64; Shift += 7) {
    if (At >= End)
      malformed(Start, "varint runs past the end");
    uint8_t Byte = static_cast<uint8_t>(Data[At++]);
    Value |= static_cast<uint64_t>(Byte & 0x7f) << Shift;
    if (!(Byte & 0x80))
      return Value;
  }
  malformed(Start, "varint longer than 10 bytes");
}

bool Reader::next(Field &F) {
  if (Pos >= Size)
    return false;
  F = Field();
  F.Begin = Pos;
  uint64_t Tag = readVarint(Pos, Size);
  uint64_t Number = Tag >> 3;
  if (Number == 0 || Number > 0x1fffffff)
    malformed(F.Begin, "invalid field number " + std::to_string(Number));
  F.Number = static_cast<uint32_t>(Number);
  switch (Tag & 7) {
  case 0:
    F.Type = WireType::Varint;
    F.Value = readVarint(Pos, Size);
    break;
  case 1:
  case 5: {
    size_t Width = (Tag & 7) == 1 ? 8 : 4;
    F.Type = Width == 8 ? WireType::Fixed64 : WireType::Fixed32;
    if (Size - Pos < Width)
      malformed(F.Begin, "field " + std::to_string(Number) +
                             ": fixed-width value runs past the end");
    for (size_t I = 0; I < Width; ++I)
      F.Value |= static_cast<uint64_t>(static_cast<uint8_t>(Data[Pos + I]))
                 << (8 * I);
    F.Data = Data + Pos;
    F.Size = Width;
    Pos += Width;
    break;
  }
  case 2: {
    F.Type = WireType::LengthDelimited;
    uint64_t Length = readVarint(Pos, Size);
    if (Length > Size - Pos)
      malformed(F.Begin, "field " + std::to_string(Number) + ": length " +
                             std::to_string(Length) + " runs past the end (" +
                             std::to_string(Size - Pos) + " bytes left)");
    F.Data = Data + Pos;
    F.Size = static_cast<size_t>(Length);
    Pos += F.Size;
    break;
  }
  default:
    malformed(F.Begin, "field " + std::to_string(Number) +
                           " has unsupported wire type " +
                           std::to_string(Tag & 7));
  }
  F.End = Pos;
  return true;
}

Reader Reader::nested(const Field &F) const {
  return Reader(F.Data, F.Size, Where, BaseOffset + (F.Data - Data));
}

void appendVarint(std::string &Out, uint64_t Value) {
  while (Value >= 0x80) {
    Out.push_back(static_cast<char>((Value & 0x7f) | 0x80));
    Value >>= 7;
  }
  Out.push_back(static_cast<char>(Value));
}

void appendTag(std::string &Out, uint32_t Number, WireType Type) {
  appendVarint(Out, (static_cast<uint64_t>(Number) << 3) |
                        static_cast<uint64_t>(Type));
}

void appendBytesField(std::string &Out, uint32_t Number, const char *Data,
                      size_t Size) {
  appendTag(Out, Number, WireType::LengthDelimited);
  appendVarint(Out, Size);
  Out.append(Data, Size);
}

} // namespace wire

} // namespace onnx2soap::rt::program
