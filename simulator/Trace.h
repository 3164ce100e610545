//===- simulator/Trace.h - Simulated timeline as trace ----------*- C++ -*-===//
//
// Writes a simulated iteration in the Chrome trace-event format
// (https://docs.google.com/document/d/1CvAClvFfyA5R-PhYUmn5OOQtYMH4h6I0nSsKchNAySU),
// which Perfetto (ui.perfetto.dev) and chrome://tracing open: one process per
// node, one track (thread) per device and per link, and a complete event
// ("ph": "X") for every task on every resource it occupies, named like
// "fwd conv1 [p3]", "xfer relu->fc" or "allreduce fc.weight", with times in
// microseconds and the bytes moved in its args. The output depends only on
// the timeline: same strategy, same bytes.
//
//===----------------------------------------------------------------------===//
#ifndef ONNX2SOAP_SIMULATOR_TRACE_H
#define ONNX2SOAP_SIMULATOR_TRACE_H

#include "simulator/TaskGraph.h"
#include "llvm/Support/raw_ostream.h"

namespace onnx2soap::simulator {

/// The trace of Graph's timeline (every live task's Start and End, as a
/// simulation left them), one event per line, ending with a newline.
void writeChromeTrace(const TaskGraph &Graph, llvm::raw_ostream &OS);

/// The event name of a task: "fwd conv1 [p3]", "bwd conv1 [p3]",
/// "xfer relu->fc", "grad fc->relu", "stats bn1", "allreduce fc.weight",
/// "update fc.weight".
std::string traceEventName(const TaskGraph &Graph, TaskId Id);

/// The devices of a collective (sorted ids) as short text: runs of three or
/// more evenly spaced devices as "node0/gpu0 to node3/gpu3" (consecutive)
/// or "node0/gpu0 to node7/gpu6 by 2", other devices by name, joined by
/// ", ". An event of each participant carries it, so the trace grows with
/// the participants, not with their square.
std::string deviceGroupText(const Machine &M, llvm::ArrayRef<DeviceId> Group);

} // namespace onnx2soap::simulator

#endif
