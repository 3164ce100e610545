//===- runtime_lib/cuda/Optimizer.cu - Parameter updates ------------------===//
//
// SGD (momentum, dampening, Nesterov, weight decay), Adam and AdamW with
// PyTorch 1.13's single-tensor rules, the twin of
// runtime_lib/cpu/Optimizer.cpp: the per-step scalars (1 - beta, bias
// corrections, step size) are computed on the host in double, exactly as
// the CPU does, and passed to one grid-stride kernel per parameter that
// runs the elementwise math in the parameter's type (f32 or f64) in
// PyTorch's order of operations:
//
//   SGD:   d = g + wd*p; buf = d (t = 1) or momentum*buf + (1-dampening)*d;
//          d = nesterov ? d + momentum*buf : buf;  p -= lr*d
//   Adam:  g += wd*p; m = b1*m + (1-b1)*g; v = b2*v + (1-b2)*g*g;
//          p -= (lr/(1-b1^t)) * m / (sqrt(v)/sqrt(1-b2^t) + eps)
//   AdamW: p *= 1 - lr*wd, then Adam with wd = 0.
//
// State: SGD with momentum [buf]; Adam/AdamW [m, v], zero-filled by the
// caller before step 1. (nvcc may contract a*b + c into a fused multiply-add
// where the CPU rounds twice: results agree to a few ulps, not bit for bit.)
//
//===----------------------------------------------------------------------===//
#include "CudaKernels.h"
#include "Loops.cuh"
#include <cmath>
#include <string>

namespace onnx2soap::rt::cuda {
namespace {
using namespace loops;

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

__device__ inline float mathSqrt(float V) { return sqrtf(V); }
__device__ inline double mathSqrt(double V) { return sqrt(V); }

template <typename T> struct SgdBody {
  T *P;
  const T *G;
  T *Buffer; // nullable: no momentum
  T Lr, Decay, Momentum, Keep;
  bool HasDecay, FirstStep, Nesterov;
  __device__ void operator()(int64_t I) const {
    T D = G[I];
    if (HasDecay)
      D = D + Decay * P[I];
    if (Buffer) {
      T B = FirstStep ? D : Buffer[I] * Momentum + Keep * D;
      Buffer[I] = B;
      D = Nesterov ? D + Momentum * B : B;
    }
    P[I] = P[I] + (-Lr) * D;
  }
};

template <typename T> struct AdamBody {
  T *P;
  const T *G;
  T *M, *V;
  T Beta1, Beta2, OneMinusBeta1, OneMinusBeta2, StepSize, Correction2Sqrt, Eps,
      Decay, DecoupledScale;
  bool Decoupled, HasDecay;
  __device__ void operator()(int64_t I) const {
    T Grad = G[I];
    if (Decoupled)
      P[I] = P[I] * DecoupledScale;
    else if (HasDecay)
      Grad = Grad + Decay * P[I];
    M[I] = M[I] * Beta1 + OneMinusBeta1 * Grad;
    V[I] = V[I] * Beta2 + OneMinusBeta2 * Grad * Grad;
    T Denominator = mathSqrt(V[I]) / Correction2Sqrt + Eps;
    P[I] = P[I] + (-StepSize) * (M[I] / Denominator);
  }
};

/// Runs Body over Count elements; there is no op call to name, so failures
/// name the update.
template <typename F>
void launch(Context &C, const std::string &Where, int64_t Count, F Body) {
  if (Count == 0)
    return;
  forEachKernel<<<gridFor(Count), BlockSize, 0, C.Stream>>>(Count, Body);
  cudaError_t Status = cudaGetLastError();
  if (Status != cudaSuccess)
    fail(Where, std::string("update kernel: ") + cudaGetErrorString(Status));
}

template <typename T>
void sgd(Context &C, const std::string &Where, const OptimizerConfig &Config,
         int64_t Step, int64_t Count, T *P, const T *G, T *Buffer) {
  SgdBody<T> Body;
  Body.P = P;
  Body.G = G;
  Body.Buffer = Buffer;
  Body.Lr = static_cast<T>(Config.LearningRate);
  Body.Decay = static_cast<T>(Config.WeightDecay);
  Body.Momentum = static_cast<T>(Config.Momentum);
  Body.Keep = static_cast<T>(1.0 - Config.Dampening);
  Body.HasDecay = Config.WeightDecay != 0;
  Body.FirstStep = Step <= 1;
  Body.Nesterov = Config.Nesterov;
  launch(C, Where, Count, Body);
}

template <typename T>
void adam(Context &C, const std::string &Where, const OptimizerConfig &Config,
          int64_t Step, int64_t Count, T *P, const T *G, T *M, T *V) {
  double Correction1 = 1.0 - std::pow(Config.Beta1, double(Step));
  double Correction2 = 1.0 - std::pow(Config.Beta2, double(Step));
  AdamBody<T> Body;
  Body.P = P;
  Body.G = G;
  Body.M = M;
  Body.V = V;
  Body.Beta1 = static_cast<T>(Config.Beta1);
  Body.Beta2 = static_cast<T>(Config.Beta2);
  Body.OneMinusBeta1 = static_cast<T>(1.0 - Config.Beta1);
  Body.OneMinusBeta2 = static_cast<T>(1.0 - Config.Beta2);
  Body.StepSize = static_cast<T>(Config.LearningRate / Correction1);
  Body.Correction2Sqrt = static_cast<T>(std::sqrt(Correction2));
  Body.Eps = static_cast<T>(Config.Epsilon);
  Body.Decay = static_cast<T>(Config.WeightDecay);
  Body.DecoupledScale =
      static_cast<T>(1.0 - Config.LearningRate * Config.WeightDecay);
  Body.Decoupled = Config.Kind == OptimizerKind::AdamW;
  Body.HasDecay = Config.WeightDecay != 0;
  launch(C, Where, Count, Body);
}

} // namespace

void updateParameter(Context &C, const OptimizerConfig &Config, int64_t Step,
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
        const T *G = Gradient.as<const T>();
        switch (Config.Kind) {
        case OptimizerKind::Sgd:
          return sgd<T>(C, Where, Config, Step, Count, P, G,
                        Slots ? State[0].as<T>() : nullptr);
        case OptimizerKind::Adam:
        case OptimizerKind::AdamW:
          return adam<T>(C, Where, Config, Step, Count, P, G, State[0].as<T>(),
                         State[1].as<T>());
        }
      }))
    fail(Where, std::string("parameters of element type ") +
                    dtypeName(Parameter.Type) +
                    " are not supported (f32, f64)");
}

} // namespace onnx2soap::rt::cuda
