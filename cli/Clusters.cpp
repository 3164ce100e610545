//===- cli/Clusters.cpp - `onnx2soap clusters` ----------------------------===//
//
// Lists the built-in cluster presets as a table or (--json) as a JSON array;
// `--show C` prints a preset's or a cluster file's canonical JSON, which is
// also a starting point for writing a cluster file
// (docs/cluster-format.md).
//
//===----------------------------------------------------------------------===//
#include "cli/Subcommands.h"
#include "simulator/Machine.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

namespace onnx2soap::cli {

namespace cl = llvm::cl;
using simulator::Machine;
using simulator::PresetInfo;

cl::SubCommand &clustersCommand() {
  static cl::SubCommand Command("clusters",
                                "List the built-in cluster presets");
  return Command;
}

static cl::opt<bool> Json("json", cl::desc("Print a JSON array"),
                          cl::sub(clustersCommand()));
static cl::opt<std::string>
    Show("show",
         cl::desc("Print the canonical cluster file of a preset or file"),
         cl::value_desc("preset-or-file"), cl::sub(clustersCommand()));

llvm::Error runClusters() {
  if (!Show.empty()) {
    auto M = Machine::load(Show);
    if (!M)
      return M.takeError();
    llvm::outs() << llvm::formatv("{0:2}", M->toJson()) << "\n";
    return llvm::Error::success();
  }
  llvm::ArrayRef<PresetInfo> Presets = Machine::presets();
  if (Json) {
    llvm::json::Array List;
    for (const PresetInfo &P : Presets) {
      // Devices and nodes are null where the name's N chooses them.
      llvm::json::Value Devices = nullptr, Nodes = nullptr;
      if (P.Devices) {
        Devices = static_cast<int64_t>(P.Devices);
        Nodes = static_cast<int64_t>(P.Nodes);
      }
      List.push_back(llvm::json::Object{{"name", P.Name},
                                        {"devices", std::move(Devices)},
                                        {"nodes", std::move(Nodes)},
                                        {"device_type", P.DeviceType},
                                        {"description", P.Description}});
    }
    llvm::outs() << llvm::formatv("{0:2}", llvm::json::Value(std::move(List)))
                 << "\n";
    return llvm::Error::success();
  }
  llvm::outs() << llvm::formatv("{0,-15} {1,7} {2,5}  {3,-9} {4}\n", "preset",
                                "devices", "nodes", "device", "description");
  for (const PresetInfo &P : Presets) {
    std::string Devices = P.Devices ? std::to_string(P.Devices) : "N";
    std::string Nodes = P.Devices ? std::to_string(P.Nodes) : "1";
    llvm::outs() << llvm::formatv("{0,-15} {1,7} {2,5}  {3,-9} {4}\n", P.Name,
                                  Devices, Nodes, P.DeviceType, P.Description);
  }
  return llvm::Error::success();
}

} // namespace onnx2soap::cli
