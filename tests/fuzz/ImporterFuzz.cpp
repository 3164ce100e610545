//===- tests/fuzz/ImporterFuzz.cpp - libFuzzer target over the importer ---===//
//
// Feeds arbitrary bytes to the importer as a model file: it must return a
// model or an Error, never crash, hang or trip a sanitizer. The seed corpus
// (tests/fuzz/importer-corpus) holds small valid models.
//
//===----------------------------------------------------------------------===//
#include "onnx_import/Importer.h"
#include <google/protobuf/stubs/logging.h>

using namespace onnx2soap;

static void silence(google::protobuf::LogLevel, const char *, int,
                    const std::string &) {}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *Data, size_t Size) {
  static bool Initialized = [] {
    google::protobuf::SetLogHandler(silence);
    return true;
  }();
  (void)Initialized;
  auto Buffer = llvm::MemoryBuffer::getMemBufferCopy(
      llvm::StringRef(reinterpret_cast<const char *>(Data), Size), "fuzz");
  auto File = onnx_import::readModel(
      std::shared_ptr<llvm::MemoryBuffer>(std::move(Buffer)));
  if (!File) {
    llvm::consumeError(File.takeError());
    return 0;
  }
  onnx_import::ImportOptions Options;
  Options.Batch = 2;
  // A directory with no files: external data is never found.
  auto Model =
      onnx_import::importModel(std::move(*File), "/nonexistent", Options);
  if (!Model)
    llvm::consumeError(Model.takeError());
  return 0;
}
