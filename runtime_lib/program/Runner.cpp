//===- runtime_lib/program/Runner.cpp - Walking a plan -------------------===//
//
// A step: load this rank's regions of the batch, walk the rank's steps in
// plan order, zeroing each gradient and accumulation buffer right before the
// first step that adds into it, then move new running statistics into the
// state boxes. Buffers are whole regions at their plan offsets in one arena
// per rank (buffers whose lifetimes do not meet share memory); copies between
// them are boxes (Backend::copyBox). Every communication call is made in the
// plan's global order, which all ranks share. RunnerImpl.h holds a rank's
// state and the walk of its steps; RunnerReports.cpp the profile, the trace
// and the gathered weights.
//
//===----------------------------------------------------------------------===//
#include "Runner.h"
#include "../Error.h"
#include "../HostBox.h"
#include "RunnerImpl.h"
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>

namespace onnx2soap::rt::program {

namespace {
/// The weight shard file: "O2SWGHT2", the plan hash (8 bytes, little
/// endian), then every distinct box any rank holds of a parameter, state or
/// constant; BufferInfo::WeightOffset is relative to the end of the header.
constexpr char WeightsMagic[8] = {'O', '2', 'S', 'W', 'G', 'H', 'T', '2'};
} // namespace

/// "12884901888 bytes (12.0 GiB)".
static std::string bytesText(size_t Bytes) {
  char Text[64];
  std::snprintf(Text, sizeof Text, "%zu bytes (%.1f GiB)", Bytes,
                double(Bytes) / (1024.0 * 1024.0 * 1024.0));
  return Text;
}

void checkDeviceMemory(const Plan &P, int32_t Rank, size_t Free) {
  size_t Needed = allocatedBytes(P, Rank) + size_t(P.ScratchBytes[Rank]);
  if (Needed > Free)
    fail("device memory",
         "rank " + std::to_string(Rank) +
             "'s buffers and kernel scratch need " + bytesText(Needed) +
             ", the device has " + bytesText(Free) +
             " free (plan with a lower --memory-limit, or use more devices)");
}

/// Sets the attributes P.Attrs[First, First + Count) in Attrs.
static void setAttributes(const Plan &P, int32_t First, int32_t Count,
                          OpAttrs &Attrs) {
  if (First < 0 || Count < 0 || First + Count > P.Attrs.Size)
    fail("plan", "attributes out of range (regenerate the project)");
  for (int32_t A = First; A < First + Count; ++A) {
    const AttrInfo &Attr = P.Attrs[A];
    switch (Attr.Type) {
    case AttrType::Int:
      Attrs.set(Attr.Name, Attr.Int);
      break;
    case AttrType::Float:
      Attrs.set(Attr.Name, Attr.Float);
      break;
    case AttrType::Ints:
      Attrs.set(Attr.Name, std::vector<int64_t>(P.IntValues.Data + Attr.Int,
                                                P.IntValues.Data + Attr.Int +
                                                    Attr.Length));
      break;
    case AttrType::Floats:
      Attrs.set(Attr.Name, std::vector<double>(P.FloatValues.Data + Attr.Int,
                                               P.FloatValues.Data + Attr.Int +
                                                   Attr.Length));
      break;
    case AttrType::String:
      Attrs.set(Attr.Name, std::string(Attr.Text));
      break;
    }
  }
}

void checkRankCount(const Plan &P, const Comm &C) {
  if (C.size() != P.NumRanks)
    fail("train", "this program runs on " + std::to_string(P.NumRanks) +
                      " ranks, it was started on " + std::to_string(C.size()) +
                      " (mpirun -np " + std::to_string(P.NumRanks) + ")");
}

std::vector<std::vector<int>> rankGroups(Table<GroupInfo> Groups,
                                         Table<int32_t> Ranks) {
  std::vector<std::vector<int>> Out;
  for (const GroupInfo &Group : Groups)
    Out.emplace_back(Ranks.Data + Group.First,
                     Ranks.Data + Group.First + Group.Size);
  return Out;
}

Runner::Runner(const Plan &P, Backend &B, Comm &C,
               const std::string &WeightsDir)
    : I(new Impl(P, B, C)) {
  int Rank = C.rank();
  checkRankCount(P, C);
  // The communicators first: NCCL allocates their buffers as it creates
  // them, and the memory check below should see what is left.
  C.setGroups(rankGroups(P.Groups, P.GroupRanks));
  if (std::optional<size_t> Free = B.freeMemory())
    checkDeviceMemory(P, Rank, *Free);
  // Attributes, once: each op's, then each call's that replaces some.
  for (const OpInfo &Op : P.Ops) {
    OpAttrs Attrs;
    setAttributes(P, Op.FirstAttr, Op.NumAttrs, Attrs);
    I->Attrs.push_back(std::move(Attrs));
  }
  I->CallAttrs.assign(P.Calls.Size, -1);
  for (int32_t Id = 0; Id < P.Calls.Size; ++Id) {
    const CallInfo &Call = P.Calls[Id];
    if (Call.NumAttrs == 0)
      continue;
    OpAttrs Attrs = I->Attrs[Call.Op];
    setAttributes(P, Call.FirstAttr, Call.NumAttrs, Attrs);
    I->CallAttrs[Id] = int32_t(I->Attrs.size());
    I->Attrs.push_back(std::move(Attrs));
  }
  // Buffers of this rank in one zero-filled arena, and what each step does
  // with them.
  size_t ArenaBytes = size_t(P.ArenaBytes[Rank]);
  I->Arena = DeviceBuffer(B, ArenaBytes);
  I->Views.assign(P.Buffers.Size, TensorView::absent());
  std::vector<Lifetime> Live = bufferLifetimes(P, Rank);
  I->ZeroedBefore.resize(size_t(P.RankSteps[Rank].Count) + 1);
  for (int32_t Id = 0; Id < P.Buffers.Size; ++Id) {
    const BufferInfo &Info = P.Buffers[Id];
    if (Info.Rank != Rank)
      continue;
    if (Info.Offset < 0 || Info.Offset % BufferAlignment != 0 ||
        size_t(Info.Offset) + bufferBytes(Info) > ArenaBytes)
      fail("plan", "buffer " + std::to_string(Id) + " lies outside rank " +
                       std::to_string(Rank) +
                       "'s arena (regenerate the project)");
    std::vector<int64_t> Dims(Info.Extent, Info.Extent + Info.Dims);
    I->Views[Id] = TensorView::contiguous(
        Info.Type, Dims, static_cast<char *>(I->Arena.data()) + Info.Offset);
    if (isAccumulator(Info.Kind) && Live[Id].First < P.RankSteps[Rank].Count)
      I->ZeroedBefore[size_t(Live[Id].First + 1)].push_back(Id);
    if (Info.Kind == BufferKind::Input)
      I->Loaded.push_back(Id);
    if (Info.Kind == BufferKind::Activation && Info.Tensor == P.LossTensor)
      I->LossParts.push_back(Id);
  }
  // The largest message or packed all-reduce of this rank.
  I->Message = DeviceBuffer(B, messageBufferBytes(P, Rank));
  // A GPU backend zero-fills on its stream: done before any message lands
  // (a rank with nothing to load may receive first).
  B.synchronize();

  // Initial values of parameters, state and constants.
  std::string Path = WeightsDir + "/shards.bin";
  std::ifstream File(Path, std::ios::binary);
  if (!File)
    fail(Path, "cannot open the weight shards (pass --weights DIR)");
  char Magic[8];
  unsigned char HashBytes[8] = {};
  File.read(Magic, 8);
  File.read(reinterpret_cast<char *>(HashBytes), 8);
  uint64_t Hash = 0;
  for (int B = 7; B >= 0; --B)
    Hash = Hash << 8 | HashBytes[B];
  if (!File || std::memcmp(Magic, WeightsMagic, 8) != 0)
    fail(Path, "not an onnx2soap weight shard file");
  if (Hash != P.PlanHash)
    fail(Path, "was written for a different plan (regenerate the project)");
  std::vector<char> Bytes;
  for (int32_t Id = 0; Id < P.Buffers.Size; ++Id) {
    const BufferInfo &Info = P.Buffers[Id];
    if (Info.Rank != Rank || Info.WeightOffset < 0)
      continue;
    Bytes.resize(I->view(Id).byteSize());
    File.seekg(16 + Info.WeightOffset);
    File.read(Bytes.data(), Bytes.size());
    if (!File)
      fail(Path, "is truncated (buffer " + std::to_string(Id) + ")");
    B.copyFromHost(I->data(Id), Bytes.data(), Bytes.size());
  }
}

Runner::~Runner() = default;

size_t Runner::allocatedBytes() const {
  return I->Arena.size() + I->Message.size();
}

void Runner::setBatch(const std::vector<HostTensor> &Inputs,
                      const HostTensor *Labels) {
  const Plan &P = I->P;
  if (Inputs.size() != size_t(P.DataInputs.Size))
    fail("--inputs", "the model has " + std::to_string(P.DataInputs.Size) +
                         " inputs, " + std::to_string(Inputs.size()) +
                         " files were given");
  if ((P.Labels >= 0) != (Labels != nullptr))
    fail("--labels", P.Labels >= 0 ? "this model's loss needs labels"
                                   : "this model computes its own loss");
  I->Batch.assign(P.Tensors.Size, HostTensor());
  auto Take = [&](int32_t Tensor, const HostTensor &Value,
                  const std::string &Option) {
    const TensorInfo &Info = P.Tensors[Tensor];
    std::vector<int64_t> Dims(Info.Dims, Info.Dims + Info.Rank);
    if (Value.Type != Info.Type || Value.Dims != Dims)
      fail(Option, std::string("'") + Info.Name + "' must be " +
                       dtypeName(Info.Type) + " " + formatDims(Dims) +
                       ", the file holds " + dtypeName(Value.Type) + " " +
                       formatDims(Value.Dims));
    I->Batch[Tensor] = Value;
  };
  for (int32_t K = 0; K < P.DataInputs.Size; ++K)
    Take(P.DataInputs[K], Inputs[K], "--inputs");
  if (Labels)
    Take(P.Labels, *Labels, "--labels");
}

void Runner::setDataset(std::shared_ptr<const Dataset> D) {
  const Plan &P = I->P;
  I->Batch.clear();
  I->DataFileOf.assign(P.Tensors.Size, -1);
  for (int32_t K = 0; K < P.DataInputs.Size; ++K)
    I->DataFileOf[P.DataInputs[K]] = K;
  if (P.Labels >= 0)
    I->DataFileOf[P.Labels] = P.DataInputs.Size;
  I->Data = std::move(D);
}

double Runner::step() {
  const Plan &P = I->P;
  Backend &B = I->B;
  int Rank = I->Rank;
  ++Step;
  auto Start = std::chrono::steady_clock::now();
  bool Tracing = I->TraceNext;
  if (Tracing) {
    I->TraceNext = false;
    I->Traced = true;
    I->TraceEvents.clear();
    B.synchronize();
    I->TraceStart = Start = std::chrono::steady_clock::now();
  }
  // Inputs are this rank's regions of the batch; accumulators start at
  // zero, each right before its first step (until then its memory may hold
  // another buffer).
  I->zeroBefore(-1);
  std::vector<char> Host;
  for (int32_t Id : I->Loaded) {
    const BufferInfo &Info = P.Buffers[Id];
    Host.resize(I->view(Id).byteSize());
    if (I->Data) {
      // Step s takes the dataset's samples from (s - 1) * B on.
      int64_t First = (Step - 1) * P.Tensors[Info.Tensor].Dims[0];
      I->Data->readBox(size_t(I->DataFileOf[Info.Tensor]), First, Info.Origin,
                       Info.Extent, Host.data());
    } else {
      const HostTensor &Whole = I->Batch[Info.Tensor];
      if (Whole.Bytes.empty())
        fail("train", "no batch was given (--inputs, --labels or --data)");
      copyHostBox(Host.data(), Whole.Bytes.data(), Whole.Dims, Info.Origin,
                  Info.Extent, Info.Dims, dtypeSize(Info.Type));
    }
    B.copyFromHost(I->data(Id), Host.data(), Host.size());
  }
  const Range &Steps = P.RankSteps[Rank];
  // The wait for the running send or all-reduce, traced as -1 - its index.
  auto FinishRunning = [&] {
    if (I->Running)
      I->traced(Tracing, -1.0 - double(I->Running - &P.Steps[Steps.First]),
                [&] { I->finishRunning(); });
  };
  for (int32_t Local = 0; Local < Steps.Count; ++Local) {
    const StepInfo &S = P.Steps[Steps.First + Local];
    // A send or gradient all-reduce runs beside the compute steps after it
    // until one needs what it holds or the Comm (see runsBeside).
    if (I->Running && !I->runsBeside(S, Local))
      FinishRunning();
    I->zeroBefore(Local);
    I->traced(Tracing, double(Local), [&] { I->run(S, Step); });
  }
  FinishRunning();
  const Range &State = P.RankStateCopies[Rank];
  I->runCopies(State.First, State.Count);
  B.synchronize();
  if (I->Profiling) {
    I->Spent.Total +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - Start)
            .count();
    ++I->Spent.Steps;
  }

  // The loss: the sum of this rank's parts, summed over ranks.
  double Loss = 0;
  for (int32_t Id : I->LossParts) {
    if (P.Buffers[Id].Type == DType::Float64) {
      double Value;
      B.copyToHost(&Value, I->data(Id), sizeof Value);
      Loss += Value;
    } else {
      float Value;
      B.copyToHost(&Value, I->data(Id), sizeof Value);
      Loss += Value;
    }
  }
  return I->C.sumOverRanks(Loss);
}

/// Whether a checkpoint holds the buffer: what training changes and the
/// next step reads.
static bool isPersistent(const BufferInfo &Info) {
  return Info.Kind == BufferKind::Parameter || Info.Kind == BufferKind::State ||
         Info.Kind == BufferKind::OptimizerState;
}

std::vector<NamedBlob> Runner::persistentState() {
  const Plan &P = I->P;
  std::vector<NamedBlob> Result;
  for (int32_t Id = 0; Id < P.Buffers.Size; ++Id) {
    const BufferInfo &Info = P.Buffers[Id];
    if (Info.Rank != I->Rank || !isPersistent(Info))
      continue;
    std::vector<char> Bytes(I->view(Id).byteSize());
    I->B.copyToHost(Bytes.data(), I->data(Id), Bytes.size());
    Result.push_back({"buffer-" + std::to_string(Id), std::move(Bytes)});
  }
  return Result;
}

/// The buffer id of an entry's name "buffer-<id>" (digits only, within
/// int32), or -1.
static int32_t entryBuffer(const std::string &Name) {
  if (Name.rfind("buffer-", 0) != 0 || Name.size() == 7 || Name.size() > 17)
    return -1;
  int64_t Id = 0;
  for (size_t K = 7; K < Name.size(); ++K) {
    if (Name[K] < '0' || Name[K] > '9')
      return -1;
    Id = Id * 10 + (Name[K] - '0');
  }
  return Id > INT32_MAX ? -1 : int32_t(Id);
}

void Runner::restore(int64_t StepsDone, const std::vector<NamedBlob> &State) {
  const Plan &P = I->P;
  // Every entry one of this rank's persistent buffers, each once, and
  // every one of them there: a rank file that lists fewer would leave the
  // rest at their initial values.
  std::vector<char> Restored(size_t(P.Buffers.Size), 0);
  for (const NamedBlob &Blob : State) {
    const std::string &Name = Blob.Name;
    const std::vector<char> &Bytes = Blob.Bytes;
    int32_t Id = entryBuffer(Name);
    if (Id < 0 || Id >= P.Buffers.Size || P.Buffers[Id].Rank != I->Rank ||
        !isPersistent(P.Buffers[Id]) || Bytes.size() != I->view(Id).byteSize())
      fail("checkpoint", "entry '" + Name + "' does not belong to this plan");
    if (Restored[size_t(Id)]++)
      fail("checkpoint", "entry '" + Name + "' is there twice");
    I->B.copyFromHost(I->data(Id), Bytes.data(), Bytes.size());
  }
  for (int32_t Id = 0; Id < P.Buffers.Size; ++Id) {
    const BufferInfo &Info = P.Buffers[Id];
    if (Info.Rank == I->Rank && !Restored[size_t(Id)] && isPersistent(Info))
      fail("checkpoint",
           "entry 'buffer-" + std::to_string(Id) + "' is missing");
  }
  Step = StepsDone;
}

StepBreakdown Runner::breakdown() const { return I->Spent; }

void Runner::startProfiling() {
  I->Profiling = true;
  I->Spent = {};
  I->ForwardSeconds.assign(I->P.Calls.Size, {});
  I->BackwardSeconds.assign(I->P.Calls.Size, {});
}

} // namespace onnx2soap::rt::program
