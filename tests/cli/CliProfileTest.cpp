//===- tests/cli/CliProfileTest.cpp - calibrate and --profile -------------===//
//
// Measured op times end to end: `calibrate` (what it measures, and the
// profile `simulate --profile` then reads) and both commands' errors on
// bad input.
//
//===----------------------------------------------------------------------===//
#include "CliTestUtil.h"
#include "gmock/gmock.h"
#include <set>

using namespace onnx2soap::testing;
using namespace onnx2soap::clitest;

namespace {

/// Planning the tiny MLP (batch 4) on Cluster.
std::vector<std::string> mlpArgs(llvm::StringRef Command,
                                 llvm::StringRef Cluster,
                                 std::vector<std::string> More) {
  return sampleArgs(Command, "tiny_mlp.onnx", 4, Cluster, std::move(More));
}

/// The keys of a profile's entries.
std::set<std::string> profileKeys(const std::string &Path) {
  std::set<std::string> Keys;
  auto Parsed = llvm::json::parse(readFile(Path));
  EXPECT_TRUE(static_cast<bool>(Parsed)) << llvm::toString(Parsed.takeError());
  if (!Parsed)
    return Keys;
  if (const llvm::json::Array *Entries =
          Parsed->getAsObject()->getArray("entries"))
    for (const llvm::json::Value &E : *Entries)
      Keys.insert(E.getAsObject()->getString("key").getValueOr("").str());
  return Keys;
}

TEST_F(CliTest, CalibrateMeasuresWhatItIsAskedTo) {
  auto Calibrate = [&](const std::string &Profile,
                       std::vector<std::string> More) {
    More.insert(More.end(), {"-o", Profile, "--repeat", "1", "--threads", "1"});
    RunResult R = run(mlpArgs("calibrate", "cpu:2", More));
    EXPECT_EQ(R.ExitCode, 0) << R.Err;
    return R;
  };
  // One strategy's partitions, then the same and random configs of every
  // op as the search proposes them: more shapes, the first among them.
  std::string One = Dir.file("one.json"), More = Dir.file("more.json");
  Calibrate(One, {"--strategy", "data-parallel"});
  Calibrate(More, {"--strategy", "data-parallel", "--search-configs", "3",
                   "--seed", "2"});
  std::set<std::string> OneKeys = profileKeys(One),
                        MoreKeys = profileKeys(More);
  EXPECT_FALSE(OneKeys.empty());
  EXPECT_GT(MoreKeys.size(), OneKeys.size());
  EXPECT_TRUE(std::includes(MoreKeys.begin(), MoreKeys.end(), OneKeys.begin(),
                            OneKeys.end()));
  // A budget spent at once: one shape measured, the rest left to the
  // analytic model, and the file written all the same.
  std::string Short = Dir.file("short.json");
  RunResult R = Calibrate(Short, {"--budget", "0.000001"});
  EXPECT_THAT(R.Out, ::testing::HasSubstr("--budget 1 us reached: "));
  EXPECT_THAT(R.Out, ::testing::HasSubstr("shapes not measured (the analytic "
                                          "model answers for them)"));
  EXPECT_EQ(profileKeys(Short).size(), 1u);
}

TEST_F(CliTest, CalibrateThenSimulateWithTheProfile) {
  std::string Profile = Dir.file("P.json");
  RunResult C =
      run(mlpArgs("calibrate", "cpu:1",
                  {"-o", Profile, "--repeat", "3", "--threads", "1"}));
  ASSERT_EQ(C.ExitCode, 0) << C.Err << C.Out;
  EXPECT_THAT(C.Out, ::testing::HasSubstr("wrote " + Profile));
  auto Parsed = llvm::json::parse(readFile(Profile));
  ASSERT_TRUE(static_cast<bool>(Parsed)) << llvm::toString(Parsed.takeError());
  const llvm::json::Object *File = Parsed->getAsObject();
  ASSERT_NE(File, nullptr);
  EXPECT_EQ(File->getString("format").getValueOr(""), "onnx2soap-profile");
  EXPECT_EQ(File->getInteger("version").getValueOr(0), 1);
  EXPECT_EQ(File->getString("device_type").getValueOr(""), "cpu");
  // Timed with the caches holding other data unless told --cache warm.
  const llvm::json::Object *With = File->getObject("measured_with");
  ASSERT_NE(With, nullptr);
  EXPECT_EQ(With->getString("cache").getValueOr(""), "cold");
  EXPECT_THAT(C.Out, ::testing::HasSubstr("cold caches"));
  const llvm::json::Array *Entries = File->getArray("entries");
  ASSERT_NE(Entries, nullptr);
  ASSERT_FALSE(Entries->empty());
  unsigned WithBackward = 0;
  for (const llvm::json::Value &E : *Entries) {
    const llvm::json::Object *Entry = E.getAsObject();
    ASSERT_NE(Entry, nullptr);
    EXPECT_GT(Entry->getNumber("forward_s").getValueOr(0), 0);
    WithBackward += Entry->getNumber("backward_s").hasValue();
  }
  EXPECT_GT(WithBackward, 0u);
  // And box copies, one time per size, the larger slower.
  const llvm::json::Object *Copies = File->getObject("copies");
  ASSERT_NE(Copies, nullptr);
  const llvm::json::Array *Sizes = Copies->getArray("sizes_bytes");
  const llvm::json::Array *Times = Copies->getArray("times_us");
  ASSERT_TRUE(Sizes && Times);
  ASSERT_EQ(Sizes->size(), Times->size());
  ASSERT_GE(Times->size(), 2u);
  EXPECT_GT((*Times)[Times->size() - 1].getAsNumber().getValueOr(0),
            (*Times)[0].getAsNumber().getValueOr(0));
  EXPECT_THAT(C.Out, ::testing::HasSubstr("box copies: 4 KiB "));

  auto TimeOf = [&](std::vector<std::string> More) {
    More.insert(More.begin(), {"--strategy", "data-parallel", "--json"});
    RunResult R = run(mlpArgs("simulate", "cpu:1", More));
    EXPECT_EQ(R.ExitCode, 0) << R.Err;
    return jsonObject(R).getNumber("time").getValueOr(0);
  };
  std::string Warm = Dir.file("W.json");
  RunResult W = run(mlpArgs("calibrate", "cpu:1",
                            {"-o", Warm, "--repeat", "1", "--cache", "warm"}));
  ASSERT_EQ(W.ExitCode, 0) << W.Err << W.Out;
  EXPECT_THAT(W.Out, ::testing::HasSubstr("warm caches"));
  EXPECT_THAT(readFile(Warm), ::testing::HasSubstr(R"("cache": "warm")"));

  double Analytic = TimeOf({});
  double Measured = TimeOf({"--profile", Profile});
  // The profile's copy table times the copies, and simulate says so.
  auto CopiesMeasured = [&](std::vector<std::string> More) {
    More.insert(More.begin(), {"--strategy", "data-parallel", "--json"});
    RunResult R = run(mlpArgs("simulate", "cpu:1", More));
    EXPECT_EQ(R.ExitCode, 0) << R.Err;
    return jsonObject(R).getBoolean("copies_measured");
  };
  EXPECT_EQ(CopiesMeasured({}), llvm::Optional<bool>(false));
  EXPECT_EQ(CopiesMeasured({"--profile", Profile}), llvm::Optional<bool>(true));
  RunResult Text =
      run(mlpArgs("simulate", "cpu:1",
                  {"--strategy", "data-parallel", "--profile", Profile}));
  EXPECT_THAT(Text.Out, ::testing::HasSubstr(
                            "copies       timed by the profile's measured "
                            "box copies"));
  EXPECT_GT(Analytic, 0);
  EXPECT_GT(Measured, 0);
  EXPECT_NE(Analytic, Measured);

  RunResult S =
      run(mlpArgs("search", "cpu:1",
                  {"--iterations", "20", "--profile", Profile, "--json"}));
  ASSERT_EQ(S.ExitCode, 0) << S.Err;
  // The built-in it reports is timed with the same profile.
  EXPECT_NEAR(jsonObject(S).getNumber("data_parallel_time").getValueOr(0),
              Measured, Measured * 1e-9);

  // A profile of another device type than the cluster's.
  expectUserError(run(mlpArgs("simulate", "paper-p100",
                              {"--gpus", "1", "--strategy", "data-parallel",
                               "--profile", Profile})),
                  "--profile " + Profile +
                      ": measured on device type 'cpu', but cluster "
                      "'paper-p100 (first 1 devices)' has 'P100'");
}

TEST_F(CliTest, ProfileAndCalibrateRefuseBadInput) {
  std::string Bad = Dir.file("bad.json");
  {
    std::error_code EC;
    llvm::raw_fd_ostream OS(Bad, EC);
    ASSERT_FALSE(EC);
    OS << R"({"format":"onnx2soap-profile","version":1,"device_type":"cpu",)"
       << R"("entries":[{"key":"Relu","forward_s":-1,"samples":1}]})";
  }
  expectUserError(
      run(mlpArgs("simulate", "cpu:1",
                  {"--strategy", "data-parallel", "--profile", Bad})),
      "entries[0].forward_s: must be a finite, non-negative number");
  expectUserError(
      run(mlpArgs("search", "cpu:1",
                  {"--iterations", "5", "--profile", Dir.file("none.json")})),
      "none.json: cannot read the file");
  expectUserError(run(mlpArgs("calibrate", "paper-p100",
                              {"--gpus", "2", "-o", Dir.file("p.json")})),
                  "calibrate measures on this machine's CPU");
  expectUserError(run(mlpArgs("calibrate", "cpu:1", {})),
                  "-o FILE is required");
  expectUserError(run(mlpArgs("calibrate", "cpu:1",
                              {"-o", Dir.file("p.json"), "--budget", "0"})),
                  "--budget must be a positive number of seconds");
  expectUserError(run(mlpArgs("calibrate", "cpu:1",
                              {"-o", Dir.file("p.json"), "--cache", "hot"})),
                  "--cache hot: expected cold or warm");
  EXPECT_FALSE(llvm::sys::fs::exists(Dir.file("p.json")));
}

} // namespace
