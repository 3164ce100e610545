//===- tests/runtime_lib_cuda/BoxCopyVsCpuTest.cpp - Box copies on the GPU ===//
//
// Backend::copyBox on the CUDA backend against the CPU backend (which
// tests/runtime_lib/BoxCopyTest.cpp checks against a naive reference): the
// same whole buffers, the same strided views into them (ranks 0 to 4,
// element widths 1 to 8, transposed, inner-strided, broadcast and empty
// boxes, dense boxes that take the 2D-copy path), compared byte for byte,
// elements outside the box included. Copies move bytes and an add is one
// IEEE addition per element, so the backends agree exactly. Without a GPU
// the comparisons skip; the errors are checked before any device work.
//
//===----------------------------------------------------------------------===//
#include "../runtime_lib/KernelTestUtil.h"
#include "runtime_lib/Error.h"
#include "runtime_lib/cuda/CudaBackend.h"
#include <functional>
#include <numeric>

using namespace onnx2soap::rt;
using namespace onnx2soap::rt::test;

namespace {

using Ints = std::vector<int64_t>;

/// A view of a box inside a whole buffer of Bytes bytes, as an offset and
/// strides so it can be placed on either backend.
struct Layout {
  size_t Bytes = 0;
  int64_t Offset = 0; // elements
  Ints Strides;
};

struct BoxCase {
  std::string Name;
  DType Type;
  Ints Box;
  Layout To, From;
  bool Add;
};

/// The box inside a buffer with Pad extra elements and Step spacing per
/// dim, the buffer's dims laid out in the order Order.
Layout makeLayout(DType Type, const Ints &Box, const Ints &Pad,
                  const Ints &Step, std::vector<int> Order, std::mt19937 &Rng) {
  int Rank = static_cast<int>(Box.size());
  if (Order.empty()) {
    Order.resize(Rank);
    std::iota(Order.begin(), Order.end(), 0);
  }
  Ints Whole(Rank), Dense(Rank);
  for (int D = 0; D < Rank; ++D)
    Whole[D] = std::max<int64_t>(Box[D], 1) * Step[D] + Pad[D];
  int64_t Stride = 1;
  for (int K = Rank - 1; K >= 0; --K) {
    Dense[Order[K]] = Stride;
    Stride *= Whole[Order[K]];
  }
  Layout L;
  L.Bytes = Stride * dtypeSize(Type);
  L.Strides.resize(Rank);
  for (int D = 0; D < Rank; ++D) {
    int64_t Origin = Pad[D] ? static_cast<int64_t>(Rng() % (Pad[D] + 1)) : 0;
    L.Offset += Origin * Dense[D];
    L.Strides[D] = Dense[D] * Step[D];
  }
  return L;
}

std::vector<BoxCase> boxCases() {
  std::mt19937 Rng(21);
  std::vector<BoxCase> All;
  const DType Types[] = {DType::Float32, DType::Float64, DType::Int64,
                         DType::Float16, DType::UInt8};
  for (int Rank = 0; Rank <= 4; ++Rank)
    for (DType Type : Types)
      for (bool Add : {false, true}) {
        if (Add && Type != DType::Float32 && Type != DType::Float64)
          continue;
        for (int Trial = 0; Trial < 4; ++Trial) {
          Ints Box(Rank), PadTo(Rank), PadFrom(Rank), StepTo(Rank),
              StepFrom(Rank);
          for (int D = 0; D < Rank; ++D) {
            Box[D] = 1 + Rng() % 5;
            // Trial 0: dense, cut along dim 0 only (the 2D-copy path).
            PadTo[D] = Trial == 0 && D > 0 ? 0 : Rng() % 3;
            PadFrom[D] = Trial == 0 && D > 0 ? 0 : Rng() % 3;
            StepTo[D] = Trial == 0 ? 1 : 1 + Rng() % 2;
            StepFrom[D] = Trial == 0 ? 1 : 1 + Rng() % 2;
          }
          std::vector<int> OrderFrom(Rank);
          std::iota(OrderFrom.begin(), OrderFrom.end(), 0);
          if (Trial == 3)
            std::shuffle(OrderFrom.begin(), OrderFrom.end(), Rng);
          All.push_back(
              {std::string(dtypeName(Type)) + " rank " + std::to_string(Rank) +
                   " trial " + std::to_string(Trial) + (Add ? " add" : ""),
               Type, Box, makeLayout(Type, Box, PadTo, StepTo, {}, Rng),
               makeLayout(Type, Box, PadFrom, StepFrom, OrderFrom, Rng), Add});
        }
      }
  for (bool Add : {false, true}) {
    // Large: many blocks of the grid-stride loop.
    Ints Big{6, 130, 70};
    All.push_back(
        {Add ? "large add" : "large copy", DType::Float32, Big,
         makeLayout(DType::Float32, Big, {1, 0, 3}, {1, 1, 1}, {}, Rng),
         makeLayout(DType::Float32, Big, {0, 2, 0}, {1, 1, 2}, {2, 0, 1}, Rng),
         Add});
    // A broadcast source: stride 0 along dim 0.
    BoxCase Broadcast{
        Add ? "broadcast add" : "broadcast copy",
        DType::Float64,
        {4, 6},
        makeLayout(DType::Float64, {4, 6}, {1, 1}, {1, 1}, {}, Rng),
        makeLayout(DType::Float64, {1, 6}, {0, 2}, {1, 1}, {}, Rng),
        Add};
    Broadcast.From.Strides[0] = 0;
    All.push_back(Broadcast);
    Ints Empty{3, 0, 2};
    All.push_back(
        {Add ? "empty add" : "empty copy", DType::Float32, Empty,
         makeLayout(DType::Float32, Empty, {1, 1, 1}, {1, 1, 1}, {}, Rng),
         makeLayout(DType::Float32, Empty, {0, 0, 0}, {1, 1, 1}, {}, Rng),
         Add});
  }
  return All;
}

/// Fills a buffer of Type with finite random values.
std::vector<unsigned char> randomBytes(DType Type, size_t Bytes,
                                       std::mt19937 &Rng) {
  std::vector<unsigned char> Out(Bytes);
  for (unsigned char &B : Out)
    B = static_cast<unsigned char>(Rng() % 256);
  if (Type == DType::Float32 || Type == DType::Float64) {
    HostTensor T(Type, {static_cast<int64_t>(Bytes / dtypeSize(Type))});
    randomize(T, Rng, -8, 8);
    Out = T.Bytes;
  }
  return Out;
}

TensorView viewOf(const BoxCase &C, const Layout &L, void *Base) {
  TensorView V;
  V.Type = C.Type;
  V.Rank = static_cast<int>(C.Box.size());
  for (int D = 0; D < V.Rank; ++D) {
    V.Dims[D] = C.Box[D];
    V.Strides[D] = L.Strides[D];
  }
  V.Data = static_cast<char *>(Base) + L.Offset * dtypeSize(C.Type);
  return V;
}

/// The destination buffer after the box copy of C on B.
std::vector<unsigned char> runBoxOn(Backend &B, const BoxCase &C) {
  std::mt19937 Rng(31);
  std::vector<unsigned char> To = randomBytes(C.Type, C.To.Bytes, Rng),
                             From = randomBytes(C.Type, C.From.Bytes, Rng);
  DeviceBuffer ToBuffer(B, To.size()), FromBuffer(B, From.size());
  B.copyFromHost(ToBuffer.data(), To.data(), To.size());
  B.copyFromHost(FromBuffer.data(), From.data(), From.size());
  B.copyBox(viewOf(C, C.To, ToBuffer.data()),
            viewOf(C, C.From, FromBuffer.data()), C.Add);
  B.synchronize();
  B.copyToHost(To.data(), ToBuffer.data(), To.size());
  return To;
}

TEST(CudaBackend, BoxCopiesMatchTheCpuBackend) {
  std::string Why = cudaAvailability();
  if (!Why.empty())
    GTEST_SKIP() << Why << " (the box copy kernels built and linked)";
  auto Gpu = createCudaBackend(0);
  auto Cpu = createCpuBackend(1);
  for (const BoxCase &C : boxCases()) {
    SCOPED_TRACE(C.Name);
    std::vector<unsigned char> CpuOut = runBoxOn(*Cpu, C),
                               GpuOut = runBoxOn(*Gpu, C);
    ASSERT_EQ(GpuOut.size(), CpuOut.size());
    size_t Differ = 0;
    for (size_t I = 0; I < CpuOut.size(); ++I)
      Differ += GpuOut[I] != CpuOut[I];
    EXPECT_EQ(Differ, 0u) << "bytes differ of " << CpuOut.size();
  }
}

TEST(CudaBackend, BoxCopyErrorsNameTheBoxCopy) {
  std::string Why = cudaAvailability();
  if (!Why.empty())
    GTEST_SKIP() << Why << " (the box copy kernels built and linked)";
  auto Gpu = createCudaBackend(0);
  DeviceBuffer Buffer(*Gpu, 256);
  TensorView F = TensorView::contiguous(DType::Float32, {2, 3}, Buffer.data());
  TensorView L = TensorView::contiguous(DType::Int64, {2, 3}, Buffer.data());
  TensorView Wide =
      TensorView::contiguous(DType::Float32, {2, 4}, Buffer.data());
  const std::pair<std::function<void()>, const char *> Cases[] = {
      {[&] { Gpu->copyBox(F, L, false); },
       "destination has element type f32, source i64"},
      {[&] { Gpu->copyBox(F, Wide, false); },
       "destination dims [2, 3] differ from source dims [2, 4]"},
      {[&] { Gpu->copyBox(L, L, true); }, "cannot add elements of type i64"},
  };
  for (const auto &[Call, Message] : Cases) {
    try {
      Call();
      ADD_FAILURE() << "no error for " << Message;
    } catch (const RuntimeError &E) {
      EXPECT_THAT(E.what(), ::testing::StartsWith("box copy: "));
      EXPECT_THAT(E.what(), ::testing::HasSubstr(Message));
    }
  }
}

} // namespace
