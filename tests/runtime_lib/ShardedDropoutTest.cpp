//===- tests/runtime_lib/ShardedDropoutTest.cpp - Dropout on partitions ---===//
//
// Dropout calls that each compute one partition of the output
// (OpCall::GlobalOffset, GlobalDims) on the CPU backend: put together, the
// partitions' outputs, masks and input gradients must equal the whole
// call's bit for bit, for splits along each dim and a 2 x 2 grid.
//
//===----------------------------------------------------------------------===//
#include "KernelTestUtil.h"
#include "runtime_lib/Error.h"

using namespace onnx2soap::rt;
using namespace onnx2soap::rt::test;

namespace {

using Ints = std::vector<int64_t>;

/// Calls Fn(local index, whole tensor's index) for every element of the box
/// of Dims at Offset in a tensor of WholeDims.
template <typename F>
void forEachInBox(const Ints &WholeDims, const Ints &Offset, const Ints &Dims,
                  F &&Fn) {
  int64_t Count = 1;
  for (int64_t D : Dims)
    Count *= D;
  for (int64_t I = 0; I < Count; ++I) {
    int64_t Rest = I, Global = 0, Stride = 1;
    for (int D = static_cast<int>(Dims.size()) - 1; D >= 0; --D) {
      Global += (Rest % Dims[D] + Offset[D]) * Stride;
      Rest /= Dims[D];
      Stride *= WholeDims[D];
    }
    Fn(I, Global);
  }
}

HostTensor box(const HostTensor &Whole, const Ints &Offset, const Ints &Dims) {
  HostTensor Part(Whole.Type, Dims);
  forEachInBox(Whole.Dims, Offset, Dims,
               [&](int64_t I, int64_t G) { Part.set(I, Whole.at(G)); });
  return Part;
}

void place(HostTensor &Whole, const Ints &Offset, const HostTensor &Part) {
  forEachInBox(Whole.Dims, Offset, Part.Dims,
               [&](int64_t I, int64_t G) { Whole.set(G, Part.at(I)); });
}

OpAttrs dropoutAttrs(double Ratio, int64_t Training) {
  OpAttrs A;
  A.set("ratio", Ratio);
  A.set("training", Training);
  A.set("seed", int64_t(77));
  return A;
}

/// The partitions of Dims cut into Cuts[D] near-equal pieces along each D.
std::vector<std::pair<Ints, Ints>> grid(const Ints &Dims, const Ints &Cuts) {
  std::vector<std::pair<Ints, Ints>> Boxes = {{Ints(), Ints()}};
  for (size_t D = 0; D < Dims.size(); ++D) {
    std::vector<std::pair<Ints, Ints>> Next;
    for (auto &[Offset, Extent] : Boxes)
      for (int64_t K = 0; K < Cuts[D]; ++K) {
        int64_t Begin = Dims[D] * K / Cuts[D],
                End = Dims[D] * (K + 1) / Cuts[D];
        Ints O = Offset, E = Extent;
        O.push_back(Begin);
        E.push_back(End - Begin);
        Next.push_back({O, E});
      }
    Boxes = std::move(Next);
  }
  return Boxes;
}

struct GridCase {
  Ints Dims, Cuts;
};

class ShardedDropout : public ::testing::TestWithParam<GridCase> {};

TEST_P(ShardedDropout, PartitionsMakeUpTheWholeCall) {
  const GridCase P = GetParam();
  auto B = createCpuBackend(1);
  std::mt19937 Rng(5);
  HostTensor X = f32(P.Dims), DY = f32(P.Dims);
  randomize(X, Rng);
  randomize(DY, Rng);
  for (int64_t Training : {1, 0}) {
    SCOPED_TRACE(Training ? "training" : "inference");
    OpAttrs A = dropoutAttrs(0.4, Training);
    HostTensor Y = f32(P.Dims), M(DType::Bool, P.Dims), DX = f32(P.Dims);
    OpCall Whole{OpKind::Dropout,      A, "drop", {X.view()},
                 {Y.view(), M.view()}, 3};
    B->forward(Whole);
    // Without the mask the backward recomputes it, the path that needs the
    // global index.
    OpCall WholeNoMask{OpKind::Dropout, A, "drop", {X.view()}, {Y.view()}, 3};
    B->backward(WholeNoMask, {DY.view()}, {DX.view()});

    HostTensor YAll = f32(P.Dims), MAll(DType::Bool, P.Dims),
               DXAll = f32(P.Dims), DXMaskAll = f32(P.Dims);
    for (auto &[Offset, Extent] : grid(P.Dims, P.Cuts)) {
      HostTensor PX = box(X, Offset, Extent), PDY = box(DY, Offset, Extent);
      HostTensor PY = f32(Extent), PM(DType::Bool, Extent), PDX = f32(Extent),
                 PDXMask = f32(Extent);
      OpCall Part{OpKind::Dropout,        A, "drop", {PX.view()},
                  {PY.view(), PM.view()}, 3, Offset, P.Dims};
      B->forward(Part);
      B->backward(Part, {PDY.view(), TensorView::absent()}, {PDXMask.view()});
      OpCall PartNoMask{OpKind::Dropout, A, "drop", {PX.view()},
                        {PY.view()},     3, Offset, P.Dims};
      B->backward(PartNoMask, {PDY.view()}, {PDX.view()});
      place(YAll, Offset, PY);
      place(MAll, Offset, PM);
      place(DXAll, Offset, PDX);
      place(DXMaskAll, Offset, PDXMask);
    }
    EXPECT_EQ(YAll.Bytes, Y.Bytes);
    EXPECT_EQ(MAll.Bytes, M.Bytes);
    EXPECT_EQ(DXAll.Bytes, DX.Bytes);
    EXPECT_EQ(DXMaskAll.Bytes, DX.Bytes);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Splits, ShardedDropout,
    ::testing::Values(GridCase{{6, 10}, {2, 1}}, GridCase{{6, 10}, {1, 3}},
                      GridCase{{6, 10}, {2, 2}}, GridCase{{5, 7, 9}, {1, 2, 1}},
                      GridCase{{5, 7, 9}, {2, 1, 2}},
                      GridCase{{4, 3, 5, 6}, {2, 1, 1, 3}}));

TEST(ShardedDropoutKernel, WholeTensorOffsetIsTheUnsplitCall) {
  auto B = createCpuBackend(1);
  std::mt19937 Rng(6);
  HostTensor X = f32({8, 9}), Y = f32({8, 9}), YGlobal = f32({8, 9});
  randomize(X, Rng);
  OpAttrs A = dropoutAttrs(0.5, 1);
  OpCall Plain{OpKind::Dropout, A, "drop", {X.view()}, {Y.view()}, 2};
  OpCall Global{OpKind::Dropout,  A, "drop", {X.view()},
                {YGlobal.view()}, 2, {0, 0}, {8, 9}};
  B->forward(Plain);
  B->forward(Global);
  EXPECT_EQ(Y.Bytes, YGlobal.Bytes);
}

TEST(ShardedDropoutKernel, RejectsBadPlacement) {
  auto B = createCpuBackend(1);
  HostTensor X = f32({2, 3}), Y = f32({2, 3});
  OpAttrs A = dropoutAttrs(0.5, 1);
  auto Message = [&](Ints Offset, Ints Dims) {
    OpCall Call{OpKind::Dropout, A, "d1",   {X.view()},
                {Y.view()},      1, Offset, Dims};
    try {
      B->forward(Call);
    } catch (const RuntimeError &E) {
      return std::string(E.what());
    }
    return std::string("no error");
  };
  EXPECT_THAT(Message({0}, {2, 3}),
              ::testing::HasSubstr("op 'd1' (Dropout): the global offset and "
                                   "dims must have the output's rank 2"));
  EXPECT_THAT(Message({0, 1}, {2, 3}),
              ::testing::HasSubstr("dim 1: the output's 3 elements at offset 1 "
                                   "lie outside the whole 3"));
  EXPECT_THAT(
      Message({-1, 0}, {4, 3}),
      ::testing::HasSubstr("dim 0: the output's 2 elements at offset -1"));
}

} // namespace
