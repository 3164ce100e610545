//===- runtime_lib/cuda/Loss.cu - SoftmaxCrossEntropyLoss -----------------===//
//
// ONNX's SoftmaxCrossEntropyLoss on the GPU, the twin of
// runtime_lib/cpu/Loss.cpp: scores [N,C,d...] (f32 or f64), labels [N,d...]
// (i32 or i64), optional class weights [C]; reductions "mean" (sum divided
// by the sum of the weights of the non-ignored positions; 0/0 = NaN when
// every label is ignored), "sum" and "none".
//
// A warp per position (n, d) computes the stable log-sum-exp over C with
// warp shuffles (a thread per position when spatial dims make positions
// adjacent in memory); one block then sums the per-position losses and
// weights in double in a fixed tree, so the loss is the same bits on every
// run. The backward recomputes the log-sum-exp from the scores and adds both
// paths: the loss's, w * g * (softmax - onehot), and log_prob's own,
// dlp - softmax * sum_c dlp. The class weights' gradient (when asked for) is
// one block per class scanning the labels: deterministic, no atomics, at the
// price of C * N * d label reads (class weights rarely need a gradient).
//
// Labels outside [0, C) fail as on the CPU. The device only flags the first
// bad position (the kernels treat it as ignored, so nothing reads out of
// bounds); the host must read that flag to throw, so each call waits for its
// stream once, after all its work is queued.
//
//===----------------------------------------------------------------------===//
#include "CudaKernels.h"
#include "Loops.cuh"
#include <limits>
#include <string>

namespace onnx2soap::rt::cuda {
namespace {
using namespace loops;

constexpr int WarpSize = 32;
constexpr unsigned FullMask = 0xffffffffu;
constexpr unsigned long long NoPosition = ~0ull;

enum class Reduction { Mean, Sum, None };

struct LossProblem {
  int64_t N = 0, C = 0, D = 1; // batch, classes, product of the d... dims
  Reduction Reduce = Reduction::Mean;
  bool HasIgnore = false;
  int64_t IgnoreIndex = 0;
  const TensorView *Scores = nullptr, *Labels = nullptr, *Weights = nullptr;
};

/// Validates the operands (forward outputs included) and reads attributes.
LossProblem describe(const OpCall &Call) {
  if (Call.Inputs.size() < 2 || Call.Outputs.empty())
    failOp(Call, "expects scores, labels and optional weights, and a loss "
                 "output");
  LossProblem P;
  const TensorView &Scores = Call.Inputs[0], &Labels = Call.Inputs[1];
  if (!Scores.present() || !Labels.present())
    failOp(Call, "scores and labels are required");
  requireContiguous(Call, Scores, "scores");
  requireContiguous(Call, Labels, "labels");
  if (Scores.Type != DType::Float32 && Scores.Type != DType::Float64)
    failOp(Call, std::string("scores have element type ") +
                     dtypeName(Scores.Type) +
                     ", the CUDA kernel needs f32 or f64");
  if (Labels.Type != DType::Int32 && Labels.Type != DType::Int64)
    failOp(Call, std::string("labels have element type ") +
                     dtypeName(Labels.Type) + ", expected i32 or i64");
  if (Scores.Rank < 2 || Labels.Rank != Scores.Rank - 1)
    failOp(Call, "scores " + shapeString(Scores) + " and labels " +
                     shapeString(Labels) + " are not [N,C,d...] and [N,d...]");
  bool Match = Labels.Dims[0] == Scores.Dims[0];
  for (int I = 2; I < Scores.Rank; ++I) {
    Match &= Labels.Dims[I - 1] == Scores.Dims[I];
    P.D *= Scores.Dims[I];
  }
  if (!Match)
    failOp(Call, "labels " + shapeString(Labels) + " do not match scores " +
                     shapeString(Scores));
  P.N = Scores.Dims[0];
  P.C = Scores.Dims[1];
  P.Scores = &Scores;
  P.Labels = &Labels;
  if (Call.Inputs.size() > 2 && Call.Inputs[2].present()) {
    const TensorView &W = Call.Inputs[2];
    requireContiguous(Call, W, "weights");
    requireType(Call, W, Scores.Type, "weights");
    if (W.Rank != 1 || W.Dims[0] != P.C)
      failOp(Call, "weights " + shapeString(W) + " do not match " +
                       std::to_string(P.C) + " classes");
    P.Weights = &W;
  }
  const std::string &R = Call.Attrs.getString("reduction", "mean");
  if (R == "mean")
    P.Reduce = Reduction::Mean;
  else if (R == "sum")
    P.Reduce = Reduction::Sum;
  else if (R == "none")
    P.Reduce = Reduction::None;
  else
    failOp(Call, "unknown reduction '" + R + "'");
  P.HasIgnore = Call.Attrs.getInt("has_ignore_index", 0) != 0;
  P.IgnoreIndex = Call.Attrs.getInt("ignore_index", 0);

  const TensorView &Loss = Call.Outputs[0];
  if (!Loss.present())
    failOp(Call, "the loss output is absent");
  requireContiguous(Call, Loss, "loss");
  requireType(Call, Loss, Scores.Type, "loss");
  int64_t Expected = P.Reduce == Reduction::None ? P.N * P.D : 1;
  if (Loss.numElements() != Expected)
    failOp(Call, "loss output " + shapeString(Loss) + " should have " +
                     std::to_string(Expected) + " elements");
  if (Call.Outputs.size() > 1 && Call.Outputs[1].present()) {
    const TensorView &LogProb = Call.Outputs[1];
    requireContiguous(Call, LogProb, "log_prob");
    requireType(Call, LogProb, Scores.Type, "log_prob");
    if (LogProb.dims() != Scores.dims())
      failOp(Call, "log_prob " + shapeString(LogProb) +
                       " does not match scores " + shapeString(Scores));
  }
  return P;
}

/// What the kernels need of a LossProblem, by value.
template <typename T> struct Problem {
  int64_t N, C, D;
  Reduction Reduce;
  bool HasIgnore;
  int64_t IgnoreIndex;
  const T *X;
  const void *RawLabels;
  bool Labels64;
  const T *Weights; // nullable
  // Scratch: per position log-sum-exp and label (-1 when ignored or bad),
  // the first bad position, and {sum of losses, sum of weights}.
  T *Lse;
  int64_t *Label;
  unsigned long long *BadPosition;
  double *Stats;

  __device__ int64_t positions() const { return N * D; }
  __device__ const T *scoreAt(int64_t Position, int64_t Class) const {
    int64_t Batch = Position / D, Spatial = Position % D;
    return X + (Batch * C + Class) * D + Spatial;
  }
  __device__ T weightOf(int64_t L) const { return Weights ? Weights[L] : T(1); }
};

__device__ inline float mathExp(float V) { return expf(V); }
__device__ inline double mathExp(double V) { return exp(V); }
__device__ inline float mathLog(float V) { return logf(V); }
__device__ inline double mathLog(double V) { return log(V); }

/// Sum over each group of Lanes adjacent lanes (Lanes divides 32).
template <int Lanes, typename T> __device__ T groupSum(T V) {
  for (int Offset = Lanes / 2; Offset > 0; Offset /= 2)
    V += __shfl_xor_sync(FullMask, V, Offset);
  return V;
}

/// std::max's choice (a NaN operand after the first is skipped).
template <typename T> __device__ T maxOf(T A, T B) { return A < B ? B : A; }

template <int Lanes, typename T> __device__ T groupMax(T V) {
  for (int Offset = Lanes / 2; Offset > 0; Offset /= 2)
    V = maxOf(V, __shfl_xor_sync(FullMask, V, Offset));
  return V;
}

/// Lanes threads per position (a warp, or one thread where positions are
/// adjacent in memory): label check and log-sum-exp over the classes.
template <typename T, int Lanes> __global__ void positionKernel(Problem<T> P) {
  int Lane = threadIdx.x % Lanes;
  int64_t Groups = int64_t(gridDim.x) * (blockDim.x / Lanes);
  for (int64_t I = (blockIdx.x * int64_t(blockDim.x) + threadIdx.x) / Lanes;
       I < P.positions(); I += Groups) {
    const T *Row = P.scoreAt(I, 0);
    T Max = -std::numeric_limits<T>::infinity();
    for (int64_t C = Lane; C < P.C; C += Lanes)
      Max = maxOf(Max, Row[C * P.D]);
    Max = groupMax<Lanes>(Max);
    T Sum = 0;
    for (int64_t C = Lane; C < P.C; C += Lanes)
      Sum += mathExp(Row[C * P.D] - Max);
    Sum = groupSum<Lanes>(Sum);
    if (Lane != 0)
      continue;
    P.Lse[I] = Max + mathLog(Sum);
    int64_t L = P.Labels64 ? static_cast<const int64_t *>(P.RawLabels)[I]
                           : static_cast<const int32_t *>(P.RawLabels)[I];
    if (P.HasIgnore && L == P.IgnoreIndex) {
      L = -1;
    } else if (L < 0 || L >= P.C) {
      atomicMin(P.BadPosition, static_cast<unsigned long long>(I));
      L = -1;
    }
    P.Label[I] = L;
  }
}

/// One block: Stats = {sum of losses, sum of weights} in double, in a fixed
/// order; when Loss is given (the forward), writes the loss output too.
template <typename T> __global__ void statsKernel(Problem<T> P, T *Loss) {
  __shared__ double Sums[BlockSize], Weights[BlockSize];
  double Sum = 0, WeightSum = 0;
  for (int64_t I = threadIdx.x; I < P.positions(); I += blockDim.x) {
    int64_t L = P.Label[I];
    T Value = 0;
    if (L >= 0) {
      T W = P.weightOf(L);
      Value = -W * (*P.scoreAt(I, L) - P.Lse[I]);
      WeightSum += W;
    }
    if (Loss && P.Reduce == Reduction::None)
      Loss[I] = Value;
    Sum += Value;
  }
  Sums[threadIdx.x] = Sum;
  Weights[threadIdx.x] = WeightSum;
  __syncthreads();
  for (int Width = BlockSize / 2; Width > 0; Width /= 2) {
    if (threadIdx.x < Width) {
      Sums[threadIdx.x] += Sums[threadIdx.x + Width];
      Weights[threadIdx.x] += Weights[threadIdx.x + Width];
    }
    __syncthreads();
  }
  if (threadIdx.x != 0)
    return;
  P.Stats[0] = Sums[0];
  P.Stats[1] = Weights[0];
  if (Loss && P.Reduce == Reduction::Sum)
    Loss[0] = static_cast<T>(Sums[0]);
  else if (Loss && P.Reduce == Reduction::Mean)
    Loss[0] = static_cast<T>(Sums[0] / Weights[0]);
}

template <typename T> struct LogProbBody {
  Problem<T> P;
  T *LogProb;
  __device__ void operator()(int64_t J) const {
    int64_t Batch = J / (P.C * P.D), Spatial = J % P.D;
    LogProb[J] = P.X[J] - P.Lse[Batch * P.D + Spatial];
  }
};

/// d(total)/d(unweighted loss term at I), before the class weight.
template <typename T>
__device__ double upstream(const Problem<T> &P, const T *DLoss, int64_t I) {
  if (!DLoss)
    return 0;
  switch (P.Reduce) {
  case Reduction::None:
    return DLoss[I];
  case Reduction::Sum:
    return DLoss[0];
  case Reduction::Mean:
    return DLoss[0] / P.Stats[1];
  }
  return 0;
}

/// Lanes threads per position: adds the scores' gradient of both outputs.
template <typename T, int Lanes>
__global__ void scoresGradKernel(Problem<T> P, const T *DLoss,
                                 const T *DLogProb, T *DScores) {
  int Lane = threadIdx.x % Lanes;
  int64_t Groups = int64_t(gridDim.x) * (blockDim.x / Lanes);
  for (int64_t I = (blockIdx.x * int64_t(blockDim.x) + threadIdx.x) / Lanes;
       I < P.positions(); I += Groups) {
    int64_t L = P.Label[I];
    T Coef =
        L >= 0 ? static_cast<T>(upstream(P, DLoss, I)) * P.weightOf(L) : T(0);
    int64_t Offset = P.scoreAt(I, 0) - P.X;
    T LpSum = 0;
    if (DLogProb) {
      for (int64_t C = Lane; C < P.C; C += Lanes)
        LpSum += DLogProb[Offset + C * P.D];
      LpSum = groupSum<Lanes>(LpSum);
    }
    for (int64_t C = Lane; C < P.C; C += Lanes) {
      int64_t J = Offset + C * P.D;
      T Softmax = mathExp(P.X[J] - P.Lse[I]);
      T G = Coef * (Softmax - (C == L ? T(1) : T(0)));
      if (DLogProb)
        G += DLogProb[J] - Softmax * LpSum;
      DScores[J] += G;
    }
  }
}

/// One block per class c: adds sum over positions labelled c of
/// upstream * (t - mean) (t = -log_prob at the label; mean only for "mean").
template <typename T>
__global__ void weightsGradKernel(Problem<T> P, const T *DLoss, T *DWeights) {
  __shared__ double Partial[BlockSize];
  double Mean = P.Stats[0] / P.Stats[1];
  for (int64_t Class = blockIdx.x; Class < P.C; Class += gridDim.x) {
    double Acc = 0;
    for (int64_t I = threadIdx.x; I < P.positions(); I += blockDim.x) {
      if (P.Label[I] != Class)
        continue;
      double Term = -(*P.scoreAt(I, Class) - P.Lse[I]);
      if (P.Reduce == Reduction::Mean)
        Term -= Mean;
      Acc += static_cast<T>(upstream(P, DLoss, I) * Term);
    }
    Partial[threadIdx.x] = Acc;
    __syncthreads();
    for (int Width = BlockSize / 2; Width > 0; Width /= 2) {
      if (threadIdx.x < Width)
        Partial[threadIdx.x] += Partial[threadIdx.x + Width];
      __syncthreads();
    }
    if (threadIdx.x == 0)
      DWeights[Class] += static_cast<T>(Partial[0]);
    __syncthreads();
  }
}

/// The per-call scratch and the first two passes (log-sum-exp, stats).
template <typename T> class Workspace {
public:
  Workspace(Context &C, const OpCall &Call, const LossProblem &LP)
      : C(C), Call(Call), Positions(LP.N * LP.D),
        LseBuffer(C, Call, Positions * sizeof(T)),
        LabelBuffer(C, Call, Positions * sizeof(int64_t)),
        FlagBuffer(C, Call, sizeof(unsigned long long) + 2 * sizeof(double)) {
    P.N = LP.N;
    P.C = LP.C;
    P.D = LP.D;
    P.Reduce = LP.Reduce;
    P.HasIgnore = LP.HasIgnore;
    P.IgnoreIndex = LP.IgnoreIndex;
    P.X = LP.Scores->as<const T>();
    P.RawLabels = LP.Labels->Data;
    P.Labels64 = LP.Labels->Type == DType::Int64;
    P.Weights = LP.Weights ? LP.Weights->as<const T>() : nullptr;
    P.Lse = LseBuffer.as<T>();
    P.Label = LabelBuffer.as<int64_t>();
    P.BadPosition = FlagBuffer.as<unsigned long long>();
    P.Stats = reinterpret_cast<double *>(P.BadPosition + 1);
    // All bytes 0xff: the "no bad position" sentinel.
    checkCuda(Call,
              cudaMemsetAsync(P.BadPosition, 0xff, sizeof(unsigned long long),
                              C.Stream),
              "cudaMemsetAsync (label flag)");
    if (Positions > 0) {
      if (warpPerPosition())
        positionKernel<T, WarpSize>
            <<<blocksFor(WarpSize), BlockSize, 0, C.Stream>>>(P);
      else
        positionKernel<T, 1><<<blocksFor(1), BlockSize, 0, C.Stream>>>(P);
      checkLaunch(Call, "loss log-sum-exp kernel");
    }
  }

  /// A warp shares a position's classes when they are adjacent in memory
  /// (D == 1) or too many for one thread; otherwise a thread per position
  /// reads adjacent positions, which coalesces.
  bool warpPerPosition() const { return P.D == 1 || P.C >= 1024; }
  /// Blocks for a grid-stride loop with Lanes threads per position.
  unsigned blocksFor(int Lanes) const {
    int64_t Blocks = (Positions * Lanes + BlockSize - 1) / BlockSize;
    return static_cast<unsigned>(std::clamp<int64_t>(Blocks, 1, 65535));
  }

  /// Sums losses and weights; the forward passes its loss output.
  void stats(T *Loss) {
    statsKernel<T><<<1, BlockSize, 0, C.Stream>>>(P, Loss);
    checkLaunch(Call, "loss reduction kernel");
  }

  /// Waits for the queued work and fails on an out-of-range label.
  void checkLabels() {
    unsigned long long Bad = NoPosition;
    checkCuda(Call,
              cudaMemcpyAsync(&Bad, P.BadPosition, sizeof(Bad),
                              cudaMemcpyDeviceToHost, C.Stream),
              "cudaMemcpyAsync (label flag)");
    checkCuda(Call, cudaStreamSynchronize(C.Stream),
              "cudaStreamSynchronize (label flag)");
    if (Bad == NoPosition)
      return;
    // The failing path only: fetch the bad label for the message.
    size_t Size = P.Labels64 ? sizeof(int64_t) : sizeof(int32_t);
    int64_t L64 = 0;
    int32_t L32 = 0;
    void *Host = P.Labels64 ? static_cast<void *>(&L64) : &L32;
    checkCuda(Call,
              cudaMemcpyAsync(
                  Host, static_cast<const char *>(P.RawLabels) + Bad * Size,
                  Size, cudaMemcpyDeviceToHost, C.Stream),
              "cudaMemcpyAsync (bad label)");
    checkCuda(Call, cudaStreamSynchronize(C.Stream),
              "cudaStreamSynchronize (bad label)");
    int64_t L = P.Labels64 ? L64 : L32;
    failOp(Call, "label " + std::to_string(L) + " at position " +
                     std::to_string(Bad) + " is outside [0, " +
                     std::to_string(P.C) + ")");
  }

  Problem<T> P;

private:
  Context &C;
  const OpCall &Call;
  int64_t Positions;
  Scratch LseBuffer, LabelBuffer, FlagBuffer;
};

template <typename T>
void forwardTyped(Context &C, const OpCall &Call, const LossProblem &LP) {
  Workspace<T> W(C, Call, LP);
  if (Call.Outputs.size() > 1 && Call.Outputs[1].present())
    forEach(C, Call, LP.N * LP.C * LP.D,
            LogProbBody<T>{W.P, Call.Outputs[1].as<T>()});
  W.stats(Call.Outputs[0].as<T>());
  W.checkLabels();
}

template <typename T>
void backwardTyped(Context &C, const OpCall &Call, const LossProblem &LP,
                   const TensorView *DLoss, const TensorView *DLogProb,
                   const TensorView *DScores, const TensorView *DWeights) {
  Workspace<T> W(C, Call, LP);
  W.stats(nullptr);
  const T *GLoss = DLoss ? DLoss->as<const T>() : nullptr;
  if (DScores && LP.N * LP.D > 0) {
    const T *GLogProb = DLogProb ? DLogProb->as<const T>() : nullptr;
    if (W.warpPerPosition())
      scoresGradKernel<T, WarpSize>
          <<<W.blocksFor(WarpSize), BlockSize, 0, C.Stream>>>(
              W.P, GLoss, GLogProb, DScores->as<T>());
    else
      scoresGradKernel<T, 1><<<W.blocksFor(1), BlockSize, 0, C.Stream>>>(
          W.P, GLoss, GLogProb, DScores->as<T>());
    checkLaunch(Call, "loss scores gradient kernel");
  }
  if (DWeights && DLoss && LP.C > 0) {
    weightsGradKernel<T>
        <<<static_cast<unsigned>(std::min<int64_t>(LP.C, 65535)), BlockSize, 0,
           C.Stream>>>(W.P, GLoss, DWeights->as<T>());
    checkLaunch(Call, "loss weights gradient kernel");
  }
  W.checkLabels();
}

} // namespace

void forwardLoss(Context &C, const OpCall &Call) {
  if (Call.Kind != OpKind::SoftmaxCrossEntropyLoss)
    failOp(Call, "is not a loss op");
  LossProblem P = describe(Call);
  if (P.Scores->Type == DType::Float32)
    forwardTyped<float>(C, Call, P);
  else
    forwardTyped<double>(C, Call, P);
}

void backwardLoss(Context &C, const OpCall &Call, const Views &OutputGrads,
                  const Views &InputGrads) {
  if (Call.Kind != OpKind::SoftmaxCrossEntropyLoss)
    failOp(Call, "is not a loss op");
  auto Present = [](const Views &V, size_t I) -> const TensorView * {
    return I < V.size() && V[I].present() ? &V[I] : nullptr;
  };
  const TensorView *DScores = Present(InputGrads, 0),
                   *DWeights = Present(InputGrads, 2),
                   *DLoss = Present(OutputGrads, 0),
                   *DLogProb = Present(OutputGrads, 1);
  if ((!DScores && !DWeights) || (!DLoss && !DLogProb))
    return; // labels are integers: never a gradient
  LossProblem P = describe(Call);
  if (DWeights && !P.Weights)
    failOp(Call, "has a weights gradient but no weights input");
  auto Check = [&](const TensorView *G, const TensorView &Like,
                   const char *What) {
    if (!G)
      return;
    requireContiguous(Call, *G, What);
    requireType(Call, *G, Like.Type, What);
    if (G->numElements() != Like.numElements())
      failOp(Call, std::string(What) + " " + shapeString(*G) +
                       " does not match " + shapeString(Like));
  };
  Check(DScores, *P.Scores, "scores gradient");
  if (P.Weights)
    Check(DWeights, *P.Weights, "weights gradient");
  Check(DLoss, Call.Outputs[0], "loss gradient");
  Check(DLogProb, *P.Scores, "log_prob gradient");
  if (P.Scores->Type == DType::Float32)
    backwardTyped<float>(C, Call, P, DLoss, DLogProb, DScores, DWeights);
  else
    backwardTyped<double>(C, Call, P, DLoss, DLogProb, DScores, DWeights);
}

} // namespace onnx2soap::rt::cuda
