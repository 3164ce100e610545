//===- runtime_lib/cuda/Convolution.cu - Conv and ConvTranspose -----------===//
//
// Conv and ConvTranspose over 1-D, 2-D and 3-D spatial dims with cuDNN's
// legacy convolution API, the CUDA twin of runtime_lib/cpu/Convolution.cpp
// (same checks, same messages). Both ops are one cuDNN convolution from a
// "big" tensor to a "small" one with filter [small C, big C / group, k...]:
// Conv maps X to Y; ConvTranspose is that convolution's backward-data from X
// to Y, whose ONNX weight layout [C_in, C_out/group, k...] is exactly the
// filter's. 1-D runs as 2-D with a leading unit spatial dim.
//
// cuDNN takes one symmetric pad per dim and sizes the small tensor with the
// floor formula. Where the IR's pads and output size fit that (begin pad P,
// and floor((big + 2P - extent) / stride) + 1 == small), the big tensor is
// used as is. Elsewhere (asymmetric pads, ConvTranspose's output_padding
// past the end pad) the convolution runs with no padding on a scratch copy
// of the big tensor shifted by the begin pad and sized to fit exactly:
// zero-padded or cropped on the way in, cropped or zero-extended on the way
// out. The IR's dilations count like cuDNN's (1 = dense).
//
// Algorithms come from cudnnGet*Algorithm_v7 (heuristics, no benchmarking),
// restricted to FMA math so results stay in float precision (TF32 would
// miss the CPU backend's tolerance), preferring deterministic ones; the
// workspace is sized by the matching query. The choice is remembered per
// direction and geometry in the Context: the query costs 0.1-2.4 ms on an
// H100 with cuDNN 9.14, more than most of ResNet-18's convolutions, and the
// same inputs always get the same algorithm (so the same bits). Gradients
// accumulate with beta = 1 (through a scratch buffer only when the big tensor
// is a shifted copy); the bias gradient is cudnnConvolutionBackwardBias.
//
//===----------------------------------------------------------------------===//
#include "ContractionCommon.cuh"
#include <algorithm>
#include <climits>

namespace onnx2soap::rt::cuda {
using namespace contraction;

namespace {

class FilterDesc {
public:
  explicit FilterDesc(const OpCall &Call) {
    checkCudnn(Call, cudnnCreateFilterDescriptor(&Desc),
               "cudnnCreateFilterDescriptor");
  }
  FilterDesc(const FilterDesc &) = delete;
  FilterDesc &operator=(const FilterDesc &) = delete;
  ~FilterDesc() { cudnnDestroyFilterDescriptor(Desc); }
  operator cudnnFilterDescriptor_t() const { return Desc; }

private:
  cudnnFilterDescriptor_t Desc = nullptr;
};

class ConvDesc {
public:
  explicit ConvDesc(const OpCall &Call) {
    checkCudnn(Call, cudnnCreateConvolutionDescriptor(&Desc),
               "cudnnCreateConvolutionDescriptor");
  }
  ConvDesc(const ConvDesc &) = delete;
  ConvDesc &operator=(const ConvDesc &) = delete;
  ~ConvDesc() { cudnnDestroyConvolutionDescriptor(Desc); }
  operator cudnnConvolutionDescriptor_t() const { return Desc; }

private:
  cudnnConvolutionDescriptor_t Desc = nullptr;
};

int toInt(const OpCall &Call, int64_t V, const char *What) {
  if (V > INT_MAX || V < INT_MIN)
    failOp(Call, std::string(What) + " " + std::to_string(V) +
                     " does not fit cuDNN's 32-bit parameters");
  return static_cast<int>(V);
}

/// Everything one call needs, checked like the CPU's setupConv.
struct ConvSetup {
  bool Transposed = false;
  int64_t Group = 1;
  size_t Spatial = 0;
  // The convolution's big (input) and small (output) tensors' dims in the
  // op's rank: Conv's X and Y, ConvTranspose's Y and X.
  std::vector<int64_t> Big, Small;
  /// Per spatial dim: stride, dilation, begin pad, window extent.
  std::vector<int64_t> Strides, Dilations, PadBegin, Extent;
  /// Whether cuDNN's symmetric padding gives exactly the IR's geometry.
  bool Direct = true;
  /// The big tensor as cuDNN sees it: Big, or the shifted scratch copy.
  std::vector<int64_t> BigUsed;
  bool HasBias = false;
};

ConvSetup setupConv(const OpCall &Call, bool Transposed) {
  if (Call.Inputs.size() < 2 || Call.Outputs.size() != 1)
    failOp(Call, "expects inputs X, W (and optional B) and one output");
  const TensorView &X = Call.Inputs[0], &W = Call.Inputs[1],
                   &Y = Call.Outputs[0];
  TensorView B = optionalAt(Call.Inputs, 2);
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
  S.Transposed = Transposed;
  S.Group = Group;
  S.Spatial = Spatial;
  S.Big = Transposed ? Y.dims() : X.dims();
  S.Small = Transposed ? X.dims() : Y.dims();
  S.BigUsed = S.Big;
  S.HasBias = B.present();
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
    S.Dilations.push_back(Dilations[I]);
    S.PadBegin.push_back(PadBegin);
    S.Extent.push_back(Extent);
    int64_t BigLen = S.Big[2 + I], SmallLen = S.Small[2 + I];
    int64_t Slack =
        BigLen + 2 * PadBegin - Extent - (SmallLen - 1) * Strides[I];
    if (PadBegin < 0 || Slack < 0 || Slack >= Strides[I])
      S.Direct = false;
  }
  if (!S.Direct)
    for (size_t I = 0; I < Spatial; ++I)
      S.BigUsed[2 + I] = (S.Small[2 + I] - 1) * S.Strides[I] + S.Extent[I];
  return S;
}

/// Dims in cuDNN's rank: 1-D gets a leading unit spatial dim.
std::vector<int64_t> cudnnDims(const ConvSetup &S,
                               const std::vector<int64_t> &Dims) {
  std::vector<int64_t> R = Dims;
  if (S.Spatial == 1)
    R.insert(R.begin() + 2, 1);
  return R;
}

PlaneShape planeShape(const std::vector<int64_t> &Dims) {
  PlaneShape P;
  P.Planes = Dims[0] * Dims[1];
  size_t Spatial = Dims.size() - 2;
  for (size_t I = 0; I < Spatial; ++I)
    P.Spatial[3 - Spatial + I] = Dims[2 + I];
  return P;
}

/// The cuDNN descriptors of one call.
struct ConvDescs {
  TensorDesc Big, Small;
  FilterDesc Filter;
  ConvDesc Conv;
  /// Everything the descriptors say, for Context::ConvAlgorithms: cuDNN's
  /// big, small and filter dims, then pads, strides, dilations and group.
  std::vector<int64_t> Key;
  explicit ConvDescs(const OpCall &Call)
      : Big(Call), Small(Call), Filter(Call), Conv(Call) {}
};

/// The bias [1, output channels, 1...] and the output Y (or its gradient),
/// in cuDNN's rank.
void describeBias(const OpCall &Call, const ConvSetup &S, TensorDesc &Bias,
                  TensorDesc &Output) {
  const std::vector<int64_t> &Y = S.Transposed ? S.Big : S.Small;
  std::vector<int64_t> BiasDims(cudnnDims(S, Y).size(), 1);
  BiasDims[1] = Y[1];
  Bias.set(Call, BiasDims);
  Output.set(Call, cudnnDims(S, Y));
}

void describe(const OpCall &Call, const ConvSetup &S, ConvDescs &D) {
  D.Big.set(Call, cudnnDims(S, S.BigUsed));
  D.Small.set(Call, cudnnDims(S, S.Small));

  const TensorView &W = Call.Inputs[1];
  std::vector<int64_t> FilterDims = cudnnDims(S, W.dims());
  int FilterInt[5];
  for (size_t I = 0; I < FilterDims.size(); ++I)
    FilterInt[I] = toInt(Call, FilterDims[I], "weight dim");
  checkCudnn(Call,
             cudnnSetFilterNdDescriptor(
                 D.Filter, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW,
                 static_cast<int>(FilterDims.size()), FilterInt),
             "cudnnSetFilterNdDescriptor");

  std::vector<int> Pads, Strides, Dilations;
  if (S.Spatial == 1) {
    Pads.push_back(0);
    Strides.push_back(1);
    Dilations.push_back(1);
  }
  for (size_t I = 0; I < S.Spatial; ++I) {
    Pads.push_back(S.Direct ? toInt(Call, S.PadBegin[I], "pad") : 0);
    Strides.push_back(toInt(Call, S.Strides[I], "stride"));
    Dilations.push_back(toInt(Call, S.Dilations[I], "dilation"));
  }
  checkCudnn(Call,
             cudnnSetConvolutionNdDescriptor(
                 D.Conv, static_cast<int>(Pads.size()), Pads.data(),
                 Strides.data(), Dilations.data(), CUDNN_CROSS_CORRELATION,
                 CUDNN_DATA_FLOAT),
             "cudnnSetConvolutionNdDescriptor");
  checkCudnn(
      Call,
      cudnnSetConvolutionGroupCount(D.Conv, toInt(Call, S.Group, "group")),
      "cudnnSetConvolutionGroupCount");
  checkCudnn(Call, cudnnSetConvolutionMathType(D.Conv, CUDNN_FMA_MATH),
             "cudnnSetConvolutionMathType");
  D.Key = cudnnDims(S, S.BigUsed);
  for (const std::vector<int64_t> &Dims : {cudnnDims(S, S.Small), FilterDims})
    D.Key.insert(D.Key.end(), Dims.begin(), Dims.end());
  for (const std::vector<int> *Values : {&Pads, &Strides, &Dilations})
    D.Key.insert(D.Key.end(), Values->begin(), Values->end());
  D.Key.push_back(S.Group);
}

/// The heuristics' candidates, best first, in the order to try them:
/// deterministic float-precision ones, then any float-precision one.
template <typename Perf>
std::vector<Perf> candidates(const Perf *Results, int Count) {
  auto FloatMath = [](const Perf &P) {
    return P.status == CUDNN_STATUS_SUCCESS &&
           (P.mathType == CUDNN_FMA_MATH || P.mathType == CUDNN_DEFAULT_MATH);
  };
  std::vector<Perf> Order;
  for (int I = 0; I < Count; ++I)
    if (FloatMath(Results[I]) && Results[I].determinism == CUDNN_DETERMINISTIC)
      Order.push_back(Results[I]);
  for (int I = 0; I < Count; ++I)
    if (FloatMath(Results[I]) && Results[I].determinism != CUDNN_DETERMINISTIC)
      Order.push_back(Results[I]);
  return Order;
}

/// The first candidate whose workspace query succeeds under FMA math and
/// whose workspace is within the plan's limit (Context::ConvWorkspaceLimit:
/// the planner counted that much on this device).
template <typename Perf, typename SizeQuery>
std::pair<decltype(Perf().algo), size_t>
chooseAlgorithm(const Context &C, const OpCall &Call, const Perf *Results,
                int Count, SizeQuery Size, const char *What) {
  size_t Smallest = SIZE_MAX;
  for (const Perf &P : candidates(Results, Count)) {
    size_t Bytes = 0;
    if (Size(P.algo, &Bytes) != CUDNN_STATUS_SUCCESS)
      continue;
    if (Bytes <= C.ConvWorkspaceLimit)
      return {P.algo, Bytes};
    Smallest = std::min(Smallest, Bytes);
  }
  if (Smallest != SIZE_MAX)
    failOp(Call, std::string("every float-precision algorithm cuDNN offers "
                             "for ") +
                     What + " needs more workspace than the plan's " +
                     std::to_string(C.ConvWorkspaceLimit) +
                     " bytes (the least: " + std::to_string(Smallest) +
                     "); raise the cluster's conv_workspace_MiB");
  failOp(Call,
         std::string("cuDNN offers no float-precision algorithm for ") + What);
}

constexpr int MaxAlgorithms = 16;

enum class Direction { Forward, BackwardData, BackwardFilter };

/// The algorithm for D's geometry in direction Dir: remembered, or Choose()
/// (the heuristics and workspace queries) once.
template <typename ChooseFn>
ConvAlgorithm cachedAlgorithm(Context &C, const ConvDescs &D, Direction Dir,
                              ChooseFn Choose) {
  std::vector<int64_t> Key = D.Key;
  Key.push_back(static_cast<int64_t>(Dir));
  auto It = C.ConvAlgorithms.find(Key);
  if (It != C.ConvAlgorithms.end())
    return It->second;
  auto [Algo, Bytes] = Choose();
  ConvAlgorithm Chosen{static_cast<int>(Algo), Bytes};
  C.ConvAlgorithms.emplace(std::move(Key), Chosen);
  return Chosen;
}

/// Small = conv(Big, W): Alpha * result + Beta * Small.
void convForward(Context &C, const OpCall &Call, ConvDescs &D, const float *Big,
                 const float *W, float *Small, float Beta) {
  ConvAlgorithm Chosen = cachedAlgorithm(C, D, Direction::Forward, [&] {
    cudnnConvolutionFwdAlgoPerf_t Results[MaxAlgorithms];
    int Count = 0;
    checkCudnn(Call,
               cudnnGetConvolutionForwardAlgorithm_v7(
                   C.Dnn, D.Big, D.Filter, D.Conv, D.Small, MaxAlgorithms,
                   &Count, Results),
               "cudnnGetConvolutionForwardAlgorithm_v7");
    return chooseAlgorithm(
        C, Call, Results, Count,
        [&](cudnnConvolutionFwdAlgo_t A, size_t *B) {
          return cudnnGetConvolutionForwardWorkspaceSize(C.Dnn, D.Big, D.Filter,
                                                         D.Conv, D.Small, A, B);
        },
        "the convolution forward");
  });
  auto Algo = static_cast<cudnnConvolutionFwdAlgo_t>(Chosen.Algo);
  size_t Bytes = Chosen.WorkspaceBytes;
  Scratch Workspace(C, Call, Bytes);
  float Alpha = 1;
  checkCudnn(Call,
             cudnnConvolutionForward(C.Dnn, &Alpha, D.Big, Big, D.Filter, W,
                                     D.Conv, Algo, Workspace.data(), Bytes,
                                     &Beta, D.Small, Small),
             "cudnnConvolutionForward");
}

/// Big = Beta * Big + the convolution's backward-data of Small.
void convBackwardData(Context &C, const OpCall &Call, ConvDescs &D,
                      const float *W, const float *Small, float *Big,
                      float Beta) {
  ConvAlgorithm Chosen = cachedAlgorithm(C, D, Direction::BackwardData, [&] {
    cudnnConvolutionBwdDataAlgoPerf_t Results[MaxAlgorithms];
    int Count = 0;
    checkCudnn(Call,
               cudnnGetConvolutionBackwardDataAlgorithm_v7(
                   C.Dnn, D.Filter, D.Small, D.Conv, D.Big, MaxAlgorithms,
                   &Count, Results),
               "cudnnGetConvolutionBackwardDataAlgorithm_v7");
    return chooseAlgorithm(
        C, Call, Results, Count,
        [&](cudnnConvolutionBwdDataAlgo_t A, size_t *B) {
          return cudnnGetConvolutionBackwardDataWorkspaceSize(
              C.Dnn, D.Filter, D.Small, D.Conv, D.Big, A, B);
        },
        "the convolution backward-data");
  });
  auto Algo = static_cast<cudnnConvolutionBwdDataAlgo_t>(Chosen.Algo);
  size_t Bytes = Chosen.WorkspaceBytes;
  Scratch Workspace(C, Call, Bytes);
  float Alpha = 1;
  checkCudnn(Call,
             cudnnConvolutionBackwardData(C.Dnn, &Alpha, D.Filter, W, D.Small,
                                          Small, D.Conv, Algo, Workspace.data(),
                                          Bytes, &Beta, D.Big, Big),
             "cudnnConvolutionBackwardData");
}

/// dW += the filter gradient of Small = conv(Big, W).
void convBackwardFilter(Context &C, const OpCall &Call, ConvDescs &D,
                        const float *Big, const float *Small, float *DW) {
  ConvAlgorithm Chosen = cachedAlgorithm(C, D, Direction::BackwardFilter, [&] {
    cudnnConvolutionBwdFilterAlgoPerf_t Results[MaxAlgorithms];
    int Count = 0;
    checkCudnn(Call,
               cudnnGetConvolutionBackwardFilterAlgorithm_v7(
                   C.Dnn, D.Big, D.Small, D.Conv, D.Filter, MaxAlgorithms,
                   &Count, Results),
               "cudnnGetConvolutionBackwardFilterAlgorithm_v7");
    return chooseAlgorithm(
        C, Call, Results, Count,
        [&](cudnnConvolutionBwdFilterAlgo_t A, size_t *B) {
          return cudnnGetConvolutionBackwardFilterWorkspaceSize(
              C.Dnn, D.Big, D.Small, D.Conv, D.Filter, A, B);
        },
        "the convolution backward-filter");
  });
  auto Algo = static_cast<cudnnConvolutionBwdFilterAlgo_t>(Chosen.Algo);
  size_t Bytes = Chosen.WorkspaceBytes;
  Scratch Workspace(C, Call, Bytes);
  float Alpha = 1, Beta = 1;
  checkCudnn(Call,
             cudnnConvolutionBackwardFilter(
                 C.Dnn, &Alpha, D.Big, Big, D.Small, Small, D.Conv, Algo,
                 Workspace.data(), Bytes, &Beta, D.Filter, DW),
             "cudnnConvolutionBackwardFilter");
}

/// Offsets of the shifted copy: big-tensor position p is BigUsed position
/// p + begin pad.
void beginPads(const ConvSetup &S, int64_t Offset[3], int64_t Sign) {
  for (int I = 0; I < 3; ++I)
    Offset[I] = 0;
  for (size_t I = 0; I < S.Spatial; ++I)
    Offset[3 - S.Spatial + I] = Sign * S.PadBegin[I];
}

int64_t countOf(const std::vector<int64_t> &Dims) {
  int64_t N = 1;
  for (int64_t D : Dims)
    N *= D;
  return N;
}

} // namespace

void forwardConv(Context &C, const OpCall &Call, bool Transposed) {
  ConvSetup S = setupConv(Call, Transposed);
  const TensorView &X = Call.Inputs[0], &W = Call.Inputs[1],
                   &Y = Call.Outputs[0];
  if (Y.numElements() == 0)
    return;
  ConvDescs D(Call);
  if (X.numElements() == 0 || W.numElements() == 0) {
    // No products: Y is the bias alone (cuDNN rejects empty operands).
    checkCuda(Call, cudaMemsetAsync(Y.Data, 0, Y.byteSize(), C.Stream),
              "cudaMemsetAsync");
  } else if (!Transposed) {
    describe(Call, S, D);
    if (S.Direct) {
      convForward(C, Call, D, X.as<float>(), W.as<float>(), Y.as<float>(), 0);
    } else {
      Scratch Padded(C, Call, countOf(S.BigUsed) * sizeof(float));
      int64_t Offset[3];
      beginPads(S, Offset, 1);
      shiftCopy(C, Call, X.as<float>(), planeShape(S.Big), Padded.as<float>(),
                planeShape(S.BigUsed), Offset, false);
      convForward(C, Call, D, Padded.as<float>(), W.as<float>(), Y.as<float>(),
                  0);
    }
  } else {
    describe(Call, S, D);
    if (S.Direct) {
      convBackwardData(C, Call, D, W.as<float>(), X.as<float>(), Y.as<float>(),
                       0);
    } else {
      Scratch Full(C, Call, countOf(S.BigUsed) * sizeof(float));
      convBackwardData(C, Call, D, W.as<float>(), X.as<float>(),
                       Full.as<float>(), 0);
      int64_t Offset[3];
      beginPads(S, Offset, -1);
      shiftCopy(C, Call, Full.as<float>(), planeShape(S.BigUsed), Y.as<float>(),
                planeShape(S.Big), Offset, false);
    }
  }
  if (S.HasBias) {
    TensorDesc BiasDesc(Call), YDesc(Call);
    describeBias(Call, S, BiasDesc, YDesc);
    float One = 1;
    checkCudnn(Call,
               cudnnAddTensor(C.Dnn, &One, BiasDesc, Call.Inputs[2].Data, &One,
                              YDesc, Y.Data),
               "cudnnAddTensor (bias)");
  }
}

void backwardConv(Context &C, const OpCall &Call, bool Transposed,
                  const Views &OutputGrads, const Views &InputGrads) {
  ConvSetup S = setupConv(Call, Transposed);
  TensorView DX = optionalAt(InputGrads, 0), DW = optionalAt(InputGrads, 1),
             DB = optionalAt(InputGrads, 2);
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
  const TensorView &X = Call.Inputs[0], &W = Call.Inputs[1];
  if (DY.numElements() == 0)
    return;

  if (DB.present()) {
    // dB[m] += sum of dY[n, m, ...].
    TensorDesc BiasDesc(Call), DYDesc(Call);
    describeBias(Call, S, BiasDesc, DYDesc);
    float One = 1;
    checkCudnn(Call,
               cudnnConvolutionBackwardBias(C.Dnn, &One, DYDesc, DY.Data, &One,
                                            BiasDesc, DB.Data),
               "cudnnConvolutionBackwardBias");
  }
  if (X.numElements() == 0 || W.numElements() == 0)
    return;
  ConvDescs D(Call);
  describe(Call, S, D);
  int64_t ToUsed[3], FromUsed[3];
  beginPads(S, ToUsed, 1);
  beginPads(S, FromUsed, -1);

  if (!Transposed) {
    // Big = X, Small = Y.
    if (DX.present()) {
      if (S.Direct) {
        convBackwardData(C, Call, D, W.as<float>(), DY.as<float>(),
                         DX.as<float>(), 1);
      } else {
        Scratch Full(C, Call, countOf(S.BigUsed) * sizeof(float));
        convBackwardData(C, Call, D, W.as<float>(), DY.as<float>(),
                         Full.as<float>(), 0);
        shiftCopy(C, Call, Full.as<float>(), planeShape(S.BigUsed),
                  DX.as<float>(), planeShape(S.Big), FromUsed, true);
      }
    }
    if (DW.present()) {
      if (S.Direct) {
        convBackwardFilter(C, Call, D, X.as<float>(), DY.as<float>(),
                           DW.as<float>());
      } else {
        Scratch Padded(C, Call, countOf(S.BigUsed) * sizeof(float));
        shiftCopy(C, Call, X.as<float>(), planeShape(S.Big), Padded.as<float>(),
                  planeShape(S.BigUsed), ToUsed, false);
        convBackwardFilter(C, Call, D, Padded.as<float>(), DY.as<float>(),
                           DW.as<float>());
      }
    }
    return;
  }

  // ConvTranspose: Big = Y (dY here), Small = X.
  if (!DX.present() && !DW.present())
    return;
  const float *BigGrad = DY.as<float>();
  Scratch Padded(C, Call, S.Direct ? 0 : countOf(S.BigUsed) * sizeof(float));
  if (!S.Direct) {
    shiftCopy(C, Call, DY.as<float>(), planeShape(S.Big), Padded.as<float>(),
              planeShape(S.BigUsed), ToUsed, false);
    BigGrad = Padded.as<float>();
  }
  if (DX.present())
    convForward(C, Call, D, BigGrad, W.as<float>(), DX.as<float>(), 1);
  if (DW.present())
    convBackwardFilter(C, Call, D, BigGrad, X.as<float>(), DW.as<float>());
}

} // namespace onnx2soap::rt::cuda
