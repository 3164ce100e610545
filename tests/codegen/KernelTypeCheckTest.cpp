//===- tests/codegen/KernelTypeCheckTest.cpp - Types the kernels refuse ---===//
//
// checkKernelTypes() refuses, naming the op, the models whose forward,
// backward or weight update the kernels cannot run, and takes the ones they
// can: it follows runtime_lib/KernelTypes.h, which KernelTypesTest holds to
// the kernels.
//
//===----------------------------------------------------------------------===//
#include "../ir/IrTestUtil.h"
#include "codegen/ProgramPlan.h"

using namespace onnx2soap;
using namespace onnx2soap::ir;
using namespace onnx2soap::ir::test;

namespace {

TensorType typed(DType Type, std::initializer_list<int64_t> Dims) {
  return TensorType{Type, Shape(Dims)};
}

std::string errorOf(llvm::Error E) {
  return E ? llvm::toString(std::move(E)) : std::string();
}

/// x (of Type) -> Kind -> output.
Graph oneOp(OpKind Kind, DType Type, Attributes A = {}) {
  Graph G;
  TensorId X = G.addTensor("x", typed(Type, {2, 3}), TensorRole::Input);
  G.addInput(X);
  TensorId Y = add(G, Kind, {X}, std::move(A), "the_op");
  if (Y != NoTensor)
    G.addOutput(Y);
  return G;
}

TEST(KernelTypeCheck, RefusesAForwardNoKernelTakesNamingTheOp) {
  std::string Why =
      errorOf(codegen::checkKernelTypes(oneOp(OpKind::Relu, DType::Float16)));
  EXPECT_THAT(Why, ::testing::HasSubstr("op 'the_op' (Relu)"));
  EXPECT_THAT(Why, ::testing::HasSubstr("no kernel takes f16 operands (the "
                                        "kernels take f32, f64, i32 or i64)"));
  EXPECT_THAT(Why, ::testing::HasSubstr("export the model in float32"));
  Why = errorOf(codegen::checkKernelTypes(oneOp(OpKind::Neg, DType::Int8)));
  EXPECT_THAT(Why, ::testing::HasSubstr("no kernel takes i8 operands"));
  EXPECT_THAT(Why, ::testing::Not(::testing::HasSubstr("float32")));
  Why = errorOf(
      codegen::checkKernelTypes(oneOp(OpKind::Sigmoid, DType::BFloat16)));
  EXPECT_THAT(Why, ::testing::HasSubstr("(the kernels take f32 or f64)"));
}

TEST(KernelTypeCheck, TakesWhatTheKernelsTake) {
  for (DType Type :
       {DType::Float32, DType::Float64, DType::Int32, DType::Int64})
    EXPECT_EQ(errorOf(codegen::checkKernelTypes(oneOp(OpKind::Relu, Type))),
              "");
  for (DType Type : {DType::Float16, DType::Int8, DType::Bool})
    EXPECT_EQ(errorOf(codegen::checkKernelTypes(oneOp(
                  OpKind::Transpose, Type, attrs({{"perm", ints({1, 0})}})))),
              "");
}

// Pow's exponent may have a type of its own; the kernels take four.
TEST(KernelTypeCheck, PowsExponentHasTypesOfItsOwn) {
  for (DType Exponent : {DType::Int64, DType::Float16}) {
    Graph G;
    TensorId X =
        G.addTensor("x", typed(DType::Float32, {2, 3}), TensorRole::Input);
    TensorId E = G.addTensor("e", typed(Exponent, {}), TensorRole::Input);
    G.addInput(X);
    G.addInput(E);
    G.addOutput(add(G, OpKind::Pow, {X, E}, {}, "power"));
    std::string Why = errorOf(codegen::checkKernelTypes(G));
    if (Exponent == DType::Int64)
      EXPECT_EQ(Why, "");
    else
      EXPECT_THAT(Why,
                  ::testing::HasSubstr(
                      "op 'power' (Pow): no kernel takes input 1 of type "
                      "f16 (the kernels take f32, f64, i32 or i64 there)"));
  }
}

TEST(KernelTypeCheck, WhereIsTypedByItsDataNotItsCondition) {
  for (DType Type : {DType::Float16, DType::Float32}) {
    Graph G;
    TensorId C =
        G.addTensor("c", typed(DType::Bool, {2, 3}), TensorRole::Input);
    TensorId A = G.addTensor("a", typed(Type, {2, 3}), TensorRole::Input);
    G.addInput(C);
    G.addInput(A);
    TensorId Y = add(G, OpKind::Where, {C, A, A}, {}, "pick");
    G.addOutput(add(G, OpKind::Relu, {Y}, {}, "after"));
    std::string Why = errorOf(codegen::checkKernelTypes(G));
    if (Type == DType::Float32)
      EXPECT_EQ(Why, "");
    else
      EXPECT_THAT(Why, ::testing::HasSubstr("op 'after' (Relu): no kernel "
                                            "takes f16"));
  }
}

/// w (a parameter of WeightType) -> Cast to Mid -> Transpose -> Cast to
/// f32 -> Add x: a training step with a loss over f32.
TrainingGraph castChain(DType WeightType, DType Mid) {
  Graph G;
  TensorId X = G.addTensor("x", f32({3, 2}), TensorRole::Input);
  G.addInput(X);
  G.tensor(X).BatchDim = 0;
  TensorId W =
      G.addTensor("w", typed(WeightType, {2, 3}), TensorRole::Parameter);
  TensorId Down = add(G, OpKind::Cast, {W},
                      attrs({{"to", std::string(dtypeName(Mid))}}), "down");
  TensorId T = add(G, OpKind::Transpose, {Down},
                   attrs({{"perm", ints({1, 0})}}), "flip");
  TensorId Up =
      add(G, OpKind::Cast, {T}, attrs({{"to", std::string("f32")}}), "up");
  G.addOutput(add(G, OpKind::Add, {X, Up}, {}, "sum"));
  auto Training = deriveTraining(std::move(G), LossKind::MeanSquaredError);
  EXPECT_TRUE(static_cast<bool>(Training))
      << llvm::toString(Training.takeError());
  return std::move(*Training);
}

TEST(KernelTypeCheck, TrainingAlsoNeedsTheGradientKernels) {
  TrainingGraph T = castChain(DType::Float32, DType::Float16);
  // The forward alone runs: Transpose moves f16 elements by their size.
  EXPECT_EQ(errorOf(codegen::checkKernelTypes(T.G)), "");
  EXPECT_THAT(errorOf(codegen::checkKernelTypes(T)),
              ::testing::HasSubstr("op 'flip' (Transpose): no gradient kernel "
                                   "takes f16 operands (the gradient kernels "
                                   "take f32 or f64)"));
  EXPECT_EQ(errorOf(codegen::checkKernelTypes(
                castChain(DType::Float32, DType::Float64))),
            "");
}

TEST(KernelTypeCheck, TrainingNeedsWeightsTheOptimizerUpdates) {
  EXPECT_THAT(errorOf(codegen::checkKernelTypes(
                  castChain(DType::Float16, DType::Float64))),
              ::testing::HasSubstr("weight 'w': the optimizer updates f32 or "
                                   "f64 weights, not f16; keep it fixed with "
                                   "--frozen w"));
}

} // namespace
