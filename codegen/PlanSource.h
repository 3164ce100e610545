//===- codegen/PlanSource.h - A ProgramPlan spelled as plan.cpp -*- C++ -*-===//
//
// Internal to codegen: the text of a generated project's plan.cpp
// (Project.cpp writes the project around it).
//
//===----------------------------------------------------------------------===//
#ifndef ONNX2SOAP_CODEGEN_PLANSOURCE_H
#define ONNX2SOAP_CODEGEN_PLANSOURCE_H

#include "codegen/Project.h"
#include <string>

namespace onnx2soap::codegen {

/// plan.cpp without its hash: HashText stands where the plan's hash goes,
/// to be replaced once the hash of every file is known.
std::string planSource(const ProgramPlan &P, const ProjectInputs &In,
                       const std::string &HashText);

} // namespace onnx2soap::codegen

#endif
