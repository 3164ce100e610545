//===- ir/ops/OpHelpers.h - Shared op kind pieces ---------------*- C++ -*-===//
//
// Private to ir/ops: error construction, broadcasting, and the default cost,
// parallel-dim and region rules that several families share.
//
//===----------------------------------------------------------------------===//
#ifndef ONNX2SOAP_IR_OPS_OPHELPERS_H
#define ONNX2SOAP_IR_OPS_OPHELPERS_H

#include "ir/Error.h"
#include "ir/Graph.h"
#include "ir/OpKind.h"
#include "llvm/Support/FormatVariadic.h"
#include <optional>

namespace onnx2soap::ir {

// Each family file defines the info functions of its kinds.
#define OP_KIND(Name) const OpKindInfo &info##Name();
#include "ir/OpKinds.def"

namespace ops {

/// onnx2soap::fail() of a formatv message.
template <typename... Ts> llvm::Error fail(const char *Format, Ts &&...Vals) {
  return onnx2soap::fail(llvm::formatv(Format, std::forward<Ts>(Vals)...));
}

/// Numpy-style multidirectional broadcast of several shapes.
std::optional<Shape> broadcastShapes(llvm::ArrayRef<const Shape *> Shapes);

/// Region of an input broadcast to the output: aligned from the right, size-1
/// dims (broadcast) take [0,1).
Region broadcastRegion(llvm::ArrayRef<int64_t> InputDims,
                       llvm::ArrayRef<Interval> Out);

/// Sum of the byte sizes of an op's present inputs and of its outputs.
double ioBytes(const Graph &G, const Op &O);

/// Cost of an elementwise op doing FlopsPerElement per output element
/// forward and BackwardFlopsPerElement backward.
OpCost elementwiseCost(const Graph &G, const Op &O, double FlopsPerElement,
                       double BackwardFlopsPerElement);

/// Every dim of output 0 an Attribute (refined to Sample on the batch dim).
ParallelDims allAttribute(const Graph &G, const Op &O);

/// Input region = output region, broadcast to the input's shape.
Region sameRegion(const Graph &G, const Op &O, unsigned Input,
                  llvm::ArrayRef<Interval> Out, Interval Reduction);

/// Whether input I of O is a learnable parameter (or frozen/const weight).
bool isWeight(const Graph &G, const Op &O, unsigned I);

} // namespace ops
} // namespace onnx2soap::ir

#endif
