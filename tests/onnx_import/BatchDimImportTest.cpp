//===- tests/onnx_import/BatchDimImportTest.cpp - The batch's dim ---------===//
//
// --batch binds PyTorch's usual batch names (batch, batch_size, N, B,
// batch_dim) wherever they are; the one symbolic leading dim of the inputs
// is taken for the batch only when no input uses a usual name, so that a
// time-major input [seq, batch, ...] has its batch at dim 1.
//
//===----------------------------------------------------------------------===//
#include "ModelBuilder.h"
#include "onnx_import/Importer.h"
#include "gtest/gtest.h"

using namespace onnx2soap;

namespace {

/// The graph input x of makeModel() given the dims Dims.
llvm::Expected<onnx_import::ImportedModel>
importWithInput(std::initializer_list<onnx2soap::testing::Dim> Dims,
                const onnx_import::ImportOptions &Options,
                const onnx2soap::testing::TempDir &Dir) {
  onnx::ModelProto Model = onnx2soap::testing::makeModel();
  Model.mutable_graph()->clear_input();
  onnx2soap::testing::addInput(*Model.mutable_graph(), "x", Dims);
  std::string Path = Dir.file("model.onnx");
  EXPECT_TRUE(onnx2soap::testing::writeModel(Model, Path));
  return onnx_import::importModel(Path, Options);
}

const ir::Tensor &inputX(const ir::Graph &G) {
  return G.tensor(G.inputs().front());
}

TEST(BatchDimImport, TimeMajorInputHasItsBatchAtDim1) {
  onnx2soap::testing::TempDir Dir;
  onnx_import::ImportOptions Options;
  Options.Batch = 4;
  Options.Dims = {{"seq", 6}};
  auto Model = importWithInput({"seq", "batch", 4}, Options, Dir);
  ASSERT_TRUE(static_cast<bool>(Model)) << llvm::toString(Model.takeError());
  const ir::Tensor &X = inputX(Model->Graph);
  EXPECT_EQ(X.Type.Dims, ir::Shape({6, 4, 4}));
  EXPECT_EQ(X.BatchDim, 1);
}

TEST(BatchDimImport, TheOneLeadingNameIsTheBatchWithoutAUsualName) {
  onnx2soap::testing::TempDir Dir;
  onnx_import::ImportOptions Options;
  Options.Batch = 4;
  Options.Dims = {{"seq", 6}};
  auto Model = importWithInput({"samples", "seq", 4}, Options, Dir);
  ASSERT_TRUE(static_cast<bool>(Model)) << llvm::toString(Model.takeError());
  const ir::Tensor &X = inputX(Model->Graph);
  EXPECT_EQ(X.Type.Dims, ir::Shape({4, 6, 4}));
  EXPECT_EQ(X.BatchDim, 0);
}

// --dim batch=32 without --batch: the dim is bound and still the batch (it
// was bound as an Attribute dim, and data parallelism split nothing).
TEST(BatchDimImport, AUsualNameGivenByDimIsTheBatch) {
  onnx2soap::testing::TempDir Dir;
  onnx_import::ImportOptions Options;
  Options.Dims = {{"batch", 32}};
  auto Model = importWithInput({"batch", 4}, Options, Dir);
  ASSERT_TRUE(static_cast<bool>(Model)) << llvm::toString(Model.takeError());
  const ir::Tensor &X = inputX(Model->Graph);
  EXPECT_EQ(X.Type.Dims, ir::Shape({32, 4}));
  EXPECT_EQ(X.BatchDim, 0);
}

// A --dim for a usual batch name no input has was ignored without a word.
TEST(BatchDimImport, ADimNoInputHasIsAnError) {
  onnx2soap::testing::TempDir Dir;
  onnx_import::ImportOptions Options;
  Options.Batch = 32;
  Options.Dims = {{"B", 7}};
  auto Model = importWithInput({"batch", 4}, Options, Dir);
  ASSERT_FALSE(static_cast<bool>(Model));
  EXPECT_EQ(llvm::toString(Model.takeError()),
            "--dim B=7: the model's inputs have no symbolic dim 'B'");
}

} // namespace
