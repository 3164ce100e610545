//===- tests/onnx_import/GoldenTest.cpp - Imported IR against golden text -===//
//
// The whole imported IR of small models, compared with checked-in text.
// After an intended change, regenerate with ONNX2SOAP_UPDATE_GOLDEN=1 and
// review the diff.
//
//===----------------------------------------------------------------------===//
#include "ir/Printer.h"
#include "onnx_import/Importer.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"
#include "gtest/gtest.h"
#include <cstdlib>

using namespace onnx2soap;

namespace {

struct Case {
  const char *Model;
  const char *Golden;
  int64_t Batch;
  bool Unroll;
};

class Golden : public ::testing::TestWithParam<Case> {};

TEST_P(Golden, ImportedIrMatches) {
  const Case &C = GetParam();
  onnx_import::ImportOptions Options;
  Options.Batch = C.Batch;
  Options.UnrollRnn = C.Unroll;
  auto Model = onnx_import::importModel(
      std::string(ONNX2SOAP_SOURCE_DIR "/") + C.Model, Options);
  ASSERT_TRUE(static_cast<bool>(Model)) << llvm::toString(Model.takeError());
  std::string Text;
  llvm::raw_string_ostream OS(Text);
  ir::printGraph(Model->Graph, OS);
  OS.flush();

  std::string Path =
      std::string(ONNX2SOAP_SOURCE_DIR "/tests/golden/") + C.Golden;
  if (std::getenv("ONNX2SOAP_UPDATE_GOLDEN")) {
    std::error_code EC;
    llvm::raw_fd_ostream Out(Path, EC);
    ASSERT_FALSE(EC) << EC.message();
    Out << Text;
    return;
  }
  auto Expected = llvm::MemoryBuffer::getFile(Path);
  ASSERT_TRUE(static_cast<bool>(Expected)) << Path;
  EXPECT_EQ((*Expected)->getBuffer().str(), Text)
      << "IR of " << C.Model
      << " changed; if intended, regenerate with "
         "ONNX2SOAP_UPDATE_GOLDEN=1";
}

INSTANTIATE_TEST_SUITE_P(
    Samples, Golden,
    ::testing::Values(Case{"samples/tiny_cnn.onnx", "tiny_cnn.ir", 4, false},
                      Case{"samples/tiny_mlp.onnx", "tiny_mlp.ir", 2, false}),
    [](const auto &Info) {
      std::string Name = Info.param.Golden;
      return Name.substr(0, Name.find('.'));
    });

} // namespace
