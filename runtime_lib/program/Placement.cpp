//===- runtime_lib/program/Placement.cpp - Ranks on planned hosts ---------===//
#include "Placement.h"
#include "Comm.h"
#include <map>
#include <set>
#include <unistd.h>

namespace onnx2soap::rt::program {

std::string nodeOf(const std::string &DeviceName) {
  return DeviceName.substr(0, DeviceName.find('/'));
}

std::vector<uint64_t> rankHosts(Comm &C) {
  char Name[256] = {};
  if (gethostname(Name, sizeof Name - 1) != 0)
    Name[0] = 0;
  // FNV-1a, cut to 52 bits: a double (what sumOverRanks carries) holds it
  // exactly.
  uint64_t Hash = 1469598103934665603ull;
  for (const char *P = Name; *P; ++P)
    Hash = (Hash ^ uint8_t(*P)) * 1099511628211ull;
  Hash &= (uint64_t(1) << 52) - 1;
  std::vector<uint64_t> Hosts(size_t(C.size()));
  for (int Rank = 0; Rank < C.size(); ++Rank)
    Hosts[size_t(Rank)] =
        uint64_t(C.sumOverRanks(Rank == C.rank() ? double(Hash) : 0.0));
  return Hosts;
}

std::string placementWarning(const std::vector<std::string> &DeviceNames,
                             const std::vector<uint64_t> &Hosts) {
  if (DeviceNames.size() != Hosts.size() ||
      std::set<uint64_t>(Hosts.begin(), Hosts.end()).size() < 2)
    return "";
  // The first rank of each node and of each host.
  std::map<std::string, size_t> FirstOfNode;
  std::map<uint64_t, size_t> FirstOnHost;
  std::map<std::string, size_t> RanksOfNode;
  for (size_t R = 0; R < Hosts.size(); ++R)
    ++RanksOfNode[nodeOf(DeviceNames[R])];
  // The fix, spelled with the node's rank count, once a mismatch is found.
  auto Fix = [&](const std::string &Node) {
    std::string Ranks = std::to_string(RanksOfNode[Node]);
    return "; launch each node's " + Ranks +
           " ranks on one host, in rank order (mpirun --map-by ppr:" + Ranks +
           ":node), or the step runs slower than planned";
  };
  for (size_t R = 0; R < Hosts.size(); ++R) {
    std::string Node = nodeOf(DeviceNames[R]);
    auto [Node0, NewNode] = FirstOfNode.emplace(Node, R);
    auto [Host0, NewHost] = FirstOnHost.emplace(Hosts[R], R);
    if (!NewNode && Hosts[Node0->second] != Hosts[R])
      return "the plan puts ranks " + std::to_string(Node0->second) + " and " +
             std::to_string(R) + " on one node (" + Node +
             ") but they run on different hosts: their messages take the "
             "network instead of the node's links" +
             Fix(Node);
    if (!NewHost && nodeOf(DeviceNames[Host0->second]) != Node)
      return "ranks " + std::to_string(Host0->second) + " and " +
             std::to_string(R) + " run on one host but the plan puts them on " +
             nodeOf(DeviceNames[Host0->second]) + " and " + Node +
             " (they share the host's links and network card)" + Fix(Node);
  }
  return "";
}

} // namespace onnx2soap::rt::program
