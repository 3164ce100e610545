//===- ir/OpKind.h - IR op kinds and what each one knows -------*- C++ -*-===//
//
// OpKind enumerates the IR's operations (generated from OpKinds.def);
// OpKindInfo is everything the rest of the project asks about a kind: its
// shape rule, FLOP and byte counts, parallelizable dims and the region of
// each input that a region of its output needs.
//
//===----------------------------------------------------------------------===//
#ifndef ONNX2SOAP_IR_OPKIND_H
#define ONNX2SOAP_IR_OPKIND_H

#include "ir/Attributes.h"
#include "ir/Shape.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/Error.h"
#include <optional>

namespace onnx2soap::ir {

class Graph;
struct Op;

enum class OpKind : uint8_t {
#define OP_KIND(Name) Name,
#include "ir/OpKinds.def"
};

constexpr unsigned NumOpKinds = 0
#define OP_KIND(Name) +1
#include "ir/OpKinds.def"
    ;

/// "Conv", "MatMul", ... (the enumerator's spelling).
llvm::StringRef opKindName(OpKind Kind);
std::optional<OpKind> parseOpKind(llvm::StringRef Name);

/// How splitting one output dim divides the work (FlexFlow's Table 1).
enum class DimKind : uint8_t {
  Sample,    ///< the batch: every partition sees whole parameters
  Attribute, ///< a data dim (height, width, sequence): no parameter split
  Parameter, ///< splitting it splits the op's parameters (channels, units)
  None,      ///< cannot be split (softmax axis, normalized dims, ...)
};
llvm::StringRef dimKindName(DimKind Kind);

/// The parallelizable dims of an op: one DimKind per dim of output 0, plus
/// the extent of a contraction dim that may be split with partial sums
/// reduced afterwards (0 when the op has none).
struct ParallelDims {
  llvm::SmallVector<DimKind, 4> Output;
  int64_t ReductionExtent = 0;
};

/// Arithmetic and memory traffic of one op instance (whole, unpartitioned).
/// FLOPs count a multiply-add as two; bytes are those read plus written.
struct OpCost {
  double FlopsForward = 0;
  double FlopsBackward = 0;
  double BytesForward = 0;
  double BytesBackward = 0;
};

/// Input types handed to a shape rule; nullptr marks an absent optional
/// input.
using InputTypes = llvm::ArrayRef<const TensorType *>;
using OutputTypes = llvm::SmallVector<TensorType, 1>;

struct OpKindInfo {
  OpKind Kind;
  unsigned MinInputs;
  unsigned MaxInputs;
  /// Inputs that hold learnable weights when fed by an initializer
  /// (bit I = input I), e.g. Conv's W and B.
  uint32_t WeightInputs = 0;
  /// Inputs that hold non-learned state (BatchNorm running statistics).
  /// When an op updates its state, its outputs after the first are the new
  /// values of these inputs, in order.
  uint32_t StateInputs = 0;
  /// Inputs no gradient flows to even when they are floating point (indices,
  /// labels, running statistics, a Where condition). Integer and bool
  /// operands never get gradients.
  uint32_t NoGradInputs = 0;
  /// Output types from input types; an Error names what is wrong, without
  /// the op's name (the caller adds where).
  llvm::Expected<OutputTypes> (*InferTypes)(const Attributes &Attrs,
                                            InputTypes Inputs) = nullptr;
  OpCost (*Cost)(const Graph &G, const Op &O) = nullptr;
  ParallelDims (*Parallel)(const Graph &G, const Op &O) = nullptr;
  /// The region of input `Input` needed to compute region `Out` of output 0,
  /// given the slice `Reduction` of the contraction dim (the whole dim when
  /// the op is not reduction-split). An empty region means "none of it".
  Region (*InputRegion)(const Graph &G, const Op &O, unsigned Input,
                        llvm::ArrayRef<Interval> Out,
                        Interval Reduction) = nullptr;
  /// The region of output Output (> 0) that the partition computing region
  /// Out of output 0 and slice Reduction of the contraction dim writes;
  /// nullptr for the default (outputRegionOf in ir/BatchDims.h).
  Region (*OutputRegion)(const Graph &G, const Op &O, unsigned Output,
                         llvm::ArrayRef<Interval> Out,
                         Interval Reduction) = nullptr;
};

const OpKindInfo &opKindInfo(OpKind Kind);

} // namespace onnx2soap::ir

#endif
