//===- tests/runtime_lib_cuda/ElementwiseCases.cpp - More cases -----------===//
//
// KernelCases.h's elementwise group: the unary kinds, Cast, Dropout,
// broadcasting arithmetic and its reductions, comparisons, Where and
// SoftmaxCrossEntropyLoss.
//
//===----------------------------------------------------------------------===//
#include "KernelCases.h"

namespace onnx2soap::rt::test {

/// Elementwise kinds and the loss.
void elementwiseCases(std::mt19937 &Rng, std::vector<Case> &All) {
  // Elementwise, loss: the unary kinds, Cast, Dropout (the mask must match
  // the CPU's bit for bit), broadcasting arithmetic and its deterministic
  // reductions (per-thread and per-block paths), Max/Min ties, Where and
  // SoftmaxCrossEntropyLoss.
  RandomF32 Random{Rng};
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
  OpAttrs Relu6;
  Relu6.set("min", 0.0);
  Relu6.set("max", 6.0);
  UnaryWith("clip_relu6", OpKind::Clip, Relu6, -2, 8);
  OpAttrs Ramp;
  Ramp.set("alpha", 0.2);
  Ramp.set("beta", 0.5);
  UnaryWith("hard_sigmoid", OpKind::HardSigmoid, Ramp, -4, 4);
  UnaryWith("hard_swish", OpKind::HardSwish, {}, -5, 5);
  UnaryWith("elu", OpKind::Elu, Float("alpha", 1.0), -2, 2);
  UnaryWith("softplus", OpKind::Softplus, {}, -3, 25);
  OpAttrs IndexBounds;
  IndexBounds.set("min", int64_t(0));
  IndexBounds.set("max", int64_t(4));
  All.push_back({"clip_i64",
                 OpKind::Clip,
                 IndexBounds,
                 {i64({5}, {-3, 0, 4, -1, 9})},
                 {i64({5})},
                 {}});
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

} // namespace onnx2soap::rt::test
