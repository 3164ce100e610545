//===- onnx_import/handlers/Handlers.h - Op handlers ------------*- C++ -*-===//
//
// Declarations of the handlers and folders that onnx_import/OpTable.cpp
// lists. Most ops share a generic handler parameterized by the IR kind; the
// short list of custom ones normalizes attributes (auto_pad, negative axes,
// shape inputs) into the IR's explicit form.
//
//===----------------------------------------------------------------------===//
#ifndef ONNX2SOAP_ONNX_IMPORT_HANDLERS_HANDLERS_H
#define ONNX2SOAP_ONNX_IMPORT_HANDLERS_HANDLERS_H

#include "onnx_import/NodeContext.h"
#include <optional>

namespace onnx2soap::onnx_import::handlers {

// Helpers the handlers share (Shape.cpp).
/// The values of input I, known at import time and of an integer type.
llvm::Expected<ir::IntList> intsOf(NodeContext &C, unsigned I,
                                   llvm::StringRef What);
/// Normalizes each axis against Rank; fails on duplicates when Unique.
llvm::Error normalizeAxes(NodeContext &C, ir::IntList &Axes, unsigned Rank,
                          bool Unique = true);

/// Fails, naming Names, unless input 0's element type is one of Types
/// (what the kernels of the IR ops a handler emits take).
llvm::Error requireInputType(NodeContext &C, llvm::ArrayRef<ir::DType> Types,
                             llvm::StringRef Names);
/// The element types the float-only kernels take, and the float and
/// integer ones.
inline constexpr ir::DType FloatKernelTypes[] = {ir::DType::Float32,
                                                 ir::DType::Float64};
inline constexpr ir::DType NumberKernelTypes[] = {
    ir::DType::Float32, ir::DType::Float64, ir::DType::Int32, ir::DType::Int64};

// Elementwise.cpp
llvm::Error unary(NodeContext &C, ir::OpKind Kind);
llvm::Error nary(NodeContext &C, ir::OpKind Kind);
llvm::Error clip(NodeContext &C);
llvm::Error cast(NodeContext &C);
llvm::Error identity(NodeContext &C);
llvm::Error dropout(NodeContext &C);

// Window.cpp
llvm::Error conv(NodeContext &C);
llvm::Error convTranspose(NodeContext &C);
llvm::Error pool(NodeContext &C, ir::OpKind Kind);
llvm::Error globalPool(NodeContext &C, ir::OpKind Kind);
llvm::Error resize(NodeContext &C);

// Normalization.cpp
llvm::Error batchNormalization(NodeContext &C);
llvm::Error layerNormalization(NodeContext &C);
llvm::Error instanceNormalization(NodeContext &C);
llvm::Error groupNormalization(NodeContext &C);
llvm::Error softmax(NodeContext &C, ir::OpKind Kind);
llvm::Error reduce(NodeContext &C, ir::OpKind Kind);
/// CumSum over an axis known at import time.
llvm::Error cumSum(NodeContext &C);
/// The IR `axes` and `keepdims` of a Reduce* node whose axes became an
/// input at opset AxesBecameInput; nullopt when it reduces nothing (a
/// scalar input, or no axes with noop_with_empty_axes).
llvm::Expected<std::optional<ir::Attributes>>
reduceAttributes(NodeContext &C, int64_t AxesBecameInput);
/// The result of a reduction (attributes Attrs) over an empty set, filled
/// with Float (or Int for integer types), when one of its axes is empty;
/// nullopt otherwise.
llvm::Expected<std::optional<ConstTensor>>
emptyReduction(NodeContext &C, const ir::Attributes &Attrs, double Float,
               int64_t Int);
llvm::Error softmaxCrossEntropyLoss(NodeContext &C);

// Composite.cpp: ONNX ops written as several IR ops.
enum class ReduceForm { SumSquare, L1, L2 };
llvm::Error prelu(NodeContext &C);
llvm::Error selu(NodeContext &C);
llvm::Error celu(NodeContext &C);
llvm::Error softsign(NodeContext &C);
llvm::Error thresholdedRelu(NodeContext &C);
llvm::Error mish(NodeContext &C);
llvm::Error sumOrMean(NodeContext &C, bool Mean);
llvm::Error tile(NodeContext &C);
llvm::Error reduceComposite(NodeContext &C, ReduceForm Form);
llvm::Error lpNormalization(NodeContext &C);
llvm::Error reduceLogSumExp(NodeContext &C);
llvm::Error sign(NodeContext &C);
enum class Logic { And, Or, Xor };
llvm::Error logical(NodeContext &C, Logic Form);
/// LessOrEqual (Strict Less) or GreaterOrEqual (Strict Greater).
llvm::Error compareOrEqual(NodeContext &C, ir::OpKind Strict);
llvm::Error trilu(NodeContext &C);
/// DepthToSpace (ToSpace) or SpaceToDepth.
llvm::Error depthSpace(NodeContext &C, bool ToSpace);
llvm::Error reduceProd(NodeContext &C);
llvm::Error einsum(NodeContext &C);

// Shape.cpp
llvm::Error reshape(NodeContext &C);
llvm::Error flatten(NodeContext &C);
llvm::Error squeeze(NodeContext &C);
llvm::Error unsqueeze(NodeContext &C);
llvm::Error transpose(NodeContext &C);
llvm::Error concat(NodeContext &C);
llvm::Error split(NodeContext &C);
llvm::Error slice(NodeContext &C);
llvm::Error pad(NodeContext &C);
llvm::Error expand(NodeContext &C);
llvm::Error gather(NodeContext &C);
llvm::Error gatherElements(NodeContext &C);
// Ops that exist only in shape computations: they always fold.
llvm::Error shape(NodeContext &C);
llvm::Error size(NodeContext &C);
llvm::Error constant(NodeContext &C);
llvm::Error constantOfShape(NodeContext &C);
llvm::Error range(NodeContext &C);

// Contraction.cpp
llvm::Error gemm(NodeContext &C);
llvm::Error matMul(NodeContext &C);
llvm::Error recurrent(NodeContext &C, ir::OpKind Kind);

} // namespace onnx2soap::onnx_import::handlers

#endif
