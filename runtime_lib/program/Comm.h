//===- runtime_lib/program/Comm.h - Communication among ranks --*- C++ -*-===//
//
// What a generated program's ranks say to each other: point-to-point
// messages (the task graph's transfers and gradient transfers) and sum
// all-reduces among fixed groups of ranks (gradient and BatchNorm statistics
// synchronization). Two implementations: MPI on host memory (the CPU
// backend) and NCCL on device memory (the CUDA backend, bootstrapped over
// MPI). Both use the same ring algorithm for all-reduce, so the bytes a rank
// sends are what the planner predicted (docs/generated-program.md).
//
// Every call is blocking, except that a send or an all-reduce may be
// started and finished later (startSend, startAllReduceSum, finishStarted)
// with nothing else said in between, and made by every participant in the
// same order (the plan's global order), which makes the schedule
// deadlock-free: a rank only waits for a call it has made, and every
// participant of the earliest unfinished call has made it. A call
// that makes no progress for the configured timeout ends the program with a
// message naming this rank, the peer or group and the label of the call,
// never a hang.
//
//===----------------------------------------------------------------------===//
#ifndef ONNX2SOAP_RUNTIME_PROGRAM_COMM_H
#define ONNX2SOAP_RUNTIME_PROGRAM_COMM_H

#include "../Types.h"
#include <cstdint>
#include <memory>
#include <vector>

namespace onnx2soap::rt::program {

struct CommOptions {
  /// Seconds a blocking call may wait for a peer before the program gives up.
  double TimeoutSeconds = 300;
};

class Comm {
public:
  virtual ~Comm();

  int rank() const { return Rank; }
  int size() const { return Size; }

  /// Declares the groups (sorted rank lists, at least two ranks each) that
  /// allReduceSum will name by index. Every rank calls it once with the same
  /// list, before any collective; NCCL creates one communicator per group
  /// this rank belongs to.
  virtual void setGroups(const std::vector<std::vector<int>> &Groups) = 0;

  /// Sends Bytes of backend memory at Data to Peer. Label names the
  /// transfer in error messages.
  virtual void send(int Peer, const void *Data, size_t Bytes,
                    const char *Label) = 0;
  /// Receives Bytes from Peer into backend memory at Data.
  virtual void recv(int Peer, void *Data, size_t Bytes, const char *Label) = 0;

  /// In-place sum of Count elements of Type (Float32 or Float64) among the
  /// members of group Group; this rank must be one of them. Ring algorithm:
  /// with n members in rank order, the data is cut into chunks
  /// [c*Count/n, (c+1)*Count/n); n-1 reduce-scatter steps then n-1
  /// all-gather steps each send one chunk to the next member. Every member
  /// ends with bit-identical sums.
  virtual void allReduceSum(int Group, void *Data, int64_t Count, DType Type,
                            const char *Label) = 0;
  /// allReduceSum, which may still be running when this returns: until
  /// finishStarted() returns, Data must be neither read nor written and no
  /// other call of this Comm made (the caller computes meanwhile; a
  /// generated program's gradient all-reduces overlap the backward pass
  /// this way). Every member still starts it in the plan's order. The
  /// default sums before it returns (the MPI Comm: no overlap on the host).
  virtual void startAllReduceSum(int Group, void *Data, int64_t Count,
                                 DType Type, const char *Label) {
    allReduceSum(Group, Data, Count, Type, Label);
  }
  /// send, on the same terms: Data stays untouched and nothing else is
  /// said until finishStarted() (the sender computes while the peer
  /// catches up with its receive). The default sends before it returns.
  virtual void startSend(int Peer, const void *Data, size_t Bytes,
                         const char *Label) {
    send(Peer, Data, Bytes, Label);
  }
  /// Returns when the call started last (startAllReduceSum or startSend)
  /// has finished; at once when none is running.
  virtual void finishStarted() {}

  /// Sum of one host value over all ranks, for reporting (the loss, the
  /// step time); not counted in bytesSent.
  virtual double sumOverRanks(double Value) = 0;
  /// Largest host value over all ranks (not counted in bytesSent).
  virtual double maxOverRanks(double Value) = 0;
  virtual void barrier() = 0;

  /// Payload bytes this rank has sent through send and allReduceSum.
  uint64_t bytesSent() const { return BytesSent; }

  /// Bytes the member at Position (0-based, in rank order) of an n-member
  /// group sends in one allReduceSum of Count elements of ElementSize bytes.
  static uint64_t ringSendBytes(int64_t Count, size_t ElementSize,
                                int GroupSize, int Position);

protected:
  int Rank = 0;
  int Size = 1;
  uint64_t BytesSent = 0;
};

// Defined here, not in Comm.cpp, so that the planner's byte prediction
// (codegen, which links neither MPI nor this library) shares the formula.
inline uint64_t Comm::ringSendBytes(int64_t Count, size_t ElementSize,
                                    int GroupSize, int Position) {
  if (GroupSize < 2)
    return 0;
  auto Chunk = [&](int C) {
    int N = GroupSize;
    C = ((C % N) + N) % N;
    return Count * (C + 1) / N - Count * C / N;
  };
  // Reduce-scatter step s sends chunk (Position - s); all-gather step s
  // sends chunk (Position + 1 - s): every chunk but one, twice over.
  uint64_t Elements = 0;
  for (int Step = 0; Step < GroupSize - 1; ++Step)
    Elements += Chunk(Position - Step) + Chunk(Position + 1 - Step);
  return Elements * ElementSize;
}

/// MPI over host memory. Calls MPI_Init when MPI is not initialized yet (and
/// MPI_Finalize on destruction in that case).
std::unique_ptr<Comm> createMpiComm(int *Argc, char ***Argv,
                                    const CommOptions &Options);

} // namespace onnx2soap::rt::program

#endif
