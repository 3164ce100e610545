//===- tests/runtime_program/OnnxWeightsTest.cpp - Trained weights --------===//
//
// replaceInitializers on the MLP training fixture and on a model whose
// weights are external data: the importer reads the new values and the same
// graph, protobuf sees every other field unchanged, and wrong names, dims
// and types are errors.
//
//===----------------------------------------------------------------------===//
#include "runtime_lib/program/OnnxWeights.h"
#include "ir/Printer.h"
#include "onnx_import/Importer.h"
#include "runtime_lib/Error.h"
#include "tests/onnx_import/ModelBuilder.h"
#include "llvm/Support/raw_ostream.h"
#include <cstring>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <map>
#include <optional>

using namespace onnx2soap;
using namespace onnx2soap::rt::program;
namespace fs = std::filesystem;
namespace mb = onnx2soap::testing; // tests/onnx_import/ModelBuilder.h

namespace {

std::string fileBytes(const std::string &Path) {
  std::ifstream In(Path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(In), {});
}

onnx_import::ImportedModel import(const std::string &Path,
                                  std::optional<int64_t> Batch = {}) {
  onnx_import::ImportOptions Options;
  Options.Batch = Batch;
  auto Model = onnx_import::importModel(Path, Options);
  if (!Model) {
    ADD_FAILURE() << Path << ": " << llvm::toString(Model.takeError());
    return {};
  }
  return std::move(*Model);
}

std::string printed(const ir::Graph &G) {
  std::string Text;
  llvm::raw_string_ostream OS(Text);
  ir::printGraph(G, OS);
  return OS.str();
}

/// Name -> bytes of every tensor the importer gave data.
std::map<std::string, std::string> tensorData(const ir::Graph &G) {
  std::map<std::string, std::string> Out;
  for (const ir::Tensor &T : G.tensors()) {
    if (T.Data.empty())
      continue;
    auto Bytes = T.Data.bytes();
    if (!Bytes) {
      ADD_FAILURE() << T.Name << ": " << llvm::toString(Bytes.takeError());
      continue;
    }
    Out[T.Name] = std::string(Bytes->begin(), Bytes->end());
  }
  return Out;
}

/// The float initializer T with every value v replaced by 0.5 * v + 1.
HostTensor trained(const onnx::TensorProto &T) {
  HostTensor New;
  New.Name = T.name();
  New.Type = rt::DType::Float32;
  New.Dims.assign(T.dims().begin(), T.dims().end());
  New.Bytes.assign(T.raw_data().begin(), T.raw_data().end());
  for (size_t I = 0; I + 4 <= New.Bytes.size(); I += 4) {
    float V;
    std::memcpy(&V, &New.Bytes[I], 4);
    V = 0.5f * V + 1;
    std::memcpy(&New.Bytes[I], &V, 4);
  }
  return New;
}

std::string errorOf(const std::string &Model,
                    const std::vector<HostTensor> &Values) {
  try {
    replaceInitializers(Model, Values);
  } catch (const rt::RuntimeError &E) {
    return E.what();
  }
  return "<no error>";
}

} // namespace

TEST(OnnxWeights, MlpFixtureGetsItsTrainedWeights) {
  std::string Path =
      std::string(ONNX2SOAP_SOURCE_DIR) + "/tests/fixtures/mlp/model.onnx";
  std::string Original = fileBytes(Path);
  onnx::ModelProto Proto;
  ASSERT_TRUE(Proto.ParseFromString(Original));

  std::vector<HostTensor> NewValues;
  for (const onnx::TensorProto &T : Proto.graph().initializer())
    if (T.data_type() == onnx::TensorProto::FLOAT && T.has_raw_data())
      NewValues.push_back(trained(T));
  ASSERT_GE(NewValues.size(), 4u);
  std::string Rewritten = replaceInitializers(Original, NewValues);

  mb::TempDir Dir("o2s-weights");
  ASSERT_TRUE(Dir.valid());
  std::string NewPath = Dir.file("trained.onnx");
  ASSERT_TRUE(mb::writeBytes(NewPath, Rewritten));

  onnx_import::ImportedModel Before = import(Path);
  onnx_import::ImportedModel After = import(NewPath);
  EXPECT_EQ(printed(After.Graph), printed(Before.Graph));
  EXPECT_EQ(After.Opset, Before.Opset);
  EXPECT_EQ(After.Producer, Before.Producer);
  std::map<std::string, std::string> Data = tensorData(After.Graph);
  for (const HostTensor &T : NewValues) {
    ASSERT_TRUE(Data.count(T.Name)) << T.Name;
    EXPECT_EQ(Data[T.Name], std::string(T.Bytes.begin(), T.Bytes.end()))
        << T.Name;
  }

  // To protobuf, only the replaced initializers' raw_data changed.
  onnx::ModelProto NewProto;
  ASSERT_TRUE(NewProto.ParseFromString(Rewritten));
  ASSERT_EQ(NewProto.graph().initializer_size(),
            Proto.graph().initializer_size());
  for (int I = 0; I < Proto.graph().initializer_size(); ++I) {
    const onnx::TensorProto &Old = Proto.graph().initializer(I);
    onnx::TensorProto *New = NewProto.mutable_graph()->mutable_initializer(I);
    EXPECT_EQ(New->name(), Old.name());
    New->set_raw_data(Old.raw_data());
  }
  EXPECT_EQ(NewProto.SerializeAsString(), Proto.SerializeAsString());
}

TEST(OnnxWeights, UntouchedModelKeepsEveryByte) {
  std::string Path =
      std::string(ONNX2SOAP_SOURCE_DIR) + "/tests/fixtures/mlp/model.onnx";
  std::string Original = fileBytes(Path);
  EXPECT_EQ(replaceInitializers(Original, {}), Original);

  // Replacing one initializer by its own value keeps every byte too, as
  // PyTorch writes initializers the way serializeTensorProto does.
  onnx::ModelProto Proto;
  ASSERT_TRUE(Proto.ParseFromString(Original));
  const onnx::TensorProto &First = Proto.graph().initializer(0);
  HostTensor Same;
  Same.Name = First.name();
  Same.Type = rt::DType::Float32;
  Same.Dims.assign(First.dims().begin(), First.dims().end());
  Same.Bytes.assign(First.raw_data().begin(), First.raw_data().end());
  EXPECT_EQ(replaceInitializers(Original, {Same}), Original);
}

TEST(OnnxWeights, ExternalDataBecomesInline) {
  mb::TempDir Dir("o2s-weights");
  ASSERT_TRUE(Dir.valid());
  onnx::ModelProto Model = mb::makeModel();
  onnx::TensorProto *W = mb::findInitializer(*Model.mutable_graph(), "W");
  std::string Raw = W->raw_data();
  ASSERT_EQ(Raw.size(), 48u);
  mb::setExternalData(*W, "w.bin", 0, 48);
  ASSERT_TRUE(mb::writeBytes(Dir.file("w.bin"), Raw));
  std::string ModelPath = Dir.file("model.onnx");
  ASSERT_TRUE(mb::writeModel(Model, ModelPath));
  onnx_import::ImportedModel Before = import(ModelPath, 2);

  HostTensor New;
  New.Name = "W";
  New.Dims = {4, 3};
  New.Bytes.resize(48);
  for (size_t I = 0; I < 48; ++I)
    New.Bytes[I] = static_cast<char>(100 + I);
  std::string Rewritten = replaceInitializers(fileBytes(ModelPath), {New});

  onnx::ModelProto Proto;
  ASSERT_TRUE(Proto.ParseFromString(Rewritten));
  const onnx::TensorProto &NewW =
      *mb::findInitializer(*Proto.mutable_graph(), "W");
  EXPECT_EQ(NewW.data_location(), onnx::TensorProto::DEFAULT);
  EXPECT_EQ(NewW.external_data_size(), 0);
  EXPECT_EQ(NewW.raw_data(), std::string(New.Bytes.begin(), New.Bytes.end()));

  // The new model needs no w.bin: import it from a folder without one.
  mb::TempDir Elsewhere("o2s-weights");
  ASSERT_TRUE(mb::writeBytes(Elsewhere.file("model.onnx"), Rewritten));
  onnx_import::ImportedModel After = import(Elsewhere.file("model.onnx"), 2);
  EXPECT_EQ(printed(After.Graph), printed(Before.Graph));
  for (const ir::Tensor &T : After.Graph.tensors()) {
    if (T.Name == "W") {
      EXPECT_EQ(T.Data.kind(), ir::TensorData::Kind::Borrowed);
    }
  }
  EXPECT_EQ(tensorData(After.Graph)["W"],
            std::string(New.Bytes.begin(), New.Bytes.end()));
  EXPECT_EQ(tensorData(After.Graph)["b"], tensorData(Before.Graph)["b"]);
}

TEST(OnnxWeights, Errors) {
  onnx::ModelProto Model = mb::makeModel();
  // A subgraph initializer (If's then_branch) is not the main graph's.
  onnx::NodeProto *If =
      mb::addNode(*Model.mutable_graph(), "If", {"c"}, {"o"}, "if");
  onnx::AttributeProto *Then = If->add_attribute();
  Then->set_name("then_branch");
  Then->set_type(onnx::AttributeProto::GRAPH);
  mb::addFloatInitializer(*Then->mutable_g(), "inner", {2});
  std::string Bytes = Model.SerializeAsString();

  HostTensor W;
  W.Name = "W";
  W.Dims = {4, 3};
  W.Bytes.resize(48);
  HostTensor Wrong = W;
  Wrong.Dims = {3, 4};
  HostTensor Half = W;
  Half.Type = rt::DType::Float16;
  Half.Bytes.resize(24);
  HostTensor Inner;
  Inner.Name = "inner";
  Inner.Dims = {2};
  Inner.Bytes.resize(8);
  HostTensor Input = Inner;
  Input.Name = "x";

  EXPECT_EQ(errorOf(Bytes, {W, Inner, Input}),
            "ONNX model: not an initializer of the main graph: 'inner', 'x'");
  EXPECT_EQ(errorOf(Bytes, {Wrong}),
            "ONNX model: initializer 'W' has dims [4,3], but its new value "
            "has dims [3,4]");
  EXPECT_EQ(errorOf(Bytes, {Half}),
            "ONNX model: initializer 'W' has element type FLOAT, but its new "
            "value is FLOAT16");
  EXPECT_EQ(errorOf(Bytes, {W, W}),
            "ONNX model: new value for initializer 'W' given twice");
  HostTensor Short = W;
  Short.Bytes.resize(40);
  EXPECT_EQ(errorOf(Bytes, {Short}),
            "tensor 'W': holds 40 bytes, but 12 elements of f32 take 48");
  // Malformed models are errors too.
  EXPECT_EQ(errorOf(Bytes.substr(0, Bytes.size() - 3), {W})
                .rfind("ONNX model: malformed protobuf at byte ", 0),
            0u);
  EXPECT_EQ(errorOf(std::string("\x3a\x02\x2a\x05", 4), {W}),
            "ONNX model: malformed protobuf at byte 2: field 5: length 5 runs "
            "past the end (0 bytes left)");
  EXPECT_EQ(errorOf(std::string("\x38\x01", 2), {}),
            "ONNX model: malformed protobuf at byte 0: field 7 (graph) is not "
            "a message");
  // Every cut of the model is a clean error, or a model (cut between
  // top-level fields).
  for (size_t Cut = 0; Cut < Bytes.size(); ++Cut) {
    std::string Message = errorOf(Bytes.substr(0, Cut), {W});
    EXPECT_TRUE(Message == "<no error>" ||
                Message.rfind("ONNX model: ", 0) == 0)
        << Cut << ": " << Message;
  }
}
