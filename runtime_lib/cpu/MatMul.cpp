//===- runtime_lib/cpu/MatMul.cpp - Gemm and MatMul -----------------------===//
//
// Gemm (Y = alpha * A' B' + beta * C) and numpy-style MatMul (batch
// broadcasting, 1-D operands) on oneDNN's matmul primitive. Transposed
// operands are described by swapped strides, broadcast batch dims by size 1
// (oneDNN broadcasts them); alpha is an output scale and beta a sum post-op,
// which also makes the backward products accumulate straight into the
// gradient views. Only a gradient whose operand was broadcast over batch
// dims goes through a scratch buffer, reduced into the view by a loop.
//
//===----------------------------------------------------------------------===//
#include "ContractionKernels.h"
#include <algorithm>
#include <string>

namespace onnx2soap::rt::cpu {
using namespace dnnl_util;

namespace {

/// A batched matrix [batch..., rows, cols] over memory with any strides.
struct Operand {
  memory::dims Dims, Strides;
  const void *Data = nullptr;

  int64_t rows() const { return Dims[Dims.size() - 2]; }
  int64_t cols() const { return Dims.back(); }
  Operand transposed() const {
    Operand T = *this;
    size_t R = Dims.size();
    std::swap(T.Dims[R - 2], T.Dims[R - 1]);
    std::swap(T.Strides[R - 2], T.Strides[R - 1]);
    return T;
  }
};

Operand dense(const memory::dims &Dims, const void *Data) {
  return {Dims, denseStrides(Dims), Data};
}

memory::dims batchOf(const memory::dims &Dims) {
  return memory::dims(Dims.begin(), Dims.end() - 2);
}

/// Dst = Alpha * A B + Beta * Dst, Dst dense [batch..., A rows, B cols]
/// where batch broadcasts A's and B's batch dims (equal rank).
void product(Context &C, const OpCall &Call, const Operand &A, const Operand &B,
             void *Dst, float Alpha, float Beta) {
  memory::dims DstDims;
  for (size_t I = 0; I + 2 < A.Dims.size(); ++I)
    DstDims.push_back(std::max(A.Dims[I], B.Dims[I]));
  DstDims.push_back(A.rows());
  DstDims.push_back(B.cols());
  dnnlCall(Call, "matrix product", [&] {
    dnnl::primitive_attr Attr;
    if (Alpha != 1)
      Attr.set_output_scales(0, {Alpha});
    if (Beta != 0) {
      dnnl::post_ops Ops;
      Ops.append_sum(Beta);
      Attr.set_post_ops(Ops);
    }
    memory::desc ADesc(A.Dims, memory::data_type::f32, A.Strides);
    memory::desc BDesc(B.Dims, memory::data_type::f32, B.Strides);
    memory::desc DstDesc = denseDesc(DstDims);
    dnnl::matmul::primitive_desc Pd(dnnl::matmul::desc(ADesc, BDesc, DstDesc),
                                    Attr, C.Engine);
    dnnl::matmul(Pd).execute(C.Stream,
                             {{DNNL_ARG_SRC, wrap(C, ADesc, A.Data)},
                              {DNNL_ARG_WEIGHTS, wrap(C, BDesc, B.Data)},
                              {DNNL_ARG_DST, wrap(C, DstDesc, Dst)}});
    C.Stream.wait();
  });
}

/// Dst[b'] += Full[b] for every batch index b of FullBatch, b' its image in
/// DstBatch (same rank, dims 1 where broadcast); blocks of Block floats.
void reduceInto(const float *Full, const memory::dims &FullBatch, float *Dst,
                const memory::dims &DstBatch, int64_t Block) {
  size_t Rank = FullBatch.size();
  memory::dims DstStrides = denseStrides(DstBatch);
  int64_t Count = 1;
  for (int64_t D : FullBatch)
    Count *= D;
  memory::dims Index(Rank, 0);
  for (int64_t Flat = 0; Flat < Count; ++Flat) {
    int64_t Target = 0;
    for (size_t I = 0; I < Rank; ++I)
      if (DstBatch[I] != 1)
        Target += Index[I] * DstStrides[I];
    addInto(Dst + Target * Block, Full + Flat * Block, Block);
    for (size_t I = Rank; I-- > 0;)
      if (++Index[I] < FullBatch[I])
        break;
      else
        Index[I] = 0;
  }
}

TensorView optionalAt(const Views &V, size_t I) {
  return I < V.size() ? V[I] : TensorView();
}

std::string formatDims(const TensorView &V) {
  std::string S = "[";
  for (int I = 0; I < V.Rank; ++I)
    S += (I ? "," : "") + std::to_string(V.Dims[I]);
  return S + "]";
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
  Operand A, B; // op(A) [M,K], op(B) [K,N]
  int64_t M, K, N;
  bool TransA, TransB;
  float Alpha, Beta;
  TensorView C;
  memory::dims CStrides; // broadcast strides of C over [M,N], 0 if absent
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
  S.A = dense(A.dims(), A.Data);
  S.B = dense(B.dims(), B.Data);
  if (S.TransA)
    S.A = S.A.transposed();
  if (S.TransB)
    S.B = S.B.transposed();
  S.M = S.A.rows();
  S.K = S.A.cols();
  S.N = S.B.cols();
  if (S.B.rows() != S.K || Y.Dims[0] != S.M || Y.Dims[1] != S.N)
    failOp(Call, "A " + formatDims(A) + " and B " + formatDims(B) +
                     " (transA=" + std::to_string(S.TransA) +
                     ", transB=" + std::to_string(S.TransB) +
                     ") do not give output " + formatDims(Y));
  S.C = optionalAt(Call.Inputs, 2);
  S.CStrides = {0, 0};
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
      S.CStrides[1 - I] = D == 1 ? 0 : Stride;
      Stride *= D;
    }
  }
  return S;
}

} // namespace

void forwardGemm(Context &C, const OpCall &Call) {
  GemmSetup S = setupGemm(Call);
  float *Y = Call.Outputs[0].as<float>();
  bool AddC = S.C.present() && S.Beta != 0;
  if (AddC) {
    const float *CData = S.C.as<float>();
    for (int64_t I = 0; I < S.M; ++I)
      for (int64_t J = 0; J < S.N; ++J)
        Y[I * S.N + J] = CData[I * S.CStrides[0] + J * S.CStrides[1]];
  }
  if (S.K == 0) {
    for (int64_t I = 0; I < S.M * S.N; ++I)
      Y[I] = AddC ? S.Beta * Y[I] : 0.0f;
    return;
  }
  if (S.M * S.N == 0)
    return;
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
    Operand G = dense({S.M, S.N}, DY.Data);
    // dop(A) = alpha dY op(B)^T, dop(B) = alpha op(A)^T dY; a gradient
    // stored transposed is computed as the transposed product.
    if (DA.present()) {
      if (S.TransA)
        product(C, Call, S.B, G.transposed(), DA.Data, S.Alpha, 1);
      else
        product(C, Call, G, S.B.transposed(), DA.Data, S.Alpha, 1);
    }
    if (DB.present()) {
      if (S.TransB)
        product(C, Call, G.transposed(), S.A, DB.Data, S.Alpha, 1);
      else
        product(C, Call, S.A.transposed(), G, DB.Data, S.Alpha, 1);
    }
  }
  if (DC.present()) {
    const float *G = DY.as<float>();
    float *Out = DC.as<float>();
    for (int64_t I = 0; I < S.M; ++I)
      for (int64_t J = 0; J < S.N; ++J)
        Out[I * S.CStrides[0] + J * S.CStrides[1]] += S.Beta * G[I * S.N + J];
  }
}

//===-- MatMul ------------------------------------------------------------===//

namespace {
struct MatMulSetup {
  Operand A, B;       // [batch..., M, K] and [batch..., K, N], equal batch rank
  memory::dims Batch; // broadcast batch of the output
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
  memory::dims ADims = A.dims(), BDims = B.dims();
  if (A.Rank == 1)
    ADims.insert(ADims.begin(), 1);
  if (B.Rank == 1)
    BDims.push_back(1);
  size_t Rank = std::max(ADims.size(), BDims.size());
  ADims.insert(ADims.begin(), Rank - ADims.size(), 1);
  BDims.insert(BDims.begin(), Rank - BDims.size(), 1);
  MatMulSetup S;
  S.A = dense(ADims, A.Data);
  S.B = dense(BDims, B.Data);
  bool Ok = S.A.cols() == S.B.rows();
  memory::dims Expected;
  for (size_t I = 0; I + 2 < Rank; ++I) {
    int64_t DA = ADims[I], DB = BDims[I];
    Ok = Ok && (DA == DB || DA == 1 || DB == 1);
    S.Batch.push_back(DA == 1 ? DB : DA);
  }
  Expected = S.Batch;
  if (A.Rank > 1)
    Expected.push_back(S.A.rows());
  if (B.Rank > 1)
    Expected.push_back(S.B.cols());
  if (!Ok || Y.dims() != Expected)
    failOp(Call, "A " + formatDims(A) + " and B " + formatDims(B) +
                     " do not give output " + formatDims(Y));
  // B without batch (a weight): fold A's batch into its rows, so forward and
  // both gradients are single 2-D products with no reduction.
  bool BHasBatch = false;
  for (size_t I = 0; I + 2 < Rank; ++I)
    BHasBatch = BHasBatch || BDims[I] != 1;
  if (!BHasBatch && Rank > 2) {
    int64_t Rows = S.A.rows();
    for (int64_t D : S.Batch)
      Rows *= D;
    S.A = dense({Rows, S.A.cols()}, A.Data);
    S.B = dense({S.B.rows(), S.B.cols()}, B.Data);
    S.Batch.clear();
  }
  return S;
}

bool sameBatch(const Operand &X, const memory::dims &Batch) {
  return batchOf(X.Dims) == Batch;
}

int64_t countOf(const memory::dims &Dims) {
  int64_t N = 1;
  for (int64_t D : Dims)
    N *= D;
  return N;
}
} // namespace

void forwardMatMul(Context &C, const OpCall &Call) {
  MatMulSetup S = setupMatMul(Call);
  const TensorView &Y = Call.Outputs[0];
  if (Y.numElements() == 0)
    return;
  if (S.A.cols() == 0) {
    std::fill(Y.as<float>(), Y.as<float>() + Y.numElements(), 0.0f);
    return;
  }
  product(C, Call, S.A, S.B, Y.Data, 1, 0);
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
  if (DY.numElements() == 0 || S.A.cols() == 0)
    return;
  memory::dims YDims = S.Batch;
  YDims.push_back(S.A.rows());
  YDims.push_back(S.B.cols());
  Operand G = dense(YDims, DY.Data);
  // dA = dY B^T and dB = A^T dY over the output batch; an operand broadcast
  // over batch dims gets the sum over them.
  auto Gradient = [&](const TensorView &Grad, const Operand &Of,
                      const Operand &Left, const Operand &Right) {
    if (!Grad.present())
      return;
    if (sameBatch(Of, S.Batch))
      return product(C, Call, Left, Right, Grad.Data, 1, 1);
    int64_t Block = Of.rows() * Of.cols();
    std::vector<float> Full(countOf(S.Batch) * Block);
    product(C, Call, Left, Right, Full.data(), 1, 0);
    reduceInto(Full.data(), S.Batch, Grad.as<float>(), batchOf(Of.Dims), Block);
  };
  Gradient(DA, S.A, G, S.B.transposed());
  Gradient(DB, S.B, S.A.transposed(), G);
}

} // namespace onnx2soap::rt::cpu
