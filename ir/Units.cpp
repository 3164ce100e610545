//===- ir/Units.cpp - Seconds and bytes for people to read ----------------===//
//
// See Units.h.
//
//===----------------------------------------------------------------------===//
#include "ir/Units.h"
#include <cstdio>
#include <iterator>

namespace onnx2soap {

std::string formatSeconds(double Seconds) {
  char Text[32];
  if (Seconds >= 1 || Seconds == 0)
    std::snprintf(Text, sizeof Text, "%.4g s", Seconds);
  else if (Seconds >= 1e-3)
    std::snprintf(Text, sizeof Text, "%.4g ms", Seconds * 1e3);
  else
    std::snprintf(Text, sizeof Text, "%.4g us", Seconds * 1e6);
  return Text;
}

std::string formatBytes(double Bytes) {
  static const char *Units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  unsigned Unit = 0;
  while (Bytes >= 1024 && Unit + 1 < std::size(Units)) {
    Bytes /= 1024;
    ++Unit;
  }
  char Text[32];
  std::snprintf(Text, sizeof Text, "%.4g %s", Bytes, Units[Unit]);
  return Text;
}

} // namespace onnx2soap
