//===- tests/runtime_program/AtomicFileTest.cpp - Atomic whole-file writes ===//
//
// writeFileAtomically leaves the old file or the new one and no temporary
// behind, also when it fails or the program is killed mid-write;
// readWholeFile reads what was written.
//
//===----------------------------------------------------------------------===//
#include "runtime_lib/program/AtomicFile.h"
#include "runtime_lib/Error.h"
#include <csignal>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

using namespace onnx2soap::rt;
using namespace onnx2soap::rt::program;
namespace fs = std::filesystem;

namespace {

class AtomicFile : public ::testing::Test {
protected:
  void SetUp() override {
    std::string Pattern =
        (fs::temp_directory_path() / "o2s-atomic-XXXXXX").string();
    ASSERT_NE(::mkdtemp(Pattern.data()), nullptr);
    Dir = Pattern;
  }
  void TearDown() override { fs::remove_all(Dir); }

  std::vector<std::string> entries() const {
    std::vector<std::string> Names;
    for (const auto &E : fs::directory_iterator(Dir))
      Names.push_back(E.path().filename().string());
    std::sort(Names.begin(), Names.end());
    return Names;
  }
  std::string errorOf(const std::function<void()> &F) {
    try {
      F();
    } catch (const RuntimeError &E) {
      return E.what();
    }
    return "<no error>";
  }

  fs::path Dir;
};

std::string asString(const std::vector<char> &Bytes) {
  return std::string(Bytes.begin(), Bytes.end());
}

} // namespace

TEST_F(AtomicFile, WritesReplacesAndLeavesNoTemporary) {
  std::string Path = (Dir / "data.bin").string();
  writeFileAtomically(Path, "first", 5);
  EXPECT_EQ(asString(readWholeFile(Path)), "first");
  writeFileAtomically(Path, "second!", 7);
  EXPECT_EQ(asString(readWholeFile(Path)), "second!");
  EXPECT_EQ(entries(), std::vector<std::string>{"data.bin"});
}

TEST_F(AtomicFile, EmptyLargeAndPiecewise) {
  std::string Path = (Dir / "f").string();
  writeFileAtomically(Path, nullptr, 0);
  EXPECT_TRUE(readWholeFile(Path).empty());

  std::vector<char> Large(3 * 1000 * 1000 + 17);
  for (size_t I = 0; I < Large.size(); ++I)
    Large[I] = static_cast<char>(I * 31 + 7);
  writeFileAtomically(Path, Large.data(), Large.size());
  EXPECT_EQ(readWholeFile(Path), Large);

  std::string A = "abc", B = "", C = "defg";
  writeFileAtomically(
      Path, {{A.data(), A.size()}, {B.data(), B.size()}, {C.data(), C.size()}});
  EXPECT_EQ(asString(readWholeFile(Path)), "abcdefg");
}

TEST_F(AtomicFile, RelativePathInTheCurrentFolder) {
  std::string Old = fs::current_path().string();
  fs::current_path(Dir);
  writeFileAtomically("here.txt", "x", 1);
  EXPECT_EQ(asString(readWholeFile("here.txt")), "x");
  fs::current_path(Old);
  EXPECT_TRUE(fs::exists(Dir / "here.txt"));
}

TEST_F(AtomicFile, MissingFolderIsAnErrorNamingTheFile) {
  std::string Path = (Dir / "nope" / "data.bin").string();
  std::string Error = errorOf([&] { writeFileAtomically(Path, "x", 1); });
  EXPECT_EQ(Error, Path + ".tmp." + std::to_string(::getpid()) +
                       ": open failed: No such file or directory");
  EXPECT_TRUE(entries().empty());
}

TEST_F(AtomicFile, FailedRenameRemovesTheTemporary) {
  // Renaming a file over a non-empty folder fails after the temporary has
  // been written and synced.
  fs::create_directory(Dir / "target");
  std::ofstream(Dir / "target" / "keep") << "kept";
  std::string Path = (Dir / "target").string();
  std::string Error = errorOf([&] { writeFileAtomically(Path, "new", 3); });
  EXPECT_EQ(Error.rfind(Path + ": rename from '" + Path + ".tmp.", 0), 0u)
      << Error;
  EXPECT_EQ(entries(), std::vector<std::string>{"target"});
  EXPECT_EQ(asString(readWholeFile((Dir / "target" / "keep").string())),
            "kept");
}

TEST_F(AtomicFile, AStaleTemporaryIsOverwritten) {
  // A temporary left by a killed program with the same pid is reused.
  std::string Path = (Dir / "data.bin").string();
  std::ofstream(Path + ".tmp." + std::to_string(::getpid()))
      << "garbage from before, longer than the new contents";
  writeFileAtomically(Path, "new", 3);
  EXPECT_EQ(asString(readWholeFile(Path)), "new");
  EXPECT_EQ(entries(), std::vector<std::string>{"data.bin"});
}

TEST_F(AtomicFile, ReadErrorsNameTheFile) {
  std::string Path = (Dir / "missing").string();
  EXPECT_EQ(errorOf([&] { readWholeFile(Path); }),
            Path + ": open failed: No such file or directory");
  EXPECT_EQ(errorOf([&] { readWholeFile(Dir.string()); }),
            Dir.string() + ": read failed: Is a directory");
}

TEST(AtomicFileHelpers, ParentDirectory) {
  EXPECT_EQ(parentDirectory("a/b/c.bin"), "a/b");
  EXPECT_EQ(parentDirectory("c.bin"), ".");
  EXPECT_EQ(parentDirectory("/c.bin"), "/");
  EXPECT_EQ(parentDirectory("/x/c.bin"), "/x");
}

TEST_F(AtomicFile, ASignalMidWriteRemovesTheTemporary) {
  // A program stopped by SIGTERM (Ctrl-C, mpirun passing on a kill) while it
  // writes a checkpoint dies as before, but leaves no temporary of the
  // checkpoint's size behind. A thread of the child waits for the temporary
  // to appear and signals the process while the bytes are being written.
  std::string Path = (Dir / "checkpoint.bin").string();
  std::string Temp = Path + ".tmp.";
  pid_t Child = ::fork();
  ASSERT_GE(Child, 0);
  if (Child == 0) {
    std::string Mine = Temp + std::to_string(::getpid());
    std::thread Killer([&] {
      while (::access(Mine.c_str(), F_OK) != 0)
        ::usleep(50);
      ::kill(::getpid(), SIGTERM);
    });
    std::vector<char> Bytes(64 << 20, 'x');
    for (int Round = 0; Round < 100; ++Round)
      writeFileAtomically(Path, Bytes.data(), Bytes.size());
    ::_exit(0); // Never signalled: the test fails on the exit status.
  }
  int Status = 0;
  ASSERT_EQ(::waitpid(Child, &Status, 0), Child);
  ASSERT_TRUE(WIFSIGNALED(Status)) << "status " << Status;
  EXPECT_EQ(WTERMSIG(Status), SIGTERM);
  for (const std::string &Name : entries())
    EXPECT_EQ(Name.find(".tmp."), std::string::npos) << Name;
}
