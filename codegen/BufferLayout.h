//===- codegen/BufferLayout.h - Where each buffer lies ----------*- C++ -*-===//
//
// A generated program holds each rank's buffers in one arena allocated at
// start-up. Buffers whose lifetimes (runtime_lib/program/BufferLifetimes.h)
// do not meet share memory: an activation's gradient takes the place of
// activations whose backward calls are done, a gathered input region that
// of one no longer needed. The layout is decided here, at generation time,
// so the program's device memory is a fixed number that `compile` reports
// and the runner checks against the device before it allocates.
//
//===----------------------------------------------------------------------===//
#ifndef ONNX2SOAP_CODEGEN_BUFFERLAYOUT_H
#define ONNX2SOAP_CODEGEN_BUFFERLAYOUT_H

#include "codegen/ProgramPlan.h"
#include <cstdint>
#include <vector>

namespace onnx2soap::codegen {

/// Sets every buffer's Offset and each rank's ArenaBytes in Plan.
///
/// Per rank, the buffers that persist between training steps come first, in
/// buffer order; the others are placed largest first (buffer order on a
/// tie), each in the smallest gap between the placed buffers whose
/// lifetimes meet its own (the lowest such gap on a tie), or above them.
/// Deterministic: the same plan gives the same layout.
void layoutBuffers(ProgramPlan &Plan);

/// Per rank: the most bytes its buffers hold at one time (each rounded up to
/// rt::program::BufferAlignment), a lower bound on any layout's arena.
std::vector<int64_t> liveBytesPeak(const ProgramPlan &Plan);

} // namespace onnx2soap::codegen

#endif
