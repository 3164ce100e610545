//===- runtime_lib/cuda/Recurrent.cu - LSTM, GRU and their cells ----------===//
//
// CUDA twins of runtime_lib/cpu/Recurrent.cpp: operand checks, the two
// layouts, the directions of a layer and the weight slices of a cell,
// around the per-direction recurrences of RecurrentMath.cu (cuBLAS GEMMs
// per step plus fused gate kernels). f32 and f64.
//
// Backward recomputes the forward (the call carries the layer's outputs,
// not its gates) and back-propagates through time; absent output gradients
// count as zeros.
//
// Not supported, with the CPU backend's errors: sequence_lens entries
// shorter than the sequence (entries equal to it are accepted; checking
// them copies sequence_lens to the host and waits for the stream), and a
// GRUCell computing a slice of the hidden units.
//
//===----------------------------------------------------------------------===//
#include "RecurrentMath.cuh"
#include <string>
#include <vector>

namespace onnx2soap::rt::cuda {
using namespace support;

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
                     ", the CUDA kernel needs float32 or float64");
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

template <typename T> T *gradOf(const Views *Grads, unsigned I) {
  if (!Grads)
    return nullptr;
  const TensorView &V = operand(*Grads, I);
  return V.present() ? V.as<T>() : nullptr;
}

template <typename T> const T *dataOf(const TensorView &V) {
  return V.present() ? V.as<T>() : nullptr;
}

//===-- Layers ------------------------------------------------------------===//

struct Layer {
  bool Lstm;
  int64_t Gates, Steps, Batch, Input, Hidden, Directions;
  bool BatchFirst, Reverse, LinearBeforeReset;

  // Offsets (in elements) of direction D's [Batch, Hidden] block of a state
  // tensor, and of its [Steps, Batch, Hidden] blocks of Y, as a base and
  // strides per step and batch row.
  int64_t stateBase(int64_t D) const {
    return BatchFirst ? D * Hidden : D * Batch * Hidden;
  }
  int64_t stateBatchStride() const {
    return BatchFirst ? Directions * Hidden : Hidden;
  }
  int64_t outputBase(int64_t D) const { return stateBase(D); }
  int64_t outputStepStride() const {
    return BatchFirst ? Directions * Hidden : Directions * Batch * Hidden;
  }
  int64_t outputBatchStride() const {
    return BatchFirst ? Steps * Directions * Hidden : Hidden;
  }
};

/// sequence_lens lives on the device; reading it for the check costs a
/// copy to the host and a stream synchronization (a few bytes per call).
void checkSequenceLengths(const Context &C, const OpCall &Call,
                          const TensorView &V, int64_t Steps) {
  if (!V.present())
    return;
  if (V.Type != DType::Int32 && V.Type != DType::Int64)
    failOp(Call, std::string("sequence_lens has element type ") +
                     dtypeName(V.Type) + ", expected int32 or int64");
  int64_t Count = V.numElements();
  std::vector<unsigned char> Host(V.byteSize());
  if (Host.empty())
    return;
  checkCuda(Call,
            cudaMemcpyAsync(Host.data(), V.Data, Host.size(),
                            cudaMemcpyDeviceToHost, C.Stream),
            "cudaMemcpyAsync (sequence_lens)");
  checkCuda(Call, cudaStreamSynchronize(C.Stream),
            "cudaStreamSynchronize (sequence_lens)");
  for (int64_t B = 0; B < Count; ++B) {
    int64_t Length = V.Type == DType::Int32
                         ? reinterpret_cast<const int32_t *>(Host.data())[B]
                         : reinterpret_cast<const int64_t *>(Host.data())[B];
    if (Length != Steps)
      failOp(Call, "sequence_lens[" + std::to_string(B) + "] is " +
                       std::to_string(Length) +
                       ": sequences shorter than X's " + std::to_string(Steps) +
                       " steps are not supported by the CUDA backend yet");
  }
}

Layer checkLayer(const Context &C, const OpCall &Call, bool Lstm) {
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
  checkSequenceLengths(C, Call, operand(In, 4), L.Steps);
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

/// Direction D of a state tensor as [Batch, Hidden] (zeros if absent).
template <typename T>
Scratch<T> gatherState(const Context &C, const OpCall &Call, const Layer &L,
                       const TensorView &V, int64_t D) {
  Scratch<T> Out(Call, C, L.Batch * L.Hidden, !V.present());
  if (V.present())
    rnn::copyBlocks<T>(C, Call, 1, L.Batch, L.Hidden,
                       V.as<T>() + L.stateBase(D), 0, L.stateBatchStride(),
                       Out.get(), 0, L.Hidden, false);
  return Out;
}

/// Copies or adds [Batch, Hidden] into direction D of a state tensor.
template <typename T>
void scatterState(const Context &C, const OpCall &Call, const Layer &L,
                  const T *In, int64_t D, T *V, bool Add) {
  rnn::copyBlocks<T>(C, Call, 1, L.Batch, L.Hidden, In, 0, L.Hidden,
                     V + L.stateBase(D), 0, L.stateBatchStride(), Add);
}

/// Forward (InputGrads null) or backward of a whole LSTM / GRU layer.
template <typename T>
void runLayer(const Context &C, const OpCall &Call, bool Lstm,
              const Views *OutputGrads, const Views *InputGrads) {
  Layer L = checkLayer(C, Call, Lstm);
  const Views &In = Call.Inputs;
  const int64_t S = L.Steps, B = L.Batch, I = L.Input, H = L.Hidden;
  const int64_t GH = L.Gates * H;
  const unsigned InitialC = 6, Peephole = 7;

  // Time-major X, shared by the directions.
  const T *X = In[0].as<T>();
  Scratch<T> XTimeMajor;
  if (L.BatchFirst) {
    XTimeMajor = Scratch<T>(Call, C, S * B * I);
    rnn::copyBlocks<T>(C, Call, S, B, I, X, I, S * I, XTimeMajor.get(), B * I,
                       I, false);
    X = XTimeMajor.get();
  }
  // The input gradient, time-major: X's own gradient unless batch-first.
  T *GradX = gradOf<T>(InputGrads, 0);
  Scratch<T> DXTimeMajor;
  T *DXTime = GradX;
  if (GradX && L.BatchFirst) {
    DXTimeMajor = Scratch<T>(Call, C, S * B * I, true);
    DXTime = DXTimeMajor.get();
  }
  Scratch<T> Y(Call, C, S * B * H);

  for (int64_t D = 0; D < L.Directions; ++D) {
    rnn::Shape Sh{S, B, I, H, H, L.Reverse || D == 1};
    rnn::Weights<T> P;
    P.W = In[1].as<T>() + D * GH * I;
    P.R = In[2].as<T>() + D * GH * H;
    if (const TensorView &Bias = operand(In, 3); Bias.present()) {
      P.Wb = Bias.as<T>() + D * 2 * GH;
      P.Rb = P.Wb + GH;
    }
    if (Lstm && operand(In, Peephole).present())
      P.P = In[Peephole].as<T>() + D * 3 * H;
    Scratch<T> H0 = gatherState<T>(C, Call, L, operand(In, 5), D);
    Scratch<T> C0 = gatherState<T>(
        C, Call, L, Lstm ? operand(In, InitialC) : TensorView(), D);
    rnn::Tape<T> Tp;
    if (Lstm)
      rnn::lstmForward<T>(C, Call, Sh, P, X, H0.get(), C0.get(), Y.get(), Tp);
    else
      rnn::gruForward<T>(C, Call, Sh, P, L.LinearBeforeReset, X, H0.get(),
                         Y.get(), Tp);
    int64_t Last = Sh.Reverse ? 0 : S - 1;

    if (!InputGrads) {
      if (const TensorView &OutY = operand(Call.Outputs, 0); OutY.present())
        rnn::copyBlocks<T>(C, Call, S, B, H, Y.get(), B * H, H,
                           OutY.as<T>() + L.outputBase(D), L.outputStepStride(),
                           L.outputBatchStride(), false);
      if (operand(Call.Outputs, 1).present())
        scatterState(C, Call, L, Y.get() + Last * B * H, D,
                     Call.Outputs[1].as<T>(), false);
      if (Lstm && operand(Call.Outputs, 2).present())
        scatterState(C, Call, L, Tp.Cell.get() + Last * B * H, D,
                     Call.Outputs[2].as<T>(), false);
      continue;
    }

    // Output gradients of this direction, time-major.
    Scratch<T> DY, DHLast, DCLast;
    if (const TensorView &G = operand(*OutputGrads, 0); G.present()) {
      DY = Scratch<T>(Call, C, S * B * H);
      rnn::copyBlocks<T>(C, Call, S, B, H, G.as<T>() + L.outputBase(D),
                         L.outputStepStride(), L.outputBatchStride(), DY.get(),
                         B * H, H, false);
    }
    if (operand(*OutputGrads, 1).present())
      DHLast = gatherState<T>(C, Call, L, (*OutputGrads)[1], D);
    if (Lstm && operand(*OutputGrads, 2).present())
      DCLast = gatherState<T>(C, Call, L, (*OutputGrads)[2], D);

    rnn::Grads<T> G;
    G.X = DXTime;
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
    Scratch<T> DH0, DC0;
    if (GradH0)
      DH0 = Scratch<T>(Call, C, B * H, true);
    if (GradC0)
      DC0 = Scratch<T>(Call, C, B * H, true);
    G.H0 = DH0.get();
    G.C0 = DC0.get();
    if (Lstm)
      rnn::lstmBackward<T>(C, Call, Sh, P, X, H0.get(), C0.get(), Y.get(), Tp,
                           DY.get(), DHLast.get(), DCLast.get(), G);
    else
      rnn::gruBackward<T>(C, Call, Sh, P, L.LinearBeforeReset, X, H0.get(),
                          Y.get(), Tp, DY.get(), DHLast.get(), G);
    if (GradH0)
      scatterState(C, Call, L, DH0.get(), D, GradH0, true);
    if (GradC0)
      scatterState(C, Call, L, DC0.get(), D, GradC0, true);
  }
  if (GradX && L.BatchFirst)
    rnn::copyBlocks<T>(C, Call, S, B, I, DXTimeMajor.get(), B * I, I, GradX, I,
                       S * I, true);
}

//===-- Cells -------------------------------------------------------------===//

/// Forward (InputGrads null) or backward of an LSTMCell / GRUCell.
template <typename T>
void runCell(const Context &C, const OpCall &Call, bool Lstm,
             const Views *OutputGrads, const Views *InputGrads) {
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
                     " hidden units is not supported by the CUDA backend: it "
                     "needs the slice's offset into the previous state");
  // Gate-major weights [directions, gates, units, columns]: a slice of
  // hidden units is dense (see the CPU twin).
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
  rnn::Weights<T> P;
  P.W = W.as<T>() + D * WSize;
  P.R = R.as<T>() + D * RSize;
  if (Bias.present()) {
    P.Wb = Bias.as<T>() + D * BSize;
    P.Rb = P.Wb + Gates * Units;
  }
  bool LinearBeforeReset = Call.Attrs.getInt("linear_before_reset") != 0;

  rnn::Shape Sh{1, B, I, H, Units, false};
  const T *H0 = In[1].as<T>(), *C0 = Lstm ? In[2].as<T>() : nullptr;
  rnn::Tape<T> Tp;
  if (!InputGrads) {
    // The forward writes h' in place; c' is the tape's cell state.
    if (Lstm)
      rnn::lstmForward<T>(C, Call, Sh, P, X.as<T>(), H0, C0, Out.as<T>(), Tp);
    else
      rnn::gruForward<T>(C, Call, Sh, P, LinearBeforeReset, X.as<T>(), H0,
                         Out.as<T>(), Tp);
    if (Lstm && operand(Call.Outputs, 1).present() && B > 0)
      checkCuda(Call,
                cudaMemcpyAsync(Call.Outputs[1].Data, Tp.Cell.get(),
                                B * Units * sizeof(T), cudaMemcpyDeviceToDevice,
                                C.Stream),
                "cudaMemcpyAsync (c')");
    return;
  }

  Scratch<T> Y(Call, C, B * Units);
  if (Lstm)
    rnn::lstmForward<T>(C, Call, Sh, P, X.as<T>(), H0, C0, Y.get(), Tp);
  else
    rnn::gruForward<T>(C, Call, Sh, P, LinearBeforeReset, X.as<T>(), H0,
                       Y.get(), Tp);
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
    rnn::lstmBackward<T>(C, Call, Sh, P, X.as<T>(), H0, C0, Y.get(), Tp, DY,
                         nullptr, DC, G);
  else
    rnn::gruBackward<T>(C, Call, Sh, P, LinearBeforeReset, X.as<T>(), H0,
                        Y.get(), Tp, DY, nullptr, G);
}

bool anyPresent(const Views &Vs) {
  for (const TensorView &V : Vs)
    if (V.present())
      return true;
  return false;
}

template <typename T>
void run(const Context &C, const OpCall &Call, const Views *OutputGrads,
         const Views *InputGrads) {
  switch (Call.Kind) {
  case OpKind::LSTM:
    return runLayer<T>(C, Call, true, OutputGrads, InputGrads);
  case OpKind::GRU:
    return runLayer<T>(C, Call, false, OutputGrads, InputGrads);
  case OpKind::LSTMCell:
    return runCell<T>(C, Call, true, OutputGrads, InputGrads);
  case OpKind::GRUCell:
    return runCell<T>(C, Call, false, OutputGrads, InputGrads);
  default:
    failOp(Call, "is not a recurrent op");
  }
}

void dispatch(const Context &C, const OpCall &Call, const Views *OutputGrads,
              const Views *InputGrads) {
  bool Layer = Call.Kind == OpKind::LSTM || Call.Kind == OpKind::GRU;
  DType Type = checkFloatOperands(Call, OutputGrads, InputGrads,
                                  Layer ? 4 : ~0u); // 4: sequence_lens
  if (Type == DType::Float32)
    run<float>(C, Call, OutputGrads, InputGrads);
  else
    run<double>(C, Call, OutputGrads, InputGrads);
}

} // namespace

void forwardRecurrent(Context &C, const OpCall &Call) {
  dispatch(C, Call, nullptr, nullptr);
}

void backwardRecurrent(Context &C, const OpCall &Call, const Views &OutputGrads,
                       const Views &InputGrads) {
  if (!anyPresent(InputGrads) || !anyPresent(OutputGrads))
    return; // nothing to add
  dispatch(C, Call, &OutputGrads, &InputGrads);
}

} // namespace onnx2soap::rt::cuda
