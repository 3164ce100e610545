//===- runtime_lib/program/CommProfile.cpp - --profile-comm ---------------===//
//
// Every rank walks the same list of measurements in the same order (the
// Comm's calls must match across ranks); ranks outside a measurement's
// group or pair wait at the barrier that starts the next.
//
//===----------------------------------------------------------------------===//
#include "CommProfile.h"
#include "ReportText.h"
#include "Runner.h"
#include <algorithm>
#include <chrono>
#include <optional>
#include <utility>
#include <vector>

namespace onnx2soap::rt::program {

size_t largestMessageBytes(const Plan &P) {
  size_t Bytes = 8;
  for (const StepInfo &S : P.Steps)
    if (S.Kind == StepKind::Send || S.Kind == StepKind::AllReduce)
      Bytes = std::max(Bytes, size_t(S.Elements) * dtypeSize(S.Type));
  return Bytes;
}

namespace {

/// 8, 32, 128, ... bytes below Max, then Max (a multiple of 4, at least 8:
/// all-reduces sum float32 elements).
std::vector<size_t> sizesUpTo(size_t Max) {
  std::vector<size_t> Sizes;
  for (size_t Size = 8; Size < Max; Size *= 4)
    Sizes.push_back(Size);
  Sizes.push_back(Max);
  return Sizes;
}

/// "sizes_bytes": [...], "times_us": [...]
std::string table(const std::vector<size_t> &Sizes,
                  const std::vector<double> &Seconds) {
  std::string Out = "\"sizes_bytes\": [";
  for (size_t I = 0; I < Sizes.size(); ++I)
    Out += (I ? ", " : "") + std::to_string(Sizes[I]);
  Out += "], \"times_us\": [";
  for (size_t I = 0; I < Seconds.size(); ++I)
    // A table's times must be positive: a clock that did not tick counts
    // as a nanosecond.
    Out += (I ? ", " : "") + jsonNumber(std::max(Seconds[I], 1e-9) * 1e6);
  return Out + "]";
}

} // namespace

std::string profileCommunication(const Plan &P, Backend &B, Comm &C,
                                 size_t MaxBytes, int Repeats) {
  int Rank = C.rank();
  checkRankCount(P, C);
  // Device memory (GPUs): what is in use before the groups' communicators
  // exist is the runtime's (less the backend's library workspace, which
  // the planner counts apart); what their creation and each group's first
  // all-reduce add is that communicator's; what a pair's first exchange
  // adds on its two ranks is a peer connection's (NCCL connects lazily).
  std::optional<size_t> InUse = B.memoryInUse();
  auto Grown = [&](std::optional<size_t> Before) {
    std::optional<size_t> Now = B.memoryInUse();
    return Before && Now && *Now > *Before ? double(*Now - *Before) : 0.0;
  };
  double Runtime =
      InUse ? double(*InUse) - double(std::min(*InUse, B.libraryBytes())) : 0;
  double PerCommunicator = 0, PerPeer = 0;
  // What the compiler chose (Plan::ProfilePairs, ProfileGroups): a pair
  // per kind of route, a group per ring shape.
  std::vector<std::vector<int>> Groups =
      rankGroups(P.ProfileGroups, P.ProfileGroupRanks);
  C.setGroups(Groups);
  size_t Joined = 0;
  for (const std::vector<int> &Group : Groups)
    Joined += std::find(Group.begin(), Group.end(), Rank) != Group.end();
  double CreatedEach = Joined ? Grown(InUse) / double(Joined) : 0;
  std::vector<std::pair<int, int>> Pairs;
  for (int32_t I = 0; I + 1 < P.ProfilePairs.Size; I += 2)
    Pairs.push_back({P.ProfilePairs[I], P.ProfilePairs[I + 1]});

  std::vector<size_t> Sizes = sizesUpTo(std::max<size_t>(8, MaxBytes / 4 * 4));
  void *Buffer = B.allocate(Sizes.back());
  B.fillZero(Buffer, Sizes.back());
  B.synchronize();
  // Seconds of Run as its slowest rank took, the median of Repeats runs
  // after one to warm up.
  auto Time = [&](auto Run) {
    std::vector<double> Runs;
    for (int I = 0; I <= Repeats; ++I) {
      C.barrier();
      auto Start = std::chrono::steady_clock::now();
      Run();
      double Seconds = std::chrono::duration<double>(
                           std::chrono::steady_clock::now() - Start)
                           .count();
      Seconds = C.maxOverRanks(Seconds);
      if (I > 0)
        Runs.push_back(Seconds);
    }
    return median(Runs);
  };

  std::string Out = "{\n  \"measured\": {\n    \"transfers\": [";
  for (size_t I = 0; I < Pairs.size(); ++I) {
    auto [From, To] = Pairs[I];
    std::optional<size_t> Before = B.memoryInUse();
    std::vector<double> Seconds;
    for (size_t Size : Sizes)
      // Half a round trip: there and back.
      Seconds.push_back(Time([&] {
                          const char *Label = "--profile-comm transfer";
                          if (Rank == From) {
                            C.send(To, Buffer, Size, Label);
                            C.recv(To, Buffer, Size, Label);
                          } else if (Rank == To) {
                            C.recv(From, Buffer, Size, Label);
                            C.send(From, Buffer, Size, Label);
                          }
                        }) /
                        2);
    if (Rank == From || Rank == To)
      PerPeer = std::max(PerPeer, Grown(Before));
    Out += std::string(I ? "," : "") +
           "\n      {\"from\": " + jsonString(P.DeviceNames[From]) +
           ", \"to\": " + jsonString(P.DeviceNames[To]) + ", " +
           table(Sizes, Seconds) + "}";
  }
  Out += std::string(Pairs.empty() ? "" : "\n    ") + "],\n";
  Out += "    \"all_reduces\": [";
  for (size_t G = 0; G < Groups.size(); ++G) {
    bool Member =
        std::find(Groups[G].begin(), Groups[G].end(), Rank) != Groups[G].end();
    std::optional<size_t> Before = B.memoryInUse();
    std::vector<double> Seconds;
    for (size_t Size : Sizes)
      Seconds.push_back(Time([&] {
        if (Member)
          C.allReduceSum(int(G), Buffer, int64_t(Size / 4), DType::Float32,
                         "--profile-comm all-reduce");
      }));
    if (Member)
      PerCommunicator = std::max(PerCommunicator, CreatedEach + Grown(Before));
    std::string Devices;
    for (size_t I = 0; I < Groups[G].size(); ++I)
      Devices += (I ? ", " : "") + jsonString(P.DeviceNames[Groups[G][I]]);
    Out += std::string(G ? "," : "") + "\n      {\"devices\": [" + Devices +
           "], " + table(Sizes, Seconds) + "}";
  }
  Out += std::string(Groups.empty() ? "" : "\n    ") + "]\n  }";
  // The largest of each figure over the ranks, in MiB, for every rank's
  // device type (clusters --show --measured puts them there).
  Runtime = C.maxOverRanks(Runtime);
  PerCommunicator = C.maxOverRanks(PerCommunicator);
  PerPeer = C.maxOverRanks(PerPeer);
  if (InUse) {
    constexpr double MiB = 1 << 20;
    std::string Devices;
    for (int R = 0; R < C.size(); ++R)
      Devices += (R ? ", " : "") + jsonString(P.DeviceNames[R]);
    Out += ",\n  \"device_memory\": {\"devices\": [" + Devices +
           "], \"runtime_MiB\": " + jsonNumber(Runtime / MiB);
    if (!Groups.empty())
      Out += ", \"communicator_MiB\": " + jsonNumber(PerCommunicator / MiB);
    if (!Pairs.empty())
      Out += ", \"peer_MiB\": " + jsonNumber(PerPeer / MiB);
    Out += "}";
  }
  Out += "\n}\n";
  B.deallocate(Buffer);
  return Out;
}

} // namespace onnx2soap::rt::program
