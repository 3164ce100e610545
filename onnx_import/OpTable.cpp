//===- onnx_import/OpTable.cpp - ONNX operators the importer handles ------===//
//
// One row per (op_type, opset range). Rows whose op changed meaning inside
// 13..21 are split; a handler that reads the opset (ctx.opset()) covers
// attribute-to-input moves such as ReduceMean's axes in opset 18.
//
//===----------------------------------------------------------------------===//
#include "onnx_import/OpTable.h"
#include "onnx_import/handlers/Handlers.h"
#include "llvm/Support/FormatVariadic.h"
#include <algorithm>

namespace onnx2soap::onnx_import {

using namespace handlers;
using ir::OpKind;

#define UNARY(Type, Kind)                                                      \
  {Type, MinOpset, MaxOpset,                                                   \
   [](NodeContext &C) { return unary(C, OpKind::Kind); }, #Kind, ""}
#define NARY(Type, Kind)                                                       \
  {Type, MinOpset, MaxOpset,                                                   \
   [](NodeContext &C) { return nary(C, OpKind::Kind); }, #Kind,                \
   "numpy broadcasting"}

static const OnnxOp Table[] = {
    UNARY("Abs", Abs),
    NARY("Add", Add),
    {"AveragePool", MinOpset, MaxOpset,
     [](NodeContext &C) { return pool(C, OpKind::AveragePool); },
     "AveragePool", "auto_pad, ceil_mode, count_include_pad; dilations (19)"},
    {"BatchNormalization", MinOpset, MaxOpset, batchNormalization,
     "BatchNorm", "inference and training_mode (14+) with running stats"},
    {"Cast", MinOpset, MaxOpset, cast, "Cast", "no-op casts removed"},
    {"Concat", MinOpset, MaxOpset, concat, "Concat", ""},
    {"Constant", MinOpset, MaxOpset, constant, "",
     "value, value_float(s), value_int(s)"},
    {"ConstantOfShape", MinOpset, MaxOpset, constantOfShape, "",
     "shape known at import time"},
    {"Conv", MinOpset, MaxOpset, conv, "Conv",
     "N-D, groups, dilations, pads, auto_pad"},
    {"ConvTranspose", MinOpset, MaxOpset, convTranspose, "ConvTranspose",
     "output_shape, output_padding, auto_pad"},
    NARY("Div", Div),
    {"Dropout", MinOpset, MaxOpset, dropout, "Dropout",
     "ratio / training_mode known at import time; identity in inference"},
    NARY("Equal", Equal),
    UNARY("Erf", Erf),
    UNARY("Exp", Exp),
    {"Expand", MinOpset, MaxOpset, expand, "Expand",
     "shape known at import time"},
    {"Flatten", MinOpset, MaxOpset, flatten, "Reshape", ""},
    {"GRU", MinOpset, MaxOpset,
     [](NodeContext &C) { return recurrent(C, OpKind::GRU); }, "GRU",
     "default activations; no clip"},
    {"Gather", MinOpset, MaxOpset, gather, "Gather", "embeddings when the "
     "data is a weight"},
    {"Gelu", 20, MaxOpset,
     [](NodeContext &C) { return unary(C, OpKind::Gelu); }, "Gelu",
     "approximate none or tanh"},
    {"Gemm", MinOpset, MaxOpset, gemm, "Gemm", "transA, transB, alpha, beta"},
    {"GlobalAveragePool", MinOpset, MaxOpset,
     [](NodeContext &C) { return globalPool(C, OpKind::GlobalAveragePool); },
     "GlobalAveragePool", ""},
    {"GlobalMaxPool", MinOpset, MaxOpset,
     [](NodeContext &C) { return globalPool(C, OpKind::GlobalMaxPool); },
     "GlobalMaxPool", ""},
    NARY("Greater", Greater),
    {"Identity", MinOpset, MaxOpset, identity, "", "removed"},
    {"LSTM", MinOpset, MaxOpset,
     [](NodeContext &C) { return recurrent(C, OpKind::LSTM); }, "LSTM",
     "default activations; no clip, no input_forget; --unroll-rnn gives "
     "LSTMCell ops"},
    {"LayerNormalization", 17, MaxOpset, layerNormalization, "LayerNorm",
     "stash_type FLOAT; also recognised from ReduceMean/Sub/Pow/Sqrt/Div"},
    {"LeakyRelu", MinOpset, MaxOpset,
     [](NodeContext &C) { return unary(C, OpKind::LeakyRelu); }, "LeakyRelu",
     ""},
    NARY("Less", Less),
    UNARY("Log", Log),
    {"LogSoftmax", MinOpset, MaxOpset,
     [](NodeContext &C) { return softmax(C, OpKind::LogSoftmax); },
     "LogSoftmax", ""},
    {"MatMul", MinOpset, MaxOpset, matMul, "MatMul",
     "batched, broadcasting, 1-D operands"},
    NARY("Max", Max),
    {"MaxPool", MinOpset, MaxOpset,
     [](NodeContext &C) { return pool(C, OpKind::MaxPool); }, "MaxPool",
     "auto_pad, ceil_mode, dilations; no Indices output"},
    NARY("Min", Min),
    NARY("Mul", Mul),
    UNARY("Neg", Neg),
    UNARY("Not", Not),
    {"Pad", MinOpset, MaxOpset, pad, "Pad",
     "constant, reflect, edge (wrap from 19); pads known at import time"},
    NARY("Pow", Pow),
    {"Range", MinOpset, MaxOpset, range, "", "inputs known at import time"},
    UNARY("Reciprocal", Reciprocal),
    {"ReduceMean", MinOpset, MaxOpset,
     [](NodeContext &C) { return reduce(C, OpKind::ReduceMean); },
     "ReduceMean", "axes attribute (<18) or known input (18+)"},
    {"ReduceSum", MinOpset, MaxOpset,
     [](NodeContext &C) { return reduce(C, OpKind::ReduceSum); }, "ReduceSum",
     "axes known at import time"},
    UNARY("Relu", Relu),
    {"Reshape", MinOpset, MaxOpset, reshape, "Reshape",
     "shape known at import time; allowzero"},
    {"Shape", MinOpset, MaxOpset, shape, "", "start/end (15+)"},
    UNARY("Sigmoid", Sigmoid),
    {"Size", MinOpset, MaxOpset, size, "", ""},
    {"Slice", MinOpset, MaxOpset, slice, "Slice",
     "starts/ends/axes/steps known at import time"},
    {"Softmax", MinOpset, MaxOpset,
     [](NodeContext &C) { return softmax(C, OpKind::Softmax); }, "Softmax",
     ""},
    {"SoftmaxCrossEntropyLoss", MinOpset, MaxOpset, softmaxCrossEntropyLoss,
     "SoftmaxCrossEntropyLoss", "mean/sum/none, ignore_index, weights"},
    {"Split", MinOpset, MaxOpset, split, "Split",
     "split sizes known at import time; num_outputs (18+)"},
    UNARY("Sqrt", Sqrt),
    {"Squeeze", MinOpset, MaxOpset, squeeze, "Reshape",
     "axes known at import time"},
    NARY("Sub", Sub),
    UNARY("Tanh", Tanh),
    {"Transpose", MinOpset, MaxOpset, transpose, "Transpose", ""},
    {"Unsqueeze", MinOpset, MaxOpset, unsqueeze, "Reshape",
     "axes known at import time"},
    {"Where", MinOpset, MaxOpset,
     [](NodeContext &C) { return nary(C, OpKind::Where); }, "Where",
     "numpy broadcasting"},
};

#undef UNARY
#undef NARY

llvm::ArrayRef<OnnxOp> onnxOpTable() { return Table; }

const OnnxOp *findOnnxOp(llvm::StringRef OpType, int64_t Opset) {
  auto It = std::lower_bound(
      std::begin(Table), std::end(Table), OpType,
      [](const OnnxOp &Op, llvm::StringRef Type) { return Op.OpType < Type; });
  for (; It != std::end(Table) && It->OpType == OpType; ++It)
    if (It->FirstOpset <= Opset && Opset <= It->LastOpset)
      return It;
  return nullptr;
}

std::string onnxSupportMarkdown() {
  std::string Out;
  Out += "# Supported ONNX operators\n\n";
  Out += "Generated by `onnx2soap ops --markdown` from the importer's op "
         "table (`onnx_import/OpTable.cpp`); do not edit by hand.\n\n";
  Out += llvm::formatv("Models must use default-domain opsets {0} to {1}. An "
                       "operator that becomes no IR op is evaluated at import "
                       "time (its inputs must be known then) or removed.\n\n",
                       MinOpset, MaxOpset)
             .str();
  Out += "| ONNX operator | opsets | IR op | notes |\n";
  Out += "|---|---|---|---|\n";
  for (const OnnxOp &Op : Table)
    Out += llvm::formatv("| {0} | {1}–{2} | {3} | {4} |\n", Op.OpType,
                         Op.FirstOpset, Op.LastOpset,
                         *Op.Becomes ? Op.Becomes : "(folded)", Op.Notes)
               .str();
  return Out;
}

} // namespace onnx2soap::onnx_import
