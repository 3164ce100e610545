//===- codegen/PlanSteps.cpp - Each rank's steps of a ProgramPlan ---------===//
//
// The fourth pass of buildProgramPlan(): the simulator's tasks, in their
// simulated order, become each rank's steps (a transfer a Send on one rank
// and a Recv on the other, an all-reduce one step on each member), with the
// copies around each call; then the pairs of ranks and the groups that
// --profile-comm measures.
//
//===----------------------------------------------------------------------===//
#include "codegen/PlanBuilder.h"
#include <numeric>
#include <queue>

namespace onnx2soap::codegen::detail {

std::vector<CopyInfo> Builder::forwardCopies(int32_t Call) {
  std::vector<CopyInfo> Copies;
  for (Slice *Part : SlicesRead[Call])
    if (!Part->Filled) {
      Part->Filled = true;
      Copies.push_back(Part->Fill);
    }
  Copies.insert(Copies.end(), Prologue[Call].begin(), Prologue[Call].end());
  return Copies;
}

std::vector<CopyInfo> Builder::backwardCopies(int32_t Call) {
  std::vector<CopyInfo> Copies = Epilogue[Call];
  for (Slice *Part : SlicesAdded[Call])
    if (--Part->GradientReaders == 0)
      Copies.push_back(Part->AddBack);
  return Copies;
}

llvm::Error Builder::makeSteps(const simulator::TaskGraph &TG) {
  // The global order: a topological order of the task graph that follows
  // the simulated start times (ties: the structural key).
  size_t N = TG.size();
  std::vector<unsigned> Waiting(N, 0);
  using Entry = std::tuple<double, simulator::TaskKey, TaskId>;
  auto Later = [](const Entry &A, const Entry &B) {
    if (std::get<0>(A) != std::get<0>(B))
      return std::get<0>(A) > std::get<0>(B);
    if (!(std::get<1>(A) == std::get<1>(B)))
      return std::get<1>(B) < std::get<1>(A);
    return std::get<2>(A) > std::get<2>(B);
  };
  std::priority_queue<Entry, std::vector<Entry>, decltype(Later)> Ready(Later);
  for (TaskId Id = 0; Id < N; ++Id) {
    const Task &Node = TG.task(Id);
    if (!Node.Alive)
      continue;
    Waiting[Id] = Node.Preds.size();
    if (!Waiting[Id])
      Ready.push({Node.Start, Node.Key, Id});
  }
  int States = rt::optimizerStateCount(Options.Optimizer);
  while (!Ready.empty()) {
    TaskId Id = std::get<2>(Ready.top());
    Ready.pop();
    const Task &Node = TG.task(Id);
    for (TaskId Next : Node.Succs)
      if (--Waiting[Next] == 0)
        Ready.push({TG.task(Next).Start, TG.task(Next).Key, Next});

    StepInfo Step = blankStep();
    switch (Node.Kind) {
    case TaskKind::Forward:
    case TaskKind::Backward: {
      int32_t Call = CallOf[Node.Op][Node.Partition];
      bool Global =
          Out.Calls[Call].Flags == rt::program::CallFlags::GlobalStatistics;
      Step.Kind = Node.Kind == TaskKind::Forward ? StepKind::Forward
                                                 : StepKind::Backward;
      Step.Call = Call;
      Step.Label = Out.intern(G.op(Node.Op).Name);
      std::vector<CopyInfo> Copies;
      if (Node.Kind == TaskKind::Forward)
        Copies = forwardCopies(Call);
      else if (!Global)
        Copies = backwardCopies(Call);
      if (!(Global && Node.Kind == TaskKind::Backward)) {
        Step.FirstCopy = addCopies(Copies);
        Step.NumCopies = Copies.size();
      }
      addStep(Node.Device, Step);
      break;
    }
    case TaskKind::StatsAllReduce: {
      const ir::Op &O = G.op(Node.Op);
      const ParallelConfig &C = S[O.Id];
      bool Forward = Node.Key.Level == 3 * O.Id + 1;
      Step.Kind = Forward ? StepKind::StatsForward : StepKind::StatsBackward;
      Step.Group = group(Node.Group);
      Step.Elements = 2 * simulator::partInterval(G.outputType(O).Dims[1],
                                                  C.Degrees[1], Node.Key.A)
                              .size();
      Step.Label = Out.intern(
          O.Name + (Forward ? " statistics" : " gradient statistics"));
      for (unsigned P = 0; P < C.numPartitions(); ++P) {
        if (C.coordinate(P, 1) != Node.Key.A)
          continue;
        StepInfo Member = Step;
        Member.Call = CallOf[O.Id][P];
        if (!Forward) {
          std::vector<CopyInfo> Copies = backwardCopies(Member.Call);
          Member.FirstCopy = addCopies(Copies);
          Member.NumCopies = Copies.size();
        }
        addStep(C.device(P), Member);
      }
      break;
    }
    case TaskKind::Transfer:
    case TaskKind::GradTransfer: {
      bool Forward = Node.Kind == TaskKind::Transfer;
      ir::OpId ConsumerId = Node.Op;
      unsigned Slot = Node.Key.A, C = Node.Key.B, P = Node.Key.C;
      const ir::Op &Consumer = G.op(ConsumerId);
      ir::TensorId In = Consumer.Inputs[Slot];
      const ir::Op &Producer = G.op(G.tensor(In).Producer);
      unsigned Output = outputIndex(Producer, In);
      const Binding &B = Inputs[ConsumerId][C][Slot];
      ir::Region From = written(Producer.Id, Output, P);
      ir::Region Part = ir::intersect(B.Needed, From);
      Step.Type = toRuntime(G.tensor(In).Type.Type);
      Step.Elements = ir::regionVolume(Part);
      Step.Label = Out.intern((Forward ? "transfer " : "gradient transfer ") +
                              Producer.Name + (Forward ? " -> " : " <- ") +
                              Consumer.Name);
      int32_t ProducerBuffer = Forward ? Outputs[Producer.Id][P][Output]
                                       : OutGrads[Producer.Id][P][Output];
      int32_t ConsumerBuffer = Forward ? B.Buffer : B.Gradient;
      if (ProducerBuffer < 0 || ConsumerBuffer < 0 || !B.Staged)
        return fail(llvm::formatv("internal: transfer of '{0}' to '{1}' has "
                                  "no buffers",
                                  G.tensor(In).Name, Consumer.Name));
      StepInfo Send = Step, Recv = Step;
      Send.Kind = StepKind::Send;
      Recv.Kind = StepKind::Recv;
      Send.Peer = Node.Peer;
      Recv.Peer = Node.Device;
      CopyInfo Pack = Forward
                          ? copy(ProducerBuffer, From, -1, {}, Part, false)
                          : copy(ConsumerBuffer, B.Needed, -1, {}, Part, false);
      CopyInfo Unpack =
          Forward ? copy(-1, {}, ConsumerBuffer, B.Needed, Part, B.Summed)
                  : copy(-1, {}, ProducerBuffer, From, Part, true);
      Send.FirstCopy = addCopies({Pack});
      Send.NumCopies = 1;
      Recv.FirstCopy = addCopies({Unpack});
      Recv.NumCopies = 1;
      addStep(Node.Device, Send);
      addStep(Node.Peer, Recv);
      break;
    }
    case TaskKind::GradAllReduce: {
      // One message: every part's cells, packed tensor by tensor, cell by
      // cell, in the task graph's order (a gradient bucket holds several
      // tensors' cells).
      llvm::ArrayRef<simulator::BucketPart> Parts = TG.bucketParts(Id);
      if (Parts.empty())
        return fail("internal: a gradient all-reduce with no tensors");
      const ir::Tensor &First = G.tensor(Parts.front().Tensor);
      std::vector<const simulator::GradientCells *> Groups;
      for (const simulator::BucketPart &Part : Parts) {
        const std::vector<simulator::GradientCells> &Cells =
            cellsOf(Part.Tensor);
        if (Part.Cells >= Cells.size() ||
            G.tensor(Part.Tensor).Type.Type != First.Type.Type)
          return fail("internal: gradient cells differ from the task graph's");
        Groups.push_back(&Cells[Part.Cells]);
      }
      const std::vector<DeviceId> &Holders = Groups.front()->Holders;
      Step.Kind = StepKind::AllReduce;
      Step.Group = group(Holders);
      Step.Type = toRuntime(First.Type.Type);
      Step.Elements = 0;
      for (const simulator::GradientCells *Cells : Groups)
        Step.Elements += Cells->Elements;
      std::string Label = "gradient all-reduce " + First.Name;
      if (size_t More = simulator::bucketTensors(Parts).size() - 1)
        Label += " and " + std::to_string(More) + " more";
      Step.Label = Out.intern(Label);
      for (DeviceId Rank : Holders) {
        std::vector<CopyInfo> Pack, Unpack;
        int64_t Offset = 0;
        for (size_t I = 0; I < Parts.size(); ++I) {
          const Box &Held = Boxes.at({Parts[I].Tensor, Rank});
          for (const ir::Region &Part : Groups[I]->Boxes) {
            Pack.push_back(
                copy(Held.Gradient, Held.Region, -1, {}, Part, false, Offset));
            Unpack.push_back(
                copy(-1, {}, Held.Gradient, Held.Region, Part, false, Offset));
            Offset += ir::regionVolume(Part);
          }
        }
        StepInfo Member = Step;
        Member.FirstCopy = addCopies(Pack);
        Member.NumCopies = Pack.size();
        Member.FirstPostCopy = addCopies(Unpack);
        Member.NumPostCopies = Unpack.size();
        addStep(Rank, Member);
      }
      break;
    }
    case TaskKind::Copy:
      // The copies are the steps': a call's gathering and adding back, a
      // message's packing and unpacking (bindInputs, the transfers above).
      break;
    case TaskKind::Update: {
      // A weight-only result's update is its weights' update, after the
      // weight-only backward (below).
      if (isDerived(Node.Tensor))
        break;
      const Box &Held = Boxes.at({Node.Tensor, Node.Device});
      Step.Kind = StepKind::Update;
      Step.Buffer = Held.Buffer;
      Step.Gradient = Held.Gradient;
      for (int I = 0; I < States; ++I)
        Step.State[I] = Held.State[I];
      Step.NumState = States;
      Step.Label = Out.intern("update " + G.tensor(Node.Tensor).Name);
      addStep(Node.Device, Step);
      break;
    }
    }
  }
  // Weight-only ops: forward before everything, backward after everything,
  // then the updates of the weights only they read.
  for (unsigned Rank = 0; Rank < PerRank.size(); ++Rank) {
    std::vector<StepInfo> Before, After;
    auto Make = [&](StepKind Kind, int32_t Call, const ir::Op &O) {
      StepInfo Step = blankStep();
      Step.Kind = Kind;
      Step.Call = Call;
      Step.Label = Out.intern(O.Name);
      return Step;
    };
    for (const ir::Op &O : G.ops()) {
      if (!WeightOnly[O.Id] || !WeightOnlyCalls[O.Id].count(Rank))
        continue;
      Before.push_back(
          Make(StepKind::Forward, WeightOnlyCalls[O.Id].at(Rank), O));
    }
    for (size_t Index = G.numOps(); Index-- > 0;) {
      const ir::Op &O = G.op(static_cast<ir::OpId>(Index));
      if (!WeightOnly[O.Id] || !WeightOnlyCalls[O.Id].count(Rank) ||
          !T.BackwardInputs[O.Id])
        continue;
      After.push_back(
          Make(StepKind::Backward, WeightOnlyCalls[O.Id].at(Rank), O));
    }
    for (ir::TensorId Param : ThroughWeightOnly) {
      auto It = Boxes.find({Param, Rank});
      if (It == Boxes.end() || It->second.Gradient < 0)
        continue;
      StepInfo Step = blankStep();
      Step.Kind = StepKind::Update;
      Step.Buffer = It->second.Buffer;
      Step.Gradient = It->second.Gradient;
      for (int I = 0; I < States; ++I)
        Step.State[I] = It->second.State[I];
      Step.NumState = States;
      Step.Label = Out.intern("update " + G.tensor(Param).Name);
      After.push_back(Step);
    }
    PerRank[Rank].insert(PerRank[Rank].begin(), Before.begin(), Before.end());
    PerRank[Rank].insert(PerRank[Rank].end(), After.begin(), After.end());
  }
  for (unsigned Rank = 0; Rank < PerRank.size(); ++Rank) {
    Out.RankSteps.push_back(
        {int32_t(Out.Steps.size()), int32_t(PerRank[Rank].size())});
    Out.Steps.insert(Out.Steps.end(), PerRank[Rank].begin(),
                     PerRank[Rank].end());
  }
  for (unsigned Rank = 0; Rank < StateCopies.size(); ++Rank) {
    int32_t First = addCopies(StateCopies[Rank]);
    Out.RankStateCopies.push_back({First, int32_t(StateCopies[Rank].size())});
  }
  return llvm::Error::success();
}

void Builder::makeProfileComm() {
  // One pair per kind of route and one group per ring shape: what a
  // measured table matches (simulator/Machine.h).
  std::vector<uint32_t> Shapes = M.routeShapes();
  std::set<uint32_t> Routes;
  for (DeviceId A = 0; A < M.numDevices(); ++A)
    for (DeviceId B = 0; B < M.numDevices(); ++B)
      if (A != B && Routes.insert(Shapes[A * M.numDevices() + B]).second) {
        Out.ProfilePairs.push_back(int32_t(A));
        Out.ProfilePairs.push_back(int32_t(B));
      }
  // Groups: the plan's, all devices, each node's, one device per node (by
  // local index).
  std::vector<std::vector<DeviceId>> Candidates;
  for (const rt::program::GroupInfo &G : Out.Groups)
    Candidates.emplace_back(Out.GroupRanks.begin() + G.First,
                            Out.GroupRanks.begin() + G.First + G.Size);
  std::vector<DeviceId> All(M.numDevices());
  std::iota(All.begin(), All.end(), 0);
  Candidates.push_back(All);
  std::map<unsigned, std::vector<DeviceId>> ByNode, ByLocal;
  for (DeviceId D = 0; D < M.numDevices(); ++D) {
    ByNode[M.device(D).Node].push_back(D);
    ByLocal[M.device(D).Local].push_back(D);
  }
  for (auto *Sets : {&ByNode, &ByLocal})
    for (auto &[Key, Devices] : *Sets)
      Candidates.push_back(Devices);
  std::set<std::vector<uint32_t>> Rings;
  for (const std::vector<DeviceId> &Group : Candidates) {
    if (Group.size() < 2 || !Rings.insert(M.ringShape(Shapes, Group)).second)
      continue;
    Out.ProfileGroups.push_back(
        {int32_t(Out.ProfileGroupRanks.size()), int32_t(Group.size())});
    Out.ProfileGroupRanks.insert(Out.ProfileGroupRanks.end(), Group.begin(),
                                 Group.end());
  }
}

} // namespace onnx2soap::codegen::detail
