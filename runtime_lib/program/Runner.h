//===- runtime_lib/program/Runner.h - Walking a plan ------------*- C++ -*-===//
//
// The training loop of a generated program: holds one rank's buffers on a
// backend, walks the rank's steps of the plan once per training step, and
// reports the loss. It knows nothing of ONNX or of the planner; everything
// it needs is in the Plan.
//
//===----------------------------------------------------------------------===//
#ifndef ONNX2SOAP_RUNTIME_PROGRAM_RUNNER_H
#define ONNX2SOAP_RUNTIME_PROGRAM_RUNNER_H

#include "Checkpoint.h"
#include "Comm.h"
#include "Plan.h"
#include "TensorFile.h"
#include <memory>
#include <string>
#include <vector>

namespace onnx2soap::rt::program {

class Dataset;

/// Fails, naming the rank and both sizes, when the buffers Rank allocates
/// for the whole run (allocatedBytes) need more than Free bytes of device
/// memory: a clear error before the first allocation instead of an
/// out-of-memory error halfway through them.
void checkDeviceMemory(const Plan &P, int32_t Rank, size_t Free);

/// Fails, naming both counts, unless C has as many ranks as P.
void checkRankCount(const Plan &P, const Comm &C);

/// The ranks of each group of a plan's group table (Plan::Groups over
/// GroupRanks, or ProfileGroups over ProfileGroupRanks): what
/// Comm::setGroups takes.
std::vector<std::vector<int>> rankGroups(Table<GroupInfo> Groups,
                                         Table<int32_t> Ranks);

/// Where one rank's profiled steps went (--profile-ops), in seconds summed
/// over Steps steps: forward and backward kernels (as timed for the
/// profile), the box copies that gather inputs, pack and unpack messages
/// and add gradients back, and the communication calls (receives, the
/// waits for started sends and all-reduces, BatchNorm statistics); Total is
/// the steps' wall time on this rank, of which the rest is zeroing
/// accumulators, loading the batch, updates and bookkeeping.
struct StepBreakdown {
  double Kernels = 0, Copies = 0, Communication = 0, Total = 0;
  int64_t Steps = 0;
};

class Runner {
public:
  /// Allocates this rank's buffers and loads their initial values from the
  /// codegen-written `shards.bin` in WeightsDir.
  Runner(const Plan &P, Backend &B, Comm &C, const std::string &WeightsDir);
  ~Runner();

  /// Sets the global batch: one tensor per plan DataInputs entry, and the
  /// labels (when the plan has them). Shapes and types must match.
  void setBatch(const std::vector<HostTensor> &Inputs,
                const HostTensor *Labels);
  /// Or trains on a dataset (Dataset.h, made with datasetFiles(P)): step s
  /// reads its share of samples (s - 1) * B ... s * B - 1, wrapping around.
  void setDataset(std::shared_ptr<const Dataset> D);

  /// One training step; returns the loss of its forward pass, summed over
  /// the ranks that hold parts of it (the same value on every rank).
  double step();
  int64_t stepsDone() const { return Step; }
  /// Device memory this rank's buffers and message buffer took (the plan
  /// promises allocatedBytes(P, rank)).
  size_t allocatedBytes() const;

  /// This rank's persistent state (parameters, optimizer slots, running
  /// statistics) as named blobs, for checkpoints; restore() takes them back.
  std::vector<NamedBlob> persistentState();
  void restore(int64_t StepsDone, const std::vector<NamedBlob> &State);

  /// Times every forward and backward call from now on (synchronizing the
  /// backend around each, so steps get slower).
  void startProfiling();
  /// The measured calls in the planner's profile format
  /// (docs/profile-format.md): the median per partition key over all steps
  /// and ranks. Every rank must call it; rank 0 gets the text, the others an
  /// empty string.
  std::string profileJson(int Threads);
  /// This rank's steps since startProfiling(), by where they went.
  StepBreakdown breakdown() const;

  /// Records the next step's timeline (--trace): each of the rank's steps
  /// of the plan and each wait for a started send or all-reduce, from the
  /// step's start, the backend synchronized after each (so on a GPU that
  /// step runs slower).
  void traceNextStep();
  /// Whether a step was traced.
  bool traced() const;
  /// The traced step of every rank as Chrome trace events (one track per
  /// rank; docs/generated-program.md). Every rank must call it; rank 0 gets
  /// the text, the others an empty string.
  std::string traceJson();

  /// The whole value of every parameter and state tensor, gathered to rank
  /// 0 (other ranks get an empty list). Every rank must call it.
  std::vector<HostTensor> gatherWeights();

private:
  struct Impl;
  std::unique_ptr<Impl> I;
  int64_t Step = 0;
};

} // namespace onnx2soap::rt::program

#endif
