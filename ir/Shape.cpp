//===- ir/Shape.cpp - Static tensor shapes and regions --------------------===//
//
// Checked element counts and the region algebra used by region rules.
//
//===----------------------------------------------------------------------===//
#include "ir/Shape.h"
#include <algorithm>
#include <cassert>

namespace onnx2soap::ir {

std::optional<int64_t> checkedNumElements(llvm::ArrayRef<int64_t> Dims) {
  int64_t Count = 1;
  for (int64_t D : Dims) {
    if (D < 0 || D > MaxTensorExtent)
      return std::nullopt;
    if (D != 0 && Count > MaxTensorExtent / D)
      return std::nullopt;
    Count *= D;
  }
  return Count;
}

int64_t numElements(llvm::ArrayRef<int64_t> Dims) {
  int64_t Count = 1;
  for (int64_t D : Dims)
    Count *= D;
  return Count;
}

std::string formatShape(llvm::ArrayRef<int64_t> Dims) {
  std::string Out = "[";
  for (size_t I = 0; I < Dims.size(); ++I) {
    if (I)
      Out += ",";
    Out += std::to_string(Dims[I]);
  }
  return Out + "]";
}

Region fullRegion(llvm::ArrayRef<int64_t> Dims) {
  Region R;
  for (int64_t D : Dims)
    R.push_back({0, D});
  return R;
}

int64_t regionVolume(llvm::ArrayRef<Interval> R) {
  int64_t Volume = 1;
  for (const Interval &I : R)
    Volume *= I.size();
  return Volume;
}

Region intersect(llvm::ArrayRef<Interval> A, llvm::ArrayRef<Interval> B) {
  assert(A.size() == B.size() && "intersecting regions of different rank");
  Region R;
  for (size_t I = 0; I < A.size(); ++I)
    R.push_back(
        {std::max(A[I].Begin, B[I].Begin), std::min(A[I].End, B[I].End)});
  return R;
}

Region enclose(llvm::ArrayRef<Interval> A, llvm::ArrayRef<Interval> B) {
  assert(A.size() == B.size() && "enclosing regions of different rank");
  Region R;
  for (size_t I = 0; I < A.size(); ++I)
    R.push_back(
        {std::min(A[I].Begin, B[I].Begin), std::max(A[I].End, B[I].End)});
  return R;
}

std::string formatRegion(llvm::ArrayRef<Interval> R) {
  std::string Out = "[";
  for (size_t I = 0; I < R.size(); ++I) {
    if (I)
      Out += ",";
    Out += std::to_string(R[I].Begin) + ":" + std::to_string(R[I].End);
  }
  return Out + "]";
}

std::optional<unsigned> normalizeAxis(int64_t Axis, unsigned Rank) {
  int64_t R = Rank;
  if (Axis < -R || Axis >= R)
    return std::nullopt;
  return static_cast<unsigned>(Axis < 0 ? Axis + R : Axis);
}

} // namespace onnx2soap::ir
