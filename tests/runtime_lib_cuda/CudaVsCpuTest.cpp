//===- tests/runtime_lib_cuda/CudaVsCpuTest.cpp - CUDA kernels vs CPU -----===//
//
// Every op kind's CUDA forward and backward against its CPU twin on the same
// small operands. This links every CUDA kernel, so it also proves the CUDA
// backend builds; on a machine without a GPU it checks that the backend
// refuses to start with a clear message, and skips the comparisons.
//
//===----------------------------------------------------------------------===//
#include "../runtime_lib/KernelTestUtil.h"
#include "runtime_lib/Error.h"
#include "runtime_lib/cuda/CudaBackend.h"

using namespace onnx2soap::rt;
using namespace onnx2soap::rt::test;

namespace {

TEST(CudaBackend, StartsOrSaysWhyNot) {
  std::string Why = cudaAvailability();
  if (Why.empty()) {
    auto B = createCudaBackend(0);
    EXPECT_STREQ(B->name(), "cuda");
    return;
  }
  EXPECT_THAT(Why, ::testing::HasSubstr("CUDA"));
  try {
    createCudaBackend(0);
    ADD_FAILURE() << "createCudaBackend succeeded without a device";
  } catch (const RuntimeError &E) {
    EXPECT_THAT(E.what(), ::testing::HasSubstr(Why));
  }
}

/// One op on small operands, the same on both backends.
struct Case {
  const char *Name;
  OpKind Kind;
  OpAttrs Attrs;
  std::vector<HostTensor> Inputs;   // absent optional operands: Rank -1 views
  std::vector<HostTensor> Outputs;  // shapes and types
  std::vector<unsigned> GradInputs; // inputs whose gradients are compared
  /// OpCall::GlobalOffset, GlobalDims: empty unless the call is a partition.
  std::vector<int64_t> GlobalOffset = {}, GlobalDims = {};
};

/// Copies host tensors to device buffers of B and back.
struct DeviceTensors {
  std::vector<DeviceBuffer> Buffers;
  std::vector<TensorView> Views;
  DeviceTensors(Backend &B, std::vector<HostTensor> &Host) {
    for (HostTensor &T : Host) {
      Buffers.emplace_back(B, T.Bytes.size());
      B.copyFromHost(Buffers.back().data(), T.Bytes.data(), T.Bytes.size());
      TensorView V = T.view();
      V.Data = Buffers.back().data();
      Views.push_back(V);
    }
  }
  void download(Backend &B, std::vector<HostTensor> &Host) {
    for (size_t I = 0; I < Host.size(); ++I)
      B.copyToHost(Host[I].Bytes.data(), Views[I].Data, Host[I].Bytes.size());
  }
};

/// Forward outputs and requested input gradients of C on backend B.
std::pair<std::vector<HostTensor>, std::vector<HostTensor>> runOn(Backend &B,
                                                                  Case C) {
  std::mt19937 Rng(7);
  std::vector<HostTensor> OutGradsHost = C.Outputs;
  for (HostTensor &G : OutGradsHost)
    if (G.Type == DType::Float32)
      randomize(G, Rng);
  DeviceTensors In(B, C.Inputs), Out(B, C.Outputs), OutGrads(B, OutGradsHost);
  OpCall Call{C.Kind,    C.Attrs, C.Name,         In.Views,
              Out.Views, 1,       C.GlobalOffset, C.GlobalDims};
  B.forward(Call);
  std::vector<HostTensor> GradHost;
  for (HostTensor &T : C.Inputs)
    GradHost.push_back(HostTensor(T.Type, T.Dims));
  DeviceTensors Grads(B, GradHost);
  std::vector<TensorView> GradViews(C.Inputs.size(), TensorView::absent());
  for (unsigned I : C.GradInputs)
    GradViews[I] = Grads.Views[I];
  if (!C.GradInputs.empty())
    B.backward(Call, OutGrads.Views, GradViews);
  B.synchronize();
  Out.download(B, C.Outputs);
  Grads.download(B, GradHost);
  return {C.Outputs, GradHost};
}

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
  {
    // Contraction and pooling: cuDNN's direct and explicitly padded paths,
    // cuBLAS batch broadcasting, direct pooling kernels.
    using Ints = std::vector<int64_t>;
    auto Random = [&](Ints Dims) {
      HostTensor T = f32(std::move(Dims));
      randomize(T, Rng);
      return T;
    };
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
    using Ints = std::vector<int64_t>;
    auto Random = [&](Ints Dims) {
      HostTensor T = f32(std::move(Dims));
      randomize(T, Rng);
      return T;
    };
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
    using Ints = std::vector<int64_t>;
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
  }
  {
    // Elementwise, loss: the unary kinds, Cast, Dropout (the mask must match
    // the CPU's bit for bit), broadcasting arithmetic and its deterministic
    // reductions (per-thread and per-block paths), Max/Min ties, Where and
    // SoftmaxCrossEntropyLoss.
    using Ints = std::vector<int64_t>;
    auto Random = [&](Ints Dims, double Low = -1, double High = 1) {
      HostTensor T = f32(std::move(Dims));
      randomize(T, Rng, Low, High);
      return T;
    };
    auto Float = [](const char *Name, double V) {
      OpAttrs A;
      A.set(Name, V);
      return A;
    };
    auto Text = [](const char *Name, const char *V) {
      OpAttrs A;
      A.set(Name, std::string(V));
      return A;
    };
    auto UnaryWith = [&](const char *Name, OpKind Kind, OpAttrs A, double Low,
                         double High) {
      All.push_back(
          {Name, Kind, A, {Random({3, 7}, Low, High)}, {f32({3, 7})}, {0}});
    };
    UnaryWith("leaky_relu", OpKind::LeakyRelu, Float("alpha", 0.2), -1, 1);
    UnaryWith("erf", OpKind::Erf, {}, -2, 2);
    UnaryWith("gelu", OpKind::Gelu, {}, -3, 3);
    UnaryWith("gelu_tanh", OpKind::Gelu, Text("approximate", "tanh"), -3, 3);
    UnaryWith("exp", OpKind::Exp, {}, -2, 2);
    UnaryWith("log", OpKind::Log, {}, 0.1, 3);
    UnaryWith("neg", OpKind::Neg, {}, -1, 1);
    UnaryWith("abs", OpKind::Abs, {}, -1, 1);
    UnaryWith("reciprocal", OpKind::Reciprocal, {}, 0.5, 2);
    All.push_back({"relu_i64",
                   OpKind::Relu,
                   {},
                   {i64({5}, {-3, 0, 4, -1, 9})},
                   {i64({5})},
                   {}});
    HostTensor Flags(DType::Bool, {4});
    Flags.set(1, 1);
    Flags.set(2, 1);
    All.push_back({"not", OpKind::Not, {}, {Flags}, {Flags}, {}});

    All.push_back({"cast_f32_f64",
                   OpKind::Cast,
                   Text("to", "f64"),
                   {Random({2, 5})},
                   {HostTensor(DType::Float64, {2, 5})},
                   {0}});
    All.push_back({"cast_f32_i32_saturating",
                   OpKind::Cast,
                   Text("to", "i32"),
                   {f32({6}, {-2.7, 2.7, 3e9, -3e9, 0.5, -0.5})},
                   {HostTensor(DType::Int32, {6})},
                   {0}});
    All.push_back({"cast_i64_f32",
                   OpKind::Cast,
                   Text("to", "f32"),
                   {i64({3}, {-5, 0, 123456789})},
                   {f32({3})},
                   {}});
    All.push_back({"cast_f32_bool",
                   OpKind::Cast,
                   Text("to", "bool"),
                   {f32({3}, {0, -0.5, 2})},
                   {HostTensor(DType::Bool, {3})},
                   {}});

    auto DropoutAttrs = [](double Ratio, int64_t Training, int64_t Seed) {
      OpAttrs A;
      A.set("ratio", Ratio);
      A.set("training", Training);
      A.set("seed", Seed);
      return A;
    };
    All.push_back({"dropout_training",
                   OpKind::Dropout,
                   DropoutAttrs(0.3, 1, 42),
                   {Random({8, 33})},
                   {f32({8, 33}), HostTensor(DType::Bool, {8, 33})},
                   {0}});
    All.push_back({"dropout_training_no_mask",
                   OpKind::Dropout,
                   DropoutAttrs(0.5, 1, 1234),
                   {Random({100})},
                   {f32({100})},
                   {0}});
    // One partition of a [6, 40] tensor: the mask is drawn at global
    // indices on both backends.
    All.push_back({"dropout_partition",
                   OpKind::Dropout,
                   DropoutAttrs(0.3, 1, 42),
                   {Random({3, 33})},
                   {f32({3, 33}), HostTensor(DType::Bool, {3, 33})},
                   {0},
                   {2, 5},
                   {6, 40}});
    All.push_back({"dropout_partition_no_mask",
                   OpKind::Dropout,
                   DropoutAttrs(0.5, 1, 1234),
                   {Random({3, 33})},
                   {f32({3, 33})},
                   {0},
                   {2, 5},
                   {6, 40}});
    All.push_back({"dropout_inference",
                   OpKind::Dropout,
                   DropoutAttrs(0.5, 0, 3),
                   {Random({10})},
                   {f32({10}), HostTensor(DType::Bool, {10})},
                   {0}});

    All.push_back({"sub_broadcast",
                   OpKind::Sub,
                   {},
                   {Random({4, 1, 3}), Random({2, 3})},
                   {f32({4, 2, 3})},
                   {0, 1}});
    All.push_back({"mul_broadcast",
                   OpKind::Mul,
                   {},
                   {Random({2, 3, 4}), Random({4})},
                   {f32({2, 3, 4})},
                   {0, 1}});
    All.push_back({"div_broadcast",
                   OpKind::Div,
                   {},
                   {Random({3, 1}), Random({1, 5}, 0.5, 2)},
                   {f32({3, 5})},
                   {0, 1}});
    // Long reductions: a bias row (64 rows per element, block path) and a
    // scalar (8192 terms).
    All.push_back({"add_bias_rows",
                   OpKind::Add,
                   {},
                   {Random({64, 300}), Random({300})},
                   {f32({64, 300})},
                   {0, 1}});
    All.push_back({"mul_scalar",
                   OpKind::Mul,
                   {},
                   {Random({2, 4096}), Random({1})},
                   {f32({2, 4096})},
                   {0, 1}});
    All.push_back({"div_i64",
                   OpKind::Div,
                   {},
                   {i64({4}, {7, -7, 9, -9}), i64({4}, {2, 2, -1, 4})},
                   {i64({4})},
                   {}});
    All.push_back({"pow_float_exponent",
                   OpKind::Pow,
                   {},
                   {Random({3, 4}, 0.5, 2), Random({4}, -2, 2)},
                   {f32({3, 4})},
                   {0, 1}});
    All.push_back({"pow_integer_exponent",
                   OpKind::Pow,
                   {},
                   {Random({2, 3}), i64({1}, {3})},
                   {f32({2, 3})},
                   {0}});
    All.push_back(
        {"max_three_with_ties",
         OpKind::Max,
         {},
         {f32({2, 3}, {1, 5, -2, 0, 3, 3}), f32({3}, {1, 4, 3}), f32({1}, {3})},
         {f32({2, 3})},
         {0, 1, 2}});
    All.push_back({"min_broadcast",
                   OpKind::Min,
                   {},
                   {Random({3, 4}), Random({3, 1})},
                   {f32({3, 4})},
                   {0, 1}});
    HostTensor Left = f32({2, 3}, {1, 2, 3, 4, 5, 6}),
               Right = f32({3}, {2, 2, 7});
    All.push_back({"equal",
                   OpKind::Equal,
                   {},
                   {Left, Right},
                   {HostTensor(DType::Bool, {2, 3})},
                   {}});
    All.push_back({"less",
                   OpKind::Less,
                   {},
                   {Left, Right},
                   {HostTensor(DType::Bool, {2, 3})},
                   {}});
    All.push_back({"greater_i64",
                   OpKind::Greater,
                   {},
                   {i64({3}, {1, 5, 2}), i64({1}, {2})},
                   {HostTensor(DType::Bool, {3})},
                   {}});
    HostTensor Condition(DType::Bool, {2, 1});
    Condition.set(0, 1);
    All.push_back({"where_broadcast",
                   OpKind::Where,
                   {},
                   {Condition, Random({2, 4}), Random({4})},
                   {f32({2, 4})},
                   {1, 2}});

    auto Loss = [](const char *Reduction, int64_t Ignore) {
      OpAttrs A;
      A.set("reduction", std::string(Reduction));
      if (Ignore >= 0) {
        A.set("has_ignore_index", int64_t(1));
        A.set("ignore_index", Ignore);
      }
      return A;
    };
    All.push_back({"softmax_cross_entropy_mean",
                   OpKind::SoftmaxCrossEntropyLoss,
                   Loss("mean", -1),
                   {Random({4, 5}, -3, 3), i64({4}, {0, 4, 2, 2})},
                   {f32({})},
                   {0}});
    All.push_back({"softmax_cross_entropy_weighted_ignore",
                   OpKind::SoftmaxCrossEntropyLoss,
                   Loss("mean", 1),
                   {Random({6, 40}, -3, 3), i64({6}, {0, 1, 39, 7, 1, 3}),
                    Random({40}, 0.5, 2)},
                   {f32({}), f32({6, 40})},
                   {0, 2}});
    All.push_back(
        {"softmax_cross_entropy_spatial_none",
         OpKind::SoftmaxCrossEntropyLoss,
         Loss("none", -1),
         {Random({2, 3, 4}, -3, 3), i64({2, 4}, {0, 1, 2, 0, 2, 2, 1, 0})},
         {f32({2, 4}), f32({2, 3, 4})},
         {0}});
    All.push_back(
        {"softmax_cross_entropy_sum_weights",
         OpKind::SoftmaxCrossEntropyLoss,
         Loss("sum", -1),
         {Random({5, 3}), i64({5}, {2, 0, 2, 1, 2}), Random({3}, 0.5, 2)},
         {f32({})},
         {0, 2}});
  }
  {
    // Movement: strided walks (negative slice steps, broadcast), every pad
    // mode with crops, gathers with repeated and negative indices.
    using Ints = std::vector<int64_t>;
    auto Random = [&](Ints Dims) {
      HostTensor T = f32(std::move(Dims));
      randomize(T, Rng);
      return T;
    };
    auto Move = [&](const char *Name, OpKind Kind, OpAttrs A,
                    std::vector<HostTensor> In, std::vector<HostTensor> Out,
                    std::vector<unsigned> Grads) {
      All.push_back({Name, Kind, A, std::move(In), std::move(Out), Grads});
    };
    Move("reshape", OpKind::Reshape, {}, {Random({2, 3, 4})}, {f32({6, 4})},
         {0});
    OpAttrs Perm;
    Perm.set("perm", Ints{2, 0, 1});
    Move("transpose", OpKind::Transpose, Perm, {Random({2, 3, 4})},
         {f32({4, 2, 3})}, {0});
    OpAttrs Axis1;
    Axis1.set("axis", int64_t(1));
    Move("concat", OpKind::Concat, Axis1,
         {Random({2, 2, 3}), Random({2, 1, 3})}, {f32({2, 3, 3})}, {0, 1});
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
    Move("pad_constant_crop", OpKind::Pad, Crop, {Random({3, 4})},
         {f32({4, 5})}, {0});
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
  {
    // Normalization: batch norm with running statistics (ONNX semantics)
    // and inference, layer norm with broadcast weights and statistics
    // outputs, softmax lanes per block and per thread, reductions.
    using Ints = std::vector<int64_t>;
    auto Random = [&](Ints Dims, double Low = -1, double High = 1) {
      HostTensor T = f32(std::move(Dims));
      randomize(T, Rng, Low, High);
      return T;
    };
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
                     {Random({2, 3, 2, 2}), Random({3}), Random({3}),
                      Random({3}), Random({3}, 0.5, 1.5)},
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
    All.push_back({"reduce_mean_i64",
                   OpKind::ReduceMean,
                   Axes1,
                   {i64({2, 3}, {1, 2, 4, -7, 3, 5})},
                   {i64({2})},
                   {}});
  }
  {
    // Recurrent: layers in both layouts and directions, peepholes, both GRU
    // variants, an LSTM cell computing a slice of the hidden units.
    using Ints = std::vector<int64_t>;
    auto Random = [&](Ints Dims) {
      HostTensor T = f32(std::move(Dims));
      randomize(T, Rng, -0.5, 0.5);
      return T;
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
  return All;
}

TEST(CudaBackend, KernelsMatchTheCpuBackend) {
  std::string Why = cudaAvailability();
  if (!Why.empty())
    GTEST_SKIP() << Why << " (the CUDA kernels built and linked)";
  auto Gpu = createCudaBackend(0);
  auto Cpu = createCpuBackend(1);
  for (const Case &C : cases()) {
    SCOPED_TRACE(C.Name);
    auto [CpuOut, CpuGrad] = runOn(*Cpu, C);
    auto [GpuOut, GpuGrad] = runOn(*Gpu, C);
    for (size_t K = 0; K < CpuOut.size(); ++K)
      for (int64_t E = 0; E < CpuOut[K].size(); ++E)
        EXPECT_NEAR(GpuOut[K].at(E), CpuOut[K].at(E),
                    1e-4 * std::max(1.0, std::fabs(CpuOut[K].at(E))))
            << "output " << K << " element " << E;
    for (unsigned I : C.GradInputs)
      for (int64_t E = 0; E < CpuGrad[I].size(); ++E)
        EXPECT_NEAR(GpuGrad[I].at(E), CpuGrad[I].at(E),
                    1e-4 * std::max(1.0, std::fabs(CpuGrad[I].at(E))))
            << "gradient of input " << I << " element " << E;
  }
}

/// BatchNorm split in two along N, run in the phases of Backend.h with the
/// Stats and Sums summed on the host: outputs, dX, the partitions' dscale
/// and dbias, and the phases' Stats and Sums, against the CPU backend.
std::vector<HostTensor> runPhasesOn(Backend &B, bool Training) {
  std::mt19937 Rng(11);
  auto Random = [&](std::vector<int64_t> Dims, double Low = -1,
                    double High = 1) {
    HostTensor T = f32(std::move(Dims));
    randomize(T, Rng, Low, High);
    return T;
  };
  OpAttrs A;
  A.set("training", int64_t(Training));
  A.set("momentum", 0.9);
  A.set("epsilon", 1e-5);
  const int64_t C = 3, Count = 4 * 5;
  std::vector<HostTensor> Common = {
      Random({C}, 0.5, 1.5), Random({C}), Random({C}),
      Random({C}, 0.5, 1.5), Random({C}), Random({C})};
  DeviceTensors Shared(B, Common); // scale, bias, mean, var, d running stats
  std::vector<HostTensor> Host;    // per part: X, dY, Y, run mean, run var,
                                   // dX, dscale, dbias, Stats, Sums
  for (int Part = 0; Part < 2; ++Part)
    for (HostTensor T : {Random({2, C, 5}), Random({2, C, 5}), f32({2, C, 5}),
                         f32({C}), f32({C}), f32({2, C, 5}), f32({C}), f32({C}),
                         f32({2, C}), f32({2, C})})
      Host.push_back(T);
  DeviceTensors Dev(B, Host);
  auto V = [&](int Part, int K) { return Dev.Views[Part * 10 + K]; };
  auto callOf = [&](int Part) {
    return OpCall{OpKind::BatchNorm,
                  A,
                  "bn",
                  {V(Part, 0), Shared.Views[0], Shared.Views[1],
                   Shared.Views[2], Shared.Views[3]},
                  {V(Part, 2), V(Part, 3), V(Part, 4)},
                  1};
  };
  // The all-reduce: Stats (K 8) or Sums (K 9) of both parts into both.
  auto allReduce = [&](int K) {
    B.synchronize();
    Dev.download(B, Host);
    for (int64_t I = 0; I < 2 * C; ++I) {
      float Sum = Host[K].data<float>()[I] + Host[10 + K].data<float>()[I];
      Host[K].data<float>()[I] = Host[10 + K].data<float>()[I] = Sum;
    }
    for (int Part = 0; Part < 2; ++Part)
      B.copyFromHost(V(Part, K).Data, Host[Part * 10 + K].Bytes.data(),
                     Host[K].Bytes.size());
  };
  for (int Part = 0; Part < 2; ++Part)
    B.batchNormPartialStats(callOf(Part), V(Part, 8));
  allReduce(8);
  for (int Part = 0; Part < 2; ++Part)
    B.batchNormForwardWithStats(callOf(Part), V(Part, 8), Count);
  for (int Part = 0; Part < 2; ++Part)
    B.batchNormBackwardPartialSums(callOf(Part), V(Part, 1), V(Part, 8), Count,
                                   V(Part, 9));
  allReduce(9);
  for (int Part = 0; Part < 2; ++Part)
    B.batchNormBackwardWithSums(
        callOf(Part), {V(Part, 1), Shared.Views[4], Shared.Views[5]},
        {V(Part, 5), V(Part, 6), V(Part, 7)}, V(Part, 8), V(Part, 9), Count);
  B.synchronize();
  Dev.download(B, Host);
  return Host;
}

TEST(CudaBackend, ShardedBatchNormPhasesMatchTheCpuBackend) {
  std::string Why = cudaAvailability();
  if (!Why.empty())
    GTEST_SKIP() << Why << " (the CUDA kernels built and linked)";
  auto Gpu = createCudaBackend(0);
  auto Cpu = createCpuBackend(1);
  for (bool Training : {true, false}) {
    SCOPED_TRACE(Training ? "training" : "inference");
    std::vector<HostTensor> CpuOut = runPhasesOn(*Cpu, Training);
    std::vector<HostTensor> GpuOut = runPhasesOn(*Gpu, Training);
    for (size_t K = 0; K < CpuOut.size(); ++K)
      for (int64_t E = 0; E < CpuOut[K].size(); ++E)
        EXPECT_NEAR(GpuOut[K].at(E), CpuOut[K].at(E),
                    1e-4 * std::max(1.0, std::fabs(CpuOut[K].at(E))))
            << "tensor " << K << " element " << E;
  }
}

} // namespace
