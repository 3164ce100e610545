//===- tests/runtime_lib/BoxCopyTest.cpp - Backend::copyBox on the CPU ----===//
//
// Copies and adds between strided sub-boxes of larger buffers (ranks 0 to 4,
// every element width, transposed and inner-strided views, empty boxes)
// against a naive per-element reference on copies of the whole buffers, so
// elements outside the box must stay untouched. Large boxes run on several
// threads and must match the reference bit for bit. Bad operands fail with
// "box copy: ..." messages, a table of them. Timing copies (the profile's
// table) gives one median per size, each run preceded by the caller's hook.
//
//===----------------------------------------------------------------------===//
#include "KernelTestUtil.h"
#include "runtime_lib/CopyTiming.h"
#include "runtime_lib/Error.h"
#include <algorithm>
#include <numeric>

using namespace onnx2soap::rt;
using namespace onnx2soap::rt::test;

namespace {

using Ints = std::vector<int64_t>;

/// One side of a box copy: a whole buffer and a view of the box inside it.
struct Side {
  std::vector<unsigned char> Bytes;
  TensorView View;
};

/// A buffer holding a box of dims Box: each box dim D has Pad[D] extra
/// elements around it and Step[D] spacing, and the buffer's dims are laid
/// out in the order Order (Order[0] outermost), so the view may be
/// transposed, inner-strided and offset.
Side makeSide(DType Type, const Ints &Box, const Ints &Pad, const Ints &Step,
              const std::vector<int> &Order, std::mt19937 &Rng) {
  int Rank = static_cast<int>(Box.size());
  Ints Whole(Rank), Origin(Rank);
  for (int D = 0; D < Rank; ++D) {
    Whole[D] = std::max<int64_t>(Box[D], 1) * Step[D] + Pad[D];
    Origin[D] = Pad[D] ? static_cast<int64_t>(Rng() % (Pad[D] + 1)) : 0;
  }
  Ints Dense(Rank);
  int64_t Stride = 1;
  for (int K = Rank - 1; K >= 0; --K) {
    Dense[Order[K]] = Stride;
    Stride *= Whole[Order[K]];
  }
  Side S;
  S.Bytes.resize(Stride * dtypeSize(Type));
  std::uniform_int_distribution<int> Byte(0, 255);
  for (unsigned char &B : S.Bytes)
    B = static_cast<unsigned char>(Byte(Rng));
  if (Type == DType::Float32 || Type == DType::Float64 || Type == DType::Bool) {
    // Finite floats (adds must compare bit for bit), valid bools.
    HostTensor Values(Type, {Stride});
    randomize(Values, Rng, -8, 8);
    if (Type == DType::Bool)
      for (int64_t I = 0; I < Stride; ++I)
        Values.set(I, Rng() % 2);
    S.Bytes = Values.Bytes;
  }
  S.View.Type = Type;
  S.View.Rank = Rank;
  int64_t Offset = 0;
  for (int D = 0; D < Rank; ++D) {
    S.View.Dims[D] = Box[D];
    S.View.Strides[D] = Dense[D] * Step[D];
    Offset += Origin[D] * Dense[D];
  }
  S.View.Data = S.Bytes.data() + Offset * dtypeSize(Type);
  return S;
}

/// The reference: element by element through the coordinates.
void naiveCopyBox(const TensorView &To, const TensorView &From, bool Add) {
  int64_t Count = To.numElements();
  size_t Size = dtypeSize(To.Type);
  for (int64_t I = 0; I < Count; ++I) {
    int64_t Rest = I, ToOffset = 0, FromOffset = 0;
    for (int D = To.Rank - 1; D >= 0; --D) {
      int64_t Index = Rest % To.Dims[D];
      Rest /= To.Dims[D];
      ToOffset += Index * To.Strides[D];
      FromOffset += Index * From.Strides[D];
    }
    char *Out = static_cast<char *>(To.Data) + ToOffset * Size;
    const char *In = static_cast<const char *>(From.Data) + FromOffset * Size;
    if (!Add)
      std::memcpy(Out, In, Size);
    else if (To.Type == DType::Float32)
      *reinterpret_cast<float *>(Out) += *reinterpret_cast<const float *>(In);
    else
      *reinterpret_cast<double *>(Out) += *reinterpret_cast<const double *>(In);
  }
}

/// Runs one box copy on B and the reference on copies of the buffers and
/// expects the whole destination buffers to be equal byte for byte.
void expectMatchesReference(Backend &B, Side To, const Side &From, bool Add) {
  Side Expected = To;
  Expected.View.Data =
      Expected.Bytes.data() +
      (static_cast<unsigned char *>(To.View.Data) - To.Bytes.data());
  naiveCopyBox(Expected.View, From.View, Add);
  B.copyBox(To.View, From.View, Add);
  ASSERT_EQ(To.Bytes.size(), Expected.Bytes.size());
  for (size_t I = 0; I < To.Bytes.size(); ++I)
    ASSERT_EQ(To.Bytes[I], Expected.Bytes[I]) << "byte " << I;
}

std::vector<int> identityOrder(int Rank) {
  std::vector<int> Order(Rank);
  std::iota(Order.begin(), Order.end(), 0);
  return Order;
}

TEST(BoxCopy, RandomStridedBoxesMatchTheReference) {
  auto B = createCpuBackend(1);
  std::mt19937 Rng(5);
  const DType Types[] = {DType::Float32, DType::Float64, DType::Int64,
                         DType::Int32,   DType::Float16, DType::UInt8,
                         DType::Bool};
  for (int Rank = 0; Rank <= 4; ++Rank)
    for (DType Type : Types)
      for (bool Add : {false, true}) {
        if (Add && Type != DType::Float32 && Type != DType::Float64)
          continue;
        for (int Trial = 0; Trial < 12; ++Trial) {
          Ints Box(Rank), PadTo(Rank), PadFrom(Rank), StepTo(Rank),
              StepFrom(Rank);
          for (int D = 0; D < Rank; ++D) {
            Box[D] = 1 + Rng() % 4;
            PadTo[D] = Rng() % 3;
            PadFrom[D] = Rng() % 3;
            // Trial 0: dense box cut along the outer dims only.
            StepTo[D] = Trial == 0 ? 1 : 1 + Rng() % 2;
            StepFrom[D] = Trial == 0 ? 1 : 1 + Rng() % 2;
          }
          if (Trial == 0)
            for (int D = 1; D < Rank; ++D)
              PadTo[D] = PadFrom[D] = 0;
          std::vector<int> OrderTo = identityOrder(Rank),
                           OrderFrom = identityOrder(Rank);
          if (Trial % 3 == 2) // a transposed source
            std::shuffle(OrderFrom.begin(), OrderFrom.end(), Rng);
          Side From = makeSide(Type, Box, PadFrom, StepFrom, OrderFrom, Rng);
          Side To = makeSide(Type, Box, PadTo, StepTo, OrderTo, Rng);
          SCOPED_TRACE(std::string(dtypeName(Type)) + " rank " +
                       std::to_string(Rank) + " trial " +
                       std::to_string(Trial) + (Add ? " add" : " copy"));
          expectMatchesReference(*B, std::move(To), From, Add);
        }
      }
}

TEST(BoxCopy, InnerStridedAndBroadcastSources) {
  auto B = createCpuBackend(1);
  std::mt19937 Rng(9);
  for (bool Add : {false, true}) {
    // Every other element of the inner dim, both sides.
    Side From = makeSide(DType::Float32, {3, 5}, {1, 0}, {1, 2}, {0, 1}, Rng);
    Side To = makeSide(DType::Float32, {3, 5}, {0, 2}, {2, 3}, {0, 1}, Rng);
    expectMatchesReference(*B, std::move(To), From, Add);
    // A source with stride 0 (one row repeated).
    Side Row = makeSide(DType::Float64, {1, 6}, {0, 0}, {1, 1}, {0, 1}, Rng);
    Row.View.Dims[0] = 4;
    Row.View.Strides[0] = 0;
    Side Dest = makeSide(DType::Float64, {4, 6}, {1, 1}, {1, 1}, {0, 1}, Rng);
    expectMatchesReference(*B, std::move(Dest), Row, Add);
  }
}

TEST(BoxCopy, LargeBoxesOnThreadsMatchTheReference) {
  // Above the parallel grain: outer rows split among threads, and a single
  // long dense row split along itself.
  auto B = createCpuBackend(4);
  std::mt19937 Rng(13);
  for (bool Add : {false, true}) {
    SCOPED_TRACE(Add ? "add" : "copy");
    Side From =
        makeSide(DType::Float32, {300, 257}, {3, 5}, {1, 1}, {0, 1}, Rng);
    Side To = makeSide(DType::Float32, {300, 257}, {1, 0}, {1, 1}, {0, 1}, Rng);
    expectMatchesReference(*B, std::move(To), From, Add);
    Side Strided = makeSide(DType::Float64, {7, 90, 70}, {0, 1, 0}, {1, 1, 2},
                            {2, 0, 1}, Rng);
    Side Dest = makeSide(DType::Float64, {7, 90, 70}, {2, 0, 0}, {1, 1, 1},
                         {0, 1, 2}, Rng);
    expectMatchesReference(*B, std::move(Dest), Strided, Add);
    Side Long =
        makeSide(DType::Float32, {1, 100000}, {0, 0}, {1, 1}, {0, 1}, Rng);
    Side LongTo =
        makeSide(DType::Float32, {1, 100000}, {0, 0}, {1, 1}, {0, 1}, Rng);
    expectMatchesReference(*B, std::move(LongTo), Long, Add);
  }
}

TEST(BoxCopy, EmptyBoxesAreNoOps) {
  auto B = createCpuBackend(1);
  std::mt19937 Rng(17);
  for (bool Add : {false, true}) {
    Side From = makeSide(DType::Float32, {3, 0, 2}, {0, 0, 0}, {1, 1, 1},
                         {0, 1, 2}, Rng);
    Side To = makeSide(DType::Float32, {3, 0, 2}, {1, 1, 1}, {1, 1, 1},
                       {0, 1, 2}, Rng);
    expectMatchesReference(*B, std::move(To), From, Add);
  }
  TensorView Nothing = TensorView::contiguous(DType::Int64, {0, 4}, nullptr);
  B->copyBox(Nothing, Nothing, false);
}

TEST(BoxCopy, BadOperandsFailNamingTheProblem) {
  auto B = createCpuBackend(1);
  std::vector<float> F(24);
  std::vector<double> D(24);
  std::vector<int64_t> L(24);
  auto View = [](DType Type, Ints Dims, void *Data) {
    return TensorView::contiguous(Type, Dims, Data);
  };
  TensorView Good = View(DType::Float32, {2, 3}, F.data());
  struct Bad {
    const char *Name;
    TensorView To, From;
    bool Add;
    const char *Message;
  };
  TensorView NegativeStride = Good, ZeroStride = Good, NegativeDim = Good;
  NegativeStride.Strides[0] = -3;
  ZeroStride.Strides[1] = 0;
  NegativeDim.Dims[0] = -1;
  TensorView NegativeDimFrom = NegativeDim;
  const Bad Cases[] = {
      {"types differ", Good, View(DType::Float64, {2, 3}, D.data()), false,
       "destination has element type f32, source f64"},
      {"ranks differ", Good, View(DType::Float32, {6}, F.data()), false,
       "destination has rank 2, source rank 1"},
      {"dims differ", Good, View(DType::Float32, {3, 2}, F.data()), false,
       "destination dims [2, 3] differ from source dims [3, 2]"},
      {"negative source stride", Good, NegativeStride, false,
       "source dim 0 has negative stride -3"},
      {"negative extent", NegativeDim, NegativeDimFrom, false,
       "destination dim 0 has negative extent -1"},
      {"repeated destination", ZeroStride, Good, false,
       "destination dim 1 (extent 3) has stride 0"},
      {"add of integers", View(DType::Int64, {4}, L.data()),
       View(DType::Int64, {4}, L.data() + 8), true,
       "cannot add elements of type i64"},
      {"absent source", Good, TensorView::absent(), false,
       "the source is absent"},
  };
  for (const Bad &C : Cases) {
    SCOPED_TRACE(C.Name);
    try {
      B->copyBox(C.To, C.From, C.Add);
      ADD_FAILURE() << "no error";
    } catch (const RuntimeError &E) {
      EXPECT_THAT(E.what(), ::testing::StartsWith("box copy: "));
      EXPECT_THAT(E.what(), ::testing::HasSubstr(C.Message));
    }
  }
}

// The copy table a profile records: one positive median per size, sizes
// increasing, the hook called before each timed run, and the file's JSON.
TEST(CopyTiming, TimesEachSizeAndWritesTheProfileTable) {
  auto B = createCpuBackend(1);
  unsigned Hooks = 0;
  CopyTiming T = timeBoxCopies(*B, 3, [&] { ++Hooks; });
  ASSERT_EQ(T.SizesBytes.size(), std::size(CopyTimingSizes));
  ASSERT_EQ(T.Seconds.size(), T.SizesBytes.size());
  EXPECT_EQ(T.Samples, 3);
  EXPECT_EQ(Hooks, 3 * T.SizesBytes.size());
  for (size_t I = 0; I < T.Seconds.size(); ++I) {
    EXPECT_GT(T.Seconds[I], 0);
    if (I > 0) {
      EXPECT_GT(T.SizesBytes[I], T.SizesBytes[I - 1]);
    }
  }
  CopyTiming Fixed{{4096, 65536}, {2.5e-6, 1e-12}, 5};
  EXPECT_EQ(copyTimingJson(Fixed),
            R"({"sizes_bytes": [4096, 65536], "times_us": [2.5, 0.001], )"
            R"("samples": 5})");
}

// Each size's runs stop once they have taken the cap (calibrate --repeat
// 100000000 timed copies for hours): at least one run each, and the table
// records the fewest runs any size had.
TEST(CopyTiming, RunsStopAtTheCap) {
  auto B = createCpuBackend(1);
  unsigned Hooks = 0;
  CopyTiming T = timeBoxCopies(
      *B, 100000000, [&] { ++Hooks; }, /*CapSeconds=*/0.01);
  ASSERT_EQ(T.Seconds.size(), std::size(CopyTimingSizes));
  EXPECT_GE(T.Samples, 1);
  EXPECT_LT(T.Samples, 100000000);
  EXPECT_GE(Hooks, T.Samples * T.SizesBytes.size());
  EXPECT_LT(Hooks, 100000000u);
}

} // namespace
