//===- tests/cli/CliOutputTest.cpp - Files the planner names --------------===//
//
// The files the planner reads and writes by name: -o and --trace of
// `simulate` and `search`, and calibrate's -o, where a path that cannot
// take the file is refused before any work, with nothing written (a device
// or FIFO of the name used to be replaced by a regular file; a search wrote
// its strategy and then failed on its trace); and preset and built-in names
// that are files too.
//
//===----------------------------------------------------------------------===//
#include "CliTestUtil.h"
#include "gmock/gmock.h"
#include <fstream>
#include <sys/stat.h>

using namespace onnx2soap::testing;
using namespace onnx2soap::clitest;

namespace {

bool isFifo(const std::string &Path) {
  struct stat Info;
  return lstat(Path.c_str(), &Info) == 0 && S_ISFIFO(Info.st_mode);
}

TEST_F(CliTest, OutputsThatCannotTakeTheFileAreRefusedFirst) {
  std::string Fifo = Dir.file("fifo");
  ASSERT_EQ(mkfifo(Fifo.c_str(), 0600), 0);
  std::string Good = Dir.file("good.json");
  std::string Missing = Dir.file("no-such-folder") + "/t.json";
  struct Case {
    std::vector<std::string> Args;
    std::string Expected;
  } Cases[] = {
      {planArgs("simulate", "cpu:2",
                {"--strategy", "data-parallel", "-o", Fifo}),
       "-o " + Fifo +
           ": exists and is not a regular file (a device, FIFO or socket)"},
      {planArgs("search", "cpu:2",
                {"--iterations", "10", "--trace", Fifo, "-o", Good}),
       "--trace " + Fifo + ": exists and is not a regular file"},
      {planArgs("search", "cpu:2",
                {"--iterations", "10", "-o", Good, "--trace", Missing}),
       "--trace " + Missing + ": the folder " + Dir.file("no-such-folder") +
           " does not exist"},
      {planArgs("simulate", "cpu:2",
                {"--strategy", "data-parallel", "-o", Dir.file("")}),
       ": is a folder; expected a file to write"},
      // An empty value is no flag's (it was taken as the flag not given).
      {planArgs("simulate", "cpu:2", {"--strategy", "data-parallel", "-o", ""}),
       "argument 10 is empty (after '-o'); give a value"},
      {planArgs("search", "cpu:2",
                {"--iterations", "10", "--trace=", "-o", Good}),
       "--trace= has no value; give a value"},
      {{"clusters", "--show", ""},
       "argument 3 is empty (after '--show'); give a value"},
      {planArgs("simulate", "cpu:2",
                {"--strategy", "data-parallel", "-o", Good, "--trace",
                 Dir.file("sub/../good.json")}),
       "name one file; give each its own"},
      {{"calibrate", samplePath("tiny_cnn.onnx"), "--batch", "8", "--cluster",
        "cpu:1", "-o", Fifo},
       "-o " + Fifo + ": exists and is not a regular file"},
  };
  ASSERT_FALSE(llvm::sys::fs::create_directory(Dir.file("sub")));
  for (const Case &C : Cases) {
    expectUserError(run(C.Args), C.Expected);
    EXPECT_TRUE(isFifo(Fifo)) << C.Expected;
    EXPECT_FALSE(llvm::sys::fs::exists(Good)) << C.Expected;
  }
}

// -o and --trace naming a file the command reads replaced it: the model
// with a strategy file, a cluster file with a trace. Refused, the file
// left as it was; -o may rewrite the strategy file simulated.
TEST_F(CliTest, OutputsThatAreInputsAreRefused) {
  std::string Model = Dir.file("model.onnx");
  ASSERT_FALSE(llvm::sys::fs::copy_file(samplePath("tiny_cnn.onnx"), Model));
  std::string ModelBytes = readFile(Model);
  RunResult Shown = run({"clusters", "--show", "cpu:2"});
  ASSERT_EQ(Shown.ExitCode, 0) << Shown.Err;
  std::string Cluster = Dir.file("cluster.json");
  { std::ofstream(Cluster) << Shown.Out; }
  auto Args = [&](std::vector<std::string> More) {
    std::vector<std::string> A{"simulate",   Model,          "--batch",
                               "8",          "--cluster",    Cluster,
                               "--strategy", "data-parallel"};
    A.insert(A.end(), More.begin(), More.end());
    return A;
  };
  expectUserError(run(Args({"-o", Model})),
                  "-o " + Model +
                      ": the same file as the model; it would be overwritten");
  expectUserError(run(Args({"--trace", Dir.file("./cluster.json")})),
                  ": the same file as --cluster; it would be overwritten");
  expectUserError(run({"calibrate", Model, "--batch", "8", "--cluster", Cluster,
                       "-o", Cluster}),
                  "-o " + Cluster +
                      ": the same file as --cluster; it would be overwritten");
  EXPECT_EQ(readFile(Model), ModelBytes);
  EXPECT_EQ(readFile(Cluster), Shown.Out);
  // A strategy file simulated and written back.
  std::string Strategy = Dir.file("s.json");
  ASSERT_EQ(run(Args({"-o", Strategy})).ExitCode, 0);
  RunResult Again = run({"simulate", Model, "--batch", "8", "--cluster",
                         Cluster, "--strategy", Strategy, "-o", Strategy});
  EXPECT_EQ(Again.ExitCode, 0) << Again.Err;
  expectUserError(run({"simulate", Model, "--batch", "8", "--cluster", Cluster,
                       "--strategy", Strategy, "--trace", Strategy}),
                  ": the same file as --strategy; it would be overwritten");
}

// A preset's or a built-in strategy's name that is also a file in the
// working folder: the cluster file used to win silently, the built-in
// strategy too. Both are refused; ./NAME is the file.
TEST_F(CliTest, NamesOfPresetsAndBuiltinsThatAreFilesHereAreRefused) {
  if (!llvm::sys::fs::can_execute("/bin/sh"))
    GTEST_SKIP() << "no /bin/sh";
  std::string Here = Dir.file("here");
  ASSERT_FALSE(llvm::sys::fs::create_directory(Here));
  RunResult Shown = run({"clusters", "--show", "cpu:4"});
  ASSERT_EQ(Shown.ExitCode, 0) << Shown.Err;
  ASSERT_TRUE(writeBytes(Here + "/cpu:2", Shown.Out));
  RunResult Written =
      run(planArgs("simulate", "cpu:2",
                   {"--strategy", "data-parallel", "-o", Here + "/expert"}));
  ASSERT_EQ(Written.ExitCode, 0) << Written.Err;
  std::string Model = samplePath("tiny_cnn.onnx"), Err,
              ErrFile = Dir.file("stderr-here.txt");
  std::vector<std::string> Args{"simulate",   Model,          "--batch",
                                "8",          "--cluster",    "cpu:2",
                                "--strategy", "data-parallel"};
  EXPECT_EQ(runIn(Here, Args, &Err, ErrFile), 2);
  EXPECT_EQ(Err, "onnx2soap: error: 'cpu:2' is a cluster preset's name and "
                 "a file in this folder; write ./cpu:2 for the file\n");
  Args[5] = "./cpu:2";
  EXPECT_EQ(runIn(Here, Args, &Err, ErrFile), 0) << Err;
  Args[7] = "expert";
  EXPECT_EQ(runIn(Here, Args, &Err, ErrFile), 2);
  EXPECT_EQ(Err, "onnx2soap: error: --strategy expert: a built-in strategy's "
                 "name and a file in this folder; write ./expert for the "
                 "file\n");
  // Written on cpu:2, the file's cluster is not ./cpu:2's (cpu:4).
  Args[5] = "cpu:3";
  Args[7] = "./expert";
  EXPECT_EQ(runIn(Here, Args, &Err, ErrFile), 2);
  // And a preset's N is written without leading zeros: its name goes into
  // the cluster's hash, which strategy files carry.
  expectUserError(run(planArgs("simulate", "cpu:02", {"--strategy", "expert"})),
                  "cluster preset 'cpu:02': N of cpu:N must be 1 to 64, "
                  "without leading zeros");
}

} // namespace
