//===- runtime_lib/cpu/Optimizer.cpp - Parameter updates ------------------===//
//
// SGD (momentum, dampening, Nesterov, weight decay), Adam and AdamW with
// PyTorch 1.13's single-tensor CPU rules (tests/fixtures/README.md), one
// loop per parameter. As in PyTorch, the per-step scalars (1 - beta, bias
// corrections, step size) are computed in double and the elementwise math
// runs in the parameter's type (f32 or f64), in PyTorch's order of
// operations:
//
//   SGD:   d = g + wd*p; buf = d (t = 1) or momentum*buf + (1-dampening)*d;
//          d = nesterov ? d + momentum*buf : buf;  p -= lr*d
//   Adam:  g += wd*p; m = b1*m + (1-b1)*g; v = b2*v + (1-b2)*g*g;
//          p -= (lr/(1-b1^t)) * m / (sqrt(v)/sqrt(1-b2^t) + eps)
//   AdamW: p *= 1 - lr*wd, then Adam with wd = 0.
//
// State: SGD with momentum [buf]; Adam/AdamW [m, v], zero-filled by the
// caller before step 1.
//
//===----------------------------------------------------------------------===//
#include "CpuKernels.h"
#include "Loops.h"
#include <cmath>

namespace onnx2soap::rt::cpu {
namespace {

const char *optimizerName(OptimizerKind Kind) {
  switch (Kind) {
  case OptimizerKind::Sgd:
    return "SGD";
  case OptimizerKind::Adam:
    return "Adam";
  case OptimizerKind::AdamW:
    return "AdamW";
  }
  return "?";
}

template <typename T>
void sgd(const OptimizerConfig &Config, int64_t Step, int64_t Count, T *P,
         const T *G, T *Buffer) {
  T Lr = static_cast<T>(Config.LearningRate);
  T Decay = static_cast<T>(Config.WeightDecay);
  T Momentum = static_cast<T>(Config.Momentum);
  T Keep = static_cast<T>(1.0 - Config.Dampening);
  bool HasDecay = Config.WeightDecay != 0;
  parallelChunks(Count, 2, [&](int64_t Begin, int64_t End) {
    for (int64_t I = Begin; I < End; ++I) {
      T D = G[I];
      if (HasDecay)
        D = D + Decay * P[I];
      if (Buffer) {
        T B = Step <= 1 ? D : Buffer[I] * Momentum + Keep * D;
        Buffer[I] = B;
        D = Config.Nesterov ? D + Momentum * B : B;
      }
      P[I] = P[I] + (-Lr) * D;
    }
  });
}

template <typename T>
void adam(const OptimizerConfig &Config, int64_t Step, int64_t Count, T *P,
          const T *G, T *M, T *V) {
  bool Decoupled = Config.Kind == OptimizerKind::AdamW;
  bool HasDecay = Config.WeightDecay != 0;
  double Correction1 = 1.0 - std::pow(Config.Beta1, double(Step));
  double Correction2 = 1.0 - std::pow(Config.Beta2, double(Step));
  T Beta1 = static_cast<T>(Config.Beta1), Beta2 = static_cast<T>(Config.Beta2);
  T OneMinusBeta1 = static_cast<T>(1.0 - Config.Beta1);
  T OneMinusBeta2 = static_cast<T>(1.0 - Config.Beta2);
  T StepSize = static_cast<T>(Config.LearningRate / Correction1);
  T Correction2Sqrt = static_cast<T>(std::sqrt(Correction2));
  T Eps = static_cast<T>(Config.Epsilon);
  T Decay = static_cast<T>(Config.WeightDecay);
  T DecoupledScale =
      static_cast<T>(1.0 - Config.LearningRate * Config.WeightDecay);
  parallelChunks(Count, 4, [&](int64_t Begin, int64_t End) {
    for (int64_t I = Begin; I < End; ++I) {
      T Grad = G[I];
      if (Decoupled)
        P[I] = P[I] * DecoupledScale;
      else if (HasDecay)
        Grad = Grad + Decay * P[I];
      M[I] = M[I] * Beta1 + OneMinusBeta1 * Grad;
      V[I] = V[I] * Beta2 + OneMinusBeta2 * Grad * Grad;
      T Denominator = std::sqrt(V[I]) / Correction2Sqrt + Eps;
      P[I] = P[I] + (-StepSize) * (M[I] / Denominator);
    }
  });
}

} // namespace

void updateParameter(Context &, const OptimizerConfig &Config, int64_t Step,
                     const TensorView &Parameter, const TensorView &Gradient,
                     const Views &State) {
  std::string Where =
      std::string("optimizer update (") + optimizerName(Config.Kind) + ")";
  auto Check = [&](const TensorView &V, const std::string &What) {
    if (!V.present())
      fail(Where, What + " is absent");
    if (!V.isContiguous())
      fail(Where, What + " must be a dense row-major tensor");
    if (V.Type != Parameter.Type)
      fail(Where, What + " has element type " + dtypeName(V.Type) +
                      ", the parameter " + dtypeName(Parameter.Type));
    if (V.numElements() != Parameter.numElements())
      fail(Where, What + " has " + std::to_string(V.numElements()) +
                      " elements, the parameter " +
                      std::to_string(Parameter.numElements()));
  };
  Check(Parameter, "the parameter");
  Check(Gradient, "the gradient");
  size_t Slots = static_cast<size_t>(optimizerStateCount(Config));
  if (State.size() != Slots)
    fail(Where, "expects " + std::to_string(Slots) + " state tensors, got " +
                    std::to_string(State.size()));
  for (size_t I = 0; I < Slots; ++I)
    Check(State[I], "state tensor " + std::to_string(I));
  if (Step < 1)
    fail(Where, "step " + std::to_string(Step) + " is not positive");
  int64_t Count = Parameter.numElements();
  if (!visitFloat(Parameter.Type, [&](auto Tag) {
        using T = typename decltype(Tag)::Type;
        T *P = Parameter.as<T>();
        const T *G = Gradient.as<T>();
        switch (Config.Kind) {
        case OptimizerKind::Sgd:
          return sgd<T>(Config, Step, Count, P, G,
                        Slots ? State[0].as<T>() : nullptr);
        case OptimizerKind::Adam:
        case OptimizerKind::AdamW:
          return adam<T>(Config, Step, Count, P, G, State[0].as<T>(),
                         State[1].as<T>());
        }
      }))
    fail(Where, std::string("parameters of element type ") +
                    dtypeName(Parameter.Type) +
                    " are not supported (f32, f64)");
}

} // namespace onnx2soap::rt::cpu
