//===- tests/onnx_import/OpTableTest.cpp - The ONNX op table and its docs -===//
//
// The table must stay sorted (lookups binary-search it), every IR kind it
// names must exist, and docs/onnx-support.md must be what the table says.
//
//===----------------------------------------------------------------------===//
#include "onnx_import/OpTable.h"
#include "onnx_import/ConstTensor.h"
#include "onnx_import/Evaluate.h"
#include "runtime_lib/KernelTypes.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/MemoryBuffer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include <limits>
#include <onnx/defs/schema.h>

using namespace onnx2soap;
using namespace onnx2soap::onnx_import;

namespace {

TEST(OpTable, SortedAndConsistent) {
  llvm::ArrayRef<OnnxOp> Table = onnxOpTable();
  ASSERT_FALSE(Table.empty());
  for (size_t I = 1; I < Table.size(); ++I)
    EXPECT_LE(llvm::StringRef(Table[I - 1].OpType),
              llvm::StringRef(Table[I].OpType))
        << Table[I].OpType;
  for (const OnnxOp &Op : Table) {
    EXPECT_LE(MinOpset, Op.FirstOpset) << Op.OpType;
    EXPECT_LE(Op.FirstOpset, Op.LastOpset) << Op.OpType;
    EXPECT_LE(Op.LastOpset, MaxOpset) << Op.OpType;
    EXPECT_NE(Op.Convert, nullptr) << Op.OpType;
    // One IR kind, or the kinds a composition is made of, ", "-separated.
    llvm::SmallVector<llvm::StringRef, 4> Kinds;
    if (*Op.Becomes)
      llvm::StringRef(Op.Becomes).split(Kinds, ", ");
    for (llvm::StringRef Kind : Kinds)
      EXPECT_TRUE(ir::parseOpKind(Kind).has_value()) << Op.Becomes;
  }
}

// libonnx 1.12 knows the operator schemas up to opset 17: our required
// input counts must agree with them.
TEST(OpTable, RequiredInputsMatchOnnxSchemas) {
  for (const OnnxOp &Op : onnxOpTable()) {
    if (Op.FirstOpset > 17)
      continue;
    for (int64_t Opset = Op.FirstOpset;
         Opset <= std::min<int64_t>(Op.LastOpset, 17); ++Opset) {
      const onnx::OpSchema *Schema =
          onnx::OpSchemaRegistry::Schema(Op.OpType, static_cast<int>(Opset));
      ASSERT_NE(Schema, nullptr) << Op.OpType << " opset " << Opset;
      EXPECT_EQ(static_cast<int>(Op.MinInputs), Schema->min_input())
          << Op.OpType << " opset " << Opset;
      // The row's maximum is the largest of its opsets' (Pad's axes input
      // came in 18).
      EXPECT_GE(static_cast<int>(Op.MaxInputs), Schema->max_input())
          << Op.OpType << " opset " << Opset;
    }
  }
}

// Every row's most inputs is one of its opsets' (and so, with the test
// above, the largest).
TEST(OpTable, MaxInputsMatchAnOnnxSchema) {
  for (const OnnxOp &Op : onnxOpTable()) {
    if (Op.FirstOpset > 17)
      continue;
    bool Matched = false;
    for (int64_t Opset = Op.FirstOpset;
         Opset <= std::min<int64_t>(Op.LastOpset, 17); ++Opset)
      if (const onnx::OpSchema *Schema = onnx::OpSchemaRegistry::Schema(
              Op.OpType, static_cast<int>(Opset)))
        Matched |= static_cast<int>(Op.MaxInputs) == Schema->max_input();
    // Pad's axes and those of the Reduce ops but ReduceSum came in 18, past
    // what libonnx 1.12 knows.
    static const llvm::StringRef Later[] = {
        "Pad",        "ReduceL1",  "ReduceL2",   "ReduceLogSumExp", "ReduceMax",
        "ReduceMean", "ReduceMin", "ReduceProd", "ReduceSumSquare"};
    bool AxesIn18 = llvm::is_contained(Later, llvm::StringRef(Op.OpType));
    EXPECT_TRUE(Matched || AxesIn18) << Op.OpType;
  }
}

TEST(OpTable, LookupHonoursOpsetRanges) {
  EXPECT_NE(findOnnxOp("Conv", 13), nullptr);
  EXPECT_NE(findOnnxOp("Conv", 21), nullptr);
  EXPECT_EQ(findOnnxOp("Conv", 12), nullptr);
  EXPECT_EQ(findOnnxOp("LayerNormalization", 16), nullptr);
  EXPECT_NE(findOnnxOp("LayerNormalization", 17), nullptr);
  EXPECT_EQ(findOnnxOp("Gelu", 19), nullptr);
  EXPECT_NE(findOnnxOp("Gelu", 20), nullptr);
  EXPECT_EQ(findOnnxOp("NonMaxSuppression", 17), nullptr);
}

TEST(OpTable, DocsAreCurrent) {
  auto Docs =
      llvm::MemoryBuffer::getFile(ONNX2SOAP_SOURCE_DIR "/docs/onnx-support.md");
  ASSERT_TRUE(static_cast<bool>(Docs));
  EXPECT_EQ((*Docs)->getBuffer().str(),
            onnxSupportMarkdown() + rt::kernelTypesMarkdown())
      << "run `make docs` to regenerate docs/onnx-support.md";
}

TEST(ConstTensor, HalfConversionRoundsToNearestEven) {
  EXPECT_EQ(floatToHalf(1.0f), 0x3c00);
  EXPECT_EQ(floatToHalf(-2.0f), 0xc000);
  EXPECT_EQ(floatToHalf(65504.0f), 0x7bff);
  EXPECT_EQ(floatToHalf(1e6f), 0x7c00); // overflow to infinity
  EXPECT_EQ(floatToHalf(5.960464477539063e-08f), 0x0001); // smallest subnormal
  EXPECT_EQ(floatToHalf(1.0f + 1.0f / 2048), 0x3c00);     // tie to even
  EXPECT_EQ(floatToHalf(1.0f + 3.0f / 2048), 0x3c02);     // tie to even, up
  for (uint16_t Bits : {0x0000, 0x3555, 0x7bff, 0x0001, 0x83ff, 0xfc00})
    EXPECT_EQ(floatToHalf(halfToFloat(Bits)), Bits) << Bits;
}

// Floats to integers truncate toward zero and saturate, NaN giving 0, as
// the kernels' Cast does: a folded Cast of -1 to uint8 gave 255 where the
// program computes 0. Integers to narrower integers wrap, as in C.
TEST(ConstTensor, CastTruncatesAndSaturatesLikeTheKernels) {
  ConstTensor T;
  T.Type = ir::DType::Float32;
  T.Dims = {6};
  T.Floats = {-1.7, 2.9, 300.0, 0.0, -300.0, NAN};
  ConstTensor I = T.cast(ir::DType::Int8);
  EXPECT_THAT(I.Ints, ::testing::ElementsAre(-1, 2, 127, 0, -128, 0));
  ConstTensor U = T.cast(ir::DType::UInt8);
  EXPECT_THAT(U.Ints, ::testing::ElementsAre(0, 2, 255, 0, 0, 0));
  ConstTensor B = T.cast(ir::DType::Bool);
  EXPECT_THAT(B.Ints, ::testing::ElementsAre(1, 1, 1, 0, 1, 1));
  std::vector<char> Bytes = I.toBytes();
  ASSERT_EQ(Bytes.size(), 6u);
  EXPECT_EQ(static_cast<int8_t>(Bytes[2]), 127);
  T.Floats = {1e30, -1e30, 3e9, -5.5, 1e20, 9.3e18};
  ConstTensor L = T.cast(ir::DType::Int64);
  EXPECT_THAT(L.Ints, ::testing::ElementsAre(INT64_MAX, INT64_MIN, 3000000000,
                                             -5, INT64_MAX, INT64_MAX));
  ConstTensor W = T.cast(ir::DType::UInt32);
  EXPECT_THAT(W.Ints, ::testing::ElementsAre(4294967295, 0, 3000000000, 0,
                                             4294967295, 4294967295));
  ConstTensor Wide;
  Wide.Type = ir::DType::Int64;
  Wide.Dims = {2};
  Wide.Ints = {300, -1};
  EXPECT_THAT(Wide.cast(ir::DType::UInt8).Ints,
              ::testing::ElementsAre(44, 255));
}

// Folded integer Pow is the product modulo 2^64 whatever the exponent: it
// stopped after 64 products, so (-1)^65 came out 1 and 3^100 wrong.
TEST(ConstTensor, IntegerPowFoldsModulo2To64) {
  ConstTensor Base, Exponent;
  Base.Type = Exponent.Type = ir::DType::Int64;
  Base.Dims = Exponent.Dims = {4};
  Base.Ints = {3, -1, 2, -7};
  Exponent.Ints = {100, 65, 70, 2};
  auto Out = evaluate(ir::OpKind::Pow, {}, {&Base, &Exponent},
                      {ir::TensorType{ir::DType::Int64, {4}}});
  ASSERT_TRUE(Out.has_value());
  ASSERT_EQ(Out->size(), 1u);
  EXPECT_THAT((*Out)[0].Ints,
              ::testing::ElementsAre(-2984622845537545263LL, -1, 0, 49));
}

// Folded Neg and Abs of the most negative integer wrap to it, as the
// kernels do (it was signed overflow).
TEST(ConstTensor, NegAndAbsOfTheMostNegativeIntegerWrap) {
  ConstTensor X;
  X.Type = ir::DType::Int64;
  X.Dims = {2};
  X.Ints = {std::numeric_limits<int64_t>::min(), -5};
  for (ir::OpKind Kind : {ir::OpKind::Neg, ir::OpKind::Abs}) {
    auto Out =
        evaluate(Kind, {}, {&X}, {ir::TensorType{ir::DType::Int64, {2}}});
    ASSERT_TRUE(Out.has_value());
    EXPECT_THAT((*Out)[0].Ints,
                ::testing::ElementsAre(std::numeric_limits<int64_t>::min(), 5));
  }
}

} // namespace
