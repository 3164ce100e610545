//===- tests/runtime_program/CheckpointTest.cpp - Checkpoints of a program ===//
//
// Round trips of multi-rank checkpoints, the errors a restarted program can
// meet (no checkpoint, another program's, another rank's, a damaged file),
// retention, and the states a kill during a save can leave: each must still
// read as the previous committed checkpoint. A last test kills a saving
// process at many points and reads what is left.
//
//===----------------------------------------------------------------------===//
#include "runtime_lib/program/Checkpoint.h"
#include "runtime_lib/Error.h"
#include "runtime_lib/program/AtomicFile.h"
#include <csignal>
#include <filesystem>
#include <fstream>
#include <functional>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace onnx2soap::rt;
using namespace onnx2soap::rt::program;
namespace fs = std::filesystem;

namespace {

constexpr uint64_t Hash = 0x0123456789abcdefull;

/// Rank R's state at step S: distinct, checkable contents.
std::vector<NamedBlob> stateOf(int64_t Step, int Rank, size_t Size = 100) {
  std::vector<NamedBlob> Blobs(3);
  Blobs[0].Name = "fc1.weight";
  Blobs[1].Name = "fc1.weight/adam_m";
  Blobs[2].Name = ""; // an empty name and an empty blob are fine
  Blobs[0].Bytes.resize(Size);
  for (size_t I = 0; I < Size; ++I)
    Blobs[0].Bytes[I] = static_cast<char>(Step * 7 + Rank * 13 + I);
  Blobs[1].Bytes.assign(8, static_cast<char>(Step));
  return Blobs;
}

void expectState(const LoadedCheckpoint &C, int64_t Step, int Rank,
                 size_t Size = 100) {
  EXPECT_EQ(C.Step, Step);
  std::vector<NamedBlob> Want = stateOf(Step, Rank, Size);
  ASSERT_EQ(C.Blobs.size(), Want.size());
  for (size_t I = 0; I < Want.size(); ++I) {
    EXPECT_EQ(C.Blobs[I].Name, Want[I].Name);
    EXPECT_EQ(C.Blobs[I].Bytes, Want[I].Bytes) << Want[I].Name;
  }
}

class Checkpoint : public ::testing::Test {
protected:
  void SetUp() override {
    std::string Pattern =
        (fs::temp_directory_path() / "o2s-ckpt-XXXXXX").string();
    ASSERT_NE(::mkdtemp(Pattern.data()), nullptr);
    Root = Pattern;
    Dir = (Root / "ckpt").string();
  }
  void TearDown() override { fs::remove_all(Root); }

  void save(int64_t Step, int Ranks, int KeepLast = 3) {
    for (int R = 0; R < Ranks; ++R)
      writeRankCheckpoint(Dir, Step, Hash, R, stateOf(Step, R));
    commitCheckpoint(Dir, Step, KeepLast);
  }
  std::string errorOf(const std::function<void()> &F) {
    try {
      F();
    } catch (const RuntimeError &E) {
      return E.what();
    }
    return "<no error>";
  }
  std::string readError(int Rank = 0, uint64_t PlanHash = Hash) {
    return errorOf([&] { readRankCheckpoint(Dir, PlanHash, Rank); });
  }
  std::vector<std::string> steps() const {
    std::vector<std::string> Names;
    for (const auto &E : fs::directory_iterator(Dir))
      if (E.is_directory())
        Names.push_back(E.path().filename().string());
    std::sort(Names.begin(), Names.end());
    return Names;
  }
  std::string rankFile(int64_t Step, int Rank) const {
    return Dir + "/step-" + std::to_string(Step) + "/rank-" +
           std::to_string(Rank) + ".bin";
  }

  fs::path Root;
  std::string Dir;
};

} // namespace

TEST(CheckpointCrc, KnownValues) {
  EXPECT_EQ(crc32(0, "123456789", 9), 0xCBF43926u);
  EXPECT_EQ(crc32(0, "", 0), 0u);
  // Continuing a CRC over pieces equals one pass.
  EXPECT_EQ(crc32(crc32(0, "1234", 4), "56789", 5), 0xCBF43926u);
}

TEST_F(Checkpoint, RoundTripForEveryRank) {
  save(10, 3);
  EXPECT_EQ(latestCheckpointStep(Dir), 10);
  for (int R = 0; R < 3; ++R)
    expectState(readRankCheckpoint(Dir, Hash, R), 10, R);
  std::ifstream Latest(Dir + "/latest");
  std::string Text((std::istreambuf_iterator<char>(Latest)), {});
  EXPECT_EQ(Text, "step-10\n");
  // No temporaries are left anywhere.
  for (const auto &E : fs::recursive_directory_iterator(Dir))
    EXPECT_EQ(E.path().string().find(".tmp."), std::string::npos) << E.path();
}

TEST_F(Checkpoint, FileLayout) {
  writeRankCheckpoint(Dir, 5, Hash, 2, {{"ab", {'x', 'y', 'z'}}});
  std::vector<char> Bytes = readWholeFile(rankFile(5, 2));
  std::string Expected("O2SCKPT1", 8);
  auto Put = [&](uint64_t V, int Size) {
    for (int I = 0; I < Size; ++I)
      Expected.push_back(static_cast<char>(V >> (8 * I)));
  };
  Put(1, 4);    // version
  Put(5, 8);    // step
  Put(Hash, 8); // plan hash
  Put(2, 4);    // rank
  Put(1, 8);    // blobs
  Put(2, 4);
  Expected += "ab";
  Put(3, 8);
  Expected += "xyz";
  Put(crc32(0, Expected.data(), Expected.size()), 4);
  EXPECT_EQ(std::string(Bytes.begin(), Bytes.end()), Expected);
}

TEST_F(Checkpoint, LargeBlobs) {
  std::vector<NamedBlob> Blobs = stateOf(1, 0, 5 * 1000 * 1000);
  writeRankCheckpoint(Dir, 1, Hash, 0, Blobs);
  commitCheckpoint(Dir, 1, 1);
  expectState(readRankCheckpoint(Dir, Hash, 0), 1, 0, 5 * 1000 * 1000);
}

TEST_F(Checkpoint, NoCheckpoint) {
  EXPECT_EQ(readError(), Dir + ": no checkpoint: the folder does not exist");
  EXPECT_EQ(latestCheckpointStep(Dir), -1);
  fs::create_directories(Dir);
  EXPECT_EQ(readError(), Dir + ": no checkpoint: there is no 'latest' file");
  // Rank files of a step nobody committed are no checkpoint either.
  writeRankCheckpoint(Dir, 3, Hash, 0, stateOf(3, 0));
  EXPECT_EQ(readError(), Dir + ": no checkpoint: there is no 'latest' file");
}

TEST_F(Checkpoint, DifferentProgram) {
  save(4, 2);
  EXPECT_EQ(readError(1, 42),
            rankFile(4, 1) +
                ": checkpoint was written by a different program (plan hash "
                "0x0123456789abcdef, this program's is 0x000000000000002a)");
}

TEST_F(Checkpoint, WrongRank) {
  save(4, 2);
  EXPECT_EQ(readError(2), rankFile(4, 2) +
                              ": checkpoint step-4 has no file for rank 2 "
                              "(was it written by a program with fewer "
                              "ranks?)");
  fs::copy_file(rankFile(4, 1), rankFile(4, 0),
                fs::copy_options::overwrite_existing);
  EXPECT_EQ(readError(0),
            rankFile(4, 0) + ": holds the state of rank 1, not of rank 0");
}

TEST_F(Checkpoint, DamagedFiles) {
  save(4, 1);
  std::string Path = rankFile(4, 0);
  std::vector<char> Good = readWholeFile(Path);

  std::vector<char> Flipped = Good;
  Flipped[Flipped.size() / 2] ^= 0x10;
  writeFileAtomically(Path, Flipped.data(), Flipped.size());
  EXPECT_EQ(readError(),
            Path + ": truncated or corrupt checkpoint file (CRC-32 mismatch)");

  writeFileAtomically(Path, Good.data(), Good.size() - 30);
  EXPECT_EQ(readError(),
            Path + ": truncated or corrupt checkpoint file (CRC-32 mismatch)");

  writeFileAtomically(Path, Good.data(), 20);
  EXPECT_EQ(readError(), Path + ": truncated checkpoint file (20 bytes)");

  writeFileAtomically(Path, "PK\x03\x04 something else entirely here...", 40);
  EXPECT_EQ(readError(),
            Path + ": not an onnx2soap checkpoint file (bad magic)");

  std::vector<char> Future = Good;
  Future[8] = 2;
  writeFileAtomically(Path, Future.data(), Future.size());
  EXPECT_EQ(readError(), Path + ": checkpoint format version 2; this program "
                                "reads version 1");

  // A blob length past the end, with a CRC that matches.
  std::vector<char> Lying(Good.begin(), Good.end() - 4);
  for (int I = 40; I < 44; ++I)
    Lying[I] = '\xff'; // the first blob's name length
  uint32_t Crc = crc32(0, Lying.data(), Lying.size());
  for (int I = 0; I < 4; ++I)
    Lying.push_back(static_cast<char>(Crc >> (8 * I)));
  writeFileAtomically(Path, Lying.data(), Lying.size());
  EXPECT_EQ(readError(),
            Path + ": corrupt checkpoint file: blob 0 runs past the end");

  writeFileAtomically(Path, Good.data(), Good.size());
  expectState(readRankCheckpoint(Dir, Hash, 0), 4, 0);
}

TEST_F(Checkpoint, MalformedLatest) {
  save(4, 1);
  writeFileAtomically(Dir + "/latest", "step-x\n", 7);
  EXPECT_EQ(readError(), Dir + "/latest: does not name a step folder "
                               "(expected 'step-<N>')");
  // A commit repairs it.
  save(5, 1);
  expectState(readRankCheckpoint(Dir, Hash, 0), 5, 0);
}

TEST_F(Checkpoint, LatestNamesAStepWhoseFileHoldsAnother) {
  save(4, 1);
  save(6, 1);
  fs::copy_file(rankFile(4, 0), rankFile(6, 0),
                fs::copy_options::overwrite_existing);
  EXPECT_EQ(readError(),
            rankFile(6, 0) + ": holds step 4, but 'latest' names step-6");
}

TEST_F(Checkpoint, CommitNeedsTheRankFiles) {
  EXPECT_EQ(errorOf([&] { commitCheckpoint(Dir, 7, 2); }),
            Dir + "/step-7: cannot commit: rank 0's file is missing (commit "
                  "only after every rank has written its checkpoint)");
  save(1, 1);
  EXPECT_EQ(errorOf([&] { commitCheckpoint(Dir, 1, 0); }),
            Dir + ": checkpoints to keep must be at least 1, not 0");
  EXPECT_EQ(errorOf([&] { writeRankCheckpoint(Dir, -1, Hash, 0, {}); }),
            Dir + ": checkpoint step -1 is negative");
}

TEST_F(Checkpoint, KeepsTheLastAndThePrevious) {
  save(1, 2, 2);
  save(2, 2, 2);
  save(3, 2, 2);
  EXPECT_EQ(steps(), (std::vector<std::string>{"step-2", "step-3"}));
  // KeepLast = 1 still keeps the step `latest` named before the commit.
  save(4, 2, 1);
  EXPECT_EQ(steps(), (std::vector<std::string>{"step-3", "step-4"}));
  save(5, 2, 1);
  EXPECT_EQ(steps(), (std::vector<std::string>{"step-4", "step-5"}));
  // An uncommitted older step goes too; a newer one (of an abandoned run)
  // stays, since `latest` never names it.
  writeRankCheckpoint(Dir, 3, Hash, 0, stateOf(3, 0));
  writeRankCheckpoint(Dir, 90, Hash, 0, stateOf(90, 0));
  save(6, 2, 2);
  EXPECT_EQ(steps(), (std::vector<std::string>{"step-5", "step-6", "step-90"}));
  for (int R = 0; R < 2; ++R)
    expectState(readRankCheckpoint(Dir, Hash, R), 6, R);
}

// The states a kill during the save of step 20 can leave, after step 10 was
// committed: each still reads as step 10 on every rank.
TEST_F(Checkpoint, InterruptedSavesLeaveThePreviousCheckpoint) {
  save(10, 3);
  auto ExpectStep10 = [&](const char *State) {
    for (int R = 0; R < 3; ++R) {
      SCOPED_TRACE(State);
      expectState(readRankCheckpoint(Dir, Hash, R), 10, R);
    }
  };
  std::string Step20 = Dir + "/step-20";

  // Killed after mkdir, before any file.
  fs::create_directories(Step20);
  ExpectStep10("empty step folder");

  // Killed while rank 1 wrote its temporary (a partial file).
  std::ofstream(Step20 + "/rank-1.bin.tmp.4242") << "O2SCKPT1 partial";
  ExpectStep10("temporary file");

  // Killed after rank 0 finished, before the others.
  writeRankCheckpoint(Dir, 20, Hash, 0, stateOf(20, 0));
  ExpectStep10("some rank files");

  // A truncated rank file in the uncommitted step (e.g. no atomic rename on
  // some file system, or a copy cut short).
  std::vector<char> Whole = readWholeFile(Step20 + "/rank-0.bin");
  std::ofstream(Step20 + "/rank-2.bin", std::ios::binary)
      .write(Whole.data(), static_cast<std::streamsize>(Whole.size() / 2));
  ExpectStep10("truncated rank file");

  // Killed while rank 0 wrote the new `latest` (its temporary exists).
  std::ofstream(Dir + "/latest.tmp.4243") << "step-2";
  ExpectStep10("temporary latest");

  // Finishing the save moves everyone to step 20.
  writeRankCheckpoint(Dir, 20, Hash, 1, stateOf(20, 1));
  writeRankCheckpoint(Dir, 20, Hash, 2, stateOf(20, 2));
  commitCheckpoint(Dir, 20, 3);
  for (int R = 0; R < 3; ++R)
    expectState(readRankCheckpoint(Dir, Hash, R), 20, R);
}

// A child saves steps 1, 2, 3, ... (two ranks, then the commit) until it is
// killed with SIGKILL at some moment; whatever it leaves must read back as a
// complete committed step.
TEST_F(Checkpoint, KilledWhileSaving) {
  constexpr size_t Size = 256 * 1024;
  int64_t LastSeen = 0;
  for (int Round = 0; Round < 12; ++Round) {
    pid_t Child = ::fork();
    ASSERT_GE(Child, 0);
    if (Child == 0) {
      try {
        for (int64_t Step = LastSeen + 1;; ++Step) {
          for (int R = 0; R < 2; ++R)
            writeRankCheckpoint(Dir, Step, Hash, R, stateOf(Step, R, Size));
          commitCheckpoint(Dir, Step, 2);
        }
      } catch (...) {
        ::_exit(3);
      }
    }
    ::usleep(5000 + Round * 10000);
    ::kill(Child, SIGKILL);
    int Status = 0;
    ::waitpid(Child, &Status, 0);
    ASSERT_TRUE(WIFSIGNALED(Status)) << "the saving child failed";
    int64_t Step = latestCheckpointStep(Dir);
    if (Step < 0)
      continue; // killed before its first commit
    EXPECT_GE(Step, LastSeen);
    for (int R = 0; R < 2; ++R)
      expectState(readRankCheckpoint(Dir, Hash, R), Step, R, Size);
    LastSeen = Step;
  }
  EXPECT_GT(LastSeen, 0) << "no round got as far as a commit";
}
