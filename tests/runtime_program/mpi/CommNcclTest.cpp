//===- tests/runtime_program/mpi/CommNcclTest.cpp - NcclComm under mpirun -===//
//
// The NCCL Comm's checks, for a machine with one GPU per rank:
// `mpirun -np N comm_nccl_test` with N <= the GPUs of the node. Point-to-
// point round trips between every pair, allReduceSum (and, for odd
// counts, startAllReduceSum then finishStarted) over every group
// against a sequential sum (small integers, exact in any order), the same
// bits on every member, bytesSent against Comm::ringSendBytes. Built with
// the CUDA backend so that onnx2soap_runtime_nccl is known to link, but not
// registered with ctest: the development machine has no GPU, and this
// program has never run there.
//
//===----------------------------------------------------------------------===//
#include "runtime_lib/Error.h"
#include "runtime_lib/program/nccl/NcclComm.h"

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
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

void cuda(cudaError_t Code, const char *Call) {
  if (Code != cudaSuccess) {
    std::fprintf(stderr, "rank %d: FAILED %s: %s\n", MyRank, Call,
                 cudaGetErrorString(Code));
    std::exit(1);
  }
}

/// Device memory holding a copy of Host, copied back by read().
template <typename T> struct DeviceBuffer {
  T *Data = nullptr;
  size_t Count = 0;
  explicit DeviceBuffer(const std::vector<T> &Host) : Count(Host.size()) {
    cuda(cudaMalloc(&Data, Count * sizeof(T) + 1), "cudaMalloc");
    cuda(cudaMemcpy(Data, Host.data(), Count * sizeof(T),
                    cudaMemcpyHostToDevice),
         "cudaMemcpy");
  }
  ~DeviceBuffer() { cudaFree(Data); }
  std::vector<T> read() const {
    std::vector<T> Host(Count);
    cuda(cudaMemcpy(Host.data(), Data, Count * sizeof(T),
                    cudaMemcpyDeviceToHost),
         "cudaMemcpy");
    return Host;
  }
};

template <typename T> T input(int Member, int64_t I) {
  return T(int((Member * 7 + I * 13) % 201) - 100);
}

template <typename T>
void checkAllReduce(Comm &C, int Group, const std::vector<int> &Members,
                    int64_t Count, DType Type, uint64_t &ExpectedSent) {
  int Position = -1;
  for (size_t P = 0; P < Members.size(); ++P)
    if (Members[P] == C.rank())
      Position = int(P);
  double Hash = -1e300;
  if (Position >= 0) {
    std::vector<T> Host(Count);
    for (int64_t I = 0; I < Count; ++I)
      Host[I] = input<T>(C.rank(), I);
    DeviceBuffer<T> Device(Host);
    if (Count % 2) {
      // Started, then finished after other device work (a generated
      // program's gradient all-reduce beside its backward pass).
      C.startAllReduceSum(Group, Device.Data, Count, Type,
                          "nccl test started all-reduce");
      DeviceBuffer<T> Beside(Host);
      C.finishStarted();
    } else {
      C.allReduceSum(Group, Device.Data, Count, Type, "nccl test all-reduce");
    }
    ExpectedSent +=
        Comm::ringSendBytes(Count, sizeof(T), int(Members.size()), Position);
    Host = Device.read();
    int64_t Wrong = 0;
    uint64_t Bits = 1469598103934665603ull;
    for (int64_t I = 0; I < Count; ++I) {
      T Sum = 0;
      for (int Member : Members)
        Sum += input<T>(Member, I);
      Wrong += Host[I] != Sum;
      unsigned char Bytes[sizeof(T)];
      std::memcpy(Bytes, &Host[I], sizeof(T));
      for (unsigned char Byte : Bytes)
        Bits = (Bits ^ Byte) * 1099511628211ull;
    }
    CHECK(Wrong == 0, "group %d count %lld: %lld wrong sums", Group,
          (long long)Count, (long long)Wrong);
    Hash = double(Bits >> 16);
  }
  double Largest = C.maxOverRanks(Hash);
  double Smallest = -C.maxOverRanks(Position >= 0 ? -Hash : -1e300);
  CHECK(Largest == Smallest, "group %d count %lld: members differ", Group,
        (long long)Count);
}

int runChecks(Comm &C) {
  uint64_t ExpectedSent = 0;
  for (int A = 0; A < C.size(); ++A)
    for (int B = 0; B < C.size(); ++B) {
      if (A == B || (C.rank() != A && C.rank() != B))
        continue;
      for (size_t Bytes :
           {size_t(0), size_t(1), size_t(4099), size_t(3 * 1024 * 1024 + 3)}) {
        std::vector<unsigned char> Host(Bytes);
        for (size_t I = 0; I < Bytes; ++I)
          Host[I] = static_cast<unsigned char>(A * 37 + B * 11 + I * 131);
        if (C.rank() == A) {
          DeviceBuffer<unsigned char> Out(Host);
          C.send(B, Out.Data, Bytes, "nccl test p2p");
          ExpectedSent += Bytes;
        } else {
          DeviceBuffer<unsigned char> In{std::vector<unsigned char>(Bytes)};
          C.recv(A, In.Data, Bytes, "nccl test p2p");
          CHECK(In.read() == Host, "%zu bytes from rank %d", Bytes, A);
        }
      }
    }

  std::vector<std::vector<int>> Groups;
  for (unsigned Mask = 1; Mask < (1u << C.size()); ++Mask) {
    std::vector<int> Members;
    for (int R = 0; R < C.size(); ++R)
      if (Mask & (1u << R))
        Members.push_back(R);
    if (Members.size() >= 2)
      Groups.push_back(Members);
  }
  C.setGroups(Groups);
  for (size_t G = 0; G < Groups.size(); ++G) {
    int64_t N = int64_t(Groups[G].size());
    for (int64_t Count : {int64_t(0), int64_t(1), N + 1, int64_t(100003)}) {
      checkAllReduce<float>(C, int(G), Groups[G], Count, DType::Float32,
                            ExpectedSent);
      checkAllReduce<double>(C, int(G), Groups[G], Count, DType::Float64,
                             ExpectedSent);
    }
  }
  CHECK(C.bytesSent() == ExpectedSent, "bytesSent %llu, expected %llu",
        (unsigned long long)C.bytesSent(), (unsigned long long)ExpectedSent);
  C.barrier();
  double AllFailures = C.sumOverRanks(Failures);
  if (C.rank() == 0)
    std::printf("comm_nccl_test: %d ranks, %s\n", C.size(),
                AllFailures == 0 ? "all checks passed" : "FAILED");
  return Failures == 0 ? 0 : 1;
}

} // namespace

int main(int Argc, char **Argv) {
  // One GPU per rank of this node, chosen before any CUDA or NCCL call.
  const char *LocalRank = std::getenv("OMPI_COMM_WORLD_LOCAL_RANK");
  int Devices = 0;
  cuda(cudaGetDeviceCount(&Devices), "cudaGetDeviceCount");
  cuda(cudaSetDevice(LocalRank ? std::atoi(LocalRank) % Devices : 0),
       "cudaSetDevice");
  cudaStream_t Stream;
  cuda(cudaStreamCreate(&Stream), "cudaStreamCreate");
  CommOptions Options;
  Options.TimeoutSeconds = 120;
  try {
    std::unique_ptr<Comm> C = createNcclComm(&Argc, &Argv, Options, Stream);
    MyRank = C->rank();
    return runChecks(*C);
  } catch (const RuntimeError &Error) {
    std::fprintf(stderr, "rank %d: FAILED with error: %s\n", MyRank,
                 Error.what());
    return 1;
  }
}
