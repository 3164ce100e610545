//===- runtime_lib/RemovedOnSignal.cpp - Removed on an interrupt ----------===//
//
// The handler may run at any point of the program, so it uses only calls
// that are safe in a signal handler: openat, getdents64, unlinkat, close,
// sigaction and raise; the paths live in fixed slots claimed with atomics.
//
//===----------------------------------------------------------------------===//
#include "RemovedOnSignal.h"
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <mutex>
#include <unistd.h>

namespace onnx2soap::rt {

namespace {

constexpr int Slots = 8;
constexpr size_t PathMax = 4096;
enum SlotState : int { Free, Claimed, Ready };
char Paths[Slots][PathMax];
std::atomic<int> States[Slots];

constexpr int Signals[] = {SIGINT, SIGTERM, SIGHUP};
struct sigaction Before[3];
bool Installed[3];

bool isDotOrDotDot(const char *Name) {
  return Name[0] == '.' && (Name[1] == 0 || (Name[1] == '.' && Name[2] == 0));
}

/// Removes entry Name of the folder open as ParentFd, a tree or a file;
/// whether it is gone. Depth is bounded by the tree's, a few levels in a
/// project.
bool removeEntry(int ParentFd, const char *Name) {
  if (::unlinkat(ParentFd, Name, 0) == 0)
    return true;
  if (errno != EISDIR)
    return errno == ENOENT;
  int Fd =
      ::openat(ParentFd, Name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (Fd < 0)
    return false;
  // Scans again from the start while a scan removes something: removing
  // entries while reading a folder may make the reading skip some. An
  // entry that cannot be removed (another user's) ends the scans once they
  // remove nothing more.
  alignas(8) char Buffer[4096];
  for (bool Removed = true; Removed;) {
    Removed = false;
    ::lseek(Fd, 0, SEEK_SET);
    ssize_t Got;
    while ((Got = ::getdents64(Fd, Buffer, sizeof Buffer)) > 0)
      for (ssize_t At = 0; At < Got;) {
        auto *Entry = reinterpret_cast<struct dirent64 *>(Buffer + At);
        At += Entry->d_reclen;
        if (!isDotOrDotDot(Entry->d_name) && removeEntry(Fd, Entry->d_name))
          Removed = true;
      }
    if (Got < 0)
      break;
  }
  ::close(Fd);
  return ::unlinkat(ParentFd, Name, AT_REMOVEDIR) == 0;
}

/// Which thread removes the registered paths: the first whose handler runs. A
/// signal sent twice (Ctrl-C pressed twice, `timeout` signalling the child and
/// then its process group) reaches the handler again while it works, on this
/// thread once it returns and on any other thread at once.
enum Phase : int { Waiting, Removing, Removed };
std::atomic<int> Progress{Waiting};

extern "C" void removeAndGoOn(int Signal) {
  // The code the signal interrupted may read errno next.
  int SavedErrno = errno;
  int Expected = Waiting;
  if (!Progress.compare_exchange_strong(Expected, Removing)) {
    // Another thread removes them, then ends the program.
    while (Progress.load() != Removed) {
    }
    errno = SavedErrno;
    return;
  }
  removeRegisteredNow();
  Progress.store(Removed);
  // On to what the signal did before: the handler before, or the default
  // action (the program dies of the signal, and its exit status says so).
  // The signal is blocked while this runs, so it comes again when this
  // returns, to the action restored here.
  for (int I = 0; I < 3; ++I)
    if (Signals[I] == Signal && Installed[I])
      ::sigaction(Signal, &Before[I], nullptr);
  ::raise(Signal);
  errno = SavedErrno;
}

void installHandlers() {
  static std::once_flag Once;
  std::call_once(Once, [] {
    for (int I = 0; I < 3; ++I) {
      // An ignored signal stays ignored (SIGHUP under nohup): compile goes
      // on through it, into the tree it writes.
      struct sigaction Now;
      if (::sigaction(Signals[I], nullptr, &Now) != 0 ||
          Now.sa_handler == SIG_IGN)
        continue;
      struct sigaction New = {};
      New.sa_handler = removeAndGoOn;
      // All three blocked while it runs on a thread: a second one then
      // waits instead of killing the program halfway through the removal.
      ::sigemptyset(&New.sa_mask);
      for (int Other : Signals)
        ::sigaddset(&New.sa_mask, Other);
      Installed[I] = ::sigaction(Signals[I], &New, &Before[I]) == 0;
    }
  });
}

} // namespace

void removeRegisteredNow() {
  for (int S = 0; S < Slots; ++S)
    if (States[S].load() == Ready)
      removeWithSystemCalls(Paths[S]);
}

void removeWithSystemCalls(const char *Path) {
  (void)removeEntry(AT_FDCWD, Path);
}

RemovedOnSignal::RemovedOnSignal(const std::string &Path) {
  if (Path.size() >= PathMax)
    return;
  installHandlers();
  for (int S = 0; S < Slots; ++S) {
    int Expected = Free;
    if (!States[S].compare_exchange_strong(Expected, Claimed))
      continue;
    std::memcpy(Paths[S], Path.data(), Path.size());
    Paths[S][Path.size()] = 0;
    States[S].store(Ready);
    Slot = S;
    return;
  }
}

RemovedOnSignal::~RemovedOnSignal() {
  if (Slot >= 0)
    States[Slot].store(Free);
}

} // namespace onnx2soap::rt
