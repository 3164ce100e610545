//===- ir/Training.h - From a forward graph to a training step -*- C++ -*-===//
//
// A training step is the forward graph plus a loss, then every op's backward
// in reverse order, then an optimizer update per parameter. As in FlexFlow,
// an op's backward is one task (its kind's backward kernel computes the
// gradients of all its inputs that need one), not a graph of primitive ops:
// the planner places an op's forward and backward partitions together, and
// the runtime has one backward kernel per op kind. Gradients of a tensor
// read by several ops (or of a parameter shared by unrolled cells)
// accumulate: every reader's backward adds into the same buffer.
//
//===----------------------------------------------------------------------===//
#ifndef ONNX2SOAP_IR_TRAINING_H
#define ONNX2SOAP_IR_TRAINING_H

#include "ir/Graph.h"
#include <optional>
#include <string>
#include <vector>

namespace onnx2soap::ir {

enum class LossKind : uint8_t {
  /// Softmax cross-entropy over the last dim of the model's single output;
  /// integer labels shaped like the output without its last dim; mean over
  /// all label positions.
  CrossEntropy,
  /// The same over dim 1 of an [N, C, d...] output (PyTorch's
  /// cross_entropy and ONNX's SoftmaxCrossEntropyLoss layout, a
  /// segmentation network's): labels [N, d...].
  CrossEntropyChannels,
  /// Mean of squared differences to targets shaped like the output.
  MeanSquaredError,
  /// The model's first output is already the (scalar) loss.
  ModelOutput,
};
llvm::StringRef lossKindName(LossKind Kind);
/// The kind lossKindName calls Name (a --loss value), or none.
std::optional<LossKind> lossKindNamed(llvm::StringRef Name);
/// Every kind's name, for an error: "cross-entropy, ..., mse or model".
std::string lossKindNames();

struct TrainingGraph {
  /// The forward graph with the loss ops appended; its outputs are the
  /// model's outputs followed by the loss.
  Graph G;
  LossKind Loss = LossKind::CrossEntropy;
  /// The scalar loss.
  TensorId LossTensor = NoTensor;
  /// Labels or targets (an extra graph input); NoTensor for ModelOutput.
  TensorId Labels = NoTensor;
  /// Trainable tensors, in id order.
  std::vector<TensorId> Parameters;
  /// Per tensor: a gradient flows to it (it depends on a parameter and the
  /// loss depends on it).
  std::vector<bool> NeedsGrad;
  /// Per op: bit I set when its backward must produce input I's gradient;
  /// 0 when the op has no backward work.
  std::vector<uint32_t> BackwardInputs;
  /// Per tensor: how many backward tasks add into its gradient.
  std::vector<unsigned> GradContributions;
};

/// Appends the loss and works out which gradients each backward computes.
/// Fails, naming what is wrong, when the outputs do not fit the loss or no
/// parameter influences the loss.
llvm::Expected<TrainingGraph> deriveTraining(Graph Forward, LossKind Loss);

} // namespace onnx2soap::ir

#endif
