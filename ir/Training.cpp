//===- ir/Training.cpp - From a forward graph to a training step ----------===//
//
// Gradient flow is two sweeps: forward, which tensors depend on a parameter
// through differentiable operands; backward from the loss, which of those
// the loss depends on. Only those get gradient buffers and backward work.
//
//===----------------------------------------------------------------------===//
#include "ir/Training.h"
#include "ir/BatchDims.h"
#include "ir/Error.h"
#include "llvm/Support/FormatVariadic.h"
#include <iterator>

namespace onnx2soap::ir {

llvm::StringRef lossKindName(LossKind Kind) {
  switch (Kind) {
  case LossKind::CrossEntropy:
    return "cross-entropy";
  case LossKind::CrossEntropyChannels:
    return "cross-entropy-channels";
  case LossKind::MeanSquaredError:
    return "mse";
  case LossKind::ModelOutput:
    return "model";
  }
  llvm_unreachable("unknown LossKind");
}

static constexpr LossKind AllLossKinds[] = {
    LossKind::CrossEntropy, LossKind::CrossEntropyChannels,
    LossKind::MeanSquaredError, LossKind::ModelOutput};

std::optional<LossKind> lossKindNamed(llvm::StringRef Name) {
  for (LossKind Kind : AllLossKinds)
    if (Name == lossKindName(Kind))
      return Kind;
  return std::nullopt;
}

std::string lossKindNames() {
  std::string Out;
  size_t Count = std::size(AllLossKinds);
  for (size_t I = 0; I < Count; ++I)
    Out += (I == 0           ? ""
            : I + 1 == Count ? " or "
                             : ", ") +
           lossKindName(AllLossKinds[I]).str();
  return Out;
}

/// Adds an op that the loss construction knows to be valid.
static llvm::Expected<TensorId> append(Graph &G, OpKind Kind,
                                       llvm::ArrayRef<TensorId> Inputs,
                                       Attributes Attrs, std::string Name) {
  auto Id = G.addOp(Kind, std::move(Name), Inputs, std::move(Attrs));
  if (!Id)
    return Id.takeError();
  return G.op(*Id).Outputs[0];
}

static llvm::Error appendLoss(TrainingGraph &T) {
  Graph &G = T.G;
  if (G.outputs().empty())
    return fail("the model has no outputs");
  TensorId Out = G.outputs()[0];
  const TensorType &OutType = G.tensor(Out).Type;
  if (!isFloatingPoint(OutType.Type))
    return fail(llvm::formatv("the model's output '{0}' is {1}, not floating "
                              "point; it cannot feed a loss",
                              G.outputName(0), dtypeName(OutType.Type)));
  switch (T.Loss) {
  case LossKind::ModelOutput:
    if (OutType.numElements() != 1)
      return fail(llvm::formatv("--loss model: the first output '{0}' is {1}, "
                                "not a scalar loss",
                                G.outputName(0), formatShape(OutType.Dims)));
    T.LossTensor = Out;
    return llvm::Error::success();
  case LossKind::CrossEntropy:
  case LossKind::CrossEntropyChannels: {
    llvm::StringRef Flag = lossKindName(T.Loss);
    if (G.outputs().size() != 1)
      return fail(llvm::formatv("--loss {0} needs a model with one "
                                "output; this one has {1} (use --loss model "
                                "if one of them is the loss)",
                                Flag, G.outputs().size()));
    bool Channels = T.Loss == LossKind::CrossEntropyChannels;
    if (OutType.rank() < (Channels ? 2u : 1u))
      return fail(llvm::formatv(
          "--loss {0} needs an output with a class dim{1}; '{2}' is {3}", Flag,
          Channels ? " (dim 1)" : "", G.outputName(0),
          formatShape(OutType.Dims)));
    int ClassDim = Channels ? 1 : static_cast<int>(OutType.rank()) - 1;
    int64_t Classes = OutType.Dims[ClassDim];
    int64_t Rows = OutType.numElements() / std::max<int64_t>(Classes, 1);
    Shape LabelDims = OutType.Dims;
    LabelDims.erase(LabelDims.begin() + ClassDim);
    T.Labels = G.addTensor("labels", TensorType{DType::Int64, LabelDims},
                           TensorRole::Input);
    int OutBatch = G.tensor(Out).BatchDim;
    G.tensor(T.Labels).BatchDim = OutBatch < 0 || OutBatch == ClassDim ? -1
                                  : OutBatch > ClassDim ? OutBatch - 1
                                                        : OutBatch;
    G.addInput(T.Labels);
    // [N, C, d...] -> [N, d..., C]: the classes last, as rows take them.
    TensorId ClassesLast = Out;
    if (ClassDim != static_cast<int>(OutType.rank()) - 1) {
      IntList Perm{0};
      for (unsigned D = 2; D < OutType.rank(); ++D)
        Perm.push_back(D);
      Perm.push_back(1);
      Attributes Transpose;
      Transpose.set("perm", std::move(Perm));
      auto Moved =
          append(G, OpKind::Transpose, {Out}, Transpose, "loss/classes_last");
      if (!Moved)
        return Moved.takeError();
      ClassesLast = *Moved;
    }
    Attributes ToRows, LabelRows, Mean;
    ToRows.set("shape", IntList{Rows, Classes});
    LabelRows.set("shape", IntList{Rows});
    Mean.set("reduction", std::string("mean"));
    auto Scores =
        append(G, OpKind::Reshape, {ClassesLast}, ToRows, "loss/scores");
    if (!Scores)
      return Scores.takeError();
    auto Labels =
        append(G, OpKind::Reshape, {T.Labels}, LabelRows, "loss/labels");
    if (!Labels)
      return Labels.takeError();
    auto Loss = append(G, OpKind::SoftmaxCrossEntropyLoss, {*Scores, *Labels},
                       Mean, "loss/cross_entropy");
    if (!Loss)
      return Loss.takeError();
    T.LossTensor = *Loss;
    return llvm::Error::success();
  }
  case LossKind::MeanSquaredError: {
    if (G.outputs().size() != 1)
      return fail(llvm::formatv("--loss mse needs a model with one output; "
                                "this one has {0}",
                                G.outputs().size()));
    T.Labels = G.addTensor("targets", OutType, TensorRole::Input);
    G.tensor(T.Labels).BatchDim = G.tensor(Out).BatchDim;
    G.addInput(T.Labels);
    auto Diff = append(G, OpKind::Sub, {Out, T.Labels}, {}, "loss/diff");
    if (!Diff)
      return Diff.takeError();
    auto Square = append(G, OpKind::Mul, {*Diff, *Diff}, {}, "loss/square");
    if (!Square)
      return Square.takeError();
    if (OutType.rank() == 0) {
      T.LossTensor = *Square;
      return llvm::Error::success();
    }
    Attributes All;
    IntList Axes;
    for (unsigned I = 0; I < OutType.rank(); ++I)
      Axes.push_back(I);
    All.set("axes", Axes);
    All.set("keepdims", int64_t(0));
    auto Loss = append(G, OpKind::ReduceMean, {*Square}, All, "loss/mean");
    if (!Loss)
      return Loss.takeError();
    T.LossTensor = *Loss;
    return llvm::Error::success();
  }
  }
  llvm_unreachable("unknown LossKind");
}

llvm::Expected<TrainingGraph> deriveTraining(Graph Forward, LossKind Loss) {
  TrainingGraph T;
  T.G = std::move(Forward);
  T.Loss = Loss;
  if (auto E = appendLoss(T))
    return E;
  Graph &G = T.G;
  // The loss ops split over the samples like the ops before them (else data
  // parallelism gathers the whole output on one device to compute the loss).
  inferBatchDims(G);
  if (Loss != LossKind::ModelOutput)
    G.addOutput(T.LossTensor);

  auto Differentiable = [&](const Op &O, unsigned I) {
    TensorId In = O.Inputs[I];
    return In != NoTensor && !(opKindInfo(O.Kind).NoGradInputs >> I & 1) &&
           isFloatingPoint(G.tensor(In).Type.Type);
  };

  // Forward sweep: which tensors depend on a parameter.
  std::vector<bool> DependsOnParameter(G.numTensors(), false);
  for (const Tensor &Tensor : G.tensors())
    if (Tensor.Role == TensorRole::Parameter) {
      DependsOnParameter[Tensor.Id] = true;
      T.Parameters.push_back(Tensor.Id);
    }
  if (T.Parameters.empty())
    return fail("the model has no trainable parameters");
  for (const Op &O : G.ops()) {
    bool Depends = false;
    for (unsigned I = 0; I < O.Inputs.size(); ++I)
      Depends |= Differentiable(O, I) && DependsOnParameter[O.Inputs[I]];
    for (TensorId Out : O.Outputs)
      DependsOnParameter[Out] =
          Depends && isFloatingPoint(G.tensor(Out).Type.Type);
  }
  if (!DependsOnParameter[T.LossTensor])
    return fail("the loss does not depend on any trainable parameter");

  // Backward sweep from the loss.
  T.NeedsGrad.assign(G.numTensors(), false);
  T.BackwardInputs.assign(G.numOps(), 0);
  T.GradContributions.assign(G.numTensors(), 0);
  T.NeedsGrad[T.LossTensor] = true;
  for (size_t Index = G.numOps(); Index-- > 0;) {
    const Op &O = G.op(static_cast<OpId>(Index));
    bool OutputNeedsGrad = false;
    for (TensorId Out : O.Outputs)
      OutputNeedsGrad |= T.NeedsGrad[Out];
    if (!OutputNeedsGrad)
      continue;
    for (unsigned I = 0; I < O.Inputs.size(); ++I) {
      if (!Differentiable(O, I) || !DependsOnParameter[O.Inputs[I]])
        continue;
      T.BackwardInputs[O.Id] |= 1u << I;
      T.NeedsGrad[O.Inputs[I]] = true;
      ++T.GradContributions[O.Inputs[I]];
    }
  }
  for (TensorId P : T.Parameters)
    if (!T.NeedsGrad[P])
      return fail(llvm::formatv("parameter '{0}' does not influence the loss "
                                "(freeze it with --frozen {0})",
                                G.tensor(P).Name));
  return T;
}

} // namespace onnx2soap::ir
