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
  virtual void deallocate(void *Pointer) = 0;
  virtual void copyFromHost(void *Device, const void *Host, size_t Bytes) = 0;
  virtual void copyToHost(void *Host, const void *Device, size_t Bytes) = 0;
  virtual void fillZero(void *Device, size_t Bytes) = 0;
  /// Copies between two buffers of this backend.
  virtual void copyOnDevice(void *To, const void *From, size_t Bytes) = 0;

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
