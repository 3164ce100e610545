//===- ir/Shape.h - Shapes and regions --------------------------*- C++ -*-===//
//
// Every IR tensor has a fully static shape: symbolic dims are bound when the
// model is imported. A Region is a rectangular sub-box of a tensor, one
// half-open interval per dim; it is how the planner describes partitions and
// the part of an input a partition needs.
//
//===----------------------------------------------------------------------===//
#ifndef ONNX2SOAP_IR_SHAPE_H
#define ONNX2SOAP_IR_SHAPE_H

#include "ir/DType.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>

namespace onnx2soap::ir {

using Shape = llvm::SmallVector<int64_t, 4>;

/// Largest element count or byte size the IR accepts for one tensor (2^48).
/// Keeps every FLOP and byte product of the cost model far from overflow.
constexpr int64_t MaxTensorExtent = int64_t(1) << 48;

/// Product of Dims, or nullopt when a dim is negative or the product exceeds
/// MaxTensorExtent.
std::optional<int64_t> checkedNumElements(llvm::ArrayRef<int64_t> Dims);
/// Product of Dims; the shape must already be valid.
int64_t numElements(llvm::ArrayRef<int64_t> Dims);
/// "[2,3,224,224]".
std::string formatShape(llvm::ArrayRef<int64_t> Dims);

/// Element type plus shape: what shape inference produces for one output.
struct TensorType {
  DType Type = DType::Float32;
  Shape Dims;

  int64_t numElements() const { return ir::numElements(Dims); }
  int64_t byteSize() const { return numElements() * dtypeSize(Type); }
  unsigned rank() const { return Dims.size(); }
  bool operator==(const TensorType &Other) const {
    return Type == Other.Type && Dims == Other.Dims;
  }
};

/// Half-open index interval [Begin, End).
struct Interval {
  int64_t Begin = 0;
  int64_t End = 0;

  int64_t size() const { return End > Begin ? End - Begin : 0; }
  bool empty() const { return End <= Begin; }
  bool operator==(const Interval &Other) const {
    return Begin == Other.Begin && End == Other.End;
  }
  /// By Begin, then End: regions (SmallVectors) then order
  /// lexicographically, so they can be sorted and used as map keys.
  bool operator<(const Interval &Other) const {
    return Begin != Other.Begin ? Begin < Other.Begin : End < Other.End;
  }
};

/// A rectangular box of a tensor, one interval per dim.
using Region = llvm::SmallVector<Interval, 4>;

/// The region covering all of a tensor of shape Dims.
Region fullRegion(llvm::ArrayRef<int64_t> Dims);
/// Elements in the region (0 when any interval is empty).
int64_t regionVolume(llvm::ArrayRef<Interval> R);
/// Intersection of two regions of the same rank.
Region intersect(llvm::ArrayRef<Interval> A, llvm::ArrayRef<Interval> B);
/// Elements in the intersection of two regions of the same rank:
/// regionVolume(intersect(A, B)) without building the region, stopping at
/// the first dim where they miss (the hot loop of matching producer and
/// consumer partitions).
inline int64_t overlapVolume(llvm::ArrayRef<Interval> A,
                             llvm::ArrayRef<Interval> B) {
  int64_t Volume = 1;
  for (size_t I = 0; I < A.size(); ++I) {
    int64_t Begin = std::max(A[I].Begin, B[I].Begin);
    int64_t End = std::min(A[I].End, B[I].End);
    if (End <= Begin)
      return 0;
    Volume *= End - Begin;
  }
  return Volume;
}
/// The smallest region holding two regions of the same rank (their bounding
/// box).
Region enclose(llvm::ArrayRef<Interval> A, llvm::ArrayRef<Interval> B);
/// "[0:4,0:3,0:224,0:224]".
std::string formatRegion(llvm::ArrayRef<Interval> R);

/// Normalizes a possibly negative axis against Rank; nullopt when out of
/// range.
std::optional<unsigned> normalizeAxis(int64_t Axis, unsigned Rank);

} // namespace onnx2soap::ir

#endif
