//===- ir/JsonText.cpp - JSON as people read it ---------------------------===//
#include "ir/JsonText.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/raw_ostream.h"
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace onnx2soap::ir {

std::string shortestNumber(double Value) {
  char Text[40];
  for (int Digits = 1; Digits <= 17; ++Digits) {
    std::snprintf(Text, sizeof Text, "%.*g", Digits, Value);
    if (std::strtod(Text, nullptr) == Value)
      break;
  }
  return Text;
}

static void emit(llvm::json::OStream &J, const llvm::json::Value &V) {
  switch (V.kind()) {
  case llvm::json::Value::Object: {
    const llvm::json::Object &O = *V.getAsObject();
    std::vector<llvm::StringRef> Keys;
    for (const auto &Entry : O)
      Keys.push_back(Entry.first);
    llvm::sort(Keys);
    J.object([&] {
      for (llvm::StringRef Key : Keys) {
        J.attributeBegin(Key);
        emit(J, *O.get(Key));
        J.attributeEnd();
      }
    });
    return;
  }
  case llvm::json::Value::Array:
    J.array([&] {
      for (const llvm::json::Value &E : *V.getAsArray())
        emit(J, E);
    });
    return;
  case llvm::json::Value::Number: {
    // Integers (and the doubles LLVM would print as integers) as LLVM does;
    // NaN and infinities as null (LLVM's `nan` and `inf` are no JSON).
    double D = *V.getAsNumber();
    if (!std::isfinite(D))
      J.value(nullptr);
    else if (V.getAsInteger() || V.getAsUINT64())
      J.value(V);
    else
      J.rawValue(shortestNumber(D));
    return;
  }
  default:
    J.value(V);
  }
}

std::string jsonText(const llvm::json::Value &V, unsigned Indent) {
  std::string Text;
  llvm::raw_string_ostream OS(Text);
  {
    llvm::json::OStream J(OS, Indent);
    emit(J, V);
  }
  return OS.str();
}

} // namespace onnx2soap::ir
