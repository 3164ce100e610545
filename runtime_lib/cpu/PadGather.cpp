//===- runtime_lib/cpu/PadGather.cpp - Pad and Gather kernels -------------===//
//
// Pad maps every output position, dim by dim, to an input position or to
// the fill value; Gather maps rows of the data through an index tensor. The
// backward kernels add the output gradient through the same maps, so input
// elements read several times (reflected borders, repeated indices) get the
// sum.
//
//===----------------------------------------------------------------------===//
#include "PadGather.h"
#include <cmath>
#include <cstring>
#include <vector>

namespace onnx2soap::rt::cpu {
namespace {

const TensorView &operand(const OpCall &Call, const Views &Vs, size_t I,
                          const char *What) {
  if (I >= Vs.size() || !Vs[I].present())
    failOp(Call, std::string("missing ") + What);
  requireContiguous(Call, Vs[I], What);
  return Vs[I];
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

/// Runs Fn(T{}) for a f32 or f64 gradient type.
template <typename F>
void dispatchFloat(const OpCall &Call, DType Type, F &&Fn) {
  if (Type == DType::Float32)
    return Fn(float{});
  if (Type == DType::Float64)
    return Fn(double{});
  failOp(Call, std::string("gradient of element type ") + dtypeName(Type) +
                   " is not supported, the CPU kernel needs f32 or f64");
}

//===-- Pad ---------------------------------------------------------------===//

/// IEEE half of F, rounding to nearest even.
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
    ++Half; // may carry into the exponent, which is still right
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
    Bits += 0x7fff + ((Bits >> 16) & 1); // round to nearest even
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

/// For every output position of every dim, the input offset contribution
/// (index times stride) or -1 for the fill value.
struct PadMap {
  std::vector<std::vector<int64_t>> Offsets;
};

/// Negative pads crop the input first; reflect, edge and wrap then extend
/// the cropped input (as ONNX Runtime does).
PadMap padMap(const OpCall &Call, const TensorView &X, const TensorView &Y) {
  const std::vector<int64_t> &Pads = Call.Attrs.getInts("pads");
  const std::string &Mode = Call.Attrs.getString("mode", "constant");
  bool Constant = Mode == "constant", Reflect = Mode == "reflect",
       Edge = Mode == "edge", Wrap = Mode == "wrap";
  if (!Constant && !Reflect && !Edge && !Wrap)
    failOp(Call, "unknown pad mode '" + Mode + "'");
  if (static_cast<int>(Pads.size()) != 2 * X.Rank || Y.Rank != X.Rank)
    failOp(Call, "pads do not match the input's rank");
  PadMap M;
  int64_t Stride = 1;
  M.Offsets.resize(X.Rank);
  for (int D = X.Rank - 1; D >= 0; --D) {
    int64_t Begin = Pads[D], End = Pads[X.Rank + D];
    if (X.Dims[D] + Begin + End != Y.Dims[D])
      failOp(Call, "pads of dim " + std::to_string(D) +
                       " do not give the output's size");
    // The kept input range [Low, Low + Kept) starts at output position
    // max(Begin, 0).
    int64_t Low = std::max<int64_t>(-Begin, 0);
    int64_t Kept = X.Dims[D] - Low - std::max<int64_t>(-End, 0);
    int64_t Start = std::max<int64_t>(Begin, 0);
    bool Padded = Kept < Y.Dims[D];
    if (Padded && !Constant && Kept <= 0)
      failOp(Call, Mode + " padding of dim " + std::to_string(D) +
                       " has no input elements to repeat");
    std::vector<int64_t> &Map = M.Offsets[D];
    Map.resize(Y.Dims[D]);
    for (int64_t O = 0; O < Y.Dims[D]; ++O) {
      int64_t J = O - Start; // position within the kept range
      if (J < 0 || J >= Kept) {
        if (Constant) {
          Map[O] = -1;
          continue;
        }
        if (Edge || (Reflect && Kept == 1)) {
          J = J < 0 ? 0 : Kept - 1;
        } else if (Reflect) {
          int64_t Period = 2 * (Kept - 1);
          J = ((J % Period) + Period) % Period;
          if (J >= Kept)
            J = Period - J;
        } else {
          J = ((J % Kept) + Kept) % Kept;
        }
      }
      Map[O] = (Low + J) * Stride;
    }
    Stride *= X.Dims[D];
  }
  return M;
}

/// Calls Fn(OutIndex, InOffset or -1) for every output element.
template <typename F>
void forEachPadded(const TensorView &Y, const PadMap &M, F &&Fn) {
  int64_t Count = Y.numElements();
  if (Count == 0)
    return;
  if (Y.Rank == 0)
    return Fn(int64_t(0), int64_t(0));
  int Last = Y.Rank - 1;
  std::vector<int64_t> Index(Y.Rank, 0);
  const std::vector<int64_t> &Inner = M.Offsets[Last];
  for (int64_t Row = 0; Row < Count; Row += Y.Dims[Last]) {
    int64_t Base = 0;
    bool Fill = false;
    for (int D = 0; D < Last; ++D) {
      int64_t Off = M.Offsets[D][Index[D]];
      Fill |= Off < 0;
      Base += Off;
    }
    for (int64_t J = 0; J < Y.Dims[Last]; ++J)
      Fn(Row + J, Fill || Inner[J] < 0 ? -1 : Base + Inner[J]);
    for (int D = Last - 1; D >= 0; --D) {
      if (++Index[D] < Y.Dims[D])
        break;
      Index[D] = 0;
    }
  }
}

/// Runs Fn(U{}) with U an unsigned integer as wide as an element of Type.
template <typename F> void dispatchBytes(DType Type, F &&Fn) {
  switch (dtypeSize(Type)) {
  case 1:
    return Fn(uint8_t{});
  case 2:
    return Fn(uint16_t{});
  case 4:
    return Fn(uint32_t{});
  default:
    return Fn(uint64_t{});
  }
}

//===-- Gather ------------------------------------------------------------===//

struct GatherShape {
  int64_t Outer, Rows, Inner;   // data as [Outer, Rows, Inner]
  std::vector<int64_t> Indices; // normalized to [0, Rows)
};

GatherShape gatherShape(const OpCall &Call, const TensorView &Y) {
  const TensorView &X = operand(Call, Call.Inputs, 0, "data");
  const TensorView &I = operand(Call, Call.Inputs, 1, "indices");
  int64_t Axis = Call.Attrs.getInt("axis");
  if (Axis < 0 || Axis >= X.Rank)
    failOp(Call, "axis " + std::to_string(Axis) + " is out of range");
  GatherShape Sh{1, X.Dims[Axis], 1, {}};
  for (int D = 0; D < X.Rank; ++D)
    if (D != Axis)
      (D < Axis ? Sh.Outer : Sh.Inner) *= X.Dims[D];
  int64_t Count = I.numElements();
  if (I.Type != DType::Int32 && I.Type != DType::Int64)
    failOp(Call,
           std::string("indices must be i32 or i64, got ") + dtypeName(I.Type));
  if (Y.numElements() != Sh.Outer * Count * Sh.Inner)
    failOp(Call, "output does not match data and indices");
  Sh.Indices.resize(Count);
  for (int64_t K = 0; K < Count; ++K) {
    int64_t V =
        I.Type == DType::Int32 ? I.as<int32_t>()[K] : I.as<int64_t>()[K];
    int64_t N = V < 0 ? V + Sh.Rows : V;
    if (N < 0 || N >= Sh.Rows)
      failOp(Call, "index " + std::to_string(V) + " (indices element " +
                       std::to_string(K) + ") is out of range for axis " +
                       std::to_string(Axis) + " of size " +
                       std::to_string(Sh.Rows));
    Sh.Indices[K] = N;
  }
  return Sh;
}

//===-- GatherElements ----------------------------------------------------===//

/// Output element E of GatherElements reads the data at E's coordinates,
/// but at its index along the axis.
struct ElementsMap {
  int Rank = 0;
  int64_t Axis = 0, Rows = 0;
  int64_t OutDims[MaxRank] = {}, DataStrides[MaxRank] = {};
  /// The data element output element E reads, for its index V in range.
  int64_t source(int64_t E, int64_t V) const {
    int64_t Offset = 0;
    for (int D = Rank - 1; D >= 0; --D) {
      int64_t Coord = E % OutDims[D];
      E /= OutDims[D];
      Offset += (D == Axis ? V : Coord) * DataStrides[D];
    }
    return Offset;
  }
};

ElementsMap elementsMap(const OpCall &Call, const TensorView &Y) {
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
  return M;
}

/// Index E of I, counted from the front; fails naming it when out of range.
int64_t elementIndex(const OpCall &Call, const TensorView &I,
                     const ElementsMap &M, int64_t E) {
  int64_t V = I.Type == DType::Int32 ? I.as<int32_t>()[E] : I.as<int64_t>()[E];
  int64_t N = V < 0 ? V + M.Rows : V;
  if (N < 0 || N >= M.Rows)
    failOp(Call, "index " + std::to_string(V) + " (indices element " +
                     std::to_string(E) + ") is out of range for axis " +
                     std::to_string(M.Axis) + " of size " +
                     std::to_string(M.Rows));
  return N;
}

} // namespace

void forwardGatherElements(const OpCall &Call) {
  const TensorView &Y = operand(Call, Call.Outputs, 0, "output");
  ElementsMap M = elementsMap(Call, Y);
  const TensorView &X = Call.Inputs[0], &I = Call.Inputs[1];
  requireType(Call, Y, X.Type, "output");
  dispatchBytes(X.Type, [&](auto U) {
    using T = decltype(U);
    const T *In = X.as<T>();
    T *Out = Y.as<T>();
    for (int64_t E = 0; E < Y.numElements(); ++E)
      Out[E] = In[M.source(E, elementIndex(Call, I, M, E))];
  });
}

void backwardGatherElements(const OpCall &Call, const Views &OutputGrads,
                            const Views &InputGrads) {
  const TensorView &Y = operand(Call, Call.Outputs, 0, "output");
  TensorView DX =
      gradientAt(Call, InputGrads, 0, Call.Inputs[0], "data gradient");
  TensorView GY = gradientAt(Call, OutputGrads, 0, Y, "output gradient");
  if (!DX.present() || !GY.present())
    return;
  ElementsMap M = elementsMap(Call, Y);
  const TensorView &I = Call.Inputs[1];
  dispatchFloat(Call, DX.Type, [&](auto Zero) {
    using T = decltype(Zero);
    const T *G = GY.as<T>();
    T *D = DX.as<T>();
    for (int64_t E = 0; E < Y.numElements(); ++E)
      D[M.source(E, elementIndex(Call, I, M, E))] += G[E];
  });
}

void forwardPad(const OpCall &Call) {
  const TensorView &X = operand(Call, Call.Inputs, 0, "input");
  const TensorView &Y = operand(Call, Call.Outputs, 0, "output");
  requireType(Call, Y, X.Type, "output");
  PadMap M = padMap(Call, X, Y);
  unsigned char Fill[8] = {};
  encodeValue(Call.Attrs.getFloat("value"), X.Type, Fill);
  dispatchBytes(X.Type, [&](auto U) {
    using T = decltype(U);
    T FillValue;
    std::memcpy(&FillValue, Fill, sizeof(T));
    const T *In = X.as<T>();
    T *Out = Y.as<T>();
    forEachPadded(Y, M, [&](int64_t O, int64_t I) {
      Out[O] = I < 0 ? FillValue : In[I];
    });
  });
}

void backwardPad(const OpCall &Call, const Views &OutputGrads,
                 const Views &InputGrads) {
  const TensorView &X = operand(Call, Call.Inputs, 0, "input");
  const TensorView &Y = operand(Call, Call.Outputs, 0, "output");
  TensorView DX = gradientAt(Call, InputGrads, 0, X, "input gradient");
  TensorView GY = gradientAt(Call, OutputGrads, 0, Y, "output gradient");
  if (!DX.present() || !GY.present())
    return;
  PadMap M = padMap(Call, X, Y);
  dispatchFloat(Call, DX.Type, [&](auto Zero) {
    using T = decltype(Zero);
    const T *G = GY.as<T>();
    T *D = DX.as<T>();
    forEachPadded(Y, M, [&](int64_t O, int64_t I) {
      if (I >= 0)
        D[I] += G[O];
    });
  });
}

void forwardGather(const OpCall &Call) {
  const TensorView &Y = operand(Call, Call.Outputs, 0, "output");
  GatherShape Sh = gatherShape(Call, Y);
  const TensorView &X = Call.Inputs[0];
  requireType(Call, Y, X.Type, "output");
  size_t RowBytes = Sh.Inner * dtypeSize(X.Type);
  const unsigned char *In = X.as<unsigned char>();
  unsigned char *Out = Y.as<unsigned char>();
  int64_t Count = Sh.Indices.size();
  for (int64_t O = 0; O < Sh.Outer; ++O)
    for (int64_t K = 0; K < Count; ++K)
      std::memcpy(Out + (O * Count + K) * RowBytes,
                  In + (O * Sh.Rows + Sh.Indices[K]) * RowBytes, RowBytes);
}

void backwardGather(const OpCall &Call, const Views &OutputGrads,
                    const Views &InputGrads) {
  const TensorView &Y = operand(Call, Call.Outputs, 0, "output");
  TensorView DX =
      gradientAt(Call, InputGrads, 0, Call.Inputs[0], "data gradient");
  TensorView GY = gradientAt(Call, OutputGrads, 0, Y, "output gradient");
  if (!DX.present() || !GY.present())
    return;
  GatherShape Sh = gatherShape(Call, Y);
  int64_t Count = Sh.Indices.size();
  dispatchFloat(Call, DX.Type, [&](auto Zero) {
    using T = decltype(Zero);
    const T *G = GY.as<T>();
    T *D = DX.as<T>();
    for (int64_t O = 0; O < Sh.Outer; ++O)
      for (int64_t K = 0; K < Count; ++K) {
        const T *Src = G + (O * Count + K) * Sh.Inner;
        T *Dst = D + (O * Sh.Rows + Sh.Indices[K]) * Sh.Inner;
        for (int64_t J = 0; J < Sh.Inner; ++J)
          Dst[J] += Src[J];
      }
  });
}

} // namespace onnx2soap::rt::cpu
