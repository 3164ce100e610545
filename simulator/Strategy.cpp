//===- simulator/Strategy.cpp - Partition geometry and config checks ------===//
//
// Where each partition of an op's config lies in its output and contraction
// dim, and whether a config is one the planner and the generated program can
// run.
//
//===----------------------------------------------------------------------===//
#include "simulator/Strategy.h"
#include "ir/BatchDims.h"
#include "ir/Error.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MathExtras.h"

namespace onnx2soap::simulator {

ParallelConfig ParallelConfig::single(unsigned Rank, DeviceId Device) {
  ParallelConfig C;
  C.Degrees.assign(Rank, 1);
  C.FirstDevice = Device;
  return C;
}

unsigned ParallelConfig::numPartitions() const {
  unsigned N = Reduction;
  for (uint32_t D : Degrees)
    N *= D;
  return N;
}

unsigned ParallelConfig::coordinate(unsigned Partition, unsigned Dim) const {
  unsigned Rest = Partition / Reduction;
  for (unsigned D = Degrees.size(); D-- > Dim + 1;)
    Rest /= Degrees[D];
  return Rest % Degrees[Dim];
}

std::string ParallelConfig::str() const {
  std::string S = "[";
  for (size_t I = 0; I < Degrees.size(); ++I)
    S += (I ? "," : "") + std::to_string(Degrees[I]);
  S += "]x" + std::to_string(Reduction) + " @" + std::to_string(FirstDevice);
  if (numPartitions() > 1)
    S += "+" + std::to_string(DeviceStride);
  return S;
}

ir::Region outputRegion(const ir::Graph &G, const ir::Op &O,
                        const ParallelConfig &C, unsigned P) {
  const ir::Shape &Dims = G.outputType(O).Dims;
  ir::Region R(Dims.size());
  for (unsigned D = 0; D < Dims.size(); ++D)
    R[D] = partInterval(Dims[D], C.Degrees[D], C.coordinate(P, D));
  return R;
}

ir::Interval reductionSlice(const ir::Graph &G, const ir::Op &O,
                            const ParallelConfig &C, unsigned P) {
  int64_t Extent = ir::parallelDims(G, O).ReductionExtent;
  return partInterval(Extent, C.Reduction, C.reductionIndex(P));
}

llvm::Error checkConfig(const ir::Graph &G, const ir::Op &O,
                        const ParallelConfig &C, unsigned NumDevices) {
  const ir::Shape &Dims = G.outputType(O).Dims;
  ir::ParallelDims Parallel = ir::parallelDims(G, O);
  if (C.Degrees.size() != Dims.size())
    return fail(llvm::formatv("{0} degrees given for an output of rank {1}",
                              C.Degrees.size(), Dims.size()));
  for (unsigned D = 0; D < Dims.size(); ++D) {
    if (C.Degrees[D] < 1 || C.Degrees[D] > Dims[D])
      return fail(llvm::formatv("degree {0} of dim {1} is not between 1 and "
                                "the dim's extent {2}",
                                C.Degrees[D], D, Dims[D]));
    if (C.Degrees[D] > 1 && Parallel.Output[D] == ir::DimKind::None)
      return fail(llvm::formatv("dim {0} cannot be split", D));
  }
  if (C.Reduction < 1 ||
      (C.Reduction > 1 && C.Reduction > Parallel.ReductionExtent))
    return fail(Parallel.ReductionExtent
                    ? llvm::formatv("reduction degree {0} is not between 1 "
                                    "and the contraction extent {1}",
                                    C.Reduction, Parallel.ReductionExtent)
                          .str()
                    : llvm::formatv("reduction degree {0}: the op has no "
                                    "contraction dim to split",
                                    C.Reduction)
                          .str());
  // In 64 bits, saturating: degrees a file gives may multiply past 32 bits,
  // where numPartitions() would wrap.
  uint64_t Parts = C.Reduction;
  for (uint32_t D : C.Degrees)
    Parts = llvm::SaturatingMultiply(Parts, uint64_t(D));
  if (Parts > NumDevices)
    return fail(
        llvm::formatv("{0} partitions for {1} devices", Parts, NumDevices));
  if (Parts > 1 && C.DeviceStride == 0)
    return fail("device stride 0 puts every partition on one device");
  uint64_t Last = C.FirstDevice + (Parts - 1) * uint64_t(C.DeviceStride);
  if (Last >= NumDevices)
    return fail(llvm::formatv("partition {0} would run on device {1}; the "
                              "cluster has {2}",
                              Parts - 1, Last, NumDevices));
  return llvm::Error::success();
}

llvm::Error checkStrategy(const ir::Graph &G, const Strategy &S,
                          unsigned NumDevices) {
  if (S.Configs.size() != G.numOps())
    return fail(llvm::formatv("the strategy has {0} configs for {1} ops",
                              S.Configs.size(), G.numOps()));
  for (const ir::Op &O : G.ops())
    if (llvm::Error E = checkConfig(G, O, S[O.Id], NumDevices))
      return fail(llvm::formatv("op '{0}' ({1}): {2}", O.Name,
                                ir::opKindName(O.Kind),
                                llvm::toString(std::move(E))));
  return llvm::Error::success();
}

} // namespace onnx2soap::simulator
