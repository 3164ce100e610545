//===- ir/ops/Elementwise.cpp - Elementwise op kinds ----------------------===//
//
// Unary activations and math, Cast, Dropout, and the broadcasting binary
// (and ternary Where) ops. All are splittable along every output dim; a
// broadcast input needs the matching sub-box, or [0,1) on broadcast dims.
//
// Attributes: LeakyRelu and Elu `alpha`; HardSigmoid `alpha`, `beta`; Clip
// `min`, `max` (each absent when unbounded); Gelu `approximate` ("none" |
// "tanh"); Cast `to` (a DType name); Dropout `ratio`, `training` (0/1),
// `seed`.
//
//===----------------------------------------------------------------------===//
#include "ir/ops/OpHelpers.h"

namespace onnx2soap::ir {
using namespace ops;

static llvm::Expected<OutputTypes> sameAsInput(const Attributes &,
                                               InputTypes In) {
  return OutputTypes{*In[0]};
}

static llvm::Expected<OutputTypes> floatUnary(const Attributes &,
                                              InputTypes In) {
  if (!isFloatingPoint(In[0]->Type))
    return fail("expects a floating-point input, got {0}",
                dtypeName(In[0]->Type));
  return OutputTypes{*In[0]};
}

template <int Forward, int Backward>
static OpCost unaryCost(const Graph &G, const Op &O) {
  return elementwiseCost(G, O, Forward, Backward);
}

/// A unary elementwise kind costing Forward / Backward FLOPs per element.
template <int Forward, int Backward>
static OpKindInfo unaryInfo(OpKind Kind, bool FloatOnly = true) {
  OpKindInfo I;
  I.Kind = Kind;
  I.MinInputs = I.MaxInputs = 1;
  I.InferTypes = FloatOnly ? floatUnary : sameAsInput;
  I.Cost = unaryCost<Forward, Backward>;
  I.Parallel = allAttribute;
  I.InputRegion = sameRegion;
  return I;
}

#define UNARY_KIND(Name, Fwd, Bwd, FloatOnly)                                  \
  const OpKindInfo &info##Name() {                                             \
    static const OpKindInfo Info =                                             \
        unaryInfo<Fwd, Bwd>(OpKind::Name, FloatOnly);                          \
    return Info;                                                               \
  }

// FLOPs per element are rough instruction counts of the usual kernels; the
// calibrated profiles of the cost model replace them with measurements.
UNARY_KIND(Relu, 1, 1, false)
UNARY_KIND(LeakyRelu, 2, 2, true)
UNARY_KIND(Sigmoid, 4, 3, true)
UNARY_KIND(Tanh, 6, 3, true)
UNARY_KIND(Erf, 12, 6, true)
UNARY_KIND(Gelu, 16, 20, true)
UNARY_KIND(Sqrt, 4, 2, true)
UNARY_KIND(Exp, 8, 1, true)
UNARY_KIND(Log, 8, 1, true)
UNARY_KIND(Neg, 1, 1, false)
UNARY_KIND(Abs, 1, 1, false)
UNARY_KIND(Reciprocal, 1, 2, true)
UNARY_KIND(HardSigmoid, 4, 2, true)
UNARY_KIND(HardSwish, 5, 4, true)
UNARY_KIND(Elu, 8, 8, true)
UNARY_KIND(Softplus, 16, 8, true)
UNARY_KIND(Sin, 12, 12, true)
UNARY_KIND(Cos, 12, 12, true)
UNARY_KIND(Floor, 1, 0, true)
UNARY_KIND(Ceil, 1, 0, true)
UNARY_KIND(Round, 1, 0, true)
#undef UNARY_KIND

static llvm::Expected<OutputTypes> inferClip(const Attributes &,
                                             InputTypes In) {
  if (In[0]->Type == DType::Bool)
    return fail("Clip expects a number, got bool");
  return OutputTypes{*In[0]};
}

/// Clip runs on integers too (index arithmetic); only floats carry gradients.
const OpKindInfo &infoClip() {
  static const OpKindInfo Info = [] {
    OpKindInfo I = unaryInfo<2, 1>(OpKind::Clip, false);
    I.InferTypes = inferClip;
    return I;
  }();
  return Info;
}

static llvm::Expected<OutputTypes> inferNot(const Attributes &, InputTypes In) {
  if (In[0]->Type != DType::Bool)
    return fail("Not expects a bool input, got {0}", dtypeName(In[0]->Type));
  return OutputTypes{*In[0]};
}

const OpKindInfo &infoNot() {
  static const OpKindInfo Info = [] {
    OpKindInfo I = unaryInfo<1, 0>(OpKind::Not, false);
    I.InferTypes = inferNot;
    return I;
  }();
  return Info;
}

static llvm::Expected<OutputTypes> inferCast(const Attributes &Attrs,
                                             InputTypes In) {
  std::optional<DType> To = parseDType(Attrs.getString("to"));
  if (!To)
    return fail("Cast has no valid 'to' type");
  return OutputTypes{TensorType{*To, In[0]->Dims}};
}

const OpKindInfo &infoCast() {
  static const OpKindInfo Info = [] {
    OpKindInfo I = unaryInfo<1, 1>(OpKind::Cast, false);
    I.InferTypes = inferCast;
    return I;
  }();
  return Info;
}

static llvm::Expected<OutputTypes> inferDropout(const Attributes &Attrs,
                                                InputTypes In) {
  double Ratio = Attrs.getFloat("ratio", 0.5);
  if (!(Ratio >= 0.0 && Ratio < 1.0))
    return fail("Dropout ratio {0} is outside [0, 1)", Ratio);
  if (!isFloatingPoint(In[0]->Type))
    return fail("expects a floating-point input, got {0}",
                dtypeName(In[0]->Type));
  return OutputTypes{*In[0], TensorType{DType::Bool, In[0]->Dims}};
}

const OpKindInfo &infoDropout() {
  static const OpKindInfo Info = [] {
    OpKindInfo I = unaryInfo<2, 1>(OpKind::Dropout);
    I.InferTypes = inferDropout;
    return I;
  }();
  return Info;
}

//===-- Broadcasting n-ary ops --------------------------------------------===//

enum class ResultType { First, Bool };

template <ResultType Result, bool SameTypes>
static llvm::Expected<OutputTypes> inferBroadcast(const Attributes &,
                                                  InputTypes In) {
  llvm::SmallVector<const Shape *, 3> Shapes;
  for (const TensorType *T : In)
    Shapes.push_back(&T->Dims);
  if (SameTypes)
    for (const TensorType *T : In)
      if (T->Type != In[0]->Type)
        return fail("input types differ: {0} and {1}", dtypeName(In[0]->Type),
                    dtypeName(T->Type));
  std::optional<Shape> Out = broadcastShapes(Shapes);
  if (!Out) {
    std::string List;
    for (const Shape *S : Shapes)
      List += (List.empty() ? "" : " and ") + formatShape(*S);
    return fail("shapes {0} do not broadcast", List);
  }
  return OutputTypes{
      TensorType{Result == ResultType::Bool ? DType::Bool : In[0]->Type, *Out}};
}

template <int Forward, int Backward>
static OpKindInfo broadcastInfo(
    OpKind Kind, unsigned MaxInputs,
    llvm::Expected<OutputTypes> (*Infer)(const Attributes &, InputTypes)) {
  OpKindInfo I;
  I.Kind = Kind;
  I.MinInputs = Kind == OpKind::Where ? 3 : (MaxInputs > 2 ? 1 : 2);
  I.MaxInputs = MaxInputs;
  I.InferTypes = Infer;
  I.Cost = unaryCost<Forward, Backward>;
  I.Parallel = allAttribute;
  I.InputRegion = sameRegion;
  return I;
}

#define BROADCAST_KIND(Name, Fwd, Bwd, MaxIn, Result, Same)                    \
  const OpKindInfo &info##Name() {                                             \
    static const OpKindInfo Info = broadcastInfo<Fwd, Bwd>(                    \
        OpKind::Name, MaxIn, inferBroadcast<ResultType::Result, Same>);        \
    return Info;                                                               \
  }

BROADCAST_KIND(Add, 1, 1, 2, First, true)
BROADCAST_KIND(Sub, 1, 1, 2, First, true)
BROADCAST_KIND(Mul, 1, 2, 2, First, true)
BROADCAST_KIND(Div, 1, 3, 2, First, true)
// Pow allows an exponent of another type (ONNX's T1/T2).
BROADCAST_KIND(Pow, 10, 12, 2, First, false)
BROADCAST_KIND(Max, 1, 1, 1024, First, true)
BROADCAST_KIND(Min, 1, 1, 1024, First, true)
BROADCAST_KIND(Equal, 1, 0, 2, Bool, true)
BROADCAST_KIND(Less, 1, 0, 2, Bool, true)
BROADCAST_KIND(Greater, 1, 0, 2, Bool, true)
#undef BROADCAST_KIND

static llvm::Expected<OutputTypes> inferWhere(const Attributes &Attrs,
                                              InputTypes In) {
  if (In[0]->Type != DType::Bool)
    return fail("Where condition must be bool, got {0}",
                dtypeName(In[0]->Type));
  if (In[1]->Type != In[2]->Type)
    return fail("Where branches differ in type: {0} and {1}",
                dtypeName(In[1]->Type), dtypeName(In[2]->Type));
  auto Out = inferBroadcast<ResultType::First, false>(Attrs, In);
  if (!Out)
    return Out.takeError();
  (*Out)[0].Type = In[1]->Type;
  return Out;
}

const OpKindInfo &infoWhere() {
  static const OpKindInfo Info = [] {
    OpKindInfo I = broadcastInfo<1, 1>(OpKind::Where, 3, inferWhere);
    I.NoGradInputs = 0b1; // the condition
    return I;
  }();
  return Info;
}

} // namespace onnx2soap::ir
