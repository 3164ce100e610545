//===- runtime_lib/Backend.h - The kernel interface ------------*- C++ -*-===//
//
// One interface, two implementations: the CPU backend (oneDNN plus loops,
// runtime_lib/cpu/) and the CUDA backend (cuDNN, cuBLAS plus own kernels,
// runtime_lib/cuda/). A generated program and the reference executor drive
// either the same way, so the CPU runs test the CUDA program's schedule and
// sharding.
//
// Kernels compute exactly the IR op kind's semantics (docs/ir.md) on the
// views they are given; backward kernels ADD into the input gradients they
// are given (absent views: gradient not needed), which is how gradients of
// tensors read by several ops accumulate.
//
//===----------------------------------------------------------------------===//
#ifndef ONNX2SOAP_RUNTIME_BACKEND_H
#define ONNX2SOAP_RUNTIME_BACKEND_H

#include "OpAttrs.h"
#include "Types.h"
#include <memory>
#include <optional>
#include <vector>

namespace onnx2soap::rt {

/// One op invocation: kind, attributes and operand views.
struct OpCall {
  OpKind Kind;
  const OpAttrs &Attrs;
  /// For error messages: the op's name in the model.
  const char *Name;
  std::vector<TensorView> Inputs;
  std::vector<TensorView> Outputs;
  /// Training step (from 1), for stochastic ops: Dropout's mask is a
  /// function of (seed attribute, Step, element index) on every backend.
  int64_t Step = 0;
  /// Where output 0 lies in the whole (unpartitioned) tensor when the call
  /// computes one partition of an op: the offset of its first element and
  /// the whole tensor's dims, each of output 0's rank. Empty: the call
  /// covers the whole tensor. Dropout draws element I's mask from its
  /// row-major index over GlobalDims (I's coordinates plus GlobalOffset), so
  /// the union of the partitions' masks is the whole tensor's.
  std::vector<int64_t> GlobalOffset = {}, GlobalDims = {};
};

enum class OptimizerKind : uint8_t { Sgd, Adam, AdamW };

/// Hyper-parameters of an update (PyTorch 1.13's rules; see docs/training.md).
struct OptimizerConfig {
  OptimizerKind Kind = OptimizerKind::Sgd;
  double LearningRate = 0.01;
  double Momentum = 0;
  double Dampening = 0;
  bool Nesterov = false;
  double WeightDecay = 0;
  double Beta1 = 0.9;
  double Beta2 = 0.999;
  double Epsilon = 1e-8;
};

class Backend {
public:
  virtual ~Backend();
  virtual const char *name() const = 0;

  /// Device memory, zero-filled; freed by deallocate.
  virtual void *allocate(size_t Bytes) = 0;
  /// Bytes of device memory free for allocate(), where the device says
  /// (a GPU); nullopt where it does not (host memory).
  virtual std::optional<size_t> freeMemory() const { return std::nullopt; }
  /// Bytes of device memory in use by anyone (the device's total less what
  /// is free), and the part of it this backend holds for its libraries
  /// (cuBLAS's workspace), where the device says; nullopt on host memory.
  virtual std::optional<size_t> memoryInUse() const { return std::nullopt; }
  virtual size_t libraryBytes() const { return 0; }
  virtual void deallocate(void *Pointer) = 0;
  virtual void copyFromHost(void *Device, const void *Host, size_t Bytes) = 0;
  virtual void copyToHost(void *Host, const void *Device, size_t Bytes) = 0;
  virtual void fillZero(void *Device, size_t Bytes) = 0;
  /// Copies between two buffers of this backend.
  virtual void copyOnDevice(void *To, const void *From, size_t Bytes) = 0;
  /// Moves a box between two buffers of this backend: To = From (any
  /// element type, copied by bytes) or, when Add, To += From (f32 and f64
  /// only). The views have the same type, rank and dims, and any
  /// non-negative strides (a destination dim of extent above one must not
  /// have stride 0); they must not overlap. An empty box is a no-op. Fails
  /// with RuntimeError("box copy: ...") otherwise.
  virtual void copyBox(const TensorView &To, const TensorView &From,
                       bool Add) = 0;

  /// Computes Call.Outputs from Call.Inputs.
  virtual void forward(const OpCall &Call) = 0;
  /// Adds d(loss)/d(input I) to InputGrads[I] for every present view, given
  /// OutputGrads (absent for outputs nothing depends on) and the forward
  /// operands in Call.
  virtual void backward(const OpCall &Call,
                        const std::vector<TensorView> &OutputGrads,
                        const std::vector<TensorView> &InputGrads) = 0;
  /// One optimizer step on a parameter: State holds the optimizer's slots
  /// (momentum buffer; Adam's m and v), Step counts from 1.
  virtual void update(const OptimizerConfig &Config, int64_t Step,
                      const TensorView &Parameter, const TensorView &Gradient,
                      const std::vector<TensorView> &State) = 0;
  /// Waits for all queued work (a no-op on the CPU).
  virtual void synchronize() = 0;

  // BatchNorm in training mode whose samples or spatial positions are split
  // among partitions: statistics must be over the whole batch, so the
  // program runs it in phases and sums the [2, C] Stats (and Sums) views
  // over the partitions between phases (the kernels never communicate).
  //   forward:  batchNormPartialStats, all-reduce Stats,
  //             batchNormForwardWithStats;
  //   backward: batchNormBackwardPartialSums, all-reduce Sums,
  //             batchNormBackwardWithSums (Stats as the forward left them).
  // Stats and Sums are dense f32 (or f64) [2, C]; sums accumulate in double.
  // Count is the number of elements per channel in the whole batch (N * H *
  // W summed over the partitions). The phased calls compute what forward()
  // and backward() of the unsplit op compute, up to rounding: the variance
  // is S1 / Count - mean^2 rather than a second pass over the data. In
  // inference mode no statistics are needed: the WithStats / WithSums calls
  // are forward() / backward() (Stats, Sums and Count unused, dscale and
  // dbias again each partition's share) and the partial calls' results are
  // not read.

  /// Phase 1: per-channel sums of the local X (Call.Inputs[0]) into Stats:
  /// row 0 the sum of x, row 1 the sum of x * x.
  virtual void batchNormPartialStats(const OpCall &Call,
                                     const TensorView &Stats) = 0;
  /// Phase 2, Stats summed over the partitions: normalizes with mean =
  /// S0 / Count and the biased variance S1 / Count - mean^2, and writes every
  /// output as forward() does: Y for the local part, and the new running
  /// mean and variance (ONNX semantics, as forward(): the biased batch
  /// variance is blended in), the same on every partition.
  virtual void batchNormForwardWithStats(const OpCall &Call,
                                         const TensorView &Stats,
                                         int64_t Count) = 0;
  /// Backward phase 1: per-channel sums of the local dY (OutputGrad, absent:
  /// zeros) into Sums: row 0 the sum of dy, row 1 the sum of dy * xhat, xhat
  /// normalized with the whole batch's statistics in Stats.
  virtual void batchNormBackwardPartialSums(const OpCall &Call,
                                            const TensorView &OutputGrad,
                                            const TensorView &Stats,
                                            int64_t Count,
                                            const TensorView &Sums) = 0;
  /// Backward phase 2, Sums summed over the partitions: adds the local dX
  /// (with the whole batch's statistics and sums, as backward() of the
  /// unsplit op) and each partition's LOCAL share of dscale and dbias (the
  /// sums over its own elements), so the program's usual all-reduce (sum)
  /// of parameter gradients among the partitions gives backward()'s dscale
  /// and dbias. OutputGrads[1..2], the gradients of the running statistics,
  /// are the whole [C] gradients, the same on every partition. In training
  /// the inputs mean and var are state and take no gradient: their
  /// InputGrads must be absent.
  virtual void batchNormBackwardWithSums(
      const OpCall &Call, const std::vector<TensorView> &OutputGrads,
      const std::vector<TensorView> &InputGrads, const TensorView &Stats,
      const TensorView &Sums, int64_t Count) = 0;
};

/// Number of state tensors (each the parameter's shape) an optimizer keeps.
int optimizerStateCount(const OptimizerConfig &Config);

/// The CPU backend; Threads = 0 uses every core.
std::unique_ptr<Backend> createCpuBackend(int Threads = 0);

/// Owns device memory of one backend.
class DeviceBuffer {
public:
  DeviceBuffer() = default;
  DeviceBuffer(Backend &B, size_t Bytes)
      : Owner(&B), Pointer(B.allocate(Bytes)), Bytes(Bytes) {}
  DeviceBuffer(DeviceBuffer &&Other) noexcept { *this = std::move(Other); }
  DeviceBuffer &operator=(DeviceBuffer &&Other) noexcept {
    release();
    Owner = Other.Owner;
    Pointer = Other.Pointer;
    Bytes = Other.Bytes;
    Other.Pointer = nullptr;
    return *this;
  }
  DeviceBuffer(const DeviceBuffer &) = delete;
  DeviceBuffer &operator=(const DeviceBuffer &) = delete;
  ~DeviceBuffer() { release(); }

  void *data() const { return Pointer; }
  size_t size() const { return Bytes; }

private:
  void release() {
    if (Pointer)
      Owner->deallocate(Pointer);
    Pointer = nullptr;
  }
  Backend *Owner = nullptr;
  void *Pointer = nullptr;
  size_t Bytes = 0;
};

} // namespace onnx2soap::rt

#endif
