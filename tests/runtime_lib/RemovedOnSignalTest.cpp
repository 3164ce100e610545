//===- tests/runtime_lib/RemovedOnSignalTest.cpp - Removed on an interrupt ===//
//
// compile's half-written project is removed when the program is
// interrupted: the removal by system calls alone (a folder of more entries
// than one read returns, nested folders, a link that must not be followed),
// and a child process that dies of SIGTERM and SIGINT with its tree
// registered, leaving nothing, also when the signal keeps coming; an
// ignored SIGHUP stays ignored.
//
//===----------------------------------------------------------------------===//
#include "runtime_lib/RemovedOnSignal.h"
#include <csignal>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

using namespace onnx2soap::rt;
namespace fs = std::filesystem;

namespace {

class RemovedOnSignalTest : public ::testing::Test {
protected:
  void SetUp() override {
    std::string Pattern =
        (fs::temp_directory_path() / "o2s-tree-XXXXXX").string();
    ASSERT_NE(::mkdtemp(Pattern.data()), nullptr);
    Dir = Pattern;
  }
  void TearDown() override { fs::remove_all(Dir); }

  /// A project-like tree at Dir/Name: 600 files of long names (more than
  /// one 4 KiB read of the folder) and folders three deep.
  fs::path makeTree(const std::string &Name) {
    fs::path Root = Dir / Name;
    fs::create_directories(Root / "src" / "deep" / "deeper");
    for (int I = 0; I < 600; ++I)
      std::ofstream(
          Root / ("file-with-a-rather-long-name-" + std::to_string(I) + ".cpp"))
          << I;
    std::ofstream(Root / "src" / "deep" / "deeper" / "plan.cpp") << "x";
    return Root;
  }

  fs::path Dir;
};

} // namespace

TEST_F(RemovedOnSignalTest, RemovesATreeWithoutFollowingLinks) {
  fs::path Root = makeTree("project");
  fs::create_directory(Dir / "outside");
  std::ofstream(Dir / "outside" / "keep") << "kept";
  fs::create_directory_symlink(Dir / "outside", Root / "src" / "link");
  removeWithSystemCalls(Root.c_str());
  EXPECT_FALSE(fs::exists(Root));
  EXPECT_TRUE(fs::exists(Dir / "outside" / "keep"));
  // Nothing there: nothing to do.
  removeWithSystemCalls(Root.c_str());
}

namespace {
/// Makes the file at Path immutable (or not): not even root may remove it.
/// False where the file system or the process's capabilities do not allow
/// it.
bool setImmutable(const fs::path &Path, bool On) {
  int Fd = ::open(Path.c_str(), O_RDONLY | O_CLOEXEC);
  if (Fd < 0)
    return false;
  int Flags = 0;
  bool Done = ::ioctl(Fd, FS_IOC_GETFLAGS, &Flags) == 0;
  if (Done) {
    Flags = On ? Flags | FS_IMMUTABLE_FL : Flags & ~FS_IMMUTABLE_FL;
    Done = ::ioctl(Fd, FS_IOC_SETFLAGS, &Flags) == 0;
  }
  ::close(Fd);
  return Done;
}
} // namespace

TEST_F(RemovedOnSignalTest, EntriesThatCannotBeRemovedEndTheRemoval) {
  // An entry that cannot be removed (immutable here; another user's, in
  // a cluster's shared folder) makes the removal give up on it instead of
  // scanning its folder forever, which in a signal handler would keep the
  // program from dying.
  fs::path Root = makeTree("stuck");
  fs::path Stuck = Root / "src" / "stuck.o";
  std::ofstream(Stuck) << "x";
  if (!setImmutable(Stuck, true))
    GTEST_SKIP() << "cannot make a file immutable here";
  pid_t Child = ::fork();
  ASSERT_GE(Child, 0);
  if (Child == 0) {
    ::alarm(10); // a hang dies of SIGALRM
    removeWithSystemCalls(Root.c_str());
    ::_exit(0);
  }
  int Status = 0;
  EXPECT_EQ(::waitpid(Child, &Status, 0), Child);
  EXPECT_TRUE(WIFEXITED(Status)) << "status " << Status;
  // All but the stuck file and the folders that hold it are gone.
  EXPECT_TRUE(fs::exists(Stuck));
  EXPECT_FALSE(fs::exists(Root / "src" / "deep"));
  EXPECT_FALSE(fs::exists(Root / "file-with-a-rather-long-name-7.cpp"));
  ASSERT_TRUE(setImmutable(Stuck, false));
}

TEST_F(RemovedOnSignalTest, ASignalRemovesTheRegisteredTree) {
  for (int Signal : {SIGTERM, SIGINT}) {
    fs::path Root = makeTree("half-written");
    pid_t Child = ::fork();
    ASSERT_GE(Child, 0);
    if (Child == 0) {
      RemovedOnSignal Guard(Root.string());
      ::raise(Signal);
      ::_exit(0); // not reached: the signal kills the child
    }
    int Status = 0;
    ASSERT_EQ(::waitpid(Child, &Status, 0), Child);
    ASSERT_TRUE(WIFSIGNALED(Status)) << "status " << Status;
    EXPECT_EQ(WTERMSIG(Status), Signal);
    EXPECT_FALSE(fs::exists(Root)) << strsignal(Signal);
  }
}

TEST_F(RemovedOnSignalTest, SignalsThatKeepComingWaitForTheRemoval) {
  // A thread of the child sends SIGTERM again and again (a signal sent
  // twice: Ctrl-C pressed twice, `timeout` signalling the child and then its
  // group): the removal is not cut short by the second one.
  fs::path Root = makeTree("signalled-often");
  for (int I = 0; I < 3000; ++I)
    std::ofstream(Root / "src" / ("more-" + std::to_string(I))) << I;
  pid_t Child = ::fork();
  ASSERT_GE(Child, 0);
  if (Child == 0) {
    RemovedOnSignal Guard(Root.string());
    std::thread Sender([] {
      for (;;)
        ::kill(::getpid(), SIGTERM);
    });
    for (;;)
      ::pause();
  }
  int Status = 0;
  ASSERT_EQ(::waitpid(Child, &Status, 0), Child);
  ASSERT_TRUE(WIFSIGNALED(Status)) << "status " << Status;
  EXPECT_EQ(WTERMSIG(Status), SIGTERM);
  EXPECT_FALSE(fs::exists(Root));
}

TEST_F(RemovedOnSignalTest, ATreeNoLongerRegisteredStays) {
  fs::path Root = makeTree("written");
  pid_t Child = ::fork();
  ASSERT_GE(Child, 0);
  if (Child == 0) {
    { RemovedOnSignal Guard(Root.string()); }
    ::raise(SIGTERM);
    ::_exit(0);
  }
  int Status = 0;
  ASSERT_EQ(::waitpid(Child, &Status, 0), Child);
  ASSERT_TRUE(WIFSIGNALED(Status));
  EXPECT_TRUE(fs::exists(Root / "src" / "deep" / "deeper" / "plan.cpp"));
}

TEST_F(RemovedOnSignalTest, AnIgnoredHangupStaysIgnored) {
  // Under nohup compile goes on through SIGHUP, and its tree with it.
  fs::path Root = makeTree("nohup");
  pid_t Child = ::fork();
  ASSERT_GE(Child, 0);
  if (Child == 0) {
    ::signal(SIGHUP, SIG_IGN);
    RemovedOnSignal Guard(Root.string());
    ::raise(SIGHUP);
    ::_exit(fs::exists(Root) ? 0 : 1);
  }
  int Status = 0;
  ASSERT_EQ(::waitpid(Child, &Status, 0), Child);
  ASSERT_TRUE(WIFEXITED(Status)) << "status " << Status;
  EXPECT_EQ(WEXITSTATUS(Status), 0);
  EXPECT_TRUE(fs::exists(Root));
}
