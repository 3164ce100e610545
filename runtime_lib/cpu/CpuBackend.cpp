//===- runtime_lib/cpu/CpuBackend.cpp - The CPU backend -------------------===//
//
// Host memory (64-byte aligned, zero-filled) and the dispatch from op kind
// to kernel family. The switch has no default: a new op kind fails to
// compile here until it has CPU kernels.
//
//===----------------------------------------------------------------------===//
#include "CpuKernels.h"
#include <cstdlib>
#include <cstring>
#include <new>
#include <thread>

namespace onnx2soap::rt {

Backend::~Backend() = default;

int optimizerStateCount(const OptimizerConfig &Config) {
  switch (Config.Kind) {
  case OptimizerKind::Sgd:
    return Config.Momentum != 0 ? 1 : 0;
  case OptimizerKind::Adam:
  case OptimizerKind::AdamW:
    return 2;
  }
  return 0;
}

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
enum class Family {
  Elementwise,
  Contraction,
  Pool,
  Normalization,
  Movement,
  Recurrent,
  Loss
};

Family familyOf(OpKind Kind) {
  switch (Kind) {
  case OpKind::Relu:
  case OpKind::LeakyRelu:
  case OpKind::Sigmoid:
  case OpKind::Tanh:
  case OpKind::Erf:
  case OpKind::Gelu:
  case OpKind::Sqrt:
  case OpKind::Exp:
  case OpKind::Log:
  case OpKind::Neg:
  case OpKind::Abs:
  case OpKind::Reciprocal:
  case OpKind::Not:
  case OpKind::Cast:
  case OpKind::Dropout:
  case OpKind::Add:
  case OpKind::Sub:
  case OpKind::Mul:
  case OpKind::Div:
  case OpKind::Pow:
  case OpKind::Max:
  case OpKind::Min:
  case OpKind::Equal:
  case OpKind::Less:
  case OpKind::Greater:
  case OpKind::Where:
    return Family::Elementwise;
  case OpKind::Conv:
  case OpKind::ConvTranspose:
  case OpKind::Gemm:
  case OpKind::MatMul:
    return Family::Contraction;
  case OpKind::MaxPool:
  case OpKind::AveragePool:
  case OpKind::GlobalAveragePool:
  case OpKind::GlobalMaxPool:
    return Family::Pool;
  case OpKind::BatchNorm:
  case OpKind::LayerNorm:
  case OpKind::Softmax:
  case OpKind::LogSoftmax:
  case OpKind::ReduceMean:
  case OpKind::ReduceSum:
    return Family::Normalization;
  case OpKind::Reshape:
  case OpKind::Transpose:
  case OpKind::Concat:
  case OpKind::Split:
  case OpKind::Slice:
  case OpKind::Pad:
  case OpKind::Expand:
  case OpKind::Gather:
    return Family::Movement;
  case OpKind::LSTM:
  case OpKind::GRU:
  case OpKind::LSTMCell:
  case OpKind::GRUCell:
    return Family::Recurrent;
  case OpKind::SoftmaxCrossEntropyLoss:
    return Family::Loss;
  }
  return Family::Elementwise;
}

class CpuBackend final : public Backend {
public:
  explicit CpuBackend(int Threads) {
    Ctx.Threads = Threads > 0
                      ? Threads
                      : std::max(1u, std::thread::hardware_concurrency());
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
  void copyFromHost(void *Device, const void *Host, size_t Bytes) override {
    std::memcpy(Device, Host, Bytes);
  }
  void copyToHost(void *Host, const void *Device, size_t Bytes) override {
    std::memcpy(Host, Device, Bytes);
  }
  void fillZero(void *Device, size_t Bytes) override {
    std::memset(Device, 0, Bytes);
  }

  void forward(const OpCall &Call) override {
    switch (familyOf(Call.Kind)) {
    case Family::Elementwise:
      return cpu::forwardElementwise(Ctx, Call);
    case Family::Contraction:
      return cpu::forwardContraction(Ctx, Call);
    case Family::Pool:
      return cpu::forwardPool(Ctx, Call);
    case Family::Normalization:
      return cpu::forwardNormalization(Ctx, Call);
    case Family::Movement:
      return cpu::forwardMovement(Ctx, Call);
    case Family::Recurrent:
      return cpu::forwardRecurrent(Ctx, Call);
    case Family::Loss:
      return cpu::forwardLoss(Ctx, Call);
    }
  }

  void backward(const OpCall &Call, const Views &OutputGrads,
                const Views &InputGrads) override {
    switch (familyOf(Call.Kind)) {
    case Family::Elementwise:
      return cpu::backwardElementwise(Ctx, Call, OutputGrads, InputGrads);
    case Family::Contraction:
      return cpu::backwardContraction(Ctx, Call, OutputGrads, InputGrads);
    case Family::Pool:
      return cpu::backwardPool(Ctx, Call, OutputGrads, InputGrads);
    case Family::Normalization:
      return cpu::backwardNormalization(Ctx, Call, OutputGrads, InputGrads);
    case Family::Movement:
      return cpu::backwardMovement(Ctx, Call, OutputGrads, InputGrads);
    case Family::Recurrent:
      return cpu::backwardRecurrent(Ctx, Call, OutputGrads, InputGrads);
    case Family::Loss:
      return cpu::backwardLoss(Ctx, Call, OutputGrads, InputGrads);
    }
  }

  void update(const OptimizerConfig &Config, int64_t Step,
              const TensorView &Parameter, const TensorView &Gradient,
              const Views &State) override {
    cpu::updateParameter(Ctx, Config, Step, Parameter, Gradient, State);
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
