//===- runtime_lib/OpAttrs.cpp - Attributes of an op call -----------------===//
//
// A sorted vector: a handful of attributes per op, looked up by name.
//
//===----------------------------------------------------------------------===//
#include "OpAttrs.h"
#include <algorithm>
#include <cstring>

namespace onnx2soap::rt {

void OpAttrs::set(const std::string &Name, Value V) {
  auto It = std::lower_bound(Entries.begin(), Entries.end(), Name,
                             [](const auto &Entry, const std::string &Key) {
                               return Entry.first < Key;
                             });
  if (It != Entries.end() && It->first == Name)
    It->second = std::move(V);
  else
    Entries.insert(It, {Name, std::move(V)});
}

const OpAttrs::Value *OpAttrs::find(const char *Name) const {
  auto It = std::lower_bound(Entries.begin(), Entries.end(), Name,
                             [](const auto &Entry, const char *Key) {
                               return std::strcmp(Entry.first.c_str(), Key) < 0;
                             });
  if (It == Entries.end() || It->first != Name)
    return nullptr;
  return &It->second;
}

int64_t OpAttrs::getInt(const char *Name, int64_t Default) const {
  const Value *V = find(Name);
  const int64_t *I = V ? std::get_if<int64_t>(V) : nullptr;
  return I ? *I : Default;
}

double OpAttrs::getFloat(const char *Name, double Default) const {
  const Value *V = find(Name);
  const double *F = V ? std::get_if<double>(V) : nullptr;
  return F ? *F : Default;
}

const std::vector<int64_t> &OpAttrs::getInts(const char *Name) const {
  static const std::vector<int64_t> Empty;
  const Value *V = find(Name);
  const auto *L = V ? std::get_if<std::vector<int64_t>>(V) : nullptr;
  return L ? *L : Empty;
}

const std::vector<double> &OpAttrs::getFloats(const char *Name) const {
  static const std::vector<double> Empty;
  const Value *V = find(Name);
  const auto *L = V ? std::get_if<std::vector<double>>(V) : nullptr;
  return L ? *L : Empty;
}

const std::string &OpAttrs::getString(const char *Name,
                                      const std::string &Default) const {
  const Value *V = find(Name);
  const auto *S = V ? std::get_if<std::string>(V) : nullptr;
  return S ? *S : Default;
}

} // namespace onnx2soap::rt
