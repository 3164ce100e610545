//===- executor/Trainer.h - Training steps on one backend ------*- C++ -*-===//
//
// Runs training steps of a TrainingGraph on one device: forward, the loss
// gradient, every op's backward in reverse order (gradients accumulate in
// one buffer per tensor), state updates (BatchNorm running statistics), and
// one optimizer update per parameter. The single-device reference every
// sharded generated program must reproduce.
//
//===----------------------------------------------------------------------===//
#ifndef ONNX2SOAP_EXECUTOR_TRAINER_H
#define ONNX2SOAP_EXECUTOR_TRAINER_H

#include "executor/Executor.h"
#include "ir/Training.h"

namespace onnx2soap::executor {

class Trainer {
public:
  static llvm::Expected<std::unique_ptr<Trainer>>
  create(const ir::TrainingGraph &T, rt::Backend &B,
         const rt::OptimizerConfig &Optimizer);

  Executor &executor() { return *Exec; }
  /// One step on the inputs set through executor().setInput; returns the
  /// loss computed by this step's forward pass (before its update).
  llvm::Expected<double> step();
  int64_t stepsDone() const { return Step; }

private:
  Trainer(const ir::TrainingGraph &T, rt::Backend &B,
          const rt::OptimizerConfig &Optimizer)
      : T(T), B(B), Optimizer(Optimizer) {}

  const ir::TrainingGraph &T;
  rt::Backend &B;
  rt::OptimizerConfig Optimizer;
  std::unique_ptr<Executor> Exec;
  /// Every gradient lives in one buffer, so a step zeroes them all with one
  /// fillZero (one pass, one parallel region) instead of one per tensor.
  rt::DeviceBuffer GradArena;
  /// By tensor id: the gradient's place in GradArena, or null when the
  /// tensor needs none.
  std::vector<void *> Grads;
  std::vector<std::vector<rt::DeviceBuffer>> OptimizerState; // by parameter
  int64_t Step = 0;
};

} // namespace onnx2soap::executor

#endif
