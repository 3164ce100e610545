//===- runtime_lib/program/Checkpoint.cpp - Rank checkpoints --------------===//
//
// The rank-file layout (little-endian): "O2SCKPT1", u32 format version, i64
// step, u64 plan hash, i32 rank, u64 blob count, then per blob u32 name
// length, name, u64 byte count, bytes; last a u32 CRC-32 of everything
// before it. Files are written with writeFileAtomically, blob bytes in place.
//
//===----------------------------------------------------------------------===//
#include "Checkpoint.h"
#include "../Error.h"
#include "AtomicFile.h"
#include <algorithm>
#include <array>
#include <cerrno>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <dirent.h>
#include <optional>
#include <sys/stat.h>
#include <unistd.h>

namespace onnx2soap::rt::program {

static const char Magic[8] = {'O', '2', 'S', 'C', 'K', 'P', 'T', '1'};
// Magic, version, step, plan hash, rank, blob count.
static constexpr size_t HeaderSize = 8 + 4 + 8 + 8 + 4 + 8;
static constexpr size_t CrcSize = 4;

uint32_t crc32(uint32_t Crc, const void *Data, size_t Size) {
  static const auto Table = [] {
    std::array<uint32_t, 256> T{};
    for (uint32_t I = 0; I < 256; ++I) {
      uint32_t C = I;
      for (int K = 0; K < 8; ++K)
        C = (C & 1) ? 0xEDB88320u ^ (C >> 1) : C >> 1;
      T[I] = C;
    }
    return T;
  }();
  const auto *Bytes = static_cast<const uint8_t *>(Data);
  Crc = ~Crc;
  for (size_t I = 0; I < Size; ++I)
    Crc = Table[(Crc ^ Bytes[I]) & 0xff] ^ (Crc >> 8);
  return ~Crc;
}

//===----------------------------------------------------------------------===//
// Little-endian fields
//===----------------------------------------------------------------------===//

static void putUInt(std::string &Out, uint64_t Value, size_t Size) {
  for (size_t I = 0; I < Size; ++I)
    Out.push_back(static_cast<char>((Value >> (8 * I)) & 0xff));
}

static uint64_t getUInt(const char *Data, size_t Size) {
  uint64_t Value = 0;
  for (size_t I = 0; I < Size; ++I)
    Value |= static_cast<uint64_t>(static_cast<uint8_t>(Data[I])) << (8 * I);
  return Value;
}

static std::string hex64(uint64_t Value) {
  char Buffer[24];
  std::snprintf(Buffer, sizeof(Buffer), "0x%016" PRIx64, Value);
  return Buffer;
}

//===----------------------------------------------------------------------===//
// Folders
//===----------------------------------------------------------------------===//

static std::string stepFolderName(int64_t Step) {
  return "step-" + std::to_string(Step);
}

static std::string rankFileName(int Rank) {
  return "rank-" + std::to_string(Rank) + ".bin";
}

/// The N of "step-<N>" (decimal digits only), or nullopt.
static std::optional<int64_t> parseStepName(const std::string &Name) {
  const std::string Prefix = "step-";
  if (Name.size() <= Prefix.size() || Name.compare(0, Prefix.size(), Prefix))
    return std::nullopt;
  int64_t Step = 0;
  for (size_t I = Prefix.size(); I < Name.size(); ++I) {
    char C = Name[I];
    if (C < '0' || C > '9' || Step > (INT64_MAX - 9) / 10)
      return std::nullopt;
    Step = Step * 10 + (C - '0');
  }
  return Step;
}

static bool exists(const std::string &Path) {
  struct stat Info;
  return ::stat(Path.c_str(), &Info) == 0;
}

/// mkdir -p, syncing the parent of every folder it creates.
static void makeDirectories(const std::string &Dir) {
  if (Dir.empty() || exists(Dir))
    return;
  std::string Parent = parentDirectory(Dir);
  if (Parent != Dir)
    makeDirectories(Parent);
  if (::mkdir(Dir.c_str(), 0755) != 0) {
    if (errno == EEXIST)
      return; // another rank made it first
    fail(Dir, std::string("mkdir failed: ") + std::strerror(errno));
  }
  syncDirectory(Parent);
}

/// Removes Path and, for a folder, everything in it.
static void removeTree(const std::string &Path) {
  struct stat Info;
  if (::lstat(Path.c_str(), &Info) != 0)
    return;
  if (S_ISDIR(Info.st_mode)) {
    DIR *Folder = ::opendir(Path.c_str());
    if (!Folder)
      fail(Path, std::string("opendir failed: ") + std::strerror(errno));
    std::vector<std::string> Entries;
    while (dirent *Entry = ::readdir(Folder)) {
      std::string Name = Entry->d_name;
      if (Name != "." && Name != "..")
        Entries.push_back(Path + "/" + Name);
    }
    ::closedir(Folder);
    for (const std::string &Entry : Entries)
      removeTree(Entry);
    if (::rmdir(Path.c_str()) != 0)
      fail(Path, std::string("rmdir failed: ") + std::strerror(errno));
    return;
  }
  if (::unlink(Path.c_str()) != 0)
    fail(Path, std::string("unlink failed: ") + std::strerror(errno));
}

/// The step `latest` names; nullopt when there is no `latest`. Throws when
/// it is malformed.
static std::optional<int64_t> readLatest(const std::string &Dir) {
  std::string Path = Dir + "/latest";
  if (!exists(Path))
    return std::nullopt;
  std::vector<char> Bytes = readWholeFile(Path);
  std::string Text(Bytes.begin(), Bytes.end());
  if (!Text.empty() && Text.back() == '\n')
    Text.pop_back();
  std::optional<int64_t> Step = parseStepName(Text);
  if (!Step)
    fail(Path, "does not name a step folder (expected 'step-<N>')");
  return Step;
}

int64_t latestCheckpointStep(const std::string &Dir) {
  return readLatest(Dir).value_or(-1);
}

//===----------------------------------------------------------------------===//
// Writing
//===----------------------------------------------------------------------===//

void writeRankCheckpoint(const std::string &Dir, int64_t Step,
                         uint64_t PlanHash, int Rank,
                         const std::vector<NamedBlob> &Blobs) {
  if (Step < 0)
    fail(Dir, "checkpoint step " + std::to_string(Step) + " is negative");
  if (Rank < 0)
    fail(Dir, "checkpoint rank " + std::to_string(Rank) + " is negative");
  std::string StepDir = Dir + "/" + stepFolderName(Step);
  makeDirectories(StepDir);

  std::string Header(Magic, sizeof(Magic));
  putUInt(Header, CheckpointFormatVersion, 4);
  putUInt(Header, static_cast<uint64_t>(Step), 8);
  putUInt(Header, PlanHash, 8);
  putUInt(Header, static_cast<uint32_t>(Rank), 4);
  putUInt(Header, Blobs.size(), 8);

  // Each blob's name and length go in a small buffer; its bytes are written
  // from where they are.
  std::vector<std::string> Prefixes;
  Prefixes.reserve(Blobs.size());
  for (const NamedBlob &Blob : Blobs) {
    if (Blob.Name.size() > UINT32_MAX)
      fail(StepDir, "blob name too long");
    std::string Prefix;
    putUInt(Prefix, Blob.Name.size(), 4);
    Prefix += Blob.Name;
    putUInt(Prefix, Blob.Bytes.size(), 8);
    Prefixes.push_back(std::move(Prefix));
  }
  std::vector<ByteSpan> Pieces;
  Pieces.push_back({Header.data(), Header.size()});
  for (size_t I = 0; I < Blobs.size(); ++I) {
    Pieces.push_back({Prefixes[I].data(), Prefixes[I].size()});
    Pieces.push_back({Blobs[I].Bytes.data(), Blobs[I].Bytes.size()});
  }
  uint32_t Crc = 0;
  for (const ByteSpan &Piece : Pieces)
    Crc = crc32(Crc, Piece.Data, Piece.Size);
  std::string Trailer;
  putUInt(Trailer, Crc, 4);
  Pieces.push_back({Trailer.data(), Trailer.size()});

  writeFileAtomically(StepDir + "/" + rankFileName(Rank), Pieces);
}

void commitCheckpoint(const std::string &Dir, int64_t Step, int KeepLast) {
  if (KeepLast < 1)
    fail(Dir, "checkpoints to keep must be at least 1, not " +
                  std::to_string(KeepLast));
  std::string StepName = stepFolderName(Step);
  if (!exists(Dir + "/" + StepName + "/" + rankFileName(0)))
    fail(Dir + "/" + StepName,
         "cannot commit: rank 0's file is missing (commit only after every "
         "rank has written its checkpoint)");
  // A malformed `latest` is replaced like any other.
  std::optional<int64_t> Previous;
  try {
    Previous = readLatest(Dir);
  } catch (const RuntimeError &) {
  }

  std::string Latest = StepName + "\n";
  writeFileAtomically(Dir + "/latest", Latest.data(), Latest.size());

  // Only now that `latest` names Step may older steps go. The previous
  // checkpoint stays: removal happens after the switch, and keeping one
  // more folder costs little against a reader that has just opened it.
  std::vector<int64_t> Older;
  DIR *Folder = ::opendir(Dir.c_str());
  if (!Folder)
    fail(Dir, std::string("opendir failed: ") + std::strerror(errno));
  while (dirent *Entry = ::readdir(Folder))
    if (std::optional<int64_t> N = parseStepName(Entry->d_name))
      if (*N < Step)
        Older.push_back(*N);
  ::closedir(Folder);
  std::sort(Older.rbegin(), Older.rend());
  // Step itself is the newest kept.
  size_t Keep = static_cast<size_t>(KeepLast) - 1;
  bool Removed = false;
  for (size_t I = Keep; I < Older.size(); ++I) {
    if (Previous && Older[I] == *Previous)
      continue;
    removeTree(Dir + "/" + stepFolderName(Older[I]));
    Removed = true;
  }
  if (Removed)
    syncDirectory(Dir);
}

//===----------------------------------------------------------------------===//
// Reading
//===----------------------------------------------------------------------===//

LoadedCheckpoint readRankCheckpoint(const std::string &Dir, uint64_t PlanHash,
                                    int Rank) {
  if (!exists(Dir))
    fail(Dir, "no checkpoint: the folder does not exist");
  std::optional<int64_t> Step = readLatest(Dir);
  if (!Step)
    fail(Dir, "no checkpoint: there is no 'latest' file");
  std::string Path =
      Dir + "/" + stepFolderName(*Step) + "/" + rankFileName(Rank);
  if (!exists(Path))
    fail(Path, "checkpoint " + stepFolderName(*Step) +
                   " has no file for rank " + std::to_string(Rank) +
                   " (was it written by a program with fewer ranks?)");
  std::vector<char> Bytes = readWholeFile(Path);
  const char *Data = Bytes.data();
  size_t Size = Bytes.size();

  if (Size >= sizeof(Magic) && std::memcmp(Data, Magic, sizeof(Magic)) != 0)
    fail(Path, "not an onnx2soap checkpoint file (bad magic)");
  if (Size < HeaderSize + CrcSize)
    fail(Path,
         "truncated checkpoint file (" + std::to_string(Size) + " bytes)");
  uint32_t Version = static_cast<uint32_t>(getUInt(Data + 8, 4));
  if (Version != CheckpointFormatVersion)
    fail(Path, "checkpoint format version " + std::to_string(Version) +
                   "; this program reads version " +
                   std::to_string(CheckpointFormatVersion));
  uint32_t Stored = static_cast<uint32_t>(getUInt(Data + Size - CrcSize, 4));
  if (crc32(0, Data, Size - CrcSize) != Stored)
    fail(Path, "truncated or corrupt checkpoint file (CRC-32 mismatch)");

  int64_t FileStep = static_cast<int64_t>(getUInt(Data + 12, 8));
  uint64_t FileHash = getUInt(Data + 20, 8);
  int32_t FileRank = static_cast<int32_t>(getUInt(Data + 28, 4));
  uint64_t Count = getUInt(Data + 32, 8);
  if (FileHash != PlanHash)
    fail(Path, "checkpoint was written by a different program (plan hash " +
                   hex64(FileHash) + ", this program's is " + hex64(PlanHash) +
                   ")");
  if (FileRank != Rank)
    fail(Path, "holds the state of rank " + std::to_string(FileRank) +
                   ", not of rank " + std::to_string(Rank));
  if (FileStep != *Step)
    fail(Path, "holds step " + std::to_string(FileStep) +
                   ", but 'latest' names " + stepFolderName(*Step));

  LoadedCheckpoint Result;
  Result.Step = FileStep;
  size_t Pos = HeaderSize;
  size_t End = Size - CrcSize;
  auto Corrupt = [&](const std::string &What) {
    fail(Path, "corrupt checkpoint file: " + What);
  };
  for (uint64_t I = 0; I < Count; ++I) {
    if (End - Pos < 4)
      Corrupt("blob " + std::to_string(I) + " runs past the end");
    uint64_t NameSize = getUInt(Data + Pos, 4);
    Pos += 4;
    if (End - Pos < NameSize || End - Pos - NameSize < 8)
      Corrupt("blob " + std::to_string(I) + " runs past the end");
    NamedBlob Blob;
    Blob.Name.assign(Data + Pos, NameSize);
    Pos += NameSize;
    uint64_t ByteCount = getUInt(Data + Pos, 8);
    Pos += 8;
    if (End - Pos < ByteCount)
      Corrupt("blob '" + Blob.Name + "' runs past the end");
    Blob.Bytes.assign(Data + Pos, Data + Pos + ByteCount);
    Pos += ByteCount;
    Result.Blobs.push_back(std::move(Blob));
  }
  if (Pos != End)
    Corrupt(std::to_string(End - Pos) + " bytes after the last blob");
  return Result;
}

} // namespace onnx2soap::rt::program
