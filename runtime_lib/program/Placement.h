//===- runtime_lib/program/Placement.h - Ranks on planned hosts -*- C++ -*-===//
//
// A plan assumes rank r runs on the cluster's device r ("node1/gpu2"): the
// ranks of one node exchange messages over that node's links (NVLink, a
// PCIe switch), the others over the network. The launcher decides where
// ranks really run (mpirun --map-by, Slurm's distribution), and a mapping
// that does not keep a node's ranks on one host still computes the same
// step, only slower than planned. The program compares each rank's host
// with the plan's nodes once at start and warns when they disagree.
//
//===----------------------------------------------------------------------===//
#ifndef ONNX2SOAP_RUNTIME_PROGRAM_PLACEMENT_H
#define ONNX2SOAP_RUNTIME_PROGRAM_PLACEMENT_H

#include <cstdint>
#include <string>
#include <vector>

namespace onnx2soap::rt::program {

class Comm;

/// The node part of a cluster device name: "node1" of "node1/gpu2" (the
/// whole name when it has no '/').
std::string nodeOf(const std::string &DeviceName);

/// Every rank's host, as a key equal for ranks on one host (a 52-bit hash
/// of its name), the same vector on every rank. Every rank must call it.
std::vector<uint64_t> rankHosts(Comm &C);

/// What is wrong with running rank r on host Hosts[r] when the plan puts it
/// on device DeviceNames[r], as one line (empty when nothing is): ranks the
/// plan puts on one node that run on different hosts, or, when the ranks
/// span several hosts, ranks of different nodes that share one. A job on
/// one host (a cluster emulated on one machine) is not warned about; nor
/// are rank counts that differ from the plan's (the runner refuses them).
std::string placementWarning(const std::vector<std::string> &DeviceNames,
                             const std::vector<uint64_t> &Hosts);

} // namespace onnx2soap::rt::program

#endif
