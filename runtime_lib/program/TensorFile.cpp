//===- runtime_lib/program/TensorFile.cpp - Tensors as TensorProto files --===//
//
// The TensorProto decoder and encoder (the wire format: ProtoWire.cpp). The
// decoder follows onnx.proto: raw_data holds little-endian elements; without
// it the values are in the typed field ONNX assigns to the element type
// (float_data, double_data, int64_data, uint64_data for UINT32/UINT64, and
// int32_data for narrower integers, bool and the 16-bit floats' bits).
//
//===----------------------------------------------------------------------===//
#include "TensorFile.h"
#include "../Error.h"
#include "AtomicFile.h"
#include <limits>

namespace onnx2soap::rt::program {

using wire::Field;
using wire::WireType;

//===----------------------------------------------------------------------===//
// Element types
//===----------------------------------------------------------------------===//

// TensorProto.DataType numbers (onnx.proto).
namespace onnx_type {
enum : int32_t {
  Undefined = 0,
  Float = 1,
  UInt8 = 2,
  Int8 = 3,
  UInt16 = 4,
  Int16 = 5,
  Int32 = 6,
  Int64 = 7,
  String = 8,
  Bool = 9,
  Float16 = 10,
  Double = 11,
  UInt32 = 12,
  UInt64 = 13,
  Complex64 = 14,
  Complex128 = 15,
  BFloat16 = 16,
};
} // namespace onnx_type

int32_t onnxDataType(DType Type) {
  switch (Type) {
  case DType::Float32:
    return onnx_type::Float;
  case DType::Float16:
    return onnx_type::Float16;
  case DType::BFloat16:
    return onnx_type::BFloat16;
  case DType::Float64:
    return onnx_type::Double;
  case DType::Int8:
    return onnx_type::Int8;
  case DType::UInt8:
    return onnx_type::UInt8;
  case DType::Int16:
    return onnx_type::Int16;
  case DType::UInt16:
    return onnx_type::UInt16;
  case DType::Int32:
    return onnx_type::Int32;
  case DType::UInt32:
    return onnx_type::UInt32;
  case DType::Int64:
    return onnx_type::Int64;
  case DType::UInt64:
    return onnx_type::UInt64;
  case DType::Bool:
    return onnx_type::Bool;
  }
  return onnx_type::Undefined;
}

std::optional<DType> dtypeFromOnnx(int32_t OnnxType) {
  switch (OnnxType) {
  case onnx_type::Float:
    return DType::Float32;
  case onnx_type::UInt8:
    return DType::UInt8;
  case onnx_type::Int8:
    return DType::Int8;
  case onnx_type::UInt16:
    return DType::UInt16;
  case onnx_type::Int16:
    return DType::Int16;
  case onnx_type::Int32:
    return DType::Int32;
  case onnx_type::Int64:
    return DType::Int64;
  case onnx_type::Bool:
    return DType::Bool;
  case onnx_type::Float16:
    return DType::Float16;
  case onnx_type::Double:
    return DType::Float64;
  case onnx_type::UInt32:
    return DType::UInt32;
  case onnx_type::UInt64:
    return DType::UInt64;
  case onnx_type::BFloat16:
    return DType::BFloat16;
  default:
    return std::nullopt;
  }
}

std::string onnxDataTypeName(int32_t OnnxType) {
  static const char *const Names[] = {
      "UNDEFINED",      "FLOAT",        "UINT8",          "INT8",
      "UINT16",         "INT16",        "INT32",          "INT64",
      "STRING",         "BOOL",         "FLOAT16",        "DOUBLE",
      "UINT32",         "UINT64",       "COMPLEX64",      "COMPLEX128",
      "BFLOAT16",       "FLOAT8E4M3FN", "FLOAT8E4M3FNUZ", "FLOAT8E5M2",
      "FLOAT8E5M2FNUZ", "UINT4",        "INT4",           "FLOAT4E2M1"};
  if (OnnxType >= 0 &&
      OnnxType < static_cast<int32_t>(sizeof(Names) / sizeof(Names[0])))
    return Names[OnnxType];
  return "<type " + std::to_string(OnnxType) + ">";
}

int64_t HostTensor::numElements() const {
  int64_t Count = 1;
  for (int64_t D : Dims)
    Count *= D;
  return Count;
}

//===----------------------------------------------------------------------===//
// Decoding
//===----------------------------------------------------------------------===//

namespace {

// TensorProto field numbers (onnx.proto).
enum TensorField : uint32_t {
  Dims = 1,
  DataType = 2,
  Segment = 3,
  FloatData = 4,
  Int32Data = 5,
  StringData = 6,
  Int64Data = 7,
  Name = 8,
  RawData = 9,
  DoubleData = 10,
  UInt64Data = 11,
  ExternalData = 13,
  DataLocation = 14,
};

const char *typedFieldName(uint32_t Number) {
  switch (Number) {
  case FloatData:
    return "float_data";
  case Int32Data:
    return "int32_data";
  case Int64Data:
    return "int64_data";
  case DoubleData:
    return "double_data";
  case UInt64Data:
    return "uint64_data";
  default:
    return "?";
  }
}

/// What the decoder gathers before it knows the element type.
struct RawFields {
  std::string Name;
  int32_t DataType = onnx_type::Undefined;
  std::vector<int64_t> Dims;
  bool HasRaw = false;
  const char *Raw = nullptr;
  size_t RawSize = 0;
  /// float_data / double_data: the little-endian bytes of the values.
  std::string Fixed32Bytes, Fixed64Bytes;
  /// int32_data, int64_data, uint64_data as read from the varints.
  std::vector<uint64_t> Int32Values, Int64Values, UInt64Values;
  bool External = false;
  std::string ExternalLocation, ExternalOffset, ExternalLength;
  bool HasTypedValues() const {
    return !Fixed32Bytes.empty() || !Fixed64Bytes.empty() ||
           !Int32Values.empty() || !Int64Values.empty() ||
           !UInt64Values.empty();
  }
};

void expectWireType(const wire::Reader &R, const Field &F, WireType Type,
                    const char *FieldName) {
  if (F.Type != Type)
    R.malformed(F.Begin, std::string("field ") + std::to_string(F.Number) +
                             " (" + FieldName + ") has wire type " +
                             std::to_string(static_cast<int>(F.Type)) +
                             ", expected " +
                             std::to_string(static_cast<int>(Type)));
}

/// A repeated varint field, packed or not.
void readRepeatedVarint(const wire::Reader &R, const Field &F,
                        const char *FieldName, std::vector<uint64_t> &Out) {
  if (F.Type == WireType::Varint) {
    Out.push_back(F.Value);
    return;
  }
  expectWireType(R, F, WireType::LengthDelimited, FieldName);
  size_t Pos = F.Data - R.data();
  size_t End = Pos + F.Size;
  while (Pos < End)
    Out.push_back(R.readVarint(Pos, End));
}

/// A repeated fixed-width field, packed or not, as its little-endian bytes.
void readRepeatedFixed(const wire::Reader &R, const Field &F,
                       const char *FieldName, WireType Width,
                       std::string &Out) {
  size_t Size = Width == WireType::Fixed32 ? 4 : 8;
  if (F.Type != Width) {
    expectWireType(R, F, WireType::LengthDelimited, FieldName);
    if (F.Size % Size != 0)
      R.malformed(F.Begin, std::string("packed ") + FieldName + " holds " +
                               std::to_string(F.Size) +
                               " bytes, not a multiple of " +
                               std::to_string(Size));
  }
  Out.append(F.Data, F.Size);
}

RawFields readFields(const char *Data, size_t Size, const std::string &Where) {
  wire::Reader R(Data, Size, Where);
  RawFields Out;
  std::vector<uint64_t> Dims;
  Field F;
  while (R.next(F)) {
    switch (F.Number) {
    case TensorField::Dims:
      readRepeatedVarint(R, F, "dims", Dims);
      break;
    case DataType:
      expectWireType(R, F, WireType::Varint, "data_type");
      Out.DataType = static_cast<int32_t>(F.Value);
      break;
    case Segment:
      R.fail("tensor has a segment; segmented tensors are not supported");
    case FloatData:
      readRepeatedFixed(R, F, "float_data", WireType::Fixed32,
                        Out.Fixed32Bytes);
      break;
    case DoubleData:
      readRepeatedFixed(R, F, "double_data", WireType::Fixed64,
                        Out.Fixed64Bytes);
      break;
    case Int32Data:
      readRepeatedVarint(R, F, "int32_data", Out.Int32Values);
      break;
    case Int64Data:
      readRepeatedVarint(R, F, "int64_data", Out.Int64Values);
      break;
    case UInt64Data:
      readRepeatedVarint(R, F, "uint64_data", Out.UInt64Values);
      break;
    case StringData:
      R.fail("tensor holds strings (string_data); string tensors are not "
             "supported");
    case TensorField::Name:
      expectWireType(R, F, WireType::LengthDelimited, "name");
      Out.Name.assign(F.Data, F.Size);
      break;
    case RawData:
      expectWireType(R, F, WireType::LengthDelimited, "raw_data");
      Out.HasRaw = true;
      Out.Raw = F.Data;
      Out.RawSize = F.Size;
      break;
    case ExternalData: {
      expectWireType(R, F, WireType::LengthDelimited, "external_data");
      // StringStringEntryProto: key = 1, value = 2.
      wire::Reader Entry = R.nested(F);
      std::string Key, Value;
      Field E;
      while (Entry.next(E)) {
        if (E.Number == 1 && E.Type == WireType::LengthDelimited)
          Key.assign(E.Data, E.Size);
        else if (E.Number == 2 && E.Type == WireType::LengthDelimited)
          Value.assign(E.Data, E.Size);
      }
      if (Key == "location")
        Out.ExternalLocation = Value;
      else if (Key == "offset")
        Out.ExternalOffset = Value;
      else if (Key == "length")
        Out.ExternalLength = Value;
      break;
    }
    case DataLocation:
      expectWireType(R, F, WireType::Varint, "data_location");
      Out.External = F.Value == 1; // DataLocation.EXTERNAL
      break;
    default:
      break; // doc_string, metadata_props and fields of later versions
    }
  }
  for (uint64_t D : Dims)
    Out.Dims.push_back(static_cast<int64_t>(D));
  return Out;
}

void putLittleEndian(std::vector<char> &Out, uint64_t Value, size_t Size) {
  for (size_t I = 0; I < Size; ++I)
    Out.push_back(static_cast<char>((Value >> (8 * I)) & 0xff));
}

} // namespace

namespace {

/// The name, element type and dims of a decoded TensorProto, checked; Count
/// gets the number of elements.
HostTensor checkedHeader(const RawFields &Fields, const std::string &Where,
                         uint64_t &Count) {
  std::string Tensor =
      Fields.Name.empty() ? "tensor" : "tensor '" + Fields.Name + "'";
  auto Fail = [&](const std::string &What) {
    fail(Where, Tensor + ": " + What);
  };
  if (Fields.DataType == onnx_type::Undefined)
    Fail("has no data_type");
  std::optional<DType> Type = dtypeFromOnnx(Fields.DataType);
  if (!Type)
    Fail("element type " + onnxDataTypeName(Fields.DataType) +
         " is not supported");
  HostTensor T;
  T.Name = Fields.Name;
  T.Type = *Type;
  T.Dims = Fields.Dims;
  size_t ElementSize = dtypeSize(*Type);
  Count = 1;
  const uint64_t MaxBytes = std::numeric_limits<int64_t>::max();
  for (int64_t D : T.Dims) {
    if (D < 0)
      Fail("has negative dim " + std::to_string(D));
    if (D != 0 && Count > MaxBytes / ElementSize / static_cast<uint64_t>(D))
      Fail("dims are too large");
    Count *= static_cast<uint64_t>(D);
  }
  return T;
}

} // namespace

/// The tensor a file's fields hold (its data in the file).
static HostTensor decodeFields(const RawFields &Fields,
                               const std::string &Where) {
  std::string Tensor =
      Fields.Name.empty() ? "tensor" : "tensor '" + Fields.Name + "'";
  auto Fail = [&](const std::string &What) {
    fail(Where, Tensor + ": " + What);
  };

  if (Fields.External)
    Fail("its data is in an external file" +
         (Fields.ExternalLocation.empty()
              ? std::string()
              : " ('" + Fields.ExternalLocation + "')") +
         "; only tensor files that hold their data are supported");
  uint64_t Count = 0;
  HostTensor T = checkedHeader(Fields, Where, Count);
  const std::optional<DType> Type = T.Type;
  size_t ElementSize = dtypeSize(T.Type);

  // Which typed field the element type's values belong in.
  uint32_t Expected = Int32Data;
  switch (*Type) {
  case DType::Float32:
    Expected = FloatData;
    break;
  case DType::Float64:
    Expected = DoubleData;
    break;
  case DType::Int64:
    Expected = Int64Data;
    break;
  case DType::UInt32:
  case DType::UInt64:
    Expected = UInt64Data;
    break;
  case DType::Float16:
  case DType::BFloat16:
  case DType::Int8:
  case DType::UInt8:
  case DType::Int16:
  case DType::UInt16:
  case DType::Int32:
  case DType::Bool:
    Expected = Int32Data;
    break;
  }
  const std::pair<uint32_t, size_t> Typed[] = {
      {FloatData, Fields.Fixed32Bytes.size() / 4},
      {DoubleData, Fields.Fixed64Bytes.size() / 8},
      {Int32Data, Fields.Int32Values.size()},
      {Int64Data, Fields.Int64Values.size()},
      {UInt64Data, Fields.UInt64Values.size()}};
  for (const auto &[Number, Values] : Typed) {
    if (Values == 0)
      continue;
    if (Fields.HasRaw)
      Fail(std::string("has both raw_data and ") + typedFieldName(Number));
    if (Number != Expected)
      Fail(std::string("holds ") + typedFieldName(Number) + ", but a " +
           onnxDataTypeName(Fields.DataType) + " tensor's values belong in " +
           typedFieldName(Expected));
  }

  if (Fields.HasRaw) {
    if (Fields.RawSize != Count * ElementSize)
      Fail("raw_data holds " + std::to_string(Fields.RawSize) + " bytes, but " +
           std::to_string(Count) + " elements of " + dtypeName(*Type) +
           " take " + std::to_string(Count * ElementSize));
    T.Bytes.assign(Fields.Raw, Fields.Raw + Fields.RawSize);
    return T;
  }

  size_t Given = 0;
  for (const auto &[Number, Values] : Typed)
    if (Number == Expected)
      Given = Values;
  if (Given != Count)
    Fail(std::string(typedFieldName(Expected)) + " holds " +
         std::to_string(Given) + " values, but the dims call for " +
         std::to_string(Count));
  T.Bytes.reserve(Count * ElementSize);
  switch (Expected) {
  case FloatData:
    T.Bytes.assign(Fields.Fixed32Bytes.begin(), Fields.Fixed32Bytes.end());
    break;
  case DoubleData:
    T.Bytes.assign(Fields.Fixed64Bytes.begin(), Fields.Fixed64Bytes.end());
    break;
  case Int64Data:
    for (uint64_t V : Fields.Int64Values)
      putLittleEndian(T.Bytes, V, 8);
    break;
  case UInt64Data:
    for (uint64_t V : Fields.UInt64Values)
      putLittleEndian(T.Bytes, V, ElementSize);
    break;
  default:
    // int32_data: the low bytes of each value (the bits of a 16-bit float),
    // and 0 or 1 for bool.
    for (uint64_t V : Fields.Int32Values)
      putLittleEndian(T.Bytes, *Type == DType::Bool ? (V != 0) : V,
                      ElementSize);
    break;
  }
  return T;
}

std::string formatDims(const std::vector<int64_t> &Dims) {
  std::string Text = "[";
  for (size_t I = 0; I < Dims.size(); ++I)
    Text += (I ? "," : "") + std::to_string(Dims[I]);
  return Text + "]";
}

HostTensor parseTensorProto(const char *Data, size_t Size,
                            const std::string &Where) {
  return decodeFields(readFields(Data, Size, Where), Where);
}

HostTensor readTensorFile(const std::string &Path) {
  std::vector<char> Bytes = readWholeFile(Path);
  return parseTensorProto(Bytes.data(), Bytes.size(), Path);
}

namespace {

/// A decimal external_data value ("offset", "length").
uint64_t externalNumber(const std::string &Text, const std::string &Where,
                        const char *Key) {
  uint64_t Value = 0;
  bool Ok = !Text.empty() && Text.size() <= 19;
  for (char Ch : Text)
    Ok = Ok && Ch >= '0' && Ch <= '9';
  if (Ok)
    Value = std::stoull(Text);
  else
    fail(Where, std::string("external_data ") + Key + " '" + Text +
                    "' is not a non-negative decimal number");
  return Value;
}

} // namespace

TensorFileRef openTensorFile(const std::string &Path) {
  std::vector<char> Bytes = readWholeFile(Path);
  RawFields Fields = readFields(Bytes.data(), Bytes.size(), Path);
  TensorFileRef Ref;
  if (!Fields.External) {
    Ref.Value = decodeFields(Fields, Path);
    return Ref;
  }
  uint64_t Count = 0;
  Ref.Value = checkedHeader(Fields, Path, Count);
  Ref.External = true;
  std::string Tensor =
      Fields.Name.empty() ? "tensor" : "tensor '" + Fields.Name + "'";
  auto Fail = [&](const std::string &What) {
    fail(Path, Tensor + ": " + What);
  };
  if (Fields.HasRaw || Fields.HasTypedValues())
    Fail("has external data and values in the file");
  const std::string &Location = Fields.ExternalLocation;
  if (Location.empty())
    Fail("external data without a location");
  // Like ONNX's checker: a location relative to the file's folder that
  // stays inside it.
  bool Escapes = Location[0] == '/' || Location == ".." ||
                 Location.rfind("../", 0) == 0 ||
                 Location.find("/../") != std::string::npos ||
                 (Location.size() >= 3 &&
                  Location.compare(Location.size() - 3, 3, "/..") == 0);
  if (Escapes)
    Fail("external data location '" + Location +
         "' must be a relative path inside the file's folder");
  size_t Slash = Path.rfind('/');
  Ref.DataPath = Slash == std::string::npos
                     ? Location
                     : Path.substr(0, Slash + 1) + Location;
  Ref.Offset = Fields.ExternalOffset.empty()
                   ? 0
                   : externalNumber(Fields.ExternalOffset, Path, "offset");
  uint64_t Needed = Count * dtypeSize(Ref.Value.Type);
  if (!Fields.ExternalLength.empty() &&
      externalNumber(Fields.ExternalLength, Path, "length") != Needed)
    Fail("external_data length " + Fields.ExternalLength + " bytes, but " +
         std::to_string(Count) + " elements of " + dtypeName(Ref.Value.Type) +
         " take " + std::to_string(Needed));
  uint64_t Available = fileSize(Ref.DataPath);
  if (Available < Ref.Offset || Available - Ref.Offset < Needed)
    Fail("external data file '" + Ref.DataPath + "' holds " +
         std::to_string(Available) + " bytes; the tensor needs " +
         std::to_string(Needed) + " from offset " + std::to_string(Ref.Offset));
  return Ref;
}

//===----------------------------------------------------------------------===//
// Encoding
//===----------------------------------------------------------------------===//

std::string serializeTensorProto(const HostTensor &T) {
  uint64_t Count = 1;
  for (int64_t D : T.Dims) {
    if (D < 0)
      fail("tensor '" + T.Name + "'", "negative dim " + std::to_string(D));
    Count *= static_cast<uint64_t>(D);
  }
  if (T.Bytes.size() != Count * dtypeSize(T.Type))
    fail("tensor '" + T.Name + "'",
         "holds " + std::to_string(T.Bytes.size()) + " bytes, but " +
             std::to_string(Count) + " elements of " + dtypeName(T.Type) +
             " take " + std::to_string(Count * dtypeSize(T.Type)));
  std::string Out;
  Out.reserve(T.Bytes.size() + T.Name.size() + 16 + 11 * T.Dims.size());
  // dims is a proto2 repeated int64 without [packed]: one tag per value.
  for (int64_t D : T.Dims) {
    wire::appendTag(Out, TensorField::Dims, WireType::Varint);
    wire::appendVarint(Out, static_cast<uint64_t>(D));
  }
  wire::appendTag(Out, DataType, WireType::Varint);
  wire::appendVarint(Out, static_cast<uint64_t>(onnxDataType(T.Type)));
  if (!T.Name.empty())
    wire::appendBytesField(Out, TensorField::Name, T.Name.data(),
                           T.Name.size());
  wire::appendBytesField(Out, RawData, T.Bytes.data(), T.Bytes.size());
  return Out;
}

void writeTensorFile(const std::string &Path, const HostTensor &T) {
  std::string Bytes = serializeTensorProto(T);
  writeFileAtomically(Path, Bytes.data(), Bytes.size());
}

} // namespace onnx2soap::rt::program
