//===- tests/onnx_import/ExpectImportError.h - Import errors -*- C++ -*-===//
//
// The check every bad-input test of the importer makes (importing fails with
// one line that contains the expected text, LLVM's JSONTest ExpectErr
// style), and the import options the tests pass.
//
//===----------------------------------------------------------------------===//
#ifndef ONNX2SOAP_TESTS_ONNX_IMPORT_EXPECTIMPORTERROR_H
#define ONNX2SOAP_TESTS_ONNX_IMPORT_EXPECTIMPORTERROR_H

#include "onnx_import/Importer.h"
#include "gtest/gtest.h"
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace onnx2soap::testing {

/// Imports Path and expects an error containing Expected, on one line.
inline void expectErr(llvm::StringRef Path,
                      const onnx_import::ImportOptions &Options,
                      llvm::StringRef Expected) {
  auto Imported = onnx_import::importModel(Path, Options);
  ASSERT_FALSE(static_cast<bool>(Imported))
      << "imported, expected: " << Expected.str();
  std::string Message = llvm::toString(Imported.takeError());
  EXPECT_NE(Message.find(Expected.str()), std::string::npos)
      << "message: " << Message << "\nexpected to contain: " << Expected.str();
  EXPECT_EQ(Message.find('\n'), std::string::npos)
      << "message has several lines: " << Message;
}

/// Options binding the batch dim to N.
inline onnx_import::ImportOptions batch(int64_t N) {
  onnx_import::ImportOptions Options;
  Options.Batch = N;
  return Options;
}

/// Options binding the named dims (and the batch dim, when Batch is set).
inline onnx_import::ImportOptions
dims(std::vector<std::pair<std::string, int64_t>> Dims,
     std::optional<int64_t> Batch = std::nullopt) {
  onnx_import::ImportOptions Options;
  Options.Batch = Batch;
  Options.Dims = std::move(Dims);
  return Options;
}

} // namespace onnx2soap::testing

#endif
