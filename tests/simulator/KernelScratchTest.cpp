//===- tests/simulator/KernelScratchTest.cpp - One call's scratch ---------===//
//
// kernelScratchBytes on ops built by hand, with the sizes worked out from
// the Scratch buffers of the CUDA kernels (runtime_lib/cuda). The memory
// model's use of them: tests/soap_search/KernelScratchMemoryTest.cpp.
//
//===----------------------------------------------------------------------===//
#include "simulator/KernelScratch.h"
#include "../ir/IrTestUtil.h"

using namespace onnx2soap;
using namespace onnx2soap::simulator;
using namespace onnx2soap::ir::test;
using ir::Interval;
using ir::OpKind;
using ir::TensorRole;

namespace {

DeviceType gpu(double WorkspaceMiB = 64) {
  DeviceType T;
  T.Name = "gpu";
  T.ConvWorkspace = int64_t(WorkspaceMiB * (1 << 20));
  return T;
}

const ir::Op &producer(const ir::Graph &G, ir::TensorId Out) {
  return G.op(G.tensor(Out).Producer);
}

/// x[2,3,16,16] -> Conv(w[8,3,3,3]) with the given pads, stride 1.
ir::TensorId conv(ir::Graph &G, std::initializer_list<int64_t> Pads) {
  ir::TensorId X = G.addTensor("x", f32({2, 3, 16, 16}), TensorRole::Input);
  ir::TensorId W = G.addTensor("w", f32({8, 3, 3, 3}), TensorRole::Parameter);
  return add(G, OpKind::Conv, {X, W},
             attrs({{"kernel_shape", ints({3, 3})},
                    {"strides", ints({1, 1})},
                    {"pads", ints(Pads)},
                    {"dilations", ints({1, 1})},
                    {"group", int64_t(1)}}));
}

TEST(KernelScratch, AConvolutionTakesTheWorkspaceItsDeviceAllows) {
  ir::Graph G;
  ir::TensorId Y = conv(G, {1, 1, 1, 1}); // symmetric: cuDNN pads itself
  const ir::Op &O = producer(G, Y);
  ir::Region Whole = ir::fullRegion(G.tensor(Y).Type.Dims);
  for (bool Backward : {false, true}) {
    EXPECT_EQ(kernelScratchBytes(G, O, Whole, {0, 3}, Backward, gpu()),
              64.0 * (1 << 20));
    EXPECT_EQ(kernelScratchBytes(G, O, Whole, {0, 3}, Backward, gpu(0)), 0);
  }
}

TEST(KernelScratch, AsymmetricPadsOrASplitOverSpaceCopyThePaddedInput) {
  {
    // Pads 0 before, 2 after: 18 rows out of 16 in... the copy cuDNN
    // convolves is [2, 3, 16 + 2, 16 + 2] floats.
    ir::Graph G;
    ir::TensorId Y = conv(G, {0, 0, 2, 2});
    ir::Region Whole = ir::fullRegion(G.tensor(Y).Type.Dims);
    EXPECT_EQ(
        kernelScratchBytes(G, producer(G, Y), Whole, {0, 3}, false, gpu(1)),
        (1 << 20) + 4.0 * 2 * 3 * 18 * 18);
  }
  {
    // Symmetric pads, but rows 8..15 only: that part's padding is one row
    // above (from the input) and one below; the copy is [2, 3, 10, 18].
    ir::Graph G;
    ir::TensorId Y = conv(G, {1, 1, 1, 1});
    ir::Region Rows = {{0, 2}, {0, 8}, {8, 16}, {0, 16}};
    EXPECT_EQ(kernelScratchBytes(G, producer(G, Y), Rows, {0, 3}, true, gpu(0)),
              4.0 * 2 * 3 * 10 * 18);
  }
}

TEST(KernelScratch, MatMulBackwardExpandsABroadcastOperand) {
  ir::Graph G;
  ir::TensorId A = G.addTensor("a", f32({5, 7}), TensorRole::Input);
  ir::TensorId B = G.addTensor("b", f32({4, 7, 6}), TensorRole::Input);
  ir::TensorId W = G.addTensor("w", f32({6, 2}), TensorRole::Parameter);
  ir::TensorId Batched = add(G, OpKind::MatMul, {A, B});  // [4, 5, 6]
  ir::TensorId Weighted = add(G, OpKind::MatMul, {B, W}); // folded
  (void)Weighted;
  ir::Region Whole = ir::fullRegion(G.tensor(Batched).Type.Dims);
  // dA over the 4 batches before the sum: [4, 5, 7] floats.
  EXPECT_EQ(
      kernelScratchBytes(G, producer(G, Batched), Whole, {0, 7}, true, gpu()),
      4.0 * 4 * 5 * 7);
  EXPECT_EQ(
      kernelScratchBytes(G, producer(G, Batched), Whole, {0, 7}, false, gpu()),
      0);
  ir::Region Folded = ir::fullRegion(G.tensor(Weighted).Type.Dims);
  EXPECT_EQ(
      kernelScratchBytes(G, producer(G, Weighted), Folded, {0, 7}, true, gpu()),
      0);
}

TEST(KernelScratch, PoolsNormalizationsAndTheLoss) {
  ir::Graph G;
  ir::TensorId X = G.addTensor("x", f32({2, 4, 8, 8}), TensorRole::Input);
  ir::TensorId Pooled = add(G, OpKind::MaxPool, {X},
                            attrs({{"kernel_shape", ints({2, 2})},
                                   {"strides", ints({2, 2})},
                                   {"pads", ints({0, 0, 0, 0})},
                                   {"dilations", ints({1, 1})},
                                   {"ceil_mode", int64_t(0)}}));
  ir::Region Out = ir::fullRegion(G.tensor(Pooled).Type.Dims); // [2,4,4,4]
  EXPECT_EQ(kernelScratchBytes(G, producer(G, Pooled), Out, {}, false, gpu()),
            0);
  // The argmax of each output, as int64.
  EXPECT_EQ(kernelScratchBytes(G, producer(G, Pooled), Out, {}, true, gpu()),
            8.0 * 2 * 4 * 4 * 4);

  ir::TensorId Scores = G.addTensor("scores", f32({6, 10}), TensorRole::Input);
  ir::TensorId Labels = G.addTensor("labels", i64({6}), TensorRole::Input);
  ir::TensorId Loss = add(G, OpKind::SoftmaxCrossEntropyLoss, {Scores, Labels},
                          attrs({{"reduction", std::string("mean")}}));
  // Per label (all 6: the mean is not split): a float log-sum-exp and an
  // int64 label; three flags.
  for (bool Backward : {false, true})
    EXPECT_EQ(
        kernelScratchBytes(G, producer(G, Loss), {}, {0, 6}, Backward, gpu()),
        6.0 * (4 + 8) + 24);

  ir::TensorId Other =
      G.addTensor("other", f32({2, 4, 4, 4}), TensorRole::Input);
  ir::TensorId Largest = add(G, OpKind::Max, {Pooled, Other});
  EXPECT_EQ(kernelScratchBytes(G, producer(G, Largest), Out, {}, true, gpu()),
            2.0 * 4 * 2 * 4 * 4 * 4);
  EXPECT_EQ(kernelScratchBytes(G, producer(G, Largest), Out, {}, false, gpu()),
            0);
}

TEST(KernelScratch, AnLstmLayerHoldsItsTapeAndOutput) {
  ir::Graph G;
  // Time-major x [S=5, B=3, I=4], hidden 6, one direction.
  ir::TensorId X = G.addTensor("x", f32({5, 3, 4}), TensorRole::Input);
  ir::TensorId W = G.addTensor("w", f32({1, 24, 4}), TensorRole::Parameter);
  ir::TensorId R = G.addTensor("r", f32({1, 24, 6}), TensorRole::Parameter);
  ir::TensorId Y = add(G, OpKind::LSTM, {X, W, R},
                       attrs({{"hidden_size", int64_t(6)},
                              {"direction", std::string("forward")}}));
  ir::Region Out = ir::fullRegion(G.tensor(Y).Type.Dims);
  double SBH = 5 * 3 * 6, BH = 3 * 6;
  // Forward: Y, the gates (4 per unit) and cells of every step, h0 and c0.
  EXPECT_EQ(kernelScratchBytes(G, producer(G, Y), Out, {}, false, gpu()),
            4 * (6 * SBH + 2 * BH));
  EXPECT_EQ(kernelScratchBytes(G, producer(G, Y), Out, {}, true, gpu()),
            4 * (11 * SBH + 9 * BH));
}

} // namespace
