//===- tests/runtime_lib/ThreadingTest.cpp - Threaded CPU kernels ---------===//
//
// The CPU loop kernels split large tensors between OpenMP threads
// (runtime_lib/cpu/Parallel.h) and promise that the split changes nothing:
// every element is computed by the same operations in the same order on any
// number of threads. These tests run each threaded kernel on operands large
// enough to be split, once on a 1-thread and once on a 3-thread backend, and
// require bit-identical outputs and gradients (convolution: where oneDNN's
// own sums do not depend on its thread split). The other suites check the
// values themselves, on operands too small to be split. Also here: MaxPool's
// backward sends a tied window's gradient to its first maximal tap, as
// oneDNN and PyTorch do.
//
//===----------------------------------------------------------------------===//
#include "KernelTestUtil.h"

using namespace onnx2soap::rt;
using namespace onnx2soap::rt::test;

namespace {

OpAttrs makeAttrs(
    std::initializer_list<std::pair<const char *, OpAttrs::Value>> Entries) {
  OpAttrs A;
  for (const auto &[Name, V] : Entries)
    A.set(Name, V);
  return A;
}

HostTensor randomF32(std::vector<int64_t> Dims, unsigned Seed, double Low = -1,
                     double High = 1) {
  HostTensor T = f32(std::move(Dims));
  std::mt19937 Rng(Seed);
  randomize(T, Rng, Low, High);
  return T;
}

/// What one forward + backward run of an op produced.
struct RunResult {
  std::vector<HostTensor> Outputs, InputGrads;
};

/// Forward, then backward with random output gradients into input
/// gradients that start from a random value (backward must add), on a
/// backend with Threads threads. Inputs are copied, so runs are independent.
RunResult runOp(int Threads, OpKind Kind, const OpAttrs &Attrs,
                std::vector<HostTensor> Inputs, std::vector<HostTensor> Outputs,
                const std::vector<bool> &WantGrad) {
  auto Backend = createCpuBackend(Threads);
  RunResult R;
  R.Outputs = std::move(Outputs);
  OpCall Call{Kind, Attrs, "threaded", {}, {}, 1};
  for (HostTensor &T : Inputs)
    Call.Inputs.push_back(T.view());
  for (HostTensor &T : R.Outputs)
    Call.Outputs.push_back(T.view());
  Backend->forward(Call);
  std::vector<HostTensor> OutGrads;
  std::vector<TensorView> OutGradViews, InGradViews;
  for (size_t I = 0; I < R.Outputs.size(); ++I)
    OutGrads.push_back(randomF32(R.Outputs[I].Dims, 100 + I));
  for (HostTensor &G : OutGrads)
    OutGradViews.push_back(G.view());
  for (size_t I = 0; I < Inputs.size(); ++I)
    R.InputGrads.push_back(WantGrad[I] ? randomF32(Inputs[I].Dims, 200 + I)
                                       : HostTensor());
  for (size_t I = 0; I < Inputs.size(); ++I)
    InGradViews.push_back(WantGrad[I] ? R.InputGrads[I].view()
                                      : TensorView::absent());
  Backend->backward(Call, OutGradViews, InGradViews);
  return R;
}

void expectBitIdentical(const HostTensor &A, const HostTensor &B,
                        const std::string &What) {
  ASSERT_EQ(A.Bytes.size(), B.Bytes.size()) << What;
  int64_t Differing = 0, First = -1;
  for (int64_t I = 0; I < A.size(); ++I)
    if (std::memcmp(&A.Bytes[I * 4], &B.Bytes[I * 4], 4) != 0 &&
        Differing++ == 0)
      First = I;
  EXPECT_EQ(Differing, 0) << What << ": first difference at element " << First
                          << " (" << A.at(First) << " vs " << B.at(First)
                          << ")";
}

/// Runs the op on 1 and on 3 threads and compares everything.
void expectThreadInvariant(OpKind Kind, const OpAttrs &Attrs,
                           const std::vector<HostTensor> &Inputs,
                           const std::vector<HostTensor> &Outputs,
                           const std::vector<bool> &WantGrad) {
  RunResult Serial = runOp(1, Kind, Attrs, Inputs, Outputs, WantGrad);
  RunResult Threaded = runOp(3, Kind, Attrs, Inputs, Outputs, WantGrad);
  std::string Name = opKindName(Kind);
  for (size_t I = 0; I < Outputs.size(); ++I)
    expectBitIdentical(Serial.Outputs[I], Threaded.Outputs[I],
                       Name + " output " + std::to_string(I));
  for (size_t I = 0; I < Inputs.size(); ++I)
    if (WantGrad[I])
      expectBitIdentical(Serial.InputGrads[I], Threaded.InputGrads[I],
                         Name + " gradient of input " + std::to_string(I));
}

// Large enough for every kernel to split (Parallel.h's grain is 32768
// elements of simple work).
const std::vector<int64_t> Activation = {4, 16, 40, 40};

TEST(ThreadedKernels, BatchNormTrainingIsThreadInvariant) {
  OpAttrs Attrs = makeAttrs(
      {{"epsilon", 1e-5}, {"momentum", 0.9}, {"training", int64_t(1)}});
  std::vector<HostTensor> Inputs = {
      randomF32(Activation, 1), randomF32({16}, 2, 0.5, 1.5),
      randomF32({16}, 3), randomF32({16}, 4), randomF32({16}, 5, 0.5, 1.5)};
  expectThreadInvariant(OpKind::BatchNorm, Attrs, Inputs,
                        {f32(Activation), f32({16}), f32({16})},
                        {true, true, true, true, true});
}

TEST(ThreadedKernels, BatchNormInferenceIsThreadInvariant) {
  OpAttrs Attrs = makeAttrs({{"epsilon", 1e-5}});
  std::vector<HostTensor> Inputs = {
      randomF32(Activation, 1), randomF32({16}, 2, 0.5, 1.5),
      randomF32({16}, 3), randomF32({16}, 4), randomF32({16}, 5, 0.5, 1.5)};
  expectThreadInvariant(OpKind::BatchNorm, Attrs, Inputs, {f32(Activation)},
                        {true, true, true, true, true});
}

TEST(ThreadedKernels, ElementwiseAndBroadcastAreThreadInvariant) {
  OpAttrs None;
  expectThreadInvariant(OpKind::Relu, None, {randomF32(Activation, 1)},
                        {f32(Activation)}, {true});
  expectThreadInvariant(OpKind::Tanh, None, {randomF32(Activation, 1)},
                        {f32(Activation)}, {true});
  // Same shapes (split) and a broadcast operand (its gradient is a
  // reduction, which must stay serial).
  expectThreadInvariant(OpKind::Add, None,
                        {randomF32(Activation, 1), randomF32(Activation, 2)},
                        {f32(Activation)}, {true, true});
  expectThreadInvariant(OpKind::Mul, None,
                        {randomF32(Activation, 1), randomF32({16, 1, 1}, 2)},
                        {f32(Activation)}, {true, true});
}

TEST(ThreadedKernels, PoolsAreThreadInvariant) {
  OpAttrs Max = makeAttrs({{"kernel_shape", std::vector<int64_t>{3, 3}},
                           {"strides", std::vector<int64_t>{2, 2}},
                           {"pads", std::vector<int64_t>{1, 1, 1, 1}}});
  // Quantized values: many windows hold ties.
  HostTensor X = randomF32(Activation, 1);
  for (int64_t I = 0; I < X.size(); ++I)
    X.set(I, std::round(X.at(I) * 2));
  expectThreadInvariant(OpKind::MaxPool, Max, {X}, {f32({4, 16, 20, 20})},
                        {true});
  OpAttrs None;
  expectThreadInvariant(OpKind::GlobalAveragePool, None,
                        {randomF32({4, 64, 24, 24}, 1)}, {f32({4, 64, 1, 1})},
                        {true});
}

TEST(ThreadedKernels, ConvolutionAgreesAcrossThreadCounts) {
  // oneDNN's blocked layouts and the reorders around them, and the loop
  // that sums the bias gradient (bit-identical). oneDNN itself splits the
  // weight gradient's sum over the batch between threads, so dW (and, by
  // oneDNN's choice of split, dX) agree to float rounding only: within
  // 1e-6 per summed product of magnitude <= 1 (dW sums 4 * 40 * 40 = 6400).
  OpAttrs Attrs = makeAttrs({{"kernel_shape", std::vector<int64_t>{3, 3}},
                             {"pads", std::vector<int64_t>{1, 1, 1, 1}}});
  std::vector<HostTensor> Inputs = {randomF32(Activation, 1),
                                    randomF32({32, 16, 3, 3}, 2),
                                    randomF32({32}, 3)};
  std::vector<HostTensor> Outputs = {f32({4, 32, 40, 40})};
  RunResult Serial =
      runOp(1, OpKind::Conv, Attrs, Inputs, Outputs, {true, true, true});
  RunResult Threaded =
      runOp(3, OpKind::Conv, Attrs, Inputs, Outputs, {true, true, true});
  const double Tolerance = 1e-6 * 6400;
  expectBitIdentical(Serial.InputGrads[2], Threaded.InputGrads[2],
                     "Conv bias gradient");
  for (int I = 0; I < 2; ++I) {
    const HostTensor &A = Serial.InputGrads[I], &B = Threaded.InputGrads[I];
    for (int64_t E = 0; E < A.size(); ++E)
      ASSERT_NEAR(A.at(E), B.at(E), Tolerance)
          << "gradient of input " << I << " element " << E;
  }
  const HostTensor &A = Serial.Outputs[0], &B = Threaded.Outputs[0];
  for (int64_t E = 0; E < A.size(); ++E)
    ASSERT_NEAR(A.at(E), B.at(E), Tolerance) << "output element " << E;
}

TEST(ThreadedKernels, OptimizerUpdateIsThreadInvariant) {
  OptimizerConfig Config;
  Config.Kind = OptimizerKind::AdamW;
  Config.WeightDecay = 0.01;
  HostTensor Results[2];
  for (int Run = 0; Run < 2; ++Run) {
    auto Backend = createCpuBackend(Run ? 3 : 1);
    HostTensor P = randomF32({300, 300}, 1), G = randomF32({300, 300}, 2);
    HostTensor M = f32({300, 300}), V = f32({300, 300});
    for (int64_t Step = 1; Step <= 2; ++Step)
      Backend->update(Config, Step, P.view(), G.view(), {M.view(), V.view()});
    Results[Run] = P;
  }
  expectBitIdentical(Results[0], Results[1], "AdamW parameter");
}

TEST(ThreadedKernels, MaxPoolBackwardGivesTiesToTheFirstTap) {
  auto Backend = createCpuBackend(1);
  // All-equal input: every window is one tie. 3x3 windows, stride 1, pad 1
  // over 3x3: output (i, j)'s first tap inside the input is (max(i-1, 0),
  // max(j-1, 0)).
  OpAttrs Attrs = makeAttrs({{"kernel_shape", std::vector<int64_t>{3, 3}},
                             {"pads", std::vector<int64_t>{1, 1, 1, 1}}});
  HostTensor X = f32({1, 1, 3, 3}), Y = f32({1, 1, 3, 3});
  for (int64_t I = 0; I < 9; ++I)
    X.set(I, -2.0);
  runForward(*Backend, OpKind::MaxPool, Attrs, {&X}, {&Y});
  HostTensor DY = f32({1, 1, 3, 3}), DX = f32({1, 1, 3, 3});
  for (int64_t I = 0; I < 9; ++I)
    DY.set(I, double(int64_t(1) << I)); // which window sent what
  OpCall Call{OpKind::MaxPool, Attrs, "pool", {X.view()}, {Y.view()}, 1};
  Backend->backward(Call, {DY.view()}, {DX.view()});
  std::vector<double> Expected(9, 0);
  for (int64_t I = 0; I < 3; ++I)
    for (int64_t J = 0; J < 3; ++J)
      Expected[std::max<int64_t>(I - 1, 0) * 3 + std::max<int64_t>(J - 1, 0)] +=
          double(int64_t(1) << (I * 3 + J));
  for (int64_t I = 0; I < 9; ++I)
    EXPECT_EQ(DX.at(I), Expected[I]) << "element " << I;
}

} // namespace
