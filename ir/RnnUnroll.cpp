//===- ir/RnnUnroll.cpp - Unrolling recurrent layers into cells -----------===//
//
// Step t of direction d reads x_t = Gather(X, t) along the time axis (or,
// when X is the sequence an unrolled layer below assembled, that layer's
// step-t output itself) and the previous step's state; Y, Y_h (and Y_c) are
// rebuilt with Reshape + Concat so every reader of the layer sees the same
// tensors as before.
//
//===----------------------------------------------------------------------===//
#include "ir/RnnUnroll.h"
#include "ir/Error.h"
#include "llvm/Support/FormatVariadic.h"
#include <cstring>

namespace onnx2soap::ir {

namespace {
/// Adds ops named after the layer, with fresh suffixes.
class Builder {
public:
  Builder(Graph &G, std::string Prefix) : G(G), Prefix(std::move(Prefix)) {}

  llvm::Expected<TensorId> op(OpKind Kind, llvm::ArrayRef<TensorId> Inputs,
                              Attributes Attrs, unsigned Output = 0) {
    return named(fresh(opKindName(Kind)), Kind, Inputs, std::move(Attrs),
                 Output);
  }

  /// An op named Name. The weight views are named without the counter, so
  /// that the other ops keep the names strategy files know them by.
  llvm::Expected<TensorId> named(std::string Name, OpKind Kind,
                                 llvm::ArrayRef<TensorId> Inputs,
                                 Attributes Attrs, unsigned Output = 0) {
    auto Id = G.addOp(Kind, std::move(Name), Inputs, std::move(Attrs));
    if (!Id)
      return Id.takeError();
    return G.op(*Id).Outputs[Output];
  }

  llvm::Expected<OpId> cell(OpKind Kind, llvm::ArrayRef<TensorId> Inputs,
                            Attributes Attrs) {
    return G.addOp(Kind, fresh(opKindName(Kind)), Inputs, std::move(Attrs));
  }

  TensorId int64Scalar(int64_t Value) {
    std::vector<char> Bytes(sizeof Value);
    std::memcpy(Bytes.data(), &Value, sizeof Value);
    return G.addTensor(fresh("index"), TensorType{DType::Int64, {}},
                       TensorRole::Constant,
                       TensorData::owned(std::move(Bytes)));
  }

  TensorId zeros(TensorType Type) {
    std::vector<char> Bytes(Type.byteSize(), 0);
    return G.addTensor(fresh("zeros"), std::move(Type), TensorRole::Constant,
                       TensorData::owned(std::move(Bytes)));
  }

  llvm::Expected<TensorId> reshape(TensorId In, Shape To) {
    return op(OpKind::Reshape, {In}, shapeAttrs(To));
  }

  /// The layer's weight In viewed as To, named Prefix/What.
  llvm::Expected<TensorId> weightView(TensorId In, Shape To,
                                      llvm::StringRef What) {
    return named((Prefix + "/" + What).str(), OpKind::Reshape, {In},
                 shapeAttrs(To));
  }

  llvm::Expected<TensorId> gather(TensorId In, int64_t Index, int64_t Axis) {
    Attributes A;
    A.set("axis", Axis);
    return op(OpKind::Gather, {In, int64Scalar(Index)}, std::move(A));
  }

  llvm::Expected<TensorId> concat(llvm::ArrayRef<TensorId> In, int64_t Axis) {
    if (In.size() == 1)
      return In[0];
    Attributes A;
    A.set("axis", Axis);
    return op(OpKind::Concat, In, std::move(A));
  }

private:
  static Attributes shapeAttrs(const Shape &To) {
    Attributes A;
    A.set("shape", IntList(To.begin(), To.end()));
    return A;
  }
  std::string fresh(llvm::StringRef What) {
    return llvm::formatv("{0}/{1}_{2}", Prefix, What, Counter++).str();
  }
  Graph &G;
  std::string Prefix;
  unsigned Counter = 0;
};
} // namespace

/// Dims other than 1, in order.
static Shape withoutOnes(const Shape &Dims) {
  Shape Kept;
  for (int64_t Dim : Dims)
    if (Dim != 1)
      Kept.push_back(Dim);
  return Kept;
}

/// Which of Dims is the K-th dim other than 1, or -1.
static int64_t nthNonOne(const Shape &Dims, size_t K) {
  for (size_t I = 0; I < Dims.size(); ++I)
    if (Dims[I] != 1 && K-- == 0)
      return I;
  return -1;
}

/// A tensor holding Gather(X, Time, TimeAxis) that already exists, when X
/// is a sequence an unrolled layer below assembled: a Concat of one-step
/// parts along the time axis, possibly reshaped by dropping or adding
/// dims of 1 (PyTorch squeezes the direction dim between layers). Reading
/// the part itself lets step t of this layer start as soon as step t of
/// the layer below has ended, as in FlexFlow's RNN graphs, instead of after
/// the whole sequence. NoTensor when X is anything else.
static TensorId existingStep(const Graph &G, TensorId X, int64_t Time,
                             int64_t TimeAxis) {
  const Shape &XDims = G.tensor(X).Type.Dims;
  int64_t Steps = XDims[TimeAxis];
  if (Steps < 2)
    return NoTensor;
  TensorId Seq = X;
  int64_t Axis = TimeAxis;
  OpId P = G.tensor(X).Producer;
  if (P != NoOp && G.op(P).Kind == OpKind::Reshape) {
    Seq = G.op(P).Inputs[0];
    const Shape &SeqDims = G.tensor(Seq).Type.Dims;
    if (withoutOnes(SeqDims) != withoutOnes(XDims))
      return NoTensor;
    size_t K = 0;
    for (int64_t I = 0; I < TimeAxis; ++I)
      K += XDims[I] != 1;
    Axis = nthNonOne(SeqDims, K);
    P = G.tensor(Seq).Producer;
  }
  if (P == NoOp || G.op(P).Kind != OpKind::Concat)
    return NoTensor;
  const Op &Cat = G.op(P);
  int64_t Rank = G.tensor(Seq).Type.Dims.size();
  int64_t CatAxis = Cat.Attrs.getInt("axis");
  if (CatAxis < 0)
    CatAxis += Rank;
  if (CatAxis != Axis || int64_t(Cat.Inputs.size()) != Steps)
    return NoTensor;
  TensorId Part = Cat.Inputs[Time];
  if (G.tensor(Part).Type.Dims[Axis] != 1)
    return NoTensor;
  // The part as a cell wrote it, before it was reshaped to one step of Y.
  Shape StepDims = XDims;
  StepDims.erase(StepDims.begin() + TimeAxis);
  OpId PartProducer = G.tensor(Part).Producer;
  if (PartProducer != NoOp && G.op(PartProducer).Kind == OpKind::Reshape) {
    TensorId Cell = G.op(PartProducer).Inputs[0];
    if (G.tensor(Cell).Type.Dims == StepDims)
      return Cell;
  }
  return NoTensor;
}

static llvm::Error unrollOne(Graph &G, OpId Id) {
  Op Layer = G.op(Id); // copy: adding ops may reallocate
  bool IsLstm = Layer.Kind == OpKind::LSTM;
  auto Input = [&](unsigned I) {
    return I < Layer.Inputs.size() ? Layer.Inputs[I] : NoTensor;
  };
  auto Fail = [&](const char *Why) {
    return fail(llvm::formatv("--unroll-rnn: cannot unroll {0} '{1}': {2}",
                              opKindName(Layer.Kind), Layer.Name, Why));
  };
  if (Input(4) != NoTensor)
    return Fail("it has sequence_lens");
  if (IsLstm && Input(7) != NoTensor)
    return Fail("it has peephole weights");

  const Shape &X = G.tensor(Layer.Inputs[0]).Type.Dims;
  DType Type = G.tensor(Layer.Inputs[0]).Type.Type;
  bool BatchFirst = Layer.Attrs.getInt("layout") == 1;
  int64_t T = BatchFirst ? X[1] : X[0], B = BatchFirst ? X[0] : X[1];
  int64_t H = Layer.Attrs.getInt("hidden_size");
  llvm::StringRef Direction = Layer.Attrs.getString("direction", "forward");
  int64_t D = Direction == "bidirectional" ? 2 : 1;
  int64_t TimeAxis = BatchFirst ? 1 : 0, StateAxis = BatchFirst ? 1 : 0;
  Builder Build(G, Layer.Name);

  Attributes CellAttrs;
  CellAttrs.set("hidden_size", H);
  if (!IsLstm)
    CellAttrs.set("linear_before_reset",
                  Layer.Attrs.getInt("linear_before_reset"));

  // The cells read the weights gate-major, so that a slice of hidden units
  // is one box of each (the planner splits cells over them, and a box is
  // what a partition reads, ships and synchronizes): W [D, G*H, I] is viewed
  // as [D, G, H, I], R likewise, B [D, 2*G*H] as [D, 2*G, H]. The views are
  // weight-only ops, computed where they are read.
  int64_t Gates = IsLstm ? 4 : 3;
  int64_t InputSize = G.tensor(Layer.Inputs[1]).Type.Dims[2];
  auto W = Build.weightView(Layer.Inputs[1], Shape{D, Gates, H, InputSize},
                            "W_gates");
  if (!W)
    return W.takeError();
  auto R = Build.weightView(Layer.Inputs[2], Shape{D, Gates, H, H}, "R_gates");
  if (!R)
    return R.takeError();
  TensorId Bias = NoTensor;
  if (Input(3) != NoTensor) {
    auto Reshaped =
        Build.weightView(Input(3), Shape{D, 2 * Gates, H}, "B_gates");
    if (!Reshaped)
      return Reshaped.takeError();
    Bias = *Reshaped;
  }

  llvm::SmallVector<TensorId, 2> Ys, Hs, Cs;
  for (int64_t Dir = 0; Dir < D; ++Dir) {
    bool Reverse = Direction == "reverse" || Dir == 1;
    auto InitialState = [&](unsigned Slot) -> llvm::Expected<TensorId> {
      if (Input(Slot) == NoTensor)
        return Build.zeros(TensorType{Type, {B, H}});
      return Build.gather(Input(Slot), Dir, StateAxis);
    };
    auto Hid = InitialState(5);
    if (!Hid)
      return Hid.takeError();
    TensorId HState = *Hid, CState = NoTensor;
    if (IsLstm) {
      auto Cell = InitialState(6);
      if (!Cell)
        return Cell.takeError();
      CState = *Cell;
    }
    Attributes Attrs = CellAttrs;
    Attrs.set("direction_index", Dir);
    std::vector<TensorId> Steps(T, NoTensor);
    for (int64_t S = 0; S < T; ++S) {
      int64_t Time = Reverse ? T - 1 - S : S;
      TensorId Xt = existingStep(G, Layer.Inputs[0], Time, TimeAxis);
      if (Xt == NoTensor) {
        auto Gathered = Build.gather(Layer.Inputs[0], Time, TimeAxis);
        if (!Gathered)
          return Gathered.takeError();
        Xt = *Gathered;
      }
      llvm::SmallVector<TensorId, 6> In{Xt, HState};
      if (IsLstm)
        In.push_back(CState);
      In.append({*W, *R});
      if (Bias != NoTensor)
        In.push_back(Bias);
      auto Cell =
          Build.cell(IsLstm ? OpKind::LSTMCell : OpKind::GRUCell, In, Attrs);
      if (!Cell)
        return Cell.takeError();
      HState = G.op(*Cell).Outputs[0];
      if (IsLstm)
        CState = G.op(*Cell).Outputs[1];
      // Y's layout: [T,D,B,H] or [B,T,D,H]; one step is [1,1,B,H] / [B,1,1,H].
      auto Step = Build.reshape(HState, BatchFirst ? Shape{B, 1, 1, H}
                                                   : Shape{1, 1, B, H});
      if (!Step)
        return Step.takeError();
      Steps[Time] = *Step;
    }
    auto Y = Build.concat(Steps, TimeAxis);
    if (!Y)
      return Y.takeError();
    Ys.push_back(*Y);
    Shape StateShape = BatchFirst ? Shape{B, 1, H} : Shape{1, B, H};
    auto FinalH = Build.reshape(HState, StateShape);
    if (!FinalH)
      return FinalH.takeError();
    Hs.push_back(*FinalH);
    if (IsLstm) {
      auto FinalC = Build.reshape(CState, StateShape);
      if (!FinalC)
        return FinalC.takeError();
      Cs.push_back(*FinalC);
    }
  }
  auto Y = Build.concat(Ys, BatchFirst ? 2 : 1);
  auto Yh = Build.concat(Hs, StateAxis == 0 ? 0 : 1);
  if (!Y)
    return Y.takeError();
  if (!Yh)
    return Yh.takeError();
  G.replaceAllUses(Layer.Outputs[0], *Y);
  G.replaceAllUses(Layer.Outputs[1], *Yh);
  if (IsLstm) {
    auto Yc = Build.concat(Cs, StateAxis == 0 ? 0 : 1);
    if (!Yc)
      return Yc.takeError();
    G.replaceAllUses(Layer.Outputs[2], *Yc);
  }
  return llvm::Error::success();
}

llvm::Expected<bool> unrollRecurrent(Graph &G) {
  bool Changed = false;
  size_t Count = G.numOps();
  for (OpId Id = 0; Id < Count; ++Id) {
    OpKind Kind = G.op(Id).Kind;
    if (Kind != OpKind::LSTM && Kind != OpKind::GRU)
      continue;
    if (auto E = unrollOne(G, Id))
      return E;
    Changed = true;
  }
  if (Changed)
    G.compact();
  return Changed;
}

} // namespace onnx2soap::ir
