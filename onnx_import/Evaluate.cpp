//===- onnx_import/Evaluate.cpp - Running IR ops on known values ----------===//
//
// Every evaluation walks the output's multi-index and computes where each
// element comes from; inputs are at most MaxFoldedElements, so the simple
// loops are fast enough and easy to check against the ONNX definitions.
//
//===----------------------------------------------------------------------===//
#include "onnx_import/Evaluate.h"
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>

namespace onnx2soap::onnx_import {

using ir::DType;
using ir::OpKind;
using ir::Shape;

namespace {
/// Row-major strides of Dims.
Shape stridesOf(llvm::ArrayRef<int64_t> Dims) {
  Shape S(Dims.size(), 1);
  for (size_t I = Dims.size(); I-- > 1;)
    S[I - 1] = S[I] * Dims[I];
  return S;
}

/// Calls F(index) for every multi-index of Dims in row-major order.
void forEachIndex(llvm::ArrayRef<int64_t> Dims,
                  const std::function<void(llvm::ArrayRef<int64_t>)> &F) {
  int64_t N = ir::numElements(Dims);
  Shape Index(Dims.size(), 0);
  for (int64_t L = 0; L < N; ++L) {
    F(Index);
    for (size_t D = Dims.size(); D-- > 0;) {
      if (++Index[D] < Dims[D])
        break;
      Index[D] = 0;
    }
  }
}

/// Linear index into a tensor of InDims broadcast to an output index.
int64_t broadcastIndex(llvm::ArrayRef<int64_t> InDims,
                       llvm::ArrayRef<int64_t> Strides,
                       llvm::ArrayRef<int64_t> OutIndex) {
  size_t Offset = OutIndex.size() - InDims.size();
  int64_t L = 0;
  for (size_t D = 0; D < InDims.size(); ++D)
    if (InDims[D] != 1)
      L += OutIndex[Offset + D] * Strides[D];
  return L;
}

/// A tensor of Type/Dims whose element at each output index is element
/// Source(index) of In.
ConstTensor
move(const ConstTensor &In, const ir::TensorType &Out,
     const std::function<int64_t(llvm::ArrayRef<int64_t>)> &Source) {
  ConstTensor R;
  R.Type = In.Type;
  R.Dims = Out.Dims;
  forEachIndex(Out.Dims, [&](llvm::ArrayRef<int64_t> Index) {
    int64_t S = Source(Index);
    if (In.isFloat())
      R.Floats.push_back(In.Floats[S]);
    else
      R.Ints.push_back(In.Ints[S]);
  });
  return R;
}

std::optional<double> unaryFloat(OpKind Kind, double X,
                                 const ir::Attributes &Attrs) {
  switch (Kind) {
  case OpKind::Relu:
    return X > 0 ? X : 0;
  case OpKind::LeakyRelu:
    return X >= 0 ? X : X * Attrs.getFloat("alpha", 0.01);
  case OpKind::Sigmoid:
    return 1 / (1 + std::exp(-X));
  case OpKind::Tanh:
    return std::tanh(X);
  case OpKind::Erf:
    return std::erf(X);
  case OpKind::Sqrt:
    return std::sqrt(X);
  case OpKind::Exp:
    return std::exp(X);
  case OpKind::Log:
    return std::log(X);
  case OpKind::Neg:
    return -X;
  case OpKind::Abs:
    return std::fabs(X);
  case OpKind::Reciprocal:
    return 1 / X;
  case OpKind::Clip: {
    // min(max(x, min), max): max wins when min > max; NaN passes.
    double Lo = Attrs.getFloat("min", -INFINITY);
    double Hi = Attrs.getFloat("max", INFINITY);
    double Y = X < Lo ? Lo : X;
    return Y > Hi ? Hi : Y;
  }
  case OpKind::HardSigmoid: {
    double Y = Attrs.getFloat("alpha", 0.2) * X + Attrs.getFloat("beta", 0.5);
    return Y < 0 ? 0 : (Y > 1 ? 1 : Y);
  }
  case OpKind::HardSwish:
    return X * (X + 3 < 0 ? 0 : (X + 3 > 6 ? 6 : X + 3)) / 6;
  case OpKind::Elu:
    return X > 0 ? X : Attrs.getFloat("alpha", 1.0) * std::expm1(X);
  case OpKind::Softplus:
    return X > 20 ? X : std::log1p(std::exp(X));
  case OpKind::Sin:
    return std::sin(X);
  case OpKind::Cos:
    return std::cos(X);
  case OpKind::Floor:
    return std::floor(X);
  case OpKind::Ceil:
    return std::ceil(X);
  case OpKind::Round:
    return std::nearbyint(X); // halves to even, as ONNX
  default:
    return std::nullopt;
  }
}

std::optional<int64_t> unaryInt(OpKind Kind, int64_t X,
                                const ir::Attributes &Attrs) {
  switch (Kind) {
  case OpKind::Clip: {
    int64_t Y = std::max(X, Attrs.getInt("min", INT64_MIN));
    return std::min(Y, Attrs.getInt("max", INT64_MAX));
  }
  case OpKind::Relu:
    return X > 0 ? X : 0;
  // Wrapping at the most negative value, as the kernels do.
  case OpKind::Neg:
    return static_cast<int64_t>(0 - static_cast<uint64_t>(X));
  case OpKind::Abs:
    return X < 0 ? static_cast<int64_t>(0 - static_cast<uint64_t>(X)) : X;
  case OpKind::Not:
    return !X;
  default:
    return std::nullopt;
  }
}

std::optional<double> binaryFloat(OpKind Kind, double A, double B) {
  switch (Kind) {
  case OpKind::Add:
    return A + B;
  case OpKind::Sub:
    return A - B;
  case OpKind::Mul:
    return A * B;
  case OpKind::Div:
    return A / B;
  case OpKind::Pow:
    return std::pow(A, B);
  // ONNX Max / Min propagate NaN (numpy's maximum), unlike fmax / fmin.
  case OpKind::Max:
    return std::isnan(A) || std::isnan(B) ? A + B : std::max(A, B);
  case OpKind::Min:
    return std::isnan(A) || std::isnan(B) ? A + B : std::min(A, B);
  case OpKind::Equal:
    return A == B;
  case OpKind::Less:
    return A < B;
  case OpKind::Greater:
    return A > B;
  default:
    return std::nullopt;
  }
}

std::optional<int64_t> binaryInt(OpKind Kind, int64_t A, int64_t B) {
  switch (Kind) {
  case OpKind::Add:
    return static_cast<int64_t>(static_cast<uint64_t>(A) +
                                static_cast<uint64_t>(B));
  case OpKind::Sub:
    return static_cast<int64_t>(static_cast<uint64_t>(A) -
                                static_cast<uint64_t>(B));
  case OpKind::Mul:
    return static_cast<int64_t>(static_cast<uint64_t>(A) *
                                static_cast<uint64_t>(B));
  case OpKind::Div:
    if (B == 0 || (A == INT64_MIN && B == -1))
      return std::nullopt;
    return A / B;
  case OpKind::Pow: {
    if (B < 0)
      return std::nullopt;
    // By squaring, modulo 2^64 as ONNX's reference computes it (a cap of
    // 64 products made (-1)^65 come out 1).
    uint64_t R = 1, Base = static_cast<uint64_t>(A);
    for (uint64_t E = static_cast<uint64_t>(B); E; E >>= 1) {
      if (E & 1)
        R *= Base;
      Base *= Base;
    }
    return static_cast<int64_t>(R);
  }
  case OpKind::Max:
    return A > B ? A : B;
  case OpKind::Min:
    return A < B ? A : B;
  case OpKind::Equal:
    return A == B;
  case OpKind::Less:
    return A < B;
  case OpKind::Greater:
    return A > B;
  default:
    return std::nullopt;
  }
}

std::optional<ConstTensor> elementwise(OpKind Kind, const ir::Attributes &Attrs,
                                       llvm::ArrayRef<const ConstTensor *> In,
                                       const ir::TensorType &Out) {
  ConstTensor R;
  R.Type = Out.Type;
  R.Dims = Out.Dims;
  llvm::SmallVector<Shape, 3> Strides;
  for (const ConstTensor *T : In)
    Strides.push_back(stridesOf(T->Dims));
  // Work in doubles when any operand or the result is floating point.
  bool Float = R.isFloat();
  for (const ConstTensor *T : In)
    Float |= T->isFloat();
  bool Failed = false;
  forEachIndex(Out.Dims, [&](llvm::ArrayRef<int64_t> Index) {
    if (Failed)
      return;
    llvm::SmallVector<int64_t, 3> L;
    for (size_t I = 0; I < In.size(); ++I)
      L.push_back(broadcastIndex(In[I]->Dims, Strides[I], Index));
    if (Kind == OpKind::Where) {
      const ConstTensor *Pick = In[0]->Ints[L[0]] ? In[1] : In[2];
      size_t Which = In[0]->Ints[L[0]] ? 1 : 2;
      if (R.isFloat())
        R.Floats.push_back(Pick->floatAt(L[Which]));
      else
        R.Ints.push_back(Pick->intAt(L[Which]));
      return;
    }
    if (In.size() == 1) {
      if (Float) {
        auto V = unaryFloat(Kind, In[0]->floatAt(L[0]), Attrs);
        Failed = !V;
        if (V)
          R.Floats.push_back(*V);
      } else {
        auto V = unaryInt(Kind, In[0]->Ints[L[0]], Attrs);
        Failed = !V;
        if (V)
          R.Ints.push_back(*V);
      }
      return;
    }
    // Binary, or a chain for variadic Max / Min.
    if (Float) {
      double Acc = In[0]->floatAt(L[0]);
      for (size_t I = 1; I < In.size() && !Failed; ++I) {
        auto V = binaryFloat(Kind, Acc, In[I]->floatAt(L[I]));
        Failed = !V;
        Acc = V ? *V : 0;
      }
      if (R.isFloat())
        R.Floats.push_back(Acc);
      else
        R.Ints.push_back(static_cast<int64_t>(Acc));
    } else {
      int64_t Acc = In[0]->Ints[L[0]];
      for (size_t I = 1; I < In.size() && !Failed; ++I) {
        auto V = binaryInt(Kind, Acc, In[I]->Ints[L[I]]);
        Failed = !V;
        Acc = V ? *V : 0;
      }
      R.Ints.push_back(Acc);
    }
  });
  if (Failed)
    return std::nullopt;
  // Results stored in a narrower type wrap or round as the type does.
  return R.cast(R.Type);
}
} // namespace

std::optional<std::vector<ConstTensor>>
evaluate(OpKind Kind, const ir::Attributes &Attrs,
         llvm::ArrayRef<const ConstTensor *> Inputs,
         llvm::ArrayRef<ir::TensorType> OutTypes) {
  for (const ir::TensorType &T : OutTypes)
    if (T.numElements() > MaxFoldedElements)
      return std::nullopt;
  const ConstTensor &In = *Inputs[0];
  const ir::TensorType &Out = OutTypes[0];
  switch (Kind) {
  case OpKind::Relu:
  case OpKind::LeakyRelu:
  case OpKind::Sigmoid:
  case OpKind::Tanh:
  case OpKind::Erf:
  case OpKind::Sqrt:
  case OpKind::Exp:
  case OpKind::Log:
  case OpKind::Neg:
  case OpKind::Abs:
  case OpKind::Reciprocal:
  case OpKind::Clip:
  case OpKind::HardSigmoid:
  case OpKind::HardSwish:
  case OpKind::Elu:
  case OpKind::Softplus:
  case OpKind::Sin:
  case OpKind::Cos:
  case OpKind::Floor:
  case OpKind::Ceil:
  case OpKind::Round:
  case OpKind::Not:
  case OpKind::Add:
  case OpKind::Sub:
  case OpKind::Mul:
  case OpKind::Div:
  case OpKind::Pow:
  case OpKind::Max:
  case OpKind::Min:
  case OpKind::Equal:
  case OpKind::Less:
  case OpKind::Greater:
  case OpKind::Where: {
    auto R = elementwise(Kind, Attrs, Inputs, Out);
    if (!R)
      return std::nullopt;
    return std::vector<ConstTensor>{std::move(*R)};
  }
  case OpKind::Cast:
    return std::vector<ConstTensor>{In.cast(Out.Type)};
  case OpKind::CumSum: {
    // As the kernels: floats sum in double, integers wrap in their type.
    int64_t Axis = Attrs.getInt("axis"), Outer = 1, Inner = 1;
    for (int64_t D = 0; D < Axis; ++D)
      Outer *= In.Dims[D];
    for (size_t D = Axis + 1; D < In.Dims.size(); ++D)
      Inner *= In.Dims[D];
    int64_t Count = In.Dims[Axis];
    bool Exclusive = Attrs.getInt("exclusive", 0) != 0,
         Reverse = Attrs.getInt("reverse", 0) != 0;
    ConstTensor R = In;
    for (int64_t O = 0; O < Outer; ++O)
      for (int64_t I = 0; I < Inner; ++I) {
        double FloatSum = 0;
        uint64_t IntSum = 0;
        for (int64_t K = 0; K < Count; ++K) {
          int64_t At = (O * Count + (Reverse ? Count - 1 - K : K)) * Inner + I;
          if (R.isFloat()) {
            double Before = FloatSum;
            FloatSum += In.Floats[At];
            R.Floats[At] = Exclusive ? Before : FloatSum;
          } else {
            uint64_t Before = IntSum;
            IntSum += static_cast<uint64_t>(In.Ints[At]);
            uint64_t V = Exclusive ? Before : IntSum;
            R.Ints[At] = R.Type == ir::DType::Int32
                             ? static_cast<int32_t>(static_cast<uint32_t>(V))
                             : static_cast<int64_t>(V);
          }
        }
      }
    return std::vector<ConstTensor>{std::move(R)};
  }
  case OpKind::Reshape: {
    ConstTensor R = In;
    R.Dims = Out.Dims;
    return std::vector<ConstTensor>{std::move(R)};
  }
  case OpKind::Transpose: {
    auto Perm = Attrs.getInts("perm");
    Shape Strides = stridesOf(In.Dims);
    return std::vector<ConstTensor>{
        move(In, Out, [&](llvm::ArrayRef<int64_t> Index) {
          int64_t L = 0;
          for (size_t D = 0; D < Perm.size(); ++D)
            L += Index[D] * Strides[Perm[D]];
          return L;
        })};
  }
  case OpKind::Expand: {
    Shape Strides = stridesOf(In.Dims);
    return std::vector<ConstTensor>{
        move(In, Out, [&](llvm::ArrayRef<int64_t> Index) {
          return broadcastIndex(In.Dims, Strides, Index);
        })};
  }
  case OpKind::Slice: {
    auto Starts = Attrs.getInts("starts"), Steps = Attrs.getInts("steps");
    Shape Strides = stridesOf(In.Dims);
    return std::vector<ConstTensor>{
        move(In, Out, [&](llvm::ArrayRef<int64_t> Index) {
          int64_t L = 0;
          for (size_t D = 0; D < Index.size(); ++D)
            L += (Starts[D] + Index[D] * Steps[D]) * Strides[D];
          return L;
        })};
  }
  case OpKind::Gather: {
    const ConstTensor &Indices = *Inputs[1];
    int64_t Axis = Attrs.getInt("axis");
    int64_t Rank = Indices.Dims.size(), Extent = In.Dims[Axis];
    for (int64_t V : Indices.Ints)
      if (V < -Extent || V >= Extent)
        return std::nullopt; // the runtime reports out-of-range indices
    Shape Strides = stridesOf(In.Dims), IndexStrides = stridesOf(Indices.Dims);
    return std::vector<ConstTensor>{
        move(In, Out, [&](llvm::ArrayRef<int64_t> Index) {
          int64_t Pos = 0;
          for (int64_t D = 0; D < Rank; ++D)
            Pos += Index[Axis + D] * IndexStrides[D];
          int64_t Row = Indices.Ints[Pos];
          if (Row < 0)
            Row += Extent;
          int64_t L = Row * Strides[Axis];
          for (int64_t D = 0; D < Axis; ++D)
            L += Index[D] * Strides[D];
          for (size_t D = Axis + 1; D < In.Dims.size(); ++D)
            L += Index[D - 1 + Rank] * Strides[D];
          return L;
        })};
  }
  case OpKind::GatherElements: {
    const ConstTensor &Indices = *Inputs[1];
    int64_t Axis = Attrs.getInt("axis"), Extent = In.Dims[Axis];
    for (int64_t V : Indices.Ints)
      if (V < -Extent || V >= Extent)
        return std::nullopt; // the runtime reports out-of-range indices
    Shape Strides = stridesOf(In.Dims), IndexStrides = stridesOf(Indices.Dims);
    return std::vector<ConstTensor>{
        move(In, Out, [&](llvm::ArrayRef<int64_t> Index) {
          int64_t Pos = 0, L = 0;
          for (size_t D = 0; D < Index.size(); ++D)
            Pos += Index[D] * IndexStrides[D];
          int64_t Row = Indices.Ints[Pos];
          if (Row < 0)
            Row += Extent;
          for (size_t D = 0; D < Index.size(); ++D)
            L +=
                (static_cast<int64_t>(D) == Axis ? Row : Index[D]) * Strides[D];
          return L;
        })};
  }
  case OpKind::Concat: {
    int64_t Axis = Attrs.getInt("axis");
    ConstTensor R;
    R.Type = Out.Type;
    R.Dims = Out.Dims;
    llvm::SmallVector<Shape, 4> Strides;
    for (const ConstTensor *T : Inputs)
      Strides.push_back(stridesOf(T->Dims));
    forEachIndex(Out.Dims, [&](llvm::ArrayRef<int64_t> Index) {
      int64_t Pos = Index[Axis];
      size_t I = 0;
      while (Pos >= Inputs[I]->Dims[Axis])
        Pos -= Inputs[I++]->Dims[Axis];
      int64_t L = 0;
      for (size_t D = 0; D < Index.size(); ++D)
        L += (D == static_cast<size_t>(Axis) ? Pos : Index[D]) * Strides[I][D];
      if (R.isFloat())
        R.Floats.push_back(Inputs[I]->floatAt(L));
      else
        R.Ints.push_back(Inputs[I]->intAt(L));
    });
    return std::vector<ConstTensor>{std::move(R)};
  }
  case OpKind::Split: {
    int64_t Axis = Attrs.getInt("axis"), Offset = 0;
    Shape Strides = stridesOf(In.Dims);
    std::vector<ConstTensor> Results;
    for (const ir::TensorType &T : OutTypes) {
      Results.push_back(move(In, T, [&](llvm::ArrayRef<int64_t> Index) {
        int64_t L = 0;
        for (size_t D = 0; D < Index.size(); ++D)
          L += (Index[D] + (D == static_cast<size_t>(Axis) ? Offset : 0)) *
               Strides[D];
        return L;
      }));
      Offset += T.Dims[Axis];
    }
    return Results;
  }
  case OpKind::Pad: {
    if (Attrs.getString("mode", "constant") != "constant")
      return std::nullopt;
    auto Pads = Attrs.getInts("pads");
    double Fill = Attrs.getFloat("value");
    Shape Strides = stridesOf(In.Dims);
    ConstTensor R;
    R.Type = In.Type;
    R.Dims = Out.Dims;
    forEachIndex(Out.Dims, [&](llvm::ArrayRef<int64_t> Index) {
      int64_t L = 0;
      bool Inside = true;
      for (size_t D = 0; D < Index.size(); ++D) {
        int64_t P = Index[D] - Pads[D];
        Inside &= P >= 0 && P < In.Dims[D];
        L += P * Strides[D];
      }
      if (R.isFloat())
        R.Floats.push_back(Inside ? In.Floats[L] : Fill);
      else
        R.Ints.push_back(Inside ? In.Ints[L] : static_cast<int64_t>(Fill));
    });
    return std::vector<ConstTensor>{std::move(R)};
  }
  default:
    return std::nullopt;
  }
}

} // namespace onnx2soap::onnx_import
