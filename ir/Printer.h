//===- ir/Printer.h - Text form of a graph ---------------------*- C++ -*-===//
//
// A stable, line-per-entity text form of a Graph for golden tests and for
// `onnx2soap inspect --ir`: tensors with their roles and types, then ops in
// order with their attributes. Identical graphs print identically.
//
//===----------------------------------------------------------------------===//
#ifndef ONNX2SOAP_IR_PRINTER_H
#define ONNX2SOAP_IR_PRINTER_H

#include "ir/Graph.h"
#include "llvm/Support/raw_ostream.h"

namespace onnx2soap::ir {

void printGraph(const Graph &G, llvm::raw_ostream &OS);

} // namespace onnx2soap::ir

#endif
