//===- onnx_import/Evaluate.h - Running IR ops on known values -*- C++ -*-===//
//
// Constant folding at import time: the elementwise and data-movement IR ops
// evaluated on ConstTensors. This is what turns the Shape/Gather/Concat/...
// chains exporters emit into the static shapes the IR needs.
//
//===----------------------------------------------------------------------===//
#ifndef ONNX2SOAP_ONNX_IMPORT_EVALUATE_H
#define ONNX2SOAP_ONNX_IMPORT_EVALUATE_H

#include "ir/OpKind.h"
#include "onnx_import/ConstTensor.h"
#include <optional>
#include <vector>

namespace onnx2soap::onnx_import {

/// The outputs of op Kind on Inputs (nullptr for absent optional inputs),
/// whose output types OutTypes the shape rule already checked; nullopt when
/// the kind is not evaluated at import time.
std::optional<std::vector<ConstTensor>>
evaluate(ir::OpKind Kind, const ir::Attributes &Attrs,
         llvm::ArrayRef<const ConstTensor *> Inputs,
         llvm::ArrayRef<ir::TensorType> OutTypes);

} // namespace onnx2soap::onnx_import

#endif
