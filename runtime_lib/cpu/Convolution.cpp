//===- runtime_lib/cpu/Convolution.cpp - Conv and ConvTranspose -----------===//
//
// Conv and ConvTranspose over 1-D, 2-D and 3-D spatial dims with oneDNN's
// (de)convolution primitives on plain layouts: X [N,C,spatial...], Conv's W
// [M, C/group, k...] (goihw with groups), ConvTranspose's W [C_in,
// C_out/group, k...] (giohw: described to oneDNN by strides). The IR's
// dilations count like ONNX (1 = dense), oneDNN's from 0. ConvTranspose's
// output_padding enlarges the output at the end: oneDNN gets it as a smaller
// (possibly negative) end padding, which its primitives accept.
//
// Layouts: the views are plain, but oneDNN's fast (jit direct) convolutions
// want blocked layouts (nChw16c activations, OIhw16i16o weights); on plain
// ones it falls back to im2col + GEMM, about twice as slow. So every
// primitive is created with format_tag::any, as PyTorch does, and the
// operands are reordered into the layout it picks (through the backend's
// scratch pool) and back. Backward: oneDNN overwrites its results, so dX and
// dW are computed into scratch and added into the gradient views by the
// reorder back to the plain layout (a sum post-op: dst = src + dst); dB is a
// loop sum of dY.
//
//===----------------------------------------------------------------------===//
#include "ContractionKernels.h"
#include "Parallel.h"
#include <string>
#include <unordered_map>

namespace onnx2soap::rt::cpu {
using namespace dnnl_util;
using dnnl::algorithm;
using dnnl::prop_kind;

namespace {

/// Window attributes in oneDNN's conventions, and the operand descriptors.
struct ConvSetup {
  memory::dims Strides, Dilations, PadBegin, PadEnd;
  memory::desc Src, Weights, Dst, Bias;
  bool HasBias = false;
};

std::string formatDims(const TensorView &V) {
  std::string S = "[";
  for (int I = 0; I < V.Rank; ++I)
    S += (I ? "," : "") + std::to_string(V.Dims[I]);
  return S + "]";
}

/// A per-spatial-dim attribute, Default-filled when absent.
std::vector<int64_t> spatialAttr(const OpCall &Call, const char *Name,
                                 size_t Count, int64_t Default) {
  std::vector<int64_t> V = Call.Attrs.getInts(Name);
  if (V.empty())
    V.assign(Count, Default);
  if (V.size() != Count)
    failOp(Call, std::string("attribute '") + Name + "' has " +
                     std::to_string(V.size()) + " values, expected " +
                     std::to_string(Count));
  return V;
}

ConvSetup setupConv(const OpCall &Call, bool Transposed) {
  if (Call.Inputs.size() < 2 || Call.Outputs.size() != 1)
    failOp(Call, "expects inputs X, W (and optional B) and one output");
  const TensorView &X = Call.Inputs[0], &W = Call.Inputs[1],
                   &Y = Call.Outputs[0];
  TensorView B = Call.Inputs.size() > 2 ? Call.Inputs[2] : TensorView();
  requireDenseF32(Call, X, "input X");
  requireDenseF32(Call, W, "weight W");
  requireDenseF32(Call, Y, "output Y");
  if (B.present())
    requireDenseF32(Call, B, "bias B");
  if (X.Rank < 3 || X.Rank > 5 || W.Rank != X.Rank || Y.Rank != X.Rank)
    failOp(Call, "input " + formatDims(X) + ", weight " + formatDims(W) +
                     " and output " + formatDims(Y) +
                     " must all be [N,C,spatial...] with 1 to 3 spatial dims");
  size_t Spatial = X.Rank - 2;
  auto Kernel = spatialAttr(Call, "kernel_shape", Spatial, 0);
  auto Strides = spatialAttr(Call, "strides", Spatial, 1);
  auto Dilations = spatialAttr(Call, "dilations", Spatial, 1);
  auto Pads = spatialAttr(Call, "pads", 2 * Spatial, 0);
  auto OutputPadding = Transposed
                           ? spatialAttr(Call, "output_padding", Spatial, 0)
                           : std::vector<int64_t>(Spatial, 0);
  int64_t Group = Call.Attrs.getInt("group", 1);
  int64_t InChannels = X.Dims[1];
  int64_t OutChannels = Transposed ? W.Dims[1] * Group : W.Dims[0];
  bool ChannelsOk = Group > 0 && W.Dims[0] % Group == 0 &&
                    (Transposed ? W.Dims[0] == InChannels
                                : W.Dims[1] * Group == InChannels) &&
                    Y.Dims[0] == X.Dims[0] && Y.Dims[1] == OutChannels;
  if (!ChannelsOk)
    failOp(Call, "input " + formatDims(X) + ", weight " + formatDims(W) +
                     " and output " + formatDims(Y) +
                     " do not match with group " + std::to_string(Group));
  if (B.present() && (B.Rank != 1 || B.Dims[0] != OutChannels))
    failOp(Call, "bias " + formatDims(B) + " does not match " +
                     std::to_string(OutChannels) + " output channels");

  ConvSetup S;
  for (size_t I = 0; I < Spatial; ++I) {
    int64_t K = W.Dims[2 + I];
    if ((Kernel[I] != 0 && Kernel[I] != K) || Strides[I] <= 0 ||
        Dilations[I] <= 0)
      failOp(Call, "kernel_shape, strides or dilations do not fit weight " +
                       formatDims(W));
    int64_t Extent = (K - 1) * Dilations[I] + 1;
    int64_t In = X.Dims[2 + I], Out = Y.Dims[2 + I];
    int64_t PadBegin = Pads[I], PadEnd = Pads[Spatial + I];
    int64_t Expected = Transposed
                           ? Strides[I] * (In - 1) + OutputPadding[I] + Extent -
                                 PadBegin - PadEnd
                           : (In + PadBegin + PadEnd - Extent) / Strides[I] + 1;
    if (Out != Expected || Out <= 0)
      failOp(Call, "output " + formatDims(Y) + " does not match input " +
                       formatDims(X) +
                       " and the window attributes (spatial "
                       "dim " +
                       std::to_string(I) + " should be " +
                       std::to_string(Expected) + ")");
    S.Strides.push_back(Strides[I]);
    S.Dilations.push_back(Dilations[I] - 1);
    S.PadBegin.push_back(PadBegin);
    S.PadEnd.push_back(PadEnd - OutputPadding[I]);
  }

  S.Src = denseDesc(X.dims());
  S.Dst = denseDesc(Y.dims());
  // Weights in oneDNN's logical order [(G,) O, I, k...] over the ONNX
  // layout: Conv's is dense goihw; ConvTranspose's is [G, I/G, O/G, k...]
  // in memory.
  int64_t KernelElements = 1;
  for (size_t I = 0; I < Spatial; ++I)
    KernelElements *= W.Dims[2 + I];
  memory::dims KernelDims(W.Dims + 2, W.Dims + W.Rank);
  memory::dims KernelStrides = denseStrides(KernelDims);
  int64_t OutPerGroup = OutChannels / Group, InPerGroup = InChannels / Group;
  memory::dims WDims, WStrides;
  if (Group > 1) {
    WDims.push_back(Group);
    WStrides.push_back(OutPerGroup * InPerGroup * KernelElements);
  }
  WDims.push_back(OutPerGroup);
  WDims.push_back(InPerGroup);
  if (Transposed) {
    WStrides.push_back(KernelElements);
    WStrides.push_back(OutPerGroup * KernelElements);
  } else {
    WStrides.push_back(InPerGroup * KernelElements);
    WStrides.push_back(KernelElements);
  }
  WDims.insert(WDims.end(), KernelDims.begin(), KernelDims.end());
  WStrides.insert(WStrides.end(), KernelStrides.begin(), KernelStrides.end());
  S.Weights = memory::desc(WDims, memory::data_type::f32, WStrides);
  S.HasBias = B.present();
  S.Bias = denseDesc({OutChannels});
  return S;
}

/// The oneDNN primitives of Conv or of ConvTranspose.
template <bool Transposed> struct Prims;
template <> struct Prims<false> {
  using Forward = dnnl::convolution_forward;
  using BackwardData = dnnl::convolution_backward_data;
  using BackwardWeights = dnnl::convolution_backward_weights;
  static constexpr algorithm Algorithm = algorithm::convolution_direct;
};
template <> struct Prims<true> {
  using Forward = dnnl::deconvolution_forward;
  using BackwardData = dnnl::deconvolution_backward_data;
  using BackwardWeights = dnnl::deconvolution_backward_weights;
  static constexpr algorithm Algorithm = algorithm::deconvolution_direct;
};

/// Scratch slots of the blocked operands.
enum ScratchSlot : int {
  SrcSlot,
  WeightsSlot,
  DstSlot,
  DiffDstSlot,
  DiffDstWeightsSlot,
  DiffSrcSlot,
  DiffWeightsSlot,
};

/// Plain, in the layout Want: Plain itself when the layouts agree, else a
/// reorder of it into scratch slot Slot.
memory toLayout(Context &C, memory Plain, const memory::desc &Want,
                ScratchSlot Slot) {
  if (Plain.get_desc() == Want)
    return Plain;
  memory Blocked(Want, C.Engine, C.Scratch.get(Slot, Want.get_size()));
  dnnl::reorder(Plain, Blocked).execute(C.Stream, Plain, Blocked);
  return Blocked;
}

/// A result memory of layout Desc in scratch slot Slot.
memory scratchMemory(Context &C, const memory::desc &Desc, ScratchSlot Slot) {
  return memory(Desc, C.Engine, C.Scratch.get(Slot, Desc.get_size()));
}

/// Plain = From (any layout) reordered to Plain's layout, or, when
/// Accumulate, Plain += that.
void fromLayout(Context &C, memory From, memory Plain, bool Accumulate) {
  if (!Accumulate && From.get_desc() == Plain.get_desc())
    return;
  dnnl::primitive_attr Attr;
  if (Accumulate) {
    dnnl::post_ops Ops;
    Ops.append_sum(1.0f);
    Attr.set_post_ops(Ops);
  }
  dnnl::reorder::primitive_desc Pd(C.Engine, From.get_desc(), C.Engine,
                                   Plain.get_desc(), Attr);
  dnnl::reorder(Pd).execute(C.Stream, From, Plain);
}

/// The operand descriptors with the layouts left to oneDNN.
struct AnyLayouts {
  memory::desc Src, Weights, Dst;
};

AnyLayouts anyLayouts(const ConvSetup &S) {
  auto Any = [](const memory::desc &D) {
    return memory::desc(D.dims(), memory::data_type::f32,
                        memory::format_tag::any);
  };
  return {Any(S.Src), Any(S.Weights), Any(S.Dst)};
}

template <bool Transposed>
typename Prims<Transposed>::Forward::primitive_desc
forwardDesc(Context &C, const ConvSetup &S, const AnyLayouts &L,
            bool WithBias) {
  using Fwd = typename Prims<Transposed>::Forward;
  auto Desc = WithBias ? typename Fwd::desc(prop_kind::forward_training,
                                            Prims<Transposed>::Algorithm, L.Src,
                                            L.Weights, S.Bias, L.Dst, S.Strides,
                                            S.Dilations, S.PadBegin, S.PadEnd)
                       : typename Fwd::desc(prop_kind::forward_training,
                                            Prims<Transposed>::Algorithm, L.Src,
                                            L.Weights, L.Dst, S.Strides,
                                            S.Dilations, S.PadBegin, S.PadEnd);
  return typename Fwd::primitive_desc(Desc, C.Engine);
}

template <bool Transposed> void runForward(Context &C, const OpCall &Call) {
  ConvSetup S = setupConv(Call, Transposed);
  dnnlCall(Call, "forward", [&] {
    auto Pd = forwardDesc<Transposed>(C, S, anyLayouts(S), S.HasBias);
    memory Dst = wrap(C, S.Dst, Call.Outputs[0].Data);
    memory BlockedDst =
        Pd.dst_desc() == S.Dst ? Dst : scratchMemory(C, Pd.dst_desc(), DstSlot);
    std::unordered_map<int, memory> Args{
        {DNNL_ARG_SRC, toLayout(C, wrap(C, S.Src, Call.Inputs[0].Data),
                                Pd.src_desc(), SrcSlot)},
        {DNNL_ARG_WEIGHTS, toLayout(C, wrap(C, S.Weights, Call.Inputs[1].Data),
                                    Pd.weights_desc(), WeightsSlot)},
        {DNNL_ARG_DST, BlockedDst}};
    if (S.HasBias)
      Args.emplace(DNNL_ARG_BIAS, wrap(C, S.Bias, Call.Inputs[2].Data));
    typename Prims<Transposed>::Forward(Pd).execute(C.Stream, Args);
    fromLayout(C, BlockedDst, Dst, /*Accumulate=*/false);
    C.Stream.wait();
  });
}

template <bool Transposed>
void runBackward(Context &C, const OpCall &Call, const Views &OutputGrads,
                 const Views &InputGrads) {
  ConvSetup S = setupConv(Call, Transposed);
  auto Grad = [&](size_t I) {
    return I < InputGrads.size() ? InputGrads[I] : TensorView();
  };
  TensorView DX = Grad(0), DW = Grad(1), DB = Grad(2);
  if (OutputGrads.empty() || !OutputGrads[0].present())
    return;
  const TensorView &DY = OutputGrads[0];
  requireDenseF32(Call, DY, "output gradient");
  if (DY.numElements() != Call.Outputs[0].numElements())
    failOp(Call, "output gradient " + formatDims(DY) +
                     " does not match the output " +
                     formatDims(Call.Outputs[0]));
  const TensorView *Operands[] = {&Call.Inputs[0], &Call.Inputs[1],
                                  Call.Inputs.size() > 2 ? &Call.Inputs[2]
                                                         : nullptr};
  TensorView *Grads[] = {&DX, &DW, &DB};
  for (int I = 0; I < 3; ++I)
    if (Grads[I]->present()) {
      requireDenseF32(Call, *Grads[I], "input gradient");
      if (!Operands[I] || !Operands[I]->present() ||
          Grads[I]->numElements() != Operands[I]->numElements())
        failOp(Call, "gradient of input " + std::to_string(I) + " " +
                         formatDims(*Grads[I]) + " does not match its operand");
    }
  if (!DX.present() && !DW.present() && !DB.present())
    return;

  dnnlCall(Call, "backward", [&] {
    AnyLayouts L = anyLayouts(S);
    auto FwdPd = forwardDesc<Transposed>(C, S, L, false);
    memory PlainDiffDst = wrap(C, S.Dst, DY.Data);
    // dY in the backward-data layout, reused by backward-weights when that
    // wants the same one.
    memory DiffDst;
    if (DX.present()) {
      using Bwd = typename Prims<Transposed>::BackwardData;
      typename Bwd::desc Desc(Prims<Transposed>::Algorithm, L.Src, L.Weights,
                              L.Dst, S.Strides, S.Dilations, S.PadBegin,
                              S.PadEnd);
      typename Bwd::primitive_desc Pd(Desc, C.Engine, FwdPd);
      DiffDst = toLayout(C, PlainDiffDst, Pd.diff_dst_desc(), DiffDstSlot);
      memory DiffSrc = scratchMemory(C, Pd.diff_src_desc(), DiffSrcSlot);
      Bwd(Pd).execute(C.Stream,
                      {{DNNL_ARG_DIFF_DST, DiffDst},
                       {DNNL_ARG_WEIGHTS,
                        toLayout(C, wrap(C, S.Weights, Call.Inputs[1].Data),
                                 Pd.weights_desc(), WeightsSlot)},
                       {DNNL_ARG_DIFF_SRC, DiffSrc}});
      fromLayout(C, DiffSrc, wrap(C, S.Src, DX.Data), /*Accumulate=*/true);
    }
    if (DW.present()) {
      using Bwd = typename Prims<Transposed>::BackwardWeights;
      typename Bwd::desc Desc(Prims<Transposed>::Algorithm, L.Src, L.Weights,
                              L.Dst, S.Strides, S.Dilations, S.PadBegin,
                              S.PadEnd);
      typename Bwd::primitive_desc Pd(Desc, C.Engine, FwdPd);
      if (!DiffDst || DiffDst.get_desc() != Pd.diff_dst_desc())
        DiffDst =
            toLayout(C, PlainDiffDst, Pd.diff_dst_desc(), DiffDstWeightsSlot);
      memory DiffWeights =
          scratchMemory(C, Pd.diff_weights_desc(), DiffWeightsSlot);
      Bwd(Pd).execute(
          C.Stream,
          {{DNNL_ARG_DIFF_DST, DiffDst},
           {DNNL_ARG_SRC, toLayout(C, wrap(C, S.Src, Call.Inputs[0].Data),
                                   Pd.src_desc(), SrcSlot)},
           {DNNL_ARG_DIFF_WEIGHTS, DiffWeights}});
      fromLayout(C, DiffWeights, wrap(C, S.Weights, DW.Data),
                 /*Accumulate=*/true);
    }
    C.Stream.wait();
  });
  if (DB.present()) {
    // dB[m] += sum over samples and positions of dY[n, m, ...].
    const TensorView &Y = Call.Outputs[0];
    int64_t Samples = Y.Dims[0], Channels = Y.Dims[1];
    int64_t Positions = Y.numElements() / (Samples * Channels);
    const float *G = DY.as<float>();
    float *Out = DB.as<float>();
    parallelFor(Channels, Samples * Positions, [&](int64_t M) {
      double Sum = 0;
      for (int64_t N = 0; N < Samples; ++N) {
        const float *Row = G + (N * Channels + M) * Positions;
#pragma omp simd reduction(+ : Sum)
        for (int64_t P = 0; P < Positions; ++P)
          Sum += Row[P];
      }
      Out[M] += static_cast<float>(Sum);
    });
  }
}

} // namespace

void forwardConv(Context &C, const OpCall &Call, bool Transposed) {
  if (Transposed)
    runForward<true>(C, Call);
  else
    runForward<false>(C, Call);
}

void backwardConv(Context &C, const OpCall &Call, bool Transposed,
                  const Views &OutputGrads, const Views &InputGrads) {
  if (Transposed)
    runBackward<true>(C, Call, OutputGrads, InputGrads);
  else
    runBackward<false>(C, Call, OutputGrads, InputGrads);
}

} // namespace onnx2soap::rt::cpu
