//===- runtime_lib/cpu/CpuKernels.h - CPU kernel families ------*- C++ -*-===//
//
// The CPU backend's kernels, one pair of entry points per op family (the
// families of ir/OpKinds.def). CpuBackend.cpp dispatches on the op kind.
// oneDNN does convolution, pooling, batch norm, layer norm, matmul,
// eltwise, softmax and RNNs; plain loops the rest. Operands are dense
// row-major (requireContiguous checks); float ops take f32 (f64 where a
// loop kernel supports it), indices and labels i32 or i64.
//
//===----------------------------------------------------------------------===//
#ifndef ONNX2SOAP_RUNTIME_CPU_CPUKERNELS_H
#define ONNX2SOAP_RUNTIME_CPU_CPUKERNELS_H

#include "../Backend.h"
#include "../Error.h"
#include <cstdlib>
#include <dnnl.hpp>
#include <memory>

namespace onnx2soap::rt::cpu {

/// Reusable host buffers for kernels that need temporaries (oneDNN's
/// blocked layouts of convolution operands): a slot keeps its largest
/// allocation for the backend's lifetime, so a training step neither mallocs
/// nor page-faults tens of megabytes per convolution. Contents are
/// undefined; a slot is valid until the next get of the same slot.
class ScratchPool {
public:
  static constexpr int Slots = 8;
  void *get(int Slot, size_t Bytes) {
    Buffer &B = Buffers[Slot];
    if (B.Bytes < Bytes) {
      size_t Rounded = (Bytes + 63) / 64 * 64;
      B.Data.reset(std::aligned_alloc(64, Rounded));
      if (!B.Data)
        fail("cpu backend", "out of host memory allocating " +
                                std::to_string(Bytes) + " scratch bytes");
      B.Bytes = Rounded;
    }
    return B.Data.get();
  }

private:
  struct Free {
    void operator()(void *P) const { std::free(P); }
  };
  struct Buffer {
    std::unique_ptr<void, Free> Data;
    size_t Bytes = 0;
  };
  Buffer Buffers[Slots];
};

/// What every CPU kernel may use.
struct Context {
  dnnl::engine Engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream Stream{Engine};
  int Threads = 1;
  ScratchPool Scratch;
};

using Views = std::vector<TensorView>;

// Each family: forward fills Call.Outputs; backward ADDS into the present
// InputGrads.
void forwardElementwise(Context &C, const OpCall &Call);
void backwardElementwise(Context &C, const OpCall &Call,
                         const Views &OutputGrads, const Views &InputGrads);
void forwardContraction(Context &C, const OpCall &Call);
void backwardContraction(Context &C, const OpCall &Call,
                         const Views &OutputGrads, const Views &InputGrads);
void forwardPool(Context &C, const OpCall &Call);
void backwardPool(Context &C, const OpCall &Call, const Views &OutputGrads,
                  const Views &InputGrads);
/// Resize (Pool family; Resize.cpp).
void forwardResize(const OpCall &Call);
void backwardResize(const OpCall &Call, const Views &OutputGrads,
                    const Views &InputGrads);
void forwardNormalization(Context &C, const OpCall &Call);
void backwardNormalization(Context &C, const OpCall &Call,
                           const Views &OutputGrads, const Views &InputGrads);
/// BatchNorm (BatchNorm.cpp): the whole op, which forwardNormalization and
/// backwardNormalization dispatch to, and the phases of a BatchNorm whose
/// batch is split among partitions (Backend.h).
void forwardBatchNorm(Context &C, const OpCall &Call);
void backwardBatchNorm(Context &C, const OpCall &Call, const Views &OutputGrads,
                       const Views &InputGrads);
void batchNormPartialStats(Context &C, const OpCall &Call,
                           const TensorView &Stats);
void batchNormForwardWithStats(Context &C, const OpCall &Call,
                               const TensorView &Stats, int64_t Count);
void batchNormBackwardPartialSums(Context &C, const OpCall &Call,
                                  const TensorView &OutputGrad,
                                  const TensorView &Stats, int64_t Count,
                                  const TensorView &Sums);
void batchNormBackwardWithSums(Context &C, const OpCall &Call,
                               const Views &OutputGrads,
                               const Views &InputGrads, const TensorView &Stats,
                               const TensorView &Sums, int64_t Count);
void forwardMovement(Context &C, const OpCall &Call);
void backwardMovement(Context &C, const OpCall &Call, const Views &OutputGrads,
                      const Views &InputGrads);
void forwardRecurrent(Context &C, const OpCall &Call);
void backwardRecurrent(Context &C, const OpCall &Call, const Views &OutputGrads,
                       const Views &InputGrads);
void forwardLoss(Context &C, const OpCall &Call);
void backwardLoss(Context &C, const OpCall &Call, const Views &OutputGrads,
                  const Views &InputGrads);
void updateParameter(Context &C, const OptimizerConfig &Config, int64_t Step,
                     const TensorView &Parameter, const TensorView &Gradient,
                     const Views &State);
/// Backend::copyBox (BoxCopy.cpp).
void copyBox(const TensorView &To, const TensorView &From, bool Add);

/// Fails unless V is dense row-major.
void requireContiguous(const OpCall &Call, const TensorView &V,
                       const char *What);
/// Fails unless V has element type Type.
void requireType(const OpCall &Call, const TensorView &V, DType Type,
                 const char *What);
/// Throws RuntimeError naming the op: "op 'conv1' (Conv): <What>".
[[noreturn]] void failOp(const OpCall &Call, const std::string &What);
/// Runs a oneDNN call, turning dnnl::error into a RuntimeError naming the op.
template <typename F>
void dnnlCall(const OpCall &Call, const char *What, F &&Fn) {
  try {
    Fn();
  } catch (const dnnl::error &E) {
    failOp(Call, std::string(What) + " failed in oneDNN: " + E.what());
  }
}

} // namespace onnx2soap::rt::cpu

#endif
