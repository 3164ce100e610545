//===- tests/runtime_lib_cuda/KernelCases.cpp - Kernel cases --------------===//
//
// The case table of CudaVsCpuTest.cpp (KernelCases.h), but for the
// elementwise kinds' (ElementwiseCases.cpp).
//
//===----------------------------------------------------------------------===//
#include "KernelCases.h"

namespace onnx2soap::rt::test {

std::vector<Case> cases() {
  std::mt19937 Rng(3);
  std::vector<Case> All;
  auto Unary = [&](const char *Name, OpKind Kind) {
    HostTensor X = f32({4, 5});
    randomize(X, Rng, 0.1, 2.0);
    All.push_back({Name, Kind, {}, {X}, {f32({4, 5})}, {0}});
  };
  Unary("relu", OpKind::Relu);
  Unary("sigmoid", OpKind::Sigmoid);
  Unary("tanh", OpKind::Tanh);
  Unary("sqrt", OpKind::Sqrt);
  {
    HostTensor A = f32({2, 3, 4}), B = f32({3, 1});
    randomize(A, Rng);
    randomize(B, Rng);
    All.push_back(
        {"add_broadcast", OpKind::Add, {}, {A, B}, {f32({2, 3, 4})}, {0, 1}});
  }
  {
    HostTensor A = f32({2, 3, 8}), W = f32({8, 5});
    randomize(A, Rng);
    randomize(W, Rng);
    All.push_back(
        {"matmul", OpKind::MatMul, {}, {A, W}, {f32({2, 3, 5})}, {0, 1}});
  }
  contractionCases(Rng, All);
  elementwiseCases(Rng, All);
  movementCases(Rng, All);
  normalizationCases(Rng, All);
  recurrentCases(Rng, All);
  scanCases(Rng, All);
  for (auto [Name, Kind] :
       {std::pair{"sin", OpKind::Sin}, std::pair{"cos", OpKind::Cos},
        std::pair{"floor", OpKind::Floor}, std::pair{"ceil", OpKind::Ceil},
        std::pair{"round", OpKind::Round}}) {
    HostTensor X = f32({4, 5});
    randomize(X, Rng, -4.0, 4.0);
    All.push_back({Name, Kind, {}, {X}, {f32({4, 5})}, {0}});
  }
  for (int64_t Axis : {0, 2}) {
    HostTensor X = f32({4, 3, 5});
    randomize(X, Rng);
    OpAttrs A;
    A.set("axis", Axis);
    HostTensor I = Axis == 0
                       ? i64({3, 2, 4}, {3, 0, 0, 1, -1, 2, 2,  2, 0, 1, 3, -4,
                                         1, 1, 0, 2, 3,  3, -2, 0, 2, 1, 0, 1})
                       : i64({2, 3, 2}, {4, 0, -1, 1, 2, 2, 0, 3, -5, 4, 1, 1});
    All.push_back(
        {Axis == 0 ? "gather_elements_axis0" : "gather_elements_axis2",
         OpKind::GatherElements,
         A,
         {X, I},
         {f32(I.Dims)},
         {0}});
  }
  return All;
}

/// Convolutions, Gemm and MatMul, pooling.
void contractionCases(std::mt19937 &Rng, std::vector<Case> &All) {
  {
    // Contraction and pooling: cuDNN's direct and explicitly padded paths,
    // cuBLAS batch broadcasting, direct pooling kernels.
    RandomF32 Random{Rng};
    auto Window = [](Ints Kernel, Ints Strides, Ints Pads, Ints Dilations) {
      OpAttrs A;
      A.set("kernel_shape", Kernel);
      A.set("strides", Strides);
      A.set("pads", Pads);
      A.set("dilations", Dilations);
      return A;
    };
    auto Conv = [&](const char *Name, OpKind Kind, Ints X, Ints W, Ints Y,
                    OpAttrs A, bool Bias) {
      std::vector<HostTensor> In{Random(X), Random(W)};
      std::vector<unsigned> Grads{0, 1};
      if (Bias) {
        In.push_back(Random({Y[1]}));
        Grads.push_back(2);
      }
      All.push_back({Name, Kind, A, In, {f32(Y)}, Grads});
    };
    OpAttrs A = Window({3, 3}, {2, 1}, {1, 0, 2, 1}, {1, 1});
    A.set("group", int64_t(2));
    Conv("conv_group_asymmetric_pads", OpKind::Conv, {2, 4, 7, 6}, {6, 2, 3, 3},
         {2, 6, 4, 5}, A, true);
    Conv("conv_1d_dilated", OpKind::Conv, {2, 3, 9}, {4, 3, 3}, {2, 4, 4},
         Window({3}, {2}, {1, 2}, {2}), true);
    Conv("conv_3d", OpKind::Conv, {1, 2, 4, 5, 4}, {2, 2, 2, 3, 2},
         {1, 2, 4, 2, 4},
         Window({2, 3, 2}, {1, 2, 1}, {0, 1, 1, 1, 0, 0}, {1, 1, 1}), true);
    A = Window({3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1});
    A.set("output_padding", Ints{1, 1});
    Conv("conv_transpose_output_padding", OpKind::ConvTranspose, {1, 2, 3, 3},
         {2, 3, 3, 3}, {1, 3, 6, 6}, A, true);
    A = Window({2, 2}, {2, 1}, {0, 1, 0, 0}, {1, 2});
    A.set("group", int64_t(2));
    A.set("output_padding", Ints{1, 0});
    Conv("conv_transpose_group_asymmetric_pads", OpKind::ConvTranspose,
         {2, 4, 3, 4}, {4, 1, 2, 2}, {2, 2, 7, 5}, A, false);
    A = Window({3}, {3}, {1, 0}, {1});
    A.set("output_padding", Ints{2});
    Conv("conv_transpose_1d_past_end_pad", OpKind::ConvTranspose, {1, 2, 4},
         {2, 2, 3}, {1, 2, 13}, A, true);
  }
  {
    RandomF32 Random{Rng};
    OpAttrs A;
    A.set("transA", int64_t(1));
    A.set("transB", int64_t(1));
    A.set("alpha", 0.5);
    A.set("beta", 2.0);
    All.push_back({"gemm_transposed_row_bias",
                   OpKind::Gemm,
                   A,
                   {Random({5, 3}), Random({4, 5}), Random({4})},
                   {f32({3, 4})},
                   {0, 1, 2}});
    All.push_back({"gemm_column_bias",
                   OpKind::Gemm,
                   {},
                   {Random({3, 5}), Random({5, 4}), Random({3, 1})},
                   {f32({3, 4})},
                   {0, 1, 2}});
    All.push_back({"matmul_mixed_batch_broadcast",
                   OpKind::MatMul,
                   {},
                   {Random({2, 1, 3, 4}), Random({3, 4, 5})},
                   {f32({2, 3, 3, 5})},
                   {0, 1}});
    All.push_back({"matmul_vector_times_batch",
                   OpKind::MatMul,
                   {},
                   {Random({4}), Random({2, 4, 3})},
                   {f32({2, 3})},
                   {0, 1}});
  }
  {
    auto Pool = [&](const char *Name, OpKind Kind, Ints X, Ints Y, Ints Kernel,
                    Ints Strides, Ints Pads, Ints Dilations, bool IncludePad) {
      HostTensor In = f32(X);
      randomize(In, Rng);
      OpAttrs A;
      A.set("kernel_shape", Kernel);
      A.set("strides", Strides);
      A.set("pads", Pads);
      A.set("dilations", Dilations);
      A.set("count_include_pad", int64_t(IncludePad));
      All.push_back({Name, Kind, A, {In}, {f32(Y)}, {0}});
    };
    Pool("maxpool_cudnn", OpKind::MaxPool, {2, 3, 7, 7}, {2, 3, 4, 4}, {3, 3},
         {2, 2}, {1, 1, 1, 1}, {1, 1}, false);
    Pool("maxpool_dilated_asymmetric_pads", OpKind::MaxPool, {1, 2, 7, 7},
         {1, 2, 6, 6}, {2, 2}, {1, 1}, {1, 0, 0, 1}, {2, 2}, false);
    Pool("maxpool_3d", OpKind::MaxPool, {1, 2, 4, 5, 4}, {1, 2, 2, 3, 4},
         {2, 2, 2}, {2, 2, 1}, {0, 1, 0, 0, 0, 1}, {1, 1, 1}, false);
    {
      // Ties in every window (values 0 and 1 only, as after a ReLU and a
      // threshold): the gradient goes to the first maximum in window order,
      // as on the CPU and in PyTorch, on a geometry cuDNN could pool.
      HostTensor In = f32({1, 2, 6, 6});
      for (int64_t I = 0; I < In.size(); ++I)
        In.set(I, (I * 7 % 5) < 2 ? 1.0 : 0.0);
      OpAttrs A;
      A.set("kernel_shape", Ints{2, 2});
      A.set("strides", Ints{2, 2});
      A.set("pads", Ints{0, 0, 0, 0});
      A.set("dilations", Ints{1, 1});
      All.push_back(
          {"maxpool_ties", OpKind::MaxPool, A, {In}, {f32({1, 2, 3, 3})}, {0}});
    }
    Pool("avgpool_ceil_past_end_pad", OpKind::AveragePool, {1, 2, 6, 6},
         {1, 2, 4, 4}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, true);
    Pool("avgpool_exclude_pad", OpKind::AveragePool, {2, 2, 5, 5}, {2, 2, 5, 5},
         {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, false);
    Pool("avgpool_1d_include_pad", OpKind::AveragePool, {2, 2, 9}, {2, 2, 5},
         {3}, {2}, {1, 1}, {1}, true);
    for (OpKind Kind : {OpKind::GlobalMaxPool, OpKind::GlobalAveragePool}) {
      HostTensor X = f32({2, 3, 4, 5});
      randomize(X, Rng);
      All.push_back({Kind == OpKind::GlobalMaxPool ? "global_max_pool"
                                                   : "global_average_pool",
                     Kind,
                     {},
                     {X},
                     {f32({2, 3, 1, 1})},
                     {0}});
    }
    // Resize: bilinear (PyTorch's align_corners=False) up by 2, linear
    // align_corners down, nearest up by 3 and 2.
    auto Resize = [&](const char *Name, const char *Mode,
                      const char *Coordinates, const char *Nearest,
                      std::vector<double> Scales, Ints XDims, Ints YDims) {
      OpAttrs A;
      A.set("mode", std::string(Mode));
      A.set("coordinate_transformation_mode", std::string(Coordinates));
      A.set("nearest_mode", std::string(Nearest));
      A.set("scales", std::move(Scales));
      HostTensor X = f32(XDims);
      randomize(X, Rng);
      All.push_back({Name, OpKind::Resize, A, {X}, {f32(YDims)}, {0}});
    };
    Resize("resize_bilinear_up", "linear", "pytorch_half_pixel",
           "round_prefer_floor", {1, 1, 2, 2}, {2, 3, 5, 4}, {2, 3, 10, 8});
    Resize("resize_linear_align_corners_down", "linear", "align_corners",
           "round_prefer_floor", {1, 1, 0.6, 0.5}, {1, 2, 5, 6}, {1, 2, 3, 3});
    Resize("resize_nearest_up", "nearest", "asymmetric", "floor", {1, 1, 3, 2},
           {2, 2, 3, 4}, {2, 2, 9, 8});
  }
}

/// Movement: slices, pads, gathers.
void movementCases(std::mt19937 &Rng, std::vector<Case> &All) {
  // Movement: strided walks (negative slice steps, broadcast), every pad
  // mode with crops, gathers with repeated and negative indices.
  RandomF32 Random{Rng};
  auto Move = [&](const char *Name, OpKind Kind, OpAttrs A,
                  std::vector<HostTensor> In, std::vector<HostTensor> Out,
                  std::vector<unsigned> Grads) {
    All.push_back({Name, Kind, A, std::move(In), std::move(Out), Grads});
  };
  Move("reshape", OpKind::Reshape, {}, {Random({2, 3, 4})}, {f32({6, 4})}, {0});
  OpAttrs Perm;
  Perm.set("perm", Ints{2, 0, 1});
  Move("transpose", OpKind::Transpose, Perm, {Random({2, 3, 4})},
       {f32({4, 2, 3})}, {0});
  OpAttrs Axis1;
  Axis1.set("axis", int64_t(1));
  Move("concat", OpKind::Concat, Axis1, {Random({2, 2, 3}), Random({2, 1, 3})},
       {f32({2, 3, 3})}, {0, 1});
  Move("split", OpKind::Split, Axis1, {Random({2, 3, 3})},
       {f32({2, 1, 3}), f32({2, 2, 3})}, {0});
  OpAttrs Slice;
  Slice.set("starts", Ints{3, 0});
  Slice.set("steps", Ints{-1, 2});
  Move("slice_negative_step", OpKind::Slice, Slice, {Random({4, 5})},
       {f32({3, 3})}, {0});
  Move("expand", OpKind::Expand, {}, {Random({3, 1})}, {f32({2, 3, 4})}, {0});
  OpAttrs Crop;
  Crop.set("pads", Ints{1, -1, 0, 2});
  Crop.set("mode", std::string("constant"));
  Crop.set("value", 0.5);
  Move("pad_constant_crop", OpKind::Pad, Crop, {Random({3, 4})}, {f32({4, 5})},
       {0});
  for (const char *Mode : {"reflect", "edge", "wrap"}) {
    OpAttrs A;
    A.set("pads", Ints{2, -1, 1, 3});
    A.set("mode", std::string(Mode));
    Move(Mode, OpKind::Pad, A, {Random({3, 4})}, {f32({6, 6})}, {0});
  }
  OpAttrs Axis0;
  Axis0.set("axis", int64_t(0));
  Move("gather_repeated_negative", OpKind::Gather, Axis0,
       {Random({5, 3}), i64({4}, {1, -1, 1, 0})}, {f32({4, 3})}, {0});
  Move("gather_axis1", OpKind::Gather, Axis1,
       {Random({2, 5, 3}), i64({2, 2}, {4, 0, 0, -5})}, {f32({2, 2, 2, 3})},
       {0});
}

/// Normalization and reductions.
void normalizationCases(std::mt19937 &Rng, std::vector<Case> &All) {
  // Normalization: batch norm with running statistics (ONNX semantics)
  // and inference, layer norm with broadcast weights and statistics
  // outputs, softmax lanes per block and per thread, reductions.
  RandomF32 Random{Rng};
  for (int64_t Training : {1, 0}) {
    OpAttrs A;
    A.set("training", Training);
    A.set("momentum", 0.9);
    A.set("epsilon", 1e-5);
    std::vector<HostTensor> Out = {f32({2, 3, 2, 2})};
    if (Training)
      Out.insert(Out.end(), {f32({3}), f32({3})});
    All.push_back({Training ? "batch_norm_training" : "batch_norm_inference",
                   OpKind::BatchNorm,
                   A,
                   {Random({2, 3, 2, 2}), Random({3}), Random({3}), Random({3}),
                    Random({3}, 0.5, 1.5)},
                   Out,
                   {0, 1, 2, 3, 4}});
  }
  OpAttrs Layer;
  Layer.set("axis", int64_t(1));
  Layer.set("epsilon", 1e-5);
  All.push_back({"layer_norm_broadcast_weights",
                 OpKind::LayerNorm,
                 Layer,
                 {Random({3, 2, 4}), Random({4}), Random({2, 4})},
                 {f32({3, 2, 4}), f32({3, 1, 1}), f32({3, 1, 1})},
                 {0, 1, 2}});
  OpAttrs Axis1;
  Axis1.set("axis", int64_t(1));
  for (OpKind Kind : {OpKind::Softmax, OpKind::LogSoftmax}) {
    bool Log = Kind == OpKind::LogSoftmax;
    All.push_back({Log ? "log_softmax_rows" : "softmax_rows",
                   Kind,
                   Axis1,
                   {Random({3, 70}, -3, 3)},
                   {f32({3, 70})},
                   {0}});
    All.push_back({Log ? "log_softmax_inner" : "softmax_inner",
                   Kind,
                   Axis1,
                   {Random({2, 5, 3}, -3, 3)},
                   {f32({2, 5, 3})},
                   {0}});
  }
  OpAttrs Axes02;
  Axes02.set("axes", Ints{0, 2});
  All.push_back({"reduce_sum",
                 OpKind::ReduceSum,
                 Axes02,
                 {Random({3, 4, 5})},
                 {f32({4})},
                 {0}});
  OpAttrs Axes1;
  Axes1.set("axes", Ints{1});
  All.push_back({"reduce_mean_keepdims",
                 OpKind::ReduceMean,
                 Axes1,
                 {Random({3, 4, 5})},
                 {f32({3, 1, 5})},
                 {0}});
  All.push_back({"reduce_mean_long",
                 OpKind::ReduceMean,
                 Axes1,
                 {Random({2, 600})},
                 {f32({2})},
                 {0}});
  for (OpKind Kind : {OpKind::ReduceMax, OpKind::ReduceMin}) {
    bool Max = Kind == OpKind::ReduceMax;
    All.push_back({Max ? "reduce_max" : "reduce_min",
                   Kind,
                   Axes02,
                   {Random({3, 4, 5})},
                   {f32({4})},
                   {0}});
    All.push_back({Max ? "reduce_max_long" : "reduce_min_long",
                   Kind,
                   Axes1,
                   {Random({2, 600})},
                   {f32({2})},
                   {0}});
    All.push_back({Max ? "reduce_max_i64" : "reduce_min_i64",
                   Kind,
                   Axes1,
                   {i64({2, 3}, {1, 2, 4, -7, 3, 5})},
                   {i64({2})},
                   {}});
  }
  All.push_back({"reduce_mean_i64",
                 OpKind::ReduceMean,
                 Axes1,
                 {i64({2, 3}, {1, 2, 4, -7, 3, 5})},
                 {i64({2})},
                 {}});
}

/// Recurrent layers and cells.
void recurrentCases(std::mt19937 &Rng, std::vector<Case> &All) {
  // Recurrent: layers in both layouts and directions, peepholes, both GRU
  // variants, an LSTM cell computing a slice of the hidden units.
  auto Random = [&](Ints Dims) {
    return RandomF32{Rng}(std::move(Dims), -0.5, 0.5);
  };
  OpAttrs Lstm;
  Lstm.set("hidden_size", int64_t(5));
  Lstm.set("direction", std::string("bidirectional"));
  All.push_back({"lstm_bidirectional_peephole",
                 OpKind::LSTM,
                 Lstm,
                 {Random({3, 2, 4}), Random({2, 20, 4}), Random({2, 20, 5}),
                  Random({2, 40}), i64({2}, {3, 3}), Random({2, 2, 5}),
                  Random({2, 2, 5}), Random({2, 15})},
                 {f32({3, 2, 2, 5}), f32({2, 2, 5}), f32({2, 2, 5})},
                 {0, 1, 2, 3, 5, 6, 7}});
  for (int64_t LinearBeforeReset : {0, 1}) {
    OpAttrs Gru;
    Gru.set("hidden_size", int64_t(5));
    Gru.set("layout", int64_t(1));
    Gru.set("direction", std::string("reverse"));
    Gru.set("linear_before_reset", LinearBeforeReset);
    All.push_back({LinearBeforeReset ? "gru_batch_first_linear_before_reset"
                                     : "gru_batch_first_reverse",
                   OpKind::GRU,
                   Gru,
                   {Random({2, 3, 4}), Random({1, 15, 4}), Random({1, 15, 5}),
                    Random({1, 30}), i64({2}, {3, 3}), Random({2, 1, 5})},
                   {f32({2, 3, 1, 5}), f32({2, 1, 5})},
                   {0, 1, 2, 3, 5}});
  }
  OpAttrs Cell;
  Cell.set("hidden_size", int64_t(5));
  All.push_back(
      {"lstm_cell_slice",
       OpKind::LSTMCell,
       Cell,
       {Random({2, 4}), Random({2, 5}), Random({2, 3}), Random({1, 4, 3, 4}),
        Random({1, 4, 3, 5}), Random({1, 8, 3})},
       {f32({2, 3}), f32({2, 3})},
       {0, 1, 2, 3, 4, 5}});
  All.push_back({"gru_cell",
                 OpKind::GRUCell,
                 Cell,
                 {Random({2, 4}), Random({2, 5}), Random({1, 3, 5, 4}),
                  Random({1, 3, 5, 5}), Random({1, 6, 5})},
                 {f32({2, 5})},
                 {0, 1, 2, 3, 4}});
}

/// CumSum over inner and outer axes, exclusive and reversed.
void scanCases(std::mt19937 &Rng, std::vector<Case> &All) {
  RandomF32 Random{Rng};
  auto Scan = [](int64_t Axis, bool Exclusive, bool Reverse) {
    OpAttrs A;
    A.set("axis", Axis);
    A.set("exclusive", int64_t(Exclusive));
    A.set("reverse", int64_t(Reverse));
    return A;
  };
  All.push_back({"cumsum_last_axis",
                 OpKind::CumSum,
                 Scan(2, false, false),
                 {Random({2, 3, 7})},
                 {f32({2, 3, 7})},
                 {0}});
  All.push_back({"cumsum_middle_axis_exclusive",
                 OpKind::CumSum,
                 Scan(1, true, false),
                 {Random({2, 5, 3})},
                 {f32({2, 5, 3})},
                 {0}});
  All.push_back({"cumsum_first_axis_reverse_exclusive",
                 OpKind::CumSum,
                 Scan(0, true, true),
                 {Random({6, 4})},
                 {f32({6, 4})},
                 {0}});
  All.push_back({"cumsum_i64_reverse",
                 OpKind::CumSum,
                 Scan(1, false, true),
                 {i64({2, 3}, {1, 2, 4, -7, 3, 5})},
                 {i64({2, 3})},
                 {}});
}

} // namespace onnx2soap::rt::test
