//===- cli/main.cpp - The onnx2soap executable ----------------------------===//
//
// Parses the command line and runs the chosen subcommand. Errors in user
// input print `onnx2soap: error: ...` on one line and exit 2; internal
// failures exit 1; success exits 0.
//
//===----------------------------------------------------------------------===//
#include "cli/Subcommands.h"
#include "runtime_lib/Error.h"
#include "runtime_lib/RemovedOnSignal.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/ErrorHandling.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"
#include <google/protobuf/stubs/logging.h>
#include <new>
#include <unistd.h>

using namespace onnx2soap;

static void printVersion(llvm::raw_ostream &OS) {
  OS << "onnx2soap " ONNX2SOAP_VERSION "\n";
}

/// Protobuf logs malformed input to stderr itself; the importer reports it
/// as one line instead.
static void silenceProtobuf(google::protobuf::LogLevel, const char *, int,
                            const std::string &) {}

namespace {
/// llvm::cl reports some mistakes (a value that does not parse, a missing
/// value) straight to llvm::errs() rather than to the stream it is given, so
/// while parsing, stderr goes to an unlinked temporary file (--help and
/// --version exit inside the parser and must not leave it behind).
class StderrCapture {
public:
  StderrCapture() {
    llvm::SmallString<128> Path;
    if (llvm::sys::fs::createTemporaryFile("onnx2soap-args", "txt", File, Path))
      return;
    llvm::sys::fs::remove(Path);
    llvm::errs().flush();
    Saved = dup(STDERR_FILENO);
    if (Saved < 0 || dup2(File, STDERR_FILENO) < 0) {
      if (Saved >= 0)
        close(Saved);
      Saved = -1;
    }
  }
  /// Restores stderr and returns what was written to it.
  std::string finish() {
    std::string Text;
    if (Saved >= 0) {
      llvm::errs().flush();
      dup2(Saved, STDERR_FILENO);
      close(Saved);
      Saved = -1;
      char Chunk[4096];
      ssize_t Read;
      lseek(File, 0, SEEK_SET);
      while ((Read = read(File, Chunk, sizeof(Chunk))) > 0)
        Text.append(Chunk, Read);
    }
    if (File >= 0)
      close(File);
    File = -1;
    return Text;
  }
  ~StderrCapture() { finish(); }

private:
  int File = -1;
  int Saved = -1;
};
} // namespace

/// The subcommand asked for; its exit code.
static int run() {
  llvm::Error Result = llvm::Error::success();
  if (cli::inspectCommand())
    Result = cli::runInspect();
  else if (cli::opsCommand())
    Result = cli::runOps();
  else if (cli::clustersCommand())
    Result = cli::runClusters();
  else if (cli::compileCommand())
    Result = cli::runCompile();
  else if (cli::trainCommand())
    Result = cli::runTrain();
  else if (cli::simulateCommand())
    Result = cli::runSimulate();
  else if (cli::searchCommand())
    Result = cli::runSearch();
  else if (cli::calibrateCommand())
    Result = cli::runCalibrate();
  else if (cli::runCommand()) {
    auto Code = cli::runRun();
    if (Code)
      return *Code;
    Result = Code.takeError();
  } else {
    llvm::errs() << "onnx2soap: error: no subcommand given (try "
                    "'onnx2soap --help')\n";
    return 2;
  }
  if (Result) {
    llvm::errs() << "onnx2soap: error: " << llvm::toString(std::move(Result))
                 << "\n";
    return 2;
  }
  return 0;
}

/// What is wrong with an empty argument or a `--flag=` without a value, or
/// nothing: no flag or operand takes an empty value, which used to be taken
/// as the flag not given (-o "", --trace=) or as no path.
static std::string emptyArgument(int Argc, char **Argv) {
  for (int I = 1; I < Argc; ++I) {
    llvm::StringRef Arg(Argv[I]);
    if (Arg.startswith("-") && Arg.endswith("="))
      return Arg.str() + " has no value; give a value";
    if (!Arg.empty())
      continue;
    std::string After =
        I > 1 ? " (after '" + std::string(Argv[I - 1]) + "')" : "";
    return "argument " + std::to_string(I) + " is empty" + After +
           "; give a value";
  }
  return "";
}

/// cl's "for the --gpus option: '9999999999' value invalid for uint
/// argument!" as what the number must be; other messages as they are.
static std::string readableNumberError(const std::string &Message) {
  static const std::pair<const char *, const char *> Ranges[] = {
      {"uint", "from 0 to 4294967295"},
      {"ulong", "from 0 to 18446744073709551615"},
      {"int", "that fits in 32 bits"},
      {"long", "that fits in 64 bits"}};
  llvm::StringRef Text(Message);
  if (!Text.consume_front("for the ") || !Text.endswith(" argument!"))
    return Message;
  auto [Flag, Rest] = Text.split(" option: ");
  size_t Quote = Rest.rfind("' value invalid for ");
  if (!Rest.startswith("'") || Quote == llvm::StringRef::npos)
    return Message;
  llvm::StringRef Value = Rest.slice(1, Quote);
  llvm::StringRef Type = Rest.drop_front(Quote + 20).drop_back(10);
  for (const auto &[Name, Range] : Ranges)
    if (Type == Name)
      return (Flag + " " + Value + ": expected a whole number " + Range).str();
  return Message;
}

/// The first argument that looks like a flag but is no option of the
/// subcommand (Argv[1]), or nothing.
static std::string unknownFlag(int Argc, char **Argv) {
  llvm::cl::SubCommand *Active = &*llvm::cl::TopLevelSubCommand;
  for (llvm::cl::SubCommand *Sub : llvm::cl::getRegisteredSubcommands())
    if (Argc > 1 && Sub->getName() == llvm::StringRef(Argv[1]))
      Active = Sub;
  for (int I = 2; I < Argc; ++I) {
    llvm::StringRef Arg(Argv[I]);
    if (Arg == "--")
      break;
    if (!Arg.startswith("-") || Arg == "-")
      continue;
    llvm::StringRef Name = Arg.ltrim('-').split('=').first;
    if (!llvm::cl::getRegisteredOptions(*Active).count(Name))
      return Arg.str();
  }
  return "";
}

/// Out of memory anywhere, on any thread (a search's simulators hold task
/// graphs that grow with the devices: gigabytes on a thousand): said in one
/// line, after removing the temporary files being written, and exit 2.
/// Called where the allocation failed, before anything unwinds: an
/// exception leaving a search's thread, or leaving the main thread while
/// the search's threads run, would abort instead.
[[noreturn]] static void outOfMemory() {
  static const char Message[] = "onnx2soap: error: out of memory\n";
  (void)!::write(2, Message, sizeof Message - 1);
  onnx2soap::rt::removeRegisteredNow();
  ::_exit(2);
}
static void outOfMemoryInLlvm(void *, const char *, bool) { outOfMemory(); }

int main(int argc, char **argv) {
  std::set_new_handler(outOfMemory);
  llvm::install_bad_alloc_error_handler(outOfMemoryInLlvm);
  google::protobuf::SetLogHandler(silenceProtobuf);
  llvm::cl::SetVersionPrinter(printVersion);
  std::string ParseErrors;
  llvm::raw_string_ostream Errs(ParseErrors);
  std::string Empty = emptyArgument(argc, argv);
  if (!Empty.empty()) {
    llvm::errs() << "onnx2soap: error: " << Empty << "\n";
    return 2;
  }
  StderrCapture Capture;
  bool Parsed = llvm::cl::ParseCommandLineOptions(
      argc, argv,
      "onnx2soap: ONNX importer and parallel training-program generator\n",
      &Errs);
  std::string Printed = Capture.finish();
  if (!Parsed) {
    std::string All = Printed + Errs.str();
    llvm::StringRef Message = llvm::StringRef(All).trim();
    // cl starts its messages with the program's name.
    Message.consume_front(argv[0]);
    Message.consume_front(llvm::sys::path::filename(argv[0]));
    Message.consume_front(": ");
    // cl prints several lines for some mistakes; the first says what.
    std::string First = Message.split('\n').first.str();
    // An unknown flag that begins with o (--objective on simulate) is read
    // as -o followed by more letters: cl's message names -o, not the flag.
    if (llvm::StringRef(First).contains("may not occur within a group")) {
      std::string Unknown = unknownFlag(argc, argv);
      if (!Unknown.empty())
        First = "Unknown command line argument '" + Unknown + "'.  Try: '" +
                argv[0] + " --help'";
    }
    llvm::errs() << "onnx2soap: error: " << readableNumberError(First) << "\n";
    return 2;
  }
  int Code;
  try {
    Code = run();
  } catch (const onnx2soap::rt::RuntimeError &Failure) {
    // The CPU backend out of memory for the batch asked for (run, train,
    // calibrate): said in one line instead of std::terminate's abort.
    llvm::errs() << "onnx2soap: error: " << Failure.what() << "\n";
    Code = 2;
  } catch (const std::bad_alloc &) {
    llvm::errs() << "onnx2soap: error: out of memory\n";
    Code = 2;
  }
  // What went to standard output must have been written (a full disk, a
  // closed pipe): said in one line instead of LLVM's abort at exit.
  llvm::outs().flush();
  if (llvm::outs().has_error()) {
    std::error_code EC = llvm::outs().error();
    llvm::outs().clear_error();
    if (Code != 0)
      return Code; // its own error said first
    llvm::errs() << "onnx2soap: error: cannot write the standard output: "
                 << EC.message() << "\n";
    return 2;
  }
  return Code;
}
