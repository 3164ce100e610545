//===- onnx_import/ModelReader.cpp - Reading .onnx files without copying weights
//---===//
//
// Field numbers are those of onnx.proto: ModelProto.graph = 7,
// GraphProto.initializer = 5, TensorProto.raw_data = 9. A message's fields
// may be parsed from any concatenation of its encoded fields (protobuf's
// merge rule), so the fields we do not intercept are gathered byte for byte
// and parsed by the generated classes.
//
//===----------------------------------------------------------------------===//
#include "onnx_import/ModelReader.h"
#include "ir/Error.h"
#include "llvm/Support/FormatVariadic.h"
#include <google/protobuf/io/coded_stream.h>
#include <limits>
#include <sys/mman.h>
#include <unistd.h>

namespace onnx2soap::onnx_import {

using google::protobuf::io::CodedInputStream;

namespace {
constexpr uint32_t ModelGraphField = 7;
constexpr uint32_t GraphInitializerField = 5;
constexpr uint32_t TensorRawDataField = 9;
constexpr uint32_t LengthDelimited = 2;

llvm::Error malformed(const char *What, int Offset) {
  return fail(
      llvm::formatv("not a valid ONNX model: malformed or truncated protobuf "
                    "({0} near byte {1})",
                    What, Offset));
}

/// Walks the fields of one message in [Begin, End) of Data.
class FieldWalker {
public:
  FieldWalker(const char *Data, int Begin, int End)
      : Data(Data), Base(Begin), Size(End - Begin),
        In(reinterpret_cast<const uint8_t *>(Data + Begin), End - Begin) {
    In.SetTotalBytesLimit(std::numeric_limits<int>::max());
  }

  /// Advances to the next field; false at the end. Sets Field, WireType,
  /// and for length-delimited fields PayloadBegin / PayloadEnd.
  llvm::Expected<bool> next() {
    FieldBegin = position();
    if (In.CurrentPosition() == Size)
      return false;
    uint32_t Tag = In.ReadTag();
    if (Tag == 0)
      return malformed("bad field tag", FieldBegin);
    Field = Tag >> 3;
    WireType = Tag & 7;
    switch (WireType) {
    case 0: { // varint
      uint64_t Ignored;
      if (!In.ReadVarint64(&Ignored))
        return malformed("bad varint", FieldBegin);
      break;
    }
    case 1: // fixed64
      if (!In.Skip(8))
        return malformed("truncated fixed64", FieldBegin);
      break;
    case LengthDelimited: {
      uint32_t Length;
      if (!In.ReadVarint32(&Length) ||
          Length > static_cast<uint32_t>(Size - In.CurrentPosition()))
        return malformed("bad length", FieldBegin);
      PayloadBegin = position();
      PayloadEnd = PayloadBegin + static_cast<int>(Length);
      if (!In.Skip(static_cast<int>(Length)))
        return malformed("truncated field", FieldBegin);
      break;
    }
    case 5: // fixed32
      if (!In.Skip(4))
        return malformed("truncated fixed32", FieldBegin);
      break;
    default: // groups (3, 4) are not used by onnx.proto
      return malformed("unsupported wire type", FieldBegin);
    }
    return true;
  }

  /// The whole encoded field just read (tag included).
  llvm::StringRef fieldBytes() const {
    return llvm::StringRef(Data + FieldBegin, position() - FieldBegin);
  }
  int position() const { return Base + In.CurrentPosition(); }

  uint32_t Field = 0;
  uint32_t WireType = 0;
  int PayloadBegin = 0;
  int PayloadEnd = 0;

private:
  const char *Data;
  int Base;
  int Size;
  int FieldBegin = 0;
  CodedInputStream In;
};

llvm::Error parseInto(google::protobuf::MessageLite &Message,
                      const std::string &Bytes, const char *What) {
  if (!Message.ParseFromString(Bytes))
    return fail(
        llvm::formatv("not a valid ONNX model: cannot parse the {0}", What));
  return llvm::Error::success();
}

llvm::Expected<Initializer> readInitializer(const char *Data, int Begin,
                                            int End) {
  Initializer Result;
  std::string Other;
  FieldWalker Walk(Data, Begin, End);
  while (true) {
    auto More = Walk.next();
    if (!More)
      return More.takeError();
    if (!*More)
      break;
    if (Walk.Field == TensorRawDataField && Walk.WireType == LengthDelimited) {
      Result.RawData = llvm::StringRef(Data + Walk.PayloadBegin,
                                       Walk.PayloadEnd - Walk.PayloadBegin);
      Result.HasRawData = true;
    } else {
      Other += Walk.fieldBytes();
    }
  }
  if (auto E = parseInto(Result.Meta, Other, "an initializer"))
    return E;
  return Result;
}

llvm::Error readGraph(const char *Data, int Begin, int End, ModelFile &File) {
  std::string Other;
  FieldWalker Walk(Data, Begin, End);
  while (true) {
    auto More = Walk.next();
    if (!More)
      return More.takeError();
    if (!*More)
      break;
    if (Walk.Field == GraphInitializerField &&
        Walk.WireType == LengthDelimited) {
      auto Init = readInitializer(Data, Walk.PayloadBegin, Walk.PayloadEnd);
      if (!Init)
        return Init.takeError();
      File.Initializers.push_back(std::move(*Init));
    } else {
      Other += Walk.fieldBytes();
    }
  }
  // Merge: the graph field may occur more than once (protobuf's rule).
  if (!File.Model.mutable_graph()->MergeFromString(Other))
    return fail("not a valid ONNX model: cannot parse the graph");
  return llvm::Error::success();
}
} // namespace

llvm::Expected<ModelFile>
readModel(std::shared_ptr<llvm::MemoryBuffer> Buffer) {
  size_t Size = Buffer->getBufferSize();
  if (Size == 0)
    return fail("not a valid ONNX model: the file is empty");
  if (Size > static_cast<size_t>(std::numeric_limits<int>::max()))
    return fail(
        "model file is larger than 2 GiB, which protobuf cannot hold: store "
        "the weights as ONNX external data");
  ModelFile File;
  File.Buffer = Buffer;
  const char *Data = Buffer->getBufferStart();
  std::string Other;
  FieldWalker Walk(Data, 0, static_cast<int>(Size));
  bool SawGraph = false;
  while (true) {
    auto More = Walk.next();
    if (!More)
      return More.takeError();
    if (!*More)
      break;
    if (Walk.Field == ModelGraphField && Walk.WireType == LengthDelimited) {
      if (auto E = readGraph(Data, Walk.PayloadBegin, Walk.PayloadEnd, File))
        return E;
      SawGraph = true;
    } else {
      Other += Walk.fieldBytes();
    }
  }
  // The graph is already in File.Model; merge the model's other fields.
  if (!File.Model.MergeFromString(Other))
    return fail("not a valid ONNX model: cannot parse the model");
  if (!SawGraph)
    return fail("not a valid ONNX model: it has no graph");
  return File;
}

/// The reader touches only the few bytes around each tensor's header: ask
/// the kernel not to read ahead into the weights around them, nor to map
/// huge pages over them (both would fault in weight bytes planning never
/// needs). Advice only; failure is harmless (a buffer that was read rather
/// than mapped, say).
static void adviseSparseAccess(const llvm::MemoryBuffer &Buffer) {
  uintptr_t Page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  uintptr_t Start = reinterpret_cast<uintptr_t>(Buffer.getBufferStart());
  uintptr_t End = Start + Buffer.getBufferSize();
  uintptr_t Aligned = Start & ~(Page - 1);
  void *Base = reinterpret_cast<void *>(Aligned);
  (void)madvise(Base, End - Aligned, MADV_RANDOM);
#ifdef MADV_NOHUGEPAGE
  (void)madvise(Base, End - Aligned, MADV_NOHUGEPAGE);
#endif
}

llvm::Expected<ModelFile> readModelFile(llvm::StringRef Path) {
  auto Buffer = llvm::MemoryBuffer::getFile(Path, /*IsText=*/false,
                                            /*RequiresNullTerminator=*/false);
  if (!Buffer)
    return llvm::createStringError(Buffer.getError(),
                                   llvm::formatv("cannot read '{0}': {1}", Path,
                                                 Buffer.getError().message())
                                       .str());
  adviseSparseAccess(**Buffer);
  return readModel(std::shared_ptr<llvm::MemoryBuffer>(std::move(*Buffer)));
}

} // namespace onnx2soap::onnx_import
