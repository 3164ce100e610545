//===- codegen/Project.cpp - Writing a generated project ------------------===//
//
// plan.cpp is the only generated C++: the plan's tables as constexpr arrays,
// one row per line with a comment naming what the row is, so a reader can
// follow a rank's schedule in the source. Templates use @NAME@ placeholders.
//
//===----------------------------------------------------------------------===//
#include "codegen/Project.h"
#include "codegen/EmbeddedFiles.h"
#include "ir/JsonText.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"
#include <array>
#include <cassert>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <future>
#include <limits>
#include <set>

namespace onnx2soap::codegen {

using namespace rt::program;

static llvm::Error fail(const llvm::Twine &Message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), Message.str());
}

//===-- Spelling values as C++ ----------------------------------------------

static const char *dtypeEnumerator(rt::DType Type) {
  switch (Type) {
  case rt::DType::Float32:
    return "Float32";
  case rt::DType::Float16:
    return "Float16";
  case rt::DType::BFloat16:
    return "BFloat16";
  case rt::DType::Float64:
    return "Float64";
  case rt::DType::Int8:
    return "Int8";
  case rt::DType::UInt8:
    return "UInt8";
  case rt::DType::Int16:
    return "Int16";
  case rt::DType::UInt16:
    return "UInt16";
  case rt::DType::Int32:
    return "Int32";
  case rt::DType::UInt32:
    return "UInt32";
  case rt::DType::Int64:
    return "Int64";
  case rt::DType::UInt64:
    return "UInt64";
  case rt::DType::Bool:
    return "Bool";
  }
  llvm_unreachable("unknown DType");
}

static std::string quoted(llvm::StringRef Text) {
  std::string Out = "\"";
  for (unsigned char C : Text) {
    if (C == '"' || C == '\\') {
      Out += '\\';
      Out += C;
    } else if (C >= 0x20 && C < 0x7f && C != '?') {
      Out += C;
    } else {
      char Escape[8];
      std::snprintf(Escape, sizeof Escape, "\\%03o", C);
      Out += Escape;
    }
  }
  return Out + "\"";
}

static std::string number(double Value) {
  if (std::isnan(Value))
    return "std::numeric_limits<double>::quiet_NaN()";
  if (std::isinf(Value))
    return Value > 0 ? "std::numeric_limits<double>::infinity()"
                     : "-std::numeric_limits<double>::infinity()";
  char Text[40];
  std::snprintf(Text, sizeof Text, "%.17g", Value);
  std::string Out = Text;
  if (Out.find_first_of(".en") == std::string::npos)
    Out += ".0";
  return Out;
}

static std::string ints(const int64_t *Values, int Count) {
  std::string Out = "{";
  for (int I = 0; I < Count; ++I)
    Out += (I ? ", " : "") + std::to_string(Values[I]);
  return Out + "}";
}

/// "{a, b, c}" from already spelled fields (formatv is too slow for tables
/// of a million rows).
static std::string row(std::initializer_list<llvm::StringRef> Fields) {
  std::string Out = "{";
  bool First = true;
  for (llvm::StringRef Field : Fields) {
    if (!First)
      Out += ", ";
    Out += Field;
    First = false;
  }
  return Out + "}";
}

static std::string str(int64_t Value) { return std::to_string(Value); }

static const char *bufferKindName(BufferKind Kind) {
  switch (Kind) {
  case BufferKind::Activation:
    return "Activation";
  case BufferKind::Gathered:
    return "Gathered";
  case BufferKind::Accumulated:
    return "Accumulated";
  case BufferKind::Gradient:
    return "Gradient";
  case BufferKind::Input:
    return "Input";
  case BufferKind::Parameter:
    return "Parameter";
  case BufferKind::OptimizerState:
    return "OptimizerState";
  case BufferKind::State:
    return "State";
  case BufferKind::Constant:
    return "Constant";
  case BufferKind::Statistics:
    return "Statistics";
  }
  llvm_unreachable("unknown BufferKind");
}

static const char *tensorRoleName(TensorRole Role) {
  switch (Role) {
  case TensorRole::Input:
    return "Input";
  case TensorRole::Parameter:
    return "Parameter";
  case TensorRole::State:
    return "State";
  case TensorRole::Constant:
    return "Constant";
  case TensorRole::Loss:
    return "Loss";
  }
  llvm_unreachable("unknown TensorRole");
}

static const char *attrTypeName(AttrType Type) {
  switch (Type) {
  case AttrType::Int:
    return "Int";
  case AttrType::Float:
    return "Float";
  case AttrType::Ints:
    return "Ints";
  case AttrType::Floats:
    return "Floats";
  case AttrType::String:
    return "String";
  }
  llvm_unreachable("unknown AttrType");
}

static const char *stepKindName(StepKind Kind) {
  switch (Kind) {
  case StepKind::Forward:
    return "Forward";
  case StepKind::StatsForward:
    return "StatsForward";
  case StepKind::Backward:
    return "Backward";
  case StepKind::StatsBackward:
    return "StatsBackward";
  case StepKind::Send:
    return "Send";
  case StepKind::Recv:
    return "Recv";
  case StepKind::AllReduce:
    return "AllReduce";
  case StepKind::Update:
    return "Update";
  }
  llvm_unreachable("unknown StepKind");
}

namespace {
/// Writes one constexpr table; an empty table gets one unused row (C++ has
/// no empty arrays) and a size of 0.
class TableWriter {
public:
  explicit TableWriter(std::string &Out) : Out(Out) {}
  template <typename Rows, typename RowFn>
  void write(llvm::StringRef Type, llvm::StringRef Name, const Rows &Values,
             RowFn Row, llvm::StringRef Empty) {
    Out += ("constexpr " + Type + " " + Name + "[] = {\n").str();
    if (Values.empty())
      Out += ("    " + Empty + ",\n").str();
    size_t Index = 0;
    for (const auto &Value : Values) {
      // The comma goes before a row's trailing comment.
      std::string Text = Row(Value, Index++);
      size_t Comment = std::min(Text.find(" // "), Text.size());
      Out += "    ";
      Out.append(Text, 0, Comment);
      Out += ',';
      Out.append(Text, Comment, std::string::npos);
      Out += '\n';
    }
    Out += "};\n";
    Sizes[Name.str()] = Values.size();
  }
  /// Takes over the sizes of tables Other wrote (into text appended here).
  void adopt(const TableWriter &Other) {
    Sizes.insert(Other.Sizes.begin(), Other.Sizes.end());
  }
  std::string table(llvm::StringRef Name) const {
    return ("{" + Name + ", " + llvm::Twine(Sizes.at(Name.str())) + "}").str();
  }

private:
  std::string &Out;
  std::map<std::string, size_t> Sizes;
};
} // namespace

/// plan.cpp without its hash line; Hash is filled in afterwards.
static std::string planSource(const ProgramPlan &P, const ProjectInputs &In,
                              const std::string &HashText) {
  std::string Out;
  Out += "// Generated by onnx2soap " + In.Version + " for " +
         In.Target.ModelFile + " on " + In.M.Name + " (" +
         std::to_string(P.NumRanks) + " ranks); do not edit.\n";
  Out += "// The plan train walks: every rank's buffers (regions of the "
         "training graph's\n// tensors, shapes fixed here) and its steps in "
         "the planner's schedule order.\n// docs: README.md; the table types: "
         "runtime_lib/program/Plan.h.\n";
  Out += "#include \"plan.h\"\n#include <limits>\n\n";
  Out += "namespace {\nusing namespace onnx2soap::rt;\nusing namespace "
         "onnx2soap::rt::program;\n\n";
  TableWriter W(Out);
  // The second half of the tables is spelled on another thread.
  std::string Second;
  Second.reserve(P.Steps.size() * 170 + P.Copies.size() * 64 +
                 P.Operands.size() * 12 + (1 << 16));
  TableWriter W2(Second);
  auto SecondHalf = [&] {
    W2.write(
        "int32_t", "Operands", P.Operands,
        [](int32_t V, size_t) { return std::to_string(V); }, "0");
    W2.write(
        "CopyInfo", "Copies", P.Copies,
        [](const CopyInfo &C, size_t Index) {
          return row({str(C.From), str(C.To), C.Add ? "true" : "false",
                      str(C.Dims), ints(C.FromOrigin, C.Dims),
                      ints(C.ToOrigin, C.Dims), ints(C.Extent, C.Dims),
                      str(C.Offset)});
        },
        "{}");
    // Steps, rank by rank.
    std::vector<int32_t> RankOfStep(P.Steps.size(), 0);
    for (size_t Rank = 0; Rank < P.RankSteps.size(); ++Rank)
      for (int32_t S = P.RankSteps[Rank].First;
           S < P.RankSteps[Rank].First + P.RankSteps[Rank].Count; ++S)
        RankOfStep[S] = Rank;
    W2.write(
        "StepInfo", "Steps", P.Steps,
        [&](const StepInfo &S, size_t Index) {
          return row({std::string("StepKind::") + stepKindName(S.Kind),
                      str(S.Call), str(S.Peer), str(S.Group),
                      std::string("DType::") + dtypeEnumerator(S.Type),
                      str(S.Elements), str(S.FirstCopy), str(S.NumCopies),
                      str(S.FirstPostCopy), str(S.NumPostCopies), str(S.Buffer),
                      str(S.Gradient),
                      row({str(S.State[0]), str(S.State[1]), str(S.State[2])}),
                      str(S.NumState), quoted(S.Label)}) +
                 " // rank " + str(RankOfStep[Index]);
        },
        "{}");
    W2.write(
        "GroupInfo", "Groups", P.Groups,
        [](const GroupInfo &G, size_t) {
          return llvm::formatv("{{{0}, {1}}", G.First, G.Size).str();
        },
        "{0, 0}");
    W2.write(
        "int32_t", "GroupRanks", P.GroupRanks,
        [](int32_t V, size_t) { return std::to_string(V); }, "0");
    W2.write(
        "Range", "RankSteps", P.RankSteps,
        [](const Range &R, size_t Index) {
          return llvm::formatv("{{{0}, {1}} // rank {2}", R.First, R.Count,
                               Index)
              .str();
        },
        "{0, 0}");
    W2.write(
        "Range", "RankStateCopies", P.RankStateCopies,
        [](const Range &R, size_t Index) {
          return llvm::formatv("{{{0}, {1}} // rank {2}", R.First, R.Count,
                               Index)
              .str();
        },
        "{0, 0}");
    W2.write(
        "int64_t", "ArenaBytes", P.ArenaBytes,
        [](int64_t V, size_t Index) {
          return std::to_string(V) + " // rank " + std::to_string(Index);
        },
        "0");
    W2.write(
        "int64_t", "ScratchBytes", P.ScratchBytes,
        [](int64_t V, size_t Index) {
          return std::to_string(V) + " // rank " + std::to_string(Index);
        },
        "0");
    W2.write(
        "int32_t", "DataInputs", P.DataInputs,
        [](int32_t V, size_t) { return std::to_string(V); }, "0");
    W2.write(
        "double", "PredictedBytes", P.PredictedBytes,
        [](double V, size_t) { return number(V); }, "0.0");
    W2.write(
        "int32_t", "ProfilePairs", P.ProfilePairs,
        [](int32_t V, size_t) { return std::to_string(V); }, "0");
    W2.write(
        "GroupInfo", "ProfileGroups", P.ProfileGroups,
        [](const GroupInfo &G, size_t) {
          return llvm::formatv("{{{0}, {1}}", G.First, G.Size).str();
        },
        "{0, 0}");
    W2.write(
        "int32_t", "ProfileGroupRanks", P.ProfileGroupRanks,
        [](int32_t V, size_t) { return std::to_string(V); }, "0");
    W2.write(
        "const char *", "DeviceNames", P.DeviceNames,
        [](const char *Name, size_t Index) {
          return quoted(Name) + " // rank " + std::to_string(Index);
        },
        "\"\"");
  };
  std::future<void> Pending = std::async(std::launch::async, SecondHalf);
  Out.reserve(P.Buffers.size() * 120 + P.Calls.size() * 320 + (1 << 20));

  W.write(
      "TensorInfo", "Tensors", P.Tensors,
      [](const TensorInfo &T, size_t) {
        return llvm::formatv("{{{0}, TensorRole::{1}, DType::{2}, {3}, {4}}",
                             quoted(T.Name), tensorRoleName(T.Role),
                             dtypeEnumerator(T.Type), T.Rank,
                             ints(T.Dims, T.Rank))
            .str();
      },
      "{\"\", TensorRole::Input, DType::Float32, 0, {}}");
  W.write(
      "OpInfo", "Ops", P.Ops,
      [](const OpInfo &O, size_t Index) {
        return llvm::formatv("{{OpKind::{0}, {1}, {2}, {3}} // op {4}",
                             rt::opKindName(O.Kind), quoted(O.Name),
                             O.FirstAttr, O.NumAttrs, Index)
            .str();
      },
      "{OpKind::Add, \"\", 0, 0}");
  W.write(
      "AttrInfo", "Attrs", P.Attrs,
      [](const AttrInfo &A, size_t) {
        return llvm::formatv(
                   "{{{0}, AttrType::{1}, {2}, {3}, {4}, {5}}", quoted(A.Name),
                   attrTypeName(A.Type), A.Int, number(A.Float), A.Length,
                   A.Type == AttrType::String ? quoted(A.Text) : "nullptr")
            .str();
      },
      "{\"\", AttrType::Int, 0, 0.0, 0, nullptr}");
  W.write(
      "int64_t", "IntValues", P.IntValues,
      [](int64_t V, size_t) { return std::to_string(V); }, "0");
  W.write(
      "double", "FloatValues", P.FloatValues,
      [](double V, size_t) { return number(V); }, "0.0");
  W.write(
      "BufferInfo", "Buffers", P.Buffers,
      [&](const BufferInfo &B, size_t Index) {
        std::string What =
            B.Tensor >= 0 ? std::string(P.Tensors[B.Tensor].Name) : "";
        return row({str(B.Rank),
                    std::string("BufferKind::") + bufferKindName(B.Kind),
                    std::string("DType::") + dtypeEnumerator(B.Type),
                    str(B.Tensor), str(B.Dims), ints(B.Extent, B.Dims),
                    ints(B.Origin, B.Dims), str(B.WeightOffset),
                    str(B.Offset)}) +
               " // " + str(Index) + (What.empty() ? "" : " ") + What;
      },
      "{0, BufferKind::Activation, DType::Float32, -1, 0, {}, {}, -1, 0}");
  W.write(
      "CallInfo", "Calls", P.Calls,
      [&](const CallInfo &C, size_t Index) {
        int Rank =
            C.Sharded ? P.Buffers[P.Operands[C.FirstOperand + C.NumInputs]].Dims
                      : 0;
        return row({str(C.Op), str(C.Partition), str(C.FirstOperand),
                    str(C.NumInputs), str(C.NumOutputs),
                    C.HasBackward ? "true" : "false",
                    C.Flags == CallFlags::GlobalStatistics
                        ? "CallFlags::GlobalStatistics"
                        : "CallFlags::None",
                    number(C.Scale), C.SeedsLossGradient ? "true" : "false",
                    quoted(C.ProfileKey), str(C.Statistics),
                    str(C.GradientSums), str(C.StatisticsCount),
                    C.Sharded ? "true" : "false", ints(C.GlobalOffset, Rank),
                    ints(C.GlobalDims, Rank), str(C.FirstAttr),
                    str(C.NumAttrs)}) +
               " // call " + str(Index) + ": " + P.Ops[C.Op].Name;
      },
      "{}");
  Pending.get();
  Out += Second;
  W.adopt(W2);
  Out += "} // namespace\n\n";

  const rt::OptimizerConfig &O = P.Optimizer;
  const char *Kind = O.Kind == rt::OptimizerKind::Sgd    ? "Sgd"
                     : O.Kind == rt::OptimizerKind::Adam ? "Adam"
                                                         : "AdamW";
  Out += "const onnx2soap::rt::program::Plan &trainingPlan() {\n";
  Out += "  static const Plan P = {\n";
  Out += "      " + quoted("onnx2soap " + In.Version) + ",\n";
  Out += "      " + quoted(In.Target.ModelFile) + ",\n";
  Out += "      " + HashText + "ull, // plan hash\n";
  Out += "      " + std::to_string(P.NumRanks) + ", // ranks\n";
  Out += "      " + quoted(P.DeviceType) + ", // device type\n";
  Out += "      " + std::to_string(P.ConvWorkspaceBytes) +
         ", // convolution workspace limit, bytes\n";
  Out += llvm::formatv("      {{OptimizerKind::{0}, {1}, {2}, {3}, {4}, {5}, "
                       "{6}, {7}, {8}},\n",
                       Kind, number(O.LearningRate), number(O.Momentum),
                       number(O.Dampening), O.Nesterov ? "true" : "false",
                       number(O.WeightDecay), number(O.Beta1), number(O.Beta2),
                       number(O.Epsilon))
             .str();
  for (const char *Name :
       {"PredictedBytes", "Tensors", "Ops", "Attrs", "IntValues", "FloatValues",
        "Buffers", "Calls", "Operands", "Copies", "Steps", "Groups",
        "GroupRanks", "RankSteps", "RankStateCopies", "ArenaBytes",
        "ScratchBytes"})
    Out += "      " + W.table(Name) + ",\n";
  Out += "      " + std::to_string(P.LossTensor) + ", // loss\n";
  Out += "      " + W.table("DataInputs") + ",\n";
  Out += "      " + std::to_string(P.Labels) + ", // labels\n";
  for (const char *Name :
       {"DeviceNames", "ProfilePairs", "ProfileGroups", "ProfileGroupRanks"})
    Out += "      " + W.table(Name) + ",\n";
  Out += "  };\n  return P;\n}\n";
  return Out;
}

static std::string substitute(std::string Text,
                              const std::map<std::string, std::string> &Vars) {
  for (const auto &[Name, Value] : Vars) {
    std::string Key = "@" + Name + "@";
    for (size_t At = Text.find(Key); At != std::string::npos;
         At = Text.find(Key, At + Value.size()))
      Text.replace(At, Key.size(), Value);
  }
  return Text;
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
      {"TIME", llvm::formatv("{0:g}", P.Prediction.Time).str()},
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

llvm::Error writeProject(const std::string &Dir, const ProjectFiles &Files) {
  namespace fs = llvm::sys::fs;
  if (fs::exists(Dir)) {
    if (!fs::is_directory(Dir))
      return fail(llvm::formatv("-o {0}: exists and is not a folder", Dir));
    std::error_code EC;
    bool Empty = fs::directory_iterator(Dir, EC) == fs::directory_iterator();
    llvm::SmallString<256> Manifest(Dir);
    llvm::sys::path::append(Manifest, "manifest.json");
    if (!Empty && !fs::exists(Manifest))
      return fail(llvm::formatv("-o {0}: the folder is not empty and holds no "
                                "generated project (manifest.json); choose "
                                "another folder",
                                Dir));
  }
  llvm::SmallString<256> Temp(Dir);
  while (!Temp.empty() && llvm::sys::path::is_separator(Temp.back()))
    Temp.pop_back();
  Temp += ".tmp-onnx2soap";
  if (fs::exists(Temp))
    if (std::error_code EC = fs::remove_directories(Temp))
      return fail(llvm::formatv("cannot remove {0}: {1}", Temp, EC.message()));
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
    if (OS.has_error())
      return fail(
          llvm::formatv("cannot write {0}: {1}", Full, OS.error().message()));
  }
  // Swap in the new tree; the old one goes only once the new one is whole.
  llvm::SmallString<256> Old(Dir);
  while (!Old.empty() && llvm::sys::path::is_separator(Old.back()))
    Old.pop_back();
  Old += ".old-onnx2soap";
  if (fs::exists(Old))
    (void)fs::remove_directories(Old);
  if (fs::exists(Dir))
    if (std::error_code EC = fs::rename(Dir, Old))
      return fail(llvm::formatv("cannot replace {0}: {1}", Dir, EC.message()));
  if (std::error_code EC = fs::rename(Temp, Dir))
    return fail(
        llvm::formatv("cannot move {0} to {1}: {2}", Temp, Dir, EC.message()));
  if (fs::exists(Old))
    (void)fs::remove_directories(Old);
  return llvm::Error::success();
}

} // namespace onnx2soap::codegen
