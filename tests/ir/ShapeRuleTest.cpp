//===- tests/ir/ShapeRuleTest.cpp - Shape rules of the op kinds -----------===//
//
// Each row: an op kind, attributes, input types, and the expected output
// shape or the expected error text.
//
//===----------------------------------------------------------------------===//
#include "IrTestUtil.h"

using namespace onnx2soap::ir;
using namespace onnx2soap::ir::test;

namespace {

struct Row {
  const char *Name;
  OpKind Kind;
  Attributes Attrs;
  std::vector<TensorType> Inputs;
  Shape Expected;         // output 0 when Error is empty
  const char *Error = ""; // substring of the expected error
};

std::vector<Row> rows() {
  auto Window = [](IntList K, IntList S, IntList P, IntList D = {}) {
    if (D.empty())
      D.assign(K.size(), 1);
    return attrs({{"kernel_shape", K},
                  {"strides", S},
                  {"pads", P},
                  {"dilations", D},
                  {"group", int64_t(1)}});
  };
  return {
      {"conv_same",
       OpKind::Conv,
       Window({3, 3}, {1, 1}, {1, 1, 1, 1}),
       {f32({8, 3, 32, 32}), f32({16, 3, 3, 3})},
       {8, 16, 32, 32}},
      {"conv_stride_dilation",
       OpKind::Conv,
       Window({3, 3}, {2, 2}, {0, 0, 0, 0}, {2, 2}),
       {f32({1, 1, 7, 7}), f32({4, 1, 3, 3})},
       {1, 4, 2, 2}},
      {"conv_1d",
       OpKind::Conv,
       Window({5}, {1}, {2, 2}),
       {f32({2, 4, 10}), f32({6, 4, 5}), f32({6})},
       {2, 6, 10}},
      {"conv_bad_channels",
       OpKind::Conv,
       Window({3, 3}, {1, 1}, {0, 0, 0, 0}),
       {f32({1, 4, 8, 8}), f32({2, 3, 3, 3})},
       {},
       "input channels 4"},
      {"conv_bad_bias",
       OpKind::Conv,
       Window({1, 1}, {1, 1}, {0, 0, 0, 0}),
       {f32({1, 3, 8, 8}), f32({2, 3, 1, 1}), f32({3})},
       {},
       "bias [3]"},
      {"maxpool_ceil",
       OpKind::MaxPool,
       attrs({{"kernel_shape", ints({3, 3})},
              {"strides", ints({2, 2})},
              {"pads", ints({0, 0, 0, 0})},
              {"dilations", ints({1, 1})},
              {"ceil_mode", int64_t(1)}}),
       {f32({1, 1, 4, 4})},
       {1, 1, 2, 2}},
      {"maxpool_ceil_drops_window_in_padding",
       OpKind::MaxPool,
       attrs({{"kernel_shape", ints({2})},
              {"strides", ints({2})},
              {"pads", ints({1, 1})},
              {"dilations", ints({1})},
              {"ceil_mode", int64_t(1)}}),
       {f32({1, 1, 5})},
       {1, 1, 3}},
      {"global_pool",
       OpKind::GlobalAveragePool,
       {},
       {f32({2, 5, 7, 9})},
       {2, 5, 1, 1}},
      {"gemm_transB",
       OpKind::Gemm,
       attrs({{"transB", int64_t(1)}}),
       {f32({8, 64}), f32({10, 64}), f32({10})},
       {8, 10}},
      {"gemm_mismatch",
       OpKind::Gemm,
       {},
       {f32({8, 64}), f32({10, 64})},
       {},
       "inner dims differ"},
      {"matmul_batched_broadcast",
       OpKind::MatMul,
       {},
       {f32({2, 1, 4, 8}), f32({3, 8, 5})},
       {2, 3, 4, 5}},
      {"matmul_vector", OpKind::MatMul, {}, {f32({8}), f32({8, 5})}, {5}},
      {"matmul_vector_right", OpKind::MatMul, {}, {f32({3, 8}), f32({8})}, {3}},
      {"add_broadcast",
       OpKind::Add,
       {},
       {f32({4, 1, 3}), f32({5, 1})},
       {4, 5, 3}},
      {"add_incompatible",
       OpKind::Add,
       {},
       {f32({4, 3}), f32({5})},
       {},
       "do not broadcast"},
      {"equal_gives_bool", OpKind::Equal, {}, {i64({3}), i64({1})}, {3}},
      {"reshape",
       OpKind::Reshape,
       attrs({{"shape", ints({6, 4})}}),
       {f32({2, 3, 4})},
       {6, 4}},
      {"reshape_count",
       OpKind::Reshape,
       attrs({{"shape", ints({5, 5})}}),
       {f32({2, 3, 4})},
       {},
       "cannot reshape"},
      {"transpose",
       OpKind::Transpose,
       attrs({{"perm", ints({0, 2, 1})}}),
       {f32({2, 3, 4})},
       {2, 4, 3}},
      {"transpose_not_perm",
       OpKind::Transpose,
       attrs({{"perm", ints({0, 0, 1})}}),
       {f32({2, 3, 4})},
       {},
       "not a permutation"},
      {"concat",
       OpKind::Concat,
       attrs({{"axis", int64_t(1)}}),
       {f32({2, 3}), f32({2, 5})},
       {2, 8}},
      {"concat_mismatch",
       OpKind::Concat,
       attrs({{"axis", int64_t(1)}}),
       {f32({2, 3}), f32({3, 5})},
       {},
       "does not match"},
      {"slice_negative_step",
       OpKind::Slice,
       attrs({{"starts", ints({9})},
              {"ends", ints({-1})},
              {"steps", ints({-3})}}),
       {f32({10})},
       {4}},
      {"pad_crop",
       OpKind::Pad,
       attrs(
           {{"pads", ints({1, -1, 2, 0})}, {"mode", std::string("constant")}}),
       {f32({3, 4})},
       {6, 3}},
      {"expand",
       OpKind::Expand,
       attrs({{"shape", ints({2, 1, 6})}}),
       {f32({3, 1})},
       {2, 3, 6}},
      {"gather_embedding",
       OpKind::Gather,
       attrs({{"axis", int64_t(0)}}),
       {f32({100, 16}), i64({4, 7})},
       {4, 7, 16}},
      {"split",
       OpKind::Split,
       attrs({{"axis", int64_t(1)}, {"split", ints({2, 3})}}),
       {f32({4, 5})},
       {4, 2}},
      {"split_sum",
       OpKind::Split,
       attrs({{"axis", int64_t(1)}, {"split", ints({2, 2})}}),
       {f32({4, 5})},
       {},
       "do not add up"},
      // Sizes from a file past 2^63 once wrapped (signed overflow).
      {"split_sum_overflows",
       OpKind::Split,
       attrs({{"axis", int64_t(0)}, {"split", ints({INT64_MAX, INT64_MAX})}}),
       {f32({4})},
       {},
       "add up past 2^63"},
      {"pad_overflows",
       OpKind::Pad,
       attrs(
           {{"pads", ints({INT64_MAX, 1})}, {"mode", std::string("constant")}}),
       {f32({3})},
       {},
       "past 2^63"},
      {"slice_step_min",
       OpKind::Slice,
       attrs({{"starts", ints({0})},
              {"ends", ints({1})},
              {"steps", ints({INT64_MIN})}}),
       {f32({3})},
       {},
       "slice step of dim 0 is -9223372036854775808"},
      {"layernorm",
       OpKind::LayerNorm,
       attrs({{"axis", int64_t(2)}, {"epsilon", 1e-5}}),
       {f32({2, 7, 16}), f32({16}), f32({16})},
       {2, 7, 16}},
      {"reduce_keepdims",
       OpKind::ReduceMean,
       attrs({{"axes", ints({1, 2})}, {"keepdims", int64_t(1)}}),
       {f32({2, 3, 4})},
       {2, 1, 1}},
      {"reduce_drop",
       OpKind::ReduceSum,
       attrs({{"axes", ints({0})}, {"keepdims", int64_t(0)}}),
       {f32({2, 3, 4})},
       {3, 4}},
      {"lstm_bidirectional",
       OpKind::LSTM,
       attrs({{"hidden_size", int64_t(8)},
              {"direction", std::string("bidirectional")}}),
       {f32({5, 3, 4}), f32({2, 32, 4}), f32({2, 32, 8}), f32({2, 64})},
       {5, 2, 3, 8}},
      {"lstm_bad_weight",
       OpKind::LSTM,
       attrs({{"hidden_size", int64_t(8)}}),
       {f32({5, 3, 4}), f32({1, 24, 4}), f32({1, 32, 8})},
       {},
       "W is"},
      {"gru_batch_first",
       OpKind::GRU,
       attrs({{"hidden_size", int64_t(8)}, {"layout", int64_t(1)}}),
       {f32({3, 5, 4}), f32({1, 24, 4}), f32({1, 24, 8})},
       {3, 5, 1, 8}},
      {"cross_entropy_mean",
       OpKind::SoftmaxCrossEntropyLoss,
       attrs({{"reduction", std::string("mean")}}),
       {f32({8, 10}), i64({8})},
       {}},
      {"cross_entropy_labels",
       OpKind::SoftmaxCrossEntropyLoss,
       {},
       {f32({8, 10}), i64({8, 1})},
       {},
       "labels [8,1]"},
  };
}

class ShapeRule : public ::testing::TestWithParam<Row> {};

TEST_P(ShapeRule, InfersOrRejects) {
  const Row &R = GetParam();
  std::vector<const TensorType *> In;
  for (const TensorType &T : R.Inputs)
    In.push_back(&T);
  auto Out = opKindInfo(R.Kind).InferTypes(R.Attrs, In);
  if (*R.Error) {
    ASSERT_FALSE(static_cast<bool>(Out)) << "expected an error";
    EXPECT_THAT(llvm::toString(Out.takeError()), ::testing::HasSubstr(R.Error));
    return;
  }
  ASSERT_TRUE(static_cast<bool>(Out)) << llvm::toString(Out.takeError());
  EXPECT_EQ(formatShape((*Out)[0].Dims), formatShape(R.Expected));
}

INSTANTIATE_TEST_SUITE_P(Kinds, ShapeRule, ::testing::ValuesIn(rows()),
                         [](const auto &Info) { return Info.param.Name; });

TEST(ShapeRule, CrossEntropyNoneKeepsSamples) {
  TensorType Scores = f32({4, 10, 3}), Labels = i64({4, 3});
  std::vector<const TensorType *> In{&Scores, &Labels};
  auto Out = opKindInfo(OpKind::SoftmaxCrossEntropyLoss)
                 .InferTypes(attrs({{"reduction", std::string("none")}}), In);
  ASSERT_TRUE(static_cast<bool>(Out));
  EXPECT_EQ(formatShape((*Out)[0].Dims), "[4,3]");
  EXPECT_EQ(formatShape((*Out)[1].Dims), "[4,10,3]");
}

TEST(ShapeRule, DropoutHasBoolMask) {
  TensorType X = f32({2, 3});
  std::vector<const TensorType *> In{&X};
  auto Out =
      opKindInfo(OpKind::Dropout).InferTypes(attrs({{"ratio", 0.1}}), In);
  ASSERT_TRUE(static_cast<bool>(Out));
  ASSERT_EQ(Out->size(), 2u);
  EXPECT_EQ((*Out)[1].Type, DType::Bool);
}

TEST(OpKindRegistry, EveryKindIsCompleteAndNamed) {
  for (unsigned I = 0; I < NumOpKinds; ++I) {
    OpKind Kind = static_cast<OpKind>(I);
    const OpKindInfo &Info = opKindInfo(Kind);
    EXPECT_EQ(Info.Kind, Kind) << opKindName(Kind).str();
    EXPECT_LE(Info.MinInputs, Info.MaxInputs) << opKindName(Kind).str();
    EXPECT_EQ(parseOpKind(opKindName(Kind)), Kind);
  }
  EXPECT_FALSE(parseOpKind("NoSuchOp").has_value());
}

} // namespace
