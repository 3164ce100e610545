//===- soap_search/ConfigSpace.cpp - The valid configs of each op ---------===//
//
// Shapes are enumerated once per op (a few hundred for a convolution on 64
// devices); placements are computed on demand.
//
//===----------------------------------------------------------------------===//
#include "soap_search/ConfigSpace.h"
#include "ir/BatchDims.h"

namespace onnx2soap::soap_search {
using simulator::ParallelConfig;

/// Degrees usable for a dim of Extent: divisors of both.
static llvm::SmallVector<uint32_t, 8> degreesFor(int64_t Extent,
                                                 unsigned NumDevices) {
  llvm::SmallVector<uint32_t, 8> Degrees;
  for (uint32_t D = 1; D <= NumDevices; ++D)
    if (NumDevices % D == 0 && Extent % D == 0)
      Degrees.push_back(D);
  return Degrees;
}

ConfigSpace::ConfigSpace(const ir::Graph &G, unsigned NumDevices)
    : NumDevices(NumDevices), Shapes(G.numOps()) {
  for (const ir::Op &O : G.ops()) {
    const ir::Shape &Dims = G.outputType(O).Dims;
    ir::ParallelDims Parallel = ir::parallelDims(G, O);
    // Choices per dim, the contraction dim last.
    std::vector<llvm::SmallVector<uint32_t, 8>> Choices;
    for (unsigned D = 0; D < Dims.size(); ++D)
      Choices.push_back(Parallel.Output[D] == ir::DimKind::None
                            ? llvm::SmallVector<uint32_t, 8>{1}
                            : degreesFor(Dims[D], NumDevices));
    Choices.push_back(Parallel.ReductionExtent > 0
                          ? degreesFor(Parallel.ReductionExtent, NumDevices)
                          : llvm::SmallVector<uint32_t, 8>{1});
    std::vector<unsigned> Pick(Choices.size(), 0);
    while (true) {
      uint64_t Parts = 1;
      for (size_t D = 0; D < Choices.size(); ++D)
        Parts *= Choices[D][Pick[D]];
      if (Parts <= NumDevices) {
        ParallelConfig C;
        for (unsigned D = 0; D < Dims.size(); ++D)
          C.Degrees.push_back(Choices[D][Pick[D]]);
        C.Reduction = Choices.back()[Pick.back()];
        Shapes[O.Id].push_back(C);
      }
      size_t D = Choices.size();
      while (D > 0 && ++Pick[D - 1] == Choices[D - 1].size())
        Pick[--D] = 0;
      if (D == 0)
        break;
    }
  }
}

unsigned ConfigSpace::numPlacements(unsigned Partitions) const {
  unsigned Blocks = NumDevices / Partitions;
  // Contiguous blocks, and for 1 < Partitions < NumDevices the evenly
  // spread placements too.
  return Partitions > 1 && Blocks > 1 ? 2 * Blocks : Blocks;
}

ParallelConfig ConfigSpace::place(ParallelConfig Shape, unsigned Index) const {
  unsigned Partitions = Shape.numPartitions();
  unsigned Blocks = NumDevices / Partitions;
  if (Index < Blocks) {
    Shape.FirstDevice = Index * Partitions;
    Shape.DeviceStride = 1;
  } else {
    Shape.FirstDevice = Index - Blocks;
    Shape.DeviceStride = Blocks;
  }
  return Shape;
}

ParallelConfig ConfigSpace::random(ir::OpId Op, Rng &R) const {
  const ParallelConfig &Shape = Shapes[Op][uniformIndex(R, Shapes[Op].size())];
  return place(Shape, uniformIndex(R, numPlacements(Shape.numPartitions())));
}

std::vector<ParallelConfig> ConfigSpace::all(ir::OpId Op) const {
  std::vector<ParallelConfig> All;
  for (const ParallelConfig &Shape : Shapes[Op])
    for (unsigned I = 0; I < numPlacements(Shape.numPartitions()); ++I)
      All.push_back(place(Shape, I));
  return All;
}

uint64_t ConfigSpace::size(ir::OpId Op) const {
  uint64_t N = 0;
  for (const ParallelConfig &Shape : Shapes[Op])
    N += numPlacements(Shape.numPartitions());
  return N;
}

} // namespace onnx2soap::soap_search
