//===- runtime_lib/program/OnnxWeights.cpp - Trained weights --------------===//
//
// Walks ModelProto (graph = 7) -> GraphProto (initializer = 5) -> TensorProto
// (dims = 1, data_type = 2, name = 8) with the wire reader; fields are copied
// as byte ranges, so unknown and future fields survive unchanged.
//
//===----------------------------------------------------------------------===//
#include "OnnxWeights.h"
#include "../Error.h"
#include <map>

namespace onnx2soap::rt::program {

using wire::Field;
using wire::WireType;

namespace {

constexpr uint32_t ModelGraph = 7;
constexpr uint32_t GraphInitializer = 5;
constexpr uint32_t TensorDims = 1;
constexpr uint32_t TensorDataType = 2;
constexpr uint32_t TensorName = 8;

const char *const Where = "ONNX model";

/// An initializer's name, dims and element type.
struct InitializerHeader {
  std::string Name;
  std::vector<int64_t> Dims;
  int32_t DataType = 0;
};

InitializerHeader readHeader(const wire::Reader &Tensor) {
  wire::Reader R = Tensor;
  InitializerHeader H;
  Field F;
  while (R.next(F)) {
    if (F.Number == TensorName && F.Type == WireType::LengthDelimited) {
      H.Name.assign(F.Data, F.Size);
    } else if (F.Number == TensorDataType && F.Type == WireType::Varint) {
      H.DataType = static_cast<int32_t>(F.Value);
    } else if (F.Number == TensorDims && F.Type == WireType::Varint) {
      H.Dims.push_back(static_cast<int64_t>(F.Value));
    } else if (F.Number == TensorDims && F.Type == WireType::LengthDelimited) {
      size_t Pos = F.Data - R.data();
      size_t End = Pos + F.Size;
      while (Pos < End)
        H.Dims.push_back(static_cast<int64_t>(R.readVarint(Pos, End)));
    }
  }
  return H;
}

/// Copies Field's bytes, or re-emits it with a new payload.
void appendField(std::string &Out, const wire::Reader &R, const Field &F) {
  Out.append(R.data() + F.Begin, F.End - F.Begin);
}

void appendReplaced(std::string &Out, const wire::Reader &R, const Field &F,
                    const std::string &Payload) {
  // The tag is kept as it was; only the length and payload change.
  size_t Pos = F.Begin;
  R.readVarint(Pos, F.End);
  Out.append(R.data() + F.Begin, Pos - F.Begin);
  wire::appendVarint(Out, Payload.size());
  Out += Payload;
}

} // namespace

std::string replaceInitializers(const std::string &ModelBytes,
                                const std::vector<HostTensor> &NewValues) {
  std::map<std::string, const HostTensor *> ByName;
  for (const HostTensor &T : NewValues)
    if (!ByName.emplace(T.Name, &T).second)
      fail(Where, "new value for initializer '" + T.Name + "' given twice");
  std::map<std::string, std::string> Serialized;
  std::map<std::string, bool> Found;

  wire::Reader Model(ModelBytes.data(), ModelBytes.size(), Where);
  std::string Out;
  Out.reserve(ModelBytes.size());
  Field F;
  while (Model.next(F)) {
    if (F.Number != ModelGraph) {
      appendField(Out, Model, F);
      continue;
    }
    if (F.Type != WireType::LengthDelimited)
      Model.malformed(F.Begin, "field 7 (graph) is not a message");
    wire::Reader Graph = Model.nested(F);
    std::string NewGraph;
    NewGraph.reserve(F.Size);
    Field G;
    while (Graph.next(G)) {
      if (G.Number != GraphInitializer || G.Type != WireType::LengthDelimited) {
        appendField(NewGraph, Graph, G);
        continue;
      }
      InitializerHeader H = readHeader(Graph.nested(G));
      auto It = ByName.find(H.Name);
      if (It == ByName.end()) {
        appendField(NewGraph, Graph, G);
        continue;
      }
      const HostTensor &New = *It->second;
      if (onnxDataType(New.Type) != H.DataType)
        fail(Where, "initializer '" + H.Name + "' has element type " +
                        onnxDataTypeName(H.DataType) +
                        ", but its new value is " +
                        onnxDataTypeName(onnxDataType(New.Type)));
      if (New.Dims != H.Dims)
        fail(Where, "initializer '" + H.Name + "' has dims " +
                        formatDims(H.Dims) + ", but its new value has dims " +
                        formatDims(New.Dims));
      auto [Entry, Inserted] = Serialized.emplace(H.Name, std::string());
      if (Inserted)
        Entry->second = serializeTensorProto(New);
      appendReplaced(NewGraph, Graph, G, Entry->second);
      Found[H.Name] = true;
    }
    appendReplaced(Out, Model, F, NewGraph);
  }

  std::string Missing;
  for (const auto &[Name, Tensor] : ByName)
    if (!Found.count(Name))
      Missing += (Missing.empty() ? "'" : ", '") + Name + "'";
  if (!Missing.empty())
    fail(Where, "not an initializer of the main graph: " + Missing);
  return Out;
}

} // namespace onnx2soap::rt::program
