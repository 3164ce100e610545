//===- onnx_import/Initializers.cpp - Initializers and external data ------===//
//
// External data follows onnx/external_data_helper.py: keys "location"
// (relative path), "offset", "length" (bytes) and "checksum".
//
//===----------------------------------------------------------------------===//
#include "onnx_import/Initializers.h"
#include "ir/Error.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

namespace onnx2soap::onnx_import {

llvm::Expected<std::string> resolveExternalPath(llvm::StringRef Location,
                                                llvm::StringRef ModelDir,
                                                llvm::StringRef TensorName) {
  if (Location.empty())
    return fail(llvm::formatv("initializer '{0}': external data has no "
                              "location",
                              TensorName));
  if (llvm::sys::path::is_absolute(Location) ||
      llvm::sys::path::is_absolute(Location, llvm::sys::path::Style::windows))
    return fail(llvm::formatv("initializer '{0}': external data location "
                              "'{1}' is absolute; it must be relative to the "
                              "model's folder",
                              TensorName, Location));
  for (auto It = llvm::sys::path::begin(Location),
            End = llvm::sys::path::end(Location);
       It != End; ++It)
    if (*It == "..")
      return fail(llvm::formatv("initializer '{0}': external data location "
                                "'{1}' leaves the model's folder",
                                TensorName, Location));
  llvm::SmallString<256> Path(ModelDir);
  llvm::sys::path::append(Path, Location);
  return std::string(Path);
}

/// The external-data fields of a tensor.
struct ExternalRef {
  std::string Location;
  uint64_t Offset = 0;
  std::optional<uint64_t> Length;
};

static llvm::Expected<ExternalRef> readExternal(const onnx::TensorProto &T) {
  ExternalRef Ref;
  for (const onnx::StringStringEntryProto &E : T.external_data()) {
    auto Number = [&](uint64_t &Out) -> llvm::Error {
      if (llvm::StringRef(E.value()).getAsInteger(10, Out))
        return fail(llvm::formatv("initializer '{0}': external data {1} "
                                  "'{2}' is not a non-negative integer",
                                  T.name(), E.key(), E.value()));
      return llvm::Error::success();
    };
    if (E.key() == "location") {
      Ref.Location = E.value();
    } else if (E.key() == "offset") {
      if (auto Err = Number(Ref.Offset))
        return Err;
    } else if (E.key() == "length") {
      uint64_t Length;
      if (auto Err = Number(Length))
        return Err;
      Ref.Length = Length;
    }
  }
  return Ref;
}

/// The value of a small initializer whose bytes are at hand; none
/// when its external data is absent or unreadable, Why saying so (a
/// handler that needs the value reports it).
static std::optional<ConstTensor> knownValue(const onnx::TensorProto &Meta,
                                             const ir::TensorData &Data,
                                             std::string &Why) {
  auto Raw = Data.bytes();
  if (!Raw) {
    Why = llvm::toString(Raw.takeError());
    return std::nullopt;
  }
  auto Decoded =
      decodeTensor(Meta, llvm::StringRef(Raw->data(), Raw->size()), true);
  if (!Decoded) {
    Why = llvm::toString(Decoded.takeError());
    return std::nullopt;
  }
  return std::move(*Decoded);
}

llvm::Error addInitializer(ImportState &State, const ModelFile &File,
                           const Initializer &Init, llvm::StringRef ModelDir) {
  const onnx::TensorProto &Meta = Init.Meta;
  const std::string &Name = Meta.name();
  if (Name.empty())
    return fail("an initializer has no name");
  std::optional<ir::DType> Type = dtypeFromOnnx(Meta.data_type());
  if (!Type)
    return fail(llvm::formatv("initializer '{0}': element type {1} is not "
                              "supported",
                              Name, onnxTypeName(Meta.data_type())));
  ir::Shape Dims(Meta.dims().begin(), Meta.dims().end());
  auto Count = ir::checkedNumElements(Dims);
  if (!Count || *Count > ir::MaxTensorExtent / ir::dtypeSize(*Type))
    return fail(llvm::formatv("initializer '{0}': dims {1} are negative or "
                              "too large",
                              Name, ir::formatShape(Dims)));
  uint64_t Bytes = static_cast<uint64_t>(*Count) * ir::dtypeSize(*Type);
  ir::TensorType TType{*Type, Dims};

  Value V;
  V.Type = TType;
  ir::TensorData Data;
  bool External = Meta.data_location() == onnx::TensorProto::EXTERNAL;
  if (External) {
    auto Ref = readExternal(Meta);
    if (!Ref)
      return Ref.takeError();
    auto Path = resolveExternalPath(Ref->Location, ModelDir, Name);
    if (!Path)
      return Path.takeError();
    if (Ref->Length && *Ref->Length != Bytes)
      return fail(llvm::formatv("initializer '{0}': external data length {1} "
                                "does not match {2} bytes of {3} {4}",
                                Name, *Ref->Length, Bytes, ir::dtypeName(*Type),
                                ir::formatShape(Dims)));
    if (llvm::sys::fs::is_directory(*Path))
      return fail(llvm::formatv("initializer '{0}': external data location "
                                "'{1}' is a folder, not a file",
                                Name, Ref->Location));
    // A present file must be long enough; an absent one is fine for planning.
    uint64_t FileSize = 0;
    if (!llvm::sys::fs::file_size(*Path, FileSize) &&
        (Ref->Offset > FileSize || Bytes > FileSize - Ref->Offset))
      return fail(llvm::formatv("initializer '{0}': external data file '{1}' "
                                "has {2} bytes, but the tensor needs {3} "
                                "bytes at offset {4}",
                                Name, Ref->Location, FileSize, Bytes,
                                Ref->Offset));
    Data = ir::TensorData::external(*Path, Ref->Offset, Bytes);
  } else if (Init.HasRawData) {
    if (Init.RawData.size() != Bytes)
      return fail(llvm::formatv("initializer '{0}': raw_data has {1} bytes, "
                                "but {2} {3} needs {4}",
                                Name, Init.RawData.size(), ir::dtypeName(*Type),
                                ir::formatShape(Dims), Bytes));
    Data = ir::TensorData::borrowed(File.Buffer, Init.RawData);
  } else if (*Count == 0) {
    Data = ir::TensorData::owned({});
  } else {
    // Values in the typed fields (rare for weights): decode and own them.
    if (*Count > MaxFoldedElements)
      return fail(llvm::formatv("initializer '{0}': {1} values in typed "
                                "fields; large tensors must use raw_data or "
                                "external data",
                                Name, *Count));
    auto Decoded = decodeTensor(Meta, {}, false);
    if (!Decoded)
      return fail(llvm::formatv("initializer '{0}': {1}", Name,
                                llvm::toString(Decoded.takeError())));
    Data = ir::TensorData::owned(Decoded->toBytes());
    if (!ir::isFloatingPoint(*Type))
      V.Const = std::move(*Decoded);
    else if (*Count <= MaxStoredFloatElements)
      V.Stored = std::move(*Decoded);
  }

  // Integer tables (shapes, axes, indices) are values the importer folds
  // with. Floating-point initializers are weights, never folded; the few
  // values of a small one are kept for a handler that needs one at import
  // time (a Pad value, a Clip bound).
  if (!ir::isFloatingPoint(*Type) && !V.Const && *Count <= MaxFoldedElements)
    V.Const = knownValue(Meta, Data, V.Unknown);
  else if (ir::isFloatingPoint(*Type) && !V.Stored &&
           *Count <= MaxStoredFloatElements)
    V.Stored = knownValue(Meta, Data, V.Unknown);
  ir::TensorRole Role = ir::isFloatingPoint(*Type) ? ir::TensorRole::Parameter
                                                   : ir::TensorRole::Constant;
  V.Tensor = State.Graph.addTensor(Name, TType, Role, std::move(Data));
  State.Values[Name] = std::move(V);
  return llvm::Error::success();
}

} // namespace onnx2soap::onnx_import
