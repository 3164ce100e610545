//===- cli/main.cpp - The onnx2soap executable ----------------------------===//
//
// Parses the command line and runs the chosen subcommand. Errors in user
// input print `onnx2soap: error: ...` on one line and exit 2; internal
// failures exit 1; success exits 0.
//
//===----------------------------------------------------------------------===//
#include "cli/Subcommands.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/raw_ostream.h"
#include <google/protobuf/stubs/logging.h>

using namespace onnx2soap;

static void printVersion(llvm::raw_ostream &OS) {
  OS << "onnx2soap " ONNX2SOAP_VERSION "\n";
}

/// Protobuf logs malformed input to stderr itself; the importer reports it
/// as one line instead.
static void silenceProtobuf(google::protobuf::LogLevel, const char *, int,
                            const std::string &) {}

int main(int argc, char **argv) {
  google::protobuf::SetLogHandler(silenceProtobuf);
  llvm::cl::SetVersionPrinter(printVersion);
  std::string ParseErrors;
  llvm::raw_string_ostream Errs(ParseErrors);
  if (!llvm::cl::ParseCommandLineOptions(
          argc, argv,
          "onnx2soap: ONNX importer and parallel training-program "
          "generator\n",
          &Errs)) {
    llvm::StringRef Message = llvm::StringRef(Errs.str()).trim();
    Message.consume_front(argv[0]);
    Message.consume_front(": ");
    // cl prints several lines for some mistakes; the first says what.
    llvm::errs() << "onnx2soap: error: " << Message.split('\n').first << "\n";
    return 2;
  }
  llvm::Error Result = llvm::Error::success();
  if (cli::inspectCommand())
    Result = cli::runInspect();
  else if (cli::opsCommand())
    Result = cli::runOps();
  else {
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
