//===- tests/onnx_import/BadInputTest.cpp - Bad models give one-line errors
//===//
//
// Every way a user can hand the importer a broken model must end in an Error
// of one line that names what is wrong and where, never a crash or a hang
// (expectErr). Here: bytes that are not a model, files that are not there,
// and models that must import; broken models are in BadModelTest.cpp.
//
//===----------------------------------------------------------------------===//
#include "ExpectImportError.h"
#include "ModelBuilder.h"
#include "onnx_import/Importer.h"
#include "gtest/gtest.h"
#include <cmath>
#include <functional>
#include <random>

using namespace onnx2soap;
using namespace onnx2soap::testing;
using onnx_import::ImportOptions;

namespace {

//===-- Broken bytes ------------------------------------------------------===//

std::string validModelBytes() {
  std::string Bytes;
  makeModel().SerializeToString(&Bytes);
  return Bytes;
}

std::string randomBytes() {
  std::mt19937 Rng(12345);
  std::string Bytes(4096, '\0');
  for (char &C : Bytes)
    C = static_cast<char>(Rng() & 0xff);
  return Bytes;
}

struct BadBytesCase {
  const char *Name;
  std::function<std::string()> Bytes;
  const char *Expected;
};

const BadBytesCase BadBytesCases[] = {
    {"EmptyFile", [] { return std::string(); }, "the file is empty"},
    {"RandomBytes", randomBytes, "not a valid ONNX model"},
    {"Text", [] { return std::string("hello, this is not a model\n"); },
     "not a valid ONNX model"},
    {"TruncatedHalf",
     [] {
       std::string B = validModelBytes();
       return B.substr(0, B.size() / 2);
     },
     "malformed or truncated protobuf"},
    {"TruncatedByOne",
     [] {
       std::string B = validModelBytes();
       return B.substr(0, B.size() - 1);
     },
     "malformed or truncated protobuf"},
    {"NoGraph",
     [] {
       onnx::ModelProto M = makeModel();
       M.clear_graph();
       std::string B;
       M.SerializeToString(&B);
       return B;
     },
     "it has no graph"},
};

void PrintTo(const BadBytesCase &Case, std::ostream *OS) { *OS << Case.Name; }

class BadBytesTest : public ::testing::TestWithParam<BadBytesCase> {};

TEST_P(BadBytesTest, Rejects) {
  TempDir Dir("onnx2soap-badinput");
  ASSERT_TRUE(Dir.valid());
  std::string Path = Dir.file("model.onnx");
  ASSERT_TRUE(writeBytes(Path, GetParam().Bytes()));
  expectErr(Path, batch(2), GetParam().Expected);
}

INSTANTIATE_TEST_SUITE_P(
    BadInputTest, BadBytesTest, ::testing::ValuesIn(BadBytesCases),
    [](const ::testing::TestParamInfo<BadBytesCase> &Info) {
      return std::string(Info.param.Name);
    });

//===-- Files that are not there ------------------------------------------===//

TEST(BadInputTest, MissingModelFile) {
  TempDir Dir("onnx2soap-badinput");
  ASSERT_TRUE(Dir.valid());
  std::string Path = Dir.file("absent.onnx");
  expectErr(Path, batch(2), "cannot read '" + Path + "'");
}

TEST(BadInputTest, DirectoryInsteadOfFile) {
  TempDir Dir("onnx2soap-badinput");
  ASSERT_TRUE(Dir.valid());
  expectErr(Dir.path(), batch(2), "cannot read '" + Dir.path().str() + "'");
}

//===-- Models that must import -------------------------------------------===//

TEST(BadInputTest, ValidModelImports) {
  TempDir Dir("onnx2soap-badinput");
  ASSERT_TRUE(Dir.valid());
  std::string Path = Dir.file("model.onnx");
  ASSERT_TRUE(writeModel(makeModel(), Path));
  auto Imported = onnx_import::importModel(Path, batch(8));
  ASSERT_TRUE(static_cast<bool>(Imported))
      << llvm::toString(Imported.takeError());
  const ir::Graph &G = Imported->Graph;
  EXPECT_EQ(G.numOps(), 3u);
  ASSERT_EQ(G.inputs().size(), 1u);
  EXPECT_EQ(G.tensor(G.inputs()[0]).Type.Dims, (ir::Shape{8, 4}));
  ASSERT_EQ(G.outputs().size(), 1u);
  EXPECT_EQ(G.tensor(G.outputs()[0]).Type.Dims, (ir::Shape{8, 3}));
  EXPECT_EQ(Imported->Opset, 17);
  ASSERT_EQ(Imported->BoundDims.size(), 1u);
  EXPECT_EQ(Imported->BoundDims[0].first, "batch");
  EXPECT_EQ(Imported->BoundDims[0].second, 8);
}

// Folding computes on int64, where a uint64 of 2^63 or more reads as
// negative (Cast to float gave -9.2e18): such a value is left to the
// kernels, a smaller one still folds.
TEST(BadInputTest, Uint64PastInt64IsNotFolded) {
  for (uint64_t Value : {uint64_t(5), (uint64_t(1) << 63) + 2048}) {
    TempDir Dir("onnx2soap-badinput");
    ASSERT_TRUE(Dir.valid());
    onnx::ModelProto Model = makeModel();
    onnx::GraphProto &G = *Model.mutable_graph();
    onnx::TensorProto *U = G.add_initializer();
    U->set_name("u");
    U->set_data_type(onnx::TensorProto::UINT64);
    U->add_dims(1);
    U->add_uint64_data(Value);
    onnx::NodeProto *Cast = addNode(G, "Cast", {"u"}, {"f"}, "cast");
    addIntAttr(*Cast, "to", onnx::TensorProto::FLOAT);
    addOutput(G, "f");
    std::string Path = Dir.file("model.onnx");
    ASSERT_TRUE(writeModel(Model, Path));
    auto Imported = onnx_import::importModel(Path, batch(8));
    ASSERT_TRUE(static_cast<bool>(Imported))
        << llvm::toString(Imported.takeError());
    // The MLP's 3 ops, and the Cast when it is not folded.
    EXPECT_EQ(Imported->Graph.numOps(), Value == 5 ? 3u : 4u) << Value;
  }
}

// A graph output keeps the model's name where its tensor has another: an
// Identity of another output or of an input (they were listed as [y, y]
// and x, and run --out wrote those names).
TEST(BadInputTest, AliasedOutputsKeepTheirNames) {
  TempDir Dir("onnx2soap-badinput");
  ASSERT_TRUE(Dir.valid());
  onnx::ModelProto Model = makeModel();
  onnx::GraphProto &G = *Model.mutable_graph();
  addNode(G, "Identity", {"y"}, {"z"}, "same");
  addOutput(G, "z");
  addNode(G, "Identity", {"x"}, {"echo"}, "echo");
  addOutput(G, "echo");
  std::string Path = Dir.file("model.onnx");
  ASSERT_TRUE(writeModel(Model, Path));
  auto Imported = onnx_import::importModel(Path, batch(8));
  ASSERT_TRUE(static_cast<bool>(Imported))
      << llvm::toString(Imported.takeError());
  const ir::Graph &IR = Imported->Graph;
  ASSERT_EQ(IR.outputs().size(), 3u);
  EXPECT_EQ(IR.outputs()[0], IR.outputs()[1]);
  EXPECT_EQ(IR.outputName(0), "y");
  EXPECT_EQ(IR.outputName(1), "z");
  EXPECT_EQ(IR.outputName(2), "echo");
  EXPECT_EQ(IR.tensor(IR.outputs()[2]).Name, "x");
}

// ConvTranspose with auto_pad SAME_LOWER one output past the window: ONNX
// puts the zero after the last output, which output_padding says (only a
// zero before the first is refused, BadModelTest ConvTransposeSameShifts).
TEST(BadInputTest, ConvTransposeSameLowerPadsAtTheEnd) {
  TempDir Dir("onnx2soap-badinput");
  ASSERT_TRUE(Dir.valid());
  onnx::ModelProto Model = makeModel();
  onnx::GraphProto &G = *Model.mutable_graph();
  G.clear_node();
  G.clear_initializer();
  G.clear_input();
  G.clear_output();
  addInput(G, "x", {"batch", 1, 7});
  addFloatInitializer(G, "W", {1, 1, 1});
  onnx::NodeProto *N = addNode(G, "ConvTranspose", {"x", "W"}, {"y"}, "up");
  addIntsAttr(*N, "strides", {2});
  addStringAttr(*N, "auto_pad", "SAME_LOWER");
  addOutput(G, "y");
  std::string Path = Dir.file("model.onnx");
  ASSERT_TRUE(writeModel(Model, Path));
  auto Imported = onnx_import::importModel(Path, batch(2));
  ASSERT_TRUE(static_cast<bool>(Imported))
      << llvm::toString(Imported.takeError());
  const ir::Graph &IR = Imported->Graph;
  ASSERT_EQ(IR.numOps(), 1u);
  auto Ints = [&](const char *Name) {
    llvm::ArrayRef<int64_t> V = IR.op(0).Attrs.getInts(Name);
    return std::vector<int64_t>(V.begin(), V.end());
  };
  EXPECT_EQ(Ints("pads"), (std::vector<int64_t>{0, 0}));
  EXPECT_EQ(Ints("output_padding"), (std::vector<int64_t>{1}));
  EXPECT_EQ(IR.tensor(IR.outputs()[0]).Type.Dims, (ir::Shape{2, 1, 14}));
}

// A small float initializer feeding an input the importer needs as a value
// (Pad's constant_value, Dropout's ratio; onnx-simplifier and exports with
// constant folding store them so, not as Constant nodes) is read from the
// file. It is no parameter when nothing else reads it.
TEST(BadInputTest, FloatInitializersGiveImportTimeValues) {
  TempDir Dir("onnx2soap-badinput");
  ASSERT_TRUE(Dir.valid());
  onnx::ModelProto Model = makeModel();
  onnx::GraphProto &G = *Model.mutable_graph();
  G.clear_output();
  addInt64Initializer(G, "pads", {0, 1, 0, 2});
  addFloatInitializer(G, "value", {})
      ->set_raw_data(std::string("\0\0\xc0?", 4));
  addFloatInitializer(G, "ratio", {})
      ->set_raw_data(std::string("\0\0\x80>", 4));
  addNode(G, "Pad", {"y", "pads", "value"}, {"p"}, "pad");
  onnx::TensorProto *Training = G.add_initializer();
  Training->set_name("training");
  Training->set_data_type(onnx::TensorProto::BOOL);
  Training->add_int32_data(1);
  addNode(G, "Dropout", {"p", "ratio", "training"}, {"d"}, "drop");
  addOutput(G, "d");
  std::string Path = Dir.file("model.onnx");
  ASSERT_TRUE(writeModel(Model, Path));
  auto Imported = onnx_import::importModel(Path, batch(2));
  ASSERT_TRUE(static_cast<bool>(Imported))
      << llvm::toString(Imported.takeError());
  const ir::Graph &IR = Imported->Graph;
  ASSERT_EQ(IR.numOps(), 5u);
  EXPECT_EQ(IR.op(3).Kind, ir::OpKind::Pad);
  EXPECT_EQ(IR.op(3).Attrs.getFloat("value"), 1.5);
  EXPECT_EQ(IR.op(4).Kind, ir::OpKind::Dropout);
  EXPECT_EQ(IR.op(4).Attrs.getFloat("ratio"), 0.25);
  std::vector<std::string> Parameters;
  for (const ir::Tensor &T : IR.tensors())
    if (T.Role == ir::TensorRole::Parameter)
      Parameters.push_back(T.Name);
  EXPECT_EQ(Parameters, (std::vector<std::string>{"W", "b"}));
}

// Clip (ReLU6 as exported with constant folding): bounds from float
// initializers become attributes, an absent or -inf min none; the
// initializers are no parameters.
TEST(BadInputTest, ClipBoundsFromInitializers) {
  TempDir Dir("onnx2soap-badinput");
  ASSERT_TRUE(Dir.valid());
  onnx::ModelProto Model = makeModel();
  onnx::GraphProto &G = *Model.mutable_graph();
  G.clear_output();
  float Six = 6, MinusInf = -INFINITY;
  addFloatInitializer(G, "six", {})
      ->set_raw_data(std::string(reinterpret_cast<char *>(&Six), 4));
  addFloatInitializer(G, "none", {})
      ->set_raw_data(std::string(reinterpret_cast<char *>(&MinusInf), 4));
  addNode(G, "Clip", {"y", "", "six"}, {"c"}, "upper");
  addNode(G, "Clip", {"c", "none", "six"}, {"d"}, "same");
  addOutput(G, "d");
  std::string Path = Dir.file("model.onnx");
  ASSERT_TRUE(writeModel(Model, Path));
  auto Imported = onnx_import::importModel(Path, batch(2));
  ASSERT_TRUE(static_cast<bool>(Imported))
      << llvm::toString(Imported.takeError());
  const ir::Graph &IR = Imported->Graph;
  ASSERT_EQ(IR.numOps(), 5u);
  for (unsigned I : {3u, 4u}) {
    EXPECT_EQ(IR.op(I).Kind, ir::OpKind::Clip);
    EXPECT_FALSE(IR.op(I).Attrs.has("min"));
    EXPECT_EQ(IR.op(I).Attrs.getFloat("max"), 6.0);
  }
  size_t Parameters = 0;
  for (const ir::Tensor &T : IR.tensors())
    Parameters += T.Role == ir::TensorRole::Parameter;
  EXPECT_EQ(Parameters, 2u);
}

// A float initializer both read at import time and trained would keep its
// first value where it was read: refused, with the flag that fixes it.
TEST(BadInputTest, FloatInitializerReadAndTrainedIsRefused) {
  TempDir Dir("onnx2soap-badinput");
  ASSERT_TRUE(Dir.valid());
  onnx::ModelProto Model = makeModel();
  onnx::GraphProto &G = *Model.mutable_graph();
  G.clear_output();
  addInt64Initializer(G, "pads", {0, 1, 0, 2});
  addFloatInitializer(G, "value", {});
  addNode(G, "Pad", {"y", "pads", "value"}, {"p"}, "pad");
  addNode(G, "Add", {"p", "value"}, {"q"}, "shift");
  addOutput(G, "q");
  std::string Path = Dir.file("model.onnx");
  ASSERT_TRUE(writeModel(Model, Path));
  expectErr(Path, batch(2),
            "initializer 'value' is read at import time by node 'pad' "
            "(constant_value) and also trained as a weight; keep it fixed "
            "with --frozen value");
  // The same through an Identity: the name Pad reads is not the
  // initializer's, the tensor is.
  G.mutable_node(3)->set_input(2, "alias");
  addNode(G, "Identity", {"value"}, {"alias"}, "same");
  ASSERT_TRUE(writeModel(Model, Path));
  expectErr(Path, batch(2),
            "initializer 'value' is read at import time by node 'pad' "
            "(constant_value) and also trained as a weight");
  ImportOptions Frozen = batch(2);
  Frozen.Roles.Frozen.push_back("value");
  auto Imported = onnx_import::importModel(Path, Frozen);
  ASSERT_TRUE(static_cast<bool>(Imported))
      << llvm::toString(Imported.takeError());
}

// onnx 1.18 and later write IR 11 to 14 (onnx.helper.make_model), which add
// only element types and sharding hints: read; a tensor of a new type is
// refused by the type's name.
TEST(BadInputTest, NewerIrVersionsImport) {
  TempDir Dir("onnx2soap-badinput");
  ASSERT_TRUE(Dir.valid());
  onnx::ModelProto Model = makeModel();
  Model.set_ir_version(14);
  std::string Path = Dir.file("model.onnx");
  ASSERT_TRUE(writeModel(Model, Path));
  auto Imported = onnx_import::importModel(Path, batch(2));
  ASSERT_TRUE(static_cast<bool>(Imported))
      << llvm::toString(Imported.takeError());
  EXPECT_EQ(Imported->IrVersion, 14);
  findInitializer(*Model.mutable_graph(), "b")->set_data_type(23);
  ASSERT_TRUE(writeModel(Model, Path));
  expectErr(Path, batch(2),
            "initializer 'b': element type FLOAT4E2M1 is not supported");
}

TEST(BadInputTest, DimFlagBindsBatch) {
  TempDir Dir("onnx2soap-badinput");
  ASSERT_TRUE(Dir.valid());
  std::string Path = Dir.file("model.onnx");
  ASSERT_TRUE(writeModel(makeModel(), Path));
  auto Imported = onnx_import::importModel(Path, dims({{"batch", 5}}));
  ASSERT_TRUE(static_cast<bool>(Imported))
      << llvm::toString(Imported.takeError());
  const ir::Graph &G = Imported->Graph;
  EXPECT_EQ(G.tensor(G.inputs()[0]).Type.Dims, (ir::Shape{5, 4}));
}

/// Planning never reads weights: a model whose external-data file is absent
/// imports, and its tensor says where the bytes would be.
TEST(BadInputTest, AbsentExternalDataImports) {
  TempDir Dir("onnx2soap-badinput");
  ASSERT_TRUE(Dir.valid());
  onnx::ModelProto Model = makeModel();
  setExternalData(*findInitializer(*Model.mutable_graph(), "W"), "w.bin", 16,
                  48);
  std::string Path = Dir.file("model.onnx");
  ASSERT_TRUE(writeModel(Model, Path));
  auto Imported = onnx_import::importModel(Path, batch(2));
  ASSERT_TRUE(static_cast<bool>(Imported))
      << llvm::toString(Imported.takeError());
  const ir::Graph &G = Imported->Graph;
  const ir::Tensor *W = nullptr;
  for (const ir::Tensor &T : G.tensors())
    if (T.Name == "W")
      W = &T;
  ASSERT_NE(W, nullptr);
  EXPECT_EQ(W->Role, ir::TensorRole::Parameter);
  EXPECT_EQ(W->Data.kind(), ir::TensorData::Kind::External);
  EXPECT_EQ(W->Data.size(), 48u);
  EXPECT_EQ(W->Data.externalOffset(), 16u);
  EXPECT_EQ(W->Data.externalPath(), Dir.file("w.bin"));
  // Reading the bytes is what fails, and only when asked.
  auto Bytes = W->Data.bytes();
  EXPECT_FALSE(static_cast<bool>(Bytes));
  if (!Bytes)
    llvm::consumeError(Bytes.takeError());
}

/// A present external-data file of the right size imports too.
TEST(BadInputTest, PresentExternalDataImports) {
  TempDir Dir("onnx2soap-badinput");
  ASSERT_TRUE(Dir.valid());
  onnx::ModelProto Model = makeModel();
  onnx::TensorProto *W = findInitializer(*Model.mutable_graph(), "W");
  std::string Raw = W->raw_data();
  setExternalData(*W, "w.bin", 0, 48);
  ASSERT_TRUE(writeBytes(Dir.file("w.bin"), Raw));
  std::string Path = Dir.file("model.onnx");
  ASSERT_TRUE(writeModel(Model, Path));
  auto Imported = onnx_import::importModel(Path, batch(2));
  ASSERT_TRUE(static_cast<bool>(Imported))
      << llvm::toString(Imported.takeError());
}

} // namespace
