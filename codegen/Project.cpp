//===- codegen/Project.cpp - Writing a generated project ------------------===//
//
// The files of a generated project: plan.cpp (PlanSource.cpp spells it),
// the templates with their @NAME@ placeholders filled in, the runtime
// sources embedded in onnx2soap, the model and the weight shards, and a
// manifest with every file's SHA-256; written into a temporary folder that
// takes the project folder's place only once it is whole.
//
//===----------------------------------------------------------------------===//
#include "codegen/Project.h"
#include "codegen/EmbeddedFiles.h"
#include "codegen/PlanSource.h"
#include "ir/Error.h"
#include "ir/JsonReader.h"
#include "ir/JsonText.h"
#include "ir/Units.h"
#include "runtime_lib/RemovedOnSignal.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"
#include <array>
#include <cassert>
#include <cstdio>
#include <future>
#include <set>

namespace onnx2soap::codegen {

using namespace rt::program;

/// Text with each @NAME@ of Vars replaced by its value, in one pass (a
/// value is not searched for names again). The values are on one line:
/// control characters become '?', so that a model or cluster name with a
/// newline cannot end a template's comment line.
static std::string substitute(const std::string &Text,
                              const std::map<std::string, std::string> &Vars) {
  std::string Out;
  for (size_t At = 0; At < Text.size();) {
    size_t Open = Text.find('@', At);
    size_t Close = Open == std::string::npos ? Open : Text.find('@', Open + 1);
    auto Var = Close == std::string::npos
                   ? Vars.end()
                   : Vars.find(Text.substr(Open + 1, Close - Open - 1));
    if (Var == Vars.end()) {
      size_t End = Open == std::string::npos ? Text.size() : Open + 1;
      Out.append(Text, At, End - At);
      At = End;
      continue;
    }
    Out.append(Text, At, Open - At);
    for (unsigned char C : Var->second)
      Out += C < 0x20 || C == 0x7f ? '?' : char(C);
    At = Close + 1;
  }
  return Out;
}

static const EmbeddedFile *embedded(llvm::StringRef Path) {
  for (size_t I = 0; I < NumEmbeddedFiles; ++I)
    if (Path == EmbeddedFiles[I].Path)
      return &EmbeddedFiles[I];
  return nullptr;
}

static std::string embeddedText(llvm::StringRef Path) {
  const EmbeddedFile *File = embedded(Path);
  assert(File && "template missing from the embedded files");
  return std::string(File->Data, File->Size);
}

static std::string fileSha256(const FileContents &Contents) {
  soap_search::Sha256 Hasher;
  Contents.forEachPiece([&](llvm::StringRef Piece) { Hasher.update(Piece); });
  return Hasher.finalHex();
}

llvm::Expected<ProjectFiles> projectFiles(const ProjectInputs &In) {
  const ProgramPlan &P = In.Plan;
  ProjectFiles Files;

  // The backend follows the devices: CUDA architectures when they have
  // one, the CPU otherwise.
  std::set<std::string> Archs;
  bool AnyCpu = false;
  for (unsigned D = 0; D < In.M.numDevices(); ++D) {
    const std::string &Arch = In.M.deviceType(D).CudaArch;
    if (Arch.empty())
      AnyCpu = true;
    else
      Archs.insert(Arch);
  }
  if (AnyCpu && !Archs.empty())
    return fail(llvm::formatv("cluster '{0}' mixes CPU and GPU devices; a "
                              "generated program runs on one kind",
                              In.M.Name));
  bool Cuda = !Archs.empty();

  // Weight shards; the plan hash covers the plan and every shard.
  // The plan hash identifies the program: the plan's text and where its
  // weights come from (the weights are a function of the model's bytes,
  // the boxes in the plan and the init settings), without hashing them.
  // The plan is spelled once, with a placeholder of the hash's width that
  // the hash then replaces (the hash covers the text with the placeholder).
  const std::string Placeholder = "0x0000000000000000";
  std::string Body = planSource(P, In, Placeholder);
  soap_search::Sha256 Hasher;
  Hasher.update(Body);
  Hasher.update(In.Target.ModelSha256);
  Hasher.update(In.WeightsSource);
  std::array<uint8_t, 32> Digest = Hasher.final();
  uint64_t Hash = 0;
  for (int I = 0; I < 8; ++I)
    Hash = Hash << 8 | Digest[I];
  size_t At = Body.find(Placeholder + "ull, // plan hash");
  assert(At != std::string::npos && "planSource spells the hash once");
  char HashText[24];
  std::snprintf(HashText, sizeof HashText, "0x%016llx",
                static_cast<unsigned long long>(Hash));
  Body.replace(At, Placeholder.size(), HashText);
  Files["src/plan.cpp"] = std::move(Body);
  // The shards: magic and plan hash, then the plan's weights as they are.
  FileContents Shards("O2SWGHT2");
  for (int I = 0; I < 8; ++I)
    Shards.Text += char(Hash >> (8 * I) & 0xff);
  Shards.Borrowed.push_back(
      llvm::StringRef(P.Weights.data(), P.Weights.size()));
  Files["weights/shards.bin"] = std::move(Shards);

  std::map<std::string, std::string> Vars{
      {"VERSION", In.Version},
      {"MODEL", In.Target.ModelFile},
      {"CLUSTER", In.M.Name},
      {"RANKS", std::to_string(P.NumRanks)},
      {"BACKEND", Cuda ? "cuda" : "cpu"},
      {"CUDA_ARCHITECTURES", llvm::join(Archs, ";")},
      {"OPTIMIZER", In.OptimizerName},
      {"LOSS", In.LossName},
      {"TIME", formatSeconds(P.Prediction.Time)},
  };
  for (size_t I = 0; I < NumEmbeddedFiles; ++I) {
    llvm::StringRef Path = EmbeddedFiles[I].Path;
    std::string Text(EmbeddedFiles[I].Data, EmbeddedFiles[I].Size);
    if (Path.startswith("runtime_lib/")) {
      // The CPU build needs no CUDA sources and the CUDA build no CPU
      // kernels.
      if (Cuda ? Path.startswith("runtime_lib/cpu/")
               : (Path.startswith("runtime_lib/cuda/") ||
                  Path.startswith("runtime_lib/program/nccl/")))
        continue;
      Files[Path.str()] = std::move(Text);
    }
  }
  Files["src/plan.h"] = embeddedText("templates/plan.h");
  Files["src/main.cpp"] = substitute(embeddedText("templates/main.cpp"), Vars);
  Files["CMakeLists.txt"] =
      substitute(embeddedText("templates/CMakeLists.txt.in"), Vars);
  Files["README.md"] = substitute(embeddedText("templates/README.md.in"), Vars);
  Files["model.onnx"] = FileContents::borrow(In.ModelBytes);
  Files["strategy.json"] = In.StrategyText;

  // The manifest: what went in, and the hash of every other file.
  // The large files (weight shards, plan) are hashed on their own threads.
  llvm::json::Object FileHashes;
  std::vector<std::pair<std::string, std::future<std::string>>> Pending;
  for (const auto &[Path, Contents] : Files) {
    if (Path == "model.onnx")
      FileHashes[Path] = In.Target.ModelSha256;
    else if (Contents.size() >= (8u << 20))
      Pending.emplace_back(Path, std::async(std::launch::async, fileSha256,
                                            std::cref(Contents)));
    else
      FileHashes[Path] = fileSha256(Contents);
  }
  for (auto &[Path, Hash] : Pending)
    FileHashes[Path] = Hash.get();
  // Per rank: the planner's peak and what the runner allocates (its arena
  // and message buffer).
  llvm::json::Array PredictedPeak, Allocated, Scratch;
  for (double Bytes : P.Prediction.PeakMemory)
    PredictedPeak.push_back(int64_t(Bytes));
  for (int64_t Bytes : P.ScratchBytes)
    Scratch.push_back(Bytes);
  llvm::json::Array Library;
  for (simulator::DeviceId D = 0; D < In.M.numDevices(); ++D)
    Library.push_back(In.M.deviceType(D).libraryMemory());
  // The runtime's and NCCL's memory the planner counts outside the
  // program's buffers (MemoryModel.h).
  llvm::json::Array Runtime;
  for (double Bytes : P.Prediction.RuntimeMemory)
    Runtime.push_back(int64_t(Bytes));
  for (double Bytes : P.allocatedBytes())
    Allocated.push_back(int64_t(Bytes));
  llvm::json::Object Manifest{
      {"format", "onnx2soap-project"},
      {"version", 1},
      {"generator", "onnx2soap " + In.Version},
      {"model", llvm::json::Object{{"file", In.Target.ModelFile},
                                   {"sha256", In.Target.ModelSha256}}},
      {"cluster", llvm::json::Object{{"name", In.M.Name},
                                     {"devices", int64_t(In.M.numDevices())},
                                     {"sha256", In.Target.ClusterSha256}}},
      {"strategy",
       llvm::json::Object{{"file", "strategy.json"},
                          {"sha256", soap_search::sha256Hex(In.StrategyText)}}},
      {"backend", Cuda ? "cuda" : "cpu"},
      {"ranks", int64_t(P.NumRanks)},
      {"plan_hash", llvm::formatv("{0:x16}", Hash).str()},
      {"predicted_step_seconds", P.Prediction.Time},
      {"predicted_peak_memory", std::move(PredictedPeak)},
      {"allocated_bytes", std::move(Allocated)},
      {"kernel_scratch_bytes", std::move(Scratch)},
      {"library_bytes", std::move(Library)},
      {"runtime_bytes", std::move(Runtime)},
      {"conv_workspace_bytes", P.ConvWorkspaceBytes},
      {"files", std::move(FileHashes)},
  };
  std::string Text;
  llvm::raw_string_ostream OS(Text);
  OS << ir::jsonText(llvm::json::Value(std::move(Manifest))) << "\n";
  OS.flush();
  Files["manifest.json"] = Text;
  return Files;
}

/// The folder -o names as the one absolute path compile both checks and
/// renames: the part that exists resolved by the file system (its links
/// and "..", as in "-o ../out" or "-o DIR/."), the rest plain names.
/// Shown is -o as given, for messages. A ".." below a folder that does not
/// exist is refused: "-o typo/../results", collapsed as text, replaced a
/// results/ folder that was never checked.
static llvm::Expected<std::string> resolveFolder(llvm::StringRef Shown) {
  namespace fs = llvm::sys::fs;
  namespace path = llvm::sys::path;
  llvm::SmallString<256> Existing(Shown);
  if (std::error_code EC = fs::make_absolute(Existing))
    return fail(llvm::formatv("-o {0}: {1}", Shown, EC.message()));
  // The names below the part that exists, last first.
  std::vector<std::string> Missing;
  while (!fs::exists(Existing)) {
    Missing.push_back(path::filename(Existing).str());
    Existing = path::parent_path(Existing).str(); // a copy: it reads itself
  }
  if (!Missing.empty() && !fs::is_directory(Existing))
    return fail(llvm::formatv("-o {0}: {1} is not a folder", Shown, Existing));
  llvm::SmallString<256> Resolved;
  if (std::error_code EC = fs::real_path(Existing, Resolved))
    return fail(llvm::formatv("-o {0}: {1}", Shown, EC.message()));
  for (auto It = Missing.rbegin(); It != Missing.rend(); ++It) {
    if (*It == ".")
      continue;
    if (*It == "..")
      return fail(llvm::formatv("-o {0}: '..' follows a folder that does "
                                "not exist; name the folder without it",
                                Shown));
    path::append(Resolved, *It);
  }
  return Resolved.str().str();
}

/// -o as given, without trailing slashes ("p//" is p).
static std::string shownFolder(const std::string &Given) {
  std::string Shown = llvm::StringRef(Given).rtrim('/').str();
  return Shown.empty() ? Given : Shown;
}

// The folder may be replaced when it is empty, or holds a project written
// before and nothing else (the files its manifest lists, the manifest, and
// a build/ folder): anything else there would be lost.
static llvm::Error checkResolvedFolder(const std::string &Shown,
                                       const std::string &Dir) {
  namespace fs = llvm::sys::fs;
  if (!fs::exists(Dir))
    return llvm::Error::success();
  if (!fs::is_directory(Dir))
    return fail(llvm::formatv("-o {0}: exists and is not a folder", Shown));
  std::error_code EC;
  bool Empty = fs::directory_iterator(Dir, EC) == fs::directory_iterator();
  // A folder that cannot be listed is not taken for an empty one.
  if (EC)
    return fail(
        llvm::formatv("-o {0}: cannot list it: {1}", Shown, EC.message()));
  if (Empty)
    return llvm::Error::success();
  auto NotAProject = [&] {
    return fail(llvm::formatv("-o {0}: the folder is not empty and holds no "
                              "generated project (manifest.json); choose "
                              "another folder",
                              Shown));
  };
  llvm::SmallString<256> Manifest(Dir);
  llvm::sys::path::append(Manifest, "manifest.json");
  if (!fs::is_regular_file(Manifest))
    return NotAProject();
  auto Buffer = llvm::MemoryBuffer::getFile(Manifest, /*IsText=*/true);
  if (!Buffer)
    return NotAProject();
  auto Parsed = ir::parseJson((*Buffer)->getBuffer(), Manifest);
  if (!Parsed) {
    llvm::consumeError(Parsed.takeError());
    return NotAProject();
  }
  const llvm::json::Object *Top = Parsed->getAsObject();
  const llvm::json::Object *Listed = Top ? Top->getObject("files") : nullptr;
  if (!Top ||
      Top->getString("format") != llvm::StringRef("onnx2soap-project") ||
      !Listed)
    return NotAProject();
  // The folders the listed files lie in: any other folder, even an empty
  // one, is someone else's.
  auto Up = [](llvm::StringRef Path) {
    return llvm::sys::path::parent_path(Path, llvm::sys::path::Style::posix);
  };
  llvm::StringSet<> ListedFolders;
  for (const auto &Entry : *Listed)
    for (llvm::StringRef Folder = Up(Entry.first); !Folder.empty();
         Folder = Up(Folder))
      ListedFolders.insert(Folder);
  // Every file and folder below Dir, links included (not followed), but
  // what lies in the build/ folder.
  std::vector<std::string> Others;
  fs::recursive_directory_iterator It(Dir, EC, /*follow_symlinks=*/false), End;
  for (; It != End && !EC; It.increment(EC)) {
    llvm::StringRef Full = It->path();
    std::string Relative = Full.drop_front(Dir.size()).ltrim("/").str();
    fs::file_type Type = It->type();
    // Some file systems do not say in the listing (d_type unknown).
    if (Type == fs::file_type::type_unknown)
      if (llvm::ErrorOr<fs::basic_file_status> Status = It->status())
        Type = Status->type();
    if (Type == fs::file_type::directory_file) {
      if (Relative == "build")
        It.no_push();
      else if (!ListedFolders.contains(Relative))
        Others.push_back(Relative + "/");
      continue;
    }
    if (Relative != "manifest.json" && !Listed->get(Relative))
      Others.push_back(Relative);
  }
  if (EC)
    return fail(
        llvm::formatv("-o {0}: cannot list it: {1}", Shown, EC.message()));
  if (Others.empty())
    return llvm::Error::success();
  // A folder is named only where nothing in it is ("runs/" when empty,
  // else "runs/log.txt").
  llvm::sort(Others);
  std::vector<std::string> Named;
  for (size_t I = 0; I < Others.size(); ++I)
    if (!(llvm::StringRef(Others[I]).endswith("/") && I + 1 < Others.size() &&
          llvm::StringRef(Others[I + 1]).startswith(Others[I])))
      Named.push_back(Others[I]);
  std::string More =
      Named.size() > 1
          ? llvm::formatv(" (and {0} more)", Named.size() - 1).str()
          : "";
  return fail(llvm::formatv("-o {0}: holds {1}{2}, which the project written "
                            "there did not write; move it or choose another "
                            "folder",
                            Shown, Named[0], More));
}

/// The folder -o Shown names, resolved, once it is known it may be
/// replaced.
static llvm::Expected<std::string> checkedFolder(const std::string &Shown) {
  // A link would be replaced by the new tree, the project it points to
  // left as it was.
  if (llvm::sys::fs::is_symlink_file(Shown))
    return fail(llvm::formatv("-o {0}: is a symbolic link; give the folder "
                              "it points to",
                              Shown));
  auto Dir = resolveFolder(Shown);
  if (!Dir)
    return Dir.takeError();
  if (llvm::Error E = checkResolvedFolder(Shown, *Dir))
    return std::move(E);
  return *Dir;
}

llvm::Error checkProjectFolder(const std::string &Given) {
  return checkedFolder(shownFolder(Given)).takeError();
}

llvm::Error writeProject(const std::string &Given, const ProjectFiles &Files) {
  namespace fs = llvm::sys::fs;
  std::string Dir = shownFolder(Given);
  // The path checked is the path renamed. It is absolute:
  // createUniqueDirectory puts a relative name in the system's temporary
  // folder, not beside DIR. The trees beside it get names no folder there
  // has (made, not only chosen, so a compile beside this one cannot take
  // them too): nothing compile did not make is ever removed.
  auto Resolved = checkedFolder(Dir);
  if (!Resolved)
    return Resolved.takeError();
  llvm::SmallString<256> Base(*Resolved);
  // DIR's folder made first, as -o a/b/project asks.
  llvm::StringRef Parent = llvm::sys::path::parent_path(Base);
  if (!Parent.empty())
    if (std::error_code EC = fs::create_directories(Parent))
      return fail(
          llvm::formatv("cannot create {0}: {1}", Parent, EC.message()));
  llvm::SmallString<256> Temp;
  if (std::error_code EC =
          fs::createUniqueDirectory(Base + ".tmp-onnx2soap", Temp))
    return fail(llvm::formatv("cannot create a folder beside {0}: {1}", Dir,
                              EC.message()));
  // Ctrl-C or SIGTERM while the tree is written removes it too.
  rt::RemovedOnSignal HalfTree(Temp.str().str());
  auto WriteAll = [&]() -> llvm::Error {
    for (const auto &[Path, Contents] : Files) {
      llvm::SmallString<256> Full(Temp);
      llvm::sys::path::append(Full, Path);
      if (std::error_code EC =
              fs::create_directories(llvm::sys::path::parent_path(Full)))
        return fail(llvm::formatv("cannot create {0}: {1}",
                                  llvm::sys::path::parent_path(Full),
                                  EC.message()));
      std::error_code EC;
      llvm::raw_fd_ostream OS(Full, EC);
      if (EC)
        return fail(llvm::formatv("cannot write {0}: {1}", Full, EC.message()));
      Contents.forEachPiece([&](llvm::StringRef Piece) { OS << Piece; });
      OS.close();
      if (OS.has_error()) {
        // A full disk: cleared, or the stream aborts when it goes.
        EC = OS.error();
        OS.clear_error();
        return fail(llvm::formatv("cannot write {0}: {1}", Full, EC.message()));
      }
    }
    return llvm::Error::success();
  };
  // On any failure the folder is as it was and no half tree is left.
  if (llvm::Error E = WriteAll()) {
    (void)fs::remove_directories(Temp);
    return E;
  }
  // Swap in the new tree; the old one goes only once the new one is whole.
  // (Renamed onto an empty folder made for it.)
  llvm::SmallString<256> Old;
  if (fs::exists(Base)) {
    std::error_code EC =
        fs::createUniqueDirectory(Base + ".old-onnx2soap", Old);
    if (!EC && (EC = fs::rename(Base, Old)))
      (void)fs::remove(Old);
    if (EC) {
      (void)fs::remove_directories(Temp);
      return fail(llvm::formatv("cannot replace {0}: {1}", Dir, EC.message()));
    }
  }
  if (std::error_code EC = fs::rename(Temp, Base)) {
    if (!Old.empty())
      (void)fs::rename(Old, Base);
    (void)fs::remove_directories(Temp);
    return fail(
        llvm::formatv("cannot move {0} to {1}: {2}", Temp, Dir, EC.message()));
  }
  if (!Old.empty()) {
    // The old tree is not wanted any more, interrupted or not.
    rt::RemovedOnSignal OldTree(Old.str().str());
    (void)fs::remove_directories(Old);
  }
  return llvm::Error::success();
}

} // namespace onnx2soap::codegen
