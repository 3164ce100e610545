//===- ir/TensorData.h - Where a tensor's bytes live ------------*- C++ -*-===//
//
// Weight bytes are never copied on import: a TensorData either borrows a slice
// of the memory-mapped model file, names a slice of an external-data file to
// be mapped on first use, or owns the few bytes of a small folded constant.
// Planning never calls bytes(), so it never touches weight pages.
//
//===----------------------------------------------------------------------===//
#ifndef ONNX2SOAP_IR_TENSORDATA_H
#define ONNX2SOAP_IR_TENSORDATA_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/MemoryBuffer.h"
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace onnx2soap::ir {

class TensorData {
public:
  enum class Kind : uint8_t { None, Owned, Borrowed, External };

  TensorData() = default;
  static TensorData owned(std::vector<char> Bytes);
  /// Bytes inside Buffer, which is kept alive as long as this data.
  static TensorData borrowed(std::shared_ptr<llvm::MemoryBuffer> Buffer,
                             llvm::StringRef Bytes);
  /// Length bytes at Offset of the file at Path (absolute, already checked
  /// to lie inside the model's folder). The file may be absent.
  static TensorData external(std::string Path, uint64_t Offset,
                             uint64_t Length);

  Kind kind() const { return DataKind; }
  bool empty() const { return DataKind == Kind::None; }
  /// The byte count the data has (or claims, for external data).
  uint64_t size() const { return Length; }
  llvm::StringRef externalPath() const { return Path; }
  uint64_t externalOffset() const { return Offset; }

  /// The bytes; maps an external file on first use. Fails when an external
  /// file is missing or too short.
  llvm::Expected<llvm::ArrayRef<char>> bytes() const;

private:
  Kind DataKind = Kind::None;
  std::shared_ptr<std::vector<char>> Owned;
  /// Borrowed: the model buffer; External: the mapped slice once loaded.
  mutable std::shared_ptr<llvm::MemoryBuffer> Buffer;
  mutable const char *Start = nullptr;
  std::string Path;
  uint64_t Offset = 0;
  uint64_t Length = 0;
};

} // namespace onnx2soap::ir

#endif
