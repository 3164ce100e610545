//===- codegen/RemovedOnSignal.h - Removed on an interrupt ------*- C++ -*-===//
//
// The files the CLI writes whole are written under a temporary name beside
// the target and renamed into place: `compile` a project folder, `simulate`
// and `search` their -o and --trace files. Ctrl-C or SIGTERM while they are
// written (seconds for a project of hundreds of ranks or a trace of
// hundreds of megabytes) would leave the temporary behind under a name no
// later run removes. A file or folder registered here is removed, a folder
// with all it holds, when SIGINT, SIGTERM or SIGHUP arrives; the program
// then dies of the signal as it would have. LLVM's RemoveFileOnSignal did
// this for files, but its handler lets a second signal (Ctrl-C pressed
// twice, `timeout` signalling the child and then its process group) kill
// the program halfway: 5 of 30 interrupted traces were left behind.
//
//===----------------------------------------------------------------------===//
#ifndef ONNX2SOAP_CODEGEN_REMOVEDONSIGNAL_H
#define ONNX2SOAP_CODEGEN_REMOVEDONSIGNAL_H

#include "llvm/ADT/StringRef.h"

namespace onnx2soap::codegen {

/// Removes the file or folder at Path (absolute, or relative to a working
/// folder that does not change), a folder with all it holds, if one of those
/// signals arrives while this is alive. A path too long for the handler's
/// fixed slots (4 KiB), or a ninth at once, is not covered.
class RemovedOnSignal {
public:
  explicit RemovedOnSignal(llvm::StringRef Path);
  ~RemovedOnSignal();
  RemovedOnSignal(const RemovedOnSignal &) = delete;
  RemovedOnSignal &operator=(const RemovedOnSignal &) = delete;

private:
  int Slot = -1;
};

/// Removes every path registered now, with system calls alone: for a
/// program that ends otherwise than by a signal (out of memory).
void removeRegisteredNow();

/// Removes the file or tree at Path with system calls alone, as the signal
/// handler does (no allocation, no locks; links are removed, not followed):
/// what the tests check it with.
void removeWithSystemCalls(const char *Path);

} // namespace onnx2soap::codegen

#endif
