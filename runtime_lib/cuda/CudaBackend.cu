//===- runtime_lib/cuda/CudaBackend.cu - The CUDA backend -----------------===//
//
// Device memory, copies, library handles and the dispatch from op kind to
// kernel family, mirroring runtime_lib/cpu/CpuBackend.cpp.
//
//===----------------------------------------------------------------------===//
#include "../Families.h"
#include "../LibraryMemory.h"
#include "CudaBackend.h"
#include "CudaKernels.h"
#include <cstdint>

namespace onnx2soap::rt {
namespace cuda {

void failOp(const OpCall &Call, const std::string &What) {
  fail(std::string("op '") + Call.Name + "' (" + opKindName(Call.Kind) + ")",
       What);
}

void requireContiguous(const OpCall &Call, const TensorView &V,
                       const char *What) {
  if (V.present() && !V.isContiguous())
    failOp(Call, std::string(What) + " must be a dense row-major tensor");
}

void requireType(const OpCall &Call, const TensorView &V, DType Type,
                 const char *What) {
  if (V.present() && V.Type != Type)
    failOp(Call, std::string(What) + " has element type " + dtypeName(V.Type) +
                     ", the CUDA kernel needs " + dtypeName(Type));
}

void checkCuda(const OpCall &Call, cudaError_t Status, const char *What) {
  if (Status != cudaSuccess)
    failOp(Call, std::string(What) + ": " + cudaGetErrorString(Status));
}

void checkCublas(const OpCall &Call, cublasStatus_t Status, const char *What) {
  if (Status != CUBLAS_STATUS_SUCCESS)
    failOp(Call, std::string(What) + ": " + cublasGetStatusString(Status));
}

void checkCudnn(const OpCall &Call, cudnnStatus_t Status, const char *What) {
  if (Status != CUDNN_STATUS_SUCCESS)
    failOp(Call, std::string(What) + ": " + cudnnGetErrorString(Status));
}

namespace {
void check(cudaError_t Status, const char *What) {
  if (Status != cudaSuccess)
    fail("cuda backend", std::string(What) + ": " + cudaGetErrorString(Status));
}

class CudaBackend final : public Backend {
public:
  CudaBackend(int Device, size_t ConvWorkspaceLimit) {
    Ctx.Device = Device;
    Ctx.ConvWorkspaceLimit = ConvWorkspaceLimit;
    check(cudaSetDevice(Device), "cudaSetDevice");
    check(cudaStreamCreateWithFlags(&Ctx.Stream, cudaStreamNonBlocking),
          "cudaStreamCreate");
    // Kernels take their scratch memory (convolution workspaces, reduction
    // partials) with cudaMallocAsync from the device's default pool, whose
    // default release threshold (0) hands every byte back to the driver at
    // each synchronization: every step would allocate again. Keep it.
    cudaMemPool_t Pool = nullptr;
    check(cudaDeviceGetDefaultMemPool(&Pool, Device),
          "cudaDeviceGetDefaultMemPool");
    uint64_t Keep = UINT64_MAX;
    check(cudaMemPoolSetAttribute(Pool, cudaMemPoolAttrReleaseThreshold, &Keep),
          "cudaMemPoolSetAttribute");
    if (cublasCreate(&Ctx.Blas) != CUBLAS_STATUS_SUCCESS)
      fail("cuda backend", "cublasCreate failed");
    cublasSetStream(Ctx.Blas, Ctx.Stream);
    // A workspace of our own, of the size the planner counts (setting the
    // stream above gave the handle cuBLAS's default pool).
    int Major = 0;
    check(cudaDeviceGetAttribute(&Major, cudaDevAttrComputeCapabilityMajor,
                                 Device),
          "cudaDeviceGetAttribute");
    BlasBytes = blasWorkspaceBytes(Major);
    check(cudaMalloc(&BlasWorkspace, BlasBytes),
          "cudaMalloc (cuBLAS workspace)");
    if (cublasSetWorkspace(Ctx.Blas, BlasWorkspace, BlasBytes) !=
        CUBLAS_STATUS_SUCCESS)
      fail("cuda backend", "cublasSetWorkspace failed");
    if (cudnnCreate(&Ctx.Dnn) != CUDNN_STATUS_SUCCESS)
      fail("cuda backend", "cudnnCreate failed");
    cudnnSetStream(Ctx.Dnn, Ctx.Stream);
  }
  ~CudaBackend() override {
    if (Ctx.Dnn)
      cudnnDestroy(Ctx.Dnn);
    if (Ctx.Blas)
      cublasDestroy(Ctx.Blas);
    if (BlasWorkspace)
      cudaFree(BlasWorkspace);
    if (Ctx.Stream)
      cudaStreamDestroy(Ctx.Stream);
  }
  const char *name() const override { return "cuda"; }

  void *allocate(size_t Bytes) override {
    void *P = nullptr;
    check(cudaMalloc(&P, std::max<size_t>(Bytes, 1)), "cudaMalloc");
    check(cudaMemsetAsync(P, 0, std::max<size_t>(Bytes, 1), Ctx.Stream),
          "cudaMemsetAsync");
    return P;
  }
  std::optional<size_t> freeMemory() const override {
    size_t Free = 0, Total = 0;
    if (cudaMemGetInfo(&Free, &Total) != cudaSuccess)
      return std::nullopt;
    return Free;
  }
  std::optional<size_t> memoryInUse() const override {
    size_t Free = 0, Total = 0;
    if (cudaMemGetInfo(&Free, &Total) != cudaSuccess)
      return std::nullopt;
    return Total - Free;
  }
  size_t libraryBytes() const override { return BlasBytes; }
  void deallocate(void *Pointer) override {
    cudaStreamSynchronize(Ctx.Stream);
    cudaFree(Pointer);
  }
  void copyFromHost(void *Device, const void *Host, size_t Bytes) override {
    check(cudaMemcpyAsync(Device, Host, Bytes, cudaMemcpyHostToDevice,
                          Ctx.Stream),
          "cudaMemcpy to the device");
    check(cudaStreamSynchronize(Ctx.Stream), "cudaStreamSynchronize");
  }
  void copyToHost(void *Host, const void *Device, size_t Bytes) override {
    check(cudaMemcpyAsync(Host, Device, Bytes, cudaMemcpyDeviceToHost,
                          Ctx.Stream),
          "cudaMemcpy to the host");
    check(cudaStreamSynchronize(Ctx.Stream), "cudaStreamSynchronize");
  }
  void copyOnDevice(void *To, const void *From, size_t Bytes) override {
    check(
        cudaMemcpyAsync(To, From, Bytes, cudaMemcpyDeviceToDevice, Ctx.Stream),
        "cudaMemcpy on the device");
  }
  void copyBox(const TensorView &To, const TensorView &From,
               bool Add) override {
    cuda::copyBox(Ctx, To, From, Add);
  }
  void fillZero(void *Device, size_t Bytes) override {
    check(cudaMemsetAsync(Device, 0, Bytes, Ctx.Stream), "cudaMemsetAsync");
  }

  void forward(const OpCall &Call) override {
    switch (opFamily(Call.Kind)) {
    case OpFamily::Elementwise:
      return cuda::forwardElementwise(Ctx, Call);
    case OpFamily::Contraction:
      return cuda::forwardContraction(Ctx, Call);
    case OpFamily::Pool:
      return cuda::forwardPool(Ctx, Call);
    case OpFamily::Normalization:
      return cuda::forwardNormalization(Ctx, Call);
    case OpFamily::Movement:
      return cuda::forwardMovement(Ctx, Call);
    case OpFamily::Recurrent:
      return cuda::forwardRecurrent(Ctx, Call);
    case OpFamily::Loss:
      return cuda::forwardLoss(Ctx, Call);
    }
  }

  void backward(const OpCall &Call, const Views &OutputGrads,
                const Views &InputGrads) override {
    switch (opFamily(Call.Kind)) {
    case OpFamily::Elementwise:
      return cuda::backwardElementwise(Ctx, Call, OutputGrads, InputGrads);
    case OpFamily::Contraction:
      return cuda::backwardContraction(Ctx, Call, OutputGrads, InputGrads);
    case OpFamily::Pool:
      return cuda::backwardPool(Ctx, Call, OutputGrads, InputGrads);
    case OpFamily::Normalization:
      return cuda::backwardNormalization(Ctx, Call, OutputGrads, InputGrads);
    case OpFamily::Movement:
      return cuda::backwardMovement(Ctx, Call, OutputGrads, InputGrads);
    case OpFamily::Recurrent:
      return cuda::backwardRecurrent(Ctx, Call, OutputGrads, InputGrads);
    case OpFamily::Loss:
      return cuda::backwardLoss(Ctx, Call, OutputGrads, InputGrads);
    }
  }

  void update(const OptimizerConfig &Config, int64_t Step,
              const TensorView &Parameter, const TensorView &Gradient,
              const Views &State) override {
    cuda::updateParameter(Ctx, Config, Step, Parameter, Gradient, State);
  }

  void batchNormPartialStats(const OpCall &Call,
                             const TensorView &Stats) override {
    cuda::batchNormPartialStats(Ctx, Call, Stats);
  }
  void batchNormForwardWithStats(const OpCall &Call, const TensorView &Stats,
                                 int64_t Count) override {
    cuda::batchNormForwardWithStats(Ctx, Call, Stats, Count);
  }
  void batchNormBackwardPartialSums(const OpCall &Call,
                                    const TensorView &OutputGrad,
                                    const TensorView &Stats, int64_t Count,
                                    const TensorView &Sums) override {
    cuda::batchNormBackwardPartialSums(Ctx, Call, OutputGrad, Stats, Count,
                                       Sums);
  }
  void batchNormBackwardWithSums(const OpCall &Call, const Views &OutputGrads,
                                 const Views &InputGrads,
                                 const TensorView &Stats,
                                 const TensorView &Sums,
                                 int64_t Count) override {
    cuda::batchNormBackwardWithSums(Ctx, Call, OutputGrads, InputGrads, Stats,
                                    Sums, Count);
  }

  void synchronize() override {
    check(cudaStreamSynchronize(Ctx.Stream), "cudaStreamSynchronize");
  }

private:
  Context Ctx;
  void *BlasWorkspace = nullptr;
  size_t BlasBytes = 0;
};
} // namespace
} // namespace cuda

std::string cudaAvailability() {
  int Count = 0;
  cudaError_t Status = cudaGetDeviceCount(&Count);
  if (Status != cudaSuccess)
    return std::string("no usable CUDA device: ") + cudaGetErrorString(Status);
  if (Count == 0)
    return "no CUDA device found";
  return "";
}

std::unique_ptr<Backend> createCudaBackend(int Device,
                                           size_t ConvWorkspaceLimit) {
  std::string Why = cudaAvailability();
  if (!Why.empty())
    fail("cuda backend", Why);
  return std::make_unique<cuda::CudaBackend>(Device, ConvWorkspaceLimit);
}

} // namespace onnx2soap::rt
