//===- tests/runtime_lib/OptimizerTest.cpp - Parameter updates on the CPU -===//
//
// SGD (plain, momentum with dampening and weight decay, Nesterov), Adam
// (with and without weight decay) and AdamW over several steps, against
// PyTorch 1.13's rules written out in double (tests/fixtures/README.md);
// f32 results agree to a relative 1e-6. Plus one step checked by hand and
// the errors on malformed state.
//
//===----------------------------------------------------------------------===//
#include "KernelTestUtil.h"
#include "runtime_lib/Error.h"

using namespace onnx2soap::rt;
using namespace onnx2soap::rt::test;

namespace {

/// PyTorch 1.13's update of one element, in double.
struct ReferenceOptimizer {
  OptimizerConfig Config;
  std::vector<double> Buffer, M, V;

  void step(int64_t T, std::vector<double> &P, const std::vector<double> &G) {
    size_t N = P.size();
    Buffer.resize(N);
    M.resize(N);
    V.resize(N);
    const OptimizerConfig &C = Config;
    for (size_t I = 0; I < N; ++I) {
      double Grad = G[I];
      if (C.Kind == OptimizerKind::Sgd) {
        double D = Grad + C.WeightDecay * P[I];
        if (C.Momentum != 0) {
          Buffer[I] =
              T == 1 ? D : C.Momentum * Buffer[I] + (1 - C.Dampening) * D;
          D = C.Nesterov ? D + C.Momentum * Buffer[I] : Buffer[I];
        }
        P[I] -= C.LearningRate * D;
        continue;
      }
      if (C.Kind == OptimizerKind::AdamW)
        P[I] *= 1 - C.LearningRate * C.WeightDecay;
      else
        Grad += C.WeightDecay * P[I];
      M[I] = C.Beta1 * M[I] + (1 - C.Beta1) * Grad;
      V[I] = C.Beta2 * V[I] + (1 - C.Beta2) * Grad * Grad;
      double Bc1 = 1 - std::pow(C.Beta1, double(T));
      double Bc2 = 1 - std::pow(C.Beta2, double(T));
      P[I] -= (C.LearningRate / Bc1) * M[I] /
              (std::sqrt(V[I]) / std::sqrt(Bc2) + C.Epsilon);
    }
  }
};

struct NamedConfig {
  const char *Name;
  OptimizerConfig Config;
};

std::vector<NamedConfig> configs() {
  std::vector<NamedConfig> Out;
  OptimizerConfig C;
  C.Kind = OptimizerKind::Sgd;
  C.LearningRate = 0.1;
  Out.push_back({"sgd", C});
  C.Momentum = 0.9;
  C.WeightDecay = 1e-4;
  Out.push_back({"sgd momentum + wd", C});
  C.Dampening = 0.3;
  Out.push_back({"sgd momentum + dampening", C});
  C.Dampening = 0;
  C.Nesterov = true;
  Out.push_back({"sgd nesterov", C});
  OptimizerConfig A;
  A.Kind = OptimizerKind::Adam;
  A.LearningRate = 1e-2;
  Out.push_back({"adam", A});
  A.WeightDecay = 0.05;
  A.Beta1 = 0.8;
  A.Beta2 = 0.99;
  A.Epsilon = 1e-6;
  Out.push_back({"adam wd, other betas", A});
  A.Kind = OptimizerKind::AdamW;
  Out.push_back({"adamw", A});
  return Out;
}

TEST(OptimizerTest, MatchesPyTorchRulesOverSeveralSteps) {
  auto B = createCpuBackend(1);
  std::mt19937 Rng(3);
  for (const NamedConfig &NC : configs()) {
    SCOPED_TRACE(NC.Name);
    const int64_t N = 37;
    HostTensor P = f32({N}), G = f32({N});
    randomize(P, Rng);
    std::vector<HostTensor> State;
    for (int I = 0; I < optimizerStateCount(NC.Config); ++I)
      State.push_back(f32({N}));
    std::vector<TensorView> StateViews;
    for (HostTensor &S : State)
      StateViews.push_back(S.view());
    ReferenceOptimizer Ref{NC.Config, {}, {}, {}};
    std::vector<double> RefP(N);
    for (int64_t I = 0; I < N; ++I)
      RefP[I] = P.at(I);
    for (int64_t Step = 1; Step <= 5; ++Step) {
      randomize(G, Rng);
      std::vector<double> RefG(N);
      for (int64_t I = 0; I < N; ++I)
        RefG[I] = G.at(I);
      B->update(NC.Config, Step, P.view(), G.view(), StateViews);
      Ref.step(Step, RefP, RefG);
      for (int64_t I = 0; I < N; ++I)
        ASSERT_NEAR(P.at(I), RefP[I], 1e-6 * std::max(1.0, std::fabs(RefP[I])))
            << "step " << Step << " element " << I;
    }
  }
}

TEST(OptimizerTest, HandComputedSteps) {
  auto B = createCpuBackend(1);
  // Adam, step 1: m/(1-b1) = g and sqrt(v)/sqrt(1-b2) = |g|, so the update
  // is lr * g / (|g| + eps): about lr * sign(g).
  OptimizerConfig Adam;
  Adam.Kind = OptimizerKind::Adam;
  Adam.LearningRate = 0.5;
  HostTensor P = f32({2}, {1, 1}), G = f32({2}, {0.25, -4}), M = f32({2}),
             V = f32({2});
  B->update(Adam, 1, P.view(), G.view(), {M.view(), V.view()});
  EXPECT_NEAR(P.at(0), 0.5, 1e-6);
  EXPECT_NEAR(P.at(1), 1.5, 1e-6);
  EXPECT_NEAR(M.at(0), 0.025, 1e-8);
  EXPECT_NEAR(V.at(1), 0.016, 1e-8);

  // SGD momentum 0.5: step 1 buf = g, p = 1 - 0.1*2 = 0.8; step 2 buf =
  // 0.5*2 + 2 = 3, p = 0.8 - 0.3 = 0.5. Nesterov step 1 uses g + 0.5*g.
  OptimizerConfig Sgd;
  Sgd.LearningRate = 0.1;
  Sgd.Momentum = 0.5;
  HostTensor Q = f32({1}, {1}), H = f32({1}, {2}), Buf = f32({1});
  B->update(Sgd, 1, Q.view(), H.view(), {Buf.view()});
  EXPECT_NEAR(Q.at(0), 0.8, 1e-7);
  B->update(Sgd, 2, Q.view(), H.view(), {Buf.view()});
  EXPECT_NEAR(Buf.at(0), 3, 1e-7);
  EXPECT_NEAR(Q.at(0), 0.5, 1e-7);
  Sgd.Nesterov = true;
  HostTensor R = f32({1}, {1}), Buf2 = f32({1});
  B->update(Sgd, 1, R.view(), H.view(), {Buf2.view()});
  EXPECT_NEAR(R.at(0), 1 - 0.1 * 3, 1e-7);

  // AdamW decays before the update: with g = 0 only the decay remains.
  OptimizerConfig AdamW;
  AdamW.Kind = OptimizerKind::AdamW;
  AdamW.LearningRate = 0.1;
  AdamW.WeightDecay = 0.5;
  HostTensor S = f32({1}, {2}), Zero = f32({1}), M1 = f32({1}), V1 = f32({1});
  B->update(AdamW, 1, S.view(), Zero.view(), {M1.view(), V1.view()});
  EXPECT_NEAR(S.at(0), 2 * 0.95, 1e-7);
}

TEST(OptimizerTest, F64Parameters) {
  auto B = createCpuBackend(1);
  OptimizerConfig C;
  C.Kind = OptimizerKind::Adam;
  C.LearningRate = 0.01;
  HostTensor P(DType::Float64, {3}), G(DType::Float64, {3}),
      M(DType::Float64, {3}), V(DType::Float64, {3});
  std::mt19937 Rng(5);
  randomize(P, Rng);
  randomize(G, Rng);
  ReferenceOptimizer Ref{C, {}, {}, {}};
  std::vector<double> RefP = {P.at(0), P.at(1), P.at(2)},
                      RefG = {G.at(0), G.at(1), G.at(2)};
  for (int64_t Step = 1; Step <= 3; ++Step) {
    B->update(C, Step, P.view(), G.view(), {M.view(), V.view()});
    Ref.step(Step, RefP, RefG);
  }
  for (int I = 0; I < 3; ++I)
    EXPECT_NEAR(P.at(I), RefP[I], 1e-14);
}

TEST(OptimizerTest, MalformedStateIsAnError) {
  auto B = createCpuBackend(1);
  OptimizerConfig C;
  C.Kind = OptimizerKind::Adam;
  HostTensor P = f32({4}), G = f32({4}), M = f32({4}), Short = f32({3});
  try {
    B->update(C, 1, P.view(), G.view(), {M.view()});
    ADD_FAILURE() << "no error";
  } catch (const RuntimeError &E) {
    EXPECT_THAT(E.what(), ::testing::HasSubstr("Adam"));
    EXPECT_THAT(E.what(), ::testing::HasSubstr("2 state tensors"));
  }
  EXPECT_THROW(B->update(C, 1, P.view(), G.view(), {M.view(), Short.view()}),
               RuntimeError);
  EXPECT_THROW(B->update(C, 1, P.view(), Short.view(), {M.view(), M.view()}),
               RuntimeError);
  HostTensor I = i64({4});
  OptimizerConfig Sgd;
  EXPECT_THROW(B->update(Sgd, 1, I.view(), I.view(), {}), RuntimeError);
  EXPECT_THROW(B->update(Sgd, 0, P.view(), G.view(), {}), RuntimeError);
}

} // namespace
