//===- simulator/CostModel.cpp - The analytic roofline cost model ---------===//
//
// A partition's work is the op's whole-op FLOP and byte counts (from the op
// kind's registration) scaled by its share of the output and of the
// contraction dim; bytes use the region rule, so a channel split of a
// convolution still reads the whole input. Time is the roofline bound with a
// per-family efficiency, plus one kernel launch per task.
//
//===----------------------------------------------------------------------===//
#include "simulator/CostModel.h"
#include "ir/BatchDims.h"
#include "simulator/Strategy.h"
#include <algorithm>

namespace onnx2soap::simulator {

CostModel::~CostModel() = default;

unsigned optimizerStateCount(OptimizerKind Kind) {
  switch (Kind) {
  case OptimizerKind::Sgd:
    return 0;
  case OptimizerKind::SgdMomentum:
    return 1;
  case OptimizerKind::Adam:
    return 2;
  }
  llvm_unreachable("unknown OptimizerKind");
}

PartitionWork partitionWork(const PartitionShape &P) {
  const ir::Graph &G = P.G;
  const ir::Op &O = P.O;
  const ir::OpKindInfo &Info = ir::opKindInfo(O.Kind);
  ir::OpCost Whole = Info.Cost(G, O);
  double Share = double(ir::regionVolume(P.Out)) /
                 double(std::max<int64_t>(1, G.outputType(O).numElements()));
  int64_t Extent = ir::parallelDims(G, O).ReductionExtent;
  if (Extent > 0)
    Share *= double(P.Reduction.size()) / double(Extent);

  double Bytes = 0;
  for (unsigned I = 0; I < O.Inputs.size(); ++I) {
    const ir::TensorType *Type = G.inputType(O, I);
    if (!Type)
      continue;
    ir::Region R = Info.InputRegion(G, O, I, P.Out, P.Reduction);
    Bytes += double(ir::regionVolume(R)) * ir::dtypeSize(Type->Type);
  }
  for (unsigned I = 0; I < O.Outputs.size(); ++I) {
    ir::Region R = ir::outputRegionOf(G, O, I, P.Out, P.Reduction);
    Bytes +=
        double(ir::regionVolume(R)) * ir::dtypeSize(G.outputType(O, I).Type);
  }
  PartitionWork W;
  W.FlopsForward = Whole.FlopsForward * Share;
  W.FlopsBackward = Whole.FlopsBackward * Share;
  W.BytesForward = Bytes;
  // Backward traffic scales like the forward traffic of the partition.
  W.BytesBackward = Whole.BytesForward > 0
                        ? Whole.BytesBackward * Bytes / Whole.BytesForward
                        : Whole.BytesBackward * Share;
  return W;
}

double AnalyticCostModel::efficiency(ir::OpKind Kind) {
  switch (Kind) {
  case ir::OpKind::Conv:
  case ir::OpKind::ConvTranspose:
  case ir::OpKind::Gemm:
  case ir::OpKind::MatMul:
    return 0.6;
  case ir::OpKind::LSTM:
  case ir::OpKind::GRU:
  case ir::OpKind::LSTMCell:
  case ir::OpKind::GRUCell:
    return 0.4;
  default:
    // Everything else is memory-bound long before it is compute-bound.
    return 0.5;
  }
}

static double peakFlops(const DeviceType &Device, ir::DType Type) {
  bool Half = Type == ir::DType::Float16 || Type == ir::DType::BFloat16;
  return Half && Device.PeakFlopsF16 > 0 ? Device.PeakFlopsF16
                                         : Device.PeakFlopsF32;
}

static double roofline(double Flops, double Bytes, double Efficiency,
                       const DeviceType &Device, ir::DType Type) {
  double Compute = Flops / (peakFlops(Device, Type) * Efficiency);
  double Memory = Bytes / Device.MemoryBandwidth;
  return Device.LaunchOverhead + std::max(Compute, Memory);
}

TaskTimes AnalyticCostModel::opTimes(const PartitionShape &P,
                                     const DeviceType &Device) const {
  PartitionWork W = partitionWork(P);
  double Efficiency = efficiency(P.O.Kind);
  ir::DType Type = P.G.outputType(P.O).Type;
  TaskTimes T;
  T.Forward =
      roofline(W.FlopsForward, W.BytesForward, Efficiency, Device, Type);
  T.Backward =
      roofline(W.FlopsBackward, W.BytesBackward, Efficiency, Device, Type);
  return T;
}

double AnalyticCostModel::updateTime(OptimizerKind Kind, double Elements,
                                     ir::DType Type,
                                     const DeviceType &Device) const {
  // Reads parameter, gradient and state; writes parameter and state.
  double Tensors = 3 + 2 * optimizerStateCount(Kind);
  double Bytes = Tensors * Elements * ir::dtypeSize(Type);
  return Device.LaunchOverhead + Bytes / Device.MemoryBandwidth;
}

double CostModel::copyTime(double Bytes, unsigned Copies, bool Add,
                           const DeviceType &Device) const {
  // Reads the source (and, adding, the destination), writes the
  // destination.
  return double(Copies) * Device.LaunchOverhead +
         (Add ? 3 : 2) * Bytes / Device.MemoryBandwidth;
}

} // namespace onnx2soap::simulator
