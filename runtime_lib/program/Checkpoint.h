//===- runtime_lib/program/Checkpoint.h - Rank checkpoints -*- C++ -*------===//
//
// Every rank of a generated program saves its own state (the weight shards,
// optimizer state and data position it owns) as named blobs in one file per
// rank, DIR/step-<N>/rank-<r>.bin; once every rank has written its file, rank
// 0 points DIR/latest at the step. Each file and `latest` are replaced
// atomically, so a program killed at any moment of a save leaves the
// previous checkpoint readable (docs/generated-program.md, "Checkpoints").
//
//===----------------------------------------------------------------------===//
#ifndef ONNX2SOAP_RUNTIME_PROGRAM_CHECKPOINT_H
#define ONNX2SOAP_RUNTIME_PROGRAM_CHECKPOINT_H

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace onnx2soap::rt::program {

/// One piece of a rank's state.
struct NamedBlob {
  std::string Name;
  std::vector<char> Bytes;
};

/// Version of the rank-file layout written after the magic "O2SCKPT1".
constexpr uint32_t CheckpointFormatVersion = 1;

/// Writes this rank's file of step Step into Dir/step-<Step>/ (creating the
/// folders). PlanHash identifies the program; a checkpoint is only read
/// back by a program with the same hash.
void writeRankCheckpoint(const std::string &Dir, int64_t Step,
                         uint64_t PlanHash, int Rank,
                         const std::vector<NamedBlob> &Blobs);

/// Called by rank 0 once every rank's writeRankCheckpoint of Step has
/// returned (after a barrier): points Dir/latest at Step, then removes the
/// step folders older than the KeepLast (>= 1) newest up to Step, but never
/// the one `latest` named before.
void commitCheckpoint(const std::string &Dir, int64_t Step, int KeepLast);

struct LoadedCheckpoint {
  int64_t Step = 0;
  std::vector<NamedBlob> Blobs;
};

/// Reads this rank's file of the checkpoint Dir/latest names. Throws
/// RuntimeError when there is no checkpoint, when it was written by a program
/// with another plan hash or for another rank, or when the file is truncated
/// or corrupt.
LoadedCheckpoint readRankCheckpoint(const std::string &Dir, uint64_t PlanHash,
                                    int Rank);

/// The step Dir/latest names, or -1 when there is no `latest`.
int64_t latestCheckpointStep(const std::string &Dir);

/// CRC-32 (IEEE 802.3, as zlib computes it) of Size bytes, continuing from
/// Crc (0 to start).
uint32_t crc32(uint32_t Crc, const void *Data, size_t Size);

} // namespace onnx2soap::rt::program

#endif
