//===- onnx_import/handlers/Window.cpp - Conv, ConvTranspose, pooling -----===//
//
// Resolves ONNX's window defaults and auto_pad into the explicit
// kernel_shape / strides / dilations / pads the IR carries, and Resize's
// scales or sizes into its output dims and per-dim scales.
//
//===----------------------------------------------------------------------===//
#include "onnx_import/handlers/Handlers.h"
#include <algorithm>
#include <cmath>

namespace onnx2soap::onnx_import::handlers {

using ir::IntList;
using ir::OpKind;

namespace {
struct WindowAttrs {
  IntList Kernel, Strides, Dilations, Pads;
};

/// Reads kernel_shape (or takes it from the weight), strides, dilations,
/// pads and auto_pad for Spatial dims of Input.
llvm::Expected<WindowAttrs> readWindow(NodeContext &C, size_t Spatial,
                                       llvm::ArrayRef<int64_t> Input,
                                       llvm::ArrayRef<int64_t> WeightKernel,
                                       bool Transposed) {
  WindowAttrs W;
  auto Kernel = C.getInts("kernel_shape");
  auto Strides = C.getInts("strides");
  auto Dilations = C.getInts("dilations");
  auto Pads = C.getInts("pads");
  auto AutoPad = C.getString("auto_pad", "NOTSET");
  if (!Kernel)
    return Kernel.takeError();
  if (!Strides)
    return Strides.takeError();
  if (!Dilations)
    return Dilations.takeError();
  if (!Pads)
    return Pads.takeError();
  if (!AutoPad)
    return AutoPad.takeError();
  if (*Kernel)
    W.Kernel = **Kernel;
  else if (!WeightKernel.empty())
    W.Kernel.assign(WeightKernel.begin(), WeightKernel.end());
  else
    return C.error("attribute 'kernel_shape' is required");
  W.Strides = *Strides ? **Strides : IntList(Spatial, 1);
  W.Dilations = *Dilations ? **Dilations : IntList(Spatial, 1);
  if (W.Kernel.size() != Spatial || W.Strides.size() != Spatial ||
      W.Dilations.size() != Spatial)
    return C.error("kernel_shape, strides and dilations must have {0} values "
                   "for a {1}-D input",
                   Spatial, Spatial + 2);
  for (size_t I = 0; I < Spatial; ++I)
    if (W.Kernel[I] <= 0 || W.Strides[I] <= 0 || W.Dilations[I] <= 0)
      return C.error("kernel_shape, strides and dilations must be positive");
  if (*AutoPad == "NOTSET") {
    W.Pads = *Pads ? **Pads : IntList(2 * Spatial, 0);
    if (W.Pads.size() != 2 * Spatial)
      return C.error("pads must have {0} values", 2 * Spatial);
    for (int64_t P : W.Pads)
      if (P < 0)
        return C.error("pads must not be negative");
    return W;
  }
  if (*AutoPad == "VALID") {
    W.Pads.assign(2 * Spatial, 0);
    return W;
  }
  if (*AutoPad != "SAME_UPPER" && *AutoPad != "SAME_LOWER")
    return C.error("auto_pad '{0}' is not NOTSET, SAME_UPPER, SAME_LOWER or "
                   "VALID",
                   *AutoPad);
  if (Transposed) // resolved by convTranspose, which knows the output size
    return W;
  W.Pads.assign(2 * Spatial, 0);
  for (size_t I = 0; I < Spatial; ++I) {
    int64_t Extent = (W.Kernel[I] - 1) * W.Dilations[I] + 1;
    int64_t Out = (Input[I] + W.Strides[I] - 1) / W.Strides[I];
    int64_t Total =
        std::max<int64_t>((Out - 1) * W.Strides[I] + Extent - Input[I], 0);
    int64_t Small = Total / 2, Large = Total - Small;
    bool Upper = *AutoPad == "SAME_UPPER";
    W.Pads[I] = Upper ? Small : Large;
    W.Pads[Spatial + I] = Upper ? Large : Small;
  }
  return W;
}

void setWindow(ir::Attributes &Attrs, WindowAttrs W) {
  Attrs.set("kernel_shape", std::move(W.Kernel));
  Attrs.set("strides", std::move(W.Strides));
  Attrs.set("dilations", std::move(W.Dilations));
  Attrs.set("pads", std::move(W.Pads));
}

/// Spatial dims of a [N,C,spatial...] input, or an error.
llvm::Expected<llvm::ArrayRef<int64_t>> spatialDims(const NodeContext &C) {
  const ir::Shape &X = C.inputType(0).Dims;
  if (X.size() < 3)
    return C.error("input shape {0} is not [N,C,spatial...]",
                   ir::formatShape(X));
  return llvm::ArrayRef<int64_t>(X).drop_front(2);
}
} // namespace

llvm::Error conv(NodeContext &C) {
  if (auto E = C.checkAttributes({"auto_pad", "dilations", "group",
                                  "kernel_shape", "pads", "strides"}))
    return E;
  auto Spatial = spatialDims(C);
  if (!Spatial)
    return Spatial.takeError();
  const ir::Shape &W = C.inputType(1).Dims;
  if (W.size() != Spatial->size() + 2)
    return C.error("weight shape {0} does not match input {1}",
                   ir::formatShape(W), ir::formatShape(C.inputType(0).Dims));
  auto Window = readWindow(C, Spatial->size(), *Spatial,
                           llvm::ArrayRef<int64_t>(W).drop_front(2), false);
  if (!Window)
    return Window.takeError();
  auto Group = C.getInt("group", 1);
  if (!Group)
    return Group.takeError();
  ir::Attributes Attrs;
  setWindow(Attrs, std::move(*Window));
  Attrs.set("group", *Group);
  return C.emitOrFold(OpKind::Conv, {0, 1, C.hasInput(2) ? 2 : -1},
                      std::move(Attrs));
}

llvm::Error convTranspose(NodeContext &C) {
  if (auto E = C.checkAttributes({"auto_pad", "dilations", "group",
                                  "kernel_shape", "output_padding",
                                  "output_shape", "pads", "strides"}))
    return E;
  auto Spatial = spatialDims(C);
  if (!Spatial)
    return Spatial.takeError();
  size_t N = Spatial->size();
  const ir::Shape &W = C.inputType(1).Dims;
  if (W.size() != N + 2)
    return C.error("weight shape {0} does not match input {1}",
                   ir::formatShape(W), ir::formatShape(C.inputType(0).Dims));
  auto Window = readWindow(C, N, *Spatial,
                           llvm::ArrayRef<int64_t>(W).drop_front(2), true);
  if (!Window)
    return Window.takeError();
  auto Group = C.getInt("group", 1);
  auto OutputPadding = C.getInts("output_padding");
  auto OutputShape = C.getInts("output_shape");
  auto AutoPad = C.getString("auto_pad", "NOTSET");
  if (!Group)
    return Group.takeError();
  if (!OutputPadding)
    return OutputPadding.takeError();
  if (!OutputShape)
    return OutputShape.takeError();
  if (!AutoPad)
    return AutoPad.takeError();
  IntList Padding = *OutputPadding ? **OutputPadding : IntList(N, 0);
  if (Padding.size() != N)
    return C.error("output_padding must have {0} values", N);
  // PyTorch's rule, and the kernels' (past it they fail when the program
  // runs; a negative value cropped the output).
  auto CheckPadding = [&](size_t I, const char *From) -> llvm::Error {
    int64_t Most = std::max(Window->Strides[I], Window->Dilations[I]) - 1;
    if (Padding[I] >= 0 && Padding[I] <= Most)
      return llvm::Error::success();
    return C.error("{0} gives output_padding {1} along spatial dim {2}; it "
                   "must be from 0 to {3} (less than the stride or the "
                   "dilation)",
                   From, Padding[I], I, Most);
  };
  for (size_t I = 0; I < N; ++I)
    if (auto E = CheckPadding(I, "the node"))
      return E;
  // ONNX: with output_shape (or SAME auto_pad) the pads follow from the
  // requested output size; SAME_UPPER puts the odd pad at the end.
  std::optional<IntList> Target;
  if (*OutputShape) {
    Target = **OutputShape;
    if (Target->size() == N + 2)
      Target->erase(Target->begin(), Target->begin() + 2);
    if (Target->size() != N)
      return C.error("output_shape must have {0} values", N);
  } else if (*AutoPad == "SAME_UPPER" || *AutoPad == "SAME_LOWER") {
    Target.emplace();
    for (size_t I = 0; I < N; ++I)
      Target->push_back((*Spatial)[I] * Window->Strides[I]);
  }
  if (Target) {
    Window->Pads.assign(2 * N, 0);
    for (size_t I = 0; I < N; ++I) {
      int64_t Extent = (Window->Kernel[I] - 1) * Window->Dilations[I] + 1;
      int64_t Total = Window->Strides[I] * ((*Spatial)[I] - 1) + Padding[I] +
                      Extent - (*Target)[I];
      if (Total < 0) {
        // An output larger than the window reaches. With auto_pad SAME, ONNX
        // splits the (negative) total as it splits a positive one, floor
        // division included: SAME_UPPER puts floor(t / 2) before the first
        // output, SAME_LOWER the rest. Zeros before the first output are
        // more than output_padding (at the end only) can say: it shifted
        // every value. With output_shape alone all of it goes at the end,
        // as onnxruntime does.
        int64_t FloorHalf = (Total - 1) / 2;
        int64_t Before = *AutoPad == "SAME_UPPER"   ? FloorHalf
                         : *AutoPad == "SAME_LOWER" ? Total - FloorHalf
                                                    : 0;
        if (Before < 0)
          return C.error("auto_pad {0} with stride {1} along spatial dim {2} "
                         "asks for {3} outputs where the window reaches {4}; "
                         "the zeros it would put before the first are not "
                         "supported (give explicit pads and output_padding)",
                         *AutoPad, Window->Strides[I], I, (*Target)[I],
                         (*Target)[I] + Total);
        Padding[I] -= Total;
        Total = 0;
        if (auto E =
                CheckPadding(I, *OutputShape ? "output_shape" : "auto_pad"))
          return E;
      }
      int64_t Half = Total / 2;
      bool Upper = *AutoPad == "SAME_UPPER";
      Window->Pads[I] = Upper ? Half : Total - Half;
      Window->Pads[N + I] = Upper ? Total - Half : Half;
    }
  } else if (Window->Pads.empty()) {
    Window->Pads.assign(2 * N, 0);
  }
  ir::Attributes Attrs;
  setWindow(Attrs, std::move(*Window));
  Attrs.set("group", *Group);
  Attrs.set("output_padding", std::move(Padding));
  return C.emitOrFold(OpKind::ConvTranspose, {0, 1, C.hasInput(2) ? 2 : -1},
                      std::move(Attrs));
}

llvm::Error pool(NodeContext &C, OpKind Kind) {
  bool Max = Kind == OpKind::MaxPool;
  if (auto E = Max ? C.checkAttributes({"auto_pad", "ceil_mode", "dilations",
                                        "kernel_shape", "pads", "storage_order",
                                        "strides"})
                   : C.checkAttributes({"auto_pad", "ceil_mode",
                                        "count_include_pad", "dilations",
                                        "kernel_shape", "pads", "strides"}))
    return E;
  if (Max && C.hasOutput(1))
    return C.error("the Indices output of MaxPool is not supported");
  auto Spatial = spatialDims(C);
  if (!Spatial)
    return Spatial.takeError();
  auto Window = readWindow(C, Spatial->size(), *Spatial, {}, false);
  if (!Window)
    return Window.takeError();
  auto Ceil = C.getInt("ceil_mode", 0);
  auto CountPad = C.getInt("count_include_pad", 0);
  if (!Ceil)
    return Ceil.takeError();
  if (!CountPad)
    return CountPad.takeError();
  ir::Attributes Attrs;
  setWindow(Attrs, std::move(*Window));
  Attrs.set("ceil_mode", *Ceil);
  if (!Max)
    Attrs.set("count_include_pad", *CountPad);
  return C.emitOrFold(Kind, {0}, std::move(Attrs));
}

llvm::Error globalPool(NodeContext &C, OpKind Kind) {
  if (auto E = C.checkAttributes({}))
    return E;
  return C.emitOrFold(Kind, {0}, {});
}

/// One of Resize's optional size inputs, or nothing when it is absent or
/// empty (exporters pass an empty tensor for the one they do not use).
static llvm::Expected<const ConstTensor *>
resizeInput(NodeContext &C, unsigned I, const char *What) {
  if (!C.hasInput(I))
    return nullptr;
  auto V = C.requireConstant(I, What);
  if (!V)
    return V.takeError();
  if (!(*V)->numElements())
    return nullptr;
  bool Scales = I == 2;
  if ((*V)->Dims.size() != 1)
    return C.error("{0} must be 1-D, it is {1}", What,
                   ir::formatShape((*V)->Dims));
  if (Scales ? !(*V)->isFloat() : (*V)->Type != ir::DType::Int64)
    return C.error("{0} must be {1}, it is {2}", What,
                   Scales ? "floating point" : "int64",
                   ir::dtypeName((*V)->Type));
  return *V;
}

llvm::Error resize(NodeContext &C) {
  if (auto E = C.checkAttributes(
          {"antialias", "axes", "coordinate_transformation_mode",
           "cubic_coeff_a", "exclude_outside", "extrapolation_value",
           "keep_aspect_ratio_policy", "mode", "nearest_mode"}))
    return E;
  for (const char *Name : {"antialias", "axes", "keep_aspect_ratio_policy"})
    if (C.attr(Name) && C.opset() < 18)
      return C.error("{0} exists from opset 18 on; this model uses opset {1}",
                     Name, C.opset());
  auto Mode = C.getString("mode", "nearest");
  auto Coordinates =
      C.getString("coordinate_transformation_mode", "half_pixel");
  auto Nearest = C.getString("nearest_mode", "round_prefer_floor");
  auto Antialias = C.getInt("antialias", 0);
  auto Exclude = C.getInt("exclude_outside", 0);
  auto Policy = C.getString("keep_aspect_ratio_policy", "stretch");
  auto AxesAttr = C.getInts("axes");
  if (!Mode)
    return Mode.takeError();
  if (!Coordinates)
    return Coordinates.takeError();
  if (!Nearest)
    return Nearest.takeError();
  if (!Antialias)
    return Antialias.takeError();
  if (!Exclude)
    return Exclude.takeError();
  if (!Policy)
    return Policy.takeError();
  if (!AxesAttr)
    return AxesAttr.takeError();
  if (*Mode != "nearest" && *Mode != "linear")
    return C.error("mode '{0}' is not supported (nearest and linear are)",
                   *Mode);
  const llvm::StringRef CoordinateModes[] = {"half_pixel", "pytorch_half_pixel",
                                             "align_corners", "asymmetric"};
  const llvm::StringRef NearestModes[] = {"round_prefer_floor",
                                          "round_prefer_ceil", "floor", "ceil"};
  if (!llvm::is_contained(CoordinateModes, llvm::StringRef(*Coordinates)))
    return C.error("coordinate_transformation_mode '{0}' is not supported "
                   "(half_pixel, pytorch_half_pixel, align_corners and "
                   "asymmetric are)",
                   *Coordinates);
  if (!llvm::is_contained(NearestModes, llvm::StringRef(*Nearest)))
    return C.error("nearest_mode '{0}' is not one of round_prefer_floor, "
                   "round_prefer_ceil, floor, ceil",
                   *Nearest);
  if (*Antialias)
    return C.error("antialias is not supported");
  if (*Exclude)
    return C.error("exclude_outside is not supported");
  if (*Policy != "stretch")
    return C.error("keep_aspect_ratio_policy '{0}' is not supported (stretch "
                   "is)",
                   *Policy);

  const ir::Shape &In = C.inputType(0).Dims;
  size_t Rank = In.size();
  IntList Axes;
  if (*AxesAttr) {
    Axes = **AxesAttr;
    if (auto E = normalizeAxes(C, Axes, static_cast<unsigned>(Rank)))
      return E;
  } else {
    for (size_t I = 0; I < Rank; ++I)
      Axes.push_back(static_cast<int64_t>(I));
  }
  auto Scales = resizeInput(C, 2, "scales");
  if (!Scales)
    return Scales.takeError();
  auto Sizes = resizeInput(C, 3, "sizes");
  if (!Sizes)
    return Sizes.takeError();
  if ((*Scales != nullptr) == (*Sizes != nullptr))
    return C.error("exactly one of scales and sizes must be given");
  const ConstTensor *Given = *Scales ? *Scales : *Sizes;
  if (Given->numElements() != static_cast<int64_t>(Axes.size()))
    return C.error("{0} has {1} values for {2} axes",
                   *Scales ? "scales" : "sizes", Given->numElements(),
                   Axes.size());
  IntList OutDims(In.begin(), In.end());
  llvm::SmallVector<double, 2> DimScales(Rank, 1.0);
  for (size_t I = 0; I < Axes.size(); ++I) {
    size_t D = static_cast<size_t>(Axes[I]);
    if (*Scales) {
      double Scale = Given->floatAt(static_cast<int64_t>(I));
      if (!(Scale > 0) || std::isinf(Scale))
        return C.error("scale {0} of axis {1} is not positive and finite",
                       Scale, D);
      double Out = std::floor(static_cast<double>(In[D]) * Scale);
      if (Out > static_cast<double>(ir::MaxTensorExtent))
        return C.error("scale {0} of axis {1} is too large", Scale, D);
      DimScales[D] = Scale;
      OutDims[D] = static_cast<int64_t>(Out);
    } else {
      int64_t Out = Given->intAt(static_cast<int64_t>(I));
      if (Out <= 0)
        return C.error("size {0} of axis {1} is not positive", Out, D);
      OutDims[D] = Out;
      DimScales[D] = In[D] ? static_cast<double>(Out) / In[D] : 1.0;
    }
  }
  if (Rank < 3)
    return C.error("input {0} must be [N,C,spatial...]", ir::formatShape(In));
  for (size_t D : {0u, 1u})
    if (OutDims[D] != In[D] || DimScales[D] != 1.0)
      return C.error("resizes dim {0} of {1}; only the spatial dims (2 on) "
                     "can be resized",
                     D, ir::formatShape(In));
  ir::Attributes Attrs;
  Attrs.set("sizes", std::move(OutDims));
  Attrs.set("scales", std::move(DimScales));
  Attrs.set("mode", *Mode);
  Attrs.set("coordinate_transformation_mode", *Coordinates);
  Attrs.set("nearest_mode", *Nearest);
  return C.emitOrFold(OpKind::Resize, {0}, std::move(Attrs));
}

} // namespace onnx2soap::onnx_import::handlers
