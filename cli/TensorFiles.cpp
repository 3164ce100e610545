//===- cli/TensorFiles.cpp - Tensors stored as TensorProto files ----------===//
//
// Reading the .pb files `run` and `train` take (the ONNX backend-test
// layout); malformed files are user errors.
//
//===----------------------------------------------------------------------===//
#include "cli/Subcommands.h"
#include "onnx_import/ConstTensor.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include <limits>

namespace onnx2soap::cli {

llvm::Expected<onnx::TensorProto> readTensor(const std::string &Path) {
  // Not a device or a pipe, which could be read without end (/dev/zero),
  // and within what protobuf parses (its size is an int: a file of 4 GiB
  // and 80 bytes was read as its first 80).
  llvm::sys::fs::file_status Status;
  if (std::error_code EC = llvm::sys::fs::status(Path, Status))
    return usageError(
        llvm::formatv("cannot read '{0}': {1}", Path, EC.message()));
  if (Status.type() != llvm::sys::fs::file_type::regular_file)
    return usageError(llvm::formatv("'{0}' is not a regular file", Path));
  if (Status.getSize() > uint64_t(std::numeric_limits<int>::max()))
    return usageError(llvm::formatv("'{0}' is {1} bytes; a TensorProto file "
                                    "holds less than 2 GiB",
                                    Path, Status.getSize()));
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

bool tensorIs(const onnx::TensorProto &T, const ir::TensorType &Want) {
  std::optional<ir::DType> Type = onnx_import::dtypeFromOnnx(T.data_type());
  return Type == Want.Type &&
         llvm::equal(T.dims(), llvm::ArrayRef<int64_t>(Want.Dims));
}

std::string describeTensor(const onnx::TensorProto &T) {
  std::optional<ir::DType> Type = onnx_import::dtypeFromOnnx(T.data_type());
  std::vector<int64_t> Dims(T.dims().begin(), T.dims().end());
  return (Type ? ir::dtypeName(*Type).str()
               : "data_type " + std::to_string(T.data_type())) +
         " " + ir::formatShape(Dims);
}

llvm::Expected<std::vector<char>> tensorBytes(const onnx::TensorProto &T,
                                              const std::string &Path,
                                              const ir::TensorType &Want) {
  // The element type and dims as well as the size: raw bytes of another
  // type or shape of the same size were once taken as they were.
  if (!tensorIs(T, Want))
    return usageError(llvm::formatv("'{0}' holds {1}, expected {2} {3}", Path,
                                    describeTensor(T), ir::dtypeName(Want.Type),
                                    ir::formatShape(Want.Dims)));
  if (T.has_data_location() && T.data_location() == onnx::TensorProto::EXTERNAL)
    return usageError(llvm::formatv("'{0}': its data is external (in another "
                                    "file); run and train read tensors whole",
                                    Path));
  if (T.has_raw_data()) {
    if (int64_t(T.raw_data().size()) != Want.byteSize())
      return usageError(
          llvm::formatv("'{0}': raw_data holds {1} bytes, {2} {3} needs {4}",
                        Path, T.raw_data().size(), ir::dtypeName(Want.Type),
                        ir::formatShape(Want.Dims), Want.byteSize()));
    return std::vector<char>(T.raw_data().begin(), T.raw_data().end());
  }
  auto Decoded = onnx_import::decodeTensor(T, {}, false);
  if (!Decoded)
    return usageError(
        llvm::formatv("'{0}': {1}", Path, llvm::toString(Decoded.takeError())));
  return Decoded->toBytes();
}

llvm::Expected<std::vector<char>> readTensorBytes(const std::string &Path,
                                                  const ir::TensorType &Want) {
  auto T = readTensor(Path);
  if (!T)
    return T.takeError();
  return tensorBytes(*T, Path, Want);
}

} // namespace onnx2soap::cli
