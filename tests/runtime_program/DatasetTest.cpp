//===- tests/runtime_program/DatasetTest.cpp - Dataset folders ------------===//
//
// `train --data DIR`'s reader: the rows of a step's batch (wrapping around
// the dataset), boxes of them, the same values from a file that holds its
// data and from ONNX external data at an offset; and every way a dataset
// can disagree with the model or be malformed, which must be an error
// naming the file.
//
//===----------------------------------------------------------------------===//
#include "runtime_lib/program/Dataset.h"
#include "runtime_lib/Error.h"
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

using namespace onnx2soap::rt;
using namespace onnx2soap::rt::program;
namespace fs = std::filesystem;

namespace {

class DatasetTest : public ::testing::Test {
protected:
  void SetUp() override {
    Dir = fs::temp_directory_path() /
          ("onnx2soap-dataset-" + std::to_string(::getpid()) + "-" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(Dir);
    fs::create_directories(Dir);
  }
  void TearDown() override { fs::remove_all(Dir); }

  /// N samples of [3] floats, sample n holding 10n, 10n+1, 10n+2.
  static std::vector<float> samples(int64_t N) {
    std::vector<float> V;
    for (int64_t S = 0; S < N; ++S)
      for (int K = 0; K < 3; ++K)
        V.push_back(float(10 * S + K));
    return V;
  }

  onnx::TensorProto floats(const std::vector<int64_t> &Dims) {
    onnx::TensorProto T;
    T.set_name("x");
    T.set_data_type(onnx::TensorProto::FLOAT);
    for (int64_t D : Dims)
      T.add_dims(D);
    return T;
  }

  void write(const std::string &Name, const std::string &Bytes) {
    std::ofstream(Dir / Name, std::ios::binary) << Bytes;
  }

  /// input_0.pb holding Values inline.
  void writeInline(const std::vector<int64_t> &Dims,
                   const std::vector<float> &Values,
                   const std::string &Name = "input_0.pb") {
    onnx::TensorProto T = floats(Dims);
    T.set_raw_data(std::string(reinterpret_cast<const char *>(Values.data()),
                               Values.size() * sizeof(float)));
    write(Name, T.SerializeAsString());
  }

  /// input_0.pb pointing at Location, which holds Pad garbage bytes and
  /// then Values.
  void writeExternal(const std::vector<int64_t> &Dims,
                     const std::vector<float> &Values,
                     const std::string &Location, size_t Pad,
                     const std::string &Offset, const std::string &Length) {
    onnx::TensorProto T = floats(Dims);
    T.set_data_location(onnx::TensorProto::EXTERNAL);
    auto Entry = [&](const std::string &Key, const std::string &Value) {
      auto *E = T.add_external_data();
      E->set_key(Key);
      E->set_value(Value);
    };
    Entry("location", Location);
    if (!Offset.empty())
      Entry("offset", Offset);
    if (!Length.empty())
      Entry("length", Length);
    write("input_0.pb", T.SerializeAsString());
    if (Location.find('/') == std::string::npos)
      write(Location,
            std::string(Pad, '\x7f') +
                std::string(reinterpret_cast<const char *>(Values.data()),
                            Values.size() * sizeof(float)));
  }

  static DatasetFile input(std::vector<int64_t> BatchDims,
                           DType Type = DType::Float32) {
    return {"input_0.pb", "x", Type, std::move(BatchDims)};
  }

  /// The whole [2, 3] batch starting at sample First.
  static std::vector<float> batch(const Dataset &D, int64_t First) {
    std::vector<float> Out(6);
    int64_t Origin[2] = {0, 0}, Extent[2] = {2, 3};
    D.readBox(0, First, Origin, Extent, reinterpret_cast<char *>(Out.data()));
    return Out;
  }

  void expectError(const std::vector<DatasetFile> &Files,
                   const std::string &Part) {
    try {
      Dataset D(Dir.string(), Files);
      ADD_FAILURE() << "no error; expected one containing '" << Part << "'";
    } catch (const RuntimeError &E) {
      EXPECT_NE(std::string(E.what()).find(Part), std::string::npos)
          << E.what();
    }
  }

  fs::path Dir;
};

TEST_F(DatasetTest, StepsWalkTheSamplesAndWrapAround) {
  writeInline({5, 3}, samples(5));
  Dataset D(Dir.string(), {input({2, 3})});
  EXPECT_EQ(D.samples(), 5);
  EXPECT_EQ(batch(D, 0), (std::vector<float>{0, 1, 2, 10, 11, 12}));
  EXPECT_EQ(batch(D, 2), (std::vector<float>{20, 21, 22, 30, 31, 32}));
  // Step 3 of batch 2: samples 4 and 0.
  EXPECT_EQ(batch(D, 4), (std::vector<float>{40, 41, 42, 0, 1, 2}));
  EXPECT_EQ(batch(D, 6), (std::vector<float>{10, 11, 12, 20, 21, 22}));
  EXPECT_EQ(batch(D, 5 * 1000 + 4), batch(D, 4));
}

TEST_F(DatasetTest, BoxesCutRowsAndInnerDims) {
  writeInline({5, 3}, samples(5));
  Dataset D(Dir.string(), {input({4, 3})});
  // Rows 1..3 of the batch from sample 3 (samples 4, 0, 1), columns 1..2.
  int64_t Origin[2] = {1, 1}, Extent[2] = {3, 2};
  std::vector<float> Out(6);
  D.readBox(0, 3, Origin, Extent, reinterpret_cast<char *>(Out.data()));
  EXPECT_EQ(Out, (std::vector<float>{41, 42, 1, 2, 11, 12}));
}

TEST_F(DatasetTest, ExternalDataGivesTheSameRows) {
  writeInline({5, 3}, samples(5));
  Dataset Inline(Dir.string(), {input({2, 3})});
  std::vector<std::vector<float>> Want;
  for (int64_t First : {0, 2, 4, 7})
    Want.push_back(batch(Inline, First));
  writeExternal({5, 3}, samples(5), "x.bin", 16, "16", "60");
  Dataset External(Dir.string(), {input({2, 3})});
  size_t K = 0;
  for (int64_t First : {0, 2, 4, 7})
    EXPECT_EQ(batch(External, First), Want[K++]) << First;
  // No offset or length given: the data starts the file.
  writeExternal({5, 3}, samples(5), "y.bin", 0, "", "");
  Dataset Plain(Dir.string(), {input({2, 3})});
  EXPECT_EQ(batch(Plain, 4), Want[2]);
}

TEST_F(DatasetTest, LabelsAndInputsMustHoldTheSameSamples) {
  writeInline({5, 3}, samples(5));
  onnx::TensorProto L;
  L.set_data_type(onnx::TensorProto::INT64);
  L.add_dims(4);
  for (int I = 0; I < 4; ++I)
    L.add_int64_data(I);
  write("labels.pb", L.SerializeAsString());
  expectError({input({2, 3}), {"labels.pb", "y", DType::Int64, {2}}},
              "labels.pb holds 4 samples");
}

TEST_F(DatasetTest, MismatchesAreErrorsNamingTheFile) {
  writeInline({5, 3}, samples(5));
  expectError({input({2, 4})}, "'x' must be f32 [N,4]");
  expectError({input({2, 3}, DType::Float64)}, "must be f64 [N,3]");
  expectError({input({2, 3, 1})}, "the file holds f32 [5,3]");
  expectError({input({})}, "is a scalar");
  writeInline({0, 3}, {});
  expectError({input({2, 3})}, "N >= 1");
  fs::remove(Dir / "input_0.pb");
  expectError({input({2, 3})}, "input_0.pb");
}

// A time-major input (samples along dim 1) read as samples along dim 0
// would train on time steps as samples: refused before any file is read.
TEST(DatasetFiles, SamplesAlongAnotherDimAreRefused) {
  TensorInfo Tensors[] = {
      {"tokens", TensorRole::Input, DType::Int64, 2, {12, 4}, 1},
      {"targets", TensorRole::Input, DType::Int64, 2, {4, 12}, 0},
      {"steps", TensorRole::Input, DType::Int64, 2, {12, 4}, 1}};
  int32_t Inputs[] = {1};
  Plan P{};
  P.Tensors = {Tensors, 3};
  P.DataInputs = {Inputs, 1};
  P.Labels = -1;
  EXPECT_EQ(datasetFiles(P).size(), 1u);
  Inputs[0] = 0;
  try {
    datasetFiles(P);
    ADD_FAILURE() << "no error";
  } catch (const RuntimeError &E) {
    EXPECT_EQ(std::string(E.what()),
              "--data: 'tokens' holds its samples along dim 1 (time-major), a "
              "dataset folder along dim 0; give the batch with --inputs and "
              "--labels");
  }
  Inputs[0] = 1;
  P.Labels = 2;
  try {
    datasetFiles(P);
    ADD_FAILURE() << "no error";
  } catch (const RuntimeError &E) {
    EXPECT_NE(std::string(E.what()).find("'steps' holds its samples along "
                                         "dim 1"),
              std::string::npos)
        << E.what();
  }
}

TEST_F(DatasetTest, MalformedExternalDataIsAnError) {
  writeExternal({5, 3}, samples(5), "x.bin", 0, "", "");
  fs::resize_file(Dir / "x.bin", 59);
  expectError({input({2, 3})}, "holds 59 bytes; the tensor needs 60");
  writeExternal({5, 3}, samples(5), "x.bin", 8, "8", "");
  fs::resize_file(Dir / "x.bin", 60);
  expectError({input({2, 3})}, "from offset 8");
  writeExternal({5, 3}, samples(5), "x.bin", 0, "", "64");
  expectError({input({2, 3})}, "length 64 bytes");
  writeExternal({5, 3}, samples(5), "x.bin", 0, "-1", "");
  expectError({input({2, 3})}, "offset '-1'");
  writeExternal({5, 3}, samples(5), "../x.bin", 0, "", "");
  expectError({input({2, 3})}, "inside the file's folder");
  writeExternal({5, 3}, samples(5), "/etc/passwd", 0, "", "");
  expectError({input({2, 3})}, "inside the file's folder");
  writeExternal({5, 3}, samples(5), "missing.bin", 0, "", "");
  fs::remove(Dir / "missing.bin");
  expectError({input({2, 3})}, "missing.bin");
}

} // namespace
