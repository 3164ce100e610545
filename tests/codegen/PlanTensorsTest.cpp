//===- tests/codegen/PlanTensorsTest.cpp - What the plan says of tensors --===//
//
// The dim a data input's samples lie along reaches the plan: a time-major
// input (and its labels) carry it, so that `train --data`, whose dataset
// folders hold samples along dim 0, refuses them instead of training on
// time steps as samples.
//
//===----------------------------------------------------------------------===//
#include "../onnx_import/ModelBuilder.h"
#include "../soap_search/PlannerTestUtil.h"
#include "codegen/ProgramPlan.h"
#include "runtime_lib/Error.h"
#include "runtime_lib/program/Dataset.h"
#include "soap_search/Builtins.h"
#include "gtest/gtest.h"
#include <cstring>
#include <map>
#include <string>

using namespace onnx2soap;

namespace {

/// The plan of a model whose input x is [seq, batch, 4] (time-major), or
/// [batch, seq, 4].
codegen::ProgramPlan planOf(bool TimeMajor) {
  onnx::ModelProto Model = onnx2soap::testing::makeModel();
  onnx::GraphProto &Graph = *Model.mutable_graph();
  Graph.clear_input();
  if (TimeMajor)
    onnx2soap::testing::addInput(Graph, "x", {"seq", "batch", 4});
  else
    onnx2soap::testing::addInput(Graph, "x", {"batch", "seq", 4});
  onnx2soap::testing::TempDir Dir;
  std::string Path = std::string(Dir.path()) + "/model.onnx";
  EXPECT_TRUE(onnx2soap::testing::writeModel(Model, Path));
  onnx_import::ImportOptions Options;
  Options.Batch = 4;
  Options.Dims = {{"seq", 6}};
  auto Imported = onnx_import::importModel(Path, Options);
  if (!Imported) {
    ADD_FAILURE() << llvm::toString(Imported.takeError());
    return {};
  }
  auto T = ir::deriveTraining(std::move(Imported->Graph),
                              ir::LossKind::CrossEntropy);
  if (!T) {
    ADD_FAILURE() << llvm::toString(T.takeError());
    return {};
  }
  simulator::Machine M = test::machine("cpu:1", 1);
  simulator::AnalyticCostModel Cost;
  auto Plan = codegen::buildProgramPlan(
      *T,
      soap_search::builtin(soap_search::Builtin::DataParallel, T->G, M, Cost),
      M, Cost, codegen::PlanOptions());
  if (!Plan) {
    ADD_FAILURE() << llvm::toString(Plan.takeError());
    return {};
  }
  return std::move(*Plan);
}

TEST(PlanTensors, TimeMajorInputsAndLabelsCarryTheirSampleDim) {
  codegen::ProgramPlan Plan = planOf(/*TimeMajor=*/true);
  rt::program::Plan View = Plan.view("", "", 0);
  ASSERT_EQ(View.DataInputs.Size, 1);
  ASSERT_GE(View.Labels, 0);
  EXPECT_EQ(View.Tensors[View.DataInputs[0]].SampleDim, 1);
  EXPECT_EQ(View.Tensors[View.Labels].SampleDim, 1);
  try {
    rt::program::datasetFiles(View);
    ADD_FAILURE() << "--data not refused";
  } catch (const rt::RuntimeError &E) {
    EXPECT_NE(std::string(E.what()).find("'x' holds its samples along dim 1"),
              std::string::npos)
        << E.what();
  }
}

TEST(PlanTensors, BatchFirstInputsReadFromDatasets) {
  codegen::ProgramPlan Plan = planOf(/*TimeMajor=*/false);
  rt::program::Plan View = Plan.view("", "", 0);
  ASSERT_EQ(View.DataInputs.Size, 1);
  EXPECT_EQ(View.Tensors[View.DataInputs[0]].SampleDim, 0);
  EXPECT_EQ(rt::program::datasetFiles(View).size(), 2u);
}

// --init random starts a normalization's scale at 1 and its shift at 0, as
// PyTorch's modules do, also where the scale reaches the LayerNorm through
// a Reshape and a Mul (InstanceNormalization, GroupNormalization and
// PyTorch's export of GroupNorm); a scale drawn around 0 would start the
// network with its activations nearly zeroed.
TEST(PlanTensors, RandomInitStartsNormalizationScalesAtOne) {
  ir::TrainingGraph T =
      test::training("tests/fixtures/norm_mini/model.onnx", 4);
  simulator::Machine M = test::machine("cpu:1", 1);
  simulator::AnalyticCostModel Cost;
  codegen::PlanOptions Options;
  Options.Init = codegen::InitKind::Random;
  auto Plan = codegen::buildProgramPlan(
      T, soap_search::builtin(soap_search::Builtin::DataParallel, T.G, M, Cost),
      M, Cost, Options);
  ASSERT_TRUE(bool(Plan)) << llvm::toString(Plan.takeError());
  std::map<std::string, double> Want = {{"stem.1.weight", 1.0},
                                        {"stem.1.bias", 0.0}, // GroupNorm
                                        {"down.1.weight", 1.0},
                                        {"down.1.bias", 0.0}}; // InstanceNorm2d
  unsigned Seen = 0;
  for (const rt::program::BufferInfo &B : Plan->Buffers) {
    if (B.Kind != rt::program::BufferKind::Parameter)
      continue;
    auto It = Want.find(Plan->Tensors[B.Tensor].Name);
    if (It == Want.end())
      continue;
    ++Seen;
    ASSERT_EQ(B.Type, rt::DType::Float32);
    ASSERT_EQ(B.Dims, 1);
    for (int64_t I = 0; I < B.Extent[0]; ++I) {
      float X;
      std::memcpy(&X, Plan->Weights.data() + B.WeightOffset + 4 * I, 4);
      EXPECT_EQ(X, It->second) << It->first << "[" << I << "]";
    }
  }
  EXPECT_EQ(Seen, Want.size());
}

} // namespace
