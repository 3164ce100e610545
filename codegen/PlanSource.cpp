//===- codegen/PlanSource.cpp - A ProgramPlan spelled as plan.cpp ---------===//
//
// plan.cpp is the only generated C++: the plan's tables as constexpr arrays,
// one row per line with a comment naming what the row is, so a reader can
// follow a rank's schedule in the source. Rows are spelled by hand, not by
// formatv, which is too slow for tables of a million rows.
//
//===----------------------------------------------------------------------===//
#include "codegen/PlanSource.h"
#include "llvm/Support/FormatVariadic.h"
#include <cmath>
#include <cstdio>
#include <future>
#include <limits>

namespace onnx2soap::codegen {

using namespace rt::program;

//===-- Spelling values as C++ --------------------------------------------===//

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

/// C as a C++ octal escape: a backslash and three octal digits.
static void appendOctal(std::string &Out, unsigned char C) {
  char Escape[8];
  std::snprintf(Escape, sizeof Escape, "\\%03o", C);
  Out += Escape;
}

static std::string quoted(llvm::StringRef Text) {
  std::string Out = "\"";
  for (size_t I = 0; I < Text.size(); ++I) {
    unsigned char C = Text[I];
    // A "//" is spelled "/\057": a row's trailing comment is found by its
    // " // " (TableWriter::write), which a name must not hold.
    bool SecondSlash = C == '/' && I > 0 && Text[I - 1] == '/';
    if (C == '"' || C == '\\') {
      Out += '\\';
      Out += C;
    } else if (C >= 0x20 && C < 0x7f && C != '?' && !SecondSlash) {
      Out += C;
    } else {
      appendOctal(Out, C);
    }
  }
  return Out + "\"";
}

/// Text for a // comment: a backslash, which at a line's end would splice
/// the next row into the comment, and control characters (a newline would
/// end it) spelled as octal escapes.
static std::string commented(llvm::StringRef Text) {
  std::string Out;
  for (unsigned char C : Text) {
    if (C >= 0x20 && C < 0x7f && C != '\\')
      Out += C;
    else
      appendOctal(Out, C);
  }
  return Out;
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

std::string planSource(const ProgramPlan &P, const ProjectInputs &In,
                       const std::string &HashText) {
  std::string Out;
  Out += "// Generated by onnx2soap " + In.Version + " for " +
         commented(In.Target.ModelFile) + " on " + commented(In.M.Name) + " (" +
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
        return llvm::formatv(
                   "{{{0}, TensorRole::{1}, DType::{2}, {3}, {4}, {5}}",
                   quoted(T.Name), tensorRoleName(T.Role),
                   dtypeEnumerator(T.Type), T.Rank, ints(T.Dims, T.Rank),
                   T.SampleDim)
            .str();
      },
      "{\"\", TensorRole::Input, DType::Float32, 0, {}, 0}");
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
               " // " + str(Index) + (What.empty() ? "" : " ") +
               commented(What);
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
               " // call " + str(Index) + ": " + commented(P.Ops[C.Op].Name);
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

} // namespace onnx2soap::codegen
