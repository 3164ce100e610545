//===- simulator/ProfileCostModel.cpp - Measured op times -----------------===//
//
// The key is a plain string so that a program without the compiler (the
// generated one, measuring on its GPU) can build it from what it has: the op
// kind, its attributes and the shapes of the buffers a partition's kernel
// reads and writes. Lookups build the key only for op kinds the profile has
// entries for, and hash it once into a StringMap; no state changes after
// loading, so concurrent search chains share the model without locks.
//
//===----------------------------------------------------------------------===//
#include "simulator/ProfileCostModel.h"
#include "ir/BatchDims.h"
#include "ir/Error.h"
#include "ir/JsonReader.h"
#include "simulator/Strategy.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/MemoryBuffer.h"
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

namespace onnx2soap::simulator {

namespace json = llvm::json;
using llvm::Error;
using llvm::Expected;
using llvm::StringRef;
using llvm::Twine;

static constexpr llvm::StringLiteral FormatName = "onnx2soap-profile";

//===-- Keys --------------------------------------------------------------===//

bool profileIgnoredAttribute(StringRef Name) {
  static const char *const Ignored[] = {"alpha",        "beta",     "epsilon",
                                        "ignore_index", "momentum", "ratio",
                                        "seed",         "value"};
  return llvm::is_contained(Ignored, Name);
}

// Keys are built on every lookup, so without temporaries: one string,
// reserved once.
static void appendInt(std::string &Key, int64_t Value) {
  char Text[24];
  auto [End, Failed] = std::to_chars(Text, Text + sizeof Text, Value);
  (void)Failed;
  Key.append(Text, End);
}

static void appendType(std::string &Key, const ir::TensorType &Type) {
  Key += ir::dtypeName(Type.Type);
  Key += '[';
  for (size_t I = 0; I < Type.Dims.size(); ++I) {
    if (I)
      Key += ',';
    appendInt(Key, Type.Dims[I]);
  }
  Key += ']';
}

static void appendFloat(std::string &Key, double Value) {
  char Text[32];
  std::snprintf(Text, sizeof Text, "%.9g", Value);
  Key += Text;
}

static void appendEscaped(std::string &Key, StringRef Text) {
  for (unsigned char C : Text) {
    if (C < 0x21 || C > 0x7e || C == '%' || C == '|' || C == '=' || C == ',') {
      Key += '%';
      Key += llvm::hexdigit(C >> 4);
      Key += llvm::hexdigit(C & 15);
    } else {
      Key += char(C);
    }
  }
}

namespace {
struct AttrAppender {
  std::string &Key;
  void operator()(int64_t V) const { appendInt(Key, V); }
  void operator()(double V) const { appendFloat(Key, V); }
  void operator()(const ir::IntList &L) const {
    for (size_t I = 0; I < L.size(); ++I) {
      if (I)
        Key += ',';
      appendInt(Key, L[I]);
    }
  }
  void operator()(const ir::FloatList &L) const {
    for (size_t I = 0; I < L.size(); ++I) {
      if (I)
        Key += ',';
      appendFloat(Key, L[I]);
    }
  }
  void operator()(const std::string &S) const { appendEscaped(Key, S); }
};
} // namespace

std::string profileKey(StringRef KindName,
                       llvm::ArrayRef<const ir::TensorType *> Inputs,
                       llvm::ArrayRef<ir::TensorType> Outputs,
                       int64_t ReductionSize, const ir::Attributes &Attrs) {
  std::string Key;
  Key.reserve(256);
  Key += KindName;
  for (size_t I = 0; I < Inputs.size(); ++I) {
    Key += "|i";
    appendInt(Key, I);
    Key += '=';
    if (Inputs[I])
      appendType(Key, *Inputs[I]);
    else
      Key += '-';
  }
  for (size_t I = 0; I < Outputs.size(); ++I) {
    Key += "|o";
    appendInt(Key, I);
    Key += '=';
    appendType(Key, Outputs[I]);
  }
  Key += "|r=";
  appendInt(Key, ReductionSize);
  for (const auto &[Name, Value] : Attrs.entries()) {
    if (profileIgnoredAttribute(Name))
      continue;
    Key += '|';
    Key += Name;
    Key += '=';
    std::visit(AttrAppender{Key}, Value);
  }
  return Key;
}

static ir::TensorType regionType(ir::DType Type,
                                 llvm::ArrayRef<ir::Interval> R) {
  ir::TensorType T;
  T.Type = Type;
  for (const ir::Interval &I : R)
    T.Dims.push_back(I.size());
  return T;
}

std::string profileKey(const PartitionShape &P) {
  const ir::Graph &G = P.G;
  const ir::Op &O = P.O;
  const ir::OpKindInfo &Info = ir::opKindInfo(O.Kind);
  llvm::SmallVector<ir::TensorType, 4> InputTypes;
  llvm::SmallVector<const ir::TensorType *, 4> Inputs;
  InputTypes.reserve(O.Inputs.size());
  for (unsigned I = 0; I < O.Inputs.size(); ++I) {
    const ir::TensorType *Type = G.inputType(O, I);
    if (!Type) {
      Inputs.push_back(nullptr);
      continue;
    }
    ir::Region R = Info.InputRegion(G, O, I, P.Out, P.Reduction);
    InputTypes.push_back(regionType(Type->Type, R));
    Inputs.push_back(&InputTypes.back());
  }
  llvm::SmallVector<ir::TensorType, 2> Outputs;
  for (unsigned I = 0; I < O.Outputs.size(); ++I)
    Outputs.push_back(
        regionType(G.outputType(O, I).Type,
                   ir::outputRegionOf(G, O, I, P.Out, P.Reduction)));
  int64_t Reduction =
      ir::parallelDims(G, O).ReductionExtent > 0 ? P.Reduction.size() : 0;
  return profileKey(ir::opKindName(O.Kind), Inputs, Outputs, Reduction,
                    O.Attrs);
}

//===-- Reading and writing -----------------------------------------------===//

namespace {
class ProfileReader : public ir::JsonReader {
public:
  using JsonReader::JsonReader;
  Expected<Profile> read(const json::Value &Root);

private:
  Expected<double> seconds(const json::Object &O, const std::string &Path,
                           StringRef Key) const;
  Expected<ProfileEntry> entry(const json::Value &V,
                               const std::string &Path) const;
  Expected<CopyProfile> copies(const json::Value &V) const;
};
} // namespace

Expected<double> ProfileReader::seconds(const json::Object &O,
                                        const std::string &Path,
                                        StringRef Key) const {
  const json::Value *V = O.get(Key);
  if (!V)
    return error(Path, "missing '" + Key + "'");
  std::optional<double> Number;
  if (auto N = V->getAsNumber())
    Number = *N;
  if (!Number)
    return error(Path + "." + Key.str(), "expected a number of seconds");
  if (!std::isfinite(*Number) || *Number < 0)
    return error(Path + "." + Key.str(),
                 "must be a finite, non-negative number of seconds");
  std::string Problem = ir::figureProblem(*Number, ir::Sign::NonNegative);
  if (!Problem.empty())
    return error(Path + "." + Key.str(), Problem);
  return *Number;
}

Expected<ProfileEntry> ProfileReader::entry(const json::Value &V,
                                            const std::string &Path) const {
  auto Object = object(V, Path);
  if (!Object)
    return Object.takeError();
  const json::Object *O = *Object;
  if (Error E =
          checkKeys(*O, Path, {"backward_s", "forward_s", "key", "samples"}))
    return E;
  ProfileEntry Entry;
  const json::Value *Key = O->get("key");
  if (!Key)
    return error(Path, "missing 'key'");
  auto Text = Key->getAsString();
  if (!Text || Text->empty())
    return error(Path + ".key", "expected a non-empty string");
  StringRef Kind = Text->split('|').first;
  if (!ir::parseOpKind(Kind))
    return error(Path + ".key", "unknown op kind '" + Kind + "'");
  Entry.Key = Text->str();
  auto Forward = seconds(*O, Path, "forward_s");
  if (!Forward)
    return Forward.takeError();
  Entry.ForwardSeconds = *Forward;
  if (O->get("backward_s") && !O->get("backward_s")->getAsNull()) {
    auto Backward = seconds(*O, Path, "backward_s");
    if (!Backward)
      return Backward.takeError();
    Entry.BackwardSeconds = *Backward;
  }
  if (const json::Value *Samples = O->get("samples")) {
    auto N = Samples->getAsInteger();
    if (!N || *N < 1)
      return error(Path + ".samples", "expected a positive integer");
    Entry.Samples = *N;
  } else {
    return error(Path, "missing 'samples'");
  }
  return Entry;
}

SizeTable CopyProfile::table() const {
  SizeTable T;
  T.Sizes = SizesBytes;
  for (double Us : TimesUs)
    T.Times.push_back(Us * 1e-6);
  return T;
}

/// More sizes than this in the copy table is surely a mistake.
static constexpr size_t MaxCopySizes = 4096;

Expected<CopyProfile> ProfileReader::copies(const json::Value &V) const {
  auto Object = object(V, "copies");
  if (!Object)
    return Object.takeError();
  const json::Object *O = *Object;
  if (Error E = checkKeys(*O, "copies", {"samples", "sizes_bytes", "times_us"}))
    return E;
  CopyProfile C;
  for (StringRef Key : {"sizes_bytes", "times_us"}) {
    std::string Path = key("copies", Key);
    auto Array = array(*O, "copies", Key, /*Required=*/true);
    if (!Array)
      return Array.takeError();
    const json::Array *List = *Array;
    if (List->empty() || List->size() > MaxCopySizes)
      return error(Path, "expected 1 to " + Twine(MaxCopySizes) + " numbers");
    std::vector<double> &Into = Key == "sizes_bytes" ? C.SizesBytes : C.TimesUs;
    for (size_t I = 0; I < List->size(); ++I) {
      std::string At = index(Path, I);
      auto D = (*List)[I].getAsNumber();
      if (!D || !std::isfinite(*D) || !(*D > 0))
        return error(At, "expected a number greater than 0");
      std::string Problem = ir::figureProblem(*D, ir::Sign::Positive);
      if (!Problem.empty())
        return error(At, Problem);
      if (Key == "sizes_bytes" && *D != std::floor(*D))
        return error(At, "expected a whole number of bytes");
      if (Key == "sizes_bytes" && I > 0 && !(*D > Into.back()))
        return error(At, "sizes must increase");
      Into.push_back(*D);
    }
  }
  if (C.SizesBytes.size() != C.TimesUs.size())
    return error("copies.times_us", "has " + Twine(C.TimesUs.size()) +
                                        " times for " +
                                        Twine(C.SizesBytes.size()) + " sizes");
  auto Samples = O->getInteger("samples");
  if (!Samples || *Samples < 1)
    return error(O->get("samples") ? "copies.samples" : "copies",
                 O->get("samples") ? "expected a positive integer"
                                   : "missing 'samples'");
  C.Samples = *Samples;
  return C;
}

Expected<Profile> ProfileReader::read(const json::Value &Root) {
  const json::Object *O = Root.getAsObject();
  if (!O)
    return error("", "expected a JSON object");
  auto Format = O->getString("format");
  if (!Format || *Format != FormatName)
    return error("format",
                 "expected \"" + FormatName + "\" (not a profile file?)");
  auto Version = O->getInteger("version");
  if (!Version)
    return error("version", "expected an integer");
  if (*Version != ProfileFormatVersion)
    return error("version", "version " + Twine(*Version) +
                                " is not supported (this build reads "
                                "version " +
                                Twine(ProfileFormatVersion) + ")");
  // After the format: another kind of file is named as such.
  if (Error E = checkKeys(*O, "",
                          {"copies", "device_type", "entries", "format",
                           "measured_with", "version"}))
    return E;
  Profile P;
  auto Device = O->getString("device_type");
  if (!Device || Device->empty())
    return error("device_type", "expected the name of a device type");
  P.DeviceType = Device->str();
  if (const json::Value *With = O->get("measured_with")) {
    if (!With->getAsObject())
      return error("measured_with", "expected an object");
    P.MeasuredWith = *With->getAsObject();
  }
  if (const json::Value *Copies = O->get("copies")) {
    auto C = copies(*Copies);
    if (!C)
      return C.takeError();
    P.Copies = std::move(*C);
  }
  auto Array = array(*O, "", "entries", /*Required=*/true);
  if (!Array)
    return Array.takeError();
  const json::Array *Entries = *Array;
  llvm::StringMap<size_t> Seen;
  for (size_t I = 0; I < Entries->size(); ++I) {
    std::string Path = index("entries", I);
    auto Entry = entry((*Entries)[I], Path);
    if (!Entry)
      return Entry.takeError();
    auto [It, New] = Seen.try_emplace(Entry->Key, I);
    if (!New)
      return error(Path + ".key",
                   "the same key as entries[" + Twine(It->second) + "]");
    P.Entries.push_back(std::move(*Entry));
  }
  return P;
}

Expected<Profile> Profile::fromJson(StringRef Text, StringRef Where) {
  auto Value = ir::parseJson(Text, Where);
  if (!Value)
    return Value.takeError();
  return ProfileReader(Where).read(*Value);
}

Expected<Profile> Profile::fromFile(StringRef Path) {
  auto Buffer = llvm::MemoryBuffer::getFile(Path, /*IsText=*/true);
  if (!Buffer)
    return fail(Path + ": cannot read the file (" +
                Buffer.getError().message() + ")");
  return fromJson((*Buffer)->getBuffer(), Path);
}

json::Value Profile::toJson() const {
  std::vector<const ProfileEntry *> Sorted;
  for (const ProfileEntry &E : Entries)
    Sorted.push_back(&E);
  std::sort(Sorted.begin(), Sorted.end(),
            [](const ProfileEntry *A, const ProfileEntry *B) {
              return A->Key < B->Key;
            });
  json::Array List;
  for (const ProfileEntry *E : Sorted) {
    json::Object Entry{{"key", E->Key},
                       {"forward_s", E->ForwardSeconds},
                       {"samples", E->Samples}};
    if (E->BackwardSeconds)
      Entry["backward_s"] = *E->BackwardSeconds;
    List.push_back(std::move(Entry));
  }
  json::Object Root{{"format", FormatName},
                    {"version", ProfileFormatVersion},
                    {"device_type", DeviceType},
                    {"entries", std::move(List)}};
  if (!MeasuredWith.empty())
    Root["measured_with"] = json::Object(MeasuredWith);
  if (Copies) {
    json::Array Sizes, Times;
    for (size_t I = 0; I < Copies->SizesBytes.size(); ++I) {
      Sizes.push_back(Copies->SizesBytes[I]);
      Times.push_back(Copies->TimesUs[I]);
    }
    Root["copies"] = json::Object{{"sizes_bytes", std::move(Sizes)},
                                  {"times_us", std::move(Times)},
                                  {"samples", Copies->Samples}};
  }
  return Root;
}

//===-- The cost model ----------------------------------------------------===//

Error ProfileCostModel::add(Profile P, StringRef Where) {
  if (hasDeviceType(P.DeviceType))
    return fail(Where +
                ": a second profile for device "
                "type '" +
                P.DeviceType + "'");
  Table T;
  T.DeviceType = P.DeviceType;
  if (P.Copies)
    T.Copies = P.Copies->table();
  for (ProfileEntry &E : P.Entries) {
    auto Kind = ir::parseOpKind(StringRef(E.Key).split('|').first);
    assert(Kind && "the reader checks the kind of every key");
    T.Kinds.set(static_cast<unsigned>(*Kind));
    std::string Key = E.Key;
    T.Entries.try_emplace(Key, std::move(E));
  }
  Tables.push_back(std::move(T));
  return Error::success();
}

bool ProfileCostModel::hasDeviceType(StringRef Name) const {
  return llvm::any_of(Tables,
                      [&](const Table &T) { return T.DeviceType == Name; });
}

std::vector<std::string> ProfileCostModel::deviceTypes() const {
  std::vector<std::string> Names;
  for (const Table &T : Tables)
    Names.push_back(T.DeviceType);
  return Names;
}

const ProfileEntry *ProfileCostModel::lookup(const PartitionShape &P,
                                             StringRef Name) const {
  for (const Table &T : Tables) {
    if (T.DeviceType != Name)
      continue;
    if (!T.Kinds.test(static_cast<unsigned>(P.O.Kind)))
      return nullptr;
    auto It = T.Entries.find(profileKey(P));
    return It == T.Entries.end() ? nullptr : &It->second;
  }
  return nullptr;
}

TaskTimes ProfileCostModel::opTimes(const PartitionShape &P,
                                    const DeviceType &Device) const {
  const ProfileEntry *Entry = lookup(P, Device.Name);
  if (!Entry)
    return Fallback.opTimes(P, Device);
  TaskTimes Times;
  Times.Forward = Entry->ForwardSeconds;
  Times.Backward = Entry->BackwardSeconds
                       ? *Entry->BackwardSeconds
                       : Fallback.opTimes(P, Device).Backward;
  return Times;
}

bool ProfileCostModel::timesCopies(llvm::StringRef Name) const {
  return llvm::any_of(Tables, [&](const Table &T) {
    return T.DeviceType == Name && T.Copies.has_value();
  });
}

double ProfileCostModel::copyTime(double Bytes, unsigned Copies, bool Add,
                                  const DeviceType &Device) const {
  for (const Table &T : Tables)
    if (T.DeviceType == Device.Name && T.Copies && Copies > 0)
      return double(Copies) * T.Copies->time(Bytes / double(Copies)) *
             (Add ? 1.5 : 1.0);
  return Fallback.copyTime(Bytes, Copies, Add, Device);
}

double ProfileCostModel::updateTime(OptimizerKind Kind, double Elements,
                                    ir::DType Type,
                                    const DeviceType &Device) const {
  return Fallback.updateTime(Kind, Elements, Type, Device);
}

} // namespace onnx2soap::simulator
