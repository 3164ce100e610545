//===- tests/runtime_lib/BackendTest.cpp - The backend's own services -----===//
//
// Memory, views and attributes, independent of any kernel family.
//
//===----------------------------------------------------------------------===//
#include "KernelTestUtil.h"

using namespace onnx2soap::rt;
using namespace onnx2soap::rt::test;

namespace {

TEST(Backend, CpuMemoryIsZeroedAlignedAndCopies) {
  auto B = createCpuBackend(1);
  EXPECT_STREQ(B->name(), "cpu");
  DeviceBuffer Buffer(*B, 100);
  ASSERT_NE(Buffer.data(), nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(Buffer.data()) % 64, 0u);
  const unsigned char *Bytes = static_cast<unsigned char *>(Buffer.data());
  for (int I = 0; I < 100; ++I)
    ASSERT_EQ(Bytes[I], 0);
  float In[3] = {1, 2, 3}, Out[3] = {};
  B->copyFromHost(Buffer.data(), In, sizeof In);
  B->copyToHost(Out, Buffer.data(), sizeof Out);
  EXPECT_EQ(Out[2], 3.0f);
}

TEST(TensorView, ContiguousStridesAndCounts) {
  float Data[24];
  TensorView V = TensorView::contiguous(DType::Float32, {2, 3, 4}, Data);
  EXPECT_EQ(V.Rank, 3);
  EXPECT_EQ(V.Strides[0], 12);
  EXPECT_EQ(V.Strides[2], 1);
  EXPECT_EQ(V.numElements(), 24);
  EXPECT_EQ(V.byteSize(), 96u);
  EXPECT_TRUE(V.isContiguous());
  V.Strides[0] = 13;
  EXPECT_FALSE(V.isContiguous());
  EXPECT_FALSE(TensorView::absent().present());
}

TEST(OpAttrs, TypedLookupWithDefaults) {
  OpAttrs A;
  A.set("axis", int64_t(2));
  A.set("pads", std::vector<int64_t>{1, 1});
  A.set("alpha", 0.5);
  A.set("mode", std::string("reflect"));
  EXPECT_EQ(A.getInt("axis"), 2);
  EXPECT_EQ(A.getInt("missing", 7), 7);
  EXPECT_EQ(A.getInts("pads").size(), 2u);
  EXPECT_TRUE(A.getInts("missing").empty());
  EXPECT_EQ(A.getFloat("alpha"), 0.5);
  EXPECT_EQ(A.getString("mode"), "reflect");
  EXPECT_EQ(A.getInt("alpha", 3), 3); // wrong type reads as absent
}

TEST(Types, NamesFollowTheOpList) {
  EXPECT_STREQ(opKindName(OpKind::Conv), "Conv");
  EXPECT_STREQ(opKindName(OpKind::SoftmaxCrossEntropyLoss),
               "SoftmaxCrossEntropyLoss");
  EXPECT_STREQ(dtypeName(DType::Int64), "i64");
  EXPECT_EQ(dtypeSize(DType::BFloat16), 2u);
}

} // namespace
