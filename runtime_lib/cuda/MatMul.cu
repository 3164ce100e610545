//===- runtime_lib/cuda/MatMul.cu - Gemm and MatMul -----------------------===//
//
// Gemm (Y = alpha * A' B' + beta * C) and numpy-style MatMul (batch
// broadcasting, 1-D operands) on cuBLAS, the CUDA twin of
// runtime_lib/cpu/MatMul.cpp (same checks, same messages). Row-major
// products run as cuBLAS's column-major ones on the transposed problem
// (Y^T = B^T A^T), so a row-major operand needs no copy and a transposed
// one is an op flag. Batches go to cublasSgemmStridedBatched, with stride 0
// for an operand broadcast over all batch dims; mixed broadcasting loops
// over the outer batch dims. The 64-bit cuBLAS entry points take sizes past
// 2^31. cuBLAS's default math mode keeps float precision (no TF32).
//
// Gemm's C is broadcast into Y by a kernel before the product accumulates
// onto it with beta. Backward products accumulate into the gradient views
// with beta = 1; only a gradient whose operand was broadcast (MatMul batch
// dims, Gemm's C) goes through a deterministic reduction kernel.
//
//===----------------------------------------------------------------------===//
#include "ContractionCommon.cuh"
#include <algorithm>

namespace onnx2soap::rt::cuda {
using namespace contraction;

namespace {

/// A batched matrix as the product sees it: logical [Batch..., Rows, Cols],
/// stored row-major either as is or (Trans) as its transpose, Ld floats per
/// stored row; Batch dims are 1 where broadcast.
struct Mat {
  std::vector<int64_t> Batch;
  int64_t Rows = 0, Cols = 0, Ld = 0;
  bool Trans = false;
  const float *Data = nullptr;

  int64_t block() const { return Rows * Cols; }
  Mat transposed() const {
    Mat T = *this;
    std::swap(T.Rows, T.Cols);
    T.Trans = !Trans;
    return T;
  }
};

Mat dense(std::vector<int64_t> Batch, int64_t Rows, int64_t Cols,
          const void *Data) {
  Mat M;
  M.Batch = std::move(Batch);
  M.Rows = Rows;
  M.Cols = Cols;
  M.Ld = Cols;
  M.Data = static_cast<const float *>(Data);
  return M;
}

int64_t countOf(const std::vector<int64_t> &Dims) {
  int64_t N = 1;
  for (int64_t D : Dims)
    N *= D;
  return N;
}

bool allOnes(const std::vector<int64_t> &Dims) {
  return std::all_of(Dims.begin(), Dims.end(),
                     [](int64_t D) { return D == 1; });
}

/// Dst = Alpha * A B + Beta * Dst, Dst dense [batch..., A rows, B cols]
/// where batch broadcasts A's and B's batch dims (equal rank).
void product(Context &C, const OpCall &Call, const Mat &A, const Mat &B,
             float *Dst, float Alpha, float Beta) {
  std::vector<int64_t> Batch;
  for (size_t I = 0; I < A.Batch.size(); ++I)
    Batch.push_back(std::max(A.Batch[I], B.Batch[I]));
  int64_t M = A.Rows, K = A.Cols, N = B.Cols;
  int64_t Count = countOf(Batch);
  if (Count == 0 || M * N == 0)
    return;
  if (K == 0) {
    // An empty sum: Dst = Beta * Dst.
    if (Beta == 0)
      checkCuda(
          Call,
          cudaMemsetAsync(Dst, 0, Count * M * N * sizeof(float), C.Stream),
          "cudaMemsetAsync");
    else
      checkCublas(Call, cublasSscal_64(C.Blas, Count * M * N, &Beta, Dst, 1),
                  "cublasSscal");
    return;
  }
  cublasOperation_t OpA = A.Trans ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t OpB = B.Trans ? CUBLAS_OP_T : CUBLAS_OP_N;
  auto Run = [&](const float *AData, long long StrideA, const float *BData,
                 long long StrideB, float *DstData, int64_t Batches) {
    checkCublas(Call,
                cublasSgemmStridedBatched_64(
                    C.Blas, OpB, OpA, N, M, K, &Alpha, BData, B.Ld, StrideB,
                    AData, A.Ld, StrideA, &Beta, DstData, N, M * N, Batches),
                "cublasSgemmStridedBatched");
  };
  bool AUniform = A.Batch == Batch || allOnes(A.Batch);
  bool BUniform = B.Batch == Batch || allOnes(B.Batch);
  if (AUniform && BUniform)
    return Run(A.Data, allOnes(A.Batch) ? 0 : A.block(), B.Data,
               allOnes(B.Batch) ? 0 : B.block(), Dst, Count);
  // Mixed broadcasting: one strided call over the last batch dim for every
  // index of the outer ones.
  size_t Rank = Batch.size();
  int64_t Inner = Batch[Rank - 1];
  int64_t Outer = Count / Inner;
  std::vector<int64_t> Index(Rank - 1, 0);
  for (int64_t O = 0; O < Outer; ++O) {
    int64_t AOffset = 0, BOffset = 0;
    for (size_t I = 0; I + 1 < Rank; ++I) {
      AOffset = AOffset * A.Batch[I] + (A.Batch[I] == 1 ? 0 : Index[I]);
      BOffset = BOffset * B.Batch[I] + (B.Batch[I] == 1 ? 0 : Index[I]);
    }
    AOffset *= A.Batch[Rank - 1];
    BOffset *= B.Batch[Rank - 1];
    Run(A.Data + AOffset * A.block(), A.Batch[Rank - 1] == 1 ? 0 : A.block(),
        B.Data + BOffset * B.block(), B.Batch[Rank - 1] == 1 ? 0 : B.block(),
        Dst + O * Inner * M * N, Inner);
    for (size_t I = Rank - 1; I-- > 0;)
      if (++Index[I] < Batch[I])
        break;
      else
        Index[I] = 0;
  }
}

void checkGradient(const OpCall &Call, const TensorView &Grad,
                   const TensorView &Operand, const char *What) {
  if (!Grad.present())
    return;
  requireDenseF32(Call, Grad, What);
  if (Grad.numElements() != Operand.numElements())
    failOp(Call, std::string(What) + " " + formatDims(Grad) +
                     " does not match its operand " + formatDims(Operand));
}

//===-- Gemm --------------------------------------------------------------===//

struct GemmSetup {
  Mat A, B; // op(A) [M,K], op(B) [K,N]
  int64_t M, K, N;
  bool TransA, TransB;
  float Alpha, Beta;
  TensorView C;
  /// C's dims aligned to [M,N] (1 where broadcast) and its broadcast
  /// strides over [M,N] (0 where broadcast or absent).
  std::vector<int64_t> CDims{1, 1};
  int64_t CStrides[2] = {0, 0};
};

GemmSetup setupGemm(const OpCall &Call) {
  if (Call.Inputs.size() < 2 || Call.Outputs.size() != 1)
    failOp(Call, "expects inputs A, B (and optional C) and one output");
  const TensorView &A = Call.Inputs[0], &B = Call.Inputs[1],
                   &Y = Call.Outputs[0];
  requireDenseF32(Call, A, "input A");
  requireDenseF32(Call, B, "input B");
  requireDenseF32(Call, Y, "output Y");
  GemmSetup S;
  S.TransA = Call.Attrs.getInt("transA");
  S.TransB = Call.Attrs.getInt("transB");
  S.Alpha = static_cast<float>(Call.Attrs.getFloat("alpha", 1.0));
  S.Beta = static_cast<float>(Call.Attrs.getFloat("beta", 1.0));
  if (A.Rank != 2 || B.Rank != 2 || Y.Rank != 2)
    failOp(Call, "needs 2-D operands, got A " + formatDims(A) + ", B " +
                     formatDims(B) + ", Y " + formatDims(Y));
  S.A = dense({}, A.Dims[0], A.Dims[1], A.Data);
  S.B = dense({}, B.Dims[0], B.Dims[1], B.Data);
  if (S.TransA)
    S.A = S.A.transposed();
  if (S.TransB)
    S.B = S.B.transposed();
  S.M = S.A.Rows;
  S.K = S.A.Cols;
  S.N = S.B.Cols;
  if (S.B.Rows != S.K || Y.Dims[0] != S.M || Y.Dims[1] != S.N)
    failOp(Call, "A " + formatDims(A) + " and B " + formatDims(B) +
                     " (transA=" + std::to_string(S.TransA) +
                     ", transB=" + std::to_string(S.TransB) +
                     ") do not give output " + formatDims(Y));
  S.C = optionalAt(Call.Inputs, 2);
  if (S.C.present()) {
    requireDenseF32(Call, S.C, "input C");
    // Unidirectional broadcast: C's dims align with [M,N] from the right.
    if (S.C.Rank > 2)
      failOp(Call, "C " + formatDims(S.C) + " has rank above 2");
    int64_t Out[2] = {S.M, S.N};
    int64_t Stride = 1;
    for (int I = 0; I < S.C.Rank; ++I) {
      int64_t D = S.C.Dims[S.C.Rank - 1 - I];
      if (D != 1 && D != Out[1 - I])
        failOp(Call, "C " + formatDims(S.C) + " does not broadcast to " +
                         formatDims(Y));
      S.CDims[1 - I] = D;
      S.CStrides[1 - I] = D == 1 ? 0 : Stride;
      Stride *= D;
    }
  }
  return S;
}

/// Y[i, j] = Scale * C[i * StrideRow + j * StrideCol] over [M, N].
__global__ void broadcastCKernel(const float *CData, float *Y, int64_t M,
                                 int64_t N, int64_t StrideRow,
                                 int64_t StrideCol, float Scale) {
  for (int64_t I = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; I < M * N;
       I += int64_t(gridDim.x) * blockDim.x)
    Y[I] = Scale * CData[(I / N) * StrideRow + (I % N) * StrideCol];
}

} // namespace

void forwardGemm(Context &C, const OpCall &Call) {
  GemmSetup S = setupGemm(Call);
  float *Y = Call.Outputs[0].as<float>();
  if (S.M * S.N == 0)
    return;
  bool AddC = S.C.present() && S.Beta != 0;
  if (AddC) {
    // With K = 0 there is no product to add beta * C in: scale here.
    float Scale = S.K == 0 ? S.Beta : 1.0f;
    broadcastCKernel<<<gridFor(S.M * S.N), 256, 0, C.Stream>>>(
        S.C.as<float>(), Y, S.M, S.N, S.CStrides[0], S.CStrides[1], Scale);
    checkCuda(Call, cudaGetLastError(), "Gemm C broadcast kernel launch");
    if (S.K == 0)
      return;
  }
  product(C, Call, S.A, S.B, Y, S.Alpha, AddC ? S.Beta : 0.0f);
}

void backwardGemm(Context &C, const OpCall &Call, const Views &OutputGrads,
                  const Views &InputGrads) {
  GemmSetup S = setupGemm(Call);
  TensorView DY = optionalAt(OutputGrads, 0);
  if (!DY.present())
    return;
  checkGradient(Call, DY, Call.Outputs[0], "output gradient");
  TensorView DA = optionalAt(InputGrads, 0), DB = optionalAt(InputGrads, 1),
             DC = optionalAt(InputGrads, 2);
  checkGradient(Call, DA, Call.Inputs[0], "gradient of A");
  checkGradient(Call, DB, Call.Inputs[1], "gradient of B");
  if (DC.present() && !S.C.present())
    failOp(Call, "gradient of C given without C");
  checkGradient(Call, DC, S.C, "gradient of C");
  if (S.M * S.N * S.K != 0) {
    Mat G = dense({}, S.M, S.N, DY.Data);
    // dop(A) = alpha dY op(B)^T, dop(B) = alpha op(A)^T dY; a gradient
    // stored transposed is computed as the transposed product.
    if (DA.present()) {
      if (S.TransA)
        product(C, Call, S.B, G.transposed(), DA.as<float>(), S.Alpha, 1);
      else
        product(C, Call, G, S.B.transposed(), DA.as<float>(), S.Alpha, 1);
    }
    if (DB.present()) {
      if (S.TransB)
        product(C, Call, G.transposed(), S.A, DB.as<float>(), S.Alpha, 1);
      else
        product(C, Call, S.A.transposed(), G, DB.as<float>(), S.Alpha, 1);
    }
  }
  if (DC.present())
    reduceBroadcastInto(C, Call, DY.as<float>(), {S.M, S.N}, DC.as<float>(),
                        S.CDims, S.Beta);
}

//===-- MatMul ------------------------------------------------------------===//

namespace {
struct MatMulSetup {
  Mat A, B;                   // [batch..., M, K] and [batch..., K, N]
  std::vector<int64_t> Batch; // broadcast batch of the output
};

MatMulSetup setupMatMul(const OpCall &Call) {
  if (Call.Inputs.size() != 2 || Call.Outputs.size() != 1)
    failOp(Call, "expects inputs A, B and one output");
  const TensorView &A = Call.Inputs[0], &B = Call.Inputs[1],
                   &Y = Call.Outputs[0];
  requireDenseF32(Call, A, "input A");
  requireDenseF32(Call, B, "input B");
  requireDenseF32(Call, Y, "output Y");
  if (A.Rank < 1 || B.Rank < 1)
    failOp(Call, "inputs must have rank >= 1");
  std::vector<int64_t> ADims = A.dims(), BDims = B.dims();
  if (A.Rank == 1)
    ADims.insert(ADims.begin(), 1);
  if (B.Rank == 1)
    BDims.push_back(1);
  size_t Rank = std::max(ADims.size(), BDims.size());
  ADims.insert(ADims.begin(), Rank - ADims.size(), 1);
  BDims.insert(BDims.begin(), Rank - BDims.size(), 1);
  MatMulSetup S;
  S.A = dense({ADims.begin(), ADims.end() - 2}, ADims[Rank - 2],
              ADims[Rank - 1], A.Data);
  S.B = dense({BDims.begin(), BDims.end() - 2}, BDims[Rank - 2],
              BDims[Rank - 1], B.Data);
  bool Ok = S.A.Cols == S.B.Rows;
  for (size_t I = 0; I + 2 < Rank; ++I) {
    int64_t DA = ADims[I], DB = BDims[I];
    Ok = Ok && (DA == DB || DA == 1 || DB == 1);
    S.Batch.push_back(DA == 1 ? DB : DA);
  }
  std::vector<int64_t> Expected = S.Batch;
  if (A.Rank > 1)
    Expected.push_back(S.A.Rows);
  if (B.Rank > 1)
    Expected.push_back(S.B.Cols);
  if (!Ok || Y.dims() != Expected)
    failOp(Call, "A " + formatDims(A) + " and B " + formatDims(B) +
                     " do not give output " + formatDims(Y));
  // B without batch (a weight): fold A's batch into its rows, so forward and
  // both gradients are single 2-D products with no reduction.
  if (allOnes(S.B.Batch) && Rank > 2) {
    S.A = dense({}, S.A.Rows * countOf(S.Batch), S.A.Cols, A.Data);
    S.B = dense({}, S.B.Rows, S.B.Cols, B.Data);
    S.Batch.clear();
  }
  return S;
}
} // namespace

void forwardMatMul(Context &C, const OpCall &Call) {
  MatMulSetup S = setupMatMul(Call);
  const TensorView &Y = Call.Outputs[0];
  if (Y.numElements() == 0)
    return;
  product(C, Call, S.A, S.B, Y.as<float>(), 1, 0);
}

void backwardMatMul(Context &C, const OpCall &Call, const Views &OutputGrads,
                    const Views &InputGrads) {
  MatMulSetup S = setupMatMul(Call);
  TensorView DY = optionalAt(OutputGrads, 0);
  if (!DY.present())
    return;
  checkGradient(Call, DY, Call.Outputs[0], "output gradient");
  TensorView DA = optionalAt(InputGrads, 0), DB = optionalAt(InputGrads, 1);
  checkGradient(Call, DA, Call.Inputs[0], "gradient of A");
  checkGradient(Call, DB, Call.Inputs[1], "gradient of B");
  if (DY.numElements() == 0 || S.A.Cols == 0)
    return;
  Mat G = dense(S.Batch, S.A.Rows, S.B.Cols, DY.Data);
  // dA = dY B^T and dB = A^T dY over the output batch; an operand broadcast
  // over batch dims gets the sum over them.
  auto Gradient = [&](const TensorView &Grad, const Mat &Of, const Mat &Left,
                      const Mat &Right) {
    if (!Grad.present())
      return;
    if (Of.Batch == S.Batch)
      return product(C, Call, Left, Right, Grad.as<float>(), 1, 1);
    std::vector<int64_t> FullDims = S.Batch, OfDims = Of.Batch;
    for (int64_t D : {Of.Rows, Of.Cols}) {
      FullDims.push_back(D);
      OfDims.push_back(D);
    }
    Scratch Full(C, Call, countOf(FullDims) * sizeof(float));
    product(C, Call, Left, Right, Full.as<float>(), 1, 0);
    reduceBroadcastInto(C, Call, Full.as<float>(), FullDims, Grad.as<float>(),
                        OfDims, 1);
  };
  Gradient(DA, S.A, G, S.B.transposed());
  Gradient(DB, S.B, S.A.transposed(), G);
}

} // namespace onnx2soap::rt::cuda
