//===- runtime_lib/RemovedOnSignal.h - Removed on an interrupt --*- C++ -*-===//
//
// Files written whole are written under a temporary name beside the target
// and renamed into place: by the CLI, `compile`'s project folder and the -o
// and --trace files of `simulate` and `search`; by a generated program, its
// checkpoints and outputs (program/AtomicFile.h). Ctrl-C or SIGTERM while
// they are written (seconds for a project of hundreds of ranks, a trace of
// hundreds of megabytes, or a checkpoint) would leave the temporary behind
// under a name no later run removes. A file or folder registered here is
// removed, a folder with all it holds, when SIGINT, SIGTERM or SIGHUP arrives;
// the program then dies of the signal as it would have. LLVM's
// RemoveFileOnSignal did this for files, but its handler lets a second signal
// (Ctrl-C pressed twice, `timeout` signalling the child and then its process
// group) kill the program halfway: 5 of 30 interrupted traces were left behind.
//
//===----------------------------------------------------------------------===//
#ifndef ONNX2SOAP_RUNTIME_REMOVEDONSIGNAL_H
#define ONNX2SOAP_RUNTIME_REMOVEDONSIGNAL_H

#include <string>

namespace onnx2soap::rt {

/// Removes the file or folder at Path (absolute, or relative to a working
/// folder that does not change), a folder with all it holds, if one of those
/// signals arrives while this is alive. A path too long for the handler's
/// fixed slots (4 KiB), or a ninth at once, is not covered.
class RemovedOnSignal {
public:
  explicit RemovedOnSignal(const std::string &Path);
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

} // namespace onnx2soap::rt

#endif
