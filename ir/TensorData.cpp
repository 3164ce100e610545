//===- ir/TensorData.cpp - Where a tensor's bytes live --------------------===//
//
// Lazy mapping of external data; borrowed and owned bytes are returned as is.
//
//===----------------------------------------------------------------------===//
#include "ir/TensorData.h"
#include "ir/Error.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"

namespace onnx2soap::ir {

TensorData TensorData::owned(std::vector<char> Bytes) {
  TensorData D;
  D.DataKind = Kind::Owned;
  D.Owned = std::make_shared<std::vector<char>>(std::move(Bytes));
  D.Start = D.Owned->data();
  D.Length = D.Owned->size();
  return D;
}

TensorData TensorData::borrowed(std::shared_ptr<llvm::MemoryBuffer> Buffer,
                                llvm::StringRef Bytes) {
  TensorData D;
  D.DataKind = Kind::Borrowed;
  D.Buffer = std::move(Buffer);
  D.Start = Bytes.data();
  D.Length = Bytes.size();
  return D;
}

TensorData TensorData::external(std::string Path, uint64_t Offset,
                                uint64_t Length) {
  TensorData D;
  D.DataKind = Kind::External;
  D.Path = std::move(Path);
  D.Offset = Offset;
  D.Length = Length;
  return D;
}

llvm::Expected<llvm::ArrayRef<char>> TensorData::bytes() const {
  switch (DataKind) {
  case Kind::None:
    return fail("tensor has no data");
  case Kind::Owned:
  case Kind::Borrowed:
    return llvm::ArrayRef<char>(Start, Length);
  case Kind::External:
    break;
  }
  if (!Buffer) {
    uint64_t FileSize = 0;
    if (std::error_code EC = llvm::sys::fs::file_size(Path, FileSize))
      return llvm::createStringError(
          EC, llvm::formatv("cannot open external data '{0}': {1}", Path,
                            EC.message())
                  .str());
    // Check the size first so a short file is reported, not mapped past.
    if (Offset > FileSize || Length > FileSize - Offset)
      return fail(
          llvm::formatv("external data '{0}' has {1} bytes, but a tensor "
                        "needs bytes {2}..{3}",
                        Path, FileSize, Offset, Offset + Length));
    auto Slice = llvm::MemoryBuffer::getFileSlice(Path, Length, Offset);
    if (!Slice)
      return llvm::createStringError(
          Slice.getError(), llvm::formatv("cannot map external data '{0}': {1}",
                                          Path, Slice.getError().message())
                                .str());
    Buffer = std::move(*Slice);
    Start = Buffer->getBufferStart();
  }
  return llvm::ArrayRef<char>(Start, Length);
}

} // namespace onnx2soap::ir
