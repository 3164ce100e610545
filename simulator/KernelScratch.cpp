//===- simulator/KernelScratch.cpp - Scratch of one kernel call -----------===//
//
// Each formula follows the Scratch buffers of the CUDA kernel it names
// (runtime_lib/cuda), with the partition's regions for the call's tensors.
//
//===----------------------------------------------------------------------===//
#include "simulator/KernelScratch.h"
#include "ir/BatchDims.h"

namespace onnx2soap::simulator {

namespace {

using ir::Interval;

/// The extents of a region.
llvm::SmallVector<int64_t, 4> extents(llvm::ArrayRef<Interval> R) {
  llvm::SmallVector<int64_t, 4> Sizes;
  for (const Interval &I : R)
    Sizes.push_back(I.size());
  return Sizes;
}

/// Whether the partition computes less than the whole of a spatial dim
/// (dims 2 and up) of output 0: its pads then differ from the op's.
bool splitOverSpace(const ir::Graph &G, const ir::Op &O,
                    llvm::ArrayRef<Interval> Out) {
  const ir::Shape &Dims = G.outputType(O).Dims;
  for (size_t D = 2; D < Out.size() && D < Dims.size(); ++D)
    if (Out[D].size() != Dims[D])
      return true;
  return false;
}

/// Convolution.cu: the workspace (at most the device's limit) and, where
/// cuDNN's symmetric padding does not fit, a padded copy of the big tensor
/// (Conv's input, ConvTranspose's output): [N, C, (small - 1) * stride +
/// dilated kernel] in float.
double convolution(const ir::Graph &G, const ir::Op &O,
                   llvm::ArrayRef<Interval> Out, ir::Interval Reduction,
                   const DeviceType &Device) {
  bool Transposed = O.Kind == ir::OpKind::ConvTranspose;
  auto Pads = O.Attrs.getInts("pads");
  auto Strides = O.Attrs.getInts("strides");
  auto Dilations = O.Attrs.getInts("dilations");
  auto OutputPadding = O.Attrs.getInts("output_padding");
  size_t Spatial = Pads.size() / 2;
  auto StrideOf = [&](size_t D) { return D < Strides.size() ? Strides[D] : 1; };
  // The dilated kernel's span in spatial dim D, from W's extent there.
  auto SpanOf = [&](size_t D, int64_t Kernel) {
    return (Kernel - 1) * (D < Dilations.size() ? Dilations[D] : 1) + 1;
  };
  const ir::OpKindInfo &Info = ir::opKindInfo(O.Kind);
  ir::Region X = Info.InputRegion(G, O, 0, Out, Reduction);
  ir::Region W = Info.InputRegion(G, O, 1, Out, Reduction);
  // Direct when, in every spatial dim, cuDNN's floor formula with the begin
  // pad on both sides gives the small size, past it by less than a stride:
  // slack = big + 2 * begin - extent - (small - 1) * stride in [0, stride).
  const ir::TensorType *XType = G.inputType(O, 0);
  const ir::Shape &YDims = G.outputType(O).Dims;
  bool Direct = !splitOverSpace(G, O, Out) && XType;
  for (size_t D = 0; Direct && D < Spatial; ++D) {
    int64_t Begin = Pads[D], End = Pads[D + Spatial];
    int64_t Slack;
    if (Transposed) {
      Slack = (D < OutputPadding.size() ? OutputPadding[D] : 0) + Begin - End;
    } else {
      int64_t Span = SpanOf(D, G.inputType(O, 1)->Dims[D + 2]);
      int64_t Big = XType->Dims[D + 2], Small = YDims[D + 2];
      Slack = Big + 2 * Begin - Span - (Small - 1) * StrideOf(D);
    }
    Direct = Slack >= 0 && Slack < StrideOf(D);
  }
  double Scratch = double(Device.ConvWorkspace);
  if (Direct)
    return Scratch;
  // Small is the tensor the convolution maps to: Conv's output,
  // ConvTranspose's input. Big's channels: Conv's input region's, the
  // output region's for ConvTranspose.
  llvm::ArrayRef<Interval> Small =
      Transposed ? llvm::ArrayRef<Interval>(X) : Out;
  double Big =
      double(Out[0].size()) * double(Transposed ? Out[1].size() : X[1].size());
  for (size_t D = 0; D < Spatial && D + 2 < Small.size() && D + 2 < W.size();
       ++D) {
    Big *= double(std::max<int64_t>(0, Small[D + 2].size() - 1) * StrideOf(D) +
                  SpanOf(D, W[D + 2].size()));
  }
  return Scratch + 4 * Big;
}

/// MatMul.cu, backward: the gradient of an operand broadcast over batch dims
/// is computed in full over the output's batch, then reduced.
double matMulBackward(const ir::Graph &G, const ir::Op &O,
                      llvm::ArrayRef<Interval> Out, ir::Interval Reduction) {
  const ir::OpKindInfo &Info = ir::opKindInfo(O.Kind);
  llvm::SmallVector<int64_t, 4> A =
      extents(Info.InputRegion(G, O, 0, Out, Reduction));
  llvm::SmallVector<int64_t, 4> B =
      extents(Info.InputRegion(G, O, 1, Out, Reduction));
  if (A.empty() || B.empty())
    return 0;
  double M = A.size() >= 2 ? double(A[A.size() - 2]) : 1;
  double K = double(A.back());
  double N = B.size() >= 2 ? double(B.back()) : 1;
  double VolumeA = double(ir::numElements(A)),
         VolumeB = double(ir::numElements(B)),
         VolumeY = double(ir::regionVolume(Out));
  if (M * K == 0 || K * N == 0 || M * N == 0)
    return 0;
  double BatchY = VolumeY / (M * N);
  double BatchA = VolumeA / (M * K), BatchB = VolumeB / (K * N);
  if (BatchB == 1)
    return 0; // B without batch: folded into A's rows
  double Scratch = 0;
  if (BatchA < BatchY)
    Scratch = std::max(Scratch, 4 * BatchY * M * K);
  if (BatchB < BatchY)
    Scratch = std::max(Scratch, 4 * BatchY * K * N);
  return Scratch;
}

/// Recurrent.cu: a whole LSTM or GRU layer, every gradient present.
double recurrentLayer(const ir::Graph &G, const ir::Op &O,
                      llvm::ArrayRef<Interval> Out, ir::Interval Reduction,
                      bool Backward) {
  const ir::OpKindInfo &Info = ir::opKindInfo(O.Kind);
  llvm::SmallVector<int64_t, 4> X =
      extents(Info.InputRegion(G, O, 0, Out, Reduction));
  if (X.size() != 3)
    return 0;
  bool BatchFirst = O.Attrs.getInt("layout") == 1;
  double S = double(BatchFirst ? X[1] : X[0]);
  double B = double(BatchFirst ? X[0] : X[1]);
  double I = double(X[2]);
  double H = double(O.Attrs.getInt("hidden_size"));
  double E = ir::dtypeSize(G.outputType(O).Type);
  double TimeMajor = BatchFirst ? S * B * I : 0;
  if (O.Kind == ir::OpKind::LSTM) {
    bool Peepholes = O.Inputs.size() > 7 && O.Inputs[7] != ir::NoTensor;
    if (!Backward)
      return E * (TimeMajor + 6 * S * B * H + 2 * B * H);
    return E * (2 * TimeMajor + (11 + 3 * Peepholes) * S * B * H + 9 * B * H);
  }
  double Lbr = O.Attrs.getInt("linear_before_reset") ? 1 : 0;
  if (!Backward)
    return E * (TimeMajor + (4 + Lbr) * S * B * H + (6 - Lbr) * B * H);
  return E * (2 * TimeMajor + (11 + Lbr) * S * B * H + (8 - 2 * Lbr) * B * H);
}

/// Recurrent.cu: one LSTMCell or GRUCell computing U of the hidden units.
double recurrentCell(const ir::Graph &G, const ir::Op &O,
                     llvm::ArrayRef<Interval> Out, bool Backward) {
  if (Out.size() != 2)
    return 0;
  double B = double(Out[0].size()), U = double(Out[1].size());
  double H = double(O.Attrs.getInt("hidden_size"));
  double E = ir::dtypeSize(G.outputType(O).Type);
  if (O.Kind == ir::OpKind::LSTMCell)
    return E * (Backward ? 11 * B * U + 2 * B * H : 5 * B * U);
  double Lbr = O.Attrs.getInt("linear_before_reset") ? 1 : 0;
  return E * (Backward ? (14 - Lbr) * B * H : 7 * B * H);
}

} // namespace

double kernelScratchBytes(const ir::Graph &G, const ir::Op &O,
                          llvm::ArrayRef<Interval> Out, ir::Interval Reduction,
                          bool Backward, const DeviceType &Device) {
  double OutputElements = double(ir::regionVolume(Out));
  double E = ir::dtypeSize(G.outputType(O).Type);
  switch (O.Kind) {
  case ir::OpKind::Conv:
  case ir::OpKind::ConvTranspose:
    return convolution(G, O, Out, Reduction, Device);
  case ir::OpKind::MatMul:
    return Backward ? matMulBackward(G, O, Out, Reduction) : 0;
  case ir::OpKind::MaxPool:
    return Backward ? 8 * OutputElements : 0;
  case ir::OpKind::Max:
  case ir::OpKind::Min:
    return Backward ? 2 * OutputElements * E : 0;
  case ir::OpKind::BatchNorm:
    return Out.size() > 1 ? double(Out[1].size()) * (Backward ? 32 : 16) : 0;
  case ir::OpKind::LayerNorm: {
    if (!Backward)
      return 0;
    int64_t Axis = O.Attrs.getInt("axis");
    double Rows = 1, Cols = 1;
    for (size_t D = 0; D < Out.size(); ++D)
      (int64_t(D) < Axis ? Rows : Cols) *= double(Out[D].size());
    return 16 * Rows + 16 * Cols;
  }
  case ir::OpKind::SoftmaxCrossEntropyLoss: {
    // Per position (a label): the log-sum-exp in the scores' type and the
    // label as int64, and three flags.
    const ir::OpKindInfo &Info = ir::opKindInfo(O.Kind);
    double Positions =
        double(ir::regionVolume(Info.InputRegion(G, O, 1, Out, Reduction)));
    const ir::TensorType *Scores = G.inputType(O, 0);
    double ScoreSize = Scores ? ir::dtypeSize(Scores->Type) : 4;
    return Positions * (ScoreSize + 8) + 24;
  }
  case ir::OpKind::LSTM:
  case ir::OpKind::GRU:
    return recurrentLayer(G, O, Out, Reduction, Backward);
  case ir::OpKind::LSTMCell:
  case ir::OpKind::GRUCell:
    return recurrentCell(G, O, Out, Backward);
  case ir::OpKind::Gather:
    return 8;
  case ir::OpKind::Div:
    return !Backward && !ir::isFloatingPoint(G.outputType(O).Type) ? 4 : 0;
  default:
    return 0;
  }
}

} // namespace onnx2soap::simulator
