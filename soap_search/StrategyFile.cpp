//===- soap_search/StrategyFile.cpp - Strategies on disk ------------------===//
//
// Writing goes through llvm::json::OStream with the top-level keys in sorted
// order and each op's config on one line, so that a file diffs well; reading
// parses with llvm::json and checks field by field, converting every problem
// into one Error that names the file and the JSON path.
//
//===----------------------------------------------------------------------===//
#include "soap_search/StrategyFile.h"
#include "ir/Error.h"
#include "ir/JsonReader.h"
#include "ir/JsonText.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"
#include <algorithm>
#include <map>
#include <openssl/evp.h>

namespace onnx2soap::soap_search {

using llvm::json::Array;
using llvm::json::Object;
using llvm::json::Value;
using simulator::ParallelConfig;
using simulator::Strategy;

Sha256::Sha256() : Ctx(EVP_MD_CTX_new()) {
  auto *C = static_cast<EVP_MD_CTX *>(Ctx);
  if (!C || EVP_DigestInit_ex(C, EVP_sha256(), nullptr) != 1)
    llvm::report_fatal_error("OpenSSL: cannot start a SHA-256 digest");
}

Sha256::~Sha256() { EVP_MD_CTX_free(static_cast<EVP_MD_CTX *>(Ctx)); }

void Sha256::update(llvm::StringRef Bytes) {
  if (EVP_DigestUpdate(static_cast<EVP_MD_CTX *>(Ctx), Bytes.data(),
                       Bytes.size()) != 1)
    llvm::report_fatal_error("OpenSSL: SHA-256 update failed");
}

std::array<uint8_t, 32> Sha256::final() {
  std::array<uint8_t, 32> Digest;
  unsigned Size = 0;
  if (EVP_DigestFinal_ex(static_cast<EVP_MD_CTX *>(Ctx), Digest.data(),
                         &Size) != 1 ||
      Size != Digest.size())
    llvm::report_fatal_error("OpenSSL: SHA-256 final failed");
  return Digest;
}

std::string Sha256::finalHex() {
  std::array<uint8_t, 32> Digest = final();
  return llvm::toHex(llvm::ArrayRef<uint8_t>(Digest), /*LowerCase=*/true);
}

std::string sha256Hex(llvm::StringRef Bytes) {
  Sha256 Hash;
  Hash.update(Bytes);
  return Hash.finalHex();
}

std::string clusterText(const simulator::Machine &M) {
  std::string Text;
  llvm::raw_string_ostream OS(Text);
  OS << M.toJson();
  return OS.str();
}

llvm::Expected<StrategyTarget> makeTarget(llvm::StringRef ModelPath,
                                          ModelSettings Settings,
                                          const simulator::Machine &M) {
  auto Buffer = llvm::MemoryBuffer::getFile(ModelPath, /*IsText=*/false,
                                            /*RequiresNullTerminator=*/false);
  if (!Buffer)
    return fail(ModelPath + ": cannot read: " + Buffer.getError().message());
  StrategyTarget Target;
  Target.ModelFile = llvm::sys::path::filename(ModelPath).str();
  Target.ModelSha256 = sha256Hex((*Buffer)->getBuffer());
  llvm::sort(Settings.Dims);
  Target.Settings = std::move(Settings);
  Target.ClusterName = M.Name;
  Target.NumDevices = M.numDevices();
  Target.ClusterSha256 = sha256Hex(clusterText(M));
  return Target;
}

/// Every op's key, by OpId.
static std::vector<std::string> strategyKeys(const ir::Graph &G) {
  llvm::StringMap<unsigned> Uses;
  for (const ir::Op &O : G.ops())
    ++Uses[O.Name];
  std::vector<std::string> Keys;
  Keys.reserve(G.numOps());
  for (const ir::Op &O : G.ops())
    Keys.push_back(O.Name.empty() || Uses[O.Name] > 1
                       ? llvm::formatv("{0}#op{1}", O.Name, O.Id).str()
                       : O.Name);
  return Keys;
}

std::string strategyKey(const ir::Graph &G, ir::OpId Op) {
  return strategyKeys(G)[Op];
}

//===-- Writing -----------------------------------------------------------===//

static Object settingsObject(const ModelSettings &Settings) {
  Object Dims;
  for (const auto &[Name, Size] : Settings.Dims)
    Dims[Name] = Size;
  Value Batch = nullptr;
  if (Settings.Batch)
    Batch = *Settings.Batch;
  return Object{{"batch", std::move(Batch)},
                {"dims", std::move(Dims)},
                {"fuse_patterns", Settings.FusePatterns},
                {"loss", Settings.Loss},
                {"unroll_rnn", Settings.UnrollRnn}};
}

static Object configObject(const ParallelConfig &C) {
  Array Degrees;
  for (uint32_t D : C.Degrees)
    Degrees.push_back(int64_t(D));
  return Object{{"degrees", std::move(Degrees)},
                {"device_stride", int64_t(C.DeviceStride)},
                {"first_device", int64_t(C.FirstDevice)},
                {"reduction", int64_t(C.Reduction)}};
}

std::string writeStrategy(const ir::Graph &G, const Strategy &S,
                          const StrategyTarget &Target,
                          const StrategyPrediction &Predicted,
                          std::optional<double> GradientBucket) {
  assert(S.Configs.size() == G.numOps() && "a config per op");
  std::vector<std::string> Keys = strategyKeys(G);
  std::map<llvm::StringRef, ir::OpId> Sorted;
  for (const ir::Op &O : G.ops())
    Sorted.emplace(Keys[O.Id], O.Id);

  std::string Text;
  llvm::raw_string_ostream OS(Text);
  // Writes V on one line inside the indented document.
  auto Compact = [](llvm::json::OStream &J, Value V) {
    J.rawValue([&](llvm::raw_ostream &Out) { Out << V; });
  };
  llvm::json::OStream J(OS, 2);
  // Keys in sorted order, as llvm::json prints nested objects.
  J.object([&] {
    J.attribute("cluster", Object{{"devices", int64_t(Target.NumDevices)},
                                  {"name", Target.ClusterName},
                                  {"sha256", Target.ClusterSha256}});
    J.attribute("format", StrategyFormatName);
    if (GradientBucket)
      J.attribute("gradient_bucket", int64_t(*GradientBucket));
    J.attribute("model", Object{{"file", Target.ModelFile},
                                {"sha256", Target.ModelSha256}});
    J.attributeObject("ops", [&] {
      for (const auto &[Key, Op] : Sorted) {
        J.attributeBegin(Key);
        Compact(J, configObject(S[Op]));
        J.attributeEnd();
      }
    });
    J.attributeObject("predicted", [&] {
      J.attribute("comm_model", Predicted.CommModel);
      J.attribute("fits", Predicted.Fits);
      J.attribute("optimizer", Predicted.Optimizer);
      J.attributeBegin("peak_memory");
      Array Peaks;
      for (double Peak : Predicted.PeakMemory)
        Peaks.push_back(Peak);
      Compact(J, std::move(Peaks));
      J.attributeEnd();
      // In the fewest digits that read back as the same time.
      J.attributeBegin("time");
      J.rawValue(ir::shortestNumber(Predicted.Time));
      J.attributeEnd();
    });
    J.attribute("settings", settingsObject(Target.Settings));
    J.attribute("version", StrategyFormatVersion);
  });
  OS << "\n";
  return OS.str();
}

//===-- Reading -----------------------------------------------------------===//

/// The first 12 hex digits, for messages.
static std::string shortHash(llvm::StringRef Hex) {
  return Hex.size() > 12 ? (Hex.take_front(12) + "…").str() : Hex.str();
}

/// The settings as the flags that give them, for messages.
static std::string batchFlag(const std::optional<int64_t> &Batch) {
  return Batch ? "--batch " + std::to_string(*Batch) : "no --batch";
}
static std::string
dimFlags(const std::vector<std::pair<std::string, int64_t>> &Dims) {
  if (Dims.empty())
    return "no --dim";
  std::string Text;
  for (const auto &[Name, Size] : Dims)
    Text += (Text.empty() ? "" : " ") + std::string("--dim ") + Name + "=" +
            std::to_string(Size);
  return Text;
}

namespace {
/// Field access with errors that name the file and the JSON path (a
/// missing field: "<path>: missing").
class Reader : public ir::JsonReader {
public:
  using JsonReader::JsonReader;

  llvm::Expected<const Object *> object(const Object &Parent,
                                        llvm::StringRef Key,
                                        const llvm::Twine &Path) const {
    const Value *V = Parent.get(Key);
    if (!V)
      return error(Path, "missing");
    if (const Object *O = V->getAsObject())
      return O;
    return error(Path, "expected an object");
  }
  llvm::Expected<std::string> string(const Object &Parent, llvm::StringRef Key,
                                     const llvm::Twine &Path) const {
    const Value *V = Parent.get(Key);
    if (!V)
      return error(Path, "missing");
    if (auto S = V->getAsString())
      return S->str();
    return error(Path, "expected a string");
  }
  llvm::Expected<bool> boolean(const Object &Parent, llvm::StringRef Key,
                               const llvm::Twine &Path) const {
    const Value *V = Parent.get(Key);
    if (!V)
      return error(Path, "missing");
    if (auto B = V->getAsBoolean())
      return *B;
    return error(Path, "expected true or false");
  }
  /// An integer in [Min, 2^32).
  llvm::Expected<uint32_t> count(const Value *V, int64_t Min,
                                 const llvm::Twine &Path) const {
    if (!V)
      return error(Path, "missing");
    auto I = V->getAsInteger();
    if (!I || *I < Min || *I > int64_t(UINT32_MAX))
      return error(Path,
                   llvm::formatv("expected an integer of at least {0}", Min));
    return uint32_t(*I);
  }
};
} // namespace

static llvm::Expected<ModelSettings> readSettings(const Reader &R,
                                                  const Object &Top) {
  auto Settings = R.object(Top, "settings", "settings");
  if (!Settings)
    return Settings.takeError();
  const Object &S = **Settings;
  if (llvm::Error E =
          R.checkKeys(S, "settings",
                      {"batch", "dims", "fuse_patterns", "loss", "unroll_rnn"}))
    return E;
  ModelSettings Result;
  const Value *Batch = S.get("batch");
  if (!Batch)
    return R.error("settings.batch", "missing");
  if (Batch->kind() != Value::Null) {
    auto N = Batch->getAsInteger();
    if (!N || *N <= 0)
      return R.error("settings.batch", "expected a positive integer or null");
    Result.Batch = *N;
  }
  auto Dims = R.object(S, "dims", "settings.dims");
  if (!Dims)
    return Dims.takeError();
  for (const auto &[Name, Size] : **Dims) {
    auto N = Size.getAsInteger();
    if (!N || *N < 0)
      return R.error("settings.dims." + Name.str(),
                     "expected a non-negative integer");
    Result.Dims.emplace_back(Name.str(), *N);
  }
  llvm::sort(Result.Dims);
  auto Unroll = R.boolean(S, "unroll_rnn", "settings.unroll_rnn");
  if (!Unroll)
    return Unroll.takeError();
  Result.UnrollRnn = *Unroll;
  auto Fuse = R.boolean(S, "fuse_patterns", "settings.fuse_patterns");
  if (!Fuse)
    return Fuse.takeError();
  Result.FusePatterns = *Fuse;
  auto Loss = R.string(S, "loss", "settings.loss");
  if (!Loss)
    return Loss.takeError();
  Result.Loss = *Loss;
  return Result;
}

/// The first setting that differs, as "--batch 8, not --batch 16".
static std::optional<std::string> settingsDifference(const ModelSettings &File,
                                                     const ModelSettings &Now) {
  auto Differs = [](const std::string &Then, const std::string &Current) {
    return Then + ", not " + Current;
  };
  if (File.Batch != Now.Batch)
    return Differs(batchFlag(File.Batch), batchFlag(Now.Batch));
  if (File.Dims != Now.Dims)
    return Differs(dimFlags(File.Dims), dimFlags(Now.Dims));
  if (File.UnrollRnn != Now.UnrollRnn)
    return Differs(File.UnrollRnn ? "--unroll-rnn" : "no --unroll-rnn",
                   Now.UnrollRnn ? "--unroll-rnn" : "no --unroll-rnn");
  if (File.FusePatterns != Now.FusePatterns)
    return Differs(File.FusePatterns ? "no --no-fuse" : "--no-fuse",
                   Now.FusePatterns ? "no --no-fuse" : "--no-fuse");
  if (File.Loss != Now.Loss)
    return Differs("--loss " + File.Loss, "--loss " + Now.Loss);
  return std::nullopt;
}

static llvm::Expected<ParallelConfig>
readConfig(const Reader &R, const Value &V, const std::string &Path) {
  const Object *O = V.getAsObject();
  if (!O)
    return R.error(Path, "expected an object {\"degrees\": [...], "
                         "\"reduction\": R, \"first_device\": D, "
                         "\"device_stride\": S}");
  if (llvm::Error E = R.checkKeys(
          *O, Path, {"degrees", "reduction", "first_device", "device_stride"}))
    return E;
  ParallelConfig C;
  const Value *Degrees = O->get("degrees");
  if (!Degrees)
    return R.error(Path + ".degrees", "missing");
  const Array *List = Degrees->getAsArray();
  if (!List)
    return R.error(Path + ".degrees", "expected an array of integers");
  for (size_t I = 0; I < List->size(); ++I) {
    auto D =
        R.count(&(*List)[I], 1, Path + ".degrees[" + std::to_string(I) + "]");
    if (!D)
      return D.takeError();
    C.Degrees.push_back(*D);
  }
  auto Reduction = R.count(O->get("reduction"), 1, Path + ".reduction");
  if (!Reduction)
    return Reduction.takeError();
  C.Reduction = *Reduction;
  auto First = R.count(O->get("first_device"), 0, Path + ".first_device");
  if (!First)
    return First.takeError();
  C.FirstDevice = *First;
  auto Stride = R.count(O->get("device_stride"), 0, Path + ".device_stride");
  if (!Stride)
    return Stride.takeError();
  C.DeviceStride = *Stride;
  return C;
}

llvm::Expected<Strategy> parseStrategy(llvm::StringRef Text,
                                       llvm::StringRef Where,
                                       const ir::Graph &G,
                                       const StrategyTarget &Target,
                                       std::optional<double> *GradientBucket) {
  Reader R(Where);
  auto Parsed = ir::parseJson(Text, Where);
  if (!Parsed)
    return Parsed.takeError();
  const Object *Top = Parsed->getAsObject();
  if (!Top)
    return R.error("", "not a strategy file (expected a JSON object)");

  // What the file is.
  auto Format = Top->getString("format");
  if (!Format || *Format != StrategyFormatName)
    return R.error("", "not a strategy file (its \"format\" is not \"" +
                           StrategyFormatName + "\")");
  auto Version = Top->getInteger("version");
  if (!Version)
    return R.error("version", "missing or not an integer");
  if (*Version != StrategyFormatVersion)
    return R.error("", llvm::formatv("strategy format version {0} is not "
                                     "supported (this onnx2soap reads "
                                     "version {1}); re-run search",
                                     *Version, StrategyFormatVersion));
  // A misspelt key would otherwise be dropped without a word ("predicted"
  // is what search printed, and not read).
  if (llvm::Error E =
          R.checkKeys(*Top, "",
                      {"cluster", "format", "gradient_bucket", "model", "ops",
                       "predicted", "settings", "version"}))
    return E;

  // What it was made for.
  auto Model = R.object(*Top, "model", "model");
  if (!Model)
    return Model.takeError();
  if (llvm::Error E = R.checkKeys(**Model, "model", {"file", "sha256"}))
    return E;
  auto ModelFile = R.string(**Model, "file", "model.file");
  if (!ModelFile)
    return ModelFile.takeError();
  auto ModelSha = R.string(**Model, "sha256", "model.sha256");
  if (!ModelSha)
    return ModelSha.takeError();
  if (*ModelSha != Target.ModelSha256)
    return fail(llvm::formatv("{0} was made for model {1} (sha256 {2}), "
                              "not this one ({3} sha256 {4}); re-run "
                              "search",
                              Where, *ModelFile, shortHash(*ModelSha),
                              Target.ModelFile, shortHash(Target.ModelSha256)));
  auto Settings = readSettings(R, *Top);
  if (!Settings)
    return Settings.takeError();
  if (auto Difference = settingsDifference(*Settings, Target.Settings))
    return fail(Where + " was made with " + *Difference +
                "; give the same model flags, or re-run search");
  auto Cluster = R.object(*Top, "cluster", "cluster");
  if (!Cluster)
    return Cluster.takeError();
  if (llvm::Error E =
          R.checkKeys(**Cluster, "cluster", {"devices", "name", "sha256"}))
    return E;
  auto ClusterName = R.string(**Cluster, "name", "cluster.name");
  if (!ClusterName)
    return ClusterName.takeError();
  auto Devices = R.count((*Cluster)->get("devices"), 1, "cluster.devices");
  if (!Devices)
    return Devices.takeError();
  auto ClusterSha = R.string(**Cluster, "sha256", "cluster.sha256");
  if (!ClusterSha)
    return ClusterSha.takeError();
  if (*ClusterName != Target.ClusterName || *Devices != Target.NumDevices ||
      *ClusterSha != Target.ClusterSha256)
    return fail(
        llvm::formatv("{0} was made for cluster '{1}' with {2} devices "
                      "(sha256 {3}), not '{4}' with {5} devices ({6}); "
                      "use the same --cluster and --gpus, or re-run search",
                      Where, *ClusterName, *Devices, shortHash(*ClusterSha),
                      Target.ClusterName, Target.NumDevices,
                      shortHash(Target.ClusterSha256)));

  // How the gradients are all-reduced (optional).
  if (const Value *Bucket = Top->get("gradient_bucket")) {
    auto Bytes = Bucket->getAsInteger();
    if (!Bytes || *Bytes < 0)
      return R.error("gradient_bucket",
                     "expected a number of bytes (an integer of at least 0)");
    if (GradientBucket)
      *GradientBucket = double(*Bytes);
  }

  // The configs.
  auto Ops = R.object(*Top, "ops", "ops");
  if (!Ops)
    return Ops.takeError();
  std::vector<std::string> Keys = strategyKeys(G);
  llvm::StringMap<ir::OpId> ByKey;
  for (const ir::Op &O : G.ops())
    ByKey[Keys[O.Id]] = O.Id;
  Strategy S;
  S.Configs.resize(G.numOps());
  std::vector<bool> Seen(G.numOps(), false);
  // Sorted, so that the first unknown op reported does not depend on the
  // hash order of the parsed object.
  std::vector<llvm::StringRef> Names;
  for (const auto &Entry : **Ops)
    Names.push_back(Entry.first);
  llvm::sort(Names);
  for (llvm::StringRef Name : Names) {
    auto It = ByKey.find(Name);
    if (It == ByKey.end())
      return R.error("", "unknown op '" + Name + "' (the model has " +
                             llvm::Twine(G.numOps()) +
                             " ops; the file may be for another version of "
                             "it)");
    auto C = readConfig(R, *(*Ops)->get(Name), "ops." + Name.str());
    if (!C)
      return C.takeError();
    S[It->second] = std::move(*C);
    Seen[It->second] = true;
  }
  unsigned Missing = std::count(Seen.begin(), Seen.end(), false);
  if (Missing) {
    ir::OpId First = std::find(Seen.begin(), Seen.end(), false) - Seen.begin();
    std::string More =
        Missing > 1 ? llvm::formatv(" (and {0} more)", Missing - 1).str() : "";
    return R.error("", "op '" + Keys[First] + "' has no config" + More +
                           "; the file may be for another version of the "
                           "model");
  }
  if (llvm::Error E = simulator::checkStrategy(G, S, Target.NumDevices))
    return R.error("", llvm::toString(std::move(E)));
  return S;
}

llvm::Expected<Strategy> readStrategy(llvm::StringRef Path, const ir::Graph &G,
                                      const StrategyTarget &Target,
                                      std::optional<double> *GradientBucket) {
  auto Buffer = llvm::MemoryBuffer::getFile(Path, /*IsText=*/true);
  if (!Buffer)
    return fail(Path + ": cannot read: " + Buffer.getError().message());
  return parseStrategy((*Buffer)->getBuffer(), Path, G, Target, GradientBucket);
}

} // namespace onnx2soap::soap_search
