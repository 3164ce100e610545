//===- tests/runtime_program/mpi/CommMpiTest.cpp - MpiComm under mpirun ---===//
//
// Runs on every rank of an mpirun job (ctest starts it with 2, 3 and 4
// ranks; tests/runtime_program/mpi/MpiTests.cmake). Without arguments it
// checks the MPI Comm: point-to-point round trips between every pair of
// ranks (odd sizes sent with startSend, then finishStarted, refusing any
// other call in between), allReduceSum over every group of ranks (contiguous or
// not) against a sequential sum and against the ring's own addition order bit
// for bit, the same bits on every member, bytesSent against
// Comm::ringSendBytes, and the reductions over ranks. Each rank prints what
// failed and returns nonzero. The modes `timeout-send` and `timeout-recv` leave
// rank 1 asleep so that rank 0's call times out; `large` sends one message past
// INT_MAX bytes.
//
//===----------------------------------------------------------------------===//
#include "runtime_lib/Error.h"
#include "runtime_lib/program/Comm.h"

#include <chrono>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <thread>
#include <vector>

using namespace onnx2soap::rt;
using namespace onnx2soap::rt::program;

namespace {

int Failures = 0;
int MyRank = -1;

#define CHECK(Condition, ...)                                                  \
  do {                                                                         \
    if (!(Condition)) {                                                        \
      ++Failures;                                                              \
      std::fprintf(stderr, "rank %d: FAILED %s (line %d): ", MyRank,           \
                   #Condition, __LINE__);                                      \
      std::fprintf(stderr, __VA_ARGS__);                                       \
      std::fprintf(stderr, "\n");                                              \
    }                                                                          \
  } while (false)

uint64_t fnv1a(const void *Data, size_t Bytes) {
  uint64_t Hash = 1469598103934665603ull;
  const unsigned char *P = static_cast<const unsigned char *>(Data);
  for (size_t I = 0; I < Bytes; ++I)
    Hash = (Hash ^ P[I]) * 1099511628211ull;
  return Hash;
}

unsigned char patternByte(int From, int To, size_t Index) {
  return static_cast<unsigned char>(From * 37 + To * 11 + Index * 131 +
                                    (Index >> 9));
}

template <typename Fn> bool throwsNaming(Fn &&Call, const char *Text) {
  try {
    Call();
  } catch (const RuntimeError &Error) {
    if (std::strstr(Error.what(), Text))
      return true;
    std::fprintf(stderr, "rank %d: error '%s' does not name '%s'\n", MyRank,
                 Error.what(), Text);
    return false;
  }
  return false;
}

/// Every pair exchanges messages of several sizes both ways, in one global
/// order that every rank walks (ranks not in the pair skip the step).
void checkPointToPoint(Comm &C, uint64_t &ExpectedSent) {
  const size_t Sizes[] = {0, 1, 7, 1001, 3 * 1024 * 1024 + 3};
  std::vector<unsigned char> Buffer;
  for (int A = 0; A < C.size(); ++A)
    for (int B = 0; B < C.size(); ++B) {
      if (A == B || (C.rank() != A && C.rank() != B))
        continue;
      for (size_t Bytes : Sizes) {
        Buffer.assign(Bytes, 0);
        if (C.rank() == A) {
          for (size_t I = 0; I < Bytes; ++I)
            Buffer[I] = patternByte(A, B, I);
          if (Bytes % 2) {
            // Started, then finished; nothing else may be said between.
            C.startSend(B, Buffer.data(), Bytes, "p2p out");
            CHECK(throwsNaming([&] { C.barrier(); }, "still running"),
                  "a call while a send runs");
            C.finishStarted();
          } else {
            C.send(B, Buffer.data(), Bytes, "p2p out");
          }
          ExpectedSent += Bytes;
          std::vector<unsigned char> Back(Bytes, 0);
          C.recv(B, Back.data(), Bytes, "p2p back");
          size_t Bad = 0;
          for (size_t I = 0; I < Bytes; ++I)
            Bad += Back[I] != static_cast<unsigned char>(Buffer[I] ^ 0x5a);
          CHECK(Bad == 0, "%zu of %zu bytes wrong coming back from rank %d",
                Bad, Bytes, B);
        } else {
          C.recv(A, Buffer.data(), Bytes, "p2p out");
          size_t Bad = 0;
          for (size_t I = 0; I < Bytes; ++I)
            Bad += Buffer[I] != patternByte(A, B, I);
          CHECK(Bad == 0, "%zu of %zu bytes wrong from rank %d", Bad, Bytes, A);
          for (unsigned char &Byte : Buffer)
            Byte ^= 0x5a;
          C.send(A, Buffer.data(), Bytes, "p2p back");
          ExpectedSent += Bytes;
        }
      }
    }
}

/// Input of Member for element I. Exact inputs are small integers, whose
/// sums are exact in any order; the others make the addition order matter.
template <typename T>
T input(int Member, int64_t I, int64_t Count, bool Exact) {
  if (Exact)
    return T(int((Member * 7 + I * 13 + Count) % 201) - 100);
  return T(std::sin(Member * 7919.0 + I * 0.37 + Count) * 1000.0 /
           (1 + Member));
}

/// What the ring computes for element I of chunk Chunk: the chunk's owner's
/// value, then each following member's value added in ring order.
template <typename T>
T ringOrderSum(const std::vector<int> &Members, int Chunk, int64_t I,
               int64_t Count, bool Exact) {
  int N = int(Members.size());
  T Sum = input<T>(Members[Chunk], I, Count, Exact);
  for (int K = 1; K < N; ++K)
    Sum = input<T>(Members[(Chunk + K) % N], I, Count, Exact) + Sum;
  return Sum;
}

template <typename T>
void checkAllReduce(Comm &C, int GroupIndex, const std::vector<int> &Members,
                    int64_t Count, DType Type, bool Exact,
                    uint64_t &ExpectedSent) {
  int N = int(Members.size());
  int Position = -1;
  for (int P = 0; P < N; ++P)
    if (Members[P] == C.rank())
      Position = P;
  const double NotMember = -1e300;
  double Hash = NotMember;
  std::string What = "group " + std::to_string(GroupIndex) + " count " +
                     std::to_string(Count) + " " + dtypeName(Type) +
                     (Exact ? " exact" : " inexact");
  if (Position >= 0) {
    std::vector<T> Data(Count);
    for (int64_t I = 0; I < Count; ++I)
      Data[I] = input<T>(C.rank(), I, Count, Exact);
    C.allReduceSum(GroupIndex, Data.data(), Count, Type, What.c_str());
    ExpectedSent += Comm::ringSendBytes(Count, sizeof(T), N, Position);
    int64_t WrongBits = 0, WrongValue = 0;
    for (int Chunk = 0; Chunk < N; ++Chunk)
      for (int64_t I = Count * Chunk / N; I < Count * (Chunk + 1) / N; ++I) {
        T Ring = ringOrderSum<T>(Members, Chunk, I, Count, Exact);
        WrongBits += std::memcmp(&Ring, &Data[I], sizeof(T)) != 0;
        double Sequential = 0;
        for (int Member : Members)
          Sequential += input<T>(Member, I, Count, Exact);
        // |inputs| <= 1000: n roundings of sums below n * 1000.
        double Tolerance =
            Exact ? 0 : N * N * 1000.0 * std::numeric_limits<T>::epsilon();
        WrongValue += !(std::fabs(Data[I] - Sequential) <= Tolerance);
      }
    CHECK(WrongBits == 0, "%s: %lld elements differ from the ring order sum",
          What.c_str(), (long long)WrongBits);
    CHECK(WrongValue == 0, "%s: %lld elements differ from the sequential sum",
          What.c_str(), (long long)WrongValue);
    // 48 bits of the hash fit a double exactly.
    Hash = double(fnv1a(Data.data(), Data.size() * sizeof(T)) >> 16);
  }
  // Same bits on every member: the largest and the smallest hash among the
  // members agree (non-members offer a value below every hash).
  double Largest = C.maxOverRanks(Hash);
  double Smallest = -C.maxOverRanks(Position >= 0 ? -Hash : NotMember);
  CHECK(Largest == Smallest, "%s: members hold different results",
        What.c_str());
}

int runChecks(Comm &C) {
  uint64_t ExpectedSent = 0;
  checkPointToPoint(C, ExpectedSent);

  // Every group of two or more ranks: contiguous, strided ({0,2}), wrapped
  // ({0,3}), and a one-rank group, whose all-reduce changes nothing.
  std::vector<std::vector<int>> Groups;
  for (unsigned Mask = 1; Mask < (1u << C.size()); ++Mask) {
    std::vector<int> Members;
    for (int R = 0; R < C.size(); ++R)
      if (Mask & (1u << R))
        Members.push_back(R);
    if (Members.size() >= 2 || Members == std::vector<int>{0})
      Groups.push_back(Members);
  }
  C.setGroups(Groups);
  for (size_t G = 0; G < Groups.size(); ++G) {
    int64_t N = int64_t(Groups[G].size());
    for (int64_t Count : {int64_t(0), int64_t(1), N - 1, N + 1, 2 * N + 1,
                          int64_t(1000), int64_t(100003)})
      for (bool Exact : {true, false}) {
        checkAllReduce<float>(C, int(G), Groups[G], Count, DType::Float32,
                              Exact, ExpectedSent);
        checkAllReduce<double>(C, int(G), Groups[G], Count, DType::Float64,
                               Exact, ExpectedSent);
      }
  }

  CHECK(C.bytesSent() == ExpectedSent, "bytesSent %llu, expected %llu",
        (unsigned long long)C.bytesSent(), (unsigned long long)ExpectedSent);

  int N = C.size();
  CHECK(C.sumOverRanks(C.rank() + 1) == N * (N + 1) / 2.0, "sumOverRanks");
  CHECK(C.maxOverRanks(C.rank()) == N - 1, "maxOverRanks");

  // Mistakes in the call are errors naming the label (no communication).
  int32_t Ints[4] = {};
  CHECK(throwsNaming(
            [&] { C.allReduceSum(0, Ints, 4, DType::Int32, "ints label"); },
            "ints label"),
        "int32 all-reduce");
  CHECK(throwsNaming(
            [&] {
              C.allReduceSum(int(Groups.size()), Ints, 4, DType::Float32,
                             "range label");
            },
            "range label"),
        "group out of range");
  size_t OnlyRankZero = 0;
  for (size_t G = 0; G < Groups.size(); ++G)
    if (Groups[G] == std::vector<int>{0})
      OnlyRankZero = G;
  if (C.rank() != 0)
    CHECK(throwsNaming(
              [&] {
                C.allReduceSum(int(OnlyRankZero), Ints, 4, DType::Float32,
                               "member label");
              },
              "not in group"),
          "non-member all-reduce");
  CHECK(throwsNaming([&] { C.send(C.rank(), Ints, 4, "self label"); },
                     "self label"),
        "send to self");

  C.barrier();
  double AllFailures = C.sumOverRanks(Failures);
  if (C.rank() == 0)
    std::printf("comm_mpi_test: %d ranks, %s\n", N,
                AllFailures == 0 ? "all checks passed" : "FAILED");
  return Failures == 0 ? 0 : 1;
}

/// Rank 0 sends (or receives) and rank 1 sleeps past the 2 s timeout:
/// rank 0 must print the timeout line and end the job.
int runTimeout(Comm &C, bool Send) {
  if (C.rank() == 0) {
    // Past every eager limit, so the send needs the receiver.
    std::vector<char> Buffer(64 << 20, 1);
    if (Send)
      C.send(1, Buffer.data(), Buffer.size(), "timeout test");
    else
      C.recv(1, Buffer.data(), Buffer.size(), "timeout test");
    std::fprintf(stderr, "rank 0: FAILED the call returned\n");
    return 1;
  }
  std::this_thread::sleep_for(std::chrono::seconds(30));
  return 1;
}

/// One message of INT_MAX + 4099 bytes from rank 0 to rank 1.
int runLarge(Comm &C) {
  if (C.rank() > 1)
    return 0;
  const size_t Bytes = size_t(INT_MAX) + 4099;
  std::vector<unsigned char> Buffer(Bytes);
  if (C.rank() == 0) {
    for (size_t I = 0; I < Bytes; ++I)
      Buffer[I] = patternByte(0, 1, I);
    C.send(1, Buffer.data(), Bytes, "large");
    CHECK(C.bytesSent() == Bytes, "bytesSent %llu",
          (unsigned long long)C.bytesSent());
  } else {
    C.recv(0, Buffer.data(), Bytes, "large");
    size_t Bad = 0;
    for (size_t I = 0; I < Bytes; ++I)
      Bad += Buffer[I] != patternByte(0, 1, I);
    CHECK(Bad == 0, "%zu of %zu bytes wrong", Bad, Bytes);
  }
  if (Failures == 0)
    std::printf("rank %d: large message of %zu bytes passed\n", C.rank(),
                Bytes);
  return Failures == 0 ? 0 : 1;
}

} // namespace

int main(int Argc, char **Argv) {
  std::string Mode = Argc > 1 ? Argv[1] : "";
  CommOptions Options;
  Options.TimeoutSeconds = Mode.rfind("timeout", 0) == 0 ? 2 : 120;
  try {
    std::unique_ptr<Comm> C = createMpiComm(&Argc, &Argv, Options);
    MyRank = C->rank();
    if (Mode.empty())
      return runChecks(*C);
    if (Mode == "timeout-send" || Mode == "timeout-recv")
      return runTimeout(*C, Mode == "timeout-send");
    if (Mode == "large")
      return runLarge(*C);
    std::fprintf(stderr, "unknown mode '%s'\n", Mode.c_str());
    return 2;
  } catch (const RuntimeError &Error) {
    std::fprintf(stderr, "rank %d: FAILED with error: %s\n", MyRank,
                 Error.what());
    return 1;
  }
}
