//===- tests/runtime_lib_cuda/CudaVsCpuTest.cpp - CUDA kernels vs CPU -----===//
//
// Every op kind's CUDA forward and backward against its CPU twin on the same
// small operands (KernelCases.h). This links every CUDA kernel, so it also
// proves the CUDA backend builds; on a machine without a GPU it checks that the
// backend refuses to start with a clear message, and skips the comparisons.
//
//===----------------------------------------------------------------------===//
#include "KernelCases.h"
#include "runtime_lib/Error.h"
#include "runtime_lib/cuda/CudaBackend.h"

using namespace onnx2soap::rt;
using namespace onnx2soap::rt::test;

namespace {

TEST(CudaBackend, StartsOrSaysWhyNot) {
  std::string Why = cudaAvailability();
  if (Why.empty()) {
    auto B = createCudaBackend(0);
    EXPECT_STREQ(B->name(), "cuda");
    return;
  }
  EXPECT_THAT(Why, ::testing::HasSubstr("CUDA"));
  try {
    createCudaBackend(0);
    ADD_FAILURE() << "createCudaBackend succeeded without a device";
  } catch (const RuntimeError &E) {
    EXPECT_THAT(E.what(), ::testing::HasSubstr(Why));
  }
}

/// Copies host tensors to device buffers of B and back.
struct DeviceTensors {
  std::vector<DeviceBuffer> Buffers;
  std::vector<TensorView> Views;
  DeviceTensors(Backend &B, std::vector<HostTensor> &Host) {
    for (HostTensor &T : Host) {
      Buffers.emplace_back(B, T.Bytes.size());
      B.copyFromHost(Buffers.back().data(), T.Bytes.data(), T.Bytes.size());
      TensorView V = T.view();
      V.Data = Buffers.back().data();
      Views.push_back(V);
    }
  }
  void download(Backend &B, std::vector<HostTensor> &Host) {
    for (size_t I = 0; I < Host.size(); ++I)
      B.copyToHost(Host[I].Bytes.data(), Views[I].Data, Host[I].Bytes.size());
  }
};

/// Forward outputs and requested input gradients of C on backend B.
std::pair<std::vector<HostTensor>, std::vector<HostTensor>> runOn(Backend &B,
                                                                  Case C) {
  std::mt19937 Rng(7);
  std::vector<HostTensor> OutGradsHost = C.Outputs;
  for (HostTensor &G : OutGradsHost)
    if (G.Type == DType::Float32)
      randomize(G, Rng);
  DeviceTensors In(B, C.Inputs), Out(B, C.Outputs), OutGrads(B, OutGradsHost);
  OpCall Call{C.Kind,    C.Attrs, C.Name,         In.Views,
              Out.Views, 1,       C.GlobalOffset, C.GlobalDims};
  B.forward(Call);
  std::vector<HostTensor> GradHost;
  for (HostTensor &T : C.Inputs)
    GradHost.push_back(HostTensor(T.Type, T.Dims));
  DeviceTensors Grads(B, GradHost);
  std::vector<TensorView> GradViews(C.Inputs.size(), TensorView::absent());
  for (unsigned I : C.GradInputs)
    GradViews[I] = Grads.Views[I];
  if (!C.GradInputs.empty())
    B.backward(Call, OutGrads.Views, GradViews);
  B.synchronize();
  Out.download(B, C.Outputs);
  Grads.download(B, GradHost);
  return {C.Outputs, GradHost};
}

TEST(CudaBackend, KernelsMatchTheCpuBackend) {
  std::string Why = cudaAvailability();
  if (!Why.empty())
    GTEST_SKIP() << Why << " (the CUDA kernels built and linked)";
  auto Gpu = createCudaBackend(0);
  auto Cpu = createCpuBackend(1);
  for (const Case &C : cases()) {
    SCOPED_TRACE(C.Name);
    auto [CpuOut, CpuGrad] = runOn(*Cpu, C);
    auto [GpuOut, GpuGrad] = runOn(*Gpu, C);
    for (size_t K = 0; K < CpuOut.size(); ++K)
      for (int64_t E = 0; E < CpuOut[K].size(); ++E)
        EXPECT_NEAR(GpuOut[K].at(E), CpuOut[K].at(E),
                    1e-4 * std::max(1.0, std::fabs(CpuOut[K].at(E))))
            << "output " << K << " element " << E;
    for (unsigned I : C.GradInputs)
      for (int64_t E = 0; E < CpuGrad[I].size(); ++E)
        EXPECT_NEAR(GpuGrad[I].at(E), CpuGrad[I].at(E),
                    1e-4 * std::max(1.0, std::fabs(CpuGrad[I].at(E))))
            << "gradient of input " << I << " element " << E;
  }
}

/// BatchNorm split in two along N, run in the phases of Backend.h with the
/// Stats and Sums summed on the host: outputs, dX, the partitions' dscale
/// and dbias, and the phases' Stats and Sums, against the CPU backend.
std::vector<HostTensor> runPhasesOn(Backend &B, bool Training) {
  std::mt19937 Rng(11);
  RandomF32 Random{Rng};
  OpAttrs A;
  A.set("training", int64_t(Training));
  A.set("momentum", 0.9);
  A.set("epsilon", 1e-5);
  const int64_t C = 3, Count = 4 * 5;
  std::vector<HostTensor> Common = {
      Random({C}, 0.5, 1.5), Random({C}), Random({C}),
      Random({C}, 0.5, 1.5), Random({C}), Random({C})};
  DeviceTensors Shared(B, Common); // scale, bias, mean, var, d running stats
  std::vector<HostTensor> Host;    // per part: X, dY, Y, run mean, run var,
                                   // dX, dscale, dbias, Stats, Sums
  for (int Part = 0; Part < 2; ++Part)
    for (HostTensor T : {Random({2, C, 5}), Random({2, C, 5}), f32({2, C, 5}),
                         f32({C}), f32({C}), f32({2, C, 5}), f32({C}), f32({C}),
                         f32({2, C}), f32({2, C})})
      Host.push_back(T);
  DeviceTensors Dev(B, Host);
  auto V = [&](int Part, int K) { return Dev.Views[Part * 10 + K]; };
  auto callOf = [&](int Part) {
    return OpCall{OpKind::BatchNorm,
                  A,
                  "bn",
                  {V(Part, 0), Shared.Views[0], Shared.Views[1],
                   Shared.Views[2], Shared.Views[3]},
                  {V(Part, 2), V(Part, 3), V(Part, 4)},
                  1};
  };
  // The all-reduce: Stats (K 8) or Sums (K 9) of both parts into both.
  auto allReduce = [&](int K) {
    B.synchronize();
    Dev.download(B, Host);
    for (int64_t I = 0; I < 2 * C; ++I) {
      float Sum = Host[K].data<float>()[I] + Host[10 + K].data<float>()[I];
      Host[K].data<float>()[I] = Host[10 + K].data<float>()[I] = Sum;
    }
    for (int Part = 0; Part < 2; ++Part)
      B.copyFromHost(V(Part, K).Data, Host[Part * 10 + K].Bytes.data(),
                     Host[K].Bytes.size());
  };
  for (int Part = 0; Part < 2; ++Part)
    B.batchNormPartialStats(callOf(Part), V(Part, 8));
  allReduce(8);
  for (int Part = 0; Part < 2; ++Part)
    B.batchNormForwardWithStats(callOf(Part), V(Part, 8), Count);
  for (int Part = 0; Part < 2; ++Part)
    B.batchNormBackwardPartialSums(callOf(Part), V(Part, 1), V(Part, 8), Count,
                                   V(Part, 9));
  allReduce(9);
  for (int Part = 0; Part < 2; ++Part)
    B.batchNormBackwardWithSums(
        callOf(Part), {V(Part, 1), Shared.Views[4], Shared.Views[5]},
        {V(Part, 5), V(Part, 6), V(Part, 7)}, V(Part, 8), V(Part, 9), Count);
  B.synchronize();
  Dev.download(B, Host);
  return Host;
}

TEST(CudaBackend, ShardedBatchNormPhasesMatchTheCpuBackend) {
  std::string Why = cudaAvailability();
  if (!Why.empty())
    GTEST_SKIP() << Why << " (the CUDA kernels built and linked)";
  auto Gpu = createCudaBackend(0);
  auto Cpu = createCpuBackend(1);
  for (bool Training : {true, false}) {
    SCOPED_TRACE(Training ? "training" : "inference");
    std::vector<HostTensor> CpuOut = runPhasesOn(*Cpu, Training);
    std::vector<HostTensor> GpuOut = runPhasesOn(*Gpu, Training);
    for (size_t K = 0; K < CpuOut.size(); ++K)
      for (int64_t E = 0; E < CpuOut[K].size(); ++E)
        EXPECT_NEAR(GpuOut[K].at(E), CpuOut[K].at(E),
                    1e-4 * std::max(1.0, std::fabs(CpuOut[K].at(E))))
            << "tensor " << K << " element " << E;
  }
}

} // namespace
