//===- cli/OutputFiles.cpp - Files the subcommands write ------------------===//
//
// The files a subcommand writes (`-o`, `--trace`, `run --out`) are checked
// before any work, so that a long search does not end in "cannot write", and
// are written whole or not at all: to a temporary beside the target, renamed
// over it, and removed on failure or an interrupt.
//
//===----------------------------------------------------------------------===//
#include "cli/Subcommands.h"
#include "runtime_lib/RemovedOnSignal.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

namespace onnx2soap::cli {

llvm::Error checkOutputFile(llvm::StringRef Path, llvm::StringRef Flag) {
  namespace fs = llvm::sys::fs;
  if (Path.empty())
    return usageError(Flag + ": needs a file path");
  // The file is renamed into place: a device, FIFO or socket of the name
  // would be replaced by a regular file.
  fs::file_status Status;
  if (!fs::status(Path, Status)) {
    if (fs::is_directory(Status))
      return usageError(Flag + " " + Path +
                        ": is a folder; expected a file to write");
    if (!fs::is_regular_file(Status))
      return usageError(Flag + " " + Path +
                        ": exists and is not a regular file (a device, FIFO "
                        "or socket); expected a file to write");
  }
  llvm::StringRef Dir = llvm::sys::path::parent_path(Path);
  if (Dir.empty())
    Dir = ".";
  if (!fs::is_directory(Dir))
    return usageError(Flag + " " + Path + ": the folder " + Dir +
                      " does not exist");
  if (fs::access(Dir, fs::AccessMode::Write))
    return usageError(Flag + " " + Path + ": the folder " + Dir +
                      " is not writable");
  return llvm::Error::success();
}

llvm::Error
writeFileAtomically(llvm::StringRef Path, llvm::StringRef Flag,
                    llvm::function_ref<void(llvm::raw_ostream &)> Write) {
  namespace fs = llvm::sys::fs;
  // Again: the file system may have changed since the command started.
  if (llvm::Error E = checkOutputFile(Path, Flag))
    return E;
  int FD;
  llvm::SmallString<256> Temp;
  if (std::error_code EC = fs::createUniqueFile(Path + ".tmp%%%%%%", FD, Temp))
    return usageError(Flag + " " + Path +
                      ": cannot create a file beside it: " + EC.message());
  // An interrupt (Ctrl-C, SIGTERM) while writing removes it too. (Once it
  // is renamed, there is nothing of the name to remove.)
  rt::RemovedOnSignal Interrupted(Temp.str().str());
  std::error_code EC;
  {
    llvm::raw_fd_ostream OS(FD, /*shouldClose=*/true);
    Write(OS);
    OS.close();
    if (OS.has_error()) {
      EC = OS.error();
      OS.clear_error();
    }
  }
  if (!EC)
    EC = fs::rename(Temp, Path);
  if (!EC)
    return llvm::Error::success();
  (void)fs::remove(Temp);
  return usageError(Flag + " " + Path +
                    ": cannot write the file: " + EC.message());
}

} // namespace onnx2soap::cli
