//===- ir/OpKind.cpp - The op kind registry -------------------------------===//
//
// Builds the name table and the registry from OpKinds.def, and checks that
// every kind's info is complete and filed under the right enumerator.
//
//===----------------------------------------------------------------------===//
#include "ir/OpKind.h"
#include "ir/ops/OpHelpers.h"
#include <array>
#include <cassert>

namespace onnx2soap::ir {

static constexpr const char *KindNames[] = {
#define OP_KIND(Name) #Name,
#include "ir/OpKinds.def"
};
static_assert(std::size(KindNames) == NumOpKinds,
              "name table out of step with OpKinds.def");

llvm::StringRef opKindName(OpKind Kind) {
  return KindNames[static_cast<unsigned>(Kind)];
}

std::optional<OpKind> parseOpKind(llvm::StringRef Name) {
  for (unsigned I = 0; I < NumOpKinds; ++I)
    if (Name == KindNames[I])
      return static_cast<OpKind>(I);
  return std::nullopt;
}

llvm::StringRef dimKindName(DimKind Kind) {
  switch (Kind) {
  case DimKind::Sample:
    return "sample";
  case DimKind::Attribute:
    return "attribute";
  case DimKind::Parameter:
    return "parameter";
  case DimKind::None:
    return "none";
  }
  llvm_unreachable("unknown DimKind");
}

using InfoGetter = const OpKindInfo &(*)();
static constexpr InfoGetter Getters[] = {
#define OP_KIND(Name) info##Name,
#include "ir/OpKinds.def"
};
static_assert(std::size(Getters) == NumOpKinds,
              "registry out of step with OpKinds.def");

const OpKindInfo &opKindInfo(OpKind Kind) {
  const OpKindInfo &Info = Getters[static_cast<unsigned>(Kind)]();
  assert(Info.Kind == Kind && Info.InferTypes && Info.Cost && Info.Parallel &&
         Info.InputRegion && "incomplete op kind registration");
  return Info;
}

} // namespace onnx2soap::ir
