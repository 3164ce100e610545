//===- runtime_lib/program/nccl/NcclComm.cpp - Communication over NCCL ----===//
//
// The CUDA backend's Comm. MPI starts the ranks and carries the NCCL unique
// ids: one world communicator for point-to-point ncclSend/ncclRecv and, in
// setGroups, one communicator per group this rank belongs to, its id made
// by the group's first member and broadcast over an MPI_Comm_split of the
// members. Communicators are nonblocking (config.blocking = 0), so every
// wait is a loop over ncclCommGetAsyncError and cudaStreamQuery that
// enforces CommOptions::TimeoutSeconds with the same one-line message as the
// MPI Comm, then aborts the NCCL communicators and the MPI job.
// startSend and startAllReduceSum return once the operation is queued on
// the stream (one at a time; finishStarted waits for it), so the backend's
// kernels, on their own stream, run beside it. NCCL_ALGO
// defaults to Ring (unless the user set it), whose all-reduce sends the
// 2(n-1)/n of the data that Comm::ringSendBytes counts. NCCL cuts chunks its
// own way, so sums match the MPI Comm's only within rounding (members agree
// bit for bit among themselves). This file compiles and links on the
// development machine but has never run: it has no GPU.
//
//===----------------------------------------------------------------------===//
#include "NcclComm.h"

#include "../../Error.h"

#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <sched.h>
#include <string>
#include <thread>

namespace onnx2soap::rt::program {
namespace {

using Clock = std::chrono::steady_clock;

void checkMpi(int Code, const std::string &Where, const char *Call) {
  if (Code == MPI_SUCCESS)
    return;
  char Text[MPI_MAX_ERROR_STRING];
  int Length = 0;
  std::string Message = "MPI error " + std::to_string(Code);
  if (MPI_Error_string(Code, Text, &Length) == MPI_SUCCESS)
    Message.assign(Text, Length);
  fail(Where, std::string(Call) + " failed: " + Message);
}

void checkCuda(cudaError_t Code, const std::string &Where, const char *Call) {
  if (Code != cudaSuccess)
    fail(Where, std::string(Call) + " failed: " + cudaGetErrorString(Code));
}

std::string rankList(const std::vector<int> &Ranks) {
  std::string Text = "{";
  for (size_t I = 0; I < Ranks.size(); ++I)
    Text += (I ? "," : "") + std::to_string(Ranks[I]);
  return Text + "}";
}

std::string formatSeconds(double Seconds) {
  char Text[32];
  std::snprintf(Text, sizeof(Text), "%g", Seconds);
  return Text;
}

/// Spin, then yield, then sleep: waiting ranks leave the CPU to others.
void pause(long Poll) {
  if (Poll < 1000)
    return;
  if (Poll < 20000)
    sched_yield();
  else
    std::this_thread::sleep_for(std::chrono::microseconds(200));
}

class NcclComm final : public Comm {
public:
  NcclComm(int *Argc, char ***Argv, const CommOptions &Options,
           void *CudaStream)
      : Options(Options), Stream(static_cast<cudaStream_t>(CudaStream)) {
    int Initialized = 0;
    checkMpi(MPI_Initialized(&Initialized), "MPI", "MPI_Initialized");
    if (!Initialized) {
      checkMpi(MPI_Init(Argc, Argv), "MPI", "MPI_Init");
      OwnsMpi = true;
    }
    checkMpi(MPI_Comm_dup(MPI_COMM_WORLD, &MpiWorld), "MPI", "MPI_Comm_dup");
    checkMpi(MPI_Comm_set_errhandler(MpiWorld, MPI_ERRORS_RETURN), "MPI",
             "MPI_Comm_set_errhandler");
    checkMpi(MPI_Comm_rank(MpiWorld, &Rank), "MPI", "MPI_Comm_rank");
    checkMpi(MPI_Comm_size(MpiWorld, &Size), "MPI", "MPI_Comm_size");
    // Before any NCCL call reads its environment; the user's choice wins.
    setenv("NCCL_ALGO", "Ring", /*overwrite=*/0);
    checkCuda(cudaEventCreateWithFlags(&Enqueued, cudaEventDisableTiming),
              "NCCL", "cudaEventCreateWithFlags");
    std::vector<int> Everyone(Size);
    for (int R = 0; R < Size; ++R)
      Everyone[R] = R;
    World = initComm(MpiWorld, Everyone, Rank, "world communicator");
  }

  ~NcclComm() override {
    destroyGroups();
    if (World)
      ncclCommDestroy(World);
    cudaEventDestroy(Enqueued);
    int Finalized = 0;
    MPI_Finalized(&Finalized);
    if (Finalized)
      return;
    MPI_Comm_free(&MpiWorld);
    if (OwnsMpi)
      MPI_Finalize();
  }

  void setGroups(const std::vector<std::vector<int>> &NewGroups) override {
    for (size_t G = 0; G < NewGroups.size(); ++G) {
      const std::vector<int> &Members = NewGroups[G];
      std::string Where =
          "group " + std::to_string(G) + " " + rankList(Members);
      if (Members.empty())
        fail(Where, "a group needs at least one rank");
      for (size_t I = 0; I < Members.size(); ++I) {
        if (Members[I] < 0 || Members[I] >= Size)
          fail(Where, "rank " + std::to_string(Members[I]) +
                          " is outside the " + std::to_string(Size) +
                          " ranks of this run");
        if (I > 0 && Members[I] <= Members[I - 1])
          fail(Where, "ranks must be sorted and distinct");
      }
    }
    destroyGroups();
    Groups = NewGroups;
    GroupComms.assign(Groups.size(), nullptr);
    Positions.assign(Groups.size(), -1);
    // Every rank walks the groups in the same order and finishes one
    // communicator before the next, so initialization cannot deadlock.
    for (size_t G = 0; G < Groups.size(); ++G) {
      const std::vector<int> &Members = Groups[G];
      auto Found = std::find(Members.begin(), Members.end(), Rank);
      bool Member = Found != Members.end();
      std::string Label = "group " + std::to_string(G) + " " +
                          rankList(Members) + " communicator";
      MPI_Comm Split = MPI_COMM_NULL;
      checkMpi(MPI_Comm_split(MpiWorld, Member ? int(G) : MPI_UNDEFINED, Rank,
                              &Split),
               Label, "MPI_Comm_split");
      if (!Member)
        continue;
      Positions[G] = int(Found - Members.begin());
      GroupComms[G] = initComm(Split, Members, Positions[G], Label);
      MPI_Comm_free(&Split);
    }
  }

  void send(int Peer, const void *Data, size_t Bytes,
            const char *Label) override {
    startSend(Peer, Data, Bytes, Label);
    finishStarted();
  }

  void startSend(int Peer, const void *Data, size_t Bytes,
                 const char *Label) override {
    checkPeer(Peer, Label);
    checkIdle(Label);
    if (Bytes == 0)
      return;
    markStart(Label);
    checkNccl(World, ncclSend(Data, Bytes, ncclUint8, Peer, World, Stream),
              Label, "ncclSend");
    Running = {World, Label, Peer, -1, Bytes, Bytes};
  }

  void recv(int Peer, void *Data, size_t Bytes, const char *Label) override {
    checkPeer(Peer, Label);
    checkIdle(Label);
    if (Bytes == 0)
      return;
    markStart(Label);
    checkNccl(World, ncclRecv(Data, Bytes, ncclUint8, Peer, World, Stream),
              Label, "ncclRecv");
    wait(World, Label, [&] {
      return "recv of " + std::to_string(Bytes) + " bytes from rank " +
             std::to_string(Peer);
    });
  }

  void allReduceSum(int Group, void *Data, int64_t Count, DType Type,
                    const char *Label) override {
    startAllReduceSum(Group, Data, Count, Type, Label);
    finishStarted();
  }

  void startAllReduceSum(int Group, void *Data, int64_t Count, DType Type,
                         const char *Label) override {
    checkIdle(Label);
    ncclDataType_t NcclType = ncclFloat32;
    switch (Type) {
    case DType::Float32:
      NcclType = ncclFloat32;
      break;
    case DType::Float64:
      NcclType = ncclFloat64;
      break;
    case DType::Float16:
    case DType::BFloat16:
    case DType::Int8:
    case DType::UInt8:
    case DType::Int16:
    case DType::UInt16:
    case DType::Int32:
    case DType::UInt32:
    case DType::Int64:
    case DType::UInt64:
    case DType::Bool:
      fail(Label,
           std::string("allReduceSum supports float32 and float64, not ") +
               dtypeName(Type));
    }
    if (Group < 0 || size_t(Group) >= Groups.size())
      fail(Label, "all-reduce names group " + std::to_string(Group) +
                      " but setGroups declared " +
                      std::to_string(Groups.size()));
    const std::vector<int> &Members = Groups[Group];
    if (Positions[Group] < 0)
      fail(Label, "rank " + std::to_string(Rank) + " is not in group " +
                      std::to_string(Group) + " " + rankList(Members));
    if (Count < 0)
      fail(Label, "negative element count " + std::to_string(Count));
    int N = int(Members.size());
    if (N < 2 || Count == 0)
      return;
    ncclComm_t Nccl = GroupComms[Group];
    markStart(Label);
    checkNccl(Nccl,
              ncclAllReduce(Data, Data, size_t(Count), NcclType, ncclSum, Nccl,
                            Stream),
              Label, "ncclAllReduce");
    Running = {Nccl,
               Label,
               -1,
               Group,
               uint64_t(Count) * dtypeSize(Type),
               ringSendBytes(Count, dtypeSize(Type), N, Positions[Group])};
  }

  void finishStarted() override {
    if (!Running.Nccl)
      return;
    // Cleared first: a failure below ends the program anyway.
    RunningCall Done = std::move(Running);
    Running = {};
    wait(Done.Nccl, Done.Label, [&] {
      if (Done.Peer >= 0)
        return "send of " + std::to_string(Done.Bytes) + " bytes to rank " +
               std::to_string(Done.Peer);
      return "all-reduce of " + std::to_string(Done.Bytes) +
             " bytes in group " + std::to_string(Done.Group) + " " +
             rankList(Groups[Done.Group]);
    });
    BytesSent += Done.BytesSent;
  }

  double sumOverRanks(double Value) override {
    return reduceOverRanks(Value, MPI_SUM, "sum over ranks");
  }
  double maxOverRanks(double Value) override {
    return reduceOverRanks(Value, MPI_MAX, "max over ranks");
  }

  void barrier() override {
    checkIdle("barrier");
    MPI_Request Request;
    checkMpi(MPI_Ibarrier(MpiWorld, &Request), "barrier", "MPI_Ibarrier");
    waitMpi(Request, "barrier");
  }

private:
  /// The Comm contract: nothing else while a started call runs.
  void checkIdle(const char *Label) const {
    if (Running.Nccl)
      fail(Label, std::string("called while '") + Running.Label +
                      "' is still running");
  }
  void checkPeer(int Peer, const char *Label) const {
    if (Peer < 0 || Peer >= Size || Peer == Rank)
      fail(Label, "rank " + std::to_string(Rank) + " cannot exchange with " +
                      "rank " + std::to_string(Peer) + " (" +
                      std::to_string(Size) + " ranks)");
  }

  /// A failed NCCL call aborts its communicator (its peers then fail too,
  /// instead of waiting) and throws.
  void checkNccl(ncclComm_t Nccl, ncclResult_t Result, const std::string &Where,
                 const char *Call) {
    if (Result == ncclSuccess || Result == ncclInProgress)
      return;
    std::string Detail = Nccl ? ncclGetLastError(Nccl) : "";
    if (Nccl)
      ncclCommAbort(Nccl);
    if (Nccl == World)
      World = nullptr;
    for (ncclComm_t &GroupComm : GroupComms)
      if (GroupComm == Nccl)
        GroupComm = nullptr;
    fail(Where, std::string(Call) + " failed: " + ncclGetErrorString(Result) +
                    (Detail.empty() ? "" : " (" + Detail + ")"));
  }

  /// Creates the communicator of Members (this rank at Position) over
  /// MpiGroup, whose rank 0 is the first member.
  ncclComm_t initComm(MPI_Comm MpiGroup, const std::vector<int> &Members,
                      int Position, const std::string &Label) {
    ncclUniqueId Id;
    if (Position == 0)
      checkNccl(nullptr, ncclGetUniqueId(&Id), Label, "ncclGetUniqueId");
    checkMpi(MPI_Bcast(&Id, sizeof(Id), MPI_BYTE, 0, MpiGroup), Label,
             "MPI_Bcast");
    ncclConfig_t Config = NCCL_CONFIG_INITIALIZER;
    Config.blocking = 0;
    ncclComm_t Nccl = nullptr;
    ncclResult_t Result = ncclCommInitRankConfig(&Nccl, int(Members.size()), Id,
                                                 Position, &Config);
    checkNccl(Nccl, Result, Label, "ncclCommInitRankConfig");
    auto Start = Clock::now();
    for (long Poll = 0;; ++Poll) {
      ncclResult_t State = ncclSuccess;
      checkNccl(Nccl, ncclCommGetAsyncError(Nccl, &State), Label,
                "ncclCommGetAsyncError");
      if (State == ncclSuccess)
        return Nccl;
      checkNccl(Nccl, State, Label, "ncclCommInitRankConfig");
      if (secondsSince(Start) >= Options.TimeoutSeconds)
        timeOut(Nccl, Label.c_str(),
                "creating the communicator of ranks " + rankList(Members));
      pause(Poll);
    }
  }

  /// Starts the timeout clock when the stream reaches the operation, so
  /// kernels queued before it do not count as a stalled peer.
  void markStart(const char *Label) {
    checkCuda(cudaEventRecord(Enqueued, Stream), Label, "cudaEventRecord");
  }

  /// Returns when the stream has finished the operation just enqueued on
  /// Nccl; fails on an NCCL or CUDA error, ends the job on a stall.
  template <typename DescribeFn>
  void wait(ncclComm_t Nccl, const char *Label, DescribeFn Describe) {
    auto Start = Clock::now();
    bool Started = false;
    for (long Poll = 0;; ++Poll) {
      ncclResult_t State = ncclSuccess;
      checkNccl(Nccl, ncclCommGetAsyncError(Nccl, &State), Label,
                "ncclCommGetAsyncError");
      checkNccl(Nccl, State, Label, "NCCL operation");
      if (!Started) {
        cudaError_t Reached = cudaEventQuery(Enqueued);
        if (Reached == cudaSuccess) {
          Started = true;
          Start = Clock::now();
        } else if (Reached != cudaErrorNotReady) {
          checkCuda(Reached, Label, "cudaEventQuery");
        }
      }
      // A nonblocking communicator may still be enqueueing the operation.
      if (State == ncclSuccess) {
        cudaError_t Done = cudaStreamQuery(Stream);
        if (Done == cudaSuccess)
          return;
        if (Done != cudaErrorNotReady)
          checkCuda(Done, Label, "cudaStreamQuery");
      }
      if (Started && secondsSince(Start) >= Options.TimeoutSeconds)
        timeOut(Nccl, Label, Describe());
      pause(Poll);
    }
  }

  void waitMpi(MPI_Request &Request, const char *What) {
    auto Start = Clock::now();
    for (long Poll = 0;; ++Poll) {
      int Done = 0;
      checkMpi(MPI_Test(&Request, &Done, MPI_STATUS_IGNORE), What, "MPI_Test");
      if (Done)
        return;
      if (secondsSince(Start) >= Options.TimeoutSeconds)
        timeOut(nullptr, What, What);
      pause(Poll);
    }
  }

  double reduceOverRanks(double Value, MPI_Op Op, const char *What) {
    checkIdle(What);
    double Result = 0;
    MPI_Request Request;
    checkMpi(
        MPI_Iallreduce(&Value, &Result, 1, MPI_DOUBLE, Op, MpiWorld, &Request),
        What, "MPI_Iallreduce");
    waitMpi(Request, What);
    return Result;
  }

  static double secondsSince(Clock::time_point Start) {
    return std::chrono::duration<double>(Clock::now() - Start).count();
  }

  /// One line on stderr, then every NCCL communicator is aborted (a
  /// kernel stuck in a collective would keep the process alive) and the
  /// MPI job ends with code 3.
  [[noreturn]] void timeOut(ncclComm_t Nccl, const char *Label,
                            const std::string &What) {
    std::fprintf(stderr,
                 "train: error: rank %d: no progress for %s s on %s (%s); a "
                 "peer died or is stuck\n",
                 Rank, formatSeconds(Options.TimeoutSeconds).c_str(),
                 What.c_str(), Label);
    std::fflush(stderr);
    if (Nccl)
      ncclCommAbort(Nccl);
    for (ncclComm_t GroupComm : GroupComms)
      if (GroupComm && GroupComm != Nccl)
        ncclCommAbort(GroupComm);
    if (World && World != Nccl)
      ncclCommAbort(World);
    MPI_Abort(MPI_COMM_WORLD, 3);
    std::abort(); // MPI_Abort does not return; keep [[noreturn]] honest.
  }

  void destroyGroups() {
    for (ncclComm_t GroupComm : GroupComms)
      if (GroupComm)
        ncclCommDestroy(GroupComm);
    GroupComms.clear();
  }

  /// The send (to Peer) or all-reduce (in Group) startSend or
  /// startAllReduceSum left running (Nccl null: none): its payload, and the
  /// bytes this rank sends in it. What a stall message names is built only
  /// if one is printed.
  struct RunningCall {
    ncclComm_t Nccl = nullptr;
    const char *Label = "";
    int Peer = -1;
    int Group = -1;
    uint64_t Bytes = 0;
    uint64_t BytesSent = 0;
  };
  RunningCall Running;

  CommOptions Options;
  cudaStream_t Stream;
  cudaEvent_t Enqueued = nullptr;
  bool OwnsMpi = false;
  MPI_Comm MpiWorld = MPI_COMM_NULL;
  ncclComm_t World = nullptr;
  std::vector<std::vector<int>> Groups;
  /// Per group: this rank's communicator and position, or null and -1.
  std::vector<ncclComm_t> GroupComms;
  std::vector<int> Positions;
};

} // namespace

std::unique_ptr<Comm> createNcclComm(int *Argc, char ***Argv,
                                     const CommOptions &Options,
                                     void *CudaStream) {
  return std::make_unique<NcclComm>(Argc, Argv, Options, CudaStream);
}

} // namespace onnx2soap::rt::program
