//===- cli/TensorFiles.cpp - Tensors stored as TensorProto files ----------===//
//
// Reading the .pb files `run` and `train` take (the ONNX backend-test
// layout); malformed files are user errors.
//
//===----------------------------------------------------------------------===//
#include "cli/Subcommands.h"
#include "onnx_import/ConstTensor.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"

namespace onnx2soap::cli {

llvm::Expected<onnx::TensorProto> readTensor(const std::string &Path) {
  auto Buffer = llvm::MemoryBuffer::getFile(Path, /*IsText=*/false,
                                            /*RequiresNullTerminator=*/false);
  if (!Buffer)
    return usageError(llvm::formatv("cannot read '{0}': {1}", Path,
                                    Buffer.getError().message()));
  onnx::TensorProto T;
  if (!T.ParseFromArray((*Buffer)->getBufferStart(),
                        static_cast<int>((*Buffer)->getBufferSize())))
    return usageError(
        llvm::formatv("'{0}' is not a serialized ONNX TensorProto", Path));
  return T;
}

/// The tensor's bytes in the IR's layout (raw_data is that layout already).
llvm::Expected<std::vector<char>> tensorBytes(const onnx::TensorProto &T,
                                              const std::string &Path) {
  if (T.has_raw_data())
    return std::vector<char>(T.raw_data().begin(), T.raw_data().end());
  auto Decoded = onnx_import::decodeTensor(T, {}, false);
  if (!Decoded)
    return usageError(
        llvm::formatv("'{0}': {1}", Path, llvm::toString(Decoded.takeError())));
  return Decoded->toBytes();
}

llvm::Expected<std::vector<char>> readTensorBytes(const std::string &Path) {
  auto T = readTensor(Path);
  if (!T)
    return T.takeError();
  return tensorBytes(*T, Path);
}

} // namespace onnx2soap::cli
