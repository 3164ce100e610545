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

} // namespace
