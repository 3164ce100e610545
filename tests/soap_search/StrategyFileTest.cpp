//===- tests/soap_search/StrategyFileTest.cpp - Strategy files ------------===//
//
// Strategies written and read back are the same strategies, the bytes do
// not depend on anything but the strategy and its target, and every way a
// file can be wrong for the model and cluster at hand is refused with a
// message naming the file and the difference (a table of edits to a good
// file, after LLVM's JSONTest).
//
//===----------------------------------------------------------------------===//
#include "soap_search/StrategyFile.h"
#include "onnx_import/Importer.h"
#include "soap_search/Builtins.h"
#include "soap_search/ConfigSpace.h"
#include "llvm/Support/JSON.h"
#include "gtest/gtest.h"
#include <functional>

using namespace onnx2soap;
using namespace onnx2soap::simulator;
using namespace onnx2soap::soap_search;

namespace {

const char *const ModelPath = ONNX2SOAP_SOURCE_DIR "/samples/tiny_cnn.onnx";

class StrategyFileTest : public ::testing::Test {
protected:
  void SetUp() override {
    onnx_import::ImportOptions Options;
    Options.Batch = 8;
    auto Model = onnx_import::importModel(ModelPath, Options);
    ASSERT_TRUE(static_cast<bool>(Model)) << llvm::toString(Model.takeError());
    G = std::move(Model->Graph);
    auto Preset = Machine::preset("paper-p100");
    ASSERT_TRUE(static_cast<bool>(Preset))
        << llvm::toString(Preset.takeError());
    auto Four = Preset->firstDevices(4);
    ASSERT_TRUE(static_cast<bool>(Four)) << llvm::toString(Four.takeError());
    M = std::move(*Four);
    ModelSettings Settings;
    Settings.Batch = 8;
    auto T = makeTarget(ModelPath, Settings, M);
    ASSERT_TRUE(static_cast<bool>(T)) << llvm::toString(T.takeError());
    Target = std::move(*T);
  }

  std::string write(const Strategy &S) {
    return writeStrategy(G, S, Target,
                         {1.5e-3, {1e9, 2e9, 3e9, 4e9}, true, "momentum"});
  }

  ir::Graph G;
  Machine M;
  StrategyTarget Target;
};

TEST_F(StrategyFileTest, TargetHashesModelAndCluster) {
  EXPECT_EQ(Target.ModelFile, "tiny_cnn.onnx");
  EXPECT_EQ(Target.ModelSha256.size(), 64u);
  EXPECT_EQ(Target.ModelSha256.find_first_not_of("0123456789abcdef"),
            std::string::npos);
  EXPECT_EQ(Target.NumDevices, 4u);
  EXPECT_EQ(Target.ClusterName, M.Name);
  // The SHA-256 of "abc" (FIPS 180-2, appendix B.1).
  EXPECT_EQ(sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223"
                              "b00361a396177a9cb410ff61f20015ad");
  auto Two = M.firstDevices(2);
  ASSERT_TRUE(static_cast<bool>(Two));
  EXPECT_NE(sha256Hex(clusterText(*Two)), Target.ClusterSha256);
}

TEST_F(StrategyFileTest, RoundTripsBuiltinAndRandomStrategies) {
  AnalyticCostModel Cost;
  std::vector<Strategy> Strategies;
  for (Builtin Kind :
       {Builtin::DataParallel, Builtin::ModelParallel, Builtin::Expert})
    Strategies.push_back(builtin(Kind, G, M, Cost));
  ConfigSpace Space(G, M.numDevices());
  Rng R = chainRng(11, 0);
  for (int I = 0; I < 20; ++I) {
    Strategy S;
    for (const ir::Op &O : G.ops())
      S.Configs.push_back(Space.random(O.Id, R));
    Strategies.push_back(std::move(S));
  }
  for (const Strategy &S : Strategies) {
    ASSERT_FALSE(static_cast<bool>(checkStrategy(G, S, M.numDevices())));
    std::string Text = write(S);
    EXPECT_EQ(Text, write(S)) << "writing is deterministic";
    ASSERT_FALSE(Text.empty());
    EXPECT_EQ(Text.back(), '\n');
    auto Read = parseStrategy(Text, "strategy.json", G, Target);
    ASSERT_TRUE(static_cast<bool>(Read)) << llvm::toString(Read.takeError());
    EXPECT_TRUE(*Read == S);
  }
}

TEST_F(StrategyFileTest, RecordsTheGradientBucketWhenGiven) {
  AnalyticCostModel Cost;
  Strategy S = builtin(Builtin::DataParallel, G, M, Cost);
  std::optional<double> Bucket;
  auto Read = parseStrategy(write(S), "strategy.json", G, Target, &Bucket);
  ASSERT_TRUE(static_cast<bool>(Read)) << llvm::toString(Read.takeError());
  EXPECT_FALSE(Bucket.has_value()) << "not written, not read";
  for (double Bytes : {0.0, 4194304.0}) {
    std::string Text = writeStrategy(
        G, S, Target, {1.5e-3, {1e9, 2e9, 3e9, 4e9}, true, "momentum"}, Bytes);
    EXPECT_NE(Text.find("\"gradient_bucket\": " +
                        std::to_string(int64_t(Bytes)) + ",\n"),
              std::string::npos)
        << Text;
    Read = parseStrategy(Text, "strategy.json", G, Target, &Bucket);
    ASSERT_TRUE(static_cast<bool>(Read)) << llvm::toString(Read.takeError());
    EXPECT_TRUE(*Read == S);
    EXPECT_EQ(Bucket, Bytes);
  }
}

TEST_F(StrategyFileTest, KeysAreSortedAndOneOpPerLine) {
  AnalyticCostModel Cost;
  std::string Text = write(builtin(Builtin::DataParallel, G, M, Cost));
  const std::string &Rest = Text;
  // Top-level keys in order.
  size_t Last = 0;
  for (const char *Key : {"\"cluster\"", "\"format\"", "\"model\"", "\"ops\"",
                          "\"predicted\"", "\"settings\"", "\"version\""}) {
    size_t At = Rest.find(Key);
    ASSERT_NE(At, std::string::npos) << Key;
    EXPECT_GT(At, Last) << Key;
    Last = At;
  }
  // Each op on its own line, names in sorted order.
  std::string First = strategyKey(G, 0);
  size_t Line = Rest.find("\"" + First + "\": {\"degrees\":[");
  EXPECT_NE(Line, std::string::npos) << Text;
  std::vector<std::string> Names;
  for (const ir::Op &O : G.ops())
    Names.push_back(strategyKey(G, O.Id));
  std::sort(Names.begin(), Names.end());
  Last = 0;
  for (const std::string &Name : Names) {
    size_t At = Rest.find("\n    \"" + Name + "\": {");
    ASSERT_NE(At, std::string::npos) << Name;
    EXPECT_GT(At, Last) << Name;
    Last = At;
  }
}

struct ErrorCase {
  const char *Name;
  std::function<void(llvm::json::Object &, const std::string &FirstOp)> Edit;
  const char *Expected;
};

llvm::json::Object &object(llvm::json::Object &O, llvm::StringRef Key) {
  return *O.getObject(Key);
}

TEST_F(StrategyFileTest, RefusesFilesThatDoNotMatch) {
  AnalyticCostModel Cost;
  std::string Good = write(builtin(Builtin::DataParallel, G, M, Cost));
  std::string FirstOp = strategyKey(G, 0);
  using llvm::json::Object;
  const ErrorCase Cases[] = {
      {"format", [](Object &F, auto &) { F["format"] = "onnx2soap-cluster"; },
       "strategy.json: not a strategy file (its \"format\" is not "
       "\"onnx2soap-strategy\")"},
      {"version", [](Object &F, auto &) { F["version"] = 2; },
       "strategy.json: strategy format version 2 is not supported (this "
       "onnx2soap reads version 1)"},
      {"version type", [](Object &F, auto &) { F["version"] = "1"; },
       "strategy.json: version: missing or not an integer"},
      {"model",
       [](Object &F, auto &) {
         object(F, "model")["sha256"] = std::string(64, 'a');
       },
       "strategy.json was made for model tiny_cnn.onnx (sha256 "
       "aaaaaaaaaaaa…), not this one (tiny_cnn.onnx sha256 "},
      {"model missing", [](Object &F, auto &) { F.erase("model"); },
       "strategy.json: model: missing"},
      {"cluster devices",
       [](Object &F, auto &) { object(F, "cluster")["devices"] = 8; },
       "strategy.json was made for cluster 'paper-p100 (first 4 devices)' "
       "with 8 devices"},
      {"cluster hash",
       [](Object &F, auto &) {
         object(F, "cluster")["sha256"] = std::string(64, 'b');
       },
       "(sha256 bbbbbbbbbbbb…), not 'paper-p100 (first 4 devices)' with 4 "
       "devices"},
      {"batch", [](Object &F, auto &) { object(F, "settings")["batch"] = 16; },
       "strategy.json was made with --batch 16, not --batch 8; give the same "
       "model flags, or re-run search"},
      {"no batch",
       [](Object &F, auto &) { object(F, "settings")["batch"] = nullptr; },
       "was made with no --batch, not --batch 8"},
      {"dims",
       [](Object &F, auto &) {
         object(F, "settings")["dims"] = Object{{"seq", 32}};
       },
       "was made with --dim seq=32, not no --dim"},
      {"fuse",
       [](Object &F, auto &) {
         object(F, "settings")["fuse_patterns"] = false;
       },
       "was made with --no-fuse, not no --no-fuse"},
      {"batch missing",
       [](Object &F, auto &) { object(F, "settings").erase("batch"); },
       "strategy.json: settings.batch: missing"},
      {"batch zero",
       [](Object &F, auto &) { object(F, "settings")["batch"] = 0; },
       "strategy.json: settings.batch: expected a positive integer or null"},
      {"dim negative",
       [](Object &F, auto &) {
         object(F, "settings")["dims"] = Object{{"seq", -1}};
       },
       "strategy.json: settings.dims.seq: expected a non-negative integer"},
      {"settings type", [](Object &F, auto &) { F["settings"] = 8; },
       "strategy.json: settings: expected an object"},
      {"model file type",
       [](Object &F, auto &) { object(F, "model")["file"] = 3; },
       "strategy.json: model.file: expected a string"},
      {"model hash missing",
       [](Object &F, auto &) { object(F, "model").erase("sha256"); },
       "strategy.json: model.sha256: missing"},
      {"cluster name missing",
       [](Object &F, auto &) { object(F, "cluster").erase("name"); },
       "strategy.json: cluster.name: missing"},
      {"unroll",
       [](Object &F, auto &) { object(F, "settings")["unroll_rnn"] = true; },
       "was made with --unroll-rnn, not no --unroll-rnn"},
      {"loss", [](Object &F, auto &) { object(F, "settings")["loss"] = "mse"; },
       "was made with --loss mse, not --loss cross-entropy"},
      {"settings type",
       [](Object &F, auto &) { object(F, "settings")["unroll_rnn"] = 1; },
       "strategy.json: settings.unroll_rnn: expected true or false"},
      {"gradient bucket", [](Object &F, auto &) { F["gradient_bucket"] = -1; },
       "strategy.json: gradient_bucket: expected a number of bytes (an "
       "integer of at least 0)"},
      {"gradient bucket type",
       [](Object &F, auto &) { F["gradient_bucket"] = "4MiB"; },
       "strategy.json: gradient_bucket: expected a number of bytes"},
      // A misspelt optional key would otherwise be dropped without a word
      // (the gradient bucket size falling back to auto).
      {"unknown top-level key",
       [](Object &F, auto &) { F["gradient_buket"] = 4194304; },
       "strategy.json: unknown key 'gradient_buket' (did you mean "
       "'gradient_bucket'?)"},
      {"unknown model key",
       [](Object &F, auto &) { object(F, "model")["sha265"] = "x"; },
       "strategy.json: model: unknown key 'sha265' (did you mean "
       "'sha256'?)"},
      {"unknown cluster key",
       [](Object &F, auto &) { object(F, "cluster")["gpus"] = 4; },
       "strategy.json: cluster: unknown key 'gpus'"},
      {"unknown settings key",
       [](Object &F, auto &) { object(F, "settings")["unroll"] = true; },
       "strategy.json: settings: unknown key 'unroll' (expected one of: "},
      {"unknown op",
       [](Object &F, auto &) {
         object(F, "ops")["conv99"] = Object{{"degrees", {1}}};
       },
       "strategy.json: unknown op 'conv99'"},
      {"missing op",
       [](Object &F, const std::string &First) {
         object(F, "ops").erase(First);
       },
       "has no config; the file may be for another version of the model"},
      {"op type",
       [](Object &F, const std::string &First) { object(F, "ops")[First] = 4; },
       ": expected an object {\"degrees\": [...], \"reduction\": R, "
       "\"first_device\": D, \"device_stride\": S}"},
      {"degrees missing",
       [](Object &F, const std::string &First) {
         object(object(F, "ops"), First).erase("degrees");
       },
       ".degrees: missing"},
      {"degrees type",
       [](Object &F, const std::string &First) {
         object(object(F, "ops"), First)["degrees"] = 4;
       },
       ".degrees: expected an array of integers"},
      {"degree zero",
       [](Object &F, const std::string &First) {
         object(object(F, "ops"), First)["degrees"] = {0, 1, 1, 1};
       },
       ".degrees[0]: expected an integer of at least 1"},
      {"negative device",
       [](Object &F, const std::string &First) {
         object(object(F, "ops"), First)["first_device"] = -1;
       },
       ".first_device: expected an integer of at least 0"},
      {"unknown key",
       [](Object &F, const std::string &First) {
         object(object(F, "ops"), First)["devices"] = 4;
       },
       ": unknown key 'devices'"},
      {"missing key",
       [](Object &F, const std::string &First) {
         object(object(F, "ops"), First).erase("reduction");
       },
       ".reduction: missing"},
      {"device out of range",
       [](Object &F, const std::string &First) {
         object(object(F, "ops"), First)["first_device"] = 100;
       },
       "strategy.json: "},
  };
  for (const ErrorCase &C : Cases) {
    auto Parsed = llvm::json::parse(Good);
    ASSERT_TRUE(static_cast<bool>(Parsed));
    C.Edit(*Parsed->getAsObject(), FirstOp);
    std::string Text;
    llvm::raw_string_ostream OS(Text);
    OS << *Parsed;
    auto Read = parseStrategy(OS.str(), "strategy.json", G, Target);
    ASSERT_FALSE(static_cast<bool>(Read)) << C.Name;
    std::string Message = llvm::toString(Read.takeError());
    EXPECT_NE(Message.find(C.Expected), std::string::npos)
        << C.Name << ": " << Message;
    EXPECT_EQ(Message.find('\n'), std::string::npos) << C.Name;
  }
}

TEST_F(StrategyFileTest, InvalidConfigNamesTheOp) {
  AnalyticCostModel Cost;
  Strategy S = builtin(Builtin::DataParallel, G, M, Cost);
  // Every partition of the first op on one device.
  S[0].DeviceStride = 0;
  std::string Text = write(S);
  auto Read = parseStrategy(Text, "strategy.json", G, Target);
  ASSERT_FALSE(static_cast<bool>(Read));
  std::string Message = llvm::toString(Read.takeError());
  EXPECT_EQ(Message.rfind("strategy.json: ", 0), 0u) << Message;
  EXPECT_NE(Message.find(G.op(0).Name), std::string::npos) << Message;
}

TEST_F(StrategyFileTest, RefusesTextThatIsNotJson) {
  struct Case {
    const char *Text;
    const char *Expected;
  } Cases[] = {
      {"", "strategy.json: not valid JSON: line 1, column 1: "},
      {"{\"format\": ", "strategy.json: not valid JSON: line 1, column 11: "},
      {"{\n  \"a\": [1,\n  2?]}", "not valid JSON: line 3, column 4: "},
      {"[1, 2]", "strategy.json: not a strategy file (expected a JSON "
                 "object)"},
  };
  for (const Case &C : Cases) {
    auto Read = parseStrategy(C.Text, "strategy.json", G, Target);
    ASSERT_FALSE(static_cast<bool>(Read)) << C.Text;
    std::string Message = llvm::toString(Read.takeError());
    EXPECT_NE(Message.find(C.Expected), std::string::npos)
        << C.Text << ": " << Message;
  }
  // The bracket past 256 levels (two braces, 255 brackets), before
  // llvm::json's recursive parser overflows the stack on it.
  std::string Deep = "{\"ops\": {\"a\": " + std::string(100000, '[');
  auto Read = parseStrategy(Deep, "strategy.json", G, Target);
  ASSERT_FALSE(static_cast<bool>(Read));
  EXPECT_EQ(llvm::toString(Read.takeError()),
            "strategy.json: not valid JSON: line 1, column 269: nested more "
            "than 256 deep");
}

TEST_F(StrategyFileTest, MissingFileIsAnError) {
  auto Read = readStrategy("/nonexistent/strategy.json", G, Target);
  ASSERT_FALSE(static_cast<bool>(Read));
  EXPECT_NE(llvm::toString(Read.takeError())
                .find("/nonexistent/strategy.json: cannot read"),
            std::string::npos);
}

// Degrees whose product does not fit in 32 bits (2^21 samples x 8 x 16 x 16
// parts of a ReLU) are as many partitions as they multiply to, not the
// product's remainder: 2^32 of them once wrapped to none, which passed the
// check and left the op out of the simulation and the generated program.
TEST(StrategyCheckTest, PartitionsBeyond32BitsAreRefused) {
  onnx_import::ImportOptions Options;
  Options.Batch = int64_t(1) << 21;
  auto Model = onnx_import::importModel(ModelPath, Options);
  ASSERT_TRUE(static_cast<bool>(Model)) << llvm::toString(Model.takeError());
  const ir::Graph &G = Model->Graph;
  const ir::Op *Relu = nullptr;
  for (const ir::Op &O : G.ops())
    if (O.Kind == ir::OpKind::Relu && G.outputType(O).Dims.size() == 4 &&
        (!Relu ||
         G.outputType(O).numElements() > G.outputType(*Relu).numElements()))
      Relu = &O;
  ASSERT_NE(Relu, nullptr);
  ParallelConfig C = ParallelConfig::single(4, 0);
  uint64_t Product = 1;
  for (unsigned D = 0; D < 4; ++D) {
    C.Degrees[D] = uint32_t(G.outputType(*Relu).Dims[D]);
    Product *= C.Degrees[D];
  }
  ASSERT_GE(Product, uint64_t(1) << 32);
  C.DeviceStride = 0;
  llvm::Error E = checkConfig(G, *Relu, C, 2);
  ASSERT_TRUE(static_cast<bool>(E));
  EXPECT_EQ(llvm::toString(std::move(E)),
            std::to_string(Product) + " partitions for 2 devices");
}

} // namespace
