//===- runtime_lib/cuda/BoxCopy.cu - Copying boxes between buffers --------===//
//
// Backend::copyBox on the GPU, the twin of runtime_lib/cpu/BoxCopy.cpp with
// the same checks, messages and simplification (dims of extent one dropped,
// neighbouring dims dense on both sides merged, so index arithmetic runs
// over as few dims as possible). A grid-stride kernel walks the box's
// elements: linear index to coordinates to an offset on each side, copying
// by element width (any type) or adding (f32, f64); every element has one
// thread, so results are deterministic. A copy of at most two dims whose
// rows are dense on both sides is a cudaMemcpyAsync or cudaMemcpy2DAsync
// instead. All work is queued on the
// backend's stream.
//
//===----------------------------------------------------------------------===//
#include "KernelSupport.cuh"
#include "MovementKernels.cuh"
#include <string>

namespace onnx2soap::rt::cuda {
using namespace support;
namespace {

/// A box after simplification: Rank >= 1 dims, strides in elements; passed
/// to the kernels by value.
struct BoxWalk {
  int Rank = 0;
  int64_t Dims[MaxRank] = {};
  int64_t ToStrides[MaxRank] = {}, FromStrides[MaxRank] = {};

  int64_t count() const {
    int64_t N = 1;
    for (int D = 0; D < Rank; ++D)
      N *= Dims[D];
    return N;
  }
};

void check(cudaError_t Status, const char *What) {
  if (Status != cudaSuccess)
    fail("box copy", std::string(What) + ": " + cudaGetErrorString(Status));
}

std::string dimsText(const TensorView &V) {
  std::string Text = "[";
  for (int D = 0; D < V.Rank; ++D)
    Text += (D ? ", " : "") + std::to_string(V.Dims[D]);
  return Text + "]";
}

void checkStrides(const TensorView &V, const char *Side) {
  for (int D = 0; D < V.Rank; ++D) {
    if (V.Dims[D] < 0)
      fail("box copy", std::string(Side) + " dim " + std::to_string(D) +
                           " has negative extent " + std::to_string(V.Dims[D]));
    if (V.Strides[D] < 0)
      fail("box copy", std::string(Side) + " dim " + std::to_string(D) +
                           " has negative stride " +
                           std::to_string(V.Strides[D]) +
                           "; strides must be non-negative");
  }
}

/// Checks the operands (Backend.h's contract) and simplifies the box; an
/// empty box comes back with a zero extent.
BoxWalk planBox(const TensorView &To, const TensorView &From, bool Add) {
  if (!To.present() || !From.present())
    fail("box copy", std::string("the ") +
                         (To.present() ? "source" : "destination") +
                         " is absent");
  if (To.Rank > MaxRank || From.Rank > MaxRank)
    fail("box copy", "rank above " + std::to_string(MaxRank));
  if (To.Type != From.Type)
    fail("box copy", std::string("destination has element type ") +
                         dtypeName(To.Type) + ", source " +
                         dtypeName(From.Type));
  if (To.Rank != From.Rank)
    fail("box copy", "destination has rank " + std::to_string(To.Rank) +
                         ", source rank " + std::to_string(From.Rank));
  for (int D = 0; D < To.Rank; ++D)
    if (To.Dims[D] != From.Dims[D])
      fail("box copy", "destination dims " + dimsText(To) +
                           " differ from source dims " + dimsText(From));
  checkStrides(To, "destination");
  checkStrides(From, "source");
  for (int D = 0; D < To.Rank; ++D)
    if (To.Strides[D] == 0 && To.Dims[D] > 1)
      fail("box copy", "destination dim " + std::to_string(D) + " (extent " +
                           std::to_string(To.Dims[D]) +
                           ") has stride 0 and would write elements twice");
  if (Add && To.Type != DType::Float32 && To.Type != DType::Float64)
    fail("box copy", std::string("cannot add elements of type ") +
                         dtypeName(To.Type) + " (only f32 and f64)");

  BoxWalk W;
  for (int D = 0; D < To.Rank; ++D) {
    if (To.Dims[D] == 0) {
      W.Rank = 1;
      W.Dims[0] = 0;
      return W;
    }
    if (To.Dims[D] == 1)
      continue;
    int Last = W.Rank - 1;
    // The previous dim steps over exactly this one on both sides: merge.
    if (W.Rank && W.ToStrides[Last] == To.Strides[D] * To.Dims[D] &&
        W.FromStrides[Last] == From.Strides[D] * To.Dims[D]) {
      W.Dims[Last] *= To.Dims[D];
      W.ToStrides[Last] = To.Strides[D];
      W.FromStrides[Last] = From.Strides[D];
      continue;
    }
    W.Dims[W.Rank] = To.Dims[D];
    W.ToStrides[W.Rank] = To.Strides[D];
    W.FromStrides[W.Rank++] = From.Strides[D];
  }
  if (W.Rank == 0) { // one element
    W.Rank = 1;
    W.Dims[0] = W.ToStrides[0] = W.FromStrides[0] = 1;
  }
  return W;
}

template <typename U>
__global__ void copyBoxKernel(BoxWalk W, int64_t Count, U *To, const U *From) {
  for (int64_t I = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; I < Count;
       I += int64_t(gridDim.x) * blockDim.x)
    To[offsetOf(I, W.Rank, W.Dims, W.ToStrides)] =
        From[offsetOf(I, W.Rank, W.Dims, W.FromStrides)];
}

template <typename T>
__global__ void addBoxKernel(BoxWalk W, int64_t Count, T *To, const T *From) {
  for (int64_t I = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; I < Count;
       I += int64_t(gridDim.x) * blockDim.x)
    To[offsetOf(I, W.Rank, W.Dims, W.ToStrides)] +=
        From[offsetOf(I, W.Rank, W.Dims, W.FromStrides)];
}

/// Copies the box as one cudaMemcpyAsync or cudaMemcpy2DAsync's rows when
/// it is at most two dims, dense on both sides in the inner one, with
/// pitches a 2D copy accepts (at least the row, below 2^31 bytes).
bool copyAsRows(const Context &C, const BoxWalk &W, size_t Size, void *To,
                const void *From) {
  int Inner = W.Rank - 1;
  if (W.Rank > 2 || W.ToStrides[Inner] != 1 || W.FromStrides[Inner] != 1)
    return false;
  size_t Width = W.Dims[Inner] * Size;
  if (W.Rank == 1) {
    check(cudaMemcpyAsync(To, From, Width, cudaMemcpyDeviceToDevice, C.Stream),
          "cudaMemcpyAsync");
    return true;
  }
  size_t ToPitch = W.ToStrides[0] * Size, FromPitch = W.FromStrides[0] * Size;
  const size_t MaxPitch = (size_t(1) << 31) - 1;
  if (ToPitch < Width || FromPitch < Width || ToPitch > MaxPitch ||
      FromPitch > MaxPitch)
    return false;
  check(cudaMemcpy2DAsync(To, ToPitch, From, FromPitch, Width, W.Dims[0],
                          cudaMemcpyDeviceToDevice, C.Stream),
        "cudaMemcpy2DAsync");
  return true;
}

} // namespace

void copyBox(Context &C, const TensorView &To, const TensorView &From,
             bool Add) {
  BoxWalk W = planBox(To, From, Add);
  int64_t Count = W.count();
  if (Count == 0)
    return;
  if (!Add) {
    if (copyAsRows(C, W, dtypeSize(To.Type), To.Data, From.Data))
      return;
    dispatchWidth(To.Type, [&](auto Zero) {
      using U = decltype(Zero);
      copyBoxKernel<U><<<blocksFor(Count), ThreadsPerBlock, 0, C.Stream>>>(
          W, Count, static_cast<U *>(To.Data),
          static_cast<const U *>(From.Data));
    });
    check(cudaGetLastError(), "launching the box copy kernel");
    return;
  }
  if (To.Type == DType::Float32)
    addBoxKernel<float><<<blocksFor(Count), ThreadsPerBlock, 0, C.Stream>>>(
        W, Count, To.as<float>(), From.as<const float>());
  else
    addBoxKernel<double><<<blocksFor(Count), ThreadsPerBlock, 0, C.Stream>>>(
        W, Count, To.as<double>(), From.as<const double>());
  check(cudaGetLastError(), "launching the box add kernel");
}

} // namespace onnx2soap::rt::cuda
