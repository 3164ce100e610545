//===- tests/runtime_lib/BroadcastTest.cpp - Broadcasting CPU kernels -----===//
//
// The binary and variadic elementwise kinds against reference broadcast
// loops (in double), their gradients reduced over the broadcast dims (f32,
// relative tolerance 1e-2; inputs kept away from ties), integer and mixed
// exponent types, and broadcast errors naming the op.
//
//===----------------------------------------------------------------------===//
#include "ElementwiseTestUtil.h"
#include "runtime_lib/Error.h"

using namespace onnx2soap::rt;
using namespace onnx2soap::rt::test;

namespace {

//===-- Broadcasting ------------------------------------------------------===//

struct BinaryCase {
  OpKind Kind;
  double (*Reference)(double, double);
};

std::vector<BinaryCase> arithmeticCases() {
  return {{OpKind::Add, [](double A, double B) { return A + B; }},
          {OpKind::Sub, [](double A, double B) { return A - B; }},
          {OpKind::Mul, [](double A, double B) { return A * B; }},
          {OpKind::Div, [](double A, double B) { return A / B; }},
          {OpKind::Pow, [](double A, double B) { return std::pow(A, B); }}};
}

/// Shape pairs and their broadcast result.
struct ShapeCase {
  std::vector<int64_t> A, B, Out;
};

std::vector<ShapeCase> shapeCases() {
  return {{{2, 3, 4}, {2, 3, 4}, {2, 3, 4}},
          {{2, 3, 4}, {3, 1}, {2, 3, 4}},
          {{4}, {2, 1, 4}, {2, 1, 4}},
          {{}, {2, 3}, {2, 3}},
          {{2, 1, 3, 1}, {1, 4, 1, 5}, {2, 4, 3, 5}},
          {{1, 2, 1, 1, 2, 1, 1, 2},
           {2, 1, 2, 1, 1, 1, 2, 1},
           {2, 2, 2, 1, 2, 1, 2, 2}}};
}

TEST_F(ElementwiseTest, ArithmeticForwardBroadcasts) {
  for (const BinaryCase &C : arithmeticCases())
    for (const ShapeCase &S : shapeCases()) {
      HostTensor A = f32(S.A), Bt = f32(S.B), Y = f32(S.Out),
                 Expected = f32(S.Out);
      randomize(A, Rng, 0.5, 2); // positive: Pow and Div stay finite
      randomize(Bt, Rng, 0.5, 2);
      runForward(*B, C.Kind, noAttrs(), {&A, &Bt}, {&Y});
      referenceBroadcast({&A, &Bt}, Expected,
                         [&](const std::vector<double> &V) {
                           return C.Reference(V[0], V[1]);
                         });
      SCOPED_TRACE(std::string(opKindName(C.Kind)) + " rank " +
                   std::to_string(S.Out.size()));
      expectClose(Y, Expected, 1e-6);
    }
}

TEST_F(ElementwiseTest, ArithmeticGradientsReduceOverBroadcastDims) {
  for (const BinaryCase &C : arithmeticCases())
    for (const ShapeCase &S : shapeCases()) {
      HostTensor A = f32(S.A), Bt = f32(S.B);
      randomize(A, Rng, 0.5, 2);
      randomize(Bt, Rng, 0.5, 2);
      SCOPED_TRACE(std::string(opKindName(C.Kind)) + " rank " +
                   std::to_string(S.Out.size()));
      gradCheck(*B, C.Kind, noAttrs(), {&A, &Bt}, {f32(S.Out)}, {0, 1}, 1e-3,
                1e-2);
    }
}

TEST_F(ElementwiseTest, ArithmeticOnIntegers) {
  HostTensor A = i64({2, 3}, {1, 2, 3, 4, 5, 6}), Bt = i64({3}, {10, -2, 4}),
             Y = i64({2, 3});
  runForward(*B, OpKind::Mul, noAttrs(), {&A, &Bt}, {&Y});
  EXPECT_EQ(Y.at(0), 10);
  EXPECT_EQ(Y.at(4), -10);
  runForward(*B, OpKind::Div, noAttrs(), {&A, &Bt}, {&Y});
  EXPECT_EQ(Y.at(1), -1); // truncation toward zero
  EXPECT_EQ(Y.at(5), 1);
  HostTensor A32(DType::Int32, {2}), B32(DType::Int32, {1}),
      Y32(DType::Int32, {2});
  A32.set(0, 7);
  A32.set(1, -7);
  B32.set(0, 3);
  runForward(*B, OpKind::Sub, noAttrs(), {&A32, &B32}, {&Y32});
  EXPECT_EQ(Y32.at(0), 4);
  EXPECT_EQ(Y32.at(1), -10);
  HostTensor Zero = i64({1}, {0});
  EXPECT_THROW(runForward(*B, OpKind::Div, noAttrs(), {&A, &Zero}, {&Y}),
               RuntimeError);
}

TEST_F(ElementwiseTest, PowWithOtherExponentTypes) {
  HostTensor A = f32({2, 2}, {1.5, -2, 3, 0.5}), E = i64({2}, {2, 3}),
             Y = f32({2, 2});
  runForward(*B, OpKind::Pow, noAttrs(), {&A, &E}, {&Y});
  EXPECT_FLOAT_EQ(Y.at(0), 2.25);
  EXPECT_FLOAT_EQ(Y.at(1), -8);
  EXPECT_FLOAT_EQ(Y.at(2), 9);
  EXPECT_FLOAT_EQ(Y.at(3), 0.125);
  gradCheck(*B, OpKind::Pow, noAttrs(), {&A, &E}, {f32({2, 2})}, {0}, 1e-3,
            1e-2);
  HostTensor IntBase = i64({3}, {2, 3, -4}), Y64 = i64({3});
  HostTensor FloatExp = f32({1}, {2});
  runForward(*B, OpKind::Pow, noAttrs(), {&IntBase, &FloatExp}, {&Y64});
  EXPECT_EQ(Y64.at(2), 16);
}

TEST_F(ElementwiseTest, MaxMinVariadicForward) {
  HostTensor A = f32({2, 3}, {1, 5, -2, 0, 7, 3}), Bt = f32({3}, {2, 2, 2}),
             C = f32({2, 1}, {-1, 6}), Y = f32({2, 3});
  runForward(*B, OpKind::Max, noAttrs(), {&A, &Bt, &C}, {&Y});
  std::vector<double> Max = {2, 5, 2, 6, 7, 6};
  for (int I = 0; I < 6; ++I)
    EXPECT_EQ(Y.at(I), Max[I]) << I;
  runForward(*B, OpKind::Min, noAttrs(), {&A, &Bt, &C}, {&Y});
  std::vector<double> Min = {-1, -1, -2, 0, 2, 2};
  for (int I = 0; I < 6; ++I)
    EXPECT_EQ(Y.at(I), Min[I]) << I;
  HostTensor One = f32({2, 3});
  runForward(*B, OpKind::Max, noAttrs(), {&A}, {&One});
  EXPECT_EQ(One.Bytes, A.Bytes);
  HostTensor I1 = i64({2}, {3, -4}), I2 = i64({2}, {1, 9}), IY = i64({2});
  runForward(*B, OpKind::Min, noAttrs(), {&I1, &I2}, {&IY});
  EXPECT_EQ(IY.at(0), 1);
  EXPECT_EQ(IY.at(1), -4);
  HostTensor N1 = f32({1}, {NAN}), N2 = f32({1}, {1}), NY = f32({1});
  runForward(*B, OpKind::Max, noAttrs(), {&N2, &N1}, {&NY});
  EXPECT_TRUE(std::isnan(NY.at(0)));
}

TEST_F(ElementwiseTest, MaxMinGradients) {
  // Levels 0.2 apart (A even tenths, B odd tenths, C shifted by 0.05): no
  // two candidates within finite-difference reach of each other.
  HostTensor A = f32({2, 3}), Bt = f32({3}), C = f32({2, 1});
  for (int I = 0; I < 6; ++I)
    A.set(I, 0.2 * ((I * 7) % 6) - 0.5);
  for (int I = 0; I < 3; ++I)
    Bt.set(I, 0.2 * ((I * 2) % 3) - 0.4);
  C.set(0, 0.05);
  C.set(1, -0.35);
  for (OpKind K : {OpKind::Max, OpKind::Min}) {
    SCOPED_TRACE(opKindName(K));
    gradCheck(*B, K, noAttrs(), {&A, &Bt, &C}, {f32({2, 3})}, {0, 1, 2}, 1e-3,
              1e-2);
  }
}

TEST_F(ElementwiseTest, MaxTiesSplitTheGradient) {
  HostTensor A = f32({3}, {1, 2, 3}), Bt = f32({3}, {1, 0, 3}),
             C = f32({3}, {1, 0, 0}), Y = f32({3}), DY = f32({3}, {6, 6, 6}),
             DA = f32({3}), DB = f32({3}), DC = f32({3});
  OpAttrs Attrs;
  OpCall Call{OpKind::Max, Attrs, "test", {A.view(), Bt.view(), C.view()},
              {Y.view()},  1};
  B->forward(Call);
  B->backward(Call, {DY.view()}, {DA.view(), DB.view(), DC.view()});
  EXPECT_EQ(DA.at(0), 2); // three-way tie: a third each
  EXPECT_EQ(DB.at(0), 2);
  EXPECT_EQ(DC.at(0), 2);
  EXPECT_EQ(DA.at(1), 6);
  EXPECT_EQ(DB.at(1), 0);
  EXPECT_EQ(DA.at(2), 3); // two-way tie: half each, as torch.maximum
  EXPECT_EQ(DB.at(2), 3);
  EXPECT_EQ(DC.at(2), 0);
}

TEST_F(ElementwiseTest, ComparisonsBroadcast) {
  struct Case {
    OpKind Kind;
    bool (*Reference)(double, double);
  };
  std::vector<Case> Cases = {
      {OpKind::Equal, [](double A, double B) { return A == B; }},
      {OpKind::Less, [](double A, double B) { return A < B; }},
      {OpKind::Greater, [](double A, double B) { return A > B; }}};
  for (const Case &C : Cases)
    for (DType Type : {DType::Float32, DType::Int64, DType::Int32}) {
      HostTensor A(Type, {2, 3}), Bt(Type, {3}), Y(DType::Bool, {2, 3}),
          Expected(DType::Bool, {2, 3});
      for (int I = 0; I < 6; ++I)
        A.set(I, I % 3 - 1);
      for (int I = 0; I < 3; ++I)
        Bt.set(I, 1 - I);
      runForward(*B, C.Kind, noAttrs(), {&A, &Bt}, {&Y});
      referenceBroadcast({&A, &Bt}, Expected,
                         [&](const std::vector<double> &V) {
                           return C.Reference(V[0], V[1]) ? 1.0 : 0.0;
                         });
      SCOPED_TRACE(std::string(opKindName(C.Kind)) + " " + dtypeName(Type));
      EXPECT_EQ(Y.Bytes, Expected.Bytes);
    }
  HostTensor BA(DType::Bool, {2}), BB(DType::Bool, {2}), BY(DType::Bool, {2});
  BA.set(0, 1);
  BB.set(0, 1);
  BB.set(1, 1);
  runForward(*B, OpKind::Equal, noAttrs(), {&BA, &BB}, {&BY});
  EXPECT_EQ(BY.at(0), 1);
  EXPECT_EQ(BY.at(1), 0);
}

TEST_F(ElementwiseTest, WhereForwardAndGradients) {
  HostTensor Cond(DType::Bool, {2, 1, 3}), X = f32({4, 1}), Z = f32({3}),
                                           Y = f32({2, 4, 3}),
                                           Expected = f32({2, 4, 3});
  for (int I = 0; I < 6; ++I)
    Cond.set(I, (I * 5) % 3 == 0);
  randomize(X, Rng);
  randomize(Z, Rng);
  runForward(*B, OpKind::Where, noAttrs(), {&Cond, &X, &Z}, {&Y});
  referenceBroadcast(
      {&Cond, &X, &Z}, Expected,
      [](const std::vector<double> &V) { return V[0] != 0 ? V[1] : V[2]; });
  expectClose(Y, Expected, 0);
  gradCheck(*B, OpKind::Where, noAttrs(), {&Cond, &X, &Z}, {f32({2, 4, 3})},
            {1, 2}, 1e-2, 1e-3);
  HostTensor IX = i64({2}, {1, 2}), IZ = i64({2}, {-1, -2}), IY = i64({2});
  HostTensor C2(DType::Bool, {2});
  C2.set(1, 1);
  runForward(*B, OpKind::Where, noAttrs(), {&C2, &IX, &IZ}, {&IY});
  EXPECT_EQ(IY.at(0), -1);
  EXPECT_EQ(IY.at(1), 2);
}

TEST_F(ElementwiseTest, BroadcastBackwardAccumulatesAndSkipsAbsent) {
  HostTensor A = f32({2, 3}), Bt = f32({3}), Y = f32({2, 3}), DY = f32({2, 3}),
             DB = f32({3});
  randomize(A, Rng);
  randomize(Bt, Rng);
  randomize(DY, Rng);
  OpAttrs Attrs;
  OpCall Call{OpKind::Mul, Attrs, "test", {A.view(), Bt.view()}, {Y.view()}, 1};
  B->forward(Call);
  B->backward(Call, {DY.view()}, {TensorView::absent(), DB.view()});
  HostTensor Once = DB;
  B->backward(Call, {DY.view()}, {TensorView::absent(), DB.view()});
  for (int I = 0; I < 3; ++I) {
    double Expected = 0;
    for (int R = 0; R < 2; ++R)
      Expected += DY.at(R * 3 + I) * A.at(R * 3 + I);
    EXPECT_NEAR(Once.at(I), Expected, 1e-6);
    EXPECT_FLOAT_EQ(DB.at(I), 2 * Once.at(I));
  }
}

TEST_F(ElementwiseTest, BroadcastErrorsNameTheOp) {
  HostTensor A = f32({2, 3}), Bt = f32({4}), Y = f32({2, 3});
  try {
    runForward(*B, OpKind::Add, noAttrs(), {&A, &Bt}, {&Y});
    ADD_FAILURE() << "no error";
  } catch (const RuntimeError &E) {
    EXPECT_THAT(E.what(), ::testing::HasSubstr("op 'test' (Add)"));
    EXPECT_THAT(E.what(), ::testing::HasSubstr("do not broadcast"));
  }
  HostTensor I = i64({2, 3});
  EXPECT_THROW(runForward(*B, OpKind::Add, noAttrs(), {&A, &I}, {&Y}),
               RuntimeError);
  HostTensor Bools(DType::Bool, {2, 3});
  EXPECT_THROW(
      runForward(*B, OpKind::Add, noAttrs(), {&Bools, &Bools}, {&Bools}),
      RuntimeError);
}

} // namespace
