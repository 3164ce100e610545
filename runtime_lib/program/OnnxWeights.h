//===- runtime_lib/program/OnnxWeights.h - Trained weights -*- C++ -*------===//
//
// At the end of training a generated program writes the model it was built
// from with the trained values of its initializers. It has the model's bytes
// but no protobuf library, so the rewrite works on the wire format: every
// byte of the model is kept except the replaced initializers' TensorProtos
// and the length prefix of the graph that holds them.
//
//===----------------------------------------------------------------------===//
#ifndef ONNX2SOAP_RUNTIME_PROGRAM_ONNXWEIGHTS_H
#define ONNX2SOAP_RUNTIME_PROGRAM_ONNXWEIGHTS_H

#include "TensorFile.h"
#include <string>
#include <vector>

namespace onnx2soap::rt::program {

/// Returns ModelBytes (a serialized ONNX ModelProto) with each main-graph
/// initializer named in NewValues replaced by serializeTensorProto of the new
/// value (raw_data; an external-data reference is dropped). Other fields
/// keep their bytes and order. Throws RuntimeError when a name is not an
/// initializer of the main graph, is given twice, or when its dims or
/// element type differ from the initializer's.
std::string replaceInitializers(const std::string &ModelBytes,
                                const std::vector<HostTensor> &NewValues);

} // namespace onnx2soap::rt::program

#endif
