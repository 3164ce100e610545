//===- codegen/PlanBuffers.cpp - Boxes, buffers and input bindings -------===//
//
// Passes 1-3 of buildProgramPlan() (ProgramPlan.cpp): each rank's boxes of
// the parameters, state and constants its partitions read, each
// partition's output buffers, and each partition input bound to a
// producer's buffer or to one it gathers (or sums) from local copies and
// received messages.
//
//===----------------------------------------------------------------------===//
#include "codegen/PlanBuilder.h"
#include "llvm/Support/ErrorHandling.h"

namespace onnx2soap::codegen::detail {

static rt::program::TensorRole heldRole(const ir::Tensor &Value) {
  switch (Value.Role) {
  case ir::TensorRole::Parameter:
    return rt::program::TensorRole::Parameter;
  case ir::TensorRole::State:
    return rt::program::TensorRole::State;
  case ir::TensorRole::Constant:
    return rt::program::TensorRole::Constant;
  case ir::TensorRole::Activation:
  case ir::TensorRole::Input:
    break;
  }
  llvm_unreachable("only parameters, state and constants are held (isHeld)");
}

const std::vector<simulator::GradientCells> &
Builder::cellsOf(ir::TensorId Param) {
  auto [It, New] = Cells.insert({Param, {}});
  if (!New)
    return It->second;
  std::vector<std::pair<ir::Region, DeviceId>> Uses;
  for (const ir::Op &O : G.ops())
    for (unsigned Slot = 0; Slot < O.Inputs.size(); ++Slot) {
      if (WeightOnly[O.Id] || O.Inputs[Slot] != Param ||
          !(T.BackwardInputs[O.Id] >> Slot & 1))
        continue;
      for (unsigned P = 0; P < S[O.Id].numPartitions(); ++P)
        Uses.push_back({ruleRegion(O.Id, Slot, P), S[O.Id].device(P)});
    }
  It->second = simulator::gradientCells(G.tensor(Param).Type.Dims, Uses);
  return It->second;
}

llvm::Error Builder::makeBoxes() {
  // Bounding boxes of what each rank's partitions read, buffers after, in
  // (tensor, rank) order. Weight-only results and the weights they come
  // from are held whole.
  auto Grow = [&](ir::TensorId Id, DeviceId Rank, const ir::Region &R) {
    auto [It, New] = Boxes.insert({{Id, Rank}, Box()});
    It->second.Region = New ? R : ir::enclose(It->second.Region, R);
  };
  std::set<ir::TensorId> ReadByCompute;
  for (const ir::Op &O : G.ops()) {
    if (WeightOnly[O.Id])
      continue;
    const ParallelConfig &C = S[O.Id];
    for (unsigned Slot = 0; Slot < O.Inputs.size(); ++Slot) {
      ir::TensorId In = O.Inputs[Slot];
      if (In == ir::NoTensor || !isBoxed(In))
        continue;
      ReadByCompute.insert(In);
      for (unsigned P = 0; P < C.numPartitions(); ++P) {
        ir::Region R = ruleRegion(O.Id, Slot, P);
        if (absentRegion(R, In))
          continue;
        Grow(In, C.device(P),
             isDerived(In) ? ir::fullRegion(G.tensor(In).Type.Dims) : R);
      }
    }
  }
  // Weight-only ops run on every rank holding one of their results, in
  // reverse order so a producer sees all its consumers' ranks.
  WeightOnlyCalls.assign(G.numOps(), {});
  for (size_t Index = G.numOps(); Index-- > 0;) {
    const ir::Op &O = G.op(static_cast<ir::OpId>(Index));
    if (!WeightOnly[O.Id])
      continue;
    std::set<DeviceId> Ranks;
    for (ir::TensorId Out : O.Outputs)
      for (auto It = Boxes.lower_bound({Out, 0});
           It != Boxes.end() && It->first.first == Out; ++It)
        Ranks.insert(It->first.second);
    for (DeviceId Rank : Ranks) {
      WeightOnlyCalls[O.Id][Rank] = -1;
      for (ir::TensorId Out : O.Outputs)
        Grow(Out, Rank, ir::fullRegion(G.tensor(Out).Type.Dims));
      for (ir::TensorId In : O.Inputs) {
        if (In == ir::NoTensor || !isBoxed(In))
          continue;
        if (isHeld(G.tensor(In)) && ReadByCompute.count(In))
          return fail(llvm::formatv(
              "weight '{0}' is read both directly and through weight-only "
              "op '{1}'; generated programs do not support that yet",
              G.tensor(In).Name, O.Name));
        if (G.tensor(In).Role == ir::TensorRole::Parameter)
          ThroughWeightOnly.insert(In);
        Grow(In, Rank, ir::fullRegion(G.tensor(In).Type.Dims));
      }
    }
  }
  int States = rt::optimizerStateCount(Options.Optimizer);
  for (auto &[Key, Held] : Boxes) {
    const ir::Tensor &Value = G.tensor(Key.first);
    bool Derived = isDerived(Key.first);
    if (!Derived)
      tensorIndex(Key.first, heldRole(Value));
    BufferKind Kind =
        Derived                                   ? BufferKind::Activation
        : Value.Role == ir::TensorRole::Parameter ? BufferKind::Parameter
        : Value.Role == ir::TensorRole::State     ? BufferKind::State
                                                  : BufferKind::Constant;
    Held.Buffer =
        addBuffer(Key.second, Kind, Key.first, Held.Region, Value.Type.Type);
    bool Trained =
        std::binary_search(T.Parameters.begin(), T.Parameters.end(), Key.first);
    if (Derived && T.NeedsGrad[Key.first])
      Held.Gradient = addBuffer(Key.second, BufferKind::Gradient, Key.first,
                                Held.Region, Value.Type.Type);
    if (!Trained)
      continue;
    Held.Gradient = addBuffer(Key.second, BufferKind::Gradient, Key.first,
                              Held.Region, Value.Type.Type);
    for (int I = 0; I < States; ++I)
      Held.State[I] = addBuffer(Key.second, BufferKind::OptimizerState,
                                Key.first, Held.Region, Value.Type.Type);
  }
  return llvm::Error::success();
}

void Builder::makeOutputs() {
  Outputs.resize(G.numOps());
  OutGrads.resize(G.numOps());
  for (const ir::Op &O : G.ops()) {
    const ParallelConfig &C = S[O.Id];
    Outputs[O.Id].resize(C.numPartitions());
    OutGrads[O.Id].resize(C.numPartitions());
    bool HasBackward = T.BackwardInputs[O.Id] != 0;
    if (WeightOnly[O.Id])
      continue; // their results are boxes
    for (unsigned P = 0; P < C.numPartitions(); ++P)
      for (unsigned I = 0; I < O.Outputs.size(); ++I) {
        ir::TensorId Id = O.Outputs[I];
        ir::Region R = written(O.Id, I, P);
        if (Id == T.LossTensor)
          tensorIndex(Id, rt::program::TensorRole::Loss);
        ir::DType Type = G.tensor(Id).Type.Type;
        Outputs[O.Id][P].push_back(
            addBuffer(C.device(P), BufferKind::Activation, Id, R, Type));
        OutGrads[O.Id][P].push_back(
            HasBackward && T.NeedsGrad[Id]
                ? addBuffer(C.device(P), BufferKind::Gradient, Id, R, Type)
                : -1);
      }
  }
}

llvm::Error Builder::bindInputs() {
  Inputs.resize(G.numOps());
  CallOf.resize(G.numOps());
  for (const ir::Op &O : G.ops()) {
    if (WeightOnly[O.Id])
      continue;
    const ParallelConfig &C = S[O.Id];
    Inputs[O.Id].resize(C.numPartitions());
    for (unsigned P = 0; P < C.numPartitions(); ++P) {
      CallOf[O.Id].push_back(Prologue.size());
      Prologue.emplace_back();
      Epilogue.emplace_back();
      SlicesRead.emplace_back();
      SlicesAdded.emplace_back();
    }
  }
  for (const ir::Op &O : G.ops()) {
    if (WeightOnly[O.Id])
      continue;
    const ParallelConfig &C = S[O.Id];
    for (unsigned P = 0; P < C.numPartitions(); ++P) {
      DeviceId Rank = C.device(P);
      int32_t Call = CallOf[O.Id][P];
      for (unsigned Slot = 0; Slot < O.Inputs.size(); ++Slot) {
        Binding B;
        ir::TensorId In = O.Inputs[Slot];
        bool WantGrad = T.BackwardInputs[O.Id] >> Slot & 1;
        if (In == ir::NoTensor) {
          Inputs[O.Id][P].push_back(B);
          continue;
        }
        const ir::Tensor &Value = G.tensor(In);
        B.Needed = needed(O.Id, Slot, P);
        if (absentRegion(B.Needed, In)) {
          Inputs[O.Id][P].push_back(B);
          continue;
        }
        ir::DType Type = Value.Type.Type;
        if (isBoxed(In)) {
          const Box &Held = Boxes.at({In, Rank});
          if (sameRegion(Held.Region, B.Needed)) {
            B.Buffer = Held.Buffer;
            B.Gradient = WantGrad ? Held.Gradient : -1;
          } else {
            auto [It, New] = Slices.try_emplace({In, Rank, B.Needed});
            Slice &Part = It->second;
            if (New) {
              Part.Buffer =
                  addBuffer(Rank, BufferKind::Gathered, In, B.Needed, Type);
              Part.Fill = copy(Held.Buffer, Held.Region, Part.Buffer, B.Needed,
                               B.Needed, false);
            }
            B.Buffer = Part.Buffer;
            SlicesRead[Call].push_back(&Part);
            if (WantGrad && Held.Gradient >= 0) {
              if (Part.Gradient < 0) {
                Part.Gradient =
                    addBuffer(Rank, BufferKind::Gradient, In, B.Needed, Type);
                Part.AddBack = copy(Part.Gradient, B.Needed, Held.Gradient,
                                    Held.Region, B.Needed, true);
              }
              B.Gradient = Part.Gradient;
              ++Part.GradientReaders;
              SlicesAdded[Call].push_back(&Part);
            }
          }
          Inputs[O.Id][P].push_back(B);
          continue;
        }
        if (Value.Role == ir::TensorRole::Input) {
          int32_t Index = tensorIndex(In, rt::program::TensorRole::Input);
          (void)Index;
          B.Buffer = addBuffer(Rank, BufferKind::Input, In, B.Needed, Type);
          Inputs[O.Id][P].push_back(B);
          continue;
        }
        // An activation: from the producer's partitions.
        const ir::Op &Producer = G.op(Value.Producer);
        const ParallelConfig &PC = S[Producer.Id];
        unsigned Output = outputIndex(Producer, In);
        bool GradFlows =
            WantGrad && T.NeedsGrad[In] && T.BackwardInputs[Producer.Id] != 0;
        llvm::SmallVector<unsigned, 4> Overlapping;
        for (unsigned Q = 0; Q < PC.numPartitions(); ++Q)
          if (ir::regionVolume(
                  ir::intersect(B.Needed, written(Producer.Id, Output, Q))) > 0)
            Overlapping.push_back(Q);
        if (Overlapping.size() == 1 && PC.Reduction == 1 &&
            PC.device(Overlapping[0]) == Rank &&
            sameRegion(written(Producer.Id, Output, Overlapping[0]),
                       B.Needed)) {
          B.Buffer = Outputs[Producer.Id][Overlapping[0]][Output];
          B.Gradient =
              GradFlows ? OutGrads[Producer.Id][Overlapping[0]][Output] : -1;
          Inputs[O.Id][P].push_back(B);
          continue;
        }
        B.Staged = true;
        B.Summed = PC.Reduction > 1;
        B.Buffer = addBuffer(
            Rank, B.Summed ? BufferKind::Accumulated : BufferKind::Gathered, In,
            B.Needed, Type);
        if (GradFlows)
          B.Gradient =
              addBuffer(Rank, BufferKind::Gradient, In, B.Needed, Type);
        for (unsigned Q : Overlapping) {
          if (PC.device(Q) != Rank)
            continue; // a message (makeSteps)
          ir::Region From = written(Producer.Id, Output, Q);
          ir::Region Part = ir::intersect(B.Needed, From);
          Prologue[Call].push_back(copy(Outputs[Producer.Id][Q][Output], From,
                                        B.Buffer, B.Needed, Part, B.Summed));
          if (B.Gradient >= 0 && OutGrads[Producer.Id][Q][Output] >= 0)
            Epilogue[Call].push_back(copy(B.Gradient, B.Needed,
                                          OutGrads[Producer.Id][Q][Output],
                                          From, Part, true));
        }
        Inputs[O.Id][P].push_back(B);
      }
    }
  }
  return llvm::Error::success();
}

} // namespace onnx2soap::codegen::detail
