//===- soap_search/Builtins.cpp - Data, model and expert parallelism ------===//
//
// Degrees are the largest that divide both the device count and the dim, so
// every built-in strategy is valid on any cluster and any batch size.
//
//===----------------------------------------------------------------------===//
#include "soap_search/Builtins.h"
#include "ir/BatchDims.h"
#include "llvm/Support/MathExtras.h"
#include <algorithm>
#include <map>

namespace onnx2soap::soap_search {
using simulator::DeviceId;
using simulator::Machine;
using simulator::ParallelConfig;
using simulator::Strategy;

llvm::StringRef builtinName(Builtin Kind) {
  switch (Kind) {
  case Builtin::DataParallel:
    return "data-parallel";
  case Builtin::ModelParallel:
    return "model-parallel";
  case Builtin::Expert:
    return "expert";
  }
  llvm_unreachable("unknown Builtin");
}

std::optional<Builtin> parseBuiltin(llvm::StringRef Name) {
  for (Builtin Kind :
       {Builtin::DataParallel, Builtin::ModelParallel, Builtin::Expert})
    if (Name == builtinName(Kind))
      return Kind;
  return std::nullopt;
}

/// The largest divisor of Devices that also divides Extent.
static uint32_t largestDegree(int64_t Extent, unsigned Devices) {
  for (uint32_t D = Devices; D > 1; --D)
    if (Devices % D == 0 && Extent % D == 0)
      return D;
  return 1;
}

/// Op split over its samples (its Sample dim, or for a mean loss its
/// contraction over the samples) in up to Devices parts, partition p on
/// First + p * Stride; whole on First when it has no samples.
static ParallelConfig sampleSplit(const ir::Graph &G, const ir::Op &O,
                                  unsigned Devices, DeviceId First,
                                  unsigned Stride) {
  ParallelConfig C = ParallelConfig::single(G.outputType(O).rank(), First);
  C.DeviceStride = Stride;
  ir::ParallelDims Parallel = ir::parallelDims(G, O);
  const ir::Shape &Dims = G.outputType(O).Dims;
  for (unsigned D = 0; D < Dims.size(); ++D)
    if (Parallel.Output[D] == ir::DimKind::Sample) {
      C.Degrees[D] = largestDegree(Dims[D], Devices);
      return C;
    }
  if (Dims.empty() && Parallel.ReductionExtent > 0)
    C.Reduction = largestDegree(Parallel.ReductionExtent, Devices);
  return C;
}

Strategy dataParallel(const ir::Graph &G, const Machine &M) {
  return dataParallelOn(G, M.numDevices());
}

Strategy dataParallelOn(const ir::Graph &G, unsigned Devices) {
  Strategy S;
  for (const ir::Op &O : G.ops())
    S.Configs.push_back(sampleSplit(G, O, Devices, 0, 1));
  return S;
}

Strategy modelParallel(const ir::Graph &G, const Machine &M,
                       const simulator::CostModel &Cost) {
  // Each op whole, on the device whose share of the total compute time its
  // midpoint falls in.
  std::vector<double> Time;
  double Total = 0;
  for (const ir::Op &O : G.ops()) {
    ir::Region Out = ir::fullRegion(G.outputType(O).Dims);
    ir::Interval Reduction{0, ir::parallelDims(G, O).ReductionExtent};
    simulator::TaskTimes T =
        Cost.opTimes({G, O, Out, Reduction}, M.deviceType(0));
    Time.push_back(T.Forward + T.Backward);
    Total += Time.back();
  }
  Strategy S;
  double Before = 0;
  unsigned N = M.numDevices();
  for (const ir::Op &O : G.ops()) {
    double Middle = Before + Time[O.Id] / 2;
    Before += Time[O.Id];
    DeviceId Device =
        Total > 0 ? std::min<DeviceId>(N - 1, DeviceId(Middle / Total * N)) : 0;
    S.Configs.push_back(ParallelConfig::single(G.outputType(O).rank(), Device));
  }
  return S;
}

static bool isRecurrent(ir::OpKind Kind) {
  return Kind == ir::OpKind::LSTM || Kind == ir::OpKind::GRU ||
         Kind == ir::OpKind::LSTMCell || Kind == ir::OpKind::GRUCell;
}

/// A fully-connected layer: a Gemm or MatMul with a weight operand.
static bool isFullyConnected(const ir::Graph &G, const ir::Op &O) {
  if (O.Kind != ir::OpKind::Gemm && O.Kind != ir::OpKind::MatMul)
    return false;
  for (ir::TensorId In : O.Inputs)
    if (In != ir::NoTensor && G.tensor(In).Role == ir::TensorRole::Parameter)
      return true;
  return false;
}

/// Per op, the recurrent layer it belongs to: layers numbered by their
/// weights (W, the op's first weight input; an unrolled layer's cells
/// share it), in order of first use; other ops join the layer before them
/// (those before the first, the first). NumLayers: how many there are.
static std::vector<unsigned> recurrentLayers(const ir::Graph &G,
                                             unsigned &NumLayers) {
  std::map<ir::TensorId, unsigned> Layers;
  std::vector<unsigned> Of;
  unsigned Layer = 0;
  for (const ir::Op &O : G.ops()) {
    if (isRecurrent(O.Kind)) {
      unsigned W =
          llvm::countTrailingZeros(ir::opKindInfo(O.Kind).WeightInputs);
      auto [It, New] = Layers.insert({O.Inputs[W], unsigned(Layers.size())});
      Layer = It->second;
    }
    Of.push_back(Layer);
  }
  NumLayers = Layers.size();
  return Of;
}

static unsigned devicesPerNode(const Machine &M) {
  unsigned PerNode = 0;
  for (const simulator::Device &D : M.devices())
    PerNode += D.Node == 0;
  return std::max(1u, PerNode);
}

/// RNNs: one layer per GPU of a node, and each layer data parallel across
/// the nodes.
static Strategy rnnExpert(const ir::Graph &G, const Machine &M) {
  unsigned PerNode = devicesPerNode(M), Layers = 0;
  unsigned Nodes = M.numDevices() / PerNode;
  std::vector<unsigned> Layer = recurrentLayers(G, Layers);
  Strategy S;
  for (const ir::Op &O : G.ops())
    S.Configs.push_back(
        sampleSplit(G, O, Nodes, Layer[O.Id] % PerNode, PerNode));
  return S;
}

std::optional<Strategy> layerGroups(const ir::Graph &G, const Machine &M) {
  unsigned Layers = 0;
  std::vector<unsigned> Layer = recurrentLayers(G, Layers);
  unsigned N = M.numDevices();
  if (Layers < 2 || N < 2)
    return std::nullopt;
  // As many groups as layers (or devices), of equal power-of-two sizes.
  unsigned Groups = std::min(Layers, N), Size = 1;
  while (2 * Size * Groups <= N)
    Size *= 2;
  Strategy S;
  for (const ir::Op &O : G.ops())
    S.Configs.push_back(
        sampleSplit(G, O, Size, (Layer[O.Id] % Groups) * Size, 1));
  return S;
}

Strategy expert(const ir::Graph &G, const Machine &M) {
  bool Recurrent = llvm::any_of(
      G.ops(), [](const ir::Op &O) { return isRecurrent(O.Kind); });
  if (Recurrent)
    return rnnExpert(G, M);
  Strategy S = dataParallel(G, M);
  unsigned N = M.numDevices();
  for (const ir::Op &O : G.ops()) {
    if (!isFullyConnected(G, O))
      continue;
    // Split the output units (the last dim) across all devices.
    ParallelConfig C = ParallelConfig::single(G.outputType(O).rank(), 0);
    const ir::Shape &Dims = G.outputType(O).Dims;
    if (!Dims.empty() &&
        ir::parallelDims(G, O).Output.back() == ir::DimKind::Parameter)
      C.Degrees.back() = largestDegree(Dims.back(), N);
    S[O.Id] = C;
  }
  return S;
}

Strategy builtin(Builtin Kind, const ir::Graph &G, const Machine &M,
                 const simulator::CostModel &Cost) {
  switch (Kind) {
  case Builtin::DataParallel:
    return dataParallel(G, M);
  case Builtin::ModelParallel:
    return modelParallel(G, M, Cost);
  case Builtin::Expert:
    return expert(G, M);
  }
  llvm_unreachable("unknown Builtin");
}

} // namespace onnx2soap::soap_search
