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
#include <string>
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

} // namespace onnx2soap::rt

#endif
