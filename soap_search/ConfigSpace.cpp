//===- soap_search/ConfigSpace.cpp - The valid configs of each op ---------===//
//
// Shapes are enumerated once per op (a few hundred for a convolution on 64
// devices); placements are computed on demand.
//
//===----------------------------------------------------------------------===//
#include "soap_search/ConfigSpace.h"
#include "ir/BatchDims.h"
#include <algorithm>

namespace onnx2soap::soap_search {
using simulator::ParallelConfig;

/// Degrees usable for a dim of Extent: divisors of both (only 1 and
/// NumDevices when AllOrNothing).
static llvm::SmallVector<uint32_t, 8>
degreesFor(int64_t Extent, unsigned NumDevices, bool AllOrNothing) {
  llvm::SmallVector<uint32_t, 8> Degrees;
  for (uint32_t D = 1; D <= NumDevices; ++D)
    if (NumDevices % D == 0 && Extent % D == 0 &&
        (!AllOrNothing || D == 1 || D == NumDevices))
      Degrees.push_back(D);
  return Degrees;
}

ConfigSpace::ConfigSpace(const ir::Graph &G, unsigned NumDevices,
                         ConfigSpaceOptions Options)
    : NumDevices(NumDevices), Options(Options), Shapes(G.numOps()),
      Fixed(G.numOps(), false) {
  for (const ir::Op &O : G.ops()) {
    const ir::Shape &Dims = G.outputType(O).Dims;
    ir::ParallelDims Parallel = ir::parallelDims(G, O);
    // Choices per dim, the contraction dim last.
    std::vector<llvm::SmallVector<uint32_t, 8>> Choices;
    bool Narrow = Options.SampleAndParameterOnly;
    for (unsigned D = 0; D < Dims.size(); ++D) {
      ir::DimKind Kind = Parallel.Output[D];
      bool Splittable = Kind != ir::DimKind::None &&
                        !(Narrow && Kind == ir::DimKind::Attribute);
      Choices.push_back(
          Splittable ? degreesFor(Dims[D], NumDevices, Options.AllOrNothing)
                     : llvm::SmallVector<uint32_t, 8>{1});
    }
    Choices.push_back(Parallel.ReductionExtent > 0 && !Narrow
                          ? degreesFor(Parallel.ReductionExtent, NumDevices,
                                       Options.AllOrNothing)
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
        if (Parts == 1 || !Options.Accept || Options.Accept(O.Id, C))
          Shapes[O.Id].push_back(C);
      }
      size_t D = Choices.size();
      while (D > 0 && ++Pick[D - 1] == Choices[D - 1].size())
        Pick[--D] = 0;
      if (D == 0)
        break;
    }
    if (Options.FixDataMovement && ir::opKindInfo(O.Kind).Cost &&
        ir::opKindInfo(O.Kind).Cost(G, O).FlopsForward == 0)
      fixToSampleSplit(O.Id, Parallel);
  }
}

void ConfigSpace::fixToSampleSplit(ir::OpId Op, const ir::ParallelDims &Dims) {
  // Shapes come in odometer order, so the first with the most partitions
  // over Sample dims alone is kept (the whole op when none splits).
  ParallelConfig Best = Shapes[Op].front();
  for (const ParallelConfig &Shape : Shapes[Op]) {
    bool SampleOnly = Shape.Reduction == 1;
    for (unsigned D = 0; D < Shape.Degrees.size(); ++D)
      SampleOnly &=
          Shape.Degrees[D] == 1 || Dims.Output[D] == ir::DimKind::Sample;
    if (SampleOnly && Shape.numPartitions() > Best.numPartitions())
      Best = Shape;
  }
  Shapes[Op] = {Best};
  Fixed[Op] = true;
}

unsigned ConfigSpace::numPlacements(unsigned Partitions) const {
  unsigned Blocks = NumDevices / Partitions;
  if (Partitions == 1 && Options.WholeOpDevices)
    return std::min(Blocks, Options.WholeOpDevices);
  // Contiguous blocks, and for 1 < Partitions < NumDevices the evenly
  // spread placements too.
  return Partitions > 1 && Blocks > 1 && !Options.ContiguousOnly ? 2 * Blocks
                                                                 : Blocks;
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
  if (Fixed[Op])
    return place(Shapes[Op].front(), 0);
  const ParallelConfig &Shape = Shapes[Op][uniformIndex(R, Shapes[Op].size())];
  return place(Shape, uniformIndex(R, numPlacements(Shape.numPartitions())));
}

ParallelConfig ConfigSpace::randomWhole(ir::OpId Op, Rng &R) const {
  if (Fixed[Op])
    return place(Shapes[Op].front(), 0);
  // Shapes come in odometer order from all degrees 1: the first is unsplit.
  return place(Shapes[Op].front(), uniformIndex(R, numPlacements(1)));
}

std::vector<ParallelConfig> ConfigSpace::all(ir::OpId Op) const {
  std::vector<ParallelConfig> All;
  if (Fixed[Op])
    return {place(Shapes[Op].front(), 0)};
  for (const ParallelConfig &Shape : Shapes[Op])
    for (unsigned I = 0; I < numPlacements(Shape.numPartitions()); ++I)
      All.push_back(place(Shape, I));
  return All;
}

uint64_t ConfigSpace::size(ir::OpId Op) const {
  if (Fixed[Op])
    return 1;
  uint64_t N = 0;
  for (const ParallelConfig &Shape : Shapes[Op])
    N += numPlacements(Shape.numPartitions());
  return N;
}

bool ConfigSpace::contains(ir::OpId Op, const ParallelConfig &C) const {
  if (Fixed[Op])
    return C == place(Shapes[Op].front(), 0);
  for (const ParallelConfig &Shape : Shapes[Op]) {
    if (Shape.Degrees != C.Degrees || Shape.Reduction != C.Reduction)
      continue;
    for (unsigned I = 0; I < numPlacements(Shape.numPartitions()); ++I)
      if (place(Shape, I) == C)
        return true;
  }
  return false;
}

simulator::Strategy ConfigSpace::project(simulator::Strategy S) const {
  for (ir::OpId Op = 0; Op < S.Configs.size(); ++Op)
    if (!contains(Op, S[Op]))
      S[Op] = all(Op).front();
  return S;
}

bool splitsAttribute(const ir::ParallelDims &Dims,
                     const simulator::ParallelConfig &Shape) {
  for (unsigned D = 0; D < Shape.Degrees.size(); ++D)
    if (Shape.Degrees[D] > 1 && Dims.Output[D] == ir::DimKind::Attribute)
      return true;
  return false;
}

simulator::Strategy ConfigSpace::admit(simulator::Strategy S) const {
  if (Options.restricts())
    return project(std::move(S));
  if (!Options.Accept)
    return S;
  for (ir::OpId Op = 0; Op < S.Configs.size(); ++Op) {
    ParallelConfig &C = S[Op];
    if (C.numPartitions() > 1 && !Options.Accept(Op, C))
      C = ParallelConfig::single(C.Degrees.size(), C.FirstDevice);
  }
  return S;
}

} // namespace onnx2soap::soap_search
