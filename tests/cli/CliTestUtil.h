//===- tests/cli/CliTestUtil.h - Running onnx2soap in tests -----*- C++ -*-===//
//
// What the CLI tests share (CliTest.cpp, CliPlanTest.cpp, CliCompileTest.cpp):
// the built `onnx2soap` run as a subprocess in a fixture's temporary folder,
// the check that bad input gets exit code 2 and one error line, and the
// parsing of what a `--json` run printed.
//
//===----------------------------------------------------------------------===//
#ifndef ONNX2SOAP_TESTS_CLI_CLITESTUTIL_H
#define ONNX2SOAP_TESTS_CLI_CLITESTUTIL_H

#include "../onnx_import/ModelBuilder.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Program.h"
#include "gtest/gtest.h"
#include <cstdlib>
#include <string>
#include <vector>

namespace onnx2soap::clitest {
using testing::TempDir;
using testing::writeModel;

inline std::string cliPath() {
  if (const char *Env = std::getenv("ONNX2SOAP"))
    if (*Env)
      return Env;
  return ONNX2SOAP_BINARY_DIR "/bin/onnx2soap";
}

inline std::string samplePath(llvm::StringRef File) {
  return (llvm::Twine(ONNX2SOAP_SOURCE_DIR) + "/samples/" + File).str();
}

struct RunResult {
  int ExitCode = -1;
  std::string Out, Err, ExecError;
};

inline std::string readFile(llvm::StringRef Path) {
  auto Buffer = llvm::MemoryBuffer::getFile(Path);
  return Buffer ? (*Buffer)->getBuffer().str() : std::string();
}

/// Runs onnx2soap with Args, capturing stdout and stderr in files of Dir;
/// with MemoryLimitMB, in that much memory.
inline RunResult runCli(const TempDir &Dir, std::vector<std::string> Args,
                        unsigned MemoryLimitMB = 0) {
  std::string Program = cliPath();
  std::vector<llvm::StringRef> Argv{Program};
  for (const std::string &A : Args)
    Argv.push_back(A);
  std::string OutPath = Dir.file("stdout.txt"),
              ErrPath = Dir.file("stderr.txt");
  llvm::Optional<llvm::StringRef> Redirects[] = {
      llvm::StringRef(""), llvm::StringRef(OutPath), llvm::StringRef(ErrPath)};
  // The redirects open without truncating, so start from no files.
  llvm::sys::fs::remove(OutPath);
  llvm::sys::fs::remove(ErrPath);
  RunResult Result;
  Result.ExitCode = llvm::sys::ExecuteAndWait(Program, Argv, /*Env=*/llvm::None,
                                              Redirects, /*SecondsToWait=*/120,
                                              MemoryLimitMB, &Result.ExecError);
  Result.Out = readFile(OutPath);
  Result.Err = readFile(ErrPath);
  return Result;
}

/// Exit code 2, one "onnx2soap: error: " line containing Expected, no stdout.
inline void expectUserError(const RunResult &R, llvm::StringRef Expected) {
  EXPECT_EQ(R.ExitCode, 2) << R.ExecError << "\nstderr: " << R.Err;
  EXPECT_EQ(R.Out, "");
  llvm::StringRef Err(R.Err);
  EXPECT_TRUE(Err.startswith("onnx2soap: error: ")) << "stderr: " << R.Err;
  EXPECT_TRUE(Err.endswith("\n")) << "stderr: " << R.Err;
  EXPECT_EQ(Err.count('\n'), 1u) << "stderr: " << R.Err;
  EXPECT_TRUE(Err.contains(Expected))
      << "stderr: " << R.Err << "expected to contain: " << Expected.str();
}

class CliTest : public ::testing::Test {
protected:
  void SetUp() override {
    ASSERT_TRUE(Dir.valid());
    ASSERT_TRUE(llvm::sys::fs::can_execute(cliPath()))
        << "no onnx2soap at " << cliPath();
  }
  RunResult run(std::vector<std::string> Args) {
    return runCli(Dir, std::move(Args));
  }
  std::string writeModelFile(const onnx::ModelProto &Model,
                             llvm::StringRef Name = "model.onnx") {
    std::string Path = Dir.file(Name);
    EXPECT_TRUE(writeModel(Model, Path));
    return Path;
  }
  TempDir Dir{"onnx2soap-clitest"};
};

/// The parsed JSON object R printed, or a failure.
inline llvm::json::Object jsonObject(const RunResult &R) {
  auto Parsed = llvm::json::parse(R.Out);
  if (!Parsed) {
    ADD_FAILURE() << llvm::toString(Parsed.takeError()) << "\n" << R.Out;
    return {};
  }
  if (!Parsed->getAsObject()) {
    ADD_FAILURE() << "not an object: " << R.Out;
    return {};
  }
  return std::move(*Parsed->getAsObject());
}

/// The parsed JSON array R printed, or a failure (and an empty array).
inline llvm::json::Array jsonArray(const RunResult &R) {
  auto Parsed = llvm::json::parse(R.Out);
  if (!Parsed) {
    ADD_FAILURE() << llvm::toString(Parsed.takeError()) << "\n" << R.Out;
    return {};
  }
  if (!Parsed->getAsArray()) {
    ADD_FAILURE() << "not an array: " << R.Out;
    return {};
  }
  return std::move(*Parsed->getAsArray());
}

/// Runs the CLI with Args in Folder (through /bin/sh); its exit code, its
/// stderr in *Err (by way of ErrFile).
inline int runIn(const std::string &Folder,
                 const std::vector<std::string> &Args, std::string *Err,
                 const std::string &ErrFile) {
  std::string Command = "cd '" + Folder + "' && exec '" + cliPath() + "'";
  for (const std::string &A : Args)
    Command += " '" + A + "'";
  llvm::StringRef Argv[] = {"/bin/sh", "-c", Command};
  llvm::Optional<llvm::StringRef> Redirects[] = {
      llvm::StringRef(""), llvm::StringRef(""), llvm::StringRef(ErrFile)};
  int Code = llvm::sys::ExecuteAndWait("/bin/sh", Argv, llvm::None, Redirects,
                                       /*SecondsToWait=*/120);
  *Err = readFile(ErrFile);
  return Code;
}

/// `Command SAMPLE --batch Batch --cluster Cluster` plus More.
inline std::vector<std::string> sampleArgs(llvm::StringRef Command,
                                           llvm::StringRef Sample, int Batch,
                                           llvm::StringRef Cluster,
                                           std::vector<std::string> More) {
  std::vector<std::string> Args{Command.str(), samplePath(Sample),
                                "--batch",     std::to_string(Batch),
                                "--cluster",   Cluster.str()};
  Args.insert(Args.end(), More.begin(), More.end());
  return Args;
}

/// Planning the tiny CNN (batch 8) on Cluster.
inline std::vector<std::string> planArgs(llvm::StringRef Command,
                                         llvm::StringRef Cluster,
                                         std::vector<std::string> More) {
  return sampleArgs(Command, "tiny_cnn.onnx", 8, Cluster, std::move(More));
}

} // namespace onnx2soap::clitest

#endif
