//===- tests/runtime_lib/ElementwiseTest.cpp - Elementwise CPU kernels ----===//
//
// Forward values of every unary op kind against reference formulas (in
// double), gradient checks of every differentiable input (f32, epsilon 1e-2
// or 1e-3, relative tolerance 1e-2; inputs kept away from kinks),
// accumulation, Cast's rounding, and Dropout's mask contract. The binary
// and variadic kinds, which broadcast, are BroadcastTest.cpp's.
//
//===----------------------------------------------------------------------===//
#include "ElementwiseTestUtil.h"
#include "runtime_lib/Error.h"
#include <limits>

using namespace onnx2soap::rt;
using namespace onnx2soap::rt::test;

namespace {

//===-- Unary -------------------------------------------------------------===//

struct UnaryCase {
  OpKind Kind;
  OpAttrs Attrs;
  double (*Reference)(double X, const OpAttrs &A);
  bool PositiveOnly;
};

double geluExact(double X, const OpAttrs &) {
  return 0.5 * X * (1 + std::erf(X / std::sqrt(2.0)));
}
double geluTanh(double X, const OpAttrs &) {
  return 0.5 * X *
         (1 + std::tanh(std::sqrt(2 / M_PI) * (X + 0.044715 * X * X * X)));
}

std::vector<UnaryCase> unaryCases() {
  OpAttrs Leaky;
  Leaky.set("alpha", 0.2);
  OpAttrs Tanh;
  Tanh.set("approximate", std::string("tanh"));
  // Inputs are 0.1 to 1.5 from zero: each Clip's one active bound and
  // HardSigmoid's steep ramp stay out of the gradient check's reach.
  OpAttrs ClipHigh, ClipLow, Steep, Elu;
  ClipHigh.set("max", 0.05);
  ClipLow.set("min", -0.05);
  ClipLow.set("max", 1.6);
  Steep.set("alpha", 20.0);
  Steep.set("beta", 0.0);
  Elu.set("alpha", 0.7);
  OpAttrs None;
  None.set("approximate", std::string("none"));
  return {
      {OpKind::Relu,
       {},
       [](double X, const OpAttrs &) { return X > 0 ? X : 0; },
       false},
      {OpKind::LeakyRelu, Leaky,
       [](double X, const OpAttrs &) { return X > 0 ? X : 0.2 * X; }, false},
      {OpKind::Sigmoid,
       {},
       [](double X, const OpAttrs &) { return 1 / (1 + std::exp(-X)); },
       false},
      {OpKind::Tanh,
       {},
       [](double X, const OpAttrs &) { return std::tanh(X); },
       false},
      {OpKind::Erf,
       {},
       [](double X, const OpAttrs &) { return std::erf(X); },
       false},
      {OpKind::Gelu, None, geluExact, false},
      {OpKind::Gelu, Tanh, geluTanh, false},
      {OpKind::Sqrt,
       {},
       [](double X, const OpAttrs &) { return std::sqrt(X); },
       true},
      {OpKind::Exp,
       {},
       [](double X, const OpAttrs &) { return std::exp(X); },
       false},
      {OpKind::Log,
       {},
       [](double X, const OpAttrs &) { return std::log(X); },
       true},
      {OpKind::Neg, {}, [](double X, const OpAttrs &) { return -X; }, false},
      {OpKind::Abs,
       {},
       [](double X, const OpAttrs &) { return std::fabs(X); },
       false},
      {OpKind::Reciprocal,
       {},
       [](double X, const OpAttrs &) { return 1 / X; },
       true},
      {OpKind::Clip, ClipHigh,
       [](double X, const OpAttrs &) { return std::min(X, 0.05); }, false},
      {OpKind::Clip, ClipLow,
       [](double X, const OpAttrs &) { return std::max(X, -0.05); }, false},
      {OpKind::HardSigmoid,
       {},
       [](double X, const OpAttrs &) { return 0.2 * X + 0.5; },
       false},
      {OpKind::HardSigmoid, Steep,
       [](double X, const OpAttrs &) { return X > 0 ? 1.0 : 0.0; }, false},
      {OpKind::HardSwish,
       {},
       [](double X, const OpAttrs &) { return X * (X + 3) / 6; },
       false},
      {OpKind::Elu, Elu,
       [](double X, const OpAttrs &) {
         return X > 0 ? X : 0.7 * (std::exp(X) - 1);
       },
       false},
      {OpKind::Softplus,
       {},
       [](double X, const OpAttrs &) { return std::log(1 + std::exp(X)); },
       false},
      {OpKind::Sin,
       {},
       [](double X, const OpAttrs &) { return std::sin(X); },
       false},
      {OpKind::Cos,
       {},
       [](double X, const OpAttrs &) { return std::cos(X); },
       false},
  };
}

TEST_F(ElementwiseTest, UnaryForwardMatchesFormulas) {
  for (const UnaryCase &C : unaryCases()) {
    HostTensor X =
        C.PositiveOnly ? f32({2, 3, 4}) : awayFromZero({2, 3, 4}, Rng);
    if (C.PositiveOnly)
      randomize(X, Rng, 0.3, 3);
    HostTensor Y = f32({2, 3, 4}), Expected = f32({2, 3, 4});
    runForward(*B, C.Kind, C.Attrs, {&X}, {&Y});
    for (int64_t I = 0; I < X.size(); ++I)
      Expected.set(I, C.Reference(X.at(I), C.Attrs));
    SCOPED_TRACE(opKindName(C.Kind));
    expectClose(Y, Expected, 1e-6);
  }
}

TEST_F(ElementwiseTest, UnaryForwardF64) {
  HostTensor X(DType::Float64, {5}), Y(DType::Float64, {5});
  for (int I = 0; I < 5; ++I)
    X.set(I, 0.5 + I);
  runForward(*B, OpKind::Log, noAttrs(), {&X}, {&Y});
  for (int I = 0; I < 5; ++I)
    EXPECT_DOUBLE_EQ(Y.at(I), std::log(0.5 + I));
}

TEST_F(ElementwiseTest, UnaryGradients) {
  // Epsilon 1e-3 on inputs at least 0.1 from a kink; tolerance 1e-2.
  for (const UnaryCase &C : unaryCases()) {
    HostTensor X = C.PositiveOnly ? f32({3, 5}) : awayFromZero({3, 5}, Rng);
    if (C.PositiveOnly)
      randomize(X, Rng, 0.5, 2);
    SCOPED_TRACE(opKindName(C.Kind));
    gradCheck(*B, C.Kind, C.Attrs, {&X}, {f32({3, 5})}, {0}, 1e-3, 1e-2);
  }
}

TEST_F(ElementwiseTest, UnaryGradientF64) {
  HostTensor X(DType::Float64, {6});
  randomize(X, Rng, 0.5, 2);
  gradCheck(*B, OpKind::Tanh, noAttrs(), {&X},
            {HostTensor(DType::Float64, {6})}, {0}, 1e-5, 1e-6);
}

// Floor, Ceil and Round (halves to even, as ONNX and PyTorch) keep NaN
// and infinities; their gradient is zero, as PyTorch's.
TEST_F(ElementwiseTest, RoundingStepsAndTheirZeroGradient) {
  const double Inf = INFINITY;
  HostTensor X = f32({9}, {-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 2.7, -Inf, NAN});
  struct {
    OpKind Kind;
    double Want[8];
  } Cases[] = {{OpKind::Floor, {-3, -2, -1, 0, 1, 2, 2, -Inf}},
               {OpKind::Ceil, {-2, -1, -0.0, 1, 2, 3, 3, -Inf}},
               {OpKind::Round, {-2, -2, -0.0, 0, 2, 2, 3, -Inf}}};
  for (const auto &C : Cases) {
    SCOPED_TRACE(opKindName(C.Kind));
    HostTensor Y = f32({9});
    runForward(*B, C.Kind, noAttrs(), {&X}, {&Y});
    for (int I = 0; I < 8; ++I)
      EXPECT_EQ(Y.at(I), C.Want[I]) << I;
    EXPECT_TRUE(std::isnan(Y.at(8)));
    HostTensor GY = f32({9}), DX = f32({9}, {1, 1, 1, 1, 1, 1, 1, 1, 1});
    for (int I = 0; I < 9; ++I)
      GY.set(I, 3);
    OpAttrs None;
    OpCall Call{C.Kind, None, "test", {X.view()}, {Y.view()}, 1};
    B->backward(Call, {GY.view()}, {DX.view()});
    for (int I = 0; I < 9; ++I)
      EXPECT_EQ(DX.at(I), 1) << "the gradient added something at " << I;
  }
}

TEST_F(ElementwiseTest, IntegerReluNegAbs) {
  HostTensor X = i64({4}, {-3, 0, 2, -1}), Y = i64({4});
  runForward(*B, OpKind::Relu, noAttrs(), {&X}, {&Y});
  EXPECT_THAT(std::vector<double>({Y.at(0), Y.at(1), Y.at(2), Y.at(3)}),
              ::testing::ElementsAre(0, 0, 2, 0));
  runForward(*B, OpKind::Abs, noAttrs(), {&X}, {&Y});
  EXPECT_EQ(Y.at(0), 3);
  EXPECT_EQ(Y.at(3), 1);
  HostTensor X32(DType::Int32, {2}), Y32(DType::Int32, {2});
  X32.set(0, 5);
  X32.set(1, -7);
  runForward(*B, OpKind::Neg, noAttrs(), {&X32}, {&Y32});
  EXPECT_EQ(Y32.at(0), -5);
  EXPECT_EQ(Y32.at(1), 7);
  // The most negative value has no positive twin: it wraps to itself, as
  // the CUDA kernel, numpy and PyTorch give (no signed overflow here).
  for (OpKind Kind : {OpKind::Neg, OpKind::Abs}) {
    X32.set(0, std::numeric_limits<int32_t>::min());
    runForward(*B, Kind, noAttrs(), {&X32}, {&Y32});
    EXPECT_EQ(Y32.data<int32_t>()[0], std::numeric_limits<int32_t>::min());
    HostTensor Min64(DType::Int64, {1}), Out64(DType::Int64, {1});
    Min64.data<int64_t>()[0] = std::numeric_limits<int64_t>::min();
    runForward(*B, Kind, noAttrs(), {&Min64}, {&Out64});
    EXPECT_EQ(Out64.data<int64_t>()[0], std::numeric_limits<int64_t>::min());
  }
}

TEST_F(ElementwiseTest, NotFlipsBools) {
  HostTensor X(DType::Bool, {3}), Y(DType::Bool, {3});
  X.set(0, 1);
  X.set(2, 1);
  runForward(*B, OpKind::Not, noAttrs(), {&X}, {&Y});
  EXPECT_EQ(Y.at(0), 0);
  EXPECT_EQ(Y.at(1), 1);
  EXPECT_EQ(Y.at(2), 0);
}

// Past the ramps that UnaryGradients keeps away from: the values and
// PyTorch's gradients there (ReLU6's, hardswish's, softplus's threshold).
TEST_F(ElementwiseTest, ActivationsAtAndPastTheirBounds) {
  struct Row {
    OpKind Kind;
    OpAttrs Attrs;
    std::vector<double> X, Y, DX;
  };
  OpAttrs Relu6;
  Relu6.set("min", 0.0);
  Relu6.set("max", 6.0);
  OpAttrs Crossed; // min > max: every value is max
  Crossed.set("min", 2.0);
  Crossed.set("max", 1.0);
  const double E1 = std::exp(-1.0);
  std::vector<Row> Rows = {
      {OpKind::Clip, Relu6, {-1, 0, 3, 6, 7}, {0, 0, 3, 6, 6}, {0, 0, 1, 0, 0}},
      {OpKind::Clip, Crossed, {0, 1.5, 3}, {1, 1, 1}, {0, 0, 0}},
      {OpKind::HardSwish, {}, {-4, -3, 3, 4}, {0, 0, 3, 4}, {0, -0.5, 1.5, 1}},
      {OpKind::HardSigmoid, {}, {-3, 3}, {0, 1}, {0, 0}},
      {OpKind::Elu, {}, {-1, 2}, {E1 - 1, 2}, {E1, 1}},
      {OpKind::Softplus, {}, {0, 25}, {std::log(2.0), 25}, {0.5, 1}},
  };
  for (const Row &R : Rows) {
    SCOPED_TRACE(opKindName(R.Kind));
    int64_t N = static_cast<int64_t>(R.X.size());
    HostTensor X = f32({N}), Y = f32({N}), DY = f32({N}), DX = f32({N});
    for (int64_t I = 0; I < N; ++I) {
      X.set(I, R.X[I]);
      DY.set(I, 1);
    }
    runForward(*B, R.Kind, R.Attrs, {&X}, {&Y});
    OpCall Call{R.Kind, R.Attrs, "test", {X.view()}, {Y.view()}, 1};
    B->backward(Call, {DY.view()}, {DX.view()});
    for (int64_t I = 0; I < N; ++I) {
      EXPECT_NEAR(Y.at(I), R.Y[I], 1e-6) << "x = " << R.X[I];
      EXPECT_NEAR(DX.at(I), R.DX[I], 1e-6) << "x = " << R.X[I];
    }
  }
}

// Clip runs on integers (index arithmetic), its bounds saturated to the
// type; unbounded sides are absent attributes.
TEST_F(ElementwiseTest, ClipOnIntegers) {
  HostTensor X = i64({4}, {-5, 0, 7, int64_t(1) << 40}), Y = i64({4});
  OpAttrs Low;
  Low.set("min", int64_t(-1));
  runForward(*B, OpKind::Clip, Low, {&X}, {&Y});
  EXPECT_EQ(Y.at(0), -1);
  EXPECT_EQ(Y.at(2), 7);
  EXPECT_EQ(Y.at(3), static_cast<double>(int64_t(1) << 40));
  HostTensor X32(DType::Int32, {2}), Y32(DType::Int32, {2});
  X32.set(0, -7);
  X32.set(1, 9);
  OpAttrs Wide;
  Wide.set("min", -(int64_t(1) << 40));
  Wide.set("max", int64_t(3));
  runForward(*B, OpKind::Clip, Wide, {&X32}, {&Y32});
  EXPECT_EQ(Y32.at(0), -7);
  EXPECT_EQ(Y32.at(1), 3);
}

TEST_F(ElementwiseTest, BackwardAccumulates) {
  HostTensor X = awayFromZero({7}, Rng), Y = f32({7}), DY = f32({7}),
             DX = f32({7});
  randomize(DY, Rng);
  runForward(*B, OpKind::Sigmoid, noAttrs(), {&X}, {&Y});
  OpAttrs A;
  OpCall Call{OpKind::Sigmoid, A, "test", {X.view()}, {Y.view()}, 1};
  B->backward(Call, {DY.view()}, {DX.view()});
  HostTensor Once = DX;
  B->backward(Call, {DY.view()}, {DX.view()});
  for (int64_t I = 0; I < 7; ++I)
    EXPECT_FLOAT_EQ(DX.at(I), 2 * Once.at(I));
  // Absent gradients are skipped.
  B->backward(Call, {DY.view()}, {TensorView::absent()});
}

TEST_F(ElementwiseTest, UnaryRejectsWrongTypes) {
  HostTensor X = i64({3}), Y = i64({3});
  EXPECT_THROW(runForward(*B, OpKind::Exp, noAttrs(), {&X}, {&Y}),
               RuntimeError);
  HostTensor F = f32({3}), G = f32({4});
  try {
    runForward(*B, OpKind::Exp, noAttrs(), {&F}, {&G});
    ADD_FAILURE() << "no error";
  } catch (const RuntimeError &E) {
    EXPECT_THAT(E.what(), ::testing::HasSubstr("op 'test' (Exp)"));
  }
}

//===-- Cast --------------------------------------------------------------===//

OpAttrs castTo(const char *Type) {
  OpAttrs A;
  A.set("to", std::string(Type));
  return A;
}

uint16_t castF32ToBits(Backend &B, float V, const char *To, DType Type) {
  HostTensor X = f32({1}, {V}), Y(Type, {1});
  runForward(B, OpKind::Cast, castTo(To), {&X}, {&Y});
  return Y.data<uint16_t>()[0];
}

TEST_F(ElementwiseTest, CastToF16RoundsToNearestEven) {
  auto H = [&](double V) {
    return castF32ToBits(*B, static_cast<float>(V), "f16", DType::Float16);
  };
  EXPECT_EQ(H(1.0), 0x3C00);
  EXPECT_EQ(H(-2.0), 0xC000);
  EXPECT_EQ(H(65504.0), 0x7BFF);
  EXPECT_EQ(H(65519.0), 0x7BFF);
  EXPECT_EQ(H(65520.0), 0x7C00); // halfway to 2^16: even is infinity
  EXPECT_EQ(H(1.0 + std::ldexp(1.0, -11)), 0x3C00);     // tie, down to even
  EXPECT_EQ(H(1.0 + 3 * std::ldexp(1.0, -11)), 0x3C02); // tie, up to even
  EXPECT_EQ(H(std::ldexp(1.0, -24)), 0x0001);           // smallest subnormal
  EXPECT_EQ(H(std::ldexp(1.0, -25)), 0x0000);           // tie to even 0
  EXPECT_EQ(H(3 * std::ldexp(1.0, -25)), 0x0002);       // tie to even 2
  EXPECT_EQ(H(std::ldexp(1.0, -14)), 0x0400);           // smallest normal
  EXPECT_EQ(H(0.1), 0x2E66);
  EXPECT_EQ(H(-0.0), 0x8000);
  EXPECT_EQ(H(INFINITY), 0x7C00);
  EXPECT_EQ(H(NAN) & 0x7C00, 0x7C00);
  EXPECT_NE(H(NAN) & 0x03FF, 0);
}

TEST_F(ElementwiseTest, CastToBF16RoundsToNearestEven) {
  auto H = [&](double V) {
    return castF32ToBits(*B, static_cast<float>(V), "bf16", DType::BFloat16);
  };
  EXPECT_EQ(H(1.0), 0x3F80);
  EXPECT_EQ(H(1.0 + std::ldexp(1.0, -8)), 0x3F80);     // tie, down to even
  EXPECT_EQ(H(1.0 + 3 * std::ldexp(1.0, -8)), 0x3F82); // tie, up to even
  EXPECT_EQ(H(1.0 + 1.5 * std::ldexp(1.0, -8)), 0x3F81);
  EXPECT_EQ(H(-3.0), 0xC040);
  EXPECT_EQ(H(3.0e38), 0x7F62);
  EXPECT_EQ(H(std::numeric_limits<float>::max()), 0x7F80); // rounds to inf
  EXPECT_EQ(H(std::ldexp(1.0, -133)), 0x0001);             // subnormal
  EXPECT_NE(H(NAN) & 0x007F, 0);
}

TEST_F(ElementwiseTest, CastHalfRoundTripAndF64Source) {
  HostTensor X(DType::Float16, {3}), Y = f32({3});
  X.data<uint16_t>()[0] = 0x3C01; // 1 + 2^-10
  X.data<uint16_t>()[1] = 0x0001; // 2^-24
  X.data<uint16_t>()[2] = 0xFC00; // -inf
  runForward(*B, OpKind::Cast, castTo("f32"), {&X}, {&Y});
  EXPECT_EQ(Y.at(0), 1.0 + std::ldexp(1.0, -10));
  EXPECT_EQ(Y.at(1), std::ldexp(1.0, -24));
  EXPECT_EQ(Y.at(2), -INFINITY);
  // A double just above an f16 tie must round up (no double rounding via f32).
  HostTensor D(DType::Float64, {1}), H(DType::Float16, {1});
  D.set(0, 1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40));
  runForward(*B, OpKind::Cast, castTo("f16"), {&D}, {&H});
  EXPECT_EQ(H.data<uint16_t>()[0], 0x3C01);
  // f16 -> bf16 directly.
  HostTensor BF(DType::BFloat16, {3});
  runForward(*B, OpKind::Cast, castTo("bf16"), {&X}, {&BF});
  EXPECT_EQ(BF.data<uint16_t>()[0], 0x3F80); // 1 + 2^-10 rounds to 1
  EXPECT_EQ(BF.data<uint16_t>()[1], 0x3380); // 2^-24 is exact
  EXPECT_EQ(BF.data<uint16_t>()[2], 0xFF80);
}

TEST_F(ElementwiseTest, CastIntegersAndBools) {
  HostTensor X = f32({6}, {-2.7, 2.7, 1e10, -1e10, NAN, 0.0}),
             Y(DType::Int32, {6});
  runForward(*B, OpKind::Cast, castTo("i32"), {&X}, {&Y});
  EXPECT_EQ(Y.at(0), -2);
  EXPECT_EQ(Y.at(1), 2);
  EXPECT_EQ(Y.at(2), 2147483647);
  EXPECT_EQ(Y.at(3), -2147483648.0);
  EXPECT_EQ(Y.at(4), 0);
  HostTensor Bools(DType::Bool, {6});
  runForward(*B, OpKind::Cast, castTo("bool"), {&X}, {&Bools});
  EXPECT_EQ(Bools.at(0), 1);
  EXPECT_EQ(Bools.at(4), 1); // NaN != 0
  EXPECT_EQ(Bools.at(5), 0);
  HostTensor Back = f32({6});
  runForward(*B, OpKind::Cast, castTo("f32"), {&Bools}, {&Back});
  EXPECT_EQ(Back.at(0), 1.0);
  EXPECT_EQ(Back.at(5), 0.0);
  HostTensor Big = i64({2}, {(int64_t(1) << 40) + 3, -5}),
             Small(DType::Int32, {2});
  runForward(*B, OpKind::Cast, castTo("i32"), {&Big}, {&Small});
  EXPECT_EQ(Small.at(0), 3); // wraps modulo 2^32
  EXPECT_EQ(Small.at(1), -5);
  HostTensor U8(DType::UInt8, {2});
  runForward(*B, OpKind::Cast, castTo("u8"), {&Big}, {&U8});
  EXPECT_EQ(U8.data<uint8_t>()[1], 251);
  HostTensor AsF64(DType::Float64, {2});
  runForward(*B, OpKind::Cast, castTo("f64"), {&Big}, {&AsF64});
  EXPECT_EQ(AsF64.at(0), double((int64_t(1) << 40) + 3));
}

TEST_F(ElementwiseTest, CastGradients) {
  HostTensor X = f32({2, 3});
  randomize(X, Rng);
  gradCheck(*B, OpKind::Cast, castTo("f64"), {&X},
            {HostTensor(DType::Float64, {2, 3})}, {0}, 1e-2, 1e-4);
  HostTensor D(DType::Float64, {4});
  randomize(D, Rng);
  gradCheck(*B, OpKind::Cast, castTo("f32"), {&D}, {f32({4})}, {0}, 1e-3, 1e-4);
  // f32 -> f16: the backward casts the gradient back.
  HostTensor Out(DType::Float16, {2, 3}), G(DType::Float16, {2, 3}),
      DX = f32({2, 3});
  for (int I = 0; I < 6; ++I)
    G.data<uint16_t>()[I] = 0x3800; // 0.5
  OpAttrs A = castTo("f16");
  OpCall Call{OpKind::Cast, A, "test", {X.view()}, {Out.view()}, 1};
  B->forward(Call);
  B->backward(Call, {G.view()}, {DX.view()});
  B->backward(Call, {G.view()}, {DX.view()});
  for (int I = 0; I < 6; ++I)
    EXPECT_EQ(DX.at(I), 1.0);
  // No gradient through an integer cast.
  HostTensor Ints(DType::Int32, {2, 3}), IntGrad(DType::Int32, {2, 3});
  HostTensor DX2 = f32({2, 3});
  OpAttrs AI = castTo("i32");
  OpCall IntCall{OpKind::Cast, AI, "test", {X.view()}, {Ints.view()}, 1};
  B->forward(IntCall);
  B->backward(IntCall, {IntGrad.view()}, {DX2.view()});
  for (int I = 0; I < 6; ++I)
    EXPECT_EQ(DX2.at(I), 0.0);
}

//===-- Dropout -----------------------------------------------------------===//

OpAttrs dropoutAttrs(double Ratio, int64_t Training, int64_t Seed) {
  OpAttrs A;
  A.set("ratio", Ratio);
  A.set("training", Training);
  A.set("seed", Seed);
  return A;
}

TEST_F(ElementwiseTest, DropoutInferenceIsIdentity) {
  HostTensor X = f32({10}), Y = f32({10}), M(DType::Bool, {10});
  randomize(X, Rng);
  runForward(*B, OpKind::Dropout, dropoutAttrs(0.5, 0, 3), {&X}, {&Y, &M});
  for (int I = 0; I < 10; ++I) {
    EXPECT_EQ(Y.at(I), X.at(I));
    EXPECT_EQ(M.at(I), 1);
  }
  gradCheck(*B, OpKind::Dropout, dropoutAttrs(0.5, 0, 3), {&X},
            {f32({10}), HostTensor(DType::Bool, {10})}, {0}, 1e-2, 1e-3);
}

TEST_F(ElementwiseTest, DropoutTrainingMaskAndScale) {
  const int64_t N = 20000;
  HostTensor X = f32({N}), Y = f32({N}), M(DType::Bool, {N});
  randomize(X, Rng, 0.5, 1.5);
  runForward(*B, OpKind::Dropout, dropoutAttrs(0.3, 1, 42), {&X}, {&Y, &M},
             /*Step=*/5);
  int64_t Kept = 0;
  for (int64_t I = 0; I < N; ++I) {
    if (M.at(I)) {
      ++Kept;
      EXPECT_FLOAT_EQ(Y.at(I), X.at(I) * static_cast<float>(1 / 0.7));
    } else {
      EXPECT_EQ(Y.at(I), 0.0);
    }
  }
  EXPECT_NEAR(double(Kept) / N, 0.7, 0.015);

  // A pure function of (seed, step, index): same call, same mask; another
  // step or seed, another mask.
  HostTensor M2(DType::Bool, {N}), Y2 = f32({N});
  runForward(*B, OpKind::Dropout, dropoutAttrs(0.3, 1, 42), {&X}, {&Y2, &M2},
             5);
  EXPECT_EQ(M.Bytes, M2.Bytes);
  runForward(*B, OpKind::Dropout, dropoutAttrs(0.3, 1, 42), {&X}, {&Y2, &M2},
             6);
  EXPECT_NE(M.Bytes, M2.Bytes);
  runForward(*B, OpKind::Dropout, dropoutAttrs(0.3, 1, 43), {&X}, {&Y2, &M2},
             5);
  EXPECT_NE(M.Bytes, M2.Bytes);
}

TEST_F(ElementwiseTest, DropoutMaskIsPinned) {
  // Golden bits of the counter-based mask (DropoutMask.h): the CUDA backend
  // must produce exactly these (computed independently in Python). Seed
  // 1234, step 3, ratio 0.5.
  HostTensor X = f32({32}), Y = f32({32}), M(DType::Bool, {32});
  runForward(*B, OpKind::Dropout, dropoutAttrs(0.5, 1, 1234), {&X}, {&Y, &M},
             3);
  std::string Bits;
  for (int I = 0; I < 32; ++I)
    Bits += M.at(I) ? '1' : '0';
  EXPECT_EQ(Bits, "10011010100010110001010001101010");
}

TEST_F(ElementwiseTest, DropoutTrainingGradientUsesMask) {
  HostTensor X = f32({4, 8});
  randomize(X, Rng);
  gradCheck(*B, OpKind::Dropout, dropoutAttrs(0.4, 1, 9), {&X},
            {f32({4, 8}), HostTensor(DType::Bool, {4, 8})}, {0}, 1e-2, 1e-3);
  // Without the mask output the backward recomputes the same mask.
  HostTensor Y = f32({4, 8}), M(DType::Bool, {4, 8}), DY = f32({4, 8}),
             WithMask = f32({4, 8}), Without = f32({4, 8});
  randomize(DY, Rng);
  OpAttrs A = dropoutAttrs(0.4, 1, 9);
  OpCall Call{OpKind::Dropout, A, "test", {X.view()}, {Y.view(), M.view()}, 2};
  B->forward(Call);
  B->backward(Call, {DY.view(), TensorView::absent()}, {WithMask.view()});
  OpCall NoMask{OpKind::Dropout, A, "test", {X.view()}, {Y.view()}, 2};
  B->backward(NoMask, {DY.view()}, {Without.view()});
  EXPECT_EQ(WithMask.Bytes, Without.Bytes);
}

} // namespace
