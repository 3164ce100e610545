//===- runtime_lib/OpAttrs.h - Attributes of an op call --------*- C++ -*-===//
//
// The IR's normalized attributes (see docs/ir.md) as kernels read them:
// integers, floats, lists of either, strings, by name. Generated programs
// build these from their op tables; the reference executor converts
// ir::Attributes one to one.
//
//===----------------------------------------------------------------------===//
#ifndef ONNX2SOAP_RUNTIME_OPATTRS_H
#define ONNX2SOAP_RUNTIME_OPATTRS_H

#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

namespace onnx2soap::rt {

class OpAttrs {
public:
  using Value = std::variant<int64_t, double, std::vector<int64_t>,
                             std::vector<double>, std::string>;

  void set(const std::string &Name, Value V);
  int64_t getInt(const char *Name, int64_t Default = 0) const;
  double getFloat(const char *Name, double Default = 0.0) const;
  /// Empty when absent.
  const std::vector<int64_t> &getInts(const char *Name) const;
  const std::vector<double> &getFloats(const char *Name) const;
  const std::string &getString(const char *Name,
                               const std::string &Default = "") const;

private:
  const Value *find(const char *Name) const;
  std::vector<std::pair<std::string, Value>> Entries; // sorted by name
};

/// Attribute Name as a T, Default when absent: an integer attribute
/// saturated to T's range when T is integral, a float one converted
/// otherwise (Clip's bounds on either kind of input).
template <typename T> T attrAs(const OpAttrs &A, const char *Name, T Default) {
  if constexpr (std::is_integral_v<T>) {
    int64_t V = A.getInt(Name, static_cast<int64_t>(Default));
    if (V < static_cast<int64_t>(std::numeric_limits<T>::lowest()))
      return std::numeric_limits<T>::lowest();
    return V > static_cast<int64_t>(std::numeric_limits<T>::max())
               ? std::numeric_limits<T>::max()
               : static_cast<T>(V);
  } else {
    return static_cast<T>(A.getFloat(Name, static_cast<double>(Default)));
  }
}

} // namespace onnx2soap::rt

#endif
