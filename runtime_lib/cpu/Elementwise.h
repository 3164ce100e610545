//===- runtime_lib/cpu/Elementwise.h - Elementwise internals -*- C++ -*-===//
//
// What the elementwise family's files share: the entry points of Cast
// (Cast.cpp) and of the broadcasting ops (Broadcast.cpp), which
// Elementwise.cpp dispatches to. Dropout's mask contract, which every backend
// computes bit for bit the same way, is in runtime_lib/DropoutMask.h.
//
//===----------------------------------------------------------------------===//
#ifndef ONNX2SOAP_RUNTIME_CPU_ELEMENTWISE_H
#define ONNX2SOAP_RUNTIME_CPU_ELEMENTWISE_H

#include "../DropoutMask.h"
#include "CpuKernels.h"

namespace onnx2soap::rt::cpu {

void forwardCast(const OpCall &Call);
void backwardCast(const OpCall &Call, const Views &OutputGrads,
                  const Views &InputGrads);
/// Add, Sub, Mul, Div, Pow, Max, Min, Equal, Less, Greater, Where.
void forwardBroadcast(const OpCall &Call);
void backwardBroadcast(const OpCall &Call, const Views &OutputGrads,
                       const Views &InputGrads);

} // namespace onnx2soap::rt::cpu

#endif
