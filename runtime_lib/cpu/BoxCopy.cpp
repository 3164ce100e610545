//===- runtime_lib/cpu/BoxCopy.cpp - Copying boxes between buffers --------===//
//
// Backend::copyBox on the host. The box is simplified first: dims of extent
// one are dropped and neighbouring dims that are dense on both sides merge,
// so a box cut along outer dims of two dense tensors becomes a few long
// rows. A row (the innermost remaining dim) is one memcpy when both sides
// are dense there, else a strided loop by element width, or an add loop.
// Large boxes split their rows (or their one long row) among the threads;
// each element is still computed once, by the same arithmetic, so results
// do not depend on the thread count. runtime_lib/cuda/BoxCopy.cu is the
// CUDA twin, with the same checks and messages.
//
//===----------------------------------------------------------------------===//
#include "CpuKernels.h"
#include "Parallel.h"
#include <cstring>
#include <string>

namespace onnx2soap::rt::cpu {
namespace {

/// A box after simplification: Rank >= 1 dims, strides in elements.
struct BoxWalk {
  int Rank = 0;
  int64_t Dims[MaxRank] = {};
  int64_t ToStrides[MaxRank] = {}, FromStrides[MaxRank] = {};
};

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
void copyRun(char *To, const char *From, int64_t Count, int64_t ToStep,
             int64_t FromStep) {
  U *Out = reinterpret_cast<U *>(To);
  const U *In = reinterpret_cast<const U *>(From);
  for (int64_t I = 0; I < Count; ++I)
    Out[I * ToStep] = In[I * FromStep];
}

template <typename T>
void addRun(char *To, const char *From, int64_t Count, int64_t ToStep,
            int64_t FromStep) {
  T *Out = reinterpret_cast<T *>(To);
  const T *In = reinterpret_cast<const T *>(From);
  for (int64_t I = 0; I < Count; ++I)
    Out[I * ToStep] += In[I * FromStep];
}

using RunFn = void (*)(char *, const char *, int64_t, int64_t, int64_t);

/// The loop over one row: Run(To, From, Count, ToStep, FromStep), steps
/// in elements (dense copies skip it for a memcpy).
RunFn rowFunction(DType Type, bool Add, size_t Size) {
  if (Add)
    return Type == DType::Float32 ? addRun<float> : addRun<double>;
  switch (Size) {
  case 1:
    return copyRun<uint8_t>;
  case 2:
    return copyRun<uint16_t>;
  case 4:
    return copyRun<uint32_t>;
  default:
    return copyRun<uint64_t>;
  }
}

} // namespace

void copyBox(const TensorView &To, const TensorView &From, bool Add) {
  BoxWalk W = planBox(To, From, Add);
  int Inner = W.Rank - 1;
  int64_t Length = W.Dims[Inner], Rows = 1;
  for (int D = 0; D < Inner; ++D)
    Rows *= W.Dims[D];
  if (Rows == 0 || Length == 0)
    return;
  size_t Size = dtypeSize(To.Type);
  int64_t ToStep = W.ToStrides[Inner], FromStep = W.FromStrides[Inner];
  bool Memcpy = !Add && ToStep == 1 && FromStep == 1;
  RunFn Run = rowFunction(To.Type, Add, Size);
  auto Row = [&](char *Out, const char *In, int64_t Count) {
    if (Memcpy)
      std::memcpy(Out, In, Count * Size);
    else
      Run(Out, In, Count, ToStep, FromStep);
  };
  char *ToBase = static_cast<char *>(To.Data);
  const char *FromBase = static_cast<const char *>(From.Data);

  if (Rows == 1) {
    // One long row (the common dense case): split the row itself.
    parallelChunks(Length, 1, [&](int64_t Begin, int64_t End) {
      Row(ToBase + Begin * ToStep * Size, FromBase + Begin * FromStep * Size,
          End - Begin);
    });
    return;
  }
  parallelChunks(Rows, Length, [&](int64_t Begin, int64_t End) {
    // Coordinates of row Begin over the outer dims, then an odometer.
    int64_t Index[MaxRank] = {}, ToOffset = 0, FromOffset = 0;
    for (int64_t D = Inner - 1, Rest = Begin; D >= 0; --D) {
      Index[D] = Rest % W.Dims[D];
      Rest /= W.Dims[D];
      ToOffset += Index[D] * W.ToStrides[D];
      FromOffset += Index[D] * W.FromStrides[D];
    }
    for (int64_t R = Begin; R < End; ++R) {
      Row(ToBase + ToOffset * Size, FromBase + FromOffset * Size, Length);
      for (int D = Inner - 1; D >= 0; --D) {
        ToOffset += W.ToStrides[D];
        FromOffset += W.FromStrides[D];
        if (++Index[D] < W.Dims[D])
          break;
        ToOffset -= W.ToStrides[D] * W.Dims[D];
        FromOffset -= W.FromStrides[D] * W.Dims[D];
        Index[D] = 0;
      }
    }
  });
}

} // namespace onnx2soap::rt::cpu
