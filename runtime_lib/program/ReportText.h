//===- runtime_lib/program/ReportText.h - JSON a program writes -*- C++ -*-===//
//
// The little a generated program needs to write its measurement files
// (--profile-ops, --profile-comm) as JSON without a JSON library: the median
// of repeated timings (Median.h), strings quoted, numbers to 9 significant
// digits.
//
//===----------------------------------------------------------------------===//
#ifndef ONNX2SOAP_RUNTIME_PROGRAM_REPORTTEXT_H
#define ONNX2SOAP_RUNTIME_PROGRAM_REPORTTEXT_H

#include "../Median.h"
#include <cstdio>
#include <string>
#include <vector>

namespace onnx2soap::rt::program {

/// Text as a JSON string ('"' and '\' escaped; names and keys hold nothing
/// else that needs it).
inline std::string jsonString(const std::string &Text) {
  std::string Out = "\"";
  for (char C : Text) {
    if (C == '"' || C == '\\')
      Out += '\\';
    Out += C;
  }
  return Out + "\"";
}

/// Value with 9 significant digits ("%.9g").
inline std::string jsonNumber(double Value) {
  char Text[40];
  std::snprintf(Text, sizeof Text, "%.9g", Value);
  return Text;
}

} // namespace onnx2soap::rt::program

#endif
