//===- runtime_lib/cuda/MovementKernels.cuh - Pad, Gather -----*- CUDA -*-===//
//
// The DataMovement ops whose index map is not one strided walk, split from
// Movement.cu (which dispatches the family), and the operand checks both
// files share; the CUDA twin of runtime_lib/cpu/PadGather.h.
//
//===----------------------------------------------------------------------===//
#ifndef ONNX2SOAP_RUNTIME_CUDA_MOVEMENTKERNELS_CUH
#define ONNX2SOAP_RUNTIME_CUDA_MOVEMENTKERNELS_CUH

#include "CudaKernels.h"
#include <cstdint>

namespace onnx2soap::rt::cuda {

/// Operand I of Vs, present and dense, else fails naming What.
const TensorView &movementOperand(const OpCall &Call, const Views &Vs, size_t I,
                                  const char *What);
/// Gradient view I when present (absent otherwise), checked dense, of
/// Like's type and element count.
TensorView movementGradient(const OpCall &Call, const Views &Vs, size_t I,
                            const TensorView &Like, const char *What);

/// Pad: any element type forward, f32 / f64 backward.
void forwardPad(Context &C, const OpCall &Call);
void backwardPad(Context &C, const OpCall &Call, const Views &OutputGrads,
                 const Views &InputGrads);
/// Gather: data of any element type, i32 / i64 indices (negative ones count
/// from the end; out of range fails naming the index, which costs a stream
/// synchronization); f32 / f64 backward scatter-adds with atomics.
void forwardGather(Context &C, const OpCall &Call);
void backwardGather(Context &C, const OpCall &Call, const Views &OutputGrads,
                    const Views &InputGrads);
/// GatherElements: the CPU kernel's map, its indices checked as Gather's;
/// f32 / f64 backward scatter-adds with atomics.
void forwardGatherElements(Context &C, const OpCall &Call);
void backwardGatherElements(Context &C, const OpCall &Call,
                            const Views &OutputGrads, const Views &InputGrads);

/// Runs Fn(U{}) with U an unsigned integer as wide as an element of Type.
template <typename F> void dispatchWidth(DType Type, F &&Fn) {
  switch (dtypeSize(Type)) {
  case 1:
    return Fn(uint8_t{});
  case 2:
    return Fn(uint16_t{});
  case 4:
    return Fn(uint32_t{});
  default:
    return Fn(uint64_t{});
  }
}

} // namespace onnx2soap::rt::cuda

#endif
