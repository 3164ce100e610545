//===- ir/Attributes.cpp - Normalized attributes of IR ops ----------------===//
//
// A sorted vector keeps lookups cheap for the handful of attributes an op has
// and makes iteration order (and so printed IR) deterministic.
//
//===----------------------------------------------------------------------===//
#include "ir/Attributes.h"
#include "llvm/Support/FormatVariadic.h"
#include <algorithm>
#include <cstdio>

namespace onnx2soap::ir {

void Attributes::set(llvm::StringRef Name, AttrValue Value) {
  auto It = std::lower_bound(
      Entries.begin(), Entries.end(), Name,
      [](const auto &Entry, llvm::StringRef Key) { return Entry.first < Key; });
  if (It != Entries.end() && It->first == Name) {
    It->second = std::move(Value);
    return;
  }
  Entries.insert(It, {Name.str(), std::move(Value)});
}

const AttrValue *Attributes::find(llvm::StringRef Name) const {
  // An op has a handful of attributes, read on the planner's hot paths (a
  // convolution's regions per partition): comparing lengths first and
  // scanning beats a binary search of string comparisons.
  for (const auto &[Key, Value] : Entries)
    if (Key.size() == Name.size() && Name == Key)
      return &Value;
  return nullptr;
}

int64_t Attributes::getInt(llvm::StringRef Name, int64_t Default) const {
  const AttrValue *V = find(Name);
  if (const auto *I = V ? std::get_if<int64_t>(V) : nullptr)
    return *I;
  return Default;
}

double Attributes::getFloat(llvm::StringRef Name, double Default) const {
  const AttrValue *V = find(Name);
  if (const auto *F = V ? std::get_if<double>(V) : nullptr)
    return *F;
  return Default;
}

llvm::ArrayRef<int64_t> Attributes::getInts(llvm::StringRef Name) const {
  const AttrValue *V = find(Name);
  if (const auto *L = V ? std::get_if<IntList>(V) : nullptr)
    return *L;
  return {};
}

llvm::ArrayRef<double> Attributes::getFloats(llvm::StringRef Name) const {
  const AttrValue *V = find(Name);
  if (const auto *L = V ? std::get_if<FloatList>(V) : nullptr)
    return *L;
  return {};
}

llvm::StringRef Attributes::getString(llvm::StringRef Name,
                                      llvm::StringRef Default) const {
  const AttrValue *V = find(Name);
  if (const auto *S = V ? std::get_if<std::string>(V) : nullptr)
    return *S;
  return Default;
}

namespace {
struct Printer {
  std::string operator()(int64_t V) const { return std::to_string(V); }
  // %.9g keeps every float32 value and prints 1e-05, not 0.00.
  std::string operator()(double V) const {
    char Buffer[32];
    std::snprintf(Buffer, sizeof Buffer, "%.9g", V);
    return Buffer;
  }
  std::string operator()(const IntList &L) const {
    std::string Out = "[";
    for (size_t I = 0; I < L.size(); ++I)
      Out += (I ? "," : "") + std::to_string(L[I]);
    return Out + "]";
  }
  std::string operator()(const FloatList &L) const {
    std::string Out = "[";
    for (size_t I = 0; I < L.size(); ++I)
      Out += (I ? "," : "") + (*this)(L[I]);
    return Out + "]";
  }
  std::string operator()(const std::string &S) const { return "\"" + S + "\""; }
};
} // namespace

std::string formatAttributes(const Attributes &Attrs) {
  std::string Out;
  for (const auto &[Name, Value] : Attrs.entries()) {
    if (!Out.empty())
      Out += " ";
    Out += Name + "=" + std::visit(Printer{}, Value);
  }
  return Out;
}

} // namespace onnx2soap::ir
