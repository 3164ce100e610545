//===- runtime_lib/program/CommProfile.h - --profile-comm -------*- C++ -*-===//
//
// A generated program's --profile-comm: times one transfer per kind of
// route in the cluster and the all-reduces of the plan's groups, all ranks,
// a node's and one rank per node (one per ring shape), through the same
// Comm the training step uses (NCCL on GPUs, MPI on CPU ranks), at message
// sizes from 8 bytes to the plan's largest, and writes the cluster file's
// "measured" section (docs/cluster-format.md, "Measured communication"),
// which the planner then uses in place of the link model for communication
// of the same kinds.
//
//===----------------------------------------------------------------------===//
#ifndef ONNX2SOAP_RUNTIME_PROGRAM_COMMPROFILE_H
#define ONNX2SOAP_RUNTIME_PROGRAM_COMMPROFILE_H

#include "../Backend.h"
#include "Comm.h"
#include "Plan.h"
#include <string>

namespace onnx2soap::rt::program {

/// The largest message or packed all-reduce any rank of P sends, in bytes
/// (at least 8).
size_t largestMessageBytes(const Plan &P);

/// Times, on every rank of C (which must be P's ranks, C's groups not yet
/// set): the all-reduce of every group of P.ProfileGroups and a message
/// from each pair of P.ProfilePairs (half a round trip), at 8, 32, 128, ...
/// bytes up to MaxBytes; each the median of Repeats runs (after one more to
/// warm up), a run taking as long as its slowest rank. Returns the JSON
/// text {"measured": {...}} (the same on every rank).
std::string profileCommunication(const Plan &P, Backend &B, Comm &C,
                                 size_t MaxBytes, int Repeats);

} // namespace onnx2soap::rt::program

#endif
