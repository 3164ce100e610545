//===- tests/cli/CliOutputTest.cpp - Files the planner writes -------------===//
//
// -o and --trace of `simulate` and `search`, and calibrate's -o: a path that
// cannot take the file is refused before any work, with nothing written
// (a device or FIFO of the name used to be replaced by a regular file; a
// search wrote its strategy and then failed on its trace).
//
//===----------------------------------------------------------------------===//
#include "CliTestUtil.h"
#include "gmock/gmock.h"
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
      {planArgs("simulate", "cpu:2", {"--strategy", "data-parallel", "-o", ""}),
       "-o: needs a file path"},
      {planArgs("search", "cpu:2", {"--iterations", "10", "--trace", ""}),
       "--trace: needs a file path"},
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

} // namespace
