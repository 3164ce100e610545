//===- runtime_lib/program/MpiComm.cpp - Communication over MPI -----------===//
//
// The CPU backend's Comm: nonblocking MPI on host memory, every wait a
// polling loop that ends the program (one line on stderr, then MPI_Abort
// with code 3) when nothing completes for CommOptions::TimeoutSeconds.
// allReduceSum is the ring of Comm.h written out with MPI_Isend/MPI_Irecv
// pairs, so the bytes sent are exactly Comm::ringSendBytes and every member
// ends with the same bits. All traffic goes over one duplicate of
// MPI_COMM_WORLD with one fixed tag: callers issue calls in one global order,
// so MPI's non-overtaking rule pairs every send with its receive; a receive
// that gets a different byte count than it expected fails with both counts.
// startSend posts a send and returns (finishStarted waits for it);
// startAllReduceSum sums before it returns, since the ring's steps need
// this rank's calls to progress.
//
//===----------------------------------------------------------------------===//
#include "Comm.h"

#include "../Error.h"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <sched.h>
#include <string>
#include <thread>

namespace onnx2soap::rt::program {
namespace {

/// One tag for everything: matching relies on the global call order.
constexpr int Tag = 17;
/// Largest piece one MPI call moves; MPI counts are ints. A power of two
/// keeps pieces of float arrays element-aligned.
constexpr size_t MaxPieceBytes = size_t(1) << 30;

std::string mpiErrorString(int Code) {
  char Text[MPI_MAX_ERROR_STRING];
  int Length = 0;
  if (MPI_Error_string(Code, Text, &Length) != MPI_SUCCESS)
    return "MPI error " + std::to_string(Code);
  return std::string(Text, Length);
}

void check(int Code, const std::string &Where, const char *Call) {
  if (Code != MPI_SUCCESS)
    fail(Where, std::string(Call) + " failed: " + mpiErrorString(Code));
}

std::string formatSeconds(double Seconds) {
  char Text[32];
  std::snprintf(Text, sizeof(Text), "%g", Seconds);
  return Text;
}

std::string rankList(const std::vector<int> &Ranks) {
  std::string Text = "{";
  for (size_t I = 0; I < Ranks.size(); ++I)
    Text += (I ? "," : "") + std::to_string(Ranks[I]);
  return Text + "}";
}

/// Outstanding requests of one blocking call, with what each receive
/// expects, so a mismatched peer is reported instead of silently accepted.
struct Pending {
  std::vector<MPI_Request> Requests;
  std::vector<long long> ExpectedRecvBytes; // -1 for sends and collectives
};

template <typename T> void addInto(T *Into, const T *From, int64_t Count) {
  for (int64_t I = 0; I < Count; ++I)
    Into[I] = Into[I] + From[I];
}

class MpiComm final : public Comm {
public:
  MpiComm(int *Argc, char ***Argv, const CommOptions &Options)
      : Options(Options) {
    int Initialized = 0;
    check(MPI_Initialized(&Initialized), "MPI", "MPI_Initialized");
    if (!Initialized) {
      check(MPI_Init(Argc, Argv), "MPI", "MPI_Init");
      OwnsMpi = true;
    }
    check(MPI_Comm_dup(MPI_COMM_WORLD, &World), "MPI", "MPI_Comm_dup");
    check(MPI_Comm_set_errhandler(World, MPI_ERRORS_RETURN), "MPI",
          "MPI_Comm_set_errhandler");
    check(MPI_Comm_rank(World, &Rank), "MPI", "MPI_Comm_rank");
    check(MPI_Comm_size(World, &Size), "MPI", "MPI_Comm_size");
  }

  ~MpiComm() override {
    int Finalized = 0;
    MPI_Finalized(&Finalized);
    if (Finalized)
      return;
    MPI_Comm_free(&World);
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
    Groups = NewGroups;
  }

  void send(int Peer, const void *Data, size_t Bytes,
            const char *Label) override {
    startSend(Peer, Data, Bytes, Label);
    finishStarted();
  }

  /// Posts the send and returns: MPI moves it when the peer receives (a
  /// small message at once, a large one as the peer's receive pulls it),
  /// and finishStarted waits for it.
  void startSend(int Peer, const void *Data, size_t Bytes,
                 const char *Label) override {
    checkPeer(Peer, Label);
    checkIdle(Label);
    if (Bytes == 0)
      return;
    postSend(Started, Peer, Data, Bytes, Label);
    StartedLabel = Label;
    StartedPeer = Peer;
    StartedBytes = Bytes;
  }

  void finishStarted() override {
    if (Started.Requests.empty())
      return;
    Pending Done = std::move(Started);
    Started = Pending();
    wait(Done, StartedLabel, [&] {
      return "send of " + std::to_string(StartedBytes) + " bytes to rank " +
             std::to_string(StartedPeer);
    });
    BytesSent += StartedBytes;
  }

  void recv(int Peer, void *Data, size_t Bytes, const char *Label) override {
    checkPeer(Peer, Label);
    checkIdle(Label);
    if (Bytes == 0)
      return;
    Pending P;
    postRecv(P, Peer, Data, Bytes, Label);
    wait(P, Label, [&] {
      return "recv of " + std::to_string(Bytes) + " bytes from rank " +
             std::to_string(Peer);
    });
  }

  void allReduceSum(int Group, void *Data, int64_t Count, DType Type,
                    const char *Label) override {
    checkIdle(Label);
    switch (Type) {
    case DType::Float32:
      return ring<float>(Group, static_cast<float *>(Data), Count, Label);
    case DType::Float64:
      return ring<double>(Group, static_cast<double *>(Data), Count, Label);
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
      break;
    }
    fail(Label, std::string("allReduceSum supports float32 and float64, not ") +
                    dtypeName(Type));
  }

  double sumOverRanks(double Value) override {
    return reduceOverRanks(Value, MPI_SUM, "sum over ranks");
  }
  double maxOverRanks(double Value) override {
    return reduceOverRanks(Value, MPI_MAX, "max over ranks");
  }

  void barrier() override {
    checkIdle("barrier");
    Pending P;
    P.Requests.emplace_back();
    P.ExpectedRecvBytes.push_back(-1);
    check(MPI_Ibarrier(World, &P.Requests.back()), "barrier", "MPI_Ibarrier");
    wait(P, "barrier", [] { return std::string("barrier"); });
  }

private:
  /// The Comm contract: nothing else while a started send runs.
  void checkIdle(const char *Label) const {
    if (!Started.Requests.empty())
      fail(Label,
           std::string("called while '") + StartedLabel + "' is still running");
  }

  void checkPeer(int Peer, const char *Label) const {
    if (Peer < 0 || Peer >= Size || Peer == Rank)
      fail(Label, "rank " + std::to_string(Rank) + " cannot exchange with " +
                      "rank " + std::to_string(Peer) + " (" +
                      std::to_string(Size) + " ranks)");
  }

  /// Posts Bytes as pieces of at most MaxPieceBytes; the receiver cuts the
  /// same byte count the same way.
  void postSend(Pending &P, int Peer, const void *Data, size_t Bytes,
                const char *Label) {
    const char *Base = static_cast<const char *>(Data);
    for (size_t Offset = 0; Offset < Bytes; Offset += MaxPieceBytes) {
      int Piece = int(std::min(MaxPieceBytes, Bytes - Offset));
      P.Requests.emplace_back();
      P.ExpectedRecvBytes.push_back(-1);
      check(MPI_Isend(Base + Offset, Piece, MPI_BYTE, Peer, Tag, World,
                      &P.Requests.back()),
            Label, "MPI_Isend");
    }
  }

  void postRecv(Pending &P, int Peer, void *Data, size_t Bytes,
                const char *Label) {
    char *Base = static_cast<char *>(Data);
    for (size_t Offset = 0; Offset < Bytes; Offset += MaxPieceBytes) {
      int Piece = int(std::min(MaxPieceBytes, Bytes - Offset));
      P.Requests.emplace_back();
      P.ExpectedRecvBytes.push_back(Piece);
      check(MPI_Irecv(Base + Offset, Piece, MPI_BYTE, Peer, Tag, World,
                      &P.Requests.back()),
            Label, "MPI_Irecv");
    }
  }

  /// Waits for every request of P. The clock restarts whenever one
  /// completes: the timeout bounds a stall, not a large transfer. Spins
  /// briefly, then yields, then sleeps, so oversubscribed ranks leave the
  /// core to the peer they wait for.
  template <typename DescribeFn>
  void wait(Pending &P, const char *Label, DescribeFn Describe) {
    using Clock = std::chrono::steady_clock;
    size_t Remaining = P.Requests.size();
    std::vector<int> Done(P.Requests.size());
    std::vector<MPI_Status> Statuses(P.Requests.size());
    auto LastProgress = Clock::now();
    for (long Poll = 0; Remaining > 0; ++Poll) {
      int DoneCount = 0;
      int Code = MPI_Testsome(int(P.Requests.size()), P.Requests.data(),
                              &DoneCount, Done.data(), Statuses.data());
      if (Code == MPI_ERR_IN_STATUS) {
        for (int I = 0; I < DoneCount; ++I)
          if (Statuses[I].MPI_ERROR != MPI_SUCCESS)
            check(Statuses[I].MPI_ERROR, Label, "MPI_Testsome");
      }
      check(Code, Label, "MPI_Testsome");
      if (DoneCount == MPI_UNDEFINED)
        DoneCount = 0; // every request already complete
      for (int I = 0; I < DoneCount; ++I) {
        long long Expected = P.ExpectedRecvBytes[Done[I]];
        if (Expected < 0)
          continue;
        int Got = 0;
        check(MPI_Get_count(&Statuses[I], MPI_BYTE, &Got), Label,
              "MPI_Get_count");
        if (Got != Expected)
          fail(Label, "rank " + std::to_string(Rank) + " expected " +
                          std::to_string(Expected) + " bytes from rank " +
                          std::to_string(Statuses[I].MPI_SOURCE) + " and got " +
                          std::to_string(Got) +
                          "; the ranks disagree on the plan");
      }
      Remaining -= size_t(DoneCount);
      if (Remaining == 0)
        return;
      auto Now = Clock::now();
      if (DoneCount > 0) {
        LastProgress = Now;
        Poll = 0;
        continue;
      }
      if (std::chrono::duration<double>(Now - LastProgress).count() >=
          Options.TimeoutSeconds)
        timeOut(Label, Describe());
      if (Poll < 1000)
        continue;
      if (Poll < 20000)
        sched_yield();
      else
        std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  }

  [[noreturn]] void timeOut(const char *Label, const std::string &What) {
    std::fprintf(stderr,
                 "train: error: rank %d: no progress for %s s on %s (%s); a "
                 "peer died or is stuck\n",
                 Rank, formatSeconds(Options.TimeoutSeconds).c_str(),
                 What.c_str(), Label);
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 3);
    std::abort(); // MPI_Abort does not return; keep [[noreturn]] honest.
  }

  template <typename T>
  void ring(int Group, T *Data, int64_t Count, const char *Label) {
    if (Group < 0 || size_t(Group) >= Groups.size())
      fail(Label, "all-reduce names group " + std::to_string(Group) +
                      " but setGroups declared " +
                      std::to_string(Groups.size()));
    const std::vector<int> &Members = Groups[Group];
    auto Found = std::find(Members.begin(), Members.end(), Rank);
    if (Found == Members.end())
      fail(Label, "rank " + std::to_string(Rank) + " is not in group " +
                      std::to_string(Group) + " " + rankList(Members));
    if (Count < 0)
      fail(Label, "negative element count " + std::to_string(Count));
    const int N = int(Members.size());
    const int Position = int(Found - Members.begin());
    if (N < 2 || Count == 0)
      return;

    auto Begin = [&](int C) {
      C = ((C % N) + N) % N;
      return Count * C / N;
    };
    auto Length = [&](int C) {
      C = ((C % N) + N) % N;
      return Count * (C + 1) / N - Count * C / N;
    };
    const int Next = Members[(Position + 1) % N];
    const int Prev = Members[(Position + N - 1) % N];
    Scratch.resize(size_t((Count + N - 1) / N) * sizeof(T));
    T *Incoming = reinterpret_cast<T *>(Scratch.data());

    // Step s of 2(n-1): reduce-scatter while s < n-1, then all-gather.
    for (int Step = 0; Step < 2 * (N - 1); ++Step) {
      bool Reducing = Step < N - 1;
      int S = Reducing ? Step : Step - (N - 1);
      int SendChunk = Reducing ? Position - S : Position + 1 - S;
      int RecvChunk = SendChunk - 1;
      size_t SendBytes = size_t(Length(SendChunk)) * sizeof(T);
      size_t RecvBytes = size_t(Length(RecvChunk)) * sizeof(T);
      T *RecvInto = Reducing ? Incoming : Data + Begin(RecvChunk);
      Pending P;
      // Receive first so the peer's send finds a posted buffer.
      if (RecvBytes > 0)
        postRecv(P, Prev, RecvInto, RecvBytes, Label);
      if (SendBytes > 0)
        postSend(P, Next, Data + Begin(SendChunk), SendBytes, Label);
      wait(P, Label, [&] {
        return "all-reduce of " + std::to_string(Count * sizeof(T)) +
               " bytes in group " + std::to_string(Group) + " " +
               rankList(Members) + " (step " + std::to_string(Step + 1) +
               " of " + std::to_string(2 * (N - 1)) + ": send " +
               std::to_string(SendBytes) + " bytes to rank " +
               std::to_string(Next) + ", recv " + std::to_string(RecvBytes) +
               " bytes from rank " + std::to_string(Prev) + ")";
      });
      BytesSent += SendBytes;
      if (Reducing)
        addInto(Data + Begin(RecvChunk), Incoming, Length(RecvChunk));
    }
  }

  double reduceOverRanks(double Value, MPI_Op Op, const char *What) {
    checkIdle(What);
    double Result = 0;
    Pending P;
    P.Requests.emplace_back();
    P.ExpectedRecvBytes.push_back(-1);
    check(MPI_Iallreduce(&Value, &Result, 1, MPI_DOUBLE, Op, World,
                         &P.Requests.back()),
          What, "MPI_Iallreduce");
    wait(P, What, [&] { return std::string(What); });
    return Result;
  }

  CommOptions Options;
  bool OwnsMpi = false;
  /// The send startSend posted and finishStarted has not waited for (no
  /// requests: none), its label, peer and bytes.
  Pending Started;
  const char *StartedLabel = "";
  int StartedPeer = -1;
  size_t StartedBytes = 0;
  MPI_Comm World = MPI_COMM_NULL;
  std::vector<std::vector<int>> Groups;
  /// Incoming reduce-scatter chunks, kept between calls.
  std::vector<char> Scratch;
};

} // namespace

std::unique_ptr<Comm> createMpiComm(int *Argc, char ***Argv,
                                    const CommOptions &Options) {
  return std::make_unique<MpiComm>(Argc, Argv, Options);
}

} // namespace onnx2soap::rt::program
