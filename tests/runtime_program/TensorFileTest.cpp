//===- tests/runtime_program/TensorFileTest.cpp - TensorProto files -------===//
//
// The protobuf-free TensorProto reader against libprotobuf and the CLI's way
// of reading .pb files (raw_data, or the importer's decodeTensor), on the
// training fixtures, the ONNX backend-test data and hand-made encodings;
// round trips through both; and malformed bytes, which must be errors.
//
//===----------------------------------------------------------------------===//
#include "runtime_lib/program/TensorFile.h"
#include "onnx_import/ConstTensor.h"
#include "runtime_lib/Error.h"
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>
#include <random>
#include <set>

using namespace onnx2soap::rt;
using namespace onnx2soap::rt::program;
namespace fs = std::filesystem;

namespace {

std::string fileBytes(const fs::path &Path) {
  std::ifstream In(Path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(In), {});
}

/// What cli/TensorFiles.cpp's tensorBytes gives for T.
std::optional<std::vector<char>> cliBytes(const onnx::TensorProto &T) {
  if (T.has_raw_data())
    return std::vector<char>(T.raw_data().begin(), T.raw_data().end());
  auto Decoded = onnx2soap::onnx_import::decodeTensor(T, {}, false);
  if (!Decoded) {
    llvm::consumeError(Decoded.takeError());
    return std::nullopt;
  }
  return Decoded->toBytes();
}

/// Parses Bytes with both readers and expects the same tensor.
void expectAgrees(const std::string &Bytes, const std::string &Where) {
  onnx::TensorProto Proto;
  ASSERT_TRUE(Proto.ParseFromString(Bytes)) << Where;
  std::optional<std::vector<char>> Expected = cliBytes(Proto);
  ASSERT_TRUE(Expected) << Where;
  HostTensor T = parseTensorProto(Bytes.data(), Bytes.size(), Where);
  EXPECT_EQ(T.Name, Proto.name()) << Where;
  EXPECT_EQ(onnxDataType(T.Type), Proto.data_type()) << Where;
  EXPECT_EQ(T.Dims,
            std::vector<int64_t>(Proto.dims().begin(), Proto.dims().end()))
      << Where;
  EXPECT_EQ(T.Bytes, *Expected) << Where;
}

std::string errorOf(const std::string &Bytes) {
  try {
    parseTensorProto(Bytes.data(), Bytes.size(), "t.pb");
  } catch (const RuntimeError &E) {
    return E.what();
  }
  return "<no error>";
}

class TempFolder {
public:
  TempFolder() {
    std::string Pattern =
        (fs::temp_directory_path() / "o2s-tensorfile-XXXXXX").string();
    Path = ::mkdtemp(Pattern.data());
  }
  ~TempFolder() { fs::remove_all(Path); }
  fs::path Path;
};

const DType AllTypes[] = {DType::Float32, DType::Float16, DType::BFloat16,
                          DType::Float64, DType::Int8,    DType::UInt8,
                          DType::Int16,   DType::UInt16,  DType::Int32,
                          DType::UInt32,  DType::Int64,   DType::UInt64,
                          DType::Bool};

} // namespace

TEST(TensorFile, DTypeMappingMatchesTheImporter) {
  for (DType Type : AllTypes) {
    int32_t Onnx = onnxDataType(Type);
    ASSERT_TRUE(onnx::TensorProto::DataType_IsValid(Onnx));
    EXPECT_EQ(dtypeFromOnnx(Onnx), Type);
    auto Ir = onnx2soap::onnx_import::dtypeFromOnnx(Onnx);
    ASSERT_TRUE(Ir);
    EXPECT_STREQ(dtypeName(Type),
                 dtypeName(static_cast<DType>(static_cast<int>(*Ir))));
    EXPECT_EQ(onnxDataTypeName(Onnx),
              onnx::TensorProto::DataType_Name(
                  static_cast<onnx::TensorProto::DataType>(Onnx)));
  }
  EXPECT_FALSE(dtypeFromOnnx(onnx::TensorProto::STRING));
  EXPECT_FALSE(dtypeFromOnnx(onnx::TensorProto::COMPLEX64));
  EXPECT_FALSE(dtypeFromOnnx(0));
}

TEST(TensorFile, TrainingFixturesAgreeWithProtobuf) {
  int Files = 0;
  for (const auto &Entry : fs::directory_iterator(
           fs::path(ONNX2SOAP_SOURCE_DIR) / "tests" / "fixtures")) {
    if (!Entry.is_directory())
      continue;
    for (const char *Name :
         {"input_0.pb", "labels.pb", "expected_output_0.pb"}) {
      fs::path Path = Entry.path() / Name;
      if (!fs::exists(Path))
        continue;
      expectAgrees(fileBytes(Path), Path.string());
      HostTensor FromFile = readTensorFile(Path.string());
      EXPECT_FALSE(FromFile.Bytes.empty()) << Path;
      ++Files;
    }
  }
  EXPECT_GE(Files, 15);
}

// Every tensor of the ONNX node tests that protobuf and the importer can
// read, which covers every element type the runtime has.
TEST(TensorFile, OnnxNodeTestDataAgreesWithProtobuf) {
  fs::path Root = fs::path(ONNX2SOAP_TESTDATA_DIR) / "node";
  if (!fs::exists(Root))
    GTEST_SKIP() << Root << " is not installed";
  std::set<DType> Seen;
  int Files = 0;
  for (const auto &Test : fs::directory_iterator(Root)) {
    fs::path Set = Test.path() / "test_data_set_0";
    if (!fs::exists(Set))
      continue;
    for (const auto &File : fs::directory_iterator(Set)) {
      std::string Bytes = fileBytes(File.path());
      onnx::TensorProto Proto;
      // Sequences and optionals share the folder; they are no tensors.
      if (!Proto.ParseFromString(Bytes) || !dtypeFromOnnx(Proto.data_type()) ||
          !cliBytes(Proto))
        continue;
      expectAgrees(Bytes, File.path().string());
      Seen.insert(*dtypeFromOnnx(Proto.data_type()));
      ++Files;
    }
  }
  EXPECT_GE(Files, 1000);
  // This data's BFLOAT16 tests store their tensors as UINT16; bfloat16 is
  // covered by the typed-field and round-trip tests.
  for (DType Type : AllTypes) {
    if (Type != DType::BFloat16) {
      EXPECT_TRUE(Seen.count(Type)) << dtypeName(Type) << " not covered";
    }
  }
}

TEST(TensorFile, NamedNodeTestSamples) {
  fs::path Root = fs::path(ONNX2SOAP_TESTDATA_DIR) / "node";
  if (!fs::exists(Root))
    GTEST_SKIP() << Root << " is not installed";
  struct Sample {
    const char *File;
    DType Type;
  } Samples[] = {
      {"test_add_uint8/test_data_set_0/input_0.pb", DType::UInt8},
      {"test_bitshift_left_uint16/test_data_set_0/input_0.pb", DType::UInt16},
      {"test_bitshift_left_uint32/test_data_set_0/input_0.pb", DType::UInt32},
      {"test_bitshift_left_uint64/test_data_set_0/input_0.pb", DType::UInt64},
      {"test_cast_FLOAT16_to_DOUBLE/test_data_set_0/input_0.pb",
       DType::Float16},
      {"test_cast_FLOAT16_to_DOUBLE/test_data_set_0/output_0.pb",
       DType::Float64},
      {"test_and_bcast3v1d/test_data_set_0/input_0.pb", DType::Bool},
  };
  for (const Sample &S : Samples) {
    fs::path Path = Root / S.File;
    ASSERT_TRUE(fs::exists(Path)) << Path;
    HostTensor T = readTensorFile(Path.string());
    EXPECT_EQ(T.Type, S.Type) << Path;
    expectAgrees(fileBytes(Path), Path.string());
  }
  // A string tensor is refused by name.
  fs::path Strings =
      Root / "test_cast_FLOAT_to_STRING/test_data_set_0/output_0.pb";
  if (fs::exists(Strings)) {
    std::string Bytes = fileBytes(Strings);
    EXPECT_NE(errorOf(Bytes).find("string"), std::string::npos)
        << errorOf(Bytes);
  }
}

// Values in the typed fields, as exporters other than PyTorch write them.
TEST(TensorFile, TypedFieldsAgreeWithTheImporter) {
  std::deque<onnx::TensorProto> Protos;
  auto Make = [&](int32_t Type) -> onnx::TensorProto & {
    onnx::TensorProto &T = Protos.emplace_back();
    T.set_name("t" + std::to_string(Protos.size()));
    T.set_data_type(Type);
    T.add_dims(2);
    T.add_dims(2);
    return T;
  };
  {
    onnx::TensorProto &T = Make(onnx::TensorProto::FLOAT);
    for (float V : {1.5f, -2.0f, 0.25f, 1e-3f})
      T.add_float_data(V);
    onnx::TensorProto &D = Make(onnx::TensorProto::DOUBLE);
    for (double V : {1.5, -2.0, 0.1, 1e300})
      D.add_double_data(V);
    onnx::TensorProto &H = Make(onnx::TensorProto::FLOAT16);
    for (int V : {0x3c00, 0xc000, 0x7bff, 0x0001})
      H.add_int32_data(V);
    onnx::TensorProto &B = Make(onnx::TensorProto::BFLOAT16);
    for (int V : {0x3f80, 0xc000, 0x7f7f, 0x0001})
      B.add_int32_data(V);
    onnx::TensorProto &I64 = Make(onnx::TensorProto::INT64);
    for (int64_t V : {int64_t(1) << 40, int64_t(-1), int64_t(0), INT64_MIN})
      I64.add_int64_data(V);
    onnx::TensorProto &U64 = Make(onnx::TensorProto::UINT64);
    for (uint64_t V :
         {uint64_t(1) << 63, uint64_t(7), uint64_t(0), ~uint64_t(0)})
      U64.add_uint64_data(V);
    onnx::TensorProto &U32 = Make(onnx::TensorProto::UINT32);
    for (uint64_t V :
         {uint64_t(4000000000u), uint64_t(7), uint64_t(0), uint64_t(1)})
      U32.add_uint64_data(V);
    for (auto Type : {onnx::TensorProto::INT8, onnx::TensorProto::UINT8,
                      onnx::TensorProto::INT16, onnx::TensorProto::UINT16,
                      onnx::TensorProto::INT32, onnx::TensorProto::BOOL}) {
      onnx::TensorProto &T = Make(Type);
      bool Signed = Type == onnx::TensorProto::INT8 ||
                    Type == onnx::TensorProto::INT16 ||
                    Type == onnx::TensorProto::INT32;
      bool Bool = Type == onnx::TensorProto::BOOL;
      for (int V : {1, Bool ? 0 : Signed ? -5 : 5, 0, Bool ? 1 : 100})
        T.add_int32_data(V);
    }
  }
  for (const onnx::TensorProto &T : Protos)
    expectAgrees(T.SerializeAsString(), T.name());
}

// Encodings protobuf accepts but does not write: unpacked float_data,
// packed dims, repeated scalar fields (the last wins) and unknown fields.
TEST(TensorFile, AlternativeEncodingsAgreeWithProtobuf) {
  std::string Bytes;
  // dims packed: [2, 3]
  Bytes += std::string("\x0a\x02\x02\x03", 4);
  // data_type twice: INT64 then FLOAT (the last wins).
  Bytes += std::string("\x10\x07\x10\x01", 4);
  // float_data unpacked, six values 1..6.
  for (float V = 1; V <= 6; ++V) {
    Bytes += '\x25';
    Bytes.append(reinterpret_cast<const char *>(&V), 4);
  }
  // An unknown varint field 99 and an unknown length-delimited field 100.
  Bytes += std::string("\x98\x06\x05", 3);
  Bytes += std::string("\xa2\x06\x02xy", 5);
  // doc_string (12) and name (8).
  Bytes += std::string("\x62\x03"
                       "doc"
                       "\x42\x01"
                       "w",
                       8);
  expectAgrees(Bytes, "alternative");
  HostTensor T = parseTensorProto(Bytes.data(), Bytes.size(), "alternative");
  EXPECT_EQ(T.Dims, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(T.Type, DType::Float32);
  EXPECT_EQ(T.Name, "w");
}

TEST(TensorFile, RoundTrip) {
  std::mt19937 Rng(7);
  for (DType Type : AllTypes) {
    HostTensor T;
    T.Name = std::string("tensor_") + dtypeName(Type);
    T.Type = Type;
    T.Dims = {3, 1, 4};
    T.Bytes.resize(12 * dtypeSize(Type));
    for (char &B : T.Bytes)
      B = static_cast<char>(Type == DType::Bool ? Rng() % 2 : Rng());
    std::string Bytes = serializeTensorProto(T);

    HostTensor Back = parseTensorProto(Bytes.data(), Bytes.size(), "rt");
    EXPECT_EQ(Back.Name, T.Name);
    EXPECT_EQ(Back.Type, T.Type);
    EXPECT_EQ(Back.Dims, T.Dims);
    EXPECT_EQ(Back.Bytes, T.Bytes);

    onnx::TensorProto Proto;
    ASSERT_TRUE(Proto.ParseFromString(Bytes));
    EXPECT_EQ(Proto.name(), T.Name);
    EXPECT_EQ(Proto.data_type(), onnxDataType(Type));
    EXPECT_EQ(std::vector<int64_t>(Proto.dims().begin(), Proto.dims().end()),
              T.Dims);
    EXPECT_EQ(Proto.raw_data(), std::string(T.Bytes.begin(), T.Bytes.end()));
    // Field order is protobuf's own, so its serialization is the same.
    EXPECT_EQ(Proto.SerializeAsString(), Bytes) << dtypeName(Type);
  }
}

TEST(TensorFile, ScalarsEmptyTensorsAndNoName) {
  for (std::vector<int64_t> Dims :
       {std::vector<int64_t>{}, std::vector<int64_t>{0, 5}}) {
    HostTensor T;
    T.Type = DType::Int64;
    T.Dims = Dims;
    T.Bytes.resize(Dims.empty() ? 8 : 0, '\x01');
    std::string Bytes = serializeTensorProto(T);
    HostTensor Back = parseTensorProto(Bytes.data(), Bytes.size(), "s");
    EXPECT_EQ(Back.Dims, Dims);
    EXPECT_EQ(Back.Bytes, T.Bytes);
    EXPECT_EQ(Back.Name, "");
    expectAgrees(Bytes, "scalar");
  }
}

TEST(TensorFile, SerializeChecksTheByteCount) {
  HostTensor T;
  T.Name = "w";
  T.Dims = {2, 2};
  T.Bytes.resize(12);
  try {
    serializeTensorProto(T);
    FAIL() << "no error";
  } catch (const RuntimeError &E) {
    EXPECT_STREQ(E.what(), "tensor 'w': holds 12 bytes, but 4 elements of "
                           "f32 take 16");
  }
}

TEST(TensorFile, WriteAndReadFile) {
  TempFolder Dir;
  HostTensor T;
  T.Name = "logits";
  T.Type = DType::Float16;
  T.Dims = {2, 3};
  T.Bytes.assign(12, '\x3c');
  std::string Path = (Dir.Path / "out.pb").string();
  writeTensorFile(Path, T);
  HostTensor Back = readTensorFile(Path);
  EXPECT_EQ(Back.Bytes, T.Bytes);
  EXPECT_EQ(Back.Dims, T.Dims);
  EXPECT_EQ(
      std::distance(fs::directory_iterator(Dir.Path), fs::directory_iterator()),
      1);
  try {
    readTensorFile((Dir.Path / "missing.pb").string());
    FAIL() << "no error";
  } catch (const RuntimeError &E) {
    EXPECT_NE(std::string(E.what()).find("missing.pb"), std::string::npos);
  }
}

TEST(TensorFile, TensorsItCannotHoldAreErrors) {
  auto Base = [] {
    onnx::TensorProto T;
    T.set_name("x");
    T.set_data_type(onnx::TensorProto::FLOAT);
    T.add_dims(2);
    return T;
  };
  struct Case {
    const char *Name;
    std::function<void(onnx::TensorProto &)> Edit;
    const char *Error;
  } Cases[] = {
      {"External",
       [](onnx::TensorProto &T) {
         T.set_data_location(onnx::TensorProto::EXTERNAL);
         auto *E = T.add_external_data();
         E->set_key("location");
         E->set_value("x.bin");
       },
       "t.pb: tensor 'x': its data is in an external file ('x.bin'); only "
       "tensor files that hold their data are supported"},
      {"Strings",
       [](onnx::TensorProto &T) {
         T.set_data_type(onnx::TensorProto::STRING);
         T.add_string_data("a");
         T.add_string_data("b");
       },
       "t.pb: tensor holds strings (string_data); string tensors are not "
       "supported"},
      {"StringType",
       [](onnx::TensorProto &T) { T.set_data_type(onnx::TensorProto::STRING); },
       "t.pb: tensor 'x': element type STRING is not supported"},
      {"Complex",
       [](onnx::TensorProto &T) {
         T.set_data_type(onnx::TensorProto::COMPLEX64);
       },
       "t.pb: tensor 'x': element type COMPLEX64 is not supported"},
      {"NoType", [](onnx::TensorProto &T) { T.clear_data_type(); },
       "t.pb: tensor 'x': has no data_type"},
      {"Segment",
       [](onnx::TensorProto &T) {
         T.mutable_segment()->set_begin(0);
         T.mutable_segment()->set_end(1);
       },
       "t.pb: tensor has a segment; segmented tensors are not supported"},
      {"RawTooShort", [](onnx::TensorProto &T) { T.set_raw_data("1234"); },
       "t.pb: tensor 'x': raw_data holds 4 bytes, but 2 elements of f32 take "
       "8"},
      {"TooFewValues", [](onnx::TensorProto &T) { T.add_float_data(1); },
       "t.pb: tensor 'x': float_data holds 1 values, but the dims call for "
       "2"},
      {"NoData", [](onnx::TensorProto &) {},
       "t.pb: tensor 'x': float_data holds 0 values, but the dims call for "
       "2"},
      {"RawAndTyped",
       [](onnx::TensorProto &T) {
         T.set_raw_data("12345678");
         T.add_float_data(1);
       },
       "t.pb: tensor 'x': has both raw_data and float_data"},
      {"WrongTypedField",
       [](onnx::TensorProto &T) {
         T.add_int64_data(1);
         T.add_int64_data(2);
       },
       "t.pb: tensor 'x': holds int64_data, but a FLOAT tensor's values "
       "belong in float_data"},
      {"NegativeDim",
       [](onnx::TensorProto &T) {
         T.set_dims(0, -2);
         T.set_raw_data("");
       },
       "t.pb: tensor 'x': has negative dim -2"},
      {"HugeDims",
       [](onnx::TensorProto &T) {
         T.add_dims(int64_t(1) << 40);
         T.add_dims(int64_t(1) << 40);
       },
       "t.pb: tensor 'x': dims are too large"},
  };
  for (const Case &C : Cases) {
    onnx::TensorProto T = Base();
    C.Edit(T);
    EXPECT_EQ(errorOf(T.SerializeAsString()), C.Error) << C.Name;
  }
}

TEST(TensorFile, MalformedBytesAreErrors) {
  struct Case {
    const char *Name;
    std::string Bytes;
    const char *Error;
  } Cases[] = {
      {"TruncatedVarint", std::string("\x08\x80", 2),
       "t.pb: malformed protobuf at byte 1: varint runs past the end"},
      {"TruncatedTag", std::string("\x80", 1),
       "t.pb: malformed protobuf at byte 0: varint runs past the end"},
      {"OverlongVarint", "\x08" + std::string(11, '\x80') + "\x01",
       "t.pb: malformed protobuf at byte 1: varint longer than 10 bytes"},
      {"LengthPastEnd",
       std::string("\x42\x05"
                   "ab",
                   4),
       "t.pb: malformed protobuf at byte 0: field 8: length 5 runs past the "
       "end (2 bytes left)"},
      {"HugeLength",
       std::string("\x4a\xff\xff\xff\xff\xff\xff\xff\xff\x7f", 10),
       "t.pb: malformed protobuf at byte 0: field 9: length "
       "9223372036854775807 runs past the end (0 bytes left)"},
      {"WrongWireTypeName", std::string("\x40\x01", 2),
       "t.pb: malformed protobuf at byte 0: field 8 (name) has wire type 0, "
       "expected 2"},
      {"WrongWireTypeDataType", std::string("\x15\x01\x00\x00\x00", 5),
       "t.pb: malformed protobuf at byte 0: field 2 (data_type) has wire type "
       "5, expected 0"},
      {"WrongWireTypeFloatData", std::string("\x20\x01", 2),
       "t.pb: malformed protobuf at byte 0: field 4 (float_data) has wire "
       "type 0, expected 2"},
      {"Group", std::string("\x0b", 1),
       "t.pb: malformed protobuf at byte 0: field 1 has unsupported wire type "
       "3"},
      {"FieldZero", std::string("\x00\x01", 2),
       "t.pb: malformed protobuf at byte 0: invalid field number 0"},
      {"TruncatedFixed32", std::string("\x10\x01\x25\x00\x00", 5),
       "t.pb: malformed protobuf at byte 2: field 4: fixed-width value runs "
       "past the end"},
      {"PackedFloatsNotWhole", std::string("\x22\x03\x00\x00\x00", 5),
       "t.pb: malformed protobuf at byte 0: packed float_data holds 3 bytes, "
       "not a multiple of 4"},
      {"PackedVarintCutOff", std::string("\x0a\x02\x02\x83", 4),
       "t.pb: malformed protobuf at byte 3: varint runs past the end"},
      {"ExternalEntryMalformed", std::string("\x6a\x02\x0a\x05", 4),
       "t.pb: malformed protobuf at byte 2: field 1: length 5 runs past the "
       "end (0 bytes left)"},
  };
  for (const Case &C : Cases)
    EXPECT_EQ(errorOf(C.Bytes), C.Error) << C.Name;
}

// Every prefix and many random corruptions of a valid file: a tensor or a
// RuntimeError, never a crash.
TEST(TensorFile, CorruptionsNeverCrash) {
  onnx::TensorProto Proto;
  Proto.set_name("w");
  Proto.set_data_type(onnx::TensorProto::FLOAT16);
  Proto.add_dims(3);
  for (int V : {1, 2, 3})
    Proto.add_int32_data(V);
  auto *E = Proto.add_external_data();
  E->set_key("k");
  E->set_value("v");
  std::string Valid = Proto.SerializeAsString();
  std::mt19937 Rng(42);
  int Errors = 0, Parsed = 0;
  auto Try = [&](const std::string &Bytes) {
    try {
      HostTensor T = parseTensorProto(Bytes.data(), Bytes.size(), "c");
      EXPECT_EQ(static_cast<int64_t>(T.Bytes.size()),
                T.numElements() * static_cast<int64_t>(dtypeSize(T.Type)));
      ++Parsed;
    } catch (const RuntimeError &) {
      ++Errors;
    }
  };
  for (size_t Cut = 0; Cut <= Valid.size(); ++Cut)
    Try(Valid.substr(0, Cut));
  for (int I = 0; I < 20000; ++I) {
    std::string Bytes = Valid;
    for (int Flips = 1 + Rng() % 3; Flips > 0; --Flips)
      Bytes[Rng() % Bytes.size()] = static_cast<char>(Rng());
    Try(Bytes);
  }
  EXPECT_GT(Errors, 0);
  EXPECT_GT(Parsed, 0);
}
