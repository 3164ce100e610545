//===- runtime_lib/cpu/Pool.cpp - MaxPool, AveragePool, global pools ------===//
//
// Windowed pools run on oneDNN's pooling_v2 (dilation included, IR
// dilations minus 1), given the end padding that yields the output size the
// IR computed (ceil mode may need more than the attribute's, a dropped
// window less, even a negative amount, which oneDNN accepts). Max-pool
// backward is a loop over the windows that finds each one's first maximal
// tap again and adds dY there: what oneDNN's workspace would record, without
// recomputing the forward into a scratch output and accumulating a scratch
// dX (the forward call keeps nothing). Loops run their planes (N*C) on
// several threads. Two cases oneDNN cannot express are left to loops:
// AveragePool with count_include_pad whose ceil-mode windows run past the
// end padding, where the divisor counts only the taps inside the padded
// input (ONNX's reference and PyTorch), not the whole kernel; and dilated
// AveragePool without it, which oneDNN 2.6 refuses where a window's taps
// skip over the input (the parts of a pool split over space). Global pools
// are loops.
//
//===----------------------------------------------------------------------===//
#include "ContractionKernels.h"
#include "Parallel.h"
#include <algorithm>
#include <limits>
#include <string>

namespace onnx2soap::rt::cpu {
using namespace dnnl_util;
using dnnl::algorithm;
using dnnl::prop_kind;

namespace {

std::string formatDims(const TensorView &V) {
  std::string S = "[";
  for (int I = 0; I < V.Rank; ++I)
    S += (I ? "," : "") + std::to_string(V.Dims[I]);
  return S + "]";
}

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

void checkOperands(const OpCall &Call) {
  if (Call.Inputs.size() != 1 || Call.Outputs.size() != 1)
    failOp(Call, "expects one input and one output");
  const TensorView &X = Call.Inputs[0], &Y = Call.Outputs[0];
  requireDenseF32(Call, X, "input X");
  requireDenseF32(Call, Y, "output Y");
  if (X.Rank < 3 || Y.Rank != X.Rank || Y.Dims[0] != X.Dims[0] ||
      Y.Dims[1] != X.Dims[1])
    failOp(Call, "input " + formatDims(X) + " and output " + formatDims(Y) +
                     " must both be [N,C,spatial...] with equal N and C");
}

/// Returns the output gradient, or an absent view when there is nothing to
/// do; checks the input gradient.
TensorView backwardOperands(const OpCall &Call, const Views &OutputGrads,
                            const Views &InputGrads) {
  checkOperands(Call);
  if (OutputGrads.empty() || !OutputGrads[0].present() || InputGrads.empty() ||
      !InputGrads[0].present())
    return TensorView();
  requireDenseF32(Call, OutputGrads[0], "output gradient");
  requireDenseF32(Call, InputGrads[0], "input gradient");
  if (OutputGrads[0].numElements() != Call.Outputs[0].numElements() ||
      InputGrads[0].numElements() != Call.Inputs[0].numElements())
    failOp(Call, "gradient shapes do not match the operands");
  return OutputGrads[0];
}

//===-- Windowed pools ----------------------------------------------------===//

struct PoolSetup {
  bool Max = false, IncludePad = false;
  // Per spatial dim, IR conventions except PadEnd, which is what gives the
  // output size (oneDNN's end padding); AttrPadEnd is the attribute's.
  std::vector<int64_t> In, Out, Kernel, Strides, Dilations, PadBegin, PadEnd,
      AttrPadEnd;
  /// AveragePool counting padding with windows past the end padding, or
  /// not counting it with dilated windows (which oneDNN 2.6 refuses where
  /// taps skip over the input, as the parts of a split pool's windows do).
  bool NeedsLoops = false;
};

PoolSetup setupPool(const OpCall &Call) {
  checkOperands(Call);
  const TensorView &X = Call.Inputs[0], &Y = Call.Outputs[0];
  if (X.Rank > 5)
    failOp(Call, "supports 1 to 3 spatial dims, input is " + formatDims(X));
  size_t Spatial = X.Rank - 2;
  PoolSetup S;
  S.Max = Call.Kind == OpKind::MaxPool;
  S.IncludePad = !S.Max && Call.Attrs.getInt("count_include_pad") != 0;
  S.Kernel = spatialAttr(Call, "kernel_shape", Spatial, 0);
  S.Strides = spatialAttr(Call, "strides", Spatial, 1);
  S.Dilations = spatialAttr(Call, "dilations", Spatial, 1);
  auto Pads = spatialAttr(Call, "pads", 2 * Spatial, 0);
  for (size_t I = 0; I < Spatial; ++I) {
    int64_t In = X.Dims[2 + I], Out = Y.Dims[2 + I];
    int64_t Stride = S.Strides[I], Begin = Pads[I], End = Pads[Spatial + I];
    if (S.Kernel[I] <= 0 || Stride <= 0 || S.Dilations[I] <= 0 || Begin < 0 ||
        End < 0)
      failOp(Call, "kernel_shape, strides and dilations must be positive, "
                   "pads non-negative");
    int64_t Extent = (S.Kernel[I] - 1) * S.Dilations[I] + 1;
    // Every window must start inside the input or its begin padding (what
    // the IR's ceil-mode correction guarantees) and end after the padding.
    if (Out <= 0 || (Out - 1) * Stride >= In + Begin || Extent <= Begin)
      failOp(Call, "output " + formatDims(Y) + " does not fit input " +
                       formatDims(X) + " and the window attributes");
    int64_t EndNeeded = (Out - 1) * Stride + Extent - In - Begin;
    S.In.push_back(In);
    S.Out.push_back(Out);
    S.PadBegin.push_back(Begin);
    S.PadEnd.push_back(EndNeeded);
    S.AttrPadEnd.push_back(End);
    if (S.IncludePad && EndNeeded > End)
      S.NeedsLoops = true;
    if (!S.Max && !S.IncludePad && S.Dilations[I] > 1)
      S.NeedsLoops = true;
  }
  return S;
}

algorithm poolAlgorithm(const PoolSetup &S) {
  if (S.Max)
    return algorithm::pooling_max;
  return S.IncludePad ? algorithm::pooling_avg_include_padding
                      : algorithm::pooling_avg_exclude_padding;
}

memory::dims oneDnnDilations(const PoolSetup &S) {
  memory::dims D;
  for (int64_t V : S.Dilations)
    D.push_back(V - 1);
  return D;
}

dnnl::pooling_v2_forward::primitive_desc poolForwardDesc(Context &C,
                                                         const OpCall &Call,
                                                         const PoolSetup &S,
                                                         prop_kind Prop) {
  dnnl::pooling_v2_forward::desc Desc(
      Prop, poolAlgorithm(S), denseDesc(Call.Inputs[0].dims()),
      denseDesc(Call.Outputs[0].dims()), S.Strides, S.Kernel,
      oneDnnDilations(S), S.PadBegin, S.PadEnd);
  return dnnl::pooling_v2_forward::primitive_desc(Desc, C.Engine);
}

/// Per spatial dim (padded to 3 with unit dims), the taps of every output
/// index: the input positions (-1 when in padding) and the divisor counts.
struct LoopGeometry {
  int64_t In[3] = {1, 1, 1}, Out[3] = {1, 1, 1}, Kernel[3] = {1, 1, 1};
  std::vector<int64_t> Position[3]; // [Out * Kernel]
  /// [Out]: taps inside the padded input (count_include_pad), or inside
  /// the input.
  std::vector<int64_t> Count[3];
};

LoopGeometry loopGeometry(const PoolSetup &S) {
  LoopGeometry G;
  size_t Offset = 3 - S.In.size();
  for (size_t D = 0; D < 3; ++D) {
    if (D < Offset) {
      G.Position[D] = {0};
      G.Count[D] = {1};
      continue;
    }
    size_t I = D - Offset;
    G.In[D] = S.In[I];
    G.Out[D] = S.Out[I];
    G.Kernel[D] = S.Kernel[I];
    for (int64_t O = 0; O < S.Out[I]; ++O) {
      int64_t Count = 0;
      for (int64_t K = 0; K < S.Kernel[I]; ++K) {
        int64_t P = O * S.Strides[I] - S.PadBegin[I] + K * S.Dilations[I];
        bool Inside = P >= 0 && P < S.In[I];
        G.Position[D].push_back(Inside ? P : -1);
        Count += S.IncludePad ? P < S.In[I] + S.AttrPadEnd[I] : Inside;
      }
      G.Count[D].push_back(Count);
    }
  }
  return G;
}

/// AveragePool by loops: Y = sum / taps inside the padded input (with
/// count_include_pad) or the input, or (Backward) dX += dY / taps; a window
/// with no such tap gives 0.
void averagePoolLoops(const PoolSetup &S, int64_t Planes, float *X, float *Y,
                      bool Backward) {
  LoopGeometry G = loopGeometry(S);
  int64_t InPlane = G.In[0] * G.In[1] * G.In[2];
  int64_t OutPlane = G.Out[0] * G.Out[1] * G.Out[2];
  for (int64_t Plane = 0; Plane < Planes; ++Plane) {
    float *In = X + Plane * InPlane;
    float *Out = Y + Plane * OutPlane;
    for (int64_t OD = 0; OD < G.Out[0]; ++OD)
      for (int64_t OH = 0; OH < G.Out[1]; ++OH)
        for (int64_t OW = 0; OW < G.Out[2]; ++OW) {
          float &Value = Out[(OD * G.Out[1] + OH) * G.Out[2] + OW];
          double Divisor =
              double(G.Count[0][OD]) * G.Count[1][OH] * G.Count[2][OW];
          float Share =
              Backward && Divisor > 0 ? static_cast<float>(Value / Divisor) : 0;
          double Sum = 0;
          for (int64_t KD = 0; KD < G.Kernel[0]; ++KD) {
            int64_t PD = G.Position[0][OD * G.Kernel[0] + KD];
            if (PD < 0)
              continue;
            for (int64_t KH = 0; KH < G.Kernel[1]; ++KH) {
              int64_t PH = G.Position[1][OH * G.Kernel[1] + KH];
              if (PH < 0)
                continue;
              for (int64_t KW = 0; KW < G.Kernel[2]; ++KW) {
                int64_t PW = G.Position[2][OW * G.Kernel[2] + KW];
                if (PW < 0)
                  continue;
                float &Element = In[(PD * G.In[1] + PH) * G.In[2] + PW];
                if (Backward)
                  Element += Share;
                else
                  Sum += Element;
              }
            }
          }
          if (!Backward)
            Value = Divisor > 0 ? static_cast<float>(Sum / Divisor) : 0.0f;
        }
  }
}

/// MaxPool backward: dX[first maximal tap of each window] += dY. Padding
/// taps never win (oneDNN's and PyTorch's max pooling ignore them); ties go
/// to the first tap in window order, as in both.
void maxPoolBackwardLoops(const PoolSetup &S, int64_t Planes, const float *X,
                          const float *DY, float *DX) {
  // Per spatial dim (padded to 3 with unit dims) and output index: the
  // input position of tap 0 and the taps [Begin, End) inside the input;
  // tap K reads position First + K * Dilation.
  struct Taps {
    std::vector<int64_t> First, Begin, End;
    int64_t Dilation = 1;
  };
  int64_t In[3] = {1, 1, 1}, Out[3] = {1, 1, 1};
  Taps T[3];
  size_t Offset = 3 - S.In.size();
  for (size_t D = 0; D < 3; ++D) {
    if (D < Offset) {
      T[D] = {{0}, {0}, {1}, 1};
      continue;
    }
    size_t I = D - Offset;
    In[D] = S.In[I];
    Out[D] = S.Out[I];
    T[D].Dilation = S.Dilations[I];
    for (int64_t O = 0; O < S.Out[I]; ++O) {
      int64_t First = O * S.Strides[I] - S.PadBegin[I], Begin = 0,
              End = S.Kernel[I];
      while (Begin < End && First + Begin * T[D].Dilation < 0)
        ++Begin;
      while (End > Begin && First + (End - 1) * T[D].Dilation >= S.In[I])
        --End;
      T[D].First.push_back(First);
      T[D].Begin.push_back(Begin);
      T[D].End.push_back(End);
    }
  }
  int64_t InPlane = In[0] * In[1] * In[2];
  int64_t OutPlane = Out[0] * Out[1] * Out[2];
  int64_t Window = 1;
  for (int64_t K : S.Kernel)
    Window *= K;
  parallelFor(Planes, OutPlane * Window, [&](int64_t Plane) {
    const float *Input = X + Plane * InPlane;
    const float *Grad = DY + Plane * OutPlane;
    float *Target = DX + Plane * InPlane;
    for (int64_t OD = 0; OD < Out[0]; ++OD)
      for (int64_t OH = 0; OH < Out[1]; ++OH)
        for (int64_t OW = 0; OW < Out[2]; ++OW) {
          int64_t D0 = T[0].Begin[OD], D1 = T[0].End[OD];
          int64_t H0 = T[1].Begin[OH], H1 = T[1].End[OH];
          int64_t W0 = T[2].Begin[OW], W1 = T[2].End[OW];
          if (D0 == D1 || H0 == H1 || W0 == W1)
            continue; // no tap inside the input
          int64_t FirstD = T[0].First[OD], FirstH = T[1].First[OH],
                  FirstW = T[2].First[OW];
          int64_t DilD = T[0].Dilation, DilH = T[1].Dilation,
                  DilW = T[2].Dilation;
          // Branch-free selection: the comparisons are data-dependent.
          int64_t Best =
              ((FirstD + D0 * DilD) * In[1] + FirstH + H0 * DilH) * In[2] +
              FirstW + W0 * DilW;
          float BestValue = Input[Best];
          for (int64_t KD = D0; KD < D1; ++KD)
            for (int64_t KH = H0; KH < H1; ++KH) {
              int64_t Row =
                  ((FirstD + KD * DilD) * In[1] + FirstH + KH * DilH) * In[2] +
                  FirstW;
              for (int64_t KW = W0; KW < W1; ++KW) {
                int64_t Index = Row + KW * DilW;
                float Value = Input[Index];
                bool Better = Value > BestValue;
                Best = Better ? Index : Best;
                BestValue = Better ? Value : BestValue;
              }
            }
          Target[Best] += Grad[(OD * Out[1] + OH) * Out[2] + OW];
        }
  });
}

void forwardWindowPool(Context &C, const OpCall &Call) {
  PoolSetup S = setupPool(Call);
  if (S.NeedsLoops)
    return averagePoolLoops(S, Call.Inputs[0].Dims[0] * Call.Inputs[0].Dims[1],
                            Call.Inputs[0].as<float>(),
                            Call.Outputs[0].as<float>(), false);
  dnnlCall(Call, "forward", [&] {
    auto Pd = poolForwardDesc(C, Call, S, prop_kind::forward_inference);
    dnnl::pooling_v2_forward(Pd).execute(
        C.Stream,
        {{DNNL_ARG_SRC, wrap(C, Pd.src_desc(), Call.Inputs[0].Data)},
         {DNNL_ARG_DST, wrap(C, Pd.dst_desc(), Call.Outputs[0].Data)}});
    C.Stream.wait();
  });
}

void backwardWindowPool(Context &C, const OpCall &Call,
                        const Views &OutputGrads, const Views &InputGrads) {
  TensorView DY = backwardOperands(Call, OutputGrads, InputGrads);
  if (!DY.present())
    return;
  PoolSetup S = setupPool(Call);
  const TensorView &DX = InputGrads[0];
  int64_t Planes = Call.Inputs[0].Dims[0] * Call.Inputs[0].Dims[1];
  if (S.Max)
    return maxPoolBackwardLoops(S, Planes, Call.Inputs[0].as<float>(),
                                DY.as<float>(), DX.as<float>());
  if (S.NeedsLoops)
    return averagePoolLoops(S, Planes, DX.as<float>(), DY.as<float>(), true);
  dnnlCall(Call, "backward", [&] {
    auto FwdPd = poolForwardDesc(C, Call, S, prop_kind::forward_training);
    memory::desc Src = FwdPd.src_desc(), Dst = FwdPd.dst_desc();
    dnnl::pooling_v2_backward::desc Desc(poolAlgorithm(S), Src, Dst, S.Strides,
                                         S.Kernel, oneDnnDilations(S),
                                         S.PadBegin, S.PadEnd);
    dnnl::pooling_v2_backward::primitive_desc Pd(Desc, C.Engine, FwdPd);
    std::vector<float> Scratch(DX.numElements());
    dnnl::pooling_v2_backward(Pd).execute(
        C.Stream, {{DNNL_ARG_DIFF_DST, wrap(C, Dst, DY.Data)},
                   {DNNL_ARG_DIFF_SRC, wrap(C, Src, Scratch.data())}});
    C.Stream.wait();
    addInto(DX.as<float>(), Scratch.data(), DX.numElements());
  });
}

//===-- Global pools ------------------------------------------------------===//

/// Planes (N*C) and elements per plane of a global pool's input.
std::pair<int64_t, int64_t> globalExtent(const OpCall &Call) {
  checkOperands(Call);
  const TensorView &X = Call.Inputs[0], &Y = Call.Outputs[0];
  for (int I = 2; I < Y.Rank; ++I)
    if (Y.Dims[I] != 1)
      failOp(Call, "output " + formatDims(Y) + " must be [N,C,1...]");
  int64_t Planes = X.Dims[0] * X.Dims[1];
  int64_t Size = Planes ? X.numElements() / Planes : 0;
  if (Size == 0 && Planes != 0)
    failOp(Call, "input " + formatDims(X) + " has empty spatial dims");
  return {Planes, Size};
}

/// Index of the first maximum of Count floats.
int64_t argMax(const float *Values, int64_t Count) {
  int64_t Best = 0;
  for (int64_t I = 1; I < Count; ++I)
    if (Values[I] > Values[Best])
      Best = I;
  return Best;
}

void forwardGlobalPool(const OpCall &Call) {
  auto [Planes, Size] = globalExtent(Call);
  const float *X = Call.Inputs[0].as<float>();
  float *Y = Call.Outputs[0].as<float>();
  bool Max = Call.Kind == OpKind::GlobalMaxPool;
  parallelFor(Planes, Size, [&](int64_t P) {
    const float *Plane = X + P * Size;
    if (Max) {
      Y[P] = Plane[argMax(Plane, Size)];
      return;
    }
    double Sum = 0;
#pragma omp simd reduction(+ : Sum)
    for (int64_t I = 0; I < Size; ++I)
      Sum += Plane[I];
    Y[P] = static_cast<float>(Sum / Size);
  });
}

void backwardGlobalPool(const OpCall &Call, const Views &OutputGrads,
                        const Views &InputGrads) {
  TensorView DY = backwardOperands(Call, OutputGrads, InputGrads);
  if (!DY.present())
    return;
  auto [Planes, Size] = globalExtent(Call);
  const float *X = Call.Inputs[0].as<float>(), *G = DY.as<float>();
  float *DX = InputGrads[0].as<float>();
  bool Max = Call.Kind == OpKind::GlobalMaxPool;
  parallelFor(Planes, Size, [&](int64_t P) {
    float *Plane = DX + P * Size;
    if (Max) {
      Plane[argMax(X + P * Size, Size)] += G[P];
      return;
    }
    float Share = G[P] / static_cast<float>(Size);
    for (int64_t I = 0; I < Size; ++I)
      Plane[I] += Share;
  });
}

} // namespace

void forwardPool(Context &C, const OpCall &Call) {
  switch (Call.Kind) {
  case OpKind::MaxPool:
  case OpKind::AveragePool:
    return forwardWindowPool(C, Call);
  case OpKind::GlobalAveragePool:
  case OpKind::GlobalMaxPool:
    return forwardGlobalPool(Call);
  case OpKind::Resize:
    return forwardResize(Call);
  default:
    failOp(Call, "is not a pooling op");
  }
}

void backwardPool(Context &C, const OpCall &Call, const Views &OutputGrads,
                  const Views &InputGrads) {
  switch (Call.Kind) {
  case OpKind::MaxPool:
  case OpKind::AveragePool:
    return backwardWindowPool(C, Call, OutputGrads, InputGrads);
  case OpKind::GlobalAveragePool:
  case OpKind::GlobalMaxPool:
    return backwardGlobalPool(Call, OutputGrads, InputGrads);
  case OpKind::Resize:
    return backwardResize(Call, OutputGrads, InputGrads);
  default:
    failOp(Call, "is not a pooling op");
  }
}

} // namespace onnx2soap::rt::cpu
