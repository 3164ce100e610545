//===- tests/onnx_import/SampleImportTest.cpp - Importing the samples -----===//
//
// The bundled samples are graph-only (their external weight files are not
// in the repository): they must import for planning, fold every shape
// computation, and keep PyTorch's parameter counts, also when unrolled.
//
//===----------------------------------------------------------------------===//
#include "ir/BatchDims.h"
#include "onnx_import/Importer.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

using namespace onnx2soap;

namespace {

const std::string Samples = ONNX2SOAP_SOURCE_DIR "/samples/";

onnx_import::ImportedModel import(const std::string &Name, int64_t Batch,
                                  bool Unroll = false) {
  onnx_import::ImportOptions Options;
  Options.Batch = Batch;
  Options.UnrollRnn = Unroll;
  auto Model = onnx_import::importModel(Samples + Name + ".onnx", Options);
  if (!Model) {
    ADD_FAILURE() << Name << ": " << llvm::toString(Model.takeError());
    return {};
  }
  return std::move(*Model);
}

int64_t expectedParameters(const std::string &Name) {
  auto Text = llvm::MemoryBuffer::getFile(Samples + "expected.json");
  EXPECT_TRUE(static_cast<bool>(Text));
  auto Json = llvm::json::parse((*Text)->getBuffer());
  EXPECT_TRUE(static_cast<bool>(Json));
  const llvm::json::Object *Entry = Json->getAsObject()->getObject(Name);
  EXPECT_NE(Entry, nullptr) << Name;
  return Entry ? Entry->getInteger("parameters").getValueOr(-1) : -1;
}

class Sample : public ::testing::TestWithParam<const char *> {};

TEST_P(Sample, ImportsWithoutWeightsAndKeepsParameterCount) {
  std::string Name = GetParam();
  onnx_import::ImportedModel M = import(Name, 4);
  EXPECT_EQ(ir::countParameters(M.Graph), expectedParameters(Name));
  // Every output's batch dim is found, and is the bound size.
  for (ir::TensorId Out : M.Graph.outputs()) {
    const ir::Tensor &T = M.Graph.tensor(Out);
    ASSERT_GE(T.BatchDim, 0) << Name << " output " << T.Name;
    EXPECT_EQ(T.Type.Dims[T.BatchDim], 4);
  }
}

INSTANTIATE_TEST_SUITE_P(All, Sample,
                         ::testing::Values("alexnet", "inception_v3",
                                           "resnet101", "rnntc", "rnnlm", "nmt",
                                           "bert_encoder", "gpt_decoder",
                                           "tiny_mlp", "tiny_cnn"));

TEST(SampleImport, RnnlmFoldsItsInitialStateAndUnrolls) {
  onnx_import::ImportedModel M = import("rnnlm", 8);
  std::map<ir::OpKind, int> Kinds;
  for (const ir::Op &O : M.Graph.ops())
    ++Kinds[O.Kind];
  EXPECT_EQ(Kinds[ir::OpKind::LSTM], 2);
  // The zero initial state built from Shape/ConstantOfShape is a constant.
  for (const ir::Op &O : M.Graph.ops())
    if (O.Kind == ir::OpKind::LSTM) {
      ASSERT_GT(O.Inputs.size(), 5u);
      EXPECT_EQ(M.Graph.tensor(O.Inputs[5]).Role, ir::TensorRole::Constant);
    }

  onnx_import::ImportedModel U = import("rnnlm", 8, /*Unroll=*/true);
  int Cells = 0;
  for (const ir::Op &O : U.Graph.ops()) {
    Cells += O.Kind == ir::OpKind::LSTMCell;
    EXPECT_NE(O.Kind, ir::OpKind::LSTM);
  }
  EXPECT_EQ(Cells, 2 * 40);
  EXPECT_EQ(ir::countParameters(U.Graph), ir::countParameters(M.Graph));
}

// At a large batch the zero state [2, 4096, 2048] is too large to fold: it
// is computed by an Expand of a scalar instead of failing the import.
TEST(SampleImport, RnnlmInitialStateAtALargeBatchIsExpanded) {
  onnx_import::ImportedModel M = import("rnnlm", 4096);
  int Lstms = 0, Fills = 0;
  for (const ir::Op &O : M.Graph.ops()) {
    Lstms += O.Kind == ir::OpKind::LSTM;
    if (O.Kind != ir::OpKind::Expand)
      continue;
    const ir::Tensor &In = M.Graph.tensor(O.Inputs[0]);
    EXPECT_EQ(In.Role, ir::TensorRole::Constant);
    EXPECT_EQ(In.Type.numElements(), 1);
    EXPECT_EQ(M.Graph.tensor(O.Outputs[0]).Type.Dims,
              ir::Shape({2, 4096, 2048}));
    ++Fills;
  }
  EXPECT_EQ(Lstms, 2);
  EXPECT_EQ(Fills, 1); // h0 and c0 share it
  onnx_import::ImportedModel U = import("rnnlm", 4096, /*Unroll=*/true);
  EXPECT_EQ(ir::countParameters(U.Graph), ir::countParameters(M.Graph));
}

TEST(SampleImport, TransformersGetFusedGelu) {
  onnx_import::ImportedModel M = import("bert_encoder", 2);
  EXPECT_EQ(M.FusedPatterns, 4u);
  int Erf = 0, Gelu = 0;
  for (const ir::Op &O : M.Graph.ops()) {
    Erf += O.Kind == ir::OpKind::Erf;
    Gelu += O.Kind == ir::OpKind::Gelu;
  }
  EXPECT_EQ(Erf, 0);
  EXPECT_EQ(Gelu, 4);
}

TEST(SampleImport, BatchNormStatisticsAreState) {
  onnx_import::ImportedModel M = import("tiny_cnn", 2);
  int64_t State = 0;
  for (const ir::Tensor &T : M.Graph.tensors())
    if (T.Role == ir::TensorRole::State)
      State += T.Type.numElements();
  EXPECT_EQ(State, 2 * (8 + 16)); // mean and var of two BatchNorms
}

TEST(SampleImport, InlineWeightsAreBorrowedNotCopied) {
  onnx_import::ImportedModel M = import("tiny_mlp", 2);
  for (const ir::Tensor &T : M.Graph.tensors()) {
    if (T.Role == ir::TensorRole::Parameter) {
      EXPECT_EQ(T.Data.kind(), ir::TensorData::Kind::Borrowed) << T.Name;
    }
  }
}

TEST(SampleImport, GraphOnlyWeightsAreExternalAndAbsent) {
  onnx_import::ImportedModel M = import("alexnet", 2);
  for (const ir::Tensor &T : M.Graph.tensors())
    if (T.Role == ir::TensorRole::Parameter) {
      ASSERT_EQ(T.Data.kind(), ir::TensorData::Kind::External) << T.Name;
      auto Bytes = T.Data.bytes();
      ASSERT_FALSE(static_cast<bool>(Bytes));
      EXPECT_THAT(llvm::toString(Bytes.takeError()),
                  ::testing::HasSubstr("alexnet.onnx.data"));
      break;
    }
}

} // namespace
