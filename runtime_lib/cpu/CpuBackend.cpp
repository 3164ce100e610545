//===- runtime_lib/cpu/CpuBackend.cpp - The CPU backend -------------------===//
//
// Host memory (64-byte aligned, zero-filled) and the dispatch from op kind
// to kernel family. The switch has no default: a new op kind fails to
// compile here until it has CPU kernels.
//
//===----------------------------------------------------------------------===//
#include "../Families.h"
#include "CpuKernels.h"
#include "Parallel.h"
#include <cstdlib>
#include <cstring>
#include <new>
#include <omp.h>
#include <thread>

namespace onnx2soap::rt {

namespace cpu {

void failOp(const OpCall &Call, const std::string &What) {
  fail(std::string("op '") + Call.Name + "' (" + opKindName(Call.Kind) + ")",
       What);
}

void requireContiguous(const OpCall &Call, const TensorView &V,
                       const char *What) {
  if (V.present() && !V.isContiguous())
    failOp(Call, std::string(What) + " must be a dense row-major tensor");
}

void requireType(const OpCall &Call, const TensorView &V, DType Type,
                 const char *What) {
  if (V.present() && V.Type != Type)
    failOp(Call, std::string(What) + " has element type " + dtypeName(V.Type) +
                     ", the CPU kernel needs " + dtypeName(Type));
}

namespace {
class CpuBackend final : public Backend {
public:
  explicit CpuBackend(int Threads) {
    Ctx.Threads = Threads > 0
                      ? Threads
                      : std::max(1u, std::thread::hardware_concurrency());
    // oneDNN's primitives run on OpenMP: this is what bounds their threads.
    omp_set_num_threads(Ctx.Threads);
  }
  const char *name() const override { return "cpu"; }

  void *allocate(size_t Bytes) override {
    size_t Rounded = (std::max<size_t>(Bytes, 1) + 63) / 64 * 64;
    void *P = std::aligned_alloc(64, Rounded);
    if (!P)
      fail("cpu backend",
           "out of host memory allocating " + std::to_string(Bytes) + " bytes");
    std::memset(P, 0, Rounded);
    return P;
  }
  void deallocate(void *Pointer) override { std::free(Pointer); }
  // An empty tensor's pointers may be null, which memcpy must not get
  // even for no bytes.
  void copyFromHost(void *Device, const void *Host, size_t Bytes) override {
    if (Bytes)
      std::memcpy(Device, Host, Bytes);
  }
  void copyToHost(void *Host, const void *Device, size_t Bytes) override {
    if (Bytes)
      std::memcpy(Host, Device, Bytes);
  }
  void copyOnDevice(void *To, const void *From, size_t Bytes) override {
    if (Bytes)
      std::memmove(To, From, Bytes);
  }
  void copyBox(const TensorView &To, const TensorView &From,
               bool Add) override {
    cpu::copyBox(To, From, Add);
  }
  void fillZero(void *Device, size_t Bytes) override {
    // A training step zeroes every gradient buffer, activations included
    // (tens of megabytes for a CNN): worth all threads' memory bandwidth.
    char *Begin = static_cast<char *>(Device);
    parallelChunks(static_cast<int64_t>(Bytes / 64), 16,
                   [&](int64_t First, int64_t Last) {
                     std::memset(Begin + First * 64, 0, (Last - First) * 64);
                   });
    size_t Tail = Bytes / 64 * 64;
    std::memset(Begin + Tail, 0, Bytes - Tail);
  }

  void forward(const OpCall &Call) override {
    switch (opFamily(Call.Kind)) {
    case OpFamily::Elementwise:
      return cpu::forwardElementwise(Ctx, Call);
    case OpFamily::Contraction:
      return cpu::forwardContraction(Ctx, Call);
    case OpFamily::Pool:
      return cpu::forwardPool(Ctx, Call);
    case OpFamily::Normalization:
      return cpu::forwardNormalization(Ctx, Call);
    case OpFamily::Movement:
      return cpu::forwardMovement(Ctx, Call);
    case OpFamily::Recurrent:
      return cpu::forwardRecurrent(Ctx, Call);
    case OpFamily::Loss:
      return cpu::forwardLoss(Ctx, Call);
    }
  }

  void backward(const OpCall &Call, const Views &OutputGrads,
                const Views &InputGrads) override {
    switch (opFamily(Call.Kind)) {
    case OpFamily::Elementwise:
      return cpu::backwardElementwise(Ctx, Call, OutputGrads, InputGrads);
    case OpFamily::Contraction:
      return cpu::backwardContraction(Ctx, Call, OutputGrads, InputGrads);
    case OpFamily::Pool:
      return cpu::backwardPool(Ctx, Call, OutputGrads, InputGrads);
    case OpFamily::Normalization:
      return cpu::backwardNormalization(Ctx, Call, OutputGrads, InputGrads);
    case OpFamily::Movement:
      return cpu::backwardMovement(Ctx, Call, OutputGrads, InputGrads);
    case OpFamily::Recurrent:
      return cpu::backwardRecurrent(Ctx, Call, OutputGrads, InputGrads);
    case OpFamily::Loss:
      return cpu::backwardLoss(Ctx, Call, OutputGrads, InputGrads);
    }
  }

  void update(const OptimizerConfig &Config, int64_t Step,
              const TensorView &Parameter, const TensorView &Gradient,
              const Views &State) override {
    cpu::updateParameter(Ctx, Config, Step, Parameter, Gradient, State);
  }

  void batchNormPartialStats(const OpCall &Call,
                             const TensorView &Stats) override {
    cpu::batchNormPartialStats(Ctx, Call, Stats);
  }
  void batchNormForwardWithStats(const OpCall &Call, const TensorView &Stats,
                                 int64_t Count) override {
    cpu::batchNormForwardWithStats(Ctx, Call, Stats, Count);
  }
  void batchNormBackwardPartialSums(const OpCall &Call,
                                    const TensorView &OutputGrad,
                                    const TensorView &Stats, int64_t Count,
                                    const TensorView &Sums) override {
    cpu::batchNormBackwardPartialSums(Ctx, Call, OutputGrad, Stats, Count,
                                      Sums);
  }
  void batchNormBackwardWithSums(const OpCall &Call, const Views &OutputGrads,
                                 const Views &InputGrads,
                                 const TensorView &Stats,
                                 const TensorView &Sums,
                                 int64_t Count) override {
    cpu::batchNormBackwardWithSums(Ctx, Call, OutputGrads, InputGrads, Stats,
                                   Sums, Count);
  }

  void synchronize() override { Ctx.Stream.wait(); }

private:
  Context Ctx;
};
} // namespace
} // namespace cpu

std::unique_ptr<Backend> createCpuBackend(int Threads) {
  return std::make_unique<cpu::CpuBackend>(Threads);
}

} // namespace onnx2soap::rt
