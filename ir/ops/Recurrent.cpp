//===- ir/ops/Recurrent.cpp - LSTM, GRU and their unrolled cells ----------===//
//
// A whole recurrent layer (ONNX's LSTM / GRU) can only be split along the
// batch: each step needs the previous step's full hidden state. Unrolled
// cells (ir/RnnUnroll.h) expose one op per step, splittable along the batch
// and the hidden units, as in FlexFlow's RNN experiments.
//
// LSTM inputs: X, W, R, B?, sequence_lens?, initial_h?, initial_c?, P?;
// outputs Y, Y_h, Y_c. GRU inputs: X, W, R, B?, sequence_lens?, initial_h?;
// outputs Y, Y_h. Attributes: `hidden_size`, `direction` ("forward",
// "reverse", "bidirectional"), `layout` (0: [T,B,..], 1: [B,T,..]); GRU also
// `linear_before_reset`. Only the default activations are represented.
//
// LSTMCell inputs: x [B,I], h [B,H], c [B,H], W, R, B? (the layer's tensors,
// all directions, gate-major: W [D,G,H,I], R [D,G,H,H], B [D,2G,H] with G
// gates, the layer's reshaped so that a slice of hidden units reads one box
// of each); outputs h', c'. GRUCell inputs: x, h, W, R, B?; output h'.
// Attributes: `hidden_size`, `direction_index` (which direction's slice of W,
// R, B the cell uses); GRUCell also `linear_before_reset`.
//
//===----------------------------------------------------------------------===//
#include "ir/ops/OpHelpers.h"

namespace onnx2soap::ir {
using namespace ops;

static int64_t numDirections(const Attributes &Attrs) {
  return Attrs.getString("direction", "forward") == "bidirectional" ? 2 : 1;
}

/// An operand (absent: null) of the expected dims.
static llvm::Error checkDims(const TensorType *T, const Shape &Expected,
                             const char *What) {
  if (T && T->Dims != Expected)
    return fail("{0} is {1}, expected {2}", What, formatShape(T->Dims),
                formatShape(Expected));
  return llvm::Error::success();
}

/// Checks W, R, B (and P) of a recurrent layer with Gates gates and returns
/// the input size.
static llvm::Error checkWeights(InputTypes In, int64_t Gates, int64_t D,
                                int64_t H, int64_t I) {
  auto Check = checkDims;
  if (auto E = Check(In[1], {D, Gates * H, I}, "W"))
    return E;
  if (auto E = Check(In[2], {D, Gates * H, H}, "R"))
    return E;
  if (In.size() > 3)
    return Check(In[3], {D, 2 * Gates * H}, "B");
  return llvm::Error::success();
}

template <int Gates>
static llvm::Expected<OutputTypes> inferRecurrent(const Attributes &Attrs,
                                                  InputTypes In) {
  const Shape &X = In[0]->Dims;
  if (X.size() != 3)
    return fail("X {0} must be 3-D", formatShape(X));
  llvm::StringRef Direction = Attrs.getString("direction", "forward");
  if (Direction != "forward" && Direction != "reverse" &&
      Direction != "bidirectional")
    return fail("unknown direction '{0}'", Direction);
  bool BatchFirst = Attrs.getInt("layout") == 1;
  int64_t T = BatchFirst ? X[1] : X[0], B = BatchFirst ? X[0] : X[1];
  int64_t D = numDirections(Attrs), H = Attrs.getInt("hidden_size");
  if (H <= 0)
    return fail("hidden_size must be positive");
  if (auto E = checkWeights(In, Gates, D, H, X[2]))
    return E;
  Shape State = BatchFirst ? Shape{B, D, H} : Shape{D, B, H};
  for (unsigned I = 5; I < In.size() && I < 7; ++I)
    if (In[I] && In[I]->Dims != State)
      return fail("initial state {0} does not match {1}",
                  formatShape(In[I]->Dims), formatShape(State));
  if (In.size() > 4 && In[4] && In[4]->Dims != Shape{B})
    return fail("sequence_lens {0} does not match batch {1}",
                formatShape(In[4]->Dims), B);
  if (Gates == 4 && In.size() > 7 && In[7] && In[7]->Dims != Shape{D, 3 * H})
    return fail("P {0} does not match [{1},{2}]", formatShape(In[7]->Dims), D,
                3 * H);
  Shape Y = BatchFirst ? Shape{B, T, D, H} : Shape{T, D, B, H};
  OutputTypes Out{TensorType{In[0]->Type, Y}, TensorType{In[0]->Type, State}};
  if (Gates == 4)
    Out.push_back(TensorType{In[0]->Type, State});
  return Out;
}

/// FLOPs of one cell step for a batch of B: the two gate GEMMs plus the
/// pointwise gate math.
static double cellFlops(int64_t Gates, int64_t B, int64_t I, int64_t H) {
  return 2.0 * B * Gates * H * (I + H) + 8.0 * Gates * B * H;
}

template <int Gates> static OpCost recurrentCost(const Graph &G, const Op &O) {
  const Shape &X = G.inputType(O, 0)->Dims;
  bool BatchFirst = O.Attrs.getInt("layout") == 1;
  int64_t T = BatchFirst ? X[1] : X[0], B = BatchFirst ? X[0] : X[1];
  double Flops = T * numDirections(O.Attrs) *
                 cellFlops(Gates, B, X[2], O.Attrs.getInt("hidden_size"));
  double Bytes = ioBytes(G, O);
  return {Flops, 2 * Flops, Bytes, 2 * Bytes};
}

static ParallelDims recurrentParallel(const Graph &G, const Op &O) {
  ParallelDims P;
  P.Output.assign(4, DimKind::None);
  P.Output[O.Attrs.getInt("layout") == 1 ? 0 : 2] = DimKind::Attribute;
  return P;
}

static Region recurrentRegion(const Graph &G, const Op &O, unsigned Input,
                              llvm::ArrayRef<Interval> Out, Interval) {
  bool BatchFirst = O.Attrs.getInt("layout") == 1;
  Interval Batch = Out[BatchFirst ? 0 : 2];
  Region R = fullRegion(G.inputType(O, Input)->Dims);
  switch (Input) {
  case 0: // X
    R[BatchFirst ? 0 : 1] = Batch;
    break;
  case 4: // sequence_lens
    R[0] = Batch;
    break;
  case 5: // initial_h
  case 6: // initial_c
    R[BatchFirst ? 0 : 1] = Batch;
    break;
  default: // weights
    break;
  }
  return R;
}

template <int Gates>
static OpKindInfo recurrentInfo(OpKind Kind, unsigned MaxInputs,
                                uint32_t WeightInputs) {
  OpKindInfo I;
  I.Kind = Kind;
  I.MinInputs = 3;
  I.MaxInputs = MaxInputs;
  I.WeightInputs = WeightInputs;
  I.NoGradInputs = 1u << 4; // sequence_lens
  I.InferTypes = inferRecurrent<Gates>;
  I.Cost = recurrentCost<Gates>;
  I.Parallel = recurrentParallel;
  I.InputRegion = recurrentRegion;
  return I;
}

const OpKindInfo &infoLSTM() {
  static const OpKindInfo Info = recurrentInfo<4>(OpKind::LSTM, 8, 0b10001110);
  return Info;
}

const OpKindInfo &infoGRU() {
  static const OpKindInfo Info = recurrentInfo<3>(OpKind::GRU, 6, 0b1110);
  return Info;
}

//===-- Cells -------------------------------------------------------------===//

/// Cell inputs: x, h, [c,] W, R, B? — WeightBase is the index of W.
template <int Gates, unsigned WeightBase>
static llvm::Expected<OutputTypes> inferCell(const Attributes &Attrs,
                                             InputTypes In) {
  const Shape &X = In[0]->Dims;
  int64_t H = Attrs.getInt("hidden_size");
  if (X.size() != 2 || H <= 0)
    return fail("cell input {0} must be [batch,input] with hidden_size > 0",
                formatShape(X));
  // The layer's weights, gate-major (RnnUnroll views them so): W [D, Gates,
  // H, I], R [D, Gates, H, H], B [D, 2 * Gates, H], so that the rows of a
  // slice of hidden units are one box. A partition of a cell split over its
  // hidden units gets Units < H of them (and one direction's weights): it
  // reads the whole previous h and computes h' (and c') for its units.
  const TensorType *W = In[WeightBase];
  if (W->Dims.size() != 4)
    return fail("W {0} must be [directions,gates,hidden,input]",
                formatShape(W->Dims));
  int64_t D = W->Dims[0], Units = W->Dims[2];
  int64_t Direction = Attrs.getInt("direction_index");
  if (Direction < 0 || (Direction >= D && D != 1))
    return fail("direction_index {0} is out of range for W {1}", Direction,
                formatShape(W->Dims));
  if (Units <= 0 || Units > H)
    return fail("W {0} holds {1} hidden units per gate, hidden_size is {2}",
                formatShape(W->Dims), Units, H);
  auto Check = checkDims;
  if (auto E = Check(In[1], {X[0], H}, "h"))
    return E;
  if (Gates == 4)
    if (auto E = Check(In[2], {X[0], Units}, "c"))
      return E;
  if (auto E = Check(W, {D, Gates, Units, X[1]}, "W"))
    return E;
  if (auto E = Check(In[WeightBase + 1], {D, Gates, Units, H}, "R"))
    return E;
  if (In.size() > WeightBase + 2)
    if (auto E = Check(In[WeightBase + 2], {D, 2 * Gates, Units}, "B"))
      return E;
  Shape State{X[0], Units};
  OutputTypes Out{TensorType{In[0]->Type, State}};
  if (Gates == 4)
    Out.push_back(TensorType{In[0]->Type, State});
  return Out;
}

template <int Gates> static OpCost cellCost(const Graph &G, const Op &O) {
  const Shape &X = G.inputType(O, 0)->Dims;
  double Flops = cellFlops(Gates, X[0], X[1], O.Attrs.getInt("hidden_size"));
  double Bytes = ioBytes(G, O);
  return {Flops, 2 * Flops, Bytes, 2 * Bytes};
}

/// An LSTM cell splits over its hidden units (each part reads the whole
/// previous h); a GRU cell does not: its candidate state needs the reset
/// gate of every unit (r * h before R) or, with linear_before_reset, the
/// part's offset into h, which the kernels do not take.
template <int Gates>
static ParallelDims cellParallel(const Graph &, const Op &) {
  ParallelDims P;
  P.Output = {DimKind::Attribute,
              Gates == 4 ? DimKind::Parameter : DimKind::None};
  return P;
}

template <int Gates, unsigned WeightBase>
static Region cellRegion(const Graph &G, const Op &O, unsigned Input,
                         llvm::ArrayRef<Interval> Out, Interval) {
  const Shape &Dims = G.inputType(O, Input)->Dims;
  Region R = fullRegion(Dims);
  if (Input < WeightBase) {
    R[0] = Out[0];
    // The recurrent GEMM needs the whole previous h; the LSTM cell state is
    // elementwise in the hidden units.
    if (Gates == 4 && Input == 2)
      R[1] = Out[1];
    return R;
  }
  // Weights: this direction, every gate, the hidden units computed.
  int64_t Direction = O.Attrs.getInt("direction_index");
  R[0] = {Direction, Direction + 1};
  R[2] = Out[1];
  return R;
}

template <int Gates, unsigned WeightBase>
static OpKindInfo cellInfo(OpKind Kind) {
  OpKindInfo I;
  I.Kind = Kind;
  I.MinInputs = WeightBase + 2;
  I.MaxInputs = WeightBase + 3;
  I.WeightInputs = 0b111u << WeightBase;
  I.InferTypes = inferCell<Gates, WeightBase>;
  I.Cost = cellCost<Gates>;
  I.Parallel = cellParallel<Gates>;
  I.InputRegion = cellRegion<Gates, WeightBase>;
  return I;
}

const OpKindInfo &infoLSTMCell() {
  static const OpKindInfo Info = cellInfo<4, 3>(OpKind::LSTMCell);
  return Info;
}

const OpKindInfo &infoGRUCell() {
  static const OpKindInfo Info = cellInfo<3, 2>(OpKind::GRUCell);
  return Info;
}

} // namespace onnx2soap::ir
