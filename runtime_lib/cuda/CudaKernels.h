//===- runtime_lib/cuda/CudaKernels.h - CUDA kernel families ---*- C++ -*-===//
//
// The CUDA backend's kernels, with the same family entry points and the
// same semantics as their CPU twins (runtime_lib/cpu/CpuKernels.h): the CPU
// tests describe these kernels. cuDNN does convolution, pooling, batch
// norm, activations and softmax; cuBLAS the GEMMs; own kernels the rest.
// Every CUDA, cuBLAS and cuDNN status is checked with a message naming the
// op. All work is queued on the backend's stream.
//
//===----------------------------------------------------------------------===//
#ifndef ONNX2SOAP_RUNTIME_CUDA_CUDAKERNELS_H
#define ONNX2SOAP_RUNTIME_CUDA_CUDAKERNELS_H

#include "../Backend.h"
#include "../Error.h"
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <map>
#include <string>
#include <vector>

namespace onnx2soap::rt::cuda {

/// A convolution algorithm cuDNN's heuristics chose and its workspace.
struct ConvAlgorithm {
  int Algo = 0;
  size_t WorkspaceBytes = 0;
};

struct Context {
  int Device = 0;
  cudaStream_t Stream = nullptr;
  cublasHandle_t Blas = nullptr;
  cudnnHandle_t Dnn = nullptr;
  /// Convolution.cu's choices per direction and geometry: the heuristics
  /// query costs about a millisecond on an H100 with cuDNN 9 (more than most
  /// convolutions of a ResNet step), so each shape asks once.
  std::map<std::vector<int64_t>, ConvAlgorithm> ConvAlgorithms;
  /// The most workspace a convolution algorithm may take: a generated
  /// program's plan gives the cluster's conv_workspace_MiB.
  size_t ConvWorkspaceLimit = SIZE_MAX;
};

using Views = std::vector<TensorView>;

void forwardElementwise(Context &C, const OpCall &Call);
void backwardElementwise(Context &C, const OpCall &Call,
                         const Views &OutputGrads, const Views &InputGrads);
void forwardContraction(Context &C, const OpCall &Call);
void backwardContraction(Context &C, const OpCall &Call,
                         const Views &OutputGrads, const Views &InputGrads);
void forwardPool(Context &C, const OpCall &Call);
void backwardPool(Context &C, const OpCall &Call, const Views &OutputGrads,
                  const Views &InputGrads);
/// Resize (Pool family; Resize.cu).
void forwardResize(Context &C, const OpCall &Call);
void backwardResize(Context &C, const OpCall &Call, const Views &OutputGrads,
                    const Views &InputGrads);
void forwardNormalization(Context &C, const OpCall &Call);
void backwardNormalization(Context &C, const OpCall &Call,
                           const Views &OutputGrads, const Views &InputGrads);
/// BatchNorm (BatchNorm.cu): the whole op, which forwardNormalization and
/// backwardNormalization dispatch to, and the phases of a BatchNorm whose
/// batch is split among partitions (Backend.h).
void forwardBatchNorm(Context &C, const OpCall &Call);
void backwardBatchNorm(Context &C, const OpCall &Call, const Views &OutputGrads,
                       const Views &InputGrads);
void batchNormPartialStats(Context &C, const OpCall &Call,
                           const TensorView &Stats);
void batchNormForwardWithStats(Context &C, const OpCall &Call,
                               const TensorView &Stats, int64_t Count);
void batchNormBackwardPartialSums(Context &C, const OpCall &Call,
                                  const TensorView &OutputGrad,
                                  const TensorView &Stats, int64_t Count,
                                  const TensorView &Sums);
void batchNormBackwardWithSums(Context &C, const OpCall &Call,
                               const Views &OutputGrads,
                               const Views &InputGrads, const TensorView &Stats,
                               const TensorView &Sums, int64_t Count);
void forwardMovement(Context &C, const OpCall &Call);
void backwardMovement(Context &C, const OpCall &Call, const Views &OutputGrads,
                      const Views &InputGrads);
void forwardRecurrent(Context &C, const OpCall &Call);
void backwardRecurrent(Context &C, const OpCall &Call, const Views &OutputGrads,
                       const Views &InputGrads);
void forwardLoss(Context &C, const OpCall &Call);
void backwardLoss(Context &C, const OpCall &Call, const Views &OutputGrads,
                  const Views &InputGrads);
void updateParameter(Context &C, const OptimizerConfig &Config, int64_t Step,
                     const TensorView &Parameter, const TensorView &Gradient,
                     const Views &State);
/// Backend::copyBox (BoxCopy.cu).
void copyBox(Context &C, const TensorView &To, const TensorView &From,
             bool Add);

/// Throws RuntimeError naming the op: "op 'conv1' (Conv): <What>".
[[noreturn]] void failOp(const OpCall &Call, const std::string &What);
/// Fails unless V is dense row-major / of element type Type.
void requireContiguous(const OpCall &Call, const TensorView &V,
                       const char *What);
void requireType(const OpCall &Call, const TensorView &V, DType Type,
                 const char *What);
/// Status checks that name the op and the library call.
void checkCuda(const OpCall &Call, cudaError_t Status, const char *What);
void checkCublas(const OpCall &Call, cublasStatus_t Status, const char *What);
void checkCudnn(const OpCall &Call, cudnnStatus_t Status, const char *What);

} // namespace onnx2soap::rt::cuda

#endif
