//===- tests/runtime_lib/RecurrentTest.cpp - LSTM, GRU and cells ----------===//
//
// Forward values against a direct double-precision transcription of the
// ONNX LSTM-14 / GRU-14 equations (both layouts, every direction, initial
// states, biases, peepholes, both linear_before_reset), cells against one
// step of a layer, and every differentiable input's gradient by central
// differences (f32: epsilon 1e-2, tolerance 1e-2 relative; f64: epsilon
// 1e-5, tolerance 1e-6).
//
//===----------------------------------------------------------------------===//
#include "KernelTestUtil.h"

using namespace onnx2soap::rt;
using namespace onnx2soap::rt::test;

namespace {

struct Config {
  bool Lstm = true;
  int64_t T = 3, B = 2, I = 3, H = 4;
  std::string Direction = "forward";
  int64_t Layout = 0;
  bool Bias = false, Initial = false, Peephole = false, SequenceLens = false;
  int64_t LinearBeforeReset = 0;
  DType Type = DType::Float32;

  int64_t directions() const { return Direction == "bidirectional" ? 2 : 1; }
  int64_t gates() const { return Lstm ? 4 : 3; }
  std::vector<int64_t> state() const {
    return Layout ? std::vector<int64_t>{B, directions(), H}
                  : std::vector<int64_t>{directions(), B, H};
  }
  std::vector<int64_t> y() const {
    return Layout ? std::vector<int64_t>{B, T, directions(), H}
                  : std::vector<int64_t>{T, directions(), B, H};
  }
  OpAttrs attrs() const {
    OpAttrs A;
    A.set("hidden_size", H);
    A.set("direction", Direction);
    A.set("layout", Layout);
    if (!Lstm)
      A.set("linear_before_reset", LinearBeforeReset);
    return A;
  }
};

/// A layer's operands in ONNX input order; absent ones are empty.
struct Operands {
  std::vector<HostTensor> In;
  std::vector<HostTensor *> pointers() {
    std::vector<HostTensor *> P;
    for (HostTensor &T : In)
      P.push_back(T.Dims.empty() ? nullptr : &T);
    return P;
  }
};

Operands makeOperands(const Config &C, unsigned Seed) {
  std::mt19937 Rng(Seed);
  int64_t D = C.directions(), GH = C.gates() * C.H;
  Operands O;
  O.In.resize(C.Lstm ? 8 : 6);
  auto Random = [&](std::vector<int64_t> Dims, double Scale) {
    HostTensor T(C.Type, std::move(Dims));
    randomize(T, Rng, -Scale, Scale);
    return T;
  };
  O.In[0] = Random(C.Layout ? std::vector<int64_t>{C.B, C.T, C.I}
                            : std::vector<int64_t>{C.T, C.B, C.I},
                   1.0);
  O.In[1] = Random({D, GH, C.I}, 0.7);
  O.In[2] = Random({D, GH, C.H}, 0.7);
  if (C.Bias)
    O.In[3] = Random({D, 2 * GH}, 0.5);
  if (C.SequenceLens) {
    O.In[4] = HostTensor(DType::Int64, {C.B});
    for (int64_t B = 0; B < C.B; ++B)
      O.In[4].set(B, double(C.T));
  }
  if (C.Initial) {
    O.In[5] = Random(C.state(), 0.8);
    if (C.Lstm)
      O.In[6] = Random(C.state(), 0.8);
  }
  if (C.Lstm && C.Peephole)
    O.In[7] = Random({D, 3 * C.H}, 0.5);
  return O;
}

std::vector<HostTensor> outputShapes(const Config &C) {
  std::vector<HostTensor> Out{HostTensor(C.Type, C.y()),
                              HostTensor(C.Type, C.state())};
  if (C.Lstm)
    Out.emplace_back(C.Type, C.state());
  return Out;
}

double sigmoid(double X) { return 1 / (1 + std::exp(-X)); }

/// The ONNX equations, element by element, in double.
std::vector<std::vector<double>> reference(const Config &C, Operands &O) {
  const int64_t D = C.directions(), T = C.T, B = C.B, I = C.I, H = C.H,
                G = C.gates();
  auto X = [&](int64_t t, int64_t b, int64_t i) {
    return O.In[0].at(C.Layout ? (b * T + t) * I + i : (t * B + b) * I + i);
  };
  auto StateIndex = [&](int64_t d, int64_t b, int64_t k) {
    return C.Layout ? (b * D + d) * H + k : (d * B + b) * H + k;
  };
  std::vector<std::vector<double>> Out(C.Lstm ? 3 : 2);
  Out[0].assign(T * D * B * H, 0);
  Out[1].assign(D * B * H, 0);
  if (C.Lstm)
    Out[2].assign(D * B * H, 0);
  for (int64_t d = 0; d < D; ++d) {
    bool Reverse = C.Direction == "reverse" || d == 1;
    auto W = [&](int64_t Row, int64_t i) {
      return O.In[1].at((d * G * H + Row) * I + i);
    };
    auto R = [&](int64_t Row, int64_t j) {
      return O.In[2].at((d * G * H + Row) * H + j);
    };
    auto Wb = [&](int64_t Row) {
      return C.Bias ? O.In[3].at(d * 2 * G * H + Row) : 0.0;
    };
    auto Rb = [&](int64_t Row) {
      return C.Bias ? O.In[3].at(d * 2 * G * H + G * H + Row) : 0.0;
    };
    auto P = [&](int64_t Row) {
      return C.Lstm && C.Peephole ? O.In[7].at(d * 3 * H + Row) : 0.0;
    };
    for (int64_t b = 0; b < B; ++b) {
      std::vector<double> h(H, 0), c(H, 0);
      if (C.Initial)
        for (int64_t k = 0; k < H; ++k) {
          h[k] = O.In[5].at(StateIndex(d, b, k));
          if (C.Lstm)
            c[k] = O.In[6].at(StateIndex(d, b, k));
        }
      for (int64_t s = 0; s < T; ++s) {
        int64_t t = Reverse ? T - 1 - s : s;
        auto XW = [&](int64_t Row) {
          double Sum = Wb(Row);
          for (int64_t i = 0; i < I; ++i)
            Sum += X(t, b, i) * W(Row, i);
          return Sum;
        };
        auto HR = [&](int64_t Row, const std::vector<double> &State) {
          double Sum = Rb(Row);
          for (int64_t j = 0; j < H; ++j)
            Sum += State[j] * R(Row, j);
          return Sum;
        };
        std::vector<double> NewH(H), NewC(H);
        if (C.Lstm) {
          for (int64_t k = 0; k < H; ++k) {
            double It = sigmoid(XW(k) + HR(k, h) + P(k) * c[k]);
            double Ft =
                sigmoid(XW(2 * H + k) + HR(2 * H + k, h) + P(2 * H + k) * c[k]);
            double Ct = std::tanh(XW(3 * H + k) + HR(3 * H + k, h));
            NewC[k] = Ft * c[k] + It * Ct;
            double Ot = sigmoid(XW(H + k) + HR(H + k, h) + P(H + k) * NewC[k]);
            NewH[k] = Ot * std::tanh(NewC[k]);
          }
        } else {
          std::vector<double> Reset(H), ResetH(H);
          for (int64_t k = 0; k < H; ++k) {
            Reset[k] = sigmoid(XW(H + k) + HR(H + k, h));
            ResetH[k] = Reset[k] * h[k];
          }
          for (int64_t k = 0; k < H; ++k) {
            double Zt = sigmoid(XW(k) + HR(k, h));
            double Ht =
                C.LinearBeforeReset
                    ? std::tanh(XW(2 * H + k) + Reset[k] * HR(2 * H + k, h))
                    : std::tanh(XW(2 * H + k) + HR(2 * H + k, ResetH));
            NewH[k] = (1 - Zt) * Ht + Zt * h[k];
          }
        }
        h = NewH;
        c = NewC;
        for (int64_t k = 0; k < H; ++k)
          Out[0][C.Layout ? ((b * T + t) * D + d) * H + k
                          : ((t * D + d) * B + b) * H + k] = h[k];
      }
      for (int64_t k = 0; k < H; ++k) {
        Out[1][StateIndex(d, b, k)] = h[k];
        if (C.Lstm)
          Out[2][StateIndex(d, b, k)] = c[k];
      }
    }
  }
  return Out;
}

void expectForwardMatches(const Config &C, double Tolerance) {
  auto Backend = createCpuBackend(1);
  Operands O = makeOperands(C, 7);
  std::vector<HostTensor> Out = outputShapes(C);
  std::vector<HostTensor *> OutPointers;
  for (HostTensor &T : Out)
    OutPointers.push_back(&T);
  runForward(*Backend, C.Lstm ? OpKind::LSTM : OpKind::GRU, C.attrs(),
             O.pointers(), OutPointers);
  std::vector<std::vector<double>> Expected = reference(C, O);
  for (size_t K = 0; K < Out.size(); ++K)
    for (int64_t E = 0; E < Out[K].size(); ++E)
      EXPECT_NEAR(Out[K].at(E), Expected[K][E], Tolerance)
          << "output " << K << " element " << E;
}

Config lstm(std::string Direction, int64_t Layout, bool Extras) {
  Config C;
  C.Direction = std::move(Direction);
  C.Layout = Layout;
  C.Bias = C.Initial = C.Peephole = Extras;
  return C;
}

Config gru(std::string Direction, int64_t Layout, int64_t LinearBeforeReset,
           bool Extras) {
  Config C = lstm(std::move(Direction), Layout, Extras);
  C.Lstm = false;
  C.Peephole = false;
  C.LinearBeforeReset = LinearBeforeReset;
  return C;
}

TEST(RecurrentLSTM, ForwardMatchesReference) {
  expectForwardMatches(lstm("forward", 0, false), 1e-5);
  expectForwardMatches(lstm("reverse", 0, true), 1e-5);
  expectForwardMatches(lstm("bidirectional", 1, true), 1e-5);
  expectForwardMatches(lstm("bidirectional", 0, true), 1e-5);
  Config Plain = lstm("bidirectional", 1, false);
  Plain.Bias = true; // bias without states or peepholes
  Plain.SequenceLens = true;
  expectForwardMatches(Plain, 1e-5);
  Config Wide = lstm("forward", 1, true);
  Wide.T = 5;
  Wide.B = 3;
  Wide.I = 7;
  Wide.H = 6;
  expectForwardMatches(Wide, 1e-5);
  Config Double = lstm("bidirectional", 1, true);
  Double.Type = DType::Float64;
  expectForwardMatches(Double, 1e-12);
}

TEST(RecurrentGRU, ForwardMatchesReference) {
  for (int64_t Lbr : {0, 1}) {
    SCOPED_TRACE(Lbr);
    expectForwardMatches(gru("forward", 0, Lbr, false), 1e-5);
    expectForwardMatches(gru("reverse", 0, Lbr, true), 1e-5);
    expectForwardMatches(gru("bidirectional", 1, Lbr, true), 1e-5);
    expectForwardMatches(gru("bidirectional", 0, Lbr, true), 1e-5);
    Config Double = gru("bidirectional", 1, Lbr, true);
    Double.Type = DType::Float64;
    expectForwardMatches(Double, 1e-12);
  }
}

/// A bidirectional one-step layer against the cell of each direction.
void expectCellIsOneStep(Config C) {
  C.T = 1;
  C.Direction = "bidirectional";
  C.Bias = C.Initial = true;
  C.Peephole = false;
  auto Backend = createCpuBackend(1);
  Operands O = makeOperands(C, 11);
  std::vector<HostTensor> Out = outputShapes(C);
  std::vector<HostTensor *> OutPointers;
  for (HostTensor &T : Out)
    OutPointers.push_back(&T);
  runForward(*Backend, C.Lstm ? OpKind::LSTM : OpKind::GRU, C.attrs(),
             O.pointers(), OutPointers);
  for (int64_t D = 0; D < 2; ++D) {
    // Layout 0: X [1,B,I] is x; states [2,B,H] hold direction D's at D*B*H.
    auto Slice = [&](const HostTensor &State) {
      HostTensor S = f32({C.B, C.H});
      for (int64_t E = 0; E < S.size(); ++E)
        S.set(E, State.at(D * C.B * C.H + E));
      return S;
    };
    HostTensor X = f32({C.B, C.I});
    for (int64_t E = 0; E < X.size(); ++E)
      X.set(E, O.In[0].at(E));
    HostTensor H = Slice(O.In[5]), Cs, NewH = f32({C.B, C.H}),
               NewC = f32({C.B, C.H});
    OpAttrs A;
    A.set("hidden_size", C.H);
    A.set("direction_index", D);
    std::vector<HostTensor *> In{&X, &H};
    std::vector<HostTensor *> Outs{&NewH};
    if (C.Lstm) {
      Cs = Slice(O.In[6]);
      In.push_back(&Cs);
      Outs.push_back(&NewC);
    } else {
      A.set("linear_before_reset", C.LinearBeforeReset);
    }
    // The cell reads the layer's weights gate-major (as RnnUnroll views
    // them): the same values, [D,G,H,columns] and [D,2G,H].
    int64_t G = C.Lstm ? 4 : 3;
    HostTensor W = O.In[1], R = O.In[2], Bias = O.In[3];
    W.Dims = {2, G, C.H, C.I};
    R.Dims = {2, G, C.H, C.H};
    Bias.Dims = {2, 2 * G, C.H};
    In.insert(In.end(), {&W, &R, &Bias});
    runForward(*Backend, C.Lstm ? OpKind::LSTMCell : OpKind::GRUCell, A, In,
               Outs);
    HostTensor LayerH = Slice(Out[1]);
    for (int64_t E = 0; E < NewH.size(); ++E)
      EXPECT_FLOAT_EQ(NewH.at(E), LayerH.at(E)) << "direction " << D;
    if (C.Lstm) {
      HostTensor LayerC = Slice(Out[2]);
      for (int64_t E = 0; E < NewC.size(); ++E)
        EXPECT_FLOAT_EQ(NewC.at(E), LayerC.at(E)) << "direction " << D;
    }
  }
}

TEST(RecurrentCells, CellIsOneStepOfTheLayer) {
  expectCellIsOneStep(lstm("forward", 0, true));
  expectCellIsOneStep(gru("forward", 0, 0, true));
  expectCellIsOneStep(gru("forward", 0, 1, true));
}

void gradCheckLayer(const Config &C, double Epsilon, double Tolerance) {
  auto Backend = createCpuBackend(1);
  Operands O = makeOperands(C, 3);
  std::vector<unsigned> Check{0, 1, 2};
  for (unsigned K = 3; K < O.In.size(); ++K)
    if (K != 4 && !O.In[K].Dims.empty())
      Check.push_back(K);
  gradCheck(*Backend, C.Lstm ? OpKind::LSTM : OpKind::GRU, C.attrs(),
            O.pointers(), outputShapes(C), Check, Epsilon, Tolerance);
}

TEST(RecurrentLSTM, GradientsOfEveryInput) {
  gradCheckLayer(lstm("bidirectional", 1, true), 1e-2, 1e-2);
  gradCheckLayer(lstm("reverse", 0, true), 1e-2, 1e-2);
  gradCheckLayer(lstm("forward", 0, false), 1e-2, 1e-2);
  Config Double = lstm("bidirectional", 0, true);
  Double.Type = DType::Float64;
  gradCheckLayer(Double, 1e-5, 1e-6);
}

TEST(RecurrentGRU, GradientsOfEveryInput) {
  for (int64_t Lbr : {0, 1}) {
    SCOPED_TRACE(Lbr);
    gradCheckLayer(gru("bidirectional", 1, Lbr, true), 1e-2, 1e-2);
    gradCheckLayer(gru("forward", 0, Lbr, false), 1e-2, 1e-2);
    Config Double = gru("bidirectional", 0, Lbr, true);
    Double.Type = DType::Float64;
    gradCheckLayer(Double, 1e-5, 1e-6);
  }
}

/// Cell operands x, h, [c,] W, R, B for a bidirectional layer's weights,
/// gate-major, Units hidden units of each gate.
std::vector<HostTensor> cellOperands(bool Lstm, int64_t B, int64_t I, int64_t H,
                                     int64_t Units, unsigned Seed) {
  std::mt19937 Rng(Seed);
  int64_t G = Lstm ? 4 : 3;
  std::vector<HostTensor> In{f32({B, I}), f32({B, H})};
  if (Lstm)
    In.push_back(f32({B, Units}));
  In.push_back(f32({2, G, Units, I}));
  In.push_back(f32({2, G, Units, H}));
  In.push_back(f32({2, 2 * G, Units}));
  for (HostTensor &T : In)
    randomize(T, Rng, -0.8, 0.8);
  return In;
}

void gradCheckCell(bool Lstm, int64_t LinearBeforeReset, int64_t Units) {
  const int64_t B = 2, I = 3, H = 4;
  auto Backend = createCpuBackend(1);
  std::vector<HostTensor> In = cellOperands(Lstm, B, I, H, Units, 5);
  std::vector<HostTensor *> Pointers;
  std::vector<unsigned> Check;
  for (HostTensor &T : In) {
    Check.push_back(Pointers.size());
    Pointers.push_back(&T);
  }
  OpAttrs A;
  A.set("hidden_size", H);
  A.set("direction_index", int64_t(1));
  std::vector<HostTensor> Outs{f32({B, Units})};
  if (Lstm)
    Outs.push_back(f32({B, Units}));
  else
    A.set("linear_before_reset", LinearBeforeReset);
  gradCheck(*Backend, Lstm ? OpKind::LSTMCell : OpKind::GRUCell, A, Pointers,
            Outs, Check, 1e-2, 1e-2);
}

TEST(RecurrentCells, GradientsOfEveryInput) {
  gradCheckCell(true, 0, 4);
  gradCheckCell(false, 0, 4);
  gradCheckCell(false, 1, 4);
}

// An unrolled cell split along the hidden units gets its units' rows of
// every gate (units [1,3) of 4 here; one box of the gate-major weights) and
// a slice of c.
TEST(RecurrentCells, LstmCellHiddenSlice) {
  const int64_t B = 2, I = 3, H = 4, Begin = 1, Units = 2, G = 4;
  auto Backend = createCpuBackend(1);
  std::vector<HostTensor> Full = cellOperands(true, B, I, H, H, 9);
  OpAttrs A;
  A.set("hidden_size", H);
  A.set("direction_index", int64_t(1));
  HostTensor FullH = f32({B, H}), FullC = f32({B, H});
  runForward(*Backend, OpKind::LSTMCell, A,
             {&Full[0], &Full[1], &Full[2], &Full[3], &Full[4], &Full[5]},
             {&FullH, &FullC});
  // Direction 1 only, units [Begin, Begin + Units) of each of Blocks blocks.
  auto Box = [&](const HostTensor &T, int64_t Blocks, int64_t Columns) {
    HostTensor Out = f32({1, Blocks, Units, Columns});
    for (int64_t K = 0; K < Blocks; ++K)
      for (int64_t E = 0; E < Units * Columns; ++E)
        Out.set(K * Units * Columns + E,
                T.at(((Blocks + K) * H + Begin) * Columns + E));
    return Out;
  };
  HostTensor W = Box(Full[3], G, I);
  HostTensor R = Box(Full[4], G, H);
  HostTensor Bias = Box(Full[5], 2 * G, 1);
  Bias.Dims = {1, 2 * G, Units};
  HostTensor C = f32({B, Units});
  for (int64_t Bi = 0; Bi < B; ++Bi)
    for (int64_t U = 0; U < Units; ++U)
      C.set(Bi * Units + U, Full[2].at(Bi * H + Begin + U));
  HostTensor NewH = f32({B, Units}), NewC = f32({B, Units});
  runForward(*Backend, OpKind::LSTMCell, A,
             {&Full[0], &Full[1], &C, &W, &R, &Bias}, {&NewH, &NewC});
  for (int64_t Bi = 0; Bi < B; ++Bi)
    for (int64_t U = 0; U < Units; ++U) {
      EXPECT_FLOAT_EQ(NewH.at(Bi * Units + U), FullH.at(Bi * H + Begin + U));
      EXPECT_FLOAT_EQ(NewC.at(Bi * Units + U), FullC.at(Bi * H + Begin + U));
    }
  gradCheckCell(true, 0, Units);
}

/// Runs backward with the given output gradients into fresh input grads.
std::vector<HostTensor> backwardOnce(Backend &B, const Config &C, Operands &O,
                                     std::vector<HostTensor> &Out,
                                     std::vector<HostTensor *> OutGrads,
                                     std::vector<HostTensor> *Accumulate) {
  OpAttrs Attrs = C.attrs();
  OpCall Call{C.Lstm ? OpKind::LSTM : OpKind::GRU, Attrs, "test", {}, {}, 1};
  for (HostTensor *T : O.pointers())
    Call.Inputs.push_back(T ? T->view() : TensorView::absent());
  for (HostTensor &T : Out)
    Call.Outputs.push_back(T.view());
  B.forward(Call);
  std::vector<TensorView> OG, IG;
  for (HostTensor *T : OutGrads)
    OG.push_back(T ? T->view() : TensorView::absent());
  std::vector<HostTensor> Grads;
  std::vector<HostTensor> &Target = Accumulate ? *Accumulate : Grads;
  if (!Accumulate)
    for (HostTensor *T : O.pointers())
      Grads.push_back(T && T->Type != DType::Int64
                          ? HostTensor(T->Type, T->Dims)
                          : HostTensor());
  for (HostTensor &G : Target)
    IG.push_back(G.Dims.empty() ? TensorView::absent() : G.view());
  B.backward(Call, OG, IG);
  return Grads;
}

TEST(RecurrentLSTM, BackwardAccumulatesAndAbsentGradsAreZero) {
  Config C = lstm("bidirectional", 1, true);
  auto Backend = createCpuBackend(1);
  Operands O = makeOperands(C, 4);
  std::vector<HostTensor> Out = outputShapes(C);
  std::mt19937 Rng(2);
  HostTensor DY(C.Type, C.y()), DH(C.Type, C.state()), ZeroY(C.Type, C.y()),
      ZeroC(C.Type, C.state());
  randomize(DY, Rng);
  randomize(DH, Rng);
  std::vector<HostTensor> Once =
      backwardOnce(*Backend, C, O, Out, {&DY, &DH, &ZeroC}, nullptr);
  std::vector<HostTensor> Absent =
      backwardOnce(*Backend, C, O, Out, {&DY, &DH, nullptr}, nullptr);
  std::vector<HostTensor> Twice = Once;
  backwardOnce(*Backend, C, O, Out, {&DY, &DH, &ZeroC}, &Twice);
  for (size_t K = 0; K < Once.size(); ++K)
    for (int64_t E = 0; E < Once[K].size(); ++E) {
      EXPECT_FLOAT_EQ(Absent[K].at(E), Once[K].at(E)) << K << " " << E;
      EXPECT_NEAR(Twice[K].at(E), 2 * Once[K].at(E), 1e-6) << K << " " << E;
    }
  // Only Y_h's gradient: the gradients are not all zero.
  std::vector<HostTensor> OnlyH =
      backwardOnce(*Backend, C, O, Out, {nullptr, &DH, nullptr}, nullptr);
  double Sum = 0;
  for (int64_t E = 0; E < OnlyH[1].size(); ++E)
    Sum += std::fabs(OnlyH[1].at(E));
  EXPECT_GT(Sum, 0.0);
}

TEST(RecurrentGRU, BackwardAccumulates) {
  Config C = gru("reverse", 0, 1, true);
  auto Backend = createCpuBackend(1);
  Operands O = makeOperands(C, 4);
  std::vector<HostTensor> Out = outputShapes(C);
  std::mt19937 Rng(2);
  HostTensor DY(C.Type, C.y());
  randomize(DY, Rng);
  std::vector<HostTensor> Once =
      backwardOnce(*Backend, C, O, Out, {&DY, nullptr}, nullptr);
  std::vector<HostTensor> Twice = Once;
  backwardOnce(*Backend, C, O, Out, {&DY, nullptr}, &Twice);
  for (size_t K = 0; K < Once.size(); ++K)
    for (int64_t E = 0; E < Once[K].size(); ++E)
      EXPECT_NEAR(Twice[K].at(E), 2 * Once[K].at(E), 1e-6) << K << " " << E;
}

void expectRejected(const Config &C, Operands &O, const std::string &Message) {
  auto Backend = createCpuBackend(1);
  std::vector<HostTensor> Out = outputShapes(C);
  std::vector<HostTensor *> OutPointers;
  for (HostTensor &T : Out)
    OutPointers.push_back(&T);
  try {
    runForward(*Backend, C.Lstm ? OpKind::LSTM : OpKind::GRU, C.attrs(),
               O.pointers(), OutPointers);
    ADD_FAILURE() << "expected an error containing " << Message;
  } catch (const std::exception &E) {
    EXPECT_THAT(E.what(), testing::HasSubstr("op 'test'"));
    EXPECT_THAT(E.what(), testing::HasSubstr(Message));
  }
}

TEST(RecurrentLSTM, BadOperandsAreErrors) {
  Config C = lstm("forward", 0, true);
  C.SequenceLens = true;
  Operands Short = makeOperands(C, 1);
  Short.In[4].set(1, 2);
  expectRejected(C, Short, "sequence_lens[1] is 2");
  Operands BadW = makeOperands(C, 1);
  BadW.In[1].Dims = {1, 12, 4};
  expectRejected(C, BadW, "W is [1,12,4], expected [1,16,3]");
  Operands IntX = makeOperands(C, 1);
  IntX.In[0].Type = DType::Int32;
  expectRejected(C, IntX, "X has element type");
  Config Direction = C;
  Direction.Direction = "sideways";
  Operands O = makeOperands(C, 1);
  expectRejected(Direction, O, "unknown direction 'sideways'");
}

TEST(RecurrentCells, GruCellHiddenSliceIsRejected) {
  auto Backend = createCpuBackend(1);
  std::vector<HostTensor> In = cellOperands(false, 2, 3, 4, 2, 1);
  OpAttrs A;
  A.set("hidden_size", int64_t(4));
  HostTensor Out = f32({2, 2});
  EXPECT_THROW(runForward(*Backend, OpKind::GRUCell, A,
                          {&In[0], &In[1], &In[2], &In[3], &In[4]}, {&Out}),
               std::exception);
}

} // namespace
