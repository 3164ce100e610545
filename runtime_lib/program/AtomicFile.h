//===- runtime_lib/program/AtomicFile.h - Atomic file writes -*- C++ -*----===//
//
// A generated program's outputs (tensor files, checkpoints, the trained
// model) are replaced, never rewritten in place: the bytes go to a temporary
// file beside the target, are flushed to disk, and the temporary is renamed
// over the target. A reader (or a restarted program) sees the old file or the
// new one, never a mix, whenever the program is killed.
//
//===----------------------------------------------------------------------===//
#ifndef ONNX2SOAP_RUNTIME_PROGRAM_ATOMICFILE_H
#define ONNX2SOAP_RUNTIME_PROGRAM_ATOMICFILE_H

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace onnx2soap::rt::program {

/// A span of bytes to be written, owned by the caller.
struct ByteSpan {
  const void *Data = nullptr;
  size_t Size = 0;
};

/// Writes Data to `Path.tmp.<pid>`, fsyncs it, renames it over Path and
/// fsyncs the folder. On failure removes the temporary file and throws
/// RuntimeError naming Path and the failing system call.
void writeFileAtomically(const std::string &Path, const void *Data,
                         size_t Size);
/// The same for bytes in several pieces (written in order, without copying
/// them into one buffer first: checkpoints write their weights in place).
void writeFileAtomically(const std::string &Path,
                         const std::vector<ByteSpan> &Pieces);

/// The whole contents of Path; throws RuntimeError when it cannot be read.
std::vector<char> readWholeFile(const std::string &Path);

/// The size of the file at Path; throws RuntimeError when it cannot be
/// looked at.
uint64_t fileSize(const std::string &Path);

/// A file opened for reading at offsets (pread), closed on destruction.
class FileReader {
public:
  /// Opens Path; throws RuntimeError naming it when it cannot.
  explicit FileReader(std::string Path);
  FileReader(FileReader &&Other) noexcept;
  FileReader &operator=(FileReader &&Other) noexcept;
  FileReader(const FileReader &) = delete;
  FileReader &operator=(const FileReader &) = delete;
  ~FileReader();
  /// Reads exactly Size bytes at Offset; a short file or an I/O error is a
  /// RuntimeError naming the file.
  void readAt(uint64_t Offset, void *Out, size_t Size) const;
  const std::string &path() const { return Path; }

private:
  std::string Path;
  int Fd = -1;
};

/// Flushes a folder's entries (a created, renamed or removed file) to disk.
void syncDirectory(const std::string &Dir);

/// The folder part of Path ("." when it has none).
std::string parentDirectory(const std::string &Path);

} // namespace onnx2soap::rt::program

#endif
