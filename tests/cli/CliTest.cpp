//===- tests/cli/CliTest.cpp - The onnx2soap executable end to end --------===//
//
// Runs the built `onnx2soap` as a subprocess (CliTestUtil.h). Bad input must
// give exit code 2, exactly one line on stderr starting with "onnx2soap:
// error: ", and nothing on stdout. `inspect --json` on the sample models must
// report what PyTorch reported when it exported them (samples/expected.json).
// Here: bad input, inspect, clusters, run and train; planning in
// CliPlanTest.cpp, compile in CliCompileTest.cpp.
//
//===----------------------------------------------------------------------===//
#include "CliTestUtil.h"
#include "llvm/Support/FormatVariadic.h"
#include "gmock/gmock.h"
#include <map>
#include <optional>
#include <random>

using namespace onnx2soap::testing;
using namespace onnx2soap::clitest;

namespace {

//===-- Bad input ---------------------------------------------------------===//

TEST_F(CliTest, EmptyFile) {
  std::string Path = Dir.file("empty.onnx");
  ASSERT_TRUE(writeBytes(Path, ""));
  expectUserError(run({"inspect", Path, "--batch", "4"}), "the file is empty");
}

TEST_F(CliTest, RandomBytes) {
  std::mt19937 Rng(7);
  std::string Bytes(2048, '\0');
  for (char &C : Bytes)
    C = static_cast<char>(Rng() & 0xff);
  std::string Path = Dir.file("random.onnx");
  ASSERT_TRUE(writeBytes(Path, Bytes));
  expectUserError(run({"inspect", Path, "--batch", "4"}),
                  "not a valid ONNX model");
}

TEST_F(CliTest, TruncatedModel) {
  std::string Bytes = readFile(samplePath("tiny_mlp.onnx"));
  ASSERT_GT(Bytes.size(), 100u);
  std::string Path = Dir.file("truncated.onnx");
  ASSERT_TRUE(writeBytes(Path, llvm::StringRef(Bytes).drop_back(37)));
  expectUserError(run({"inspect", Path, "--batch", "4"}),
                  "malformed or truncated protobuf");
}

TEST_F(CliTest, MissingModelFile) {
  std::string Path = Dir.file("absent.onnx");
  expectUserError(run({"inspect", Path, "--batch", "4"}),
                  "cannot read '" + Path + "'");
}

TEST_F(CliTest, DirectoryInsteadOfFile) {
  expectUserError(run({"inspect", Dir.path().str(), "--batch", "4"}),
                  "cannot read '" + Dir.path().str() + "'");
}

TEST_F(CliTest, WrongIrVersion) {
  onnx::ModelProto Model = makeModel();
  Model.set_ir_version(42);
  expectUserError(run({"inspect", writeModelFile(Model), "--batch", "4"}),
                  "ONNX IR version 42 is not supported");
}

TEST_F(CliTest, UnknownOpsInOneSortedLine) {
  onnx::ModelProto Model = makeModel();
  Model.mutable_graph()->mutable_node(0)->set_op_type("Zorch");
  Model.mutable_graph()->mutable_node(2)->set_op_type("Blarg");
  expectUserError(run({"inspect", writeModelFile(Model), "--batch", "4"}),
                  "unsupported ONNX operators: Blarg (opset 17) at 'relu'; "
                  "Zorch (opset 17) at 'matmul'");
}

TEST_F(CliTest, CyclicGraph) {
  onnx::ModelProto Model = makeModel();
  Model.mutable_graph()->mutable_node(0)->set_input(0, "y");
  expectUserError(run({"inspect", writeModelFile(Model), "--batch", "4"}),
                  "cycle through node 'matmul'");
}

TEST_F(CliTest, MissingRequiredInput) {
  onnx::ModelProto Model = makeModel();
  Model.mutable_graph()->mutable_node(0)->mutable_input()->RemoveLast();
  expectUserError(run({"inspect", writeModelFile(Model), "--batch", "4"}),
                  "node 'matmul' (#0, op MatMul): required input 1 is "
                  "missing");
}

TEST_F(CliTest, AbsentExternalDataPlans) {
  onnx::ModelProto Model = makeModel();
  setExternalData(*findInitializer(*Model.mutable_graph(), "W"), "w.bin", 0,
                  48);
  RunResult R =
      run({"inspect", writeModelFile(Model), "--batch", "4", "--json"});
  EXPECT_EQ(R.ExitCode, 0) << R.Err;
  EXPECT_EQ(R.Err, "");
  EXPECT_NE(R.Out.find("\"parameters\": 15"), std::string::npos) << R.Out;
}

TEST_F(CliTest, ExternalDataEscapingFolder) {
  onnx::ModelProto Model = makeModel();
  setExternalData(*findInitializer(*Model.mutable_graph(), "W"), "../../w.bin",
                  0, 48);
  expectUserError(run({"inspect", writeModelFile(Model), "--batch", "4"}),
                  "leaves the model's folder");
}

TEST_F(CliTest, SymbolicDimNotBound) {
  expectUserError(run({"inspect", samplePath("tiny_mlp.onnx")}), "is symbolic");
}

TEST_F(CliTest, BatchZero) {
  expectUserError(run({"inspect", samplePath("tiny_mlp.onnx"), "--batch", "0"}),
                  "--batch 0: must be positive");
}

TEST_F(CliTest, BatchNotANumber) {
  expectUserError(
      run({"inspect", samplePath("tiny_mlp.onnx"), "--batch", "lots"}),
      "--batch lots: expected a whole number that fits in 64 bits");
}

TEST_F(CliTest, BatchWithoutValue) {
  expectUserError(run({"inspect", samplePath("tiny_mlp.onnx"), "--batch"}),
                  "for the --batch option: requires a value");
}

TEST_F(CliTest, DimForUnknownName) {
  expectUserError(run({"inspect", samplePath("tiny_mlp.onnx"), "--batch", "4",
                       "--dim", "nosuchdim=3"}),
                  "no symbolic dim 'nosuchdim'");
}

TEST_F(CliTest, DimWithoutValue) {
  expectUserError(run({"inspect", samplePath("tiny_mlp.onnx"), "--batch", "4",
                       "--dim", "batch"}),
                  "--dim batch: expected NAME=V");
}

// A dim of size 0 as --batch 0 is: calibrate divided by it (SIGFPE), the
// planner planned an empty batch.
TEST_F(CliTest, DimOfSizeZero) {
  std::string Model = samplePath("tiny_mlp.onnx"), Out = Dir.file("p.json");
  for (std::vector<std::string> Args :
       {std::vector<std::string>{"inspect", Model},
        {"simulate", Model, "--cluster", "cpu:1", "--strategy",
         "data-parallel"},
        {"calibrate", Model, "--cluster", "cpu:1", "-o", Out}}) {
    Args.insert(Args.end(), {"--dim", "batch=0"});
    expectUserError(run(Args),
                    "--dim batch=0: expected NAME=V with a positive integer V");
  }
  EXPECT_FALSE(llvm::sys::fs::exists(Out));
  expectUserError(
      run({"inspect", Model, "--dim", "batch=1", "--dim", "batch=2"}),
      "--dim batch=2: the dim 'batch' is given twice");
}

// A thread per kernel thread asked for: 100,000 overflowed the stack.
TEST_F(CliTest, ThreadsPastTheCap) {
  std::string Model = samplePath("tiny_mlp.onnx");
  for (std::vector<std::string> Args :
       {std::vector<std::string>{"calibrate", Model},
        {"run", Model, "--data", Dir.file("data")},
        {"train", Model},
        {"search", Model}}) {
    Args.insert(Args.end(), {"--threads", "100000"});
    expectUserError(run(Args), "--threads 100000: expected 0 (all cores) "
                               "to 1024");
  }
  // run and train take a signed number (calibrate and search refuse a
  // sign as they parse it).
  expectUserError(run({"train", Model, "--threads", "-1"}),
                  "--threads -1: expected 0 (all cores) to 1024");
}

// Output that cannot be written (a full disk: /dev/full) is one line and
// exit 2, not LLVM's abort when the stream goes with its error unchecked.
TEST_F(CliTest, StandardOutputOnAFullDisk) {
  if (!llvm::sys::fs::exists("/dev/full"))
    GTEST_SKIP() << "no /dev/full";
  std::string Program = cliPath(), Err = Dir.file("full-stderr.txt");
  llvm::StringRef Argv[] = {Program, "clusters", "--show", "paper-k80"};
  llvm::Optional<llvm::StringRef> Redirects[] = {
      llvm::StringRef(""), llvm::StringRef("/dev/full"), llvm::StringRef(Err)};
  int Code = llvm::sys::ExecuteAndWait(Program, Argv, llvm::None, Redirects,
                                       /*SecondsToWait=*/60);
  EXPECT_EQ(Code, 2);
  EXPECT_EQ(readFile(Err), "onnx2soap: error: cannot write the standard "
                           "output: No space left on device\n");
}

TEST_F(CliTest, NoModelGiven) {
  expectUserError(run({"inspect", "--batch", "4"}), "");
}

TEST_F(CliTest, UnknownFlag) {
  expectUserError(run({"inspect", samplePath("tiny_mlp.onnx"), "--batch", "4",
                       "--frobnicate"}),
                  "onnx2soap: error: Unknown command line argument "
                  "'--frobnicate'");
}

TEST_F(CliTest, NoSubcommand) { expectUserError(run({}), "no subcommand"); }

TEST_F(CliTest, ClustersShowUnknownPreset) {
  expectUserError(run({"clusters", "--show", "paper-k8O"}),
                  "unknown cluster preset 'paper-k8O' (known: paper-p100, "
                  "paper-k80, tensoropt-v100, dgx-h100, cpu:N;");
}

TEST_F(CliTest, ClustersShowBadFile) {
  std::string Path = Dir.file("cluster.json");
  ASSERT_TRUE(writeBytes(Path, "{\"name\": \"x\", \"nodez\": []}"));
  expectUserError(run({"clusters", "--show", Path}),
                  Path + ": unknown key 'nodez' (did you mean 'nodes'?)");
}

//===-- Success -----------------------------------------------------------===//

/// Runs `inspect FILE --batch N --json` and parses its output.
std::optional<llvm::json::Value> inspectJson(const TempDir &Dir,
                                             llvm::StringRef File, int Batch) {
  RunResult R = runCli(Dir, {"inspect", samplePath(File), "--batch",
                             std::to_string(Batch), "--json"});
  EXPECT_EQ(R.ExitCode, 0) << R.ExecError << "\nstderr: " << R.Err;
  EXPECT_EQ(R.Err, "");
  if (R.ExitCode != 0)
    return std::nullopt;
  auto Parsed = llvm::json::parse(R.Out);
  if (!Parsed) {
    ADD_FAILURE() << "not JSON: " << llvm::toString(Parsed.takeError()) << "\n"
                  << R.Out;
    return std::nullopt;
  }
  return std::move(*Parsed);
}

std::vector<int64_t> shapeOf(const llvm::json::Object &Tensor) {
  std::vector<int64_t> Shape;
  if (const llvm::json::Array *Dims = Tensor.getArray("shape"))
    for (const llvm::json::Value &D : *Dims)
      Shape.push_back(D.getAsInteger().getValueOr(-1));
  return Shape;
}

TEST_F(CliTest, InspectTinyMlpJson) {
  auto Value = inspectJson(Dir, "tiny_mlp.onnx", 8);
  ASSERT_TRUE(Value);
  const llvm::json::Object *Root = Value->getAsObject();
  ASSERT_NE(Root, nullptr);
  EXPECT_EQ(Root->getInteger("ops").getValueOr(-1), 5);
  EXPECT_EQ(Root->getInteger("parameters").getValueOr(-1), 26122);

  const llvm::json::Array *Inputs = Root->getArray("inputs");
  ASSERT_NE(Inputs, nullptr);
  ASSERT_EQ(Inputs->size(), 1u);
  const llvm::json::Object *In = (*Inputs)[0].getAsObject();
  ASSERT_NE(In, nullptr);
  std::vector<int64_t> InShape = shapeOf(*In);
  ASSERT_FALSE(InShape.empty());
  EXPECT_EQ(InShape[0], 8);
  EXPECT_TRUE(In->getString("name").hasValue());
  EXPECT_EQ(In->getString("dtype").getValueOr("").str(), "f32");

  const llvm::json::Array *Outputs = Root->getArray("outputs");
  ASSERT_NE(Outputs, nullptr);
  ASSERT_EQ(Outputs->size(), 1u);
  const llvm::json::Object *Out = (*Outputs)[0].getAsObject();
  ASSERT_NE(Out, nullptr);
  std::vector<int64_t> OutShape = shapeOf(*Out);
  ASSERT_EQ(OutShape.size(), 2u);
  EXPECT_EQ(OutShape[0], 8);

  const llvm::json::Object *Kinds = Root->getObject("op_kinds");
  ASSERT_NE(Kinds, nullptr);
  int64_t KindTotal = 0;
  for (const auto &Entry : *Kinds)
    KindTotal += Entry.second.getAsInteger().getValueOr(0);
  EXPECT_EQ(KindTotal, 5);
}

TEST_F(CliTest, ClustersTable) {
  RunResult R = run({"clusters"});
  EXPECT_EQ(R.ExitCode, 0) << R.Err;
  EXPECT_EQ(R.Err, "");
  for (const char *Name :
       {"paper-p100", "paper-k80", "tensoropt-v100", "dgx-h100", "cpu:N"})
    EXPECT_NE(R.Out.find(Name), std::string::npos) << Name << "\n" << R.Out;
  EXPECT_NE(R.Out.find("paper-k80            64    16  K80"), std::string::npos)
      << R.Out;
}

TEST_F(CliTest, ClustersJson) {
  RunResult R = run({"clusters", "--json"});
  ASSERT_EQ(R.ExitCode, 0) << R.Err;
  llvm::json::Array List = jsonArray(R);
  ASSERT_EQ(List.size(), 5u);
  const llvm::json::Object *K80 = List[1].getAsObject();
  ASSERT_NE(K80, nullptr);
  EXPECT_EQ(K80->getString("name").getValueOr(""), "paper-k80");
  EXPECT_EQ(K80->getInteger("devices").getValueOr(-1), 64);
  EXPECT_EQ(K80->getInteger("nodes").getValueOr(-1), 16);
  EXPECT_EQ(K80->getString("device_type").getValueOr(""), "K80");
  const llvm::json::Object *Cpu = List[4].getAsObject();
  ASSERT_NE(Cpu, nullptr);
  EXPECT_EQ(Cpu->getString("name").getValueOr(""), "cpu:N");
  EXPECT_EQ(Cpu->get("devices")->kind(), llvm::json::Value::Null);
}

TEST_F(CliTest, ClustersShowPrintsAReadableClusterFile) {
  RunResult R = run({"clusters", "--show", "cpu:2"});
  ASSERT_EQ(R.ExitCode, 0) << R.Err;
  std::string Path = Dir.file("cpu2.json");
  ASSERT_TRUE(writeBytes(Path, R.Out));
  RunResult Again = run({"clusters", "--show", Path});
  ASSERT_EQ(Again.ExitCode, 0) << Again.Err;
  EXPECT_EQ(Again.Out, R.Out);
  EXPECT_NE(R.Out.find("\"name\": \"cpu:2\""), std::string::npos) << R.Out;
}

TEST_F(CliTest, InspectTableExitsZero) {
  RunResult R = run({"inspect", samplePath("tiny_mlp.onnx"), "--batch", "8"});
  EXPECT_EQ(R.ExitCode, 0) << R.Err;
  EXPECT_EQ(R.Err, "");
  EXPECT_NE(R.Out.find("26122 trainable parameters"), std::string::npos)
      << R.Out;
}

/// Acceptance: parameter counts equal PyTorch's for every sample model.
TEST_F(CliTest, SampleParametersMatchPyTorch) {
  std::string Text = readFile(samplePath("expected.json"));
  ASSERT_FALSE(Text.empty()) << "cannot read samples/expected.json";
  auto Expected = llvm::json::parse(Text);
  ASSERT_TRUE(static_cast<bool>(Expected))
      << llvm::toString(Expected.takeError());
  const llvm::json::Object *Models = Expected->getAsObject();
  ASSERT_NE(Models, nullptr);
  ASSERT_FALSE(Models->empty());
  for (const auto &Entry : *Models) {
    std::string Name = Entry.first.str();
    SCOPED_TRACE(Name);
    const llvm::json::Object *Model = Entry.second.getAsObject();
    ASSERT_NE(Model, nullptr);
    llvm::Optional<llvm::StringRef> File = Model->getString("file");
    llvm::Optional<int64_t> Parameters = Model->getInteger("parameters");
    ASSERT_TRUE(File && Parameters);
    auto Value = inspectJson(Dir, *File, 4);
    if (!Value)
      continue;
    const llvm::json::Object *Root = Value->getAsObject();
    ASSERT_NE(Root, nullptr);
    EXPECT_EQ(Root->getInteger("parameters").getValueOr(-1), *Parameters)
        << File->str();
  }
}

//===-- run and train --------------------------------------------------===//

std::string nodeTest(llvm::StringRef Name) {
  return (llvm::Twine(ONNX2SOAP_TESTDATA_DIR) + "/node/" + Name).str();
}

TEST_F(CliTest, RunComparesWithStoredOutputs) {
  // The shape is an input: it is read at import time from the stored data.
  std::string Test = nodeTest("test_reshape_reordered_all_dims");
  RunResult R = run({"run", Test + "/model.onnx", "--data",
                     Test + "/test_data_set_0", "--out", Dir.file("out")});
  EXPECT_EQ(R.ExitCode, 0) << R.Err;
  EXPECT_THAT(R.Out, ::testing::HasSubstr("output 0 'reshaped': max abs "
                                          "error 0.000000e+00"));
  EXPECT_TRUE(llvm::sys::fs::exists(Dir.file("out") + "/output_0.pb"));
}

TEST_F(CliTest, RunReportsOutputsThatDiffer) {
  // relu(-x) against the stored relu(x): negate test_relu's input with the
  // test_neg model, then run test_relu on it.
  std::string Relu = nodeTest("test_relu"), Neg = nodeTest("test_neg");
  std::string Input = Dir.file("input"), Negated = Dir.file("negated"),
              Mixed = Dir.file("mixed");
  llvm::sys::fs::create_directories(Input);
  llvm::sys::fs::create_directories(Mixed);
  llvm::sys::fs::copy_file(Relu + "/test_data_set_0/input_0.pb",
                           Input + "/input_0.pb");
  RunResult First =
      run({"run", Neg + "/model.onnx", "--data", Input, "--out", Negated});
  ASSERT_EQ(First.ExitCode, 0) << First.Err;
  llvm::sys::fs::copy_file(Negated + "/output_0.pb", Mixed + "/input_0.pb");
  llvm::sys::fs::copy_file(Relu + "/test_data_set_0/output_0.pb",
                           Mixed + "/output_0.pb");
  RunResult R = run({"run", Relu + "/model.onnx", "--data", Mixed});
  EXPECT_EQ(R.ExitCode, 3) << R.Err;
  EXPECT_THAT(R.Out, ::testing::HasSubstr("FAIL"));
  // Writing into the --data folder replaced the expected outputs with the
  // new ones, and the run passed.
  std::string Expected = readFile(Mixed + "/output_0.pb");
  expectUserError(run({"run", Relu + "/model.onnx", "--data", Mixed, "--out",
                       Mixed + "/."}),
                  "--out " + Mixed + "/.: the folder of --data");
  EXPECT_EQ(readFile(Mixed + "/output_0.pb"), Expected);
}

// NaN where the reference has NaN is equal, and said to be (an output of
// NaN only printed errors of 0 and nothing else); NaN where it has a
// number differs.
TEST_F(CliTest, RunCountsNaNsInBoth) {
  std::string Neg = nodeTest("test_neg");
  onnx::TensorProto Input;
  ASSERT_TRUE(
      Input.ParseFromString(readFile(Neg + "/test_data_set_0/input_0.pb")));
  ASSERT_EQ(Input.data_type(), onnx::TensorProto::FLOAT);
  std::string Bytes = Input.raw_data();
  ASSERT_GE(Bytes.size(), 3 * sizeof(float));
  float Nan = std::nanf("");
  for (size_t E : {size_t(0), size_t(2)})
    std::memcpy(&Bytes[E * sizeof(float)], &Nan, sizeof Nan);
  Input.set_raw_data(Bytes);
  std::string Data = Dir.file("data");
  llvm::sys::fs::create_directories(Data);
  ASSERT_TRUE(writeBytes(Data + "/input_0.pb", Input.SerializeAsString()));
  // The expected outputs: ours, then one NaN made a number.
  RunResult First = run(
      {"run", Neg + "/model.onnx", "--data", Data, "--out", Dir.file("out")});
  ASSERT_EQ(First.ExitCode, 0) << First.Err;
  llvm::sys::fs::copy_file(Dir.file("out") + "/output_0.pb",
                           Data + "/output_0.pb");
  RunResult R = run({"run", Neg + "/model.onnx", "--data", Data});
  EXPECT_EQ(R.ExitCode, 0) << R.Err;
  EXPECT_THAT(R.Out, ::testing::HasSubstr("max rel error 0.000000e+00 (2 "
                                          "elements NaN in both): ok"));
  onnx::TensorProto Output;
  ASSERT_TRUE(Output.ParseFromString(readFile(Data + "/output_0.pb")));
  std::string Want = Output.raw_data();
  float One = 1;
  std::memcpy(&Want[0], &One, sizeof One);
  Output.set_raw_data(Want);
  ASSERT_TRUE(writeBytes(Data + "/output_0.pb", Output.SerializeAsString()));
  RunResult Differs = run({"run", Neg + "/model.onnx", "--data", Data});
  EXPECT_EQ(Differs.ExitCode, 3) << Differs.Err;
  EXPECT_THAT(Differs.Out,
              ::testing::HasSubstr("(1 element NaN in both): FAIL"));
}

TEST_F(CliTest, TrainReproducesPyTorchLosses) {
  std::string Fixture =
      (llvm::Twine(ONNX2SOAP_SOURCE_DIR) + "/tests/fixtures/mlp").str();
  RunResult R =
      run({"train", Fixture + "/model.onnx", "--inputs",
           Fixture + "/input_0.pb", "--labels", Fixture + "/labels.pb",
           "--steps", "5", "--optimizer", "sgd", "--lr", "0.1"});
  ASSERT_EQ(R.ExitCode, 0) << R.Err;
  // PyTorch's losses (tests/fixtures/mlp/losses.json), 9 significant digits.
  EXPECT_THAT(R.Out, ::testing::StartsWith("step 0 loss 2.23979902\n"
                                           "step 1 loss 2.18663"));
  EXPECT_EQ(llvm::StringRef(R.Out).count('\n'), 5u);
}

TEST_F(CliTest, TrainRefusesBadFlags) {
  std::string Fixture =
      (llvm::Twine(ONNX2SOAP_SOURCE_DIR) + "/tests/fixtures/mlp").str();
  expectUserError(run({"train", Fixture + "/model.onnx", "--inputs",
                       Fixture + "/input_0.pb", "--labels",
                       Fixture + "/labels.pb", "--optimizer", "lbfgs"}),
                  "--optimizer lbfgs");
  expectUserError(run({"train", Fixture + "/model.onnx", "--labels",
                       Fixture + "/labels.pb"}),
                  "give each with --inputs");
  expectUserError(
      run({"train", Fixture + "/model.onnx", "--inputs", Fixture + "/labels.pb",
           "--labels", Fixture + "/labels.pb"}),
      "--inputs");
  // Settings outside their range trained on into NaN losses.
  for (auto [Flag, Value, Expected] :
       std::vector<std::tuple<const char *, const char *, const char *>>{
           {"--lr", "inf", "--lr inf: expected a finite number of at least 0"},
           {"--beta2", "-1",
            "--beta2 -1: expected from 0 to 1 (not "
            "included)"},
           {"--beta1", "1", "--beta1 1: expected from 0 to 1 (not included)"},
           {"--dampening", "2", "--dampening 2: expected from 0 to 1"},
           {"--momentum", "nan",
            "--momentum nan: expected a finite number of at least 0"},
           {"--weight-decay", "-1",
            "--weight-decay -1: expected a finite number of at least 0"},
           {"--eps", "-1", "--eps -1: expected a finite number of at least 0"}})
    expectUserError(run({"train", Fixture + "/model.onnx", "--inputs",
                         Fixture + "/input_0.pb", "--labels",
                         Fixture + "/labels.pb", Flag, Value}),
                    Expected);
  // Another optimizer's settings did nothing, without a word.
  for (auto [Optimizer, Flag, Expected] :
       std::vector<std::tuple<const char *, const char *, const char *>>{
           {"adam", "--momentum=0.5",
            "--momentum is for SGD only, not --optimizer adam"},
           {"adamw", "--nesterov",
            "--nesterov is for SGD only, not --optimizer adamw"},
           {"sgd", "--beta1=0.8",
            "--beta1 is for Adam and AdamW only, not --optimizer sgd"},
           {"sgd", "--eps=1e-6",
            "--eps is for Adam and AdamW only, not --optimizer sgd"}})
    expectUserError(
        run({"train", Fixture + "/model.onnx", "--inputs",
             Fixture + "/input_0.pb", "--labels", Fixture + "/labels.pb",
             "--optimizer", Optimizer, Flag}),
        Expected);
}

// A tensor file is the input's type and shape, not only its size: raw
// bytes of another element type or shape of the same size were once
// trained on as they were. Nor is it a device (/dev/zero was read until
// memory ran out).
TEST_F(CliTest, TrainRefusesTensorsOfAnotherTypeOrShape) {
  std::string Fixture =
      (llvm::Twine(ONNX2SOAP_SOURCE_DIR) + "/tests/fixtures/mlp").str();
  onnx::TensorProto Input;
  ASSERT_TRUE(Input.ParseFromString(readFile(Fixture + "/input_0.pb")));
  ASSERT_GE(Input.dims_size(), 2);
  std::string Shape = "[" + std::to_string(Input.dims(0)) + "," +
                      std::to_string(Input.dims(1)) + "]";
  auto Train = [&](const std::string &Inputs) {
    return run({"train", Fixture + "/model.onnx", "--inputs", Inputs,
                "--labels", Fixture + "/labels.pb"});
  };
  onnx::TensorProto Ints = Input;
  Ints.set_data_type(onnx::TensorProto::INT32);
  std::string IntsFile = Dir.file("ints.pb");
  ASSERT_TRUE(writeBytes(IntsFile, Ints.SerializeAsString()));
  expectUserError(Train(IntsFile), "--inputs: '" + IntsFile + "' holds i32 " +
                                       Shape + ", expected f32 " + Shape);
  onnx::TensorProto Flat = Input;
  Flat.clear_dims();
  Flat.add_dims(Input.dims(0) * Input.dims(1));
  std::string FlatFile = Dir.file("flat.pb");
  ASSERT_TRUE(writeBytes(FlatFile, Flat.SerializeAsString()));
  expectUserError(Train(FlatFile), "' holds f32 [" +
                                       std::to_string(Flat.dims(0)) +
                                       "], expected f32 " + Shape);
  if (llvm::sys::fs::exists("/dev/zero"))
    expectUserError(Train("/dev/zero"),
                    "--inputs: '/dev/zero' is not a regular file");
}

// Memory the CPU backend cannot get for the batch asked for is one error
// line, not std::terminate's abort (the address space is limited so that
// the allocation fails whatever the machine's overcommit policy).
TEST_F(CliTest, TrainOutOfMemory) {
  if (!llvm::sys::fs::can_execute("/bin/sh"))
    GTEST_SKIP() << "no /bin/sh";
  std::string Fixture =
      (llvm::Twine(ONNX2SOAP_SOURCE_DIR) + "/tests/fixtures/cnn_bn").str();
  std::string Command = "ulimit -v 4000000; exec '" + cliPath() + "' train '" +
                        samplePath("tiny_cnn.onnx") +
                        "' --batch 100000000 --inputs '" + Fixture +
                        "/input_0.pb' --labels '" + Fixture + "/labels.pb'";
  std::string Err = Dir.file("oom-stderr.txt");
  llvm::StringRef Argv[] = {"/bin/sh", "-c", Command};
  llvm::Optional<llvm::StringRef> Redirects[] = {
      llvm::StringRef(""), llvm::StringRef(""), llvm::StringRef(Err)};
  int Code = llvm::sys::ExecuteAndWait("/bin/sh", Argv, llvm::None, Redirects,
                                       /*SecondsToWait=*/60);
  EXPECT_EQ(Code, 2);
  EXPECT_EQ(readFile(Err), "onnx2soap: error: cpu backend: out of host "
                           "memory allocating 307200000000 bytes\n");
}

// `clusters --show C --measured FILE`: FILE's tables come first, the
// cluster's own after; what does not fit C is a one-line error naming FILE.
TEST_F(CliTest, ClustersShowAddsMeasuredTables) {
  auto Table = [](const char *From, const char *To, double Us) {
    return llvm::json::Object{{"from", From},
                              {"to", To},
                              {"sizes_bytes", llvm::json::Array{8}},
                              {"times_us", llvm::json::Array{Us}}};
  };
  std::string Own = Dir.file("own.json"), New = Dir.file("new.json");
  RunResult Shown = run({"clusters", "--show", "cpu:2"});
  ASSERT_EQ(Shown.ExitCode, 0) << Shown.Err;
  auto Cluster = llvm::json::parse(Shown.Out);
  ASSERT_TRUE(static_cast<bool>(Cluster));
  (*Cluster->getAsObject())["measured"] = llvm::json::Object{
      {"transfers", llvm::json::Array{Table("node0/cpu0", "node0/cpu1", 5)}}};
  ASSERT_TRUE(writeBytes(Own, llvm::formatv("{0:2}", *Cluster).str()));
  ASSERT_TRUE(writeBytes(
      New, llvm::formatv(
               "{0}",
               llvm::json::Value(llvm::json::Object{
                   {"measured",
                    llvm::json::Object{
                        {"transfers", llvm::json::Array{Table(
                                          "node0/cpu1", "node0/cpu0", 7)}}}}}))
               .str()));
  RunResult R = run({"clusters", "--show", Own, "--measured", New});
  ASSERT_EQ(R.ExitCode, 0) << R.Err;
  auto Merged = llvm::json::parse(R.Out);
  ASSERT_TRUE(static_cast<bool>(Merged)) << R.Out;
  const llvm::json::Array *Transfers =
      Merged->getAsObject()->getObject("measured")->getArray("transfers");
  ASSERT_NE(Transfers, nullptr);
  ASSERT_EQ(Transfers->size(), 2u);
  EXPECT_EQ((*Transfers)[0].getAsObject()->getString("from").getValueOr(""),
            "node0/cpu1");
  EXPECT_EQ((*Transfers)[1].getAsObject()->getString("from").getValueOr(""),
            "node0/cpu0");

  expectUserError(run({"clusters", "--measured", New}),
                  "--measured FILE goes with --show CLUSTER");
  expectUserError(run({"clusters", "--show", "paper-k80", "--measured", New}),
                  New + ": measured.transfers[0].from: unknown device "
                        "'node0/cpu1'");
  std::string Bad = Dir.file("bad.json");
  ASSERT_TRUE(writeBytes(Bad, "{\"times\": 1}"));
  expectUserError(run({"clusters", "--show", "cpu:2", "--measured", Bad}),
                  Bad + ": expected an object with a 'measured' section");
  expectUserError(
      run({"clusters", "--show", "cpu:2", "--measured", Dir.file("no.json")}),
      "no.json: cannot read it");
}

TEST_F(CliTest, ClustersShowAddsMeasuredDeviceMemory) {
  // What --profile-comm writes on GPUs: the runtime's and NCCL's memory,
  // which go to the type of the devices measured, and the planner counts.
  std::string File = Dir.file("memory.json");
  ASSERT_TRUE(
      writeBytes(File, R"json({"measured": {"transfers": [], "all_reduces": []},
  "device_memory": {"devices": ["node0/gpu0", "node0/gpu1"],
    "runtime_MiB": 401.5, "communicator_MiB": 180, "peer_MiB": 9}})json"));
  RunResult R = run({"clusters", "--show", "paper-k80", "--measured", File});
  ASSERT_EQ(R.ExitCode, 0) << R.Err;
  auto Merged = llvm::json::parse(R.Out);
  ASSERT_TRUE(static_cast<bool>(Merged)) << R.Out;
  const llvm::json::Object &Type =
      *(*Merged->getAsObject()->getArray("device_types"))[0].getAsObject();
  EXPECT_EQ(Type.getNumber("runtime_MiB"), llvm::Optional<double>(401.5));
  EXPECT_EQ(Type.getNumber("communicator_MiB"), llvm::Optional<double>(180));
  EXPECT_EQ(Type.getNumber("peer_MiB"), llvm::Optional<double>(9));
  std::string Cluster = Dir.file("k80-measured.json");
  ASSERT_TRUE(writeBytes(Cluster, R.Out));
  // Data parallelism on 4 of them: the runtime and one communicator each.
  RunResult Sim =
      run(planArgs("simulate", Cluster,
                   {"--gpus", "4", "--strategy", "data-parallel", "--json"}));
  ASSERT_EQ(Sim.ExitCode, 0) << Sim.Err;
  llvm::json::Object Out = jsonObject(Sim);
  const llvm::json::Object &Device =
      *(*Out.getArray("devices"))[0].getAsObject();
  EXPECT_EQ(Device.getNumber("runtime_memory"),
            llvm::Optional<double>((401.5 + 180) * (1 << 20)));
  EXPECT_EQ(Device.getInteger("communicators"), llvm::Optional<int64_t>(1));
  EXPECT_EQ(Device.getInteger("peers"), llvm::Optional<int64_t>(0));

  auto Write = [&](const char *Memory) {
    std::string Bad = Dir.file("bad-memory.json");
    EXPECT_TRUE(writeBytes(
        Bad, std::string(R"json({"measured": {}, "device_memory": )json") +
                 Memory + "}"));
    return Bad;
  };
  std::string Bad = Write(R"json({"devices": ["node0/gpu9"]})json");
  expectUserError(run({"clusters", "--show", "paper-k80", "--measured", Bad}),
                  Bad + ": device_memory.devices[0]: no device 'node0/gpu9'");
  Bad = Write(R"json({"devices": ["node0/gpu0"], "runtime_MiB": -1})json");
  expectUserError(run({"clusters", "--show", "paper-k80", "--measured", Bad}),
                  Bad + ": device_memory.runtime_MiB: expected a number >= 0");
  // Named where it is in this file, not where it lands in the cluster's.
  Bad = Write(R"json({"devices": ["node0/gpu0"], "runtime_MiB": 1e308})json");
  expectUserError(run({"clusters", "--show", "paper-k80", "--measured", Bad}),
                  Bad + ": device_memory.runtime_MiB: is too large");
  Bad = Write(R"json({"devices": ["node0/gpu0"], "context_MiB": 1})json");
  expectUserError(run({"clusters", "--show", "paper-k80", "--measured", Bad}),
                  Bad + ": device_memory: unknown key 'context_MiB'");
  Bad = Write(R"json([1])json");
  expectUserError(run({"clusters", "--show", "paper-k80", "--measured", Bad}),
                  Bad + ": device_memory: expected an object");
  // Figures for no device, or a device twice, were taken without a word.
  Bad = Write(R"json({"devices": [], "runtime_MiB": 1})json");
  expectUserError(run({"clusters", "--show", "paper-k80", "--measured", Bad}),
                  Bad + ": device_memory.devices: expected an array of device "
                        "names");
  Bad = Write(R"json({"devices": ["node0/gpu0", "node0/gpu0"]})json");
  expectUserError(run({"clusters", "--show", "paper-k80", "--measured", Bad}),
                  Bad + ": device_memory.devices[1]: device 'node0/gpu0' is "
                        "listed twice");
  Bad = Write(R"json({"devices": ["node0/gpu0"], "runtime_MiB": 1e14})json");
  expectUserError(run({"clusters", "--show", "paper-k80", "--measured", Bad}),
                  Bad + ": device_memory.runtime_MiB: is more than the memory "
                        "of device type 'K80' (12 GiB)");
  // A misspelt section was dropped, the file taken as measuring nothing.
  Bad = Dir.file("misspelt.json");
  ASSERT_TRUE(writeBytes(
      Bad, R"json({"measured": {}, "device_memroy": {"devices": []}})json"));
  expectUserError(run({"clusters", "--show", "paper-k80", "--measured", Bad}),
                  Bad + ": unknown key 'device_memroy' (expected 'measured' "
                        "and, optionally, 'device_memory')");
}

} // namespace
