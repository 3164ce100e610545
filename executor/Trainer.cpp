//===- executor/Trainer.cpp - Training steps on one backend ---------------===//
//
// The order within a step is the one PyTorch's loop has: zero gradients,
// forward, backward, optimizer step.
//
//===----------------------------------------------------------------------===//
#include "executor/Trainer.h"
#include "ir/Error.h"
#include "runtime_lib/Error.h"
#include "llvm/Support/FormatVariadic.h"
#include <cstring>

namespace onnx2soap::executor {

llvm::Expected<std::unique_ptr<Trainer>>
Trainer::create(const ir::TrainingGraph &T, rt::Backend &B,
                const rt::OptimizerConfig &Optimizer) {
  std::unique_ptr<Trainer> Result(new Trainer(T, B, Optimizer));
  auto Exec = Executor::create(T.G, B);
  if (!Exec)
    return Exec.takeError();
  Result->Exec = std::move(*Exec);
  const ir::Graph &G = T.G;
  if (!ir::isFloatingPoint(G.tensor(T.LossTensor).Type.Type) ||
      G.tensor(T.LossTensor).Type.numElements() != 1)
    return fail("the loss must be a floating-point scalar");
  // Offsets into the gradient arena, each gradient 64-byte aligned (the
  // backends' allocation alignment).
  std::vector<size_t> Offsets(G.numTensors(), 0);
  size_t ArenaBytes = 0;
  for (const ir::Tensor &Tensor : G.tensors())
    if (T.NeedsGrad[Tensor.Id]) {
      Offsets[Tensor.Id] = ArenaBytes;
      ArenaBytes +=
          (static_cast<size_t>(Tensor.Type.byteSize()) + 63) / 64 * 64;
    }
  Result->GradArena = rt::DeviceBuffer(B, ArenaBytes);
  Result->Grads.assign(G.numTensors(), nullptr);
  for (const ir::Tensor &Tensor : G.tensors())
    if (T.NeedsGrad[Tensor.Id])
      Result->Grads[Tensor.Id] =
          static_cast<char *>(Result->GradArena.data()) + Offsets[Tensor.Id];
  for (ir::TensorId P : T.Parameters) {
    if (G.tensor(P).Type.Type != ir::DType::Float32)
      return fail(llvm::formatv("parameter '{0}' is {1}; training supports "
                                "f32 parameters",
                                G.tensor(P).Name,
                                ir::dtypeName(G.tensor(P).Type.Type)));
    std::vector<rt::DeviceBuffer> State;
    for (int I = 0; I < rt::optimizerStateCount(Optimizer); ++I)
      State.emplace_back(B, static_cast<size_t>(G.tensor(P).Type.byteSize()));
    Result->OptimizerState.push_back(std::move(State));
  }
  return Result;
}

llvm::Expected<double> Trainer::step() {
  const ir::Graph &G = T.G;
  ++Step;
  if (GradArena.size())
    B.fillZero(GradArena.data(), GradArena.size());
  if (auto E = Exec->forward(Step))
    return E;
  auto GradView = [&](ir::TensorId Id) {
    rt::TensorView V = Exec->view(Id);
    V.Data = Grads[Id];
    return V;
  };
  try {
    // d(loss)/d(loss) = 1.
    if (G.tensor(T.LossTensor).Type.Type == ir::DType::Float64) {
      double One = 1.0;
      B.copyFromHost(Grads[T.LossTensor], &One, sizeof One);
    } else {
      float One = 1.0f;
      B.copyFromHost(Grads[T.LossTensor], &One, sizeof One);
    }
    for (size_t Index = G.numOps(); Index-- > 0;) {
      ir::OpId Id = static_cast<ir::OpId>(Index);
      uint32_t Needed = T.BackwardInputs[Id];
      if (!Needed)
        continue;
      const ir::Op &O = G.op(Id);
      std::vector<rt::TensorView> OutGrads, InGrads;
      for (ir::TensorId Out : O.Outputs)
        OutGrads.push_back(T.NeedsGrad[Out] ? GradView(Out)
                                            : rt::TensorView::absent());
      for (unsigned I = 0; I < O.Inputs.size(); ++I)
        InGrads.push_back(Needed >> I & 1 ? GradView(O.Inputs[I])
                                          : rt::TensorView::absent());
      B.backward(Exec->call(Id, Step), OutGrads, InGrads);
    }
    // New running statistics become the state for the next step.
    for (const ir::Op &O : G.ops()) {
      uint32_t State = ir::opKindInfo(O.Kind).StateInputs;
      unsigned Output = 1;
      for (unsigned I = 0; I < O.Inputs.size() && State; ++I) {
        if (!(State >> I & 1))
          continue;
        if (Output < O.Outputs.size()) {
          rt::TensorView From = Exec->view(O.Outputs[Output]);
          B.copyOnDevice(Exec->view(O.Inputs[I]).Data, From.Data,
                         From.byteSize());
        }
        ++Output;
      }
    }
    for (size_t P = 0; P < T.Parameters.size(); ++P) {
      ir::TensorId Id = T.Parameters[P];
      std::vector<rt::TensorView> State;
      for (rt::DeviceBuffer &Slot : OptimizerState[P]) {
        rt::TensorView V = Exec->view(Id);
        V.Data = Slot.data();
        State.push_back(V);
      }
      B.update(Optimizer, Step, Exec->view(Id), GradView(Id), State);
    }
    B.synchronize();
  } catch (const rt::RuntimeError &Failure) {
    return fail(Failure.what());
  }
  // The loss of this step's forward pass.
  std::vector<char> Bytes = Exec->read(T.LossTensor);
  if (G.tensor(T.LossTensor).Type.Type == ir::DType::Float64) {
    double Loss;
    std::memcpy(&Loss, Bytes.data(), sizeof Loss);
    return Loss;
  }
  float Loss;
  std::memcpy(&Loss, Bytes.data(), sizeof Loss);
  return static_cast<double>(Loss);
}

} // namespace onnx2soap::executor
