//===- codegen/ProgramPlan.h - The plan of a generated program --*- C++ -*-===//
//
// What codegen decides for one (model, cluster, strategy): the tables of
// runtime_lib/program/Plan.h (which buffers each rank holds, each rank's
// steps in the planner's schedule order) plus each rank's initial weight
// shard. buildProgramPlan derives it from the training graph and the task
// graph the simulator builds for the strategy, so the program sends exactly
// the messages and all-reduces the planner priced.
//
// Ops and configs the generated program cannot run yet are refused here
// with an Error naming the op and its config (docs/generated-program.md
// lists what is supported).
//
//===----------------------------------------------------------------------===//
#ifndef ONNX2SOAP_CODEGEN_PROGRAMPLAN_H
#define ONNX2SOAP_CODEGEN_PROGRAMPLAN_H

#include "ir/Training.h"
#include "runtime_lib/program/Plan.h"
#include "simulator/CostModel.h"
#include "simulator/Machine.h"
#include "simulator/Simulator.h"
#include "simulator/Strategy.h"
#include "simulator/TaskGraph.h"
#include "llvm/Support/Error.h"
#include <deque>
#include <string>
#include <vector>

namespace onnx2soap::codegen {

/// The tables of rt::program::Plan as vectors, with the text they point to.
struct ProgramPlan {
  int32_t NumRanks = 0;
  std::string DeviceType;
  int64_t ConvWorkspaceBytes = 0;
  rt::OptimizerConfig Optimizer;
  /// The simulator's report for the strategy (time, bytes, memory).
  simulator::SimReport Prediction;
  /// Bytes each rank sends per step (the report's, as the Plan table).
  std::vector<double> PredictedBytes;
  /// Per rank: the cluster's name of its device.
  std::vector<const char *> DeviceNames;
  /// What --profile-comm measures (rt::program::Plan's tables).
  std::vector<int32_t> ProfilePairs;
  std::vector<rt::program::GroupInfo> ProfileGroups;
  std::vector<int32_t> ProfileGroupRanks;

  std::vector<rt::program::TensorInfo> Tensors;
  std::vector<rt::program::OpInfo> Ops;
  std::vector<rt::program::AttrInfo> Attrs;
  std::vector<int64_t> IntValues;
  std::vector<double> FloatValues;
  std::vector<rt::program::BufferInfo> Buffers;
  std::vector<rt::program::CallInfo> Calls;
  std::vector<int32_t> Operands;
  std::vector<rt::program::CopyInfo> Copies;
  std::vector<rt::program::StepInfo> Steps;
  std::vector<rt::program::GroupInfo> Groups;
  std::vector<int32_t> GroupRanks;
  std::vector<rt::program::Range> RankSteps;
  std::vector<rt::program::Range> RankStateCopies;
  std::vector<int64_t> ArenaBytes;
  std::vector<int64_t> ScratchBytes;
  int32_t LossTensor = -1;
  std::vector<int32_t> DataInputs;
  int32_t Labels = -1;

  /// The initial values of every distinct box of a parameter, state or
  /// constant that some rank holds (the body of weights/shards.bin;
  /// BufferInfo::WeightOffset points into it).
  std::vector<char> Weights;

  /// Storage of the strings the tables point to.
  std::deque<std::string> Text;
  const char *intern(std::string S) {
    Text.push_back(std::move(S));
    return Text.back().c_str();
  }

  /// A view for the runner (valid while this object lives).
  rt::program::Plan view(const char *Generator, const char *ModelName,
                         uint64_t Hash) const;
  /// Per rank: the device memory its runner allocates and holds for the
  /// whole run, its arena and message buffer (rt::program::allocatedBytes).
  std::vector<double> allocatedBytes() const;
};

/// How weights get their first values.
enum class InitKind : uint8_t {
  Onnx,   ///< the model's initializers (they must be present)
  Random, ///< seeded uniform(-1/sqrt(fan_in), 1/sqrt(fan_in)) for trainable
          ///< weights; model values (or BatchNorm's 0/1) for the rest
};

struct PlanOptions {
  rt::OptimizerConfig Optimizer;
  simulator::SimOptions Sim;
  InitKind Init = InitKind::Onnx;
  uint64_t Seed = 0;
};

/// The plan of T under S on M. Fails (naming the op and config) when S
/// holds a config the generated program cannot run, and when weights are
/// needed but absent.
llvm::Expected<ProgramPlan> buildProgramPlan(const ir::TrainingGraph &T,
                                             const simulator::Strategy &S,
                                             const simulator::Machine &M,
                                             const simulator::CostModel &Cost,
                                             const PlanOptions &Options);

/// Why the generated program cannot run op O's partitions under C, or
/// success. Shared by buildProgramPlan and the search (which must propose
/// only runnable configs when it plans for `compile`).
llvm::Error checkRunnable(const ir::TrainingGraph &T, const ir::Op &O,
                          const simulator::ParallelConfig &C);

/// Why the kernels cannot run G's ops, or success: the first op whose
/// typed operand (runtime_lib/KernelTypes.h) has an element type no kernel
/// of its kind takes.
llvm::Error checkKernelTypes(const ir::Graph &G);
/// The same for a training step: every op's forward, the backward of every
/// op with backward work, and the optimizer's update of every weight.
/// buildProgramPlan checks this first; the CLI checks it before it plans.
llvm::Error checkKernelTypes(const ir::TrainingGraph &T);

} // namespace onnx2soap::codegen

#endif
