//===- codegen/Runnable.cpp - Configs a generated program runs ------------===//
//
// checkRunnable(): whether every partition of an op under a config computes,
// on its own inputs with its own attributes, the region the strategy gives
// it; and the attributes each partition's call sees, rebased where a kernel
// reads positions from them (a window's pads, Slice's starts, Pad's pads).
//
//===----------------------------------------------------------------------===//
#include "codegen/PlanBuilder.h"
#include "codegen/ProgramPlan.h"

namespace onnx2soap::codegen {
namespace detail {

/// Window ops whose `pads` a spatial split rebases (localPads).
static bool isPaddedWindow(ir::OpKind Kind) {
  return Kind == ir::OpKind::Conv || Kind == ir::OpKind::MaxPool ||
         Kind == ir::OpKind::AveragePool;
}

bool readsPositions(ir::OpKind Kind) {
  return Kind == ir::OpKind::Slice || isPaddedWindow(Kind) ||
         Kind == ir::OpKind::Pad;
}

/// The pads of a constant-mode Pad's partition that computes box Out from
/// input box In: per dim, the output before In's first element and after
/// its last (none inside the tensor; a crop, a negative pad, is already in
/// In's bounds).
static ir::IntList localConstantPads(const ir::Op &O,
                                     llvm::ArrayRef<ir::Interval> Out,
                                     llvm::ArrayRef<ir::Interval> In) {
  auto Pads = O.Attrs.getInts("pads");
  size_t Rank = Out.size();
  ir::IntList Local(Pads.begin(), Pads.end());
  for (size_t D = 0; D < Rank && D < In.size(); ++D) {
    if (Pads[D] == 0 && Pads[Rank + D] == 0)
      continue;
    Local[D] = std::max<int64_t>(In[D].Begin - (Out[D].Begin - Pads[D]), 0);
    Local[Rank + D] = std::max<int64_t>((Out[D].End - Pads[D]) - In[D].End, 0);
  }
  return Local;
}

/// The pads of a window op's partition (Conv, MaxPool, AveragePool) that
/// computes spatial box Out from input box In: the begin padding its first
/// window still reaches, and the end padding its last window reaches (at
/// most the op's: a ceil-mode pool's last window may reach beyond, which
/// the kernel handles as the whole op's). A partition inside the tensor has
/// none.
static ir::IntList localPads(const ir::Op &O, llvm::ArrayRef<ir::Interval> Out,
                             llvm::ArrayRef<ir::Interval> In) {
  auto Pads = O.Attrs.getInts("pads"), Strides = O.Attrs.getInts("strides"),
       Dilations = O.Attrs.getInts("dilations"),
       Kernel = O.Attrs.getInts("kernel_shape");
  size_t Spatial = Pads.size() / 2;
  ir::IntList Local(Pads.begin(), Pads.end());
  for (size_t I = 0; I < Spatial && 2 + I < Out.size(); ++I) {
    const ir::Interval &O2 = Out[2 + I], &I2 = In[2 + I];
    if (O2.empty())
      continue;
    int64_t Extent = (Kernel[I] - 1) * Dilations[I] + 1;
    int64_t First = O2.Begin * Strides[I] - Pads[I];
    int64_t LastEnd = (O2.End - 1) * Strides[I] - Pads[I] + Extent;
    Local[I] = std::clamp<int64_t>(I2.Begin - First, 0, Pads[I]);
    Local[Spatial + I] =
        std::clamp<int64_t>(LastEnd - I2.End, 0, Pads[Spatial + I]);
  }
  return Local;
}

/// The attributes partition's call sees when it computes output box Out
/// reading input 0's box In. Slice: starts and ends count from In's corner
/// (an end one past the last element read, or one before it for a negative
/// step, as the importer normalizes them). Conv, MaxPool, AveragePool: the
/// pads of the partition's windows (localPads), so that they split over
/// space; a constant-mode Pad: its padding around In (localConstantPads).
/// Reshape, Expand: the target shape is Out's (their kernels take it
/// from the output buffer). Other kinds: the op's own.
ir::Attributes localAttributes(const ir::Op &O,
                               llvm::ArrayRef<ir::Interval> Out,
                               llvm::ArrayRef<ir::Interval> In) {
  ir::Attributes Attrs = O.Attrs;
  if (O.Kind == ir::OpKind::Reshape || O.Kind == ir::OpKind::Expand) {
    ir::IntList Shape;
    for (const ir::Interval &I : Out)
      Shape.push_back(I.size());
    Attrs.set("shape", Shape);
  } else if (O.Kind == ir::OpKind::Slice) {
    auto Starts = O.Attrs.getInts("starts"), Steps = O.Attrs.getInts("steps");
    ir::IntList LocalStarts, LocalEnds;
    for (size_t D = 0; D < Out.size() && D < In.size(); ++D) {
      int64_t Start = Starts[D] + Out[D].Begin * Steps[D] - In[D].Begin;
      int64_t Last = Start + (Out[D].size() - 1) * Steps[D];
      LocalStarts.push_back(Start);
      LocalEnds.push_back(Out[D].empty() ? Start
                                         : Last + (Steps[D] > 0 ? 1 : -1));
    }
    Attrs.set("starts", LocalStarts);
    Attrs.set("ends", LocalEnds);
  } else if (isPaddedWindow(O.Kind) && O.Attrs.has("pads")) {
    Attrs.set("pads", localPads(O, Out, In));
  } else if (O.Kind == ir::OpKind::Pad &&
             O.Attrs.getString("mode", "constant") == "constant") {
    Attrs.set("pads", localConstantPads(O, Out, In));
  }
  return Attrs;
}

} // namespace detail

using namespace detail;

llvm::Error checkRunnable(const ir::TrainingGraph &T, const ir::Op &O,
                          const ParallelConfig &C) {
  const ir::Graph &G = T.G;
  auto Refuse = [&](const llvm::Twine &Why) {
    return fail(llvm::formatv("op '{0}' ({1}) under config {2}: {3}", O.Name,
                              ir::opKindName(O.Kind), C.str(), Why.str()));
  };
  unsigned Parts = C.numPartitions();
  if (Parts == 1)
    return llvm::Error::success();
  if (C.Reduction > 1 && O.Kind == ir::OpKind::SoftmaxCrossEntropyLoss &&
      (O.Attrs.getInt("has_ignore_index", 0) ||
       (O.Inputs.size() > 2 && O.Inputs[2] != ir::NoTensor)))
    return Refuse("a Reduction split of a loss with class weights or "
                  "ignore_index (its mean divides by a data-dependent "
                  "count) is not supported by generated programs yet");
  if (C.Reduction > 1 && O.Kind != ir::OpKind::SoftmaxCrossEntropyLoss &&
      O.Kind != ir::OpKind::MatMul && O.Kind != ir::OpKind::Gemm &&
      O.Kind != ir::OpKind::Conv)
    return Refuse("Reduction splits run in generated programs only for "
                  "MatMul, Gemm, Conv and the cross-entropy loss");
  bool Recurrent = O.Kind == ir::OpKind::LSTM || O.Kind == ir::OpKind::GRU;
  const ir::Tensor &Out0 = G.tensor(O.Outputs[0]);
  for (unsigned D = 0; D < C.Degrees.size(); ++D) {
    if (C.Degrees[D] == 1)
      continue;
    if (Recurrent && static_cast<int>(D) != Out0.BatchDim)
      return Refuse("recurrent layers split only over the batch in "
                    "generated programs");
    if (O.Kind == ir::OpKind::Split)
      if (static_cast<int>(D) != Out0.BatchDim)
        return Refuse("this op kind splits only over the batch in generated "
                      "programs (its attributes hold absolute positions)");
  }
  // Every partition's local shapes must be what the op computes on its
  // local inputs: this catches splits whose attributes hold absolute
  // positions (convolution padding, concatenation axes, target shapes).
  const ir::OpKindInfo &Info = ir::opKindInfo(O.Kind);
  for (unsigned P = 0; P < Parts; ++P) {
    ir::Region Out = simulator::outputRegion(G, O, C, P);
    ir::Interval Reduction = simulator::reductionSlice(G, O, C, P);
    // Local types of the inputs (reserved: Types points into it).
    std::vector<ir::TensorType> Local;
    Local.reserve(O.Inputs.size());
    llvm::SmallVector<const ir::TensorType *, 4> Types;
    ir::Region In0;
    for (unsigned I = 0; I < O.Inputs.size(); ++I) {
      if (O.Inputs[I] == ir::NoTensor || skipsBias(O, C, P, I)) {
        Types.push_back(nullptr);
        continue;
      }
      ir::Region R = Info.InputRegion(G, O, I, Out, Reduction);
      if (I == 0)
        In0 = R;
      ir::TensorType Type = G.tensor(O.Inputs[I]).Type;
      for (unsigned D = 0; D < Type.rank(); ++D)
        Type.Dims[D] = R[D].size();
      Local.push_back(Type);
      Types.push_back(&Local.back());
    }
    if (O.Kind == ir::OpKind::Pad && ir::regionVolume(In0) == 0)
      return Refuse(llvm::formatv("partition {0} lies wholly in the padding "
                                  "and reads none of its input",
                                  P));
    // Absent trailing inputs are dropped, as the importer does.
    while (!Types.empty() && !Types.back())
      Types.pop_back();
    auto Inferred = Info.InferTypes(localAttributes(O, Out, In0), Types);
    if (!Inferred) {
      return Refuse(llvm::formatv("partition {0} cannot run on its own "
                                  "inputs ({1})",
                                  P, llvm::toString(Inferred.takeError())));
    }
    for (unsigned I = 0; I < O.Outputs.size() && I < Inferred->size(); ++I) {
      ir::Region Want = ir::outputRegionOf(G, O, I, Out, Reduction);
      const ir::Shape &Got = (*Inferred)[I].Dims;
      bool Same = Got.size() == Want.size();
      for (unsigned D = 0; Same && D < Got.size(); ++D)
        Same = Got[D] == Want[D].size();
      if (!Same)
        return Refuse(llvm::formatv(
            "partition {0} would compute {1} for output {2} region {3}; "
            "this split needs per-partition attributes that generated "
            "programs do not support yet",
            P, ir::formatShape(Got), I, ir::formatRegion(Want)));
    }
  }
  return llvm::Error::success();
}

} // namespace onnx2soap::codegen
