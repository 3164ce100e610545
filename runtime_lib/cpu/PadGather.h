//===- runtime_lib/cpu/PadGather.h - Pad and Gather kernels ----*- C++ -*-===//
//
// The DataMovement ops whose index map is not one strided walk: Pad (a
// per-dim index table: constant fill, reflect, edge, wrap, crops) and Gather
// (indices from a tensor). Movement.cpp dispatches the family.
//
//===----------------------------------------------------------------------===//
#ifndef ONNX2SOAP_RUNTIME_CPU_PADGATHER_H
#define ONNX2SOAP_RUNTIME_CPU_PADGATHER_H

#include "CpuKernels.h"

namespace onnx2soap::rt::cpu {

/// Pad: any element type forward, f32 / f64 backward.
void forwardPad(const OpCall &Call);
void backwardPad(const OpCall &Call, const Views &OutputGrads,
                 const Views &InputGrads);
/// Gather: data of any element type, i32 / i64 indices (negative ones count
/// from the end; out of range fails naming the index); f32 / f64 backward
/// scatter-adds into the data gradient.
void forwardGather(const OpCall &Call);
void backwardGather(const OpCall &Call, const Views &OutputGrads,
                    const Views &InputGrads);
/// GatherElements: output element e is the data at e's coordinates but at
/// its i32 / i64 index along the axis (negative ones count from the end;
/// out of range fails naming it); f32 / f64 backward scatter-adds.
void forwardGatherElements(const OpCall &Call);
void backwardGatherElements(const OpCall &Call, const Views &OutputGrads,
                            const Views &InputGrads);

} // namespace onnx2soap::rt::cpu

#endif
