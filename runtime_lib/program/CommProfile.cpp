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
  // What the compiler chose (Plan::ProfilePairs, ProfileGroups): a pair
  // per kind of route, a group per ring shape.
  std::vector<std::vector<int>> Groups;
  for (const GroupInfo &Group : P.ProfileGroups)
    Groups.emplace_back(P.ProfileGroupRanks.Data + Group.First,
                        P.ProfileGroupRanks.Data + Group.First + Group.Size);
  C.setGroups(Groups);
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
    std::vector<double> Seconds;
    for (size_t Size : Sizes)
      Seconds.push_back(Time([&] {
        if (Member)
          C.allReduceSum(int(G), Buffer, int64_t(Size / 4), DType::Float32,
                         "--profile-comm all-reduce");
      }));
    std::string Devices;
    for (size_t I = 0; I < Groups[G].size(); ++I)
      Devices += (I ? ", " : "") + jsonString(P.DeviceNames[Groups[G][I]]);
    Out += std::string(G ? "," : "") + "\n      {\"devices\": [" + Devices +
           "], " + table(Sizes, Seconds) + "}";
  }
  Out += std::string(Groups.empty() ? "" : "\n    ") + "]\n  }\n}\n";
  B.deallocate(Buffer);
  return Out;
}

} // namespace onnx2soap::rt::program
