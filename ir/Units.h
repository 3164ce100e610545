//===- ir/Units.h - Seconds and bytes for people to read -------*- C++ -*-===//
//
// How onnx2soap writes a duration or a size where a person reads it (the
// CLI's reports, a generated project's README): four significant digits in
// the unit that keeps them, so that a step of microseconds does not read
// "0.00 s". Machine-read output (--json, strategy files, manifests) keeps
// plain seconds and bytes.
//
//===----------------------------------------------------------------------===//
#ifndef ONNX2SOAP_IR_UNITS_H
#define ONNX2SOAP_IR_UNITS_H

#include <string>

namespace onnx2soap {

/// "1.234 s", "12.34 ms" or "123.4 us".
std::string formatSeconds(double Seconds);
/// "512 B", "1.5 KiB", "12.34 MiB", ... (powers of 1024).
std::string formatBytes(double Bytes);

} // namespace onnx2soap

#endif
