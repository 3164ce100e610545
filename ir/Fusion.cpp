//===- ir/Fusion.cpp - Recognizing decomposed LayerNorm and GELU ----------===//
//
// Each matcher starts at a distinctive op (the Div of a normalization, the
// Erf of a GELU), walks the chain through tensors read by exactly one op,
// and only then rewrites: a chain whose intermediate values are read
// elsewhere stays as it is.
//
//===----------------------------------------------------------------------===//
#include "ir/Fusion.h"
#include "llvm/ADT/DenseSet.h"
#include <cmath>
#include <cstring>
#include <optional>

namespace onnx2soap::ir {

namespace {
class Matcher {
public:
  explicit Matcher(Graph &G) : G(G), Consumers(G.allConsumers()) {
    for (TensorId T : G.outputs())
      IsOutput.insert(T);
  }

  /// The op producing T, if it is of kind Kind.
  const Op *producer(TensorId T, OpKind Kind) const {
    if (T == NoTensor || G.tensor(T).Producer == NoOp)
      return nullptr;
    const Op &O = G.op(G.tensor(T).Producer);
    return O.Kind == Kind ? &O : nullptr;
  }

  /// T is read by exactly one op and is not a graph output.
  bool singleUse(TensorId T) const {
    return Consumers[T].size() == 1 && !IsOutput.count(T);
  }

  /// The only op reading T, if it is of kind Kind.
  const Op *soleConsumer(TensorId T, OpKind Kind) const {
    if (!singleUse(T))
      return nullptr;
    const Op &O = G.op(Consumers[T][0]);
    return O.Kind == Kind ? &O : nullptr;
  }

  /// Value of a one-element floating-point constant.
  std::optional<double> scalar(TensorId T) const {
    const Tensor &C = G.tensor(T);
    if (C.Role != TensorRole::Constant || C.Type.numElements() != 1 ||
        C.Data.kind() != TensorData::Kind::Owned)
      return std::nullopt;
    auto Bytes = C.Data.bytes();
    if (!Bytes) {
      llvm::consumeError(Bytes.takeError());
      return std::nullopt;
    }
    switch (C.Type.Type) {
    case DType::Float32: {
      float V;
      std::memcpy(&V, Bytes->data(), sizeof V);
      return V;
    }
    case DType::Float64: {
      double V;
      std::memcpy(&V, Bytes->data(), sizeof V);
      return V;
    }
    default:
      return std::nullopt;
    }
  }

  /// The operand of binary op O other than T (NoTensor when T is not one).
  static TensorId other(const Op &O, TensorId T) {
    if (O.Inputs[0] == T)
      return O.Inputs[1];
    if (O.Inputs[1] == T)
      return O.Inputs[0];
    return NoTensor;
  }

  Graph &G;
  std::vector<llvm::SmallVector<OpId, 2>> Consumers;
  llvm::SmallDenseSet<TensorId, 4> IsOutput;
};

bool near(std::optional<double> V, double Expected) {
  return V && std::fabs(*V - Expected) <= 1e-4 * std::fabs(Expected);
}

/// Axes [First, Rank) exactly, as a sorted list.
std::optional<int64_t> trailingAxes(llvm::ArrayRef<int64_t> Axes,
                                    unsigned Rank) {
  if (Axes.empty() || Axes.back() != static_cast<int64_t>(Rank) - 1)
    return std::nullopt;
  for (size_t I = 1; I < Axes.size(); ++I)
    if (Axes[I] != Axes[I - 1] + 1)
      return std::nullopt;
  return Axes.front();
}
} // namespace

unsigned fuseLayerNorm(Graph &G) {
  unsigned Fused = 0;
  size_t Count = G.numOps();
  std::optional<Matcher> Fresh;
  for (OpId Id = 0; Id < Count; ++Id) {
    // Consumer lists go stale after a rewrite; rebuild them only then.
    if (!Fresh)
      Fresh.emplace(G);
    Matcher &M = *Fresh;
    const Op &Div = G.op(Id);
    if (Div.Kind != OpKind::Div)
      continue;
    const Op *Sub = M.producer(Div.Inputs[0], OpKind::Sub);
    const Op *Sqrt = M.producer(Div.Inputs[1], OpKind::Sqrt);
    if (!Sub || !Sqrt)
      continue;
    TensorId X = Sub->Inputs[0];
    const Op *Mean = M.producer(Sub->Inputs[1], OpKind::ReduceMean);
    const Op *AddEps = M.producer(Sqrt->Inputs[0], OpKind::Add);
    if (!Mean || Mean->Inputs[0] != X || !AddEps)
      continue;
    const Op *Var = M.producer(AddEps->Inputs[0], OpKind::ReduceMean);
    std::optional<double> Epsilon = M.scalar(AddEps->Inputs[1]);
    if (!Var || !Epsilon)
      continue;
    const Op *Square = M.producer(Var->Inputs[0], OpKind::Pow);
    if (!Square || Square->Inputs[0] != Sub->Outputs[0] ||
        !near(M.scalar(Square->Inputs[1]), 2.0))
      continue;
    unsigned Rank = G.tensor(X).Type.rank();
    auto Axis = trailingAxes(Mean->Attrs.getInts("axes"), Rank);
    if (!Axis || Var->Attrs.getInts("axes") != Mean->Attrs.getInts("axes") ||
        !Mean->Attrs.getInt("keepdims", 1) || !Var->Attrs.getInt("keepdims", 1))
      continue;
    // Sub's result feeds exactly Pow and Div; the rest are single-use.
    if (M.Consumers[Sub->Outputs[0]].size() != 2 ||
        M.IsOutput.count(Sub->Outputs[0]) || !M.singleUse(Mean->Outputs[0]) ||
        !M.singleUse(Square->Outputs[0]) || !M.singleUse(Var->Outputs[0]) ||
        !M.singleUse(AddEps->Outputs[0]) || !M.singleUse(Sqrt->Outputs[0]))
      continue;

    Shape Normalized(G.tensor(X).Type.Dims.begin() + *Axis,
                     G.tensor(X).Type.Dims.end());
    TensorId Result = Div.Outputs[0], Scale = NoTensor, Bias = NoTensor;
    auto IsAffine = [&](TensorId T) {
      const Tensor &W = G.tensor(T);
      return W.Role != TensorRole::Activation && W.Role != TensorRole::Input &&
             W.Type.Dims == Normalized;
    };
    if (const Op *Mul = M.soleConsumer(Result, OpKind::Mul)) {
      TensorId W = Matcher::other(*Mul, Result);
      if (IsAffine(W)) {
        Scale = W;
        Result = Mul->Outputs[0];
        if (const Op *Add = M.soleConsumer(Result, OpKind::Add)) {
          TensorId Bv = Matcher::other(*Add, Result);
          if (IsAffine(Bv)) {
            Bias = Bv;
            Result = Add->Outputs[0];
          }
        }
      }
    }
    // A constant that broadcasts to a higher rank (an epsilon of shape
    // [1, 1, 1]) gives the chain another type than LayerNorm's.
    if (!(G.tensor(Result).Type == G.tensor(X).Type))
      continue;
    if (Scale == NoTensor) {
      TensorType Ones{G.tensor(X).Type.Type, Normalized};
      std::vector<char> Bytes(Ones.byteSize());
      if (Ones.Type != DType::Float32)
        continue;
      for (int64_t I = 0; I < Ones.numElements(); ++I) {
        float One = 1.0f;
        std::memcpy(Bytes.data() + I * sizeof One, &One, sizeof One);
      }
      Scale = G.addTensor(Div.Name + "/ones", Ones, TensorRole::Constant,
                          TensorData::owned(std::move(Bytes)));
    }
    Attributes Attrs;
    Attrs.set("axis", *Axis);
    Attrs.set("epsilon", *Epsilon);
    llvm::SmallVector<TensorId, 3> Inputs{X, Scale};
    if (Bias != NoTensor)
      Inputs.push_back(Bias);
    // The result keeps its name: a graph output is read back by it.
    std::string Name = G.op(Id).Name;
    auto Norm = G.addOp(OpKind::LayerNorm, Name + "/layernorm", Inputs,
                        std::move(Attrs), {G.tensor(Result).Name});
    if (!Norm) {
      llvm::consumeError(Norm.takeError());
      continue;
    }
    G.replaceAllUses(Result, G.op(*Norm).Outputs[0]);
    Fresh.reset();
    ++Fused;
  }
  return Fused;
}

unsigned fuseGelu(Graph &G) {
  unsigned Fused = 0;
  size_t Count = G.numOps();
  const double Sqrt2 = std::sqrt(2.0);
  std::optional<Matcher> Fresh;
  for (OpId Id = 0; Id < Count; ++Id) {
    if (!Fresh)
      Fresh.emplace(G);
    Matcher &M = *Fresh;
    const Op &Erf = G.op(Id);
    if (Erf.Kind != OpKind::Erf)
      continue;
    // erf's argument: x / sqrt(2) or x * (1 / sqrt(2)).
    TensorId X = NoTensor;
    const Op *Scale = M.producer(Erf.Inputs[0], OpKind::Div);
    if (Scale && near(M.scalar(Scale->Inputs[1]), Sqrt2)) {
      X = Scale->Inputs[0];
    } else if ((Scale = M.producer(Erf.Inputs[0], OpKind::Mul))) {
      if (near(M.scalar(Scale->Inputs[1]), 1 / Sqrt2))
        X = Scale->Inputs[0];
      else if (near(M.scalar(Scale->Inputs[0]), 1 / Sqrt2))
        X = Scale->Inputs[1];
    }
    if (X == NoTensor || !M.singleUse(Scale->Outputs[0]))
      continue;
    const Op *AddOne = M.soleConsumer(Erf.Outputs[0], OpKind::Add);
    if (!AddOne ||
        !near(M.scalar(Matcher::other(*AddOne, Erf.Outputs[0])), 1.0))
      continue;
    const Op *Mul1 = M.soleConsumer(AddOne->Outputs[0], OpKind::Mul);
    if (!Mul1)
      continue;
    TensorId Partner = Matcher::other(*Mul1, AddOne->Outputs[0]);
    TensorId Result = NoTensor;
    if (Partner == X) {
      // (x * (1 + erf)) * 0.5
      const Op *Half = M.soleConsumer(Mul1->Outputs[0], OpKind::Mul);
      if (Half && near(M.scalar(Matcher::other(*Half, Mul1->Outputs[0])), 0.5))
        Result = Half->Outputs[0];
    } else if (const Op *HalfX = M.producer(Partner, OpKind::Mul)) {
      // (x * 0.5) * (1 + erf)
      if (M.singleUse(Partner) && Matcher::other(*HalfX, X) != NoTensor &&
          near(M.scalar(Matcher::other(*HalfX, X)), 0.5))
        Result = Mul1->Outputs[0];
    } else if (near(M.scalar(Partner), 0.5)) {
      // ((1 + erf) * 0.5) * x
      const Op *TimesX = M.soleConsumer(Mul1->Outputs[0], OpKind::Mul);
      if (TimesX && Matcher::other(*TimesX, Mul1->Outputs[0]) == X)
        Result = TimesX->Outputs[0];
    }
    // Not where a constant broadcasts to a higher rank (0.5 of shape
    // [1, 1, 1]): Gelu's result has x's type.
    if (Result == NoTensor || !(G.tensor(Result).Type == G.tensor(X).Type))
      continue;
    Attributes Attrs;
    Attrs.set("approximate", std::string("none"));
    // The result keeps its name: a graph output is read back by it.
    auto Gelu = G.addOp(OpKind::Gelu, Erf.Name + "/gelu", {X}, std::move(Attrs),
                        {G.tensor(Result).Name});
    if (!Gelu) {
      llvm::consumeError(Gelu.takeError());
      continue;
    }
    G.replaceAllUses(Result, G.op(*Gelu).Outputs[0]);
    Fresh.reset();
    ++Fused;
  }
  return Fused;
}

unsigned fusePatterns(Graph &G) {
  unsigned Fused = fuseLayerNorm(G) + fuseGelu(G);
  if (Fused)
    G.compact();
  return Fused;
}

} // namespace onnx2soap::ir
