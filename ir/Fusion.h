//===- ir/Fusion.h - Recognizing decomposed LayerNorm and GELU -*- C++ -*-===//
//
// Exporters for opsets without LayerNormalization / Gelu spell them out as
// chains of primitive ops. Planning them as one op each gives the search one
// decision instead of six and the cost model one kernel; these passes find
// the chains and replace them.
//
//===----------------------------------------------------------------------===//
#ifndef ONNX2SOAP_IR_FUSION_H
#define ONNX2SOAP_IR_FUSION_H

#include "ir/Graph.h"

namespace onnx2soap::ir {

/// ReduceMean / Sub / Pow 2 / ReduceMean / Add eps / Sqrt / Div, with an
/// optional Mul by a scale and Add of a bias, over trailing dims → LayerNorm.
/// Returns the number of patterns replaced.
unsigned fuseLayerNorm(Graph &G);

/// x * 0.5 * (1 + erf(x / sqrt 2)) in the orders exporters emit → Gelu.
unsigned fuseGelu(Graph &G);

/// Runs both passes and compacts the graph when anything changed.
unsigned fusePatterns(Graph &G);

} // namespace onnx2soap::ir

#endif
