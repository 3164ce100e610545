//===- ir/Attributes.h - Normalized attributes of IR ops -------*- C++ -*-===//
//
// IR ops carry a small, sorted list of named attributes. Names and meanings
// are the IR's own (documented per op kind in ir/ops/), already normalized by
// the importer: explicit pads instead of auto_pad, resolved target shapes
// instead of shape tensors, non-negative axes.
//
//===----------------------------------------------------------------------===//
#ifndef ONNX2SOAP_IR_ATTRIBUTES_H
#define ONNX2SOAP_IR_ATTRIBUTES_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include <cstdint>
#include <string>
#include <utility>
#include <variant>

namespace onnx2soap::ir {

using IntList = llvm::SmallVector<int64_t, 4>;
using FloatList = llvm::SmallVector<double, 2>;

/// One attribute value: an integer, a float, a list of either, or a string.
using AttrValue =
    std::variant<int64_t, double, IntList, FloatList, std::string>;

class Attributes {
public:
  void set(llvm::StringRef Name, AttrValue Value);
  bool has(llvm::StringRef Name) const { return find(Name) != nullptr; }

  int64_t getInt(llvm::StringRef Name, int64_t Default = 0) const;
  double getFloat(llvm::StringRef Name, double Default = 0.0) const;
  /// The list, or an empty list when absent.
  llvm::ArrayRef<int64_t> getInts(llvm::StringRef Name) const;
  llvm::ArrayRef<double> getFloats(llvm::StringRef Name) const;
  llvm::StringRef getString(llvm::StringRef Name,
                            llvm::StringRef Default = "") const;

  /// Sorted by name.
  llvm::ArrayRef<std::pair<std::string, AttrValue>> entries() const {
    return Entries;
  }
  bool operator==(const Attributes &Other) const {
    return Entries == Other.Entries;
  }

private:
  const AttrValue *find(llvm::StringRef Name) const;
  llvm::SmallVector<std::pair<std::string, AttrValue>, 4> Entries;
};

/// "name=value" pairs joined by spaces, for printing and golden tests.
std::string formatAttributes(const Attributes &Attrs);

} // namespace onnx2soap::ir

#endif
