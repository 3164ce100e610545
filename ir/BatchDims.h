//===- ir/BatchDims.h - The dim holding the samples -------------*- C++ -*-===//
//
// FlexFlow's Sample dimension is a property of data flow, not of an op kind:
// an elementwise op's dim 0 is the batch for a CNN activation but the
// sequence for an LSTM output. This analysis propagates the batch dim from
// the graph inputs through each op's region rule, and parallelDims() uses it
// to tell Sample from Attribute dims.
//
//===----------------------------------------------------------------------===//
#ifndef ONNX2SOAP_IR_BATCHDIMS_H
#define ONNX2SOAP_IR_BATCHDIMS_H

#include "ir/Graph.h"

namespace onnx2soap::ir {

/// Sets Tensor::BatchDim of every op output from the BatchDim of the graph
/// inputs (which the importer sets).
void inferBatchDims(Graph &G);

/// The op kind's parallelizable dims with the dim carrying the batch marked
/// Sample.
ParallelDims parallelDims(const Graph &G, const Op &O);

/// The region of output Output that a partition computing region Out of
/// output 0 (and slice Reduction of the contraction dim) writes: the kind's
/// OutputRegion rule, or by default the dims aligned from the right with
/// output 0 take Out's interval where the extents agree and the others are
/// whole.
Region outputRegionOf(const Graph &G, const Op &O, unsigned Output,
                      llvm::ArrayRef<Interval> Out, Interval Reduction);

} // namespace onnx2soap::ir

#endif
