//===- ir/RnnUnroll.h - Unrolling recurrent layers into cells --*- C++ -*-===//
//
// Replaces every LSTM / GRU op by one cell op per time step and direction,
// all reading the layer's W, R, B tensors (one parameter group). FlexFlow's
// RNN experiments plan at this granularity: cells of different layers and
// steps can run on different devices, and a cell can split its hidden units.
//
//===----------------------------------------------------------------------===//
#ifndef ONNX2SOAP_IR_RNNUNROLL_H
#define ONNX2SOAP_IR_RNNUNROLL_H

#include "ir/Graph.h"

namespace onnx2soap::ir {

/// Unrolls all recurrent ops; returns whether anything changed. Fails on a
/// layer the cells cannot express (peepholes, sequence_lens), naming it.
llvm::Expected<bool> unrollRecurrent(Graph &G);

} // namespace onnx2soap::ir

#endif
