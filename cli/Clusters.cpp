//===- cli/Clusters.cpp - `onnx2soap clusters` ----------------------------===//
//
// Lists the built-in cluster presets as a table or (--json) as a JSON array;
// `--show C` prints a preset's or a cluster file's canonical JSON, which is
// also a starting point for writing a cluster file
// (docs/cluster-format.md); with `--measured FILE`, with the communication
// times a generated program's --profile-comm measured.
//
//===----------------------------------------------------------------------===//
#include "cli/Subcommands.h"
#include "ir/Error.h"
#include "ir/JsonReader.h"
#include "ir/JsonText.h"
#include "simulator/Machine.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"
#include <optional>
#include <set>
#include <string>

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

static cl::opt<std::string> Measured(
    "measured",
    cl::desc("With --show: add the measured communication and device "
             "memory of FILE (what a generated program's --profile-comm "
             "writes) to the cluster"),
    cl::value_desc("FILE"), cl::sub(clustersCommand()));

/// Machine M with the tables of the "measured" section of File first (a
/// transfer or all-reduce takes the first table that fits it), then its own,
/// and with File's "device_memory" figures in the device types it measured.
static llvm::Expected<Machine> withMeasured(const Machine &M,
                                            llvm::StringRef File) {
  auto Fail = [&](const llvm::Twine &Message) {
    return fail(File + ": " + Message);
  };
  auto Buffer = llvm::MemoryBuffer::getFile(File, /*IsText=*/true);
  if (!Buffer)
    return Fail("cannot read it: " + Buffer.getError().message());
  auto Parsed = ir::parseJson((*Buffer)->getBuffer(), File);
  if (!Parsed)
    return Parsed.takeError();
  const llvm::json::Object *Root = Parsed->getAsObject();
  const llvm::json::Object *Section =
      Root ? Root->getObject("measured") : nullptr;
  if (!Section)
    return Fail("expected an object with a 'measured' section (what train "
                "--profile-comm writes)");
  // A misspelt "device_memory" would drop its figures without a word.
  for (const auto &Entry : *Root)
    if (Entry.first != "measured" && Entry.first != "device_memory")
      return Fail("unknown key '" + Entry.first.str() +
                  "' (expected 'measured' and, optionally, 'device_memory')");
  llvm::json::Value Cluster = M.toJson();
  llvm::json::Object &Into = *Cluster.getAsObject();
  const llvm::json::Object *Own = Into.getObject("measured");
  llvm::json::Object Merged;
  for (llvm::StringRef Key : {"transfers", "all_reduces"}) {
    llvm::json::Array Tables;
    for (const llvm::json::Object *From : {Section, Own})
      if (const llvm::json::Value *Some = From ? From->get(Key) : nullptr) {
        if (!Some->getAsArray())
          return Fail("measured." + Key + ": expected an array");
        for (const llvm::json::Value &Table : *Some->getAsArray())
          Tables.push_back(Table);
      }
    Merged[Key] = std::move(Tables);
  }
  for (const auto &Entry : *Section)
    if (Entry.first != "transfers" && Entry.first != "all_reduces")
      return Fail("measured: unknown key '" + Entry.first.str() + "'");
  Into["measured"] = std::move(Merged);

  // The device memory the program measured (GPUs only): its figures go to
  // the device type of every device it names.
  if (const llvm::json::Value *Memory = Root->get("device_memory")) {
    const llvm::json::Object *O = Memory->getAsObject();
    if (!O)
      return Fail("device_memory: expected an object");
    const llvm::json::Array *Devices = O->getArray("devices");
    if (!Devices || Devices->empty())
      return Fail("device_memory.devices: expected an array of device names");
    llvm::json::Object Figures;
    for (const auto &Entry : *O) {
      llvm::StringRef Key = Entry.first;
      if (Key == "devices")
        continue;
      if (llvm::none_of(
              simulator::RuntimeFigures,
              [&](const simulator::RuntimeFigure &F) { return Key == F.Key; }))
        return Fail("device_memory: unknown key '" + Key.str() + "'");
      llvm::Optional<double> MiB = Entry.second.getAsNumber();
      if (!MiB || !(*MiB >= 0))
        return Fail("device_memory." + Key + ": expected a number >= 0");
      std::string Problem = ir::figureProblem(*MiB, ir::Sign::NonNegative);
      if (!Problem.empty())
        return Fail("device_memory." + Key + ": " + Problem);
      Figures[Key] = *MiB;
    }
    std::set<std::string> Types;
    std::set<simulator::DeviceId> Named;
    for (size_t I = 0; I < Devices->size(); ++I) {
      llvm::Optional<llvm::StringRef> Name = (*Devices)[I].getAsString();
      std::optional<simulator::DeviceId> Id =
          Name ? M.deviceNamed(*Name) : std::nullopt;
      std::string At = "device_memory.devices[" + std::to_string(I) + "]: ";
      if (!Id)
        return Fail(At + (Name ? "no device '" + Name->str() +
                                     "' in cluster '" + M.Name + "'"
                               : std::string("expected a device name")));
      if (!Named.insert(*Id).second)
        return Fail(At + "device '" + Name->str() + "' is listed twice");
      Types.insert(M.deviceType(*Id).Name);
    }
    for (llvm::json::Value &Type : *Into.getArray("device_types")) {
      llvm::json::Object &T = *Type.getAsObject();
      if (Types.count(T.getString("name")->str()))
        for (const auto &Figure : Figures) {
          // Named here, not where the figure lands in the cluster's file.
          llvm::Optional<double> GiB = T.getNumber("memory_GiB");
          if (GiB && *Figure.second.getAsNumber() > *GiB * 1024)
            return Fail(llvm::formatv("device_memory.{0}: is more than the "
                                      "memory of device type '{1}' ({2} GiB)",
                                      Figure.first.str(), *T.getString("name"),
                                      ir::shortestNumber(*GiB))
                            .str());
          T[Figure.first] = Figure.second;
        }
    }
  }
  return Machine::fromJsonValue(Cluster, File);
}

llvm::Error runClusters() {
  if (!Measured.empty() && Show.empty())
    return usageError("--measured FILE goes with --show CLUSTER");
  if (!Show.empty()) {
    auto M = Machine::load(Show);
    if (!M)
      return M.takeError();
    if (!Measured.empty()) {
      auto With = withMeasured(*M, Measured);
      if (!With)
        return With.takeError();
      *M = std::move(*With);
    }
    llvm::outs() << ir::jsonText(M->toJson()) << "\n";
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
    llvm::outs() << ir::jsonText(llvm::json::Value(std::move(List))) << "\n";
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
