//===- runtime_lib/cpu/Recurrent.cpp - LSTM, GRU and their cells ----------===//
//
// The Recurrent family's entry points: operand checks, the two layouts, the
// directions of a layer and the weight slices of a cell, around the
// per-direction recurrences of RecurrentMath.cpp. f32 and f64.
//
// Backward recomputes the forward (the call carries the layer's outputs,
// not its gates) and back-propagates through time; absent output gradients
// count as zeros.
//
// Not supported, with an error naming the op: sequence_lens entries shorter
// than the sequence (entries equal to it are accepted), and a GRUCell
// computing a slice of the hidden units (it would need the slice's offset
// into the previous state, which the call does not carry).
//
//===----------------------------------------------------------------------===//
#include "RecurrentMath.h"
#include <string>

namespace onnx2soap::rt::cpu {

namespace {

const TensorView &operand(const Views &Vs, unsigned I) {
  static const TensorView Absent;
  return I < Vs.size() ? Vs[I] : Absent;
}

std::string formatDims(const std::vector<int64_t> &Dims) {
  std::string S = "[";
  for (size_t I = 0; I < Dims.size(); ++I)
    S += (I ? "," : "") + std::to_string(Dims[I]);
  return S + "]";
}

/// Fails unless a present V has dims Expected.
void expectDims(const OpCall &Call, const TensorView &V,
                const std::vector<int64_t> &Expected, const char *What) {
  if (V.present() && V.dims() != Expected)
    failOp(Call, std::string(What) + " is " + formatDims(V.dims()) +
                     ", expected " + formatDims(Expected));
}

/// Checks type and density of every present float operand, output and
/// gradient; returns the element type.
DType checkFloatOperands(const OpCall &Call, const Views *OutputGrads,
                         const Views *InputGrads, unsigned IntegerInput) {
  if (Call.Inputs.empty() || !Call.Inputs[0].present())
    failOp(Call, "the input X is missing");
  DType Type = Call.Inputs[0].Type;
  if (Type != DType::Float32 && Type != DType::Float64)
    failOp(Call, std::string("X has element type ") + dtypeName(Type) +
                     ", the CPU kernel needs float32 or float64");
  auto Check = [&](const Views &Vs, const char *What) {
    for (unsigned I = 0; I < Vs.size(); ++I) {
      std::string Name = std::string(What) + " " + std::to_string(I);
      requireContiguous(Call, Vs[I], Name.c_str());
      if (&Vs != &Call.Inputs || I != IntegerInput)
        requireType(Call, Vs[I], Type, Name.c_str());
    }
  };
  Check(Call.Inputs, "input");
  Check(Call.Outputs, "output");
  if (OutputGrads)
    Check(*OutputGrads, "output gradient");
  if (InputGrads)
    Check(*InputGrads, "input gradient");
  return Type;
}

/// Zeros of a size, for absent biases and states.
template <typename T> const T *orZeros(const TensorView &V, std::vector<T> &Z) {
  return V.present() ? V.as<T>() : Z.data();
}

template <typename T> T *gradOf(const Views *Grads, unsigned I) {
  if (!Grads)
    return nullptr;
  const TensorView &V = operand(*Grads, I);
  return V.present() ? V.as<T>() : nullptr;
}

//===-- Layers ------------------------------------------------------------===//

struct Layer {
  bool Lstm;
  int64_t Gates, Steps, Batch, Input, Hidden, Directions;
  bool BatchFirst, Reverse, LinearBeforeReset;

  int64_t stateOffset(int64_t D, int64_t B) const {
    return (BatchFirst ? B * Directions + D : D * Batch + B) * Hidden;
  }
  int64_t outputOffset(int64_t T, int64_t D, int64_t B) const {
    return (BatchFirst ? (B * Steps + T) * Directions + D
                       : (T * Directions + D) * Batch + B) *
           Hidden;
  }
};

void checkSequenceLengths(const OpCall &Call, const TensorView &V,
                          int64_t Steps) {
  if (!V.present())
    return;
  if (V.Type != DType::Int32 && V.Type != DType::Int64)
    failOp(Call, std::string("sequence_lens has element type ") +
                     dtypeName(V.Type) + ", expected int32 or int64");
  for (int64_t B = 0; B < V.numElements(); ++B) {
    int64_t Length =
        V.Type == DType::Int32 ? V.as<int32_t>()[B] : V.as<int64_t>()[B];
    if (Length != Steps)
      failOp(Call, "sequence_lens[" + std::to_string(B) + "] is " +
                       std::to_string(Length) +
                       ": sequences shorter than X's " + std::to_string(Steps) +
                       " steps are not supported by the CPU backend yet");
  }
}

Layer checkLayer(const OpCall &Call, bool Lstm) {
  const Views &In = Call.Inputs;
  const TensorView &X = In[0];
  if (X.Rank != 3)
    failOp(Call, "X " + formatDims(X.dims()) + " must be 3-D");
  Layer L;
  L.Lstm = Lstm;
  L.Gates = Lstm ? 4 : 3;
  L.BatchFirst = Call.Attrs.getInt("layout") == 1;
  L.Steps = X.Dims[L.BatchFirst ? 1 : 0];
  L.Batch = X.Dims[L.BatchFirst ? 0 : 1];
  L.Input = X.Dims[2];
  L.Hidden = Call.Attrs.getInt("hidden_size");
  const std::string &Direction = Call.Attrs.getString("direction", "forward");
  if (Direction != "forward" && Direction != "reverse" &&
      Direction != "bidirectional")
    failOp(Call, "unknown direction '" + Direction + "'");
  L.Directions = Direction == "bidirectional" ? 2 : 1;
  L.Reverse = Direction == "reverse";
  L.LinearBeforeReset = Call.Attrs.getInt("linear_before_reset") != 0;
  if (L.Hidden <= 0)
    failOp(Call, "hidden_size must be positive");
  if (L.Steps <= 0)
    failOp(Call, "X " + formatDims(X.dims()) + " has no time steps");
  if (!operand(In, 1).present() || !operand(In, 2).present())
    failOp(Call, "W and R are required");
  int64_t D = L.Directions, GH = L.Gates * L.Hidden;
  expectDims(Call, In[1], {D, GH, L.Input}, "W");
  expectDims(Call, In[2], {D, GH, L.Hidden}, "R");
  expectDims(Call, operand(In, 3), {D, 2 * GH}, "B");
  expectDims(Call, operand(In, 4), {L.Batch}, "sequence_lens");
  checkSequenceLengths(Call, operand(In, 4), L.Steps);
  std::vector<int64_t> State = L.BatchFirst
                                   ? std::vector<int64_t>{L.Batch, D, L.Hidden}
                                   : std::vector<int64_t>{D, L.Batch, L.Hidden};
  expectDims(Call, operand(In, 5), State, "initial_h");
  if (Lstm) {
    expectDims(Call, operand(In, 6), State, "initial_c");
    expectDims(Call, operand(In, 7), {D, 3 * L.Hidden}, "P");
  }
  std::vector<int64_t> Y =
      L.BatchFirst ? std::vector<int64_t>{L.Batch, L.Steps, D, L.Hidden}
                   : std::vector<int64_t>{L.Steps, D, L.Batch, L.Hidden};
  expectDims(Call, operand(Call.Outputs, 0), Y, "Y");
  expectDims(Call, operand(Call.Outputs, 1), State, "Y_h");
  if (Lstm)
    expectDims(Call, operand(Call.Outputs, 2), State, "Y_c");
  return L;
}

/// Copies direction D of a state tensor to [Batch, Hidden] (zeros if absent).
template <typename T>
std::vector<T> gatherState(const Layer &L, const TensorView &V, int64_t D) {
  std::vector<T> Out(L.Batch * L.Hidden, T(0));
  if (V.present())
    for (int64_t B = 0; B < L.Batch; ++B)
      std::copy_n(V.as<T>() + L.stateOffset(D, B), L.Hidden,
                  Out.data() + B * L.Hidden);
  return Out;
}

/// Copies or adds [Batch, Hidden] into direction D of a state tensor.
template <typename T>
void scatterState(const Layer &L, const T *In, int64_t D, T *V, bool Add) {
  for (int64_t B = 0; B < L.Batch; ++B)
    for (int64_t K = 0; K < L.Hidden; ++K) {
      T &Dst = V[L.stateOffset(D, B) + K];
      Dst = (Add ? Dst : T(0)) + In[B * L.Hidden + K];
    }
}

/// Forward (InputGrads null) or backward of a whole LSTM / GRU layer.
template <typename T>
void runLayer(const OpCall &Call, bool Lstm, const Views *OutputGrads,
              const Views *InputGrads) {
  Layer L = checkLayer(Call, Lstm);
  const Views &In = Call.Inputs;
  const int64_t S = L.Steps, B = L.Batch, I = L.Input, H = L.Hidden;
  const int64_t GH = L.Gates * H;
  const unsigned InitialC = 6, Peephole = 7;

  // Time-major X, shared by the directions.
  const T *X = In[0].as<T>();
  std::vector<T> XTimeMajor;
  if (L.BatchFirst) {
    XTimeMajor.resize(S * B * I);
    for (int64_t Bi = 0; Bi < B; ++Bi)
      for (int64_t Ti = 0; Ti < S; ++Ti)
        std::copy_n(X + (Bi * S + Ti) * I, I,
                    XTimeMajor.data() + (Ti * B + Bi) * I);
    X = XTimeMajor.data();
  }
  T *GradX = gradOf<T>(InputGrads, 0);
  std::vector<T> DXTimeMajor(GradX ? S * B * I : 0, T(0));
  std::vector<T> Zeros(GH, T(0)), Y(S * B * H);

  for (int64_t D = 0; D < L.Directions; ++D) {
    rnn::Shape Sh{S, B, I, H, H, L.Reverse || D == 1};
    rnn::Weights<T> P;
    P.W = In[1].as<T>() + D * GH * I;
    P.R = In[2].as<T>() + D * GH * H;
    const TensorView &Bias = operand(In, 3);
    P.Wb = Bias.present() ? Bias.as<T>() + D * 2 * GH : Zeros.data();
    P.Rb = Bias.present() ? P.Wb + GH : Zeros.data();
    if (Lstm && operand(In, Peephole).present())
      P.P = In[Peephole].as<T>() + D * 3 * H;
    std::vector<T> H0 = gatherState<T>(L, operand(In, 5), D);
    std::vector<T> C0 =
        gatherState<T>(L, Lstm ? operand(In, InitialC) : TensorView(), D);
    rnn::Tape<T> Tp;
    if (Lstm)
      rnn::lstmForward<T>(Call, Sh, P, X, H0.data(), C0.data(), Y.data(), Tp);
    else
      rnn::gruForward<T>(Call, Sh, P, L.LinearBeforeReset, X, H0.data(),
                         Y.data(), Tp);
    int64_t Last = Sh.Reverse ? 0 : S - 1;

    if (!InputGrads) {
      const TensorView &OutY = operand(Call.Outputs, 0);
      if (OutY.present())
        for (int64_t Ti = 0; Ti < S; ++Ti)
          for (int64_t Bi = 0; Bi < B; ++Bi)
            std::copy_n(Y.data() + (Ti * B + Bi) * H, H,
                        OutY.as<T>() + L.outputOffset(Ti, D, Bi));
      if (operand(Call.Outputs, 1).present())
        scatterState(L, Y.data() + Last * B * H, D, Call.Outputs[1].as<T>(),
                     false);
      if (Lstm && operand(Call.Outputs, 2).present())
        scatterState(L, Tp.Cell.data() + Last * B * H, D,
                     Call.Outputs[2].as<T>(), false);
      continue;
    }

    // Output gradients of this direction, time-major.
    std::vector<T> DY, DHLast, DCLast;
    if (const TensorView &G = operand(*OutputGrads, 0); G.present()) {
      DY.resize(S * B * H);
      for (int64_t Ti = 0; Ti < S; ++Ti)
        for (int64_t Bi = 0; Bi < B; ++Bi)
          std::copy_n(G.as<T>() + L.outputOffset(Ti, D, Bi), H,
                      DY.data() + (Ti * B + Bi) * H);
    }
    if (operand(*OutputGrads, 1).present())
      DHLast = gatherState<T>(L, (*OutputGrads)[1], D);
    if (Lstm && operand(*OutputGrads, 2).present())
      DCLast = gatherState<T>(L, (*OutputGrads)[2], D);
    auto OrNull = [](std::vector<T> &V) {
      return V.empty() ? nullptr : V.data();
    };

    rnn::Grads<T> G;
    G.X = GradX ? DXTimeMajor.data() : nullptr;
    if (T *GW = gradOf<T>(InputGrads, 1))
      G.W = GW + D * GH * I;
    if (T *GR = gradOf<T>(InputGrads, 2))
      G.R = GR + D * GH * H;
    if (T *GB = gradOf<T>(InputGrads, 3)) {
      G.Wb = GB + D * 2 * GH;
      G.Rb = G.Wb + GH;
    }
    if (T *GP = Lstm ? gradOf<T>(InputGrads, Peephole) : nullptr)
      G.P = GP + D * 3 * H;
    T *GradH0 = gradOf<T>(InputGrads, 5);
    T *GradC0 = Lstm ? gradOf<T>(InputGrads, InitialC) : nullptr;
    std::vector<T> DH0(GradH0 ? B * H : 0, T(0)), DC0(GradC0 ? B * H : 0, T(0));
    G.H0 = OrNull(DH0);
    G.C0 = OrNull(DC0);
    if (Lstm)
      rnn::lstmBackward<T>(Call, Sh, P, X, H0.data(), C0.data(), Y.data(), Tp,
                           OrNull(DY), OrNull(DHLast), OrNull(DCLast), G);
    else
      rnn::gruBackward<T>(Call, Sh, P, L.LinearBeforeReset, X, H0.data(),
                          Y.data(), Tp, OrNull(DY), OrNull(DHLast), G);
    if (GradH0)
      scatterState(L, DH0.data(), D, GradH0, true);
    if (GradC0)
      scatterState(L, DC0.data(), D, GradC0, true);
  }
  if (GradX)
    for (int64_t Ti = 0; Ti < S; ++Ti)
      for (int64_t Bi = 0; Bi < B; ++Bi) {
        const T *Src = DXTimeMajor.data() + (Ti * B + Bi) * I;
        T *Dst = GradX + (L.BatchFirst ? Bi * S + Ti : Ti * B + Bi) * I;
        for (int64_t K = 0; K < I; ++K)
          Dst[K] += Src[K];
      }
}

//===-- Cells -------------------------------------------------------------===//

/// Forward (InputGrads null) or backward of an LSTMCell / GRUCell.
template <typename T>
void runCell(const OpCall &Call, bool Lstm, const Views *OutputGrads,
             const Views *InputGrads) {
  const Views &In = Call.Inputs;
  const unsigned WeightBase = Lstm ? 3 : 2;
  const int64_t Gates = Lstm ? 4 : 3;
  for (unsigned K = 0; K < WeightBase + 2; ++K)
    if (!operand(In, K).present())
      failOp(Call, "input " + std::to_string(K) + " is required");
  const TensorView &X = In[0], &W = In[WeightBase], &R = In[WeightBase + 1],
                   &Bias = operand(In, WeightBase + 2);
  const TensorView &Out = operand(Call.Outputs, 0);
  if (X.Rank != 2 || W.Rank != 4 || !Out.present() || Out.Rank != 2)
    failOp(Call, "x must be [batch,input], W 4-D, and h' present");
  const int64_t B = X.Dims[0], I = X.Dims[1],
                H = Call.Attrs.getInt("hidden_size"), Units = Out.Dims[1];
  if (H <= 0 || Units <= 0 || Units > H)
    failOp(Call, "hidden_size " + std::to_string(H) +
                     " does not fit the output " + formatDims(Out.dims()));
  if (!Lstm && Units != H)
    failOp(Call, "a GRUCell computing " + std::to_string(Units) + " of " +
                     std::to_string(H) +
                     " hidden units is not supported by the CPU backend: it "
                     "needs the slice's offset into the previous state");
  // The weights are gate-major, [directions, gates, units, columns], and
  // hold every direction or (a view cut to the cell's) only the cell's; a
  // slice of hidden units is dense, as the rnn kernels want it.
  const int64_t Directions = W.Dims[0];
  int64_t D = Call.Attrs.getInt("direction_index");
  if (D >= Directions && Directions == 1)
    D = 0;
  if (D < 0 || D >= Directions)
    failOp(Call, "direction_index " + std::to_string(D) +
                     " is out of range for W " + formatDims(W.dims()));
  expectDims(Call, In[1], {B, H}, "h");
  if (Lstm)
    expectDims(Call, In[2], {B, Units}, "c");
  expectDims(Call, W, {Directions, Gates, Units, I}, "W");
  expectDims(Call, R, {Directions, Gates, Units, H}, "R");
  expectDims(Call, Bias, {Directions, 2 * Gates, Units}, "B");
  expectDims(Call, Out, {B, Units}, "h'");
  if (Lstm)
    expectDims(Call, operand(Call.Outputs, 1), {B, Units}, "c'");

  const int64_t WSize = Gates * Units * I, RSize = Gates * Units * H,
                BSize = 2 * Gates * Units;
  std::vector<T> Zeros;
  rnn::Weights<T> P;
  P.W = W.as<T>() + D * WSize;
  P.R = R.as<T>() + D * RSize;
  const T *BiasRow = Bias.present() ? Bias.as<T>() + D * BSize : nullptr;
  if (!BiasRow) {
    Zeros.assign(BSize, T(0));
    BiasRow = Zeros.data();
  }
  P.Wb = BiasRow;
  P.Rb = BiasRow + Gates * Units;

  rnn::Shape Sh{1, B, I, H, Units, false};
  const T *H0 = In[1].as<T>(), *C0 = Lstm ? In[2].as<T>() : nullptr;
  std::vector<T> Y(B * Units);
  rnn::Tape<T> Tp;
  if (Lstm)
    rnn::lstmForward<T>(Call, Sh, P, X.as<T>(), H0, C0, Y.data(), Tp);
  else
    rnn::gruForward<T>(Call, Sh, P,
                       Call.Attrs.getInt("linear_before_reset") != 0, X.as<T>(),
                       H0, Y.data(), Tp);
  if (!InputGrads) {
    std::copy(Y.begin(), Y.end(), Out.as<T>());
    if (Lstm && operand(Call.Outputs, 1).present())
      std::copy(Tp.Cell.begin(), Tp.Cell.end(), Call.Outputs[1].as<T>());
    return;
  }

  rnn::Grads<T> G;
  G.X = gradOf<T>(InputGrads, 0);
  G.H0 = gradOf<T>(InputGrads, 1);
  G.C0 = Lstm ? gradOf<T>(InputGrads, 2) : nullptr;
  T *GradW = gradOf<T>(InputGrads, WeightBase);
  T *GradR = gradOf<T>(InputGrads, WeightBase + 1);
  T *GradB = gradOf<T>(InputGrads, WeightBase + 2);
  if (GradW)
    G.W = GradW + D * WSize;
  if (GradR)
    G.R = GradR + D * RSize;
  if (GradB) {
    G.Wb = GradB + D * BSize;
    G.Rb = G.Wb + Gates * Units;
  }
  const T *DY = gradOf<T>(OutputGrads, 0);
  const T *DC = Lstm ? gradOf<T>(OutputGrads, 1) : nullptr;
  if (Lstm)
    rnn::lstmBackward<T>(Call, Sh, P, X.as<T>(), H0, C0, Y.data(), Tp, DY,
                         nullptr, DC, G);
  else
    rnn::gruBackward<T>(Call, Sh, P,
                        Call.Attrs.getInt("linear_before_reset") != 0,
                        X.as<T>(), H0, Y.data(), Tp, DY, nullptr, G);
}

bool anyPresent(const Views &Vs) {
  for (const TensorView &V : Vs)
    if (V.present())
      return true;
  return false;
}

template <typename T>
void run(const OpCall &Call, const Views *OutputGrads,
         const Views *InputGrads) {
  switch (Call.Kind) {
  case OpKind::LSTM:
    return runLayer<T>(Call, true, OutputGrads, InputGrads);
  case OpKind::GRU:
    return runLayer<T>(Call, false, OutputGrads, InputGrads);
  case OpKind::LSTMCell:
    return runCell<T>(Call, true, OutputGrads, InputGrads);
  case OpKind::GRUCell:
    return runCell<T>(Call, false, OutputGrads, InputGrads);
  default:
    failOp(Call, "is not a recurrent op");
  }
}

void dispatch(const OpCall &Call, const Views *OutputGrads,
              const Views *InputGrads) {
  bool Layer = Call.Kind == OpKind::LSTM || Call.Kind == OpKind::GRU;
  DType Type = checkFloatOperands(Call, OutputGrads, InputGrads,
                                  Layer ? 4 : ~0u); // 4: sequence_lens
  if (Type == DType::Float32)
    run<float>(Call, OutputGrads, InputGrads);
  else
    run<double>(Call, OutputGrads, InputGrads);
}

} // namespace

void forwardRecurrent(Context &, const OpCall &Call) {
  dispatch(Call, nullptr, nullptr);
}

void backwardRecurrent(Context &, const OpCall &Call, const Views &OutputGrads,
                       const Views &InputGrads) {
  if (!anyPresent(InputGrads) || !anyPresent(OutputGrads))
    return; // nothing to add
  dispatch(Call, &OutputGrads, &InputGrads);
}

} // namespace onnx2soap::rt::cpu
