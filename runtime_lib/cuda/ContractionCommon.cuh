//===- runtime_lib/cuda/ContractionCommon.cuh - Shared helpers -*- C++ -*-===//
//
// Private to the CUDA contraction and pooling kernels: the per-op-kind entry
// points (Conv and ConvTranspose in Convolution.cu, Gemm and MatMul in
// MatMul.cu, dispatch in Contraction.cu), a stream-ordered scratch buffer,
// cuDNN descriptor owners, operand checks shared with the CPU twins
// (runtime_lib/cpu/ContractionKernels.h) and two data-movement kernels the
// families share: a shifted copy (explicit padding and cropping) and a
// deterministic reduction over broadcast dims.
//
//===----------------------------------------------------------------------===//
#ifndef ONNX2SOAP_RUNTIME_CUDA_CONTRACTIONCOMMON_CUH
#define ONNX2SOAP_RUNTIME_CUDA_CONTRACTIONCOMMON_CUH

#include "CudaKernels.h"
#include <cstdint>
#include <string>
#include <vector>

namespace onnx2soap::rt::cuda {

void forwardConv(Context &C, const OpCall &Call, bool Transposed);
void backwardConv(Context &C, const OpCall &Call, bool Transposed,
                  const Views &OutputGrads, const Views &InputGrads);
void forwardGemm(Context &C, const OpCall &Call);
void backwardGemm(Context &C, const OpCall &Call, const Views &OutputGrads,
                  const Views &InputGrads);
void forwardMatMul(Context &C, const OpCall &Call);
void backwardMatMul(Context &C, const OpCall &Call, const Views &OutputGrads,
                    const Views &InputGrads);

namespace contraction {

/// Device memory for one call, allocated and freed in stream order on
/// C.Stream (so no synchronization is needed before the free).
class Scratch {
public:
  Scratch(Context &C, const OpCall &Call, size_t Bytes) : Stream(C.Stream) {
    if (Bytes)
      checkCuda(Call, cudaMallocAsync(&Pointer, Bytes, Stream),
                "cudaMallocAsync of scratch memory");
  }
  Scratch(const Scratch &) = delete;
  Scratch &operator=(const Scratch &) = delete;
  ~Scratch() {
    // A destructor cannot throw; a failed free surfaces as the stream's
    // next error.
    if (Pointer)
      cudaFreeAsync(Pointer, Stream);
  }
  void *data() const { return Pointer; }
  template <typename T> T *as() const { return static_cast<T *>(Pointer); }

private:
  cudaStream_t Stream;
  void *Pointer = nullptr;
};

/// Owners of legacy cuDNN descriptors.
class TensorDesc {
public:
  explicit TensorDesc(const OpCall &Call) {
    checkCudnn(Call, cudnnCreateTensorDescriptor(&Desc),
               "cudnnCreateTensorDescriptor");
  }
  TensorDesc(const TensorDesc &) = delete;
  TensorDesc &operator=(const TensorDesc &) = delete;
  ~TensorDesc() { cudnnDestroyTensorDescriptor(Desc); }
  /// A dense row-major f32 tensor of Dims (4 or 5 of them).
  void set(const OpCall &Call, const std::vector<int64_t> &Dims);
  operator cudnnTensorDescriptor_t() const { return Desc; }

private:
  cudnnTensorDescriptor_t Desc = nullptr;
};

/// "[2,3,4]".
std::string formatDims(const TensorView &V);
std::string formatDims(const std::vector<int64_t> &Dims);

/// A per-spatial-dim attribute, Default-filled when absent.
std::vector<int64_t> spatialAttr(const OpCall &Call, const char *Name,
                                 size_t Count, int64_t Default);

/// Fails unless V is a present, dense f32 tensor; What names it.
void requireDenseF32(const OpCall &Call, const TensorView &V, const char *What);

inline TensorView optionalAt(const Views &V, size_t I) {
  return I < V.size() ? V[I] : TensorView();
}

/// Blocks for a grid-stride loop over Count items (at least one block).
unsigned gridFor(int64_t Count, unsigned BlockSize = 256);

/// Planes (N*C) of up to 3 spatial dims, shorter shapes padded with leading
/// unit dims: [Planes, D, H, W].
struct PlaneShape {
  int64_t Planes = 1;
  int64_t Spatial[3] = {1, 1, 1};
};

/// Dst[plane, p] = Src[plane, p - Offset] (zero where that is outside Src)
/// or, with Accumulate, Dst[plane, p] += Src[plane, p - Offset] where it is
/// inside. Planes must agree. Explicit padding (Offset > 0) and cropping
/// (Offset < 0) in one kernel.
void shiftCopy(Context &C, const OpCall &Call, const float *Src,
               const PlaneShape &SrcShape, float *Dst,
               const PlaneShape &DstShape, const int64_t Offset[3],
               bool Accumulate);

/// Dst += Scale * (Full summed over the dims where DstDims is 1 and
/// FullDims is not). Equal ranks (at most MaxRank), both dense row-major.
/// Deterministic: every output element is summed by one thread or one block
/// in a fixed order.
void reduceBroadcastInto(Context &C, const OpCall &Call, const float *Full,
                         const std::vector<int64_t> &FullDims, float *Dst,
                         const std::vector<int64_t> &DstDims, float Scale);

} // namespace contraction
} // namespace onnx2soap::rt::cuda

#endif
