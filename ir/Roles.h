//===- ir/Roles.h - Telling parameters from state and constants -*- C++ -*-===//
//
// ONNX stores learnable weights, BatchNorm running statistics and fixed
// tables alike as initializers. The importer marks floating-point
// initializers as Parameter candidates; these rules refine them, and the
// user's --trainable / --frozen lists override them.
//
//===----------------------------------------------------------------------===//
#ifndef ONNX2SOAP_IR_ROLES_H
#define ONNX2SOAP_IR_ROLES_H

#include "ir/Graph.h"
#include <string>
#include <vector>

namespace onnx2soap::ir {

struct RoleOverrides {
  /// Weights to train even if the rules say otherwise.
  std::vector<std::string> Trainable;
  /// Weights to keep fixed (they become constants).
  std::vector<std::string> Frozen;
};

/// Parameter candidates read as BatchNorm statistics become State; then the
/// overrides apply. Fails on a name that is no weight of the graph, or on a
/// name listed both ways.
llvm::Error assignRoles(Graph &G, const RoleOverrides &Overrides);

} // namespace onnx2soap::ir

#endif
