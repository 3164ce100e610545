//===- soap_search/Builtins.h - The built-in strategies ---------*- C++ -*-===//
//
// The strategies the search starts from and is compared with (FlexFlow
// §8.2): data parallelism (every op split over its samples across all
// devices), model parallelism (whole ops, consecutive layers balanced over
// the devices by their compute time) and the experts' hybrid (CNNs: data
// parallel convolutions and pooling, fully-connected layers split over their
// output units; RNNs: data parallel across nodes, one layer per GPU within a
// node).
//
//===----------------------------------------------------------------------===//
#ifndef ONNX2SOAP_SOAP_SEARCH_BUILTINS_H
#define ONNX2SOAP_SOAP_SEARCH_BUILTINS_H

#include "simulator/CostModel.h"
#include "simulator/Strategy.h"
#include "llvm/ADT/StringRef.h"
#include <optional>

namespace onnx2soap::soap_search {

enum class Builtin : uint8_t { DataParallel, ModelParallel, Expert };
/// "data-parallel", "model-parallel", "expert".
llvm::StringRef builtinName(Builtin Kind);
std::optional<Builtin> parseBuiltin(llvm::StringRef Name);

simulator::Strategy dataParallel(const ir::Graph &G,
                                 const simulator::Machine &M);
/// Data parallelism over devices 0 .. Devices - 1 only.
simulator::Strategy dataParallelOn(const ir::Graph &G, unsigned Devices);
simulator::Strategy modelParallel(const ir::Graph &G,
                                  const simulator::Machine &M,
                                  const simulator::CostModel &Cost);
simulator::Strategy expert(const ir::Graph &G, const simulator::Machine &M);
/// RNNs: each recurrent layer (with the ops after it) data parallel on its
/// own group of consecutive devices, a pipeline of layers; the groups are
/// of equal power-of-two sizes, one per layer (layers beyond the device
/// count wrap around). None for a model with fewer than two recurrent
/// layers. A start of the search, not a built-in.
std::optional<simulator::Strategy> layerGroups(const ir::Graph &G,
                                               const simulator::Machine &M);
simulator::Strategy builtin(Builtin Kind, const ir::Graph &G,
                            const simulator::Machine &M,
                            const simulator::CostModel &Cost);

} // namespace onnx2soap::soap_search

#endif
