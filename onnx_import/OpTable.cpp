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
  {                                                                            \
    Type, MinOpset, MaxOpset, 1, 1,                                            \
        [](NodeContext &C) { return unary(C, OpKind::Kind); }, #Kind, ""       \
  }
#define NARY(Type, Kind, Min, Max)                                             \
  {                                                                            \
    Type, MinOpset, MaxOpset, Min, Max,                                        \
        [](NodeContext &C) { return nary(C, OpKind::Kind); }, #Kind,           \
        "numpy broadcasting"                                                   \
  }

static const OnnxOp Table[] = {
    UNARY("Abs", Abs),
    NARY("Add", Add, 2, 2),
    {"And", MinOpset, MaxOpset, 2, 2,
     [](NodeContext &C) { return logical(C, Logic::And); }, "Where",
     "bool; Where(a, b, false)"},
    {"AveragePool", MinOpset, MaxOpset, 1, 1,
     [](NodeContext &C) { return pool(C, OpKind::AveragePool); }, "AveragePool",
     "auto_pad, ceil_mode, count_include_pad; dilations (19)"},
    {"BatchNormalization", MinOpset, MaxOpset, 5, 5, batchNormalization,
     "BatchNorm", "inference and training_mode (14+) with running stats"},
    {"Cast", MinOpset, MaxOpset, 1, 1, cast, "Cast", "no-op casts removed"},
    {"Ceil", MinOpset, MaxOpset, 1, 1,
     [](NodeContext &C) { return unary(C, OpKind::Ceil); }, "Ceil",
     "gradient 0, as PyTorch"},
    {"Celu", MinOpset, MaxOpset, 1, 1, celu, "Div, Elu, Mul",
     "alpha * Elu(x / alpha)"},
    {"Clip", MinOpset, MaxOpset, 1, 3, clip, "Clip",
     "min / max known at import time; the gradient passes where min < x < max "
     "(ReLU6 as PyTorch)"},
    {"Concat", MinOpset, MaxOpset, 1, Variadic, concat, "Concat", ""},
    {"Constant", MinOpset, MaxOpset, 0, 0, constant, "",
     "value, value_float(s), value_int(s)"},
    {"ConstantOfShape", MinOpset, MaxOpset, 1, 1, constantOfShape, "",
     "shape known at import time; over 4 Mi elements it becomes an Expand of "
     "the value"},
    {"Conv", MinOpset, MaxOpset, 2, 3, conv, "Conv",
     "N-D, groups, dilations, pads, auto_pad"},
    {"ConvTranspose", MinOpset, MaxOpset, 2, 3, convTranspose, "ConvTranspose",
     "output_shape, output_padding (less than the stride or the dilation), "
     "auto_pad (SAME not where it would pad before the first output)"},
    UNARY("Cos", Cos),
    {"CumSum", MinOpset, MaxOpset, 2, 2, cumSum, "CumSum",
     "axis known at import time; exclusive, reverse; f32, f64, i32, i64 "
     "(integers wrap on overflow); the axis is never split"},
    {"DepthToSpace", MinOpset, MaxOpset, 1, 1,
     [](NodeContext &C) { return depthSpace(C, true); }, "Reshape, Transpose",
     "DCR and CRD; rank 4"},
    NARY("Div", Div, 2, 2),
    {"Dropout", MinOpset, MaxOpset, 1, 3, dropout, "Dropout",
     "ratio / training_mode known at import time; identity in inference"},
    {"Einsum", MinOpset, MaxOpset, 1, Variadic, einsum,
     "ReduceSum, Transpose, Reshape, MatMul",
     "explicit and implicit output, ellipsis (broadcast, or summed where the "
     "output leaves it out); operands contracted pairwise as MatMuls, the "
     "pair sharing a label with the smallest result first; f32 (one "
     "operand: f32, f64); no diagonals (a label twice in one operand)"},
    {"Elu", MinOpset, MaxOpset, 1, 1,
     [](NodeContext &C) { return unary(C, OpKind::Elu); }, "Elu", ""},
    NARY("Equal", Equal, 2, 2),
    UNARY("Erf", Erf),
    UNARY("Exp", Exp),
    {"Expand", MinOpset, MaxOpset, 2, 2, expand, "Expand",
     "shape known at import time"},
    {"Flatten", MinOpset, MaxOpset, 1, 1, flatten, "Reshape", ""},
    {"Floor", MinOpset, MaxOpset, 1, 1,
     [](NodeContext &C) { return unary(C, OpKind::Floor); }, "Floor",
     "gradient 0, as PyTorch"},
    {"GRU", MinOpset, MaxOpset, 3, 6,
     [](NodeContext &C) { return recurrent(C, OpKind::GRU); }, "GRU",
     "default activations; no clip"},
    {"Gather", MinOpset, MaxOpset, 2, 2, gather, "Gather",
     "embeddings when the "
     "data is a weight"},
    {"GatherElements", MinOpset, MaxOpset, 2, 2, gatherElements,
     "GatherElements",
     "negative indices; the gradient scatter-added into the data's"},
    {"Gelu", 20, MaxOpset, 1, 1,
     [](NodeContext &C) { return unary(C, OpKind::Gelu); }, "Gelu",
     "approximate none or tanh"},
    {"Gemm", MinOpset, MaxOpset, 2, 3, gemm, "Gemm",
     "transA, transB, alpha, beta"},
    {"GlobalAveragePool", MinOpset, MaxOpset, 1, 1,
     [](NodeContext &C) { return globalPool(C, OpKind::GlobalAveragePool); },
     "GlobalAveragePool", ""},
    {"GlobalMaxPool", MinOpset, MaxOpset, 1, 1,
     [](NodeContext &C) { return globalPool(C, OpKind::GlobalMaxPool); },
     "GlobalMaxPool", ""},
    NARY("Greater", Greater, 2, 2),
    {"GreaterOrEqual", MinOpset, MaxOpset, 2, 2,
     [](NodeContext &C) { return compareOrEqual(C, OpKind::Greater); },
     "Greater, Equal, Where", "Where(a > b, true, a == b): false for NaN"},
    {"GroupNormalization", 18, MaxOpset, 3, 3, groupNormalization,
     "Reshape, LayerNorm, Mul, Add",
     "LayerNorm over [N, groups, rest] between Reshapes, then Mul and Add by "
     "scale and bias per group (18) or per channel (21); stash_type FLOAT"},
    {"HardSigmoid", MinOpset, MaxOpset, 1, 1,
     [](NodeContext &C) { return unary(C, OpKind::HardSigmoid); },
     "HardSigmoid", ""},
    {"HardSwish", 14, MaxOpset, 1, 1,
     [](NodeContext &C) { return unary(C, OpKind::HardSwish); }, "HardSwish",
     ""},
    {"Identity", MinOpset, MaxOpset, 1, 1, identity, "", "removed"},
    {"InstanceNormalization", MinOpset, MaxOpset, 3, 3, instanceNormalization,
     "LayerNorm, Mul, Add",
     "LayerNorm over the spatial dims, then Mul and Add by scale and bias per "
     "channel (left out where they are constant 1 and 0)"},
    {"LSTM", MinOpset, MaxOpset, 3, 8,
     [](NodeContext &C) { return recurrent(C, OpKind::LSTM); }, "LSTM",
     "default activations; no clip, no input_forget; --unroll-rnn gives "
     "LSTMCell ops"},
    {"LayerNormalization", 17, MaxOpset, 2, 3, layerNormalization, "LayerNorm",
     "stash_type FLOAT; also recognised from ReduceMean/Sub/Pow/Sqrt/Div"},
    {"LeakyRelu", MinOpset, MaxOpset, 1, 1,
     [](NodeContext &C) { return unary(C, OpKind::LeakyRelu); }, "LeakyRelu",
     ""},
    NARY("Less", Less, 2, 2),
    {"LessOrEqual", MinOpset, MaxOpset, 2, 2,
     [](NodeContext &C) { return compareOrEqual(C, OpKind::Less); },
     "Less, Equal, Where", "Where(a < b, true, a == b): false for NaN"},
    UNARY("Log", Log),
    {"LogSoftmax", MinOpset, MaxOpset, 1, 1,
     [](NodeContext &C) { return softmax(C, OpKind::LogSoftmax); },
     "LogSoftmax", ""},
    {"LpNormalization", MinOpset, MaxOpset, 1, 1, lpNormalization,
     "Abs, Mul, ReduceSum, Sqrt, Equal, Where, Div",
     "p 1 or 2: x / ||x|| over the axis, 0 where the norm is 0"},
    {"MatMul", MinOpset, MaxOpset, 2, 2, matMul, "MatMul",
     "batched, broadcasting, 1-D operands"},
    NARY("Max", Max, 1, Variadic),
    {"MaxPool", MinOpset, MaxOpset, 1, 1,
     [](NodeContext &C) { return pool(C, OpKind::MaxPool); }, "MaxPool",
     "auto_pad, ceil_mode, dilations; no Indices output"},
    {"Mean", MinOpset, MaxOpset, 1, Variadic,
     [](NodeContext &C) { return sumOrMean(C, true); }, "Add, Div",
     "numpy broadcasting; the sum, then / n"},
    NARY("Min", Min, 1, Variadic),
    {"Mish", 18, MaxOpset, 1, 1, mish, "Softplus, Tanh, Mul",
     "x * tanh(softplus(x))"},
    NARY("Mul", Mul, 2, 2),
    UNARY("Neg", Neg),
    UNARY("Not", Not),
    {"Or", MinOpset, MaxOpset, 2, 2,
     [](NodeContext &C) { return logical(C, Logic::Or); }, "Where",
     "bool; Where(a, true, b)"},
    {"PRelu", MinOpset, MaxOpset, 2, 2, prelu, "Greater, Mul, Where",
     "Where(x > 0, x, slope * x): the gradient at 0 is PyTorch's (slope)"},
    {"Pad", MinOpset, MaxOpset, 2, 4, pad, "Pad",
     "constant, reflect, edge (wrap from 19); pads known at import time"},
    NARY("Pow", Pow, 2, 2),
    {"Range", MinOpset, MaxOpset, 3, 3, range, "",
     "inputs known at import time"},
    UNARY("Reciprocal", Reciprocal),
    {"ReduceL1", MinOpset, MaxOpset, 1, 2,
     [](NodeContext &C) { return reduceComposite(C, ReduceForm::L1); },
     "Abs, ReduceSum", "ReduceSum(|x|)"},
    {"ReduceL2", MinOpset, MaxOpset, 1, 2,
     [](NodeContext &C) { return reduceComposite(C, ReduceForm::L2); },
     "Mul, ReduceSum, Sqrt",
     "sqrt(ReduceSum(x * x)); floating point only; its gradient at 0 is NaN"},
    {"ReduceLogSumExp", MinOpset, MaxOpset, 1, 2, reduceLogSumExp,
     "ReduceMax, Abs, Less, Where, Sub, Exp, ReduceSum, Log, Add",
     "log(ReduceSum(exp(x - max))) + max, the max 0 where not finite; f32, "
     "f64; an empty set gives -inf"},
    {"ReduceMax", MinOpset, MaxOpset, 1, 2,
     [](NodeContext &C) { return reduce(C, OpKind::ReduceMax); }, "ReduceMax",
     "axes attribute (<18) or known input (18+); f32, f64, i32, i64; the "
     "gradient shared by the inputs equal to the maximum (PyTorch's amax), "
     "none where it is NaN (PyTorch: NaN); an empty set gives -inf"},
    {"ReduceMean", MinOpset, MaxOpset, 1, 2,
     [](NodeContext &C) { return reduce(C, OpKind::ReduceMean); }, "ReduceMean",
     "axes attribute (<18) or known input (18+)"},
    {"ReduceMin", MinOpset, MaxOpset, 1, 2,
     [](NodeContext &C) { return reduce(C, OpKind::ReduceMin); }, "ReduceMin",
     "as ReduceMax; an empty set gives +inf"},
    {"ReduceProd", MinOpset, MaxOpset, 1, 2, reduceProd, "",
     "input known at import time (shape computations)"},
    {"ReduceSum", MinOpset, MaxOpset, 1, 2,
     [](NodeContext &C) { return reduce(C, OpKind::ReduceSum); }, "ReduceSum",
     "axes known at import time"},
    {"ReduceSumSquare", MinOpset, MaxOpset, 1, 2,
     [](NodeContext &C) { return reduceComposite(C, ReduceForm::SumSquare); },
     "Mul, ReduceSum", "ReduceSum(x * x)"},
    UNARY("Relu", Relu),
    {"Reshape", MinOpset, MaxOpset, 2, 2, reshape, "Reshape",
     "shape known at import time; allowzero"},
    {"Resize", MinOpset, MaxOpset, 1, 4, resize, "Resize",
     "nearest and linear over the spatial dims; scales or sizes known at "
     "import time; half_pixel, pytorch_half_pixel, align_corners, asymmetric; "
     "no antialias"},
    {"Round", MinOpset, MaxOpset, 1, 1,
     [](NodeContext &C) { return unary(C, OpKind::Round); }, "Round",
     "halves to even; gradient 0, as PyTorch"},
    {"Selu", MinOpset, MaxOpset, 1, 1, selu, "Elu, Mul",
     "gamma * Elu(x, alpha)"},
    {"Shape", MinOpset, MaxOpset, 1, 1, shape, "", "start/end (15+)"},
    UNARY("Sigmoid", Sigmoid),
    {"Sign", MinOpset, MaxOpset, 1, 1, sign,
     "Greater, Less, Cast, Sub, Equal, Where",
     "f32, f64, i32, i64; NaN stays NaN; no gradient"},
    UNARY("Sin", Sin),
    {"Size", MinOpset, MaxOpset, 1, 1, size, "", ""},
    {"Slice", MinOpset, MaxOpset, 3, 5, slice, "Slice",
     "starts/ends/axes/steps known at import time"},
    {"Softmax", MinOpset, MaxOpset, 1, 1,
     [](NodeContext &C) { return softmax(C, OpKind::Softmax); }, "Softmax", ""},
    {"SoftmaxCrossEntropyLoss", MinOpset, MaxOpset, 2, 3,
     softmaxCrossEntropyLoss, "SoftmaxCrossEntropyLoss",
     "mean/sum/none, ignore_index, weights"},
    UNARY("Softplus", Softplus),
    {"Softsign", MinOpset, MaxOpset, 1, 1, softsign, "Abs, Add, Div",
     "x / (|x| + 1)"},
    {"SpaceToDepth", MinOpset, MaxOpset, 1, 1,
     [](NodeContext &C) { return depthSpace(C, false); }, "Reshape, Transpose",
     "rank 4"},
    {"Split", MinOpset, MaxOpset, 1, 2, split, "Split",
     "split sizes known at import time; num_outputs (18+)"},
    UNARY("Sqrt", Sqrt),
    {"Squeeze", MinOpset, MaxOpset, 1, 2, squeeze, "Reshape",
     "axes known at import time"},
    NARY("Sub", Sub, 2, 2),
    {"Sum", MinOpset, MaxOpset, 1, Variadic,
     [](NodeContext &C) { return sumOrMean(C, false); }, "Add",
     "numpy broadcasting"},
    UNARY("Tanh", Tanh),
    {"ThresholdedRelu", MinOpset, MaxOpset, 1, 1, thresholdedRelu,
     "Greater, Where", "Where(x > alpha, x, 0)"},
    {"Tile", MinOpset, MaxOpset, 2, 2, tile, "Reshape, Expand",
     "repeats known at import time, at least 1"},
    {"Transpose", MinOpset, MaxOpset, 1, 1, transpose, "Transpose", ""},
    {"Trilu", 14, MaxOpset, 1, 2, trilu, "Where",
     "k known at import time; a constant mask of the last two dims"},
    {"Unsqueeze", MinOpset, MaxOpset, 2, 2, unsqueeze, "Reshape",
     "axes known at import time"},
    {"Where", MinOpset, MaxOpset, 3, 3,
     [](NodeContext &C) { return nary(C, OpKind::Where); }, "Where",
     "numpy broadcasting"},
    {"Xor", MinOpset, MaxOpset, 2, 2,
     [](NodeContext &C) { return logical(C, Logic::Xor); }, "Not, Where",
     "bool; Where(a, not b, b)"},
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
