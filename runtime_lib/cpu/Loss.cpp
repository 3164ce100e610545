//===- runtime_lib/cpu/Loss.cpp - SoftmaxCrossEntropyLoss -----------------===//
//
// ONNX's SoftmaxCrossEntropyLoss as plain loops: scores [N,C,d...] (f32 or
// f64), labels [N,d...] (i32 or i64), optional class weights [C]. log_prob
// is a numerically stable log-softmax over C (x - max - log sum exp(x -
// max)); the loss at position (n,d) is -w[label] * log_prob[n,label,d], 0
// for ignored labels. "mean" divides the sum by the sum of the weights of
// the non-ignored positions (their count without weights: ONNX semantics,
// 0/0 = NaN when every label is ignored, as ONNX and PyTorch), "sum" sums,
// "none" keeps [N,d...]. Sums accumulate in double.
//
// The backward recomputes the log-sum-exp from the scores (it does not read
// the forward outputs) and adds both paths: the loss's, w * g * (softmax -
// onehot), and log_prob's own gradient, dlp - softmax * sum_c dlp. Class
// weights get their gradient too when one is asked for; labels get none.
//
//===----------------------------------------------------------------------===//
#include "CpuKernels.h"
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace onnx2soap::rt::cpu {
namespace {

enum class Reduction { Mean, Sum, None };

struct LossProblem {
  int64_t N = 0, C = 0, D = 1; // batch, classes, product of the d... dims
  Reduction Reduce = Reduction::Mean;
  bool HasIgnore = false;
  int64_t IgnoreIndex = 0;
  const TensorView *Scores = nullptr, *Labels = nullptr, *Weights = nullptr;
};

std::string shapeString(const TensorView &V) {
  std::string S = "[";
  for (int I = 0; I < V.Rank; ++I)
    S += (I ? "," : "") + std::to_string(V.Dims[I]);
  return S + "]";
}

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
                     ", the CPU kernel needs f32 or "
                     "f64");
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

/// Label of position I (n * D + d), or -1 when ignored; fails out of range.
int64_t labelAt(const OpCall &Call, const LossProblem &P, int64_t I) {
  int64_t L = P.Labels->Type == DType::Int32 ? P.Labels->as<int32_t>()[I]
                                             : P.Labels->as<int64_t>()[I];
  if (P.HasIgnore && L == P.IgnoreIndex)
    return -1;
  if (L < 0 || L >= P.C)
    failOp(Call, "label " + std::to_string(L) + " at position " +
                     std::to_string(I) + " is outside [0, " +
                     std::to_string(P.C) + ")");
  return L;
}

/// Lse[n * D + d] = log sum_c exp(x[n,c,d]), computed stably.
template <typename T> std::vector<T> logSumExp(const LossProblem &P) {
  const T *X = P.Scores->as<T>();
  std::vector<T> Lse(P.N * P.D), Max(P.D), Sum(P.D);
  for (int64_t N = 0; N < P.N; ++N) {
    const T *Row = X + N * P.C * P.D;
    std::fill(Max.begin(), Max.end(), -std::numeric_limits<T>::infinity());
    for (int64_t C = 0; C < P.C; ++C)
      for (int64_t D = 0; D < P.D; ++D)
        Max[D] = std::max(Max[D], Row[C * P.D + D]);
    std::fill(Sum.begin(), Sum.end(), T(0));
    for (int64_t C = 0; C < P.C; ++C)
      for (int64_t D = 0; D < P.D; ++D)
        Sum[D] += std::exp(Row[C * P.D + D] - Max[D]);
    for (int64_t D = 0; D < P.D; ++D)
      Lse[N * P.D + D] = Max[D] + std::log(Sum[D]);
  }
  return Lse;
}

/// The weight of position I with label L (>= 0).
template <typename T> T weightOf(const LossProblem &P, int64_t L) {
  return P.Weights ? P.Weights->as<T>()[L] : T(1);
}

template <typename T> void forwardTyped(const OpCall &Call, LossProblem &P) {
  std::vector<T> Lse = logSumExp<T>(P);
  const T *X = P.Scores->as<T>();
  if (Call.Outputs.size() > 1 && Call.Outputs[1].present()) {
    T *LogProb = Call.Outputs[1].as<T>();
    for (int64_t N = 0; N < P.N; ++N)
      for (int64_t C = 0; C < P.C; ++C)
        for (int64_t D = 0; D < P.D; ++D) {
          int64_t I = (N * P.C + C) * P.D + D;
          LogProb[I] = X[I] - Lse[N * P.D + D];
        }
  }
  T *Loss = Call.Outputs[0].as<T>();
  double Sum = 0, WeightSum = 0;
  for (int64_t N = 0; N < P.N; ++N)
    for (int64_t D = 0; D < P.D; ++D) {
      int64_t I = N * P.D + D, L = labelAt(Call, P, I);
      T Value = 0;
      if (L >= 0) {
        T W = weightOf<T>(P, L);
        Value = -W * (X[(N * P.C + L) * P.D + D] - Lse[I]);
        WeightSum += W;
      }
      if (P.Reduce == Reduction::None)
        Loss[I] = Value;
      Sum += Value;
    }
  if (P.Reduce == Reduction::Sum)
    Loss[0] = static_cast<T>(Sum);
  else if (P.Reduce == Reduction::Mean)
    Loss[0] = static_cast<T>(Sum / WeightSum);
}

template <typename T>
void backwardTyped(const OpCall &Call, const LossProblem &P,
                   const TensorView *DLoss, const TensorView *DLogProb,
                   const TensorView *DScores, const TensorView *DWeights) {
  std::vector<T> Lse = logSumExp<T>(P);
  const T *X = P.Scores->as<T>();
  // Sum and weight sum of the forward, for "mean".
  double Sum = 0, WeightSum = 0;
  for (int64_t I = 0; I < P.N * P.D; ++I) {
    int64_t L = labelAt(Call, P, I);
    if (L < 0)
      continue;
    int64_t N = I / P.D, D = I % P.D;
    T W = weightOf<T>(P, L);
    WeightSum += W;
    Sum += -W * (X[(N * P.C + L) * P.D + D] - Lse[I]);
  }
  // G(I): d(total)/d(unweighted loss term at I), before the class weight.
  auto Upstream = [&](int64_t I) -> double {
    if (!DLoss)
      return 0;
    const T *G = DLoss->as<T>();
    switch (P.Reduce) {
    case Reduction::None:
      return G[I];
    case Reduction::Sum:
      return G[0];
    case Reduction::Mean:
      return G[0] / WeightSum;
    }
    return 0;
  };

  if (DScores) {
    T *Out = DScores->as<T>();
    const T *GLp = DLogProb ? DLogProb->as<T>() : nullptr;
    for (int64_t N = 0; N < P.N; ++N)
      for (int64_t D = 0; D < P.D; ++D) {
        int64_t I = N * P.D + D, L = labelAt(Call, P, I);
        T Coef =
            L >= 0 ? static_cast<T>(Upstream(I)) * weightOf<T>(P, L) : T(0);
        T LpSum = 0;
        if (GLp)
          for (int64_t C = 0; C < P.C; ++C)
            LpSum += GLp[(N * P.C + C) * P.D + D];
        for (int64_t C = 0; C < P.C; ++C) {
          int64_t J = (N * P.C + C) * P.D + D;
          T Softmax = std::exp(X[J] - Lse[I]);
          T G = Coef * (Softmax - (C == L ? T(1) : T(0)));
          if (GLp)
            G += GLp[J] - Softmax * LpSum;
          Out[J] += G;
        }
      }
  }

  if (DWeights && DLoss) {
    // loss = sum_I w_I t_I (t_I = -log_prob at the label); with "mean" it is
    // divided by W = sum_I w_I, so d/dw_c = sum_{I: label c} (t_I - mean) / W.
    T *Out = DWeights->as<T>();
    double Mean = Sum / WeightSum;
    for (int64_t I = 0; I < P.N * P.D; ++I) {
      int64_t L = labelAt(Call, P, I);
      if (L < 0)
        continue;
      int64_t N = I / P.D, D = I % P.D;
      double Term = -(X[(N * P.C + L) * P.D + D] - Lse[I]);
      if (P.Reduce == Reduction::Mean)
        Term -= Mean;
      Out[L] += static_cast<T>(Upstream(I) * Term);
    }
  }
}

} // namespace

void forwardLoss(Context &, const OpCall &Call) {
  if (Call.Kind != OpKind::SoftmaxCrossEntropyLoss)
    failOp(Call, "is not a loss op");
  LossProblem P = describe(Call);
  if (P.Scores->Type == DType::Float32)
    forwardTyped<float>(Call, P);
  else
    forwardTyped<double>(Call, P);
}

void backwardLoss(Context &, const OpCall &Call, const Views &OutputGrads,
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
    backwardTyped<float>(Call, P, DLoss, DLogProb, DScores, DWeights);
  else
    backwardTyped<double>(Call, P, DLoss, DLogProb, DScores, DWeights);
}

} // namespace onnx2soap::rt::cpu
