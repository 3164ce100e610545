//===- tests/runtime_lib/KernelTypesTest.cpp - The kernel type table -----===//
//
// runtime_lib/KernelTypes.h: every op kind has a row, the CPU backend's
// kernels take exactly the types it lists (KernelTypesCheck.h; the CUDA
// backend's in tests/runtime_lib_cuda/), and its text and markdown.
//
//===----------------------------------------------------------------------===//
#include "../runtime_lib_cuda/KernelTypesCheck.h"

using namespace onnx2soap::rt;
using namespace onnx2soap::rt::test;

namespace {

constexpr unsigned NumKinds = 0
#define OP_KIND(Name) +1
#include "OpKinds.def"
    ;

TEST(KernelTypes, CpuKernelsTakeExactlyTheTablesTypes) {
  auto Cpu = createCpuBackend(1);
  kerneltypes::expectTableTypes(*Cpu);
}

TEST(KernelTypes, EveryKindHasARow) {
  for (unsigned K = 0; K < NumKinds; ++K) {
    OpKind Kind = static_cast<OpKind>(K);
    const KernelTypes &Row = kernelTypes(Kind);
    EXPECT_NE(Row.Forward, 0) << opKindName(Kind);
    EXPECT_EQ(Row.Backward & ~Row.Forward, 0) << opKindName(Kind);
    EXPECT_EQ(Row.OtherInput < 0, Row.Other == 0) << opKindName(Kind);
  }
}

TEST(KernelTypes, TextListsTheTypesInOrder) {
  EXPECT_EQ(typeSetText(typeBit(DType::Float32)), "f32");
  EXPECT_EQ(typeSetText(typeBit(DType::Float32) | typeBit(DType::Float64)),
            "f32 or f64");
  EXPECT_EQ(typeSetText(kernelTypes(OpKind::Relu).Forward),
            "f32, f64, i32 or i64");
  EXPECT_EQ(typeSetText(0), "none");
}

TEST(KernelTypes, MarkdownHasARowPerKind) {
  std::string Text = kernelTypesMarkdown();
  for (unsigned K = 0; K < NumKinds; ++K)
    EXPECT_NE(Text.find(std::string("\n| ") +
                        opKindName(static_cast<OpKind>(K)) + " | "),
              std::string::npos)
        << opKindName(static_cast<OpKind>(K));
}

} // namespace
