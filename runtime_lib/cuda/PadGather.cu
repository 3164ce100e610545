//===- runtime_lib/cuda/PadGather.cu - Pad and Gather kernels -------------===//
//
// CUDA twins of runtime_lib/cpu/PadGather.cpp. Pad maps every output
// position, dim by dim, to an input position or the fill value, computed in
// the kernel from a few per-dim numbers; Gather maps rows of the data
// through an index tensor.
//
// Backward: constant padding is injective, so its gradient is one plain add
// per element; reflect, edge and wrap read input elements several times and
// Gather's indices may repeat, so those scatter-add with atomicAdd. Float
// addition in an unspecified order makes those gradients nondeterministic
// in the last bits (a sort-based segmented sum would fix that at the cost of
// a sort per call).
//
//===----------------------------------------------------------------------===//
#include "KernelSupport.cuh"
#include "MovementKernels.cuh"
#include <cmath>
#include <cstring>
#include <vector>

namespace onnx2soap::rt::cuda {
using namespace support;
namespace {

//===-- Pad ---------------------------------------------------------------===//

/// IEEE half of F, rounding to nearest even (as the CPU kernel).
uint16_t toHalf(float F) {
  uint32_t Bits;
  std::memcpy(&Bits, &F, 4);
  uint32_t Sign = (Bits >> 16) & 0x8000;
  int32_t Exp = static_cast<int32_t>((Bits >> 23) & 0xff) - 127 + 15;
  uint32_t Mant = Bits & 0x7fffff;
  if (((Bits >> 23) & 0xff) == 0xff) // inf or nan
    return Sign | 0x7c00 | (Mant ? 0x200 : 0);
  if (Exp >= 31)
    return Sign | 0x7c00;
  if (Exp <= 0) {
    if (Exp < -10)
      return Sign;
    Mant |= 0x800000;
    int Shift = 14 - Exp;
    uint32_t Half = Mant >> Shift, Rest = Mant & ((1u << Shift) - 1);
    uint32_t Mid = 1u << (Shift - 1);
    if (Rest > Mid || (Rest == Mid && (Half & 1)))
      ++Half;
    return Sign | Half;
  }
  uint32_t Half = (Exp << 10) | (Mant >> 13), Rest = Mant & 0x1fff;
  if (Rest > 0x1000 || (Rest == 0x1000 && (Half & 1)))
    ++Half;
  return Sign | Half;
}

/// The fill value as the bytes of one element of Type.
void encodeValue(double V, DType Type, unsigned char *Out) {
  auto Put = [&](auto X) { std::memcpy(Out, &X, sizeof X); };
  switch (Type) {
  case DType::Float32:
    return Put(static_cast<float>(V));
  case DType::Float64:
    return Put(V);
  case DType::Float16:
    return Put(toHalf(static_cast<float>(V)));
  case DType::BFloat16: {
    float F = static_cast<float>(V);
    uint32_t Bits;
    std::memcpy(&Bits, &F, 4);
    if (std::isnan(F))
      return Put(static_cast<uint16_t>((Bits >> 16) | 0x40));
    Bits += 0x7fff + ((Bits >> 16) & 1);
    return Put(static_cast<uint16_t>(Bits >> 16));
  }
  case DType::Int8:
    return Put(static_cast<int8_t>(V));
  case DType::UInt8:
    return Put(static_cast<uint8_t>(V));
  case DType::Int16:
    return Put(static_cast<int16_t>(V));
  case DType::UInt16:
    return Put(static_cast<uint16_t>(V));
  case DType::Int32:
    return Put(static_cast<int32_t>(V));
  case DType::UInt32:
    return Put(static_cast<uint32_t>(V));
  case DType::Int64:
    return Put(static_cast<int64_t>(V));
  case DType::UInt64:
    return Put(static_cast<uint64_t>(V));
  case DType::Bool:
    return Put(static_cast<uint8_t>(V != 0));
  }
}

enum PadMode : int { Constant, Reflect, Edge, Wrap };

/// Per dim: output size, where the kept input range [Low, Low + Kept)
/// starts in the output, and the input stride.
struct PadPlan {
  int Rank = 0;
  int Mode = Constant;
  int64_t OutDims[MaxRank] = {};
  int64_t Start[MaxRank] = {}, Kept[MaxRank] = {}, Low[MaxRank] = {},
          Stride[MaxRank] = {};
};

/// Negative pads crop the input first; reflect, edge and wrap then extend
/// the cropped input (as ONNX Runtime and the CPU kernel do).
PadPlan padPlan(const OpCall &Call, const TensorView &X, const TensorView &Y) {
  const std::vector<int64_t> &Pads = Call.Attrs.getInts("pads");
  const std::string &Mode = Call.Attrs.getString("mode", "constant");
  PadPlan P;
  if (Mode == "constant")
    P.Mode = Constant;
  else if (Mode == "reflect")
    P.Mode = Reflect;
  else if (Mode == "edge")
    P.Mode = Edge;
  else if (Mode == "wrap")
    P.Mode = Wrap;
  else
    failOp(Call, "unknown pad mode '" + Mode + "'");
  if (static_cast<int>(Pads.size()) != 2 * X.Rank || Y.Rank != X.Rank)
    failOp(Call, "pads do not match the input's rank");
  P.Rank = X.Rank;
  int64_t Stride = 1;
  for (int D = X.Rank - 1; D >= 0; --D) {
    int64_t Begin = Pads[D], End = Pads[X.Rank + D];
    if (X.Dims[D] + Begin + End != Y.Dims[D])
      failOp(Call, "pads of dim " + std::to_string(D) +
                       " do not give the output's size");
    int64_t Low = std::max<int64_t>(-Begin, 0);
    int64_t Kept = X.Dims[D] - Low - std::max<int64_t>(-End, 0);
    if (Kept < Y.Dims[D] && P.Mode != Constant && Kept <= 0)
      failOp(Call, Mode + " padding of dim " + std::to_string(D) +
                       " has no input elements to repeat");
    P.OutDims[D] = Y.Dims[D];
    P.Start[D] = std::max<int64_t>(Begin, 0);
    P.Kept[D] = Kept;
    P.Low[D] = Low;
    P.Stride[D] = Stride;
    Stride *= X.Dims[D];
  }
  return P;
}

/// Input offset of output element O, or -1 for the fill value.
__device__ int64_t paddedSource(const PadPlan &P, int64_t O) {
  int64_t Offset = 0;
  for (int D = P.Rank - 1; D >= 0; --D) {
    int64_t Q = O / P.OutDims[D], Pos = O - Q * P.OutDims[D];
    O = Q;
    int64_t J = Pos - P.Start[D], Kept = P.Kept[D];
    if (J < 0 || J >= Kept) {
      if (P.Mode == Constant)
        return -1;
      if (P.Mode == Edge || (P.Mode == Reflect && Kept == 1)) {
        J = J < 0 ? 0 : Kept - 1;
      } else if (P.Mode == Reflect) {
        int64_t Period = 2 * (Kept - 1);
        J = ((J % Period) + Period) % Period;
        if (J >= Kept)
          J = Period - J;
      } else {
        J = ((J % Kept) + Kept) % Kept;
      }
    }
    Offset += (P.Low[D] + J) * P.Stride[D];
  }
  return Offset;
}

template <typename U>
__global__ void padForwardKernel(PadPlan P, int64_t Count, const U *In, U *Out,
                                 U Fill) {
  for (int64_t O = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; O < Count;
       O += int64_t(gridDim.x) * blockDim.x) {
    int64_t I = paddedSource(P, O);
    Out[O] = I < 0 ? Fill : In[I];
  }
}

/// Atomic: reflect, edge and wrap map several outputs to one input.
template <typename T, bool Atomic>
__global__ void padBackwardKernel(PadPlan P, int64_t Count, const T *G, T *D) {
  for (int64_t O = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; O < Count;
       O += int64_t(gridDim.x) * blockDim.x) {
    int64_t I = paddedSource(P, O);
    if (I < 0)
      continue;
    if (Atomic)
      atomicAdd(D + I, G[O]);
    else
      D[I] += G[O];
  }
}

TensorView gradientAt(const OpCall &Call, const Views &Vs, size_t I,
                      const TensorView &Like, const char *What) {
  if (I >= Vs.size() || !Vs[I].present())
    return TensorView::absent();
  requireContiguous(Call, Vs[I], What);
  requireType(Call, Vs[I], Like.Type, What);
  if (Vs[I].numElements() != Like.numElements())
    failOp(Call, std::string(What) + " does not match its tensor's shape");
  return Vs[I];
}

const TensorView &operand(const OpCall &Call, const Views &Vs, size_t I,
                          const char *What) {
  if (I >= Vs.size() || !Vs[I].present())
    failOp(Call, std::string("missing ") + What);
  requireContiguous(Call, Vs[I], What);
  return Vs[I];
}

//===-- Gather ------------------------------------------------------------===//

struct GatherShape {
  int64_t Outer, Rows, Inner, Count; // data as [Outer, Rows, Inner]
  int64_t Axis;
};

/// Records in Bad the smallest position of an index outside [-Rows, Rows).
template <typename I>
__global__ void checkIndicesKernel(const I *Indices, int64_t Count,
                                   int64_t Rows, unsigned long long *Bad) {
  for (int64_t K = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; K < Count;
       K += int64_t(gridDim.x) * blockDim.x) {
    int64_t V = Indices[K], N = V < 0 ? V + Rows : V;
    if (N < 0 || N >= Rows)
      atomicMin(Bad, static_cast<unsigned long long>(K));
  }
}

/// Fails naming the first of I's indices outside [-Rows, Rows), checked on
/// the device. Reporting it, as the CPU does, needs its value on the host:
/// this is the one synchronization of the family (a copy of 8 bytes and a
/// wait for the stream), paid on every Gather and GatherElements call.
void checkIndices(Context &C, const OpCall &Call, const TensorView &I,
                  int64_t Rows, int64_t Axis) {
  int64_t Count = I.numElements();
  if (Count == 0)
    return;
  Scratch<unsigned long long> Bad(Call, C, 1);
  checkCuda(
      Call,
      cudaMemsetAsync(Bad.get(), 0xff, sizeof(unsigned long long), C.Stream),
      "cudaMemsetAsync (gather check)");
  if (I.Type == DType::Int32)
    checkIndicesKernel<<<blocksFor(Count), ThreadsPerBlock, 0, C.Stream>>>(
        I.as<int32_t>(), Count, Rows, Bad.get());
  else
    checkIndicesKernel<<<blocksFor(Count), ThreadsPerBlock, 0, C.Stream>>>(
        I.as<int64_t>(), Count, Rows, Bad.get());
  checkLaunch(Call, "gather index check kernel");
  unsigned long long First = 0;
  checkCuda(Call,
            cudaMemcpyAsync(&First, Bad.get(), sizeof First,
                            cudaMemcpyDeviceToHost, C.Stream),
            "cudaMemcpyAsync (gather check)");
  checkCuda(Call, cudaStreamSynchronize(C.Stream),
            "cudaStreamSynchronize (gather check)");
  if (First == ~0ull)
    return;
  int64_t K = static_cast<int64_t>(First), V = 0;
  size_t Width = dtypeSize(I.Type);
  int32_t V32 = 0;
  checkCuda(Call,
            cudaMemcpyAsync(Width == 4 ? static_cast<void *>(&V32) : &V,
                            I.as<unsigned char>() + K * Width, Width,
                            cudaMemcpyDeviceToHost, C.Stream),
            "cudaMemcpyAsync (gather check)");
  checkCuda(Call, cudaStreamSynchronize(C.Stream),
            "cudaStreamSynchronize (gather check)");
  if (Width == 4)
    V = V32;
  failOp(Call, "index " + std::to_string(V) + " (indices element " +
                   std::to_string(K) + ") is out of range for axis " +
                   std::to_string(Axis) + " of size " + std::to_string(Rows));
}

/// Gather's shape, its indices checked (checkIndices).
GatherShape checkGather(Context &C, const OpCall &Call, const TensorView &Y) {
  const TensorView &X = operand(Call, Call.Inputs, 0, "data");
  const TensorView &I = operand(Call, Call.Inputs, 1, "indices");
  int64_t Axis = Call.Attrs.getInt("axis");
  if (Axis < 0 || Axis >= X.Rank)
    failOp(Call, "axis " + std::to_string(Axis) + " is out of range");
  GatherShape Sh{1, X.Dims[Axis], 1, I.numElements(), Axis};
  for (int D = 0; D < X.Rank; ++D)
    if (D != Axis)
      (D < Axis ? Sh.Outer : Sh.Inner) *= X.Dims[D];
  if (I.Type != DType::Int32 && I.Type != DType::Int64)
    failOp(Call,
           std::string("indices must be i32 or i64, got ") + dtypeName(I.Type));
  if (Y.numElements() != Sh.Outer * Sh.Count * Sh.Inner)
    failOp(Call, "output does not match data and indices");
  checkIndices(C, Call, I, Sh.Rows, Axis);
  return Sh;
}

/// Source row of output element E (indices already checked).
template <typename I>
__device__ int64_t gatherSource(const GatherShape &Sh, const I *Indices,
                                int64_t E) {
  int64_t J = E % Sh.Inner, Rest = E / Sh.Inner;
  int64_t K = Rest % Sh.Count, O = Rest / Sh.Count;
  int64_t V = Indices[K];
  if (V < 0)
    V += Sh.Rows;
  return (O * Sh.Rows + V) * Sh.Inner + J;
}

template <typename U, typename I>
__global__ void gatherForwardKernel(GatherShape Sh, const I *Indices,
                                    int64_t Count, const U *In, U *Out) {
  for (int64_t E = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; E < Count;
       E += int64_t(gridDim.x) * blockDim.x)
    Out[E] = In[gatherSource(Sh, Indices, E)];
}

/// Repeated indices add into the same row: atomics (see the file comment).
template <typename T, typename I>
__global__ void gatherBackwardKernel(GatherShape Sh, const I *Indices,
                                     int64_t Count, const T *G, T *D) {
  for (int64_t E = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; E < Count;
       E += int64_t(gridDim.x) * blockDim.x)
    atomicAdd(D + gatherSource(Sh, Indices, E), G[E]);
}

//===-- GatherElements ----------------------------------------------------===//

/// Output element E reads the data at E's coordinates, but at its index
/// along the axis (the CPU kernel's map).
struct ElementsMap {
  int Rank = 0;
  int64_t Axis = 0, Rows = 0;
  int64_t OutDims[MaxRank] = {}, DataStrides[MaxRank] = {};
  template <typename I>
  __device__ int64_t source(const I *Indices, int64_t E) const {
    int64_t V = Indices[E];
    if (V < 0)
      V += Rows;
    int64_t Offset = 0;
    for (int D = Rank - 1; D >= 0; --D) {
      int64_t Coord = E % OutDims[D];
      E /= OutDims[D];
      Offset += (D == Axis ? V : Coord) * DataStrides[D];
    }
    return Offset;
  }
};

ElementsMap elementsMap(Context &C, const OpCall &Call, const TensorView &Y) {
  const TensorView &X = operand(Call, Call.Inputs, 0, "data");
  const TensorView &I = operand(Call, Call.Inputs, 1, "indices");
  int64_t Axis = Call.Attrs.getInt("axis");
  if (Axis < 0 || Axis >= X.Rank)
    failOp(Call, "axis " + std::to_string(Axis) + " is out of range");
  if (I.Type != DType::Int32 && I.Type != DType::Int64)
    failOp(Call,
           std::string("indices must be i32 or i64, got ") + dtypeName(I.Type));
  if (I.Rank != X.Rank || Y.Rank != X.Rank)
    failOp(Call, "data, indices and output must have one rank");
  ElementsMap M;
  M.Rank = X.Rank;
  M.Axis = Axis;
  M.Rows = X.Dims[Axis];
  int64_t Stride = 1;
  for (int D = X.Rank - 1; D >= 0; --D) {
    if (Y.Dims[D] != I.Dims[D] || (D != Axis && I.Dims[D] > X.Dims[D]))
      failOp(Call, "output does not match data and indices");
    M.OutDims[D] = Y.Dims[D];
    M.DataStrides[D] = Stride;
    Stride *= X.Dims[D];
  }
  checkIndices(C, Call, I, M.Rows, Axis);
  return M;
}

template <typename U, typename I>
__global__ void elementsForwardKernel(ElementsMap M, const I *Indices,
                                      int64_t Count, const U *In, U *Out) {
  for (int64_t E = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; E < Count;
       E += int64_t(gridDim.x) * blockDim.x)
    Out[E] = In[M.source(Indices, E)];
}

/// Indices that repeat add into the same element: atomics.
template <typename T, typename I>
__global__ void elementsBackwardKernel(ElementsMap M, const I *Indices,
                                       int64_t Count, const T *G, T *D) {
  for (int64_t E = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; E < Count;
       E += int64_t(gridDim.x) * blockDim.x)
    atomicAdd(D + M.source(Indices, E), G[E]);
}

template <typename F> void dispatchIndex(DType Type, F &&Fn) {
  if (Type == DType::Int32)
    Fn(int32_t{});
  else
    Fn(int64_t{});
}

} // namespace

void forwardPad(Context &C, const OpCall &Call) {
  const TensorView &X = operand(Call, Call.Inputs, 0, "input");
  const TensorView &Y = operand(Call, Call.Outputs, 0, "output");
  requireType(Call, Y, X.Type, "output");
  PadPlan P = padPlan(Call, X, Y);
  unsigned char Fill[8] = {};
  encodeValue(Call.Attrs.getFloat("value"), X.Type, Fill);
  int64_t Count = Y.numElements();
  if (Count == 0)
    return;
  dispatchWidth(X.Type, [&](auto Zero) {
    using U = decltype(Zero);
    U FillValue;
    std::memcpy(&FillValue, Fill, sizeof(U));
    padForwardKernel<U><<<blocksFor(Count), ThreadsPerBlock, 0, C.Stream>>>(
        P, Count, X.as<U>(), Y.as<U>(), FillValue);
  });
  checkLaunch(Call, "pad kernel");
}

void backwardPad(Context &C, const OpCall &Call, const Views &OutputGrads,
                 const Views &InputGrads) {
  const TensorView &X = operand(Call, Call.Inputs, 0, "input");
  const TensorView &Y = operand(Call, Call.Outputs, 0, "output");
  TensorView DX = gradientAt(Call, InputGrads, 0, X, "input gradient");
  TensorView GY = gradientAt(Call, OutputGrads, 0, Y, "output gradient");
  if (!DX.present() || !GY.present())
    return;
  PadPlan P = padPlan(Call, X, Y);
  int64_t Count = Y.numElements();
  if (Count == 0)
    return;
  dispatchFloat(Call, DX.Type, "the gradient", [&](auto Zero) {
    using T = decltype(Zero);
    if (P.Mode == Constant)
      padBackwardKernel<T, false>
          <<<blocksFor(Count), ThreadsPerBlock, 0, C.Stream>>>(
              P, Count, GY.as<T>(), DX.as<T>());
    else
      padBackwardKernel<T, true>
          <<<blocksFor(Count), ThreadsPerBlock, 0, C.Stream>>>(
              P, Count, GY.as<T>(), DX.as<T>());
  });
  checkLaunch(Call, "pad backward kernel");
}

void forwardGather(Context &C, const OpCall &Call) {
  const TensorView &Y = operand(Call, Call.Outputs, 0, "output");
  GatherShape Sh = checkGather(C, Call, Y);
  const TensorView &X = Call.Inputs[0], &I = Call.Inputs[1];
  requireType(Call, Y, X.Type, "output");
  int64_t Count = Y.numElements();
  if (Count == 0)
    return;
  dispatchWidth(X.Type, [&](auto Zero) {
    using U = decltype(Zero);
    dispatchIndex(I.Type, [&](auto IndexZero) {
      using Ix = decltype(IndexZero);
      gatherForwardKernel<U, Ix>
          <<<blocksFor(Count), ThreadsPerBlock, 0, C.Stream>>>(
              Sh, I.as<Ix>(), Count, X.as<U>(), Y.as<U>());
    });
  });
  checkLaunch(Call, "gather kernel");
}

void backwardGather(Context &C, const OpCall &Call, const Views &OutputGrads,
                    const Views &InputGrads) {
  const TensorView &Y = operand(Call, Call.Outputs, 0, "output");
  TensorView DX =
      gradientAt(Call, InputGrads, 0, Call.Inputs[0], "data gradient");
  TensorView GY = gradientAt(Call, OutputGrads, 0, Y, "output gradient");
  if (!DX.present() || !GY.present())
    return;
  GatherShape Sh = checkGather(C, Call, Y);
  const TensorView &I = Call.Inputs[1];
  int64_t Count = Y.numElements();
  if (Count == 0)
    return;
  dispatchFloat(Call, DX.Type, "the gradient", [&](auto Zero) {
    using T = decltype(Zero);
    dispatchIndex(I.Type, [&](auto IndexZero) {
      using Ix = decltype(IndexZero);
      gatherBackwardKernel<T, Ix>
          <<<blocksFor(Count), ThreadsPerBlock, 0, C.Stream>>>(
              Sh, I.as<Ix>(), Count, GY.as<T>(), DX.as<T>());
    });
  });
  checkLaunch(Call, "gather backward kernel");
}

void forwardGatherElements(Context &C, const OpCall &Call) {
  const TensorView &Y = operand(Call, Call.Outputs, 0, "output");
  ElementsMap M = elementsMap(C, Call, Y);
  const TensorView &X = Call.Inputs[0], &I = Call.Inputs[1];
  requireType(Call, Y, X.Type, "output");
  int64_t Count = Y.numElements();
  if (Count == 0)
    return;
  dispatchWidth(X.Type, [&](auto Zero) {
    using U = decltype(Zero);
    dispatchIndex(I.Type, [&](auto IndexZero) {
      using Ix = decltype(IndexZero);
      elementsForwardKernel<U, Ix>
          <<<blocksFor(Count), ThreadsPerBlock, 0, C.Stream>>>(
              M, I.as<Ix>(), Count, X.as<U>(), Y.as<U>());
    });
  });
  checkLaunch(Call, "gather elements kernel");
}

void backwardGatherElements(Context &C, const OpCall &Call,
                            const Views &OutputGrads, const Views &InputGrads) {
  const TensorView &Y = operand(Call, Call.Outputs, 0, "output");
  TensorView DX =
      gradientAt(Call, InputGrads, 0, Call.Inputs[0], "data gradient");
  TensorView GY = gradientAt(Call, OutputGrads, 0, Y, "output gradient");
  if (!DX.present() || !GY.present())
    return;
  ElementsMap M = elementsMap(C, Call, Y);
  const TensorView &I = Call.Inputs[1];
  int64_t Count = Y.numElements();
  if (Count == 0)
    return;
  dispatchFloat(Call, DX.Type, "the gradient", [&](auto Zero) {
    using T = decltype(Zero);
    dispatchIndex(I.Type, [&](auto IndexZero) {
      using Ix = decltype(IndexZero);
      elementsBackwardKernel<T, Ix>
          <<<blocksFor(Count), ThreadsPerBlock, 0, C.Stream>>>(
              M, I.as<Ix>(), Count, GY.as<T>(), DX.as<T>());
    });
  });
  checkLaunch(Call, "gather elements backward kernel");
}

} // namespace onnx2soap::rt::cuda
