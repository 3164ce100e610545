//===- codegen/ProgramPlan.cpp - Deriving a generated program's plan ------===//
//
// Three passes over the training graph under the strategy, then one over
// the simulated schedule:
//   1. every non-activation tensor a rank reads (parameters, state,
//      constants) gets one box per rank: the bounding box of the regions its
//      partitions there read, with gradient and optimizer-state boxes for
//      trainable parameters;
//   2. every partition gets its output (and output-gradient) buffers;
//   3. every partition input is bound: straight to a producer's buffer when
//      one local producer partition wrote exactly the needed region, else to
//      a gathered (or, behind a Reduction split, summed) buffer filled by
//      local copies and received messages;
//   4. the simulator's tasks, in their simulated order, become each rank's
//      steps: a transfer becomes a Send on one rank and a Recv on the other,
//      an all-reduce one step on each member.
// This file runs them (Builder::run), with the tensor table and the calls;
// passes 1-3 are in PlanBuffers.cpp, pass 4 in PlanSteps.cpp, the initial
// weight shards in PlanWeights.cpp (PlanBuilder.h lists the parts).
//
//===----------------------------------------------------------------------===//
#include "codegen/ProgramPlan.h"
#include "codegen/BufferLayout.h"
#include "codegen/PlanBuilder.h"
#include "simulator/ProfileCostModel.h"
#include <algorithm>
#include <cmath>

namespace onnx2soap::codegen {
namespace detail {

int32_t Builder::tensorIndex(ir::TensorId Id, rt::program::TensorRole Role) {
  auto [It, New] = TensorIndex.insert({Id, int32_t(Out.Tensors.size())});
  if (!New)
    return It->second;
  TensorOfIndex.push_back(Id);
  const ir::Tensor &Value = G.tensor(Id);
  rt::program::TensorInfo Info{};
  Info.Name = Out.intern(Value.Name);
  Info.Role = Role;
  Info.Type = toRuntime(Value.Type.Type);
  Info.Rank = Value.Type.rank();
  for (unsigned D = 0; D < Value.Type.rank(); ++D)
    Info.Dims[D] = Value.Type.Dims[D];
  Info.SampleDim = Value.BatchDim > 0 ? Value.BatchDim : 0;
  Out.Tensors.push_back(Info);
  return It->second;
}

int32_t Builder::addBuffer(DeviceId Rank, BufferKind Kind, ir::TensorId Tensor,
                           llvm::ArrayRef<ir::Interval> Region,
                           ir::DType Type) {
  rt::program::BufferInfo Info{};
  Info.Rank = Rank;
  Info.Kind = Kind;
  Info.Type = toRuntime(Type);
  Info.Tensor = -1;
  if (Tensor != ir::NoTensor) {
    auto It = TensorIndex.find(Tensor);
    if (It != TensorIndex.end())
      Info.Tensor = It->second;
  }
  Info.WeightOffset = -1;
  Info.Dims = Region.size();
  for (unsigned D = 0; D < Region.size(); ++D) {
    Info.Extent[D] = Region[D].size();
    Info.Origin[D] = Region[D].Begin;
  }
  Out.Buffers.push_back(Info);
  return Out.Buffers.size() - 1;
}

CopyInfo Builder::copy(int32_t From, llvm::ArrayRef<ir::Interval> FromRegion,
                       int32_t To, llvm::ArrayRef<ir::Interval> ToRegion,
                       llvm::ArrayRef<ir::Interval> Box, bool Add,
                       int64_t Offset) const {
  CopyInfo C{};
  C.From = From;
  C.To = To;
  C.Add = Add;
  C.Dims = Box.size();
  C.Offset = Offset;
  for (unsigned D = 0; D < Box.size(); ++D) {
    C.Extent[D] = Box[D].size();
    C.FromOrigin[D] = From >= 0 ? Box[D].Begin - FromRegion[D].Begin : 0;
    C.ToOrigin[D] = To >= 0 ? Box[D].Begin - ToRegion[D].Begin : 0;
  }
  return C;
}

int32_t Builder::group(llvm::ArrayRef<DeviceId> Devices) {
  std::vector<DeviceId> Sorted(Devices.begin(), Devices.end());
  std::sort(Sorted.begin(), Sorted.end());
  auto [It, New] = GroupIndex.insert({Sorted, int32_t(Out.Groups.size())});
  if (New) {
    Out.Groups.push_back(
        {int32_t(Out.GroupRanks.size()), int32_t(Sorted.size())});
    for (DeviceId D : Sorted)
      Out.GroupRanks.push_back(D);
  }
  return It->second;
}

void Builder::makeCalls() {
  for (const ir::Op &O : G.ops()) {
    if (WeightOnly[O.Id])
      continue;
    const ParallelConfig &C = S[O.Id];
    bool HasBackward = T.BackwardInputs[O.Id] != 0;
    bool Global = needsGlobalStatistics(O, C);
    const ir::TensorType &OutType = G.tensor(O.Outputs[0]).Type;
    for (unsigned P = 0; P < C.numPartitions(); ++P) {
      rt::program::CallInfo Call{};
      Call.Op = O.Id;
      Call.Partition = P;
      Call.FirstOperand = Out.Operands.size();
      Call.NumInputs = O.Inputs.size();
      Call.NumOutputs = O.Outputs.size();
      Call.HasBackward = HasBackward;
      Call.Flags = Global ? rt::program::CallFlags::GlobalStatistics
                          : rt::program::CallFlags::None;
      Call.Scale = 1.0;
      Call.SeedsLossGradient = HasBackward && O.Outputs[0] == T.LossTensor;
      Call.Statistics = Call.GradientSums = -1;
      if (C.Reduction > 1 && OutType.rank() == 0 &&
          O.Attrs.getString("reduction", "mean") == "mean") {
        ir::Interval Slice = simulator::reductionSlice(G, O, C, P);
        int64_t Extent = ir::parallelDims(G, O).ReductionExtent;
        Call.Scale = double(Slice.size()) / double(Extent);
      }
      ir::Region Region = simulator::outputRegion(G, O, C, P);
      Call.FirstAttr = Out.Attrs.size();
      if (readsPositions(O.Kind)) {
        ir::Attributes Local =
            localAttributes(O, Region, Inputs[O.Id][P][0].Needed);
        for (size_t A = 0; A < Local.entries().size(); ++A)
          if (Local.entries()[A] != O.Attrs.entries()[A])
            addAttribute(Local.entries()[A].first, Local.entries()[A].second);
      }
      Call.NumAttrs = Out.Attrs.size() - Call.FirstAttr;
      Call.ProfileKey = Out.intern(simulator::profileKey(
          {G, O, Region, simulator::reductionSlice(G, O, C, P)}));
      Call.Sharded = !sameRegion(Region, ir::fullRegion(OutType.Dims));
      for (unsigned D = 0; D < OutType.rank(); ++D) {
        Call.GlobalOffset[D] = Region[D].Begin;
        Call.GlobalDims[D] = OutType.Dims[D];
      }
      if (Global) {
        int64_t Channels = Region[1].size();
        ir::Region Stats{{0, 2}, {0, Channels}};
        Call.Statistics = addBuffer(C.device(P), BufferKind::Statistics,
                                    ir::NoTensor, Stats, ir::DType::Float32);
        if (HasBackward)
          Call.GradientSums =
              addBuffer(C.device(P), BufferKind::Statistics, ir::NoTensor,
                        Stats, ir::DType::Float32);
        Call.StatisticsCount = OutType.numElements() / OutType.Dims[1];
      }
      for (const Binding &B : Inputs[O.Id][P])
        Out.Operands.push_back(B.Buffer);
      for (int32_t Buffer : Outputs[O.Id][P])
        Out.Operands.push_back(Buffer);
      if (HasBackward) {
        for (int32_t Buffer : OutGrads[O.Id][P])
          Out.Operands.push_back(Buffer);
        for (const Binding &B : Inputs[O.Id][P])
          Out.Operands.push_back(B.Gradient);
      }
      Out.Calls.push_back(Call);
    }
    // New running statistics go to the state boxes after the step.
    uint32_t StateInputs = ir::opKindInfo(O.Kind).StateInputs;
    unsigned Output = 1;
    for (unsigned Slot = 0; Slot < O.Inputs.size() && StateInputs; ++Slot) {
      if (!(StateInputs >> Slot & 1))
        continue;
      if (Output < O.Outputs.size() && O.Inputs[Slot] != ir::NoTensor)
        for (unsigned P = 0; P < C.numPartitions(); ++P) {
          const Box &Held = Boxes.at({O.Inputs[Slot], C.device(P)});
          ir::Region From = written(O.Id, Output, P);
          StateCopies[C.device(P)].push_back(copy(Outputs[O.Id][P][Output],
                                                  From, Held.Buffer,
                                                  Held.Region, From, false));
        }
      ++Output;
    }
  }
  // Weight-only ops: one whole call per rank that needs them.
  for (const ir::Op &O : G.ops()) {
    if (!WeightOnly[O.Id])
      continue;
    bool HasBackward = T.BackwardInputs[O.Id] != 0;
    for (auto &[Rank, CallIndex] : WeightOnlyCalls[O.Id]) {
      rt::program::CallInfo Call{};
      Call.Op = O.Id;
      Call.Partition = 0;
      Call.ProfileKey = Out.intern(simulator::profileKey(
          {G, O, ir::fullRegion(G.tensor(O.Outputs[0]).Type.Dims),
           simulator::reductionSlice(G, O, S[O.Id], 0)}));
      Call.FirstOperand = Out.Operands.size();
      Call.NumInputs = O.Inputs.size();
      Call.NumOutputs = O.Outputs.size();
      Call.HasBackward = HasBackward;
      Call.Flags = rt::program::CallFlags::None;
      Call.Scale = 1.0;
      Call.Statistics = Call.GradientSums = -1;
      auto BoxOf = [&, Rank = Rank](ir::TensorId Id) -> const Box * {
        if (Id == ir::NoTensor)
          return nullptr;
        auto It = Boxes.find({Id, Rank});
        return It == Boxes.end() ? nullptr : &It->second;
      };
      for (ir::TensorId In : O.Inputs)
        Out.Operands.push_back(BoxOf(In) ? BoxOf(In)->Buffer : -1);
      for (ir::TensorId Output : O.Outputs)
        Out.Operands.push_back(BoxOf(Output)->Buffer);
      if (HasBackward) {
        for (ir::TensorId Output : O.Outputs)
          Out.Operands.push_back(BoxOf(Output)->Gradient);
        for (unsigned Slot = 0; Slot < O.Inputs.size(); ++Slot)
          Out.Operands.push_back((T.BackwardInputs[O.Id] >> Slot & 1) &&
                                         BoxOf(O.Inputs[Slot])
                                     ? BoxOf(O.Inputs[Slot])->Gradient
                                     : -1);
      }
      CallIndex = Out.Calls.size();
      Out.Calls.push_back(Call);
    }
  }
}

void Builder::addAttribute(const std::string &Name,
                           const ir::AttrValue &Value) {
  rt::program::AttrInfo A{};
  A.Name = Out.intern(Name);
  if (auto *I = std::get_if<int64_t>(&Value)) {
    A.Type = rt::program::AttrType::Int;
    A.Int = *I;
  } else if (auto *F = std::get_if<double>(&Value)) {
    A.Type = rt::program::AttrType::Float;
    A.Float = *F;
  } else if (auto *L = std::get_if<ir::IntList>(&Value)) {
    A.Type = rt::program::AttrType::Ints;
    A.Int = Out.IntValues.size();
    A.Length = L->size();
    Out.IntValues.insert(Out.IntValues.end(), L->begin(), L->end());
  } else if (auto *L = std::get_if<ir::FloatList>(&Value)) {
    A.Type = rt::program::AttrType::Floats;
    A.Int = Out.FloatValues.size();
    A.Length = L->size();
    Out.FloatValues.insert(Out.FloatValues.end(), L->begin(), L->end());
  } else {
    A.Type = rt::program::AttrType::String;
    A.Text = Out.intern(std::get<std::string>(Value));
  }
  Out.Attrs.push_back(A);
}

llvm::Error Builder::run(const simulator::Simulator &Sim) {
  const simulator::TaskGraph &TG = Sim.graph();
  Out.NumRanks = M.numDevices();
  Out.DeviceType = M.numDevices() ? M.deviceType(0).Name : "";
  for (simulator::DeviceId D = 0; D < M.numDevices(); ++D)
    Out.DeviceNames.push_back(Out.intern(M.device(D).Name));
  Out.Optimizer = Options.Optimizer;
  // The planner counted each device's own workspace: the smallest keeps
  // every rank within its count.
  Out.ConvWorkspaceBytes = INT64_MAX;
  for (simulator::DeviceId D = 0; D < M.numDevices(); ++D)
    Out.ConvWorkspaceBytes =
        std::min(Out.ConvWorkspaceBytes, M.deviceType(D).ConvWorkspace);
  Out.Prediction = Sim.report();
  Out.PredictedBytes.assign(Out.Prediction.BytesSent.begin(),
                            Out.Prediction.BytesSent.end());
  for (double Bytes : Out.Prediction.KernelScratch)
    Out.ScratchBytes.push_back(int64_t(std::ceil(Bytes)));
  PerRank.resize(Out.NumRanks);
  StateCopies.resize(Out.NumRanks);

  WeightOnly = simulator::weightOnlyOps(G);
  for (const ir::Op &O : G.ops())
    if (!WeightOnly[O.Id])
      if (llvm::Error E = checkRunnable(T, O, S[O.Id]))
        return E;
  // Data inputs and labels first, so their indices are stable.
  for (ir::TensorId In : G.inputs()) {
    int32_t Index = tensorIndex(In, rt::program::TensorRole::Input);
    if (In == T.Labels)
      Out.Labels = Index;
    else
      Out.DataInputs.push_back(Index);
  }
  tensorIndex(T.LossTensor, rt::program::TensorRole::Loss);
  Out.LossTensor = TensorIndex.at(T.LossTensor);

  // Ops and attributes.
  for (const ir::Op &O : G.ops()) {
    rt::program::OpInfo Info{};
    Info.Kind = static_cast<rt::OpKind>(static_cast<uint8_t>(O.Kind));
    Info.Name = Out.intern(O.Name);
    Info.FirstAttr = Out.Attrs.size();
    for (const auto &[Name, Value] : O.Attrs.entries())
      addAttribute(Name, Value);
    Info.NumAttrs = Out.Attrs.size() - Info.FirstAttr;
    Out.Ops.push_back(Info);
  }

  if (llvm::Error E = makeBoxes())
    return E;
  makeOutputs();
  if (llvm::Error E = bindInputs())
    return E;
  makeCalls();
  if (llvm::Error E = makeSteps(TG))
    return E;
  makeProfileComm();
  return makeWeights();
}

} // namespace detail

using detail::Builder;

std::vector<double> ProgramPlan::allocatedBytes() const {
  rt::program::Plan P = view("", "", 0);
  std::vector<double> Bytes(NumRanks);
  for (int32_t Rank = 0; Rank < NumRanks; ++Rank)
    Bytes[Rank] = double(rt::program::allocatedBytes(P, Rank));
  return Bytes;
}

rt::program::Plan ProgramPlan::view(const char *Generator,
                                    const char *ModelName,
                                    uint64_t Hash) const {
  auto Of = [](const auto &Vector) {
    using T = typename std::decay_t<decltype(Vector)>::value_type;
    return rt::program::Table<T>{Vector.data(), int32_t(Vector.size())};
  };
  rt::program::Plan P{};
  P.Generator = Generator;
  P.ModelName = ModelName;
  P.PlanHash = Hash;
  P.NumRanks = NumRanks;
  P.DeviceType = DeviceType.c_str();
  P.ConvWorkspaceBytes = ConvWorkspaceBytes;
  P.Optimizer = Optimizer;
  P.PredictedBytes = Of(PredictedBytes);
  P.Tensors = Of(Tensors);
  P.Ops = Of(Ops);
  P.Attrs = Of(Attrs);
  P.IntValues = Of(IntValues);
  P.FloatValues = Of(FloatValues);
  P.Buffers = Of(Buffers);
  P.Calls = Of(Calls);
  P.Operands = Of(Operands);
  P.Copies = Of(Copies);
  P.Steps = Of(Steps);
  P.Groups = Of(Groups);
  P.GroupRanks = Of(GroupRanks);
  P.RankSteps = Of(RankSteps);
  P.RankStateCopies = Of(RankStateCopies);
  P.ArenaBytes = Of(ArenaBytes);
  P.ScratchBytes = Of(ScratchBytes);
  P.LossTensor = LossTensor;
  P.DataInputs = Of(DataInputs);
  P.DeviceNames = Of(DeviceNames);
  P.ProfilePairs = Of(ProfilePairs);
  P.ProfileGroups = Of(ProfileGroups);
  P.ProfileGroupRanks = Of(ProfileGroupRanks);
  P.Labels = Labels;
  return P;
}

llvm::Expected<ProgramPlan> buildProgramPlan(const ir::TrainingGraph &T,
                                             const simulator::Strategy &S,
                                             const simulator::Machine &M,
                                             const simulator::CostModel &Cost,
                                             const PlanOptions &Options) {
  if (llvm::Error E = checkKernelTypes(T))
    return E;
  if (llvm::Error E = simulator::checkStrategy(T.G, S, M.numDevices()))
    return E;
  simulator::Simulator Sim(T, M, Cost, Options.Sim);
  Sim.simulate(S);
  ProgramPlan Plan;
  Builder B(T, S, M, Options, Plan);
  if (llvm::Error E = B.run(Sim))
    return E;
  layoutBuffers(Plan);
  return Plan;
}

} // namespace onnx2soap::codegen
