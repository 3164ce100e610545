//===- runtime_lib/program/AtomicFile.cpp - Whole-file reads and writes ---===//
//
// POSIX calls with every return value checked; EINTR and short reads and
// writes are retried, everything else becomes a RuntimeError that names the
// file, the call and errno's text. A temporary being written is removed when
// the program is stopped by SIGINT, SIGTERM or SIGHUP (a checkpoint's
// temporary is as large as the model's weights).
//
//===----------------------------------------------------------------------===//
#include "AtomicFile.h"
#include "../Error.h"
#include "../RemovedOnSignal.h"
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace onnx2soap::rt::program {

static std::string sysError(const char *Call) {
  return std::string(Call) + " failed: " + std::strerror(errno);
}

std::string parentDirectory(const std::string &Path) {
  size_t Slash = Path.find_last_of('/');
  if (Slash == std::string::npos)
    return ".";
  if (Slash == 0)
    return "/";
  return Path.substr(0, Slash);
}

void syncDirectory(const std::string &Dir) {
  int Fd = ::open(Dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (Fd < 0)
    fail(Dir, sysError("open"));
  // Some file systems cannot sync a folder and say so with EINVAL; there is
  // nothing more to be done on those.
  if (::fsync(Fd) != 0 && errno != EINVAL) {
    std::string Message = sysError("fsync");
    ::close(Fd);
    fail(Dir, Message);
  }
  ::close(Fd);
}

static void writeAll(int Fd, const char *Data, size_t Size,
                     const std::string &Where) {
  while (Size > 0) {
    ssize_t Written = ::write(Fd, Data, Size);
    if (Written < 0) {
      if (errno == EINTR)
        continue;
      fail(Where, sysError("write"));
    }
    Data += Written;
    Size -= static_cast<size_t>(Written);
  }
}

void writeFileAtomically(const std::string &Path,
                         const std::vector<ByteSpan> &Pieces) {
  std::string Temp = Path + ".tmp." + std::to_string(::getpid());
  // Removed on Ctrl-C or SIGTERM too. Registered before the file exists, so
  // that no moment of its life is left uncovered; removing a name not yet
  // created is harmless.
  RemovedOnSignal Interrupted(Temp);
  int Fd = ::open(Temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (Fd < 0)
    fail(Temp, sysError("open"));
  try {
    for (const ByteSpan &Piece : Pieces)
      writeAll(Fd, static_cast<const char *>(Piece.Data), Piece.Size, Temp);
    if (::fsync(Fd) != 0)
      fail(Temp, sysError("fsync"));
    int Closed = ::close(Fd);
    Fd = -1;
    if (Closed != 0)
      fail(Temp, sysError("close"));
    if (::rename(Temp.c_str(), Path.c_str()) != 0)
      fail(Path, sysError(("rename from '" + Temp + "'").c_str()));
  } catch (...) {
    if (Fd >= 0)
      ::close(Fd);
    ::unlink(Temp.c_str());
    throw;
  }
  // The new file is in place; the folder sync makes the rename durable.
  syncDirectory(parentDirectory(Path));
}

void writeFileAtomically(const std::string &Path, const void *Data,
                         size_t Size) {
  writeFileAtomically(Path, std::vector<ByteSpan>{{Data, Size}});
}

uint64_t fileSize(const std::string &Path) {
  struct stat Info;
  if (::stat(Path.c_str(), &Info) != 0)
    fail(Path, sysError("stat"));
  return static_cast<uint64_t>(Info.st_size);
}

FileReader::FileReader(std::string P) : Path(std::move(P)) {
  Fd = ::open(Path.c_str(), O_RDONLY | O_CLOEXEC);
  if (Fd < 0)
    fail(Path, sysError("open"));
}

FileReader::FileReader(FileReader &&Other) noexcept
    : Path(std::move(Other.Path)), Fd(Other.Fd) {
  Other.Fd = -1;
}

FileReader &FileReader::operator=(FileReader &&Other) noexcept {
  if (this != &Other) {
    if (Fd >= 0)
      ::close(Fd);
    Path = std::move(Other.Path);
    Fd = Other.Fd;
    Other.Fd = -1;
  }
  return *this;
}

FileReader::~FileReader() {
  if (Fd >= 0)
    ::close(Fd);
}

void FileReader::readAt(uint64_t Offset, void *Out, size_t Size) const {
  char *To = static_cast<char *>(Out);
  while (Size > 0) {
    ssize_t Got = ::pread(Fd, To, Size, static_cast<off_t>(Offset));
    if (Got < 0) {
      if (errno == EINTR)
        continue;
      fail(Path, sysError("pread"));
    }
    if (Got == 0)
      fail(Path, "ends at byte " + std::to_string(Offset) + ", " +
                     std::to_string(Size) + " bytes short");
    To += Got;
    Offset += static_cast<uint64_t>(Got);
    Size -= static_cast<size_t>(Got);
  }
}

std::vector<char> readWholeFile(const std::string &Path) {
  int Fd = ::open(Path.c_str(), O_RDONLY | O_CLOEXEC);
  if (Fd < 0)
    fail(Path, sysError("open"));
  // Read straight into the result up to the size fstat reports, then on to
  // the end: a growing or special file may hold more than st_size says.
  std::vector<char> Bytes;
  struct stat Info;
  if (::fstat(Fd, &Info) == 0 && Info.st_size > 0)
    Bytes.resize(static_cast<size_t>(Info.st_size) + 1);
  else
    Bytes.resize(1 << 16);
  size_t Filled = 0;
  while (true) {
    if (Filled == Bytes.size())
      Bytes.resize(Bytes.size() * 2);
    ssize_t Got = ::read(Fd, Bytes.data() + Filled, Bytes.size() - Filled);
    if (Got < 0) {
      if (errno == EINTR)
        continue;
      std::string Message = sysError("read");
      ::close(Fd);
      fail(Path, Message);
    }
    if (Got == 0)
      break;
    Filled += static_cast<size_t>(Got);
  }
  Bytes.resize(Filled);
  ::close(Fd);
  return Bytes;
}

} // namespace onnx2soap::rt::program
