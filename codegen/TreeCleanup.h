//===- codegen/TreeCleanup.h - Trees removed on an interrupt -*- C++ -*----===//
//
// `compile` writes a project into a new folder beside -o and renames it into
// place. Ctrl-C or SIGTERM while it writes (seconds for a project of
// hundreds of ranks) would leave that half tree behind, hundreds of
// megabytes under a name no later compile removes. A folder registered here
// is removed, tree and all, when SIGINT, SIGTERM or SIGHUP arrives; the
// signal then goes on to the handler before (LLVM's, which removes the
// files registered with RemoveFileOnSignal) or kills the program as it
// would have.
//
//===----------------------------------------------------------------------===//
#ifndef ONNX2SOAP_CODEGEN_TREECLEANUP_H
#define ONNX2SOAP_CODEGEN_TREECLEANUP_H

#include "llvm/ADT/StringRef.h"

namespace onnx2soap::codegen {

/// Removes the folder at Path (absolute), with all it holds, if one of
/// those signals arrives while this is alive. A path too long for the
/// handler's fixed slots (4 KiB), or a ninth tree at once, is not covered.
class TreeRemovedOnSignal {
public:
  explicit TreeRemovedOnSignal(llvm::StringRef Path);
  ~TreeRemovedOnSignal();
  TreeRemovedOnSignal(const TreeRemovedOnSignal &) = delete;
  TreeRemovedOnSignal &operator=(const TreeRemovedOnSignal &) = delete;

private:
  int Slot = -1;
};

/// Removes the tree at Path with system calls alone, as the signal handler
/// does (no allocation, no locks): what the tests check it with.
void removeTreeWithSystemCalls(const char *Path);

} // namespace onnx2soap::codegen

#endif
