//===- runtime_lib/cuda/RecurrentMath.cu - LSTM and GRU recurrences -------===//
//
// The recurrences of runtime_lib/cpu/RecurrentMath.cpp on the GPU: the input
// products of all steps in one cuBLAS GEMM, then per step the recurrent
// GEMM and a fused kernel for the pointwise gate math (one thread per batch
// row and hidden unit); backward walks the steps in reverse, keeping the
// pre-activation gradients of every step so that the input, W and bias
// gradients are one GEMM or column sum each at the end. Bias and peephole
// gradients are column sums (one thread per column), never atomics, so the
// results are deterministic.
//
//===----------------------------------------------------------------------===//
#include "RecurrentMath.cuh"
#include <climits>
#include <utility>

namespace onnx2soap::rt::cuda::rnn {
using namespace support;

namespace {

cublasOperation_t op(bool Trans) { return Trans ? CUBLAS_OP_T : CUBLAS_OP_N; }

void requireInt(const OpCall &Call, int64_t V) {
  if (V > INT_MAX)
    failOp(Call, "a GEMM dimension of " + std::to_string(V) +
                     " exceeds cuBLAS's 32-bit sizes");
}

} // namespace

// Row-major C = op(A) op(B) is column-major Cᵀ = op(B)ᵀ op(A)ᵀ: swap the
// operands and keep each one's transposition flag.
template <>
void gemm<float>(const Context &C, const OpCall &Call, bool TransA, bool TransB,
                 int64_t M, int64_t N, int64_t K, float Alpha, const float *A,
                 int64_t Lda, const float *B, int64_t Ldb, float Beta,
                 float *Out, int64_t Ldc) {
  if (M == 0 || N == 0)
    return;
  for (int64_t V : {M, N, K, Lda, Ldb, Ldc})
    requireInt(Call, V);
  checkCublas(Call,
              cublasSgemm(C.Blas, op(TransB), op(TransA), int(N), int(M),
                          int(K), &Alpha, B, int(Ldb), A, int(Lda), &Beta, Out,
                          int(Ldc)),
              "cublasSgemm");
}

template <>
void gemm<double>(const Context &C, const OpCall &Call, bool TransA,
                  bool TransB, int64_t M, int64_t N, int64_t K, double Alpha,
                  const double *A, int64_t Lda, const double *B, int64_t Ldb,
                  double Beta, double *Out, int64_t Ldc) {
  if (M == 0 || N == 0)
    return;
  for (int64_t V : {M, N, K, Lda, Ldb, Ldc})
    requireInt(Call, V);
  checkCublas(Call,
              cublasDgemm(C.Blas, op(TransB), op(TransA), int(N), int(M),
                          int(K), &Alpha, B, int(Ldb), A, int(Lda), &Beta, Out,
                          int(Ldc)),
              "cublasDgemm");
}

namespace {

template <typename T> __device__ T sigmoid(T X) {
  return T(1) / (T(1) + exp(-X));
}

template <typename T> __device__ T valueOr0(const T *P, int64_t I) {
  return P ? P[I] : T(0);
}

#define GRID_STRIDE(I, Count)                                                  \
  for (int64_t I = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;             \
       I < (Count); I += int64_t(gridDim.x) * blockDim.x)

template <typename T>
__global__ void addKernel(T *Out, const T *In, int64_t Count) {
  GRID_STRIDE(I, Count) Out[I] += In[I];
}

template <typename T>
__global__ void copyBlocksKernel(int64_t Outer, int64_t Inner, int64_t Width,
                                 const T *Src, int64_t SrcOuter,
                                 int64_t SrcInner, T *Dst, int64_t DstOuter,
                                 int64_t DstInner, bool Add) {
  GRID_STRIDE(E, Outer * Inner * Width) {
    int64_t K = E % Width, Rest = E / Width;
    int64_t I = Rest % Inner, O = Rest / Inner;
    T V = Src[O * SrcOuter + I * SrcInner + K];
    T &D = Dst[O * DstOuter + I * DstInner + K];
    D = Add ? D + V : V;
  }
}

/// Sum[j] += sum over Rows of M[r, j]: one thread per column.
template <typename T>
__global__ void columnSumKernel(const T *M, int64_t Rows, int64_t Columns,
                                T *Sum) {
  GRID_STRIDE(J, Columns) {
    T S = 0;
    for (int64_t R = 0; R < Rows; ++R)
      S += M[R * Columns + J];
    Sum[J] += S;
  }
}

template <typename T>
void addColumnSums(const Context &C, const OpCall &Call, const T *M,
                   int64_t Rows, int64_t Columns, T *Sum) {
  if (Columns == 0)
    return;
  columnSumKernel<T><<<blocksFor(Columns), ThreadsPerBlock, 0, C.Stream>>>(
      M, Rows, Columns, Sum);
  checkLaunch(Call, "column sum kernel");
}

/// Time index of processing step Step.
int64_t timeOf(const Shape &S, int64_t Step) {
  return S.Reverse ? S.Steps - 1 - Step : Step;
}

void requireFullWidth(const OpCall &Call, const Shape &S) {
  if (S.Steps > 1 && S.Units != S.Hidden)
    failOp(Call, "a sequence of several steps needs all hidden units");
}

//===-- LSTM kernels ------------------------------------------------------===//

/// Gates holds X·Wᵀ + H·Rᵀ of one step; activates it in place and writes
/// the cell and hidden states.
template <typename T>
__global__ void lstmGateKernel(int64_t B, int64_t U, T *Gates, const T *Wb,
                               const T *Rb, const T *P, const T *CPrev, T *Cell,
                               T *Hidden) {
  const int64_t G = 4 * U;
  GRID_STRIDE(K, B * U) {
    int64_t Bi = K / U, Ui = K % U;
    T *Gi = Gates + Bi * G;
    T Cp = CPrev[K];
    auto Pre = [&](int64_t Gate) {
      int64_t Row = Gate * U + Ui;
      return Gi[Row] + valueOr0(Wb, Row) + valueOr0(Rb, Row);
    };
    T AI = Pre(0), AO = Pre(1), AF = Pre(2), AC = Pre(3);
    if (P) {
      AI += P[Ui] * Cp;
      AF += P[2 * U + Ui] * Cp;
    }
    T I = sigmoid(AI), F = sigmoid(AF), Cand = tanh(AC);
    T Ct = F * Cp + I * Cand;
    if (P)
      AO += P[U + Ui] * Ct;
    T O = sigmoid(AO);
    Gi[Ui] = I;
    Gi[U + Ui] = O;
    Gi[2 * U + Ui] = F;
    Gi[3 * U + Ui] = Cand;
    Cell[K] = Ct;
    Hidden[K] = O * tanh(Ct);
  }
}

/// One step back: pre-activation gradients DG, the cell gradient DC (in
/// place: becomes the previous cell's) and the peephole contributions.
template <typename T>
__global__ void lstmGateBackwardKernel(int64_t B, int64_t U, const T *Gates,
                                       const T *Cell, const T *CPrev,
                                       const T *P, const T *DH, const T *DY,
                                       T *DC, T *DG, T *DPeep) {
  const int64_t G = 4 * U;
  GRID_STRIDE(K, B * U) {
    int64_t Bi = K / U, Ui = K % U;
    const T *Gi = Gates + Bi * G;
    T *DGi = DG + Bi * G;
    T Dh = DH[K] + (DY ? DY[K] : T(0));
    T I = Gi[Ui], O = Gi[U + Ui], F = Gi[2 * U + Ui], Cand = Gi[3 * U + Ui];
    T Ct = Cell[K], Cp = CPrev[K], TanhC = tanh(Ct);
    T DAO = Dh * TanhC * O * (1 - O);
    T Dc = DC[K] + Dh * O * (1 - TanhC * TanhC);
    if (P)
      Dc += DAO * P[U + Ui];
    T DAI = Dc * Cand * I * (1 - I);
    T DAF = Dc * Cp * F * (1 - F);
    T DAC = Dc * I * (1 - Cand * Cand);
    T DCp = Dc * F;
    if (P)
      DCp += DAI * P[Ui] + DAF * P[2 * U + Ui];
    if (DPeep) {
      T *Row = DPeep + Bi * 3 * U;
      Row[Ui] = DAI * Cp;
      Row[U + Ui] = DAO * Ct;
      Row[2 * U + Ui] = DAF * Cp;
    }
    DGi[Ui] = DAI;
    DGi[U + Ui] = DAO;
    DGi[2 * U + Ui] = DAF;
    DGi[3 * U + Ui] = DAC;
    DC[K] = DCp;
  }
}

//===-- GRU kernels -------------------------------------------------------===//

/// Activates the z and r gates of one step; without linear_before_reset
/// also writes r ⊙ H for the h gate's recurrent product.
template <typename T>
__global__ void gruResetKernel(int64_t B, int64_t U, T *Gates, const T *HR,
                               const T *Wb, const T *Rb, const T *HPrev,
                               T *ResetHidden) {
  const int64_t G = 3 * U;
  GRID_STRIDE(E, B * 2 * U) {
    int64_t Bi = E / (2 * U), Row = E % (2 * U);
    T &A = Gates[Bi * G + Row];
    A = sigmoid(A + valueOr0(Wb, Row) + HR[Bi * G + Row] + valueOr0(Rb, Row));
    if (ResetHidden && Row >= U)
      ResetHidden[Bi * U + Row - U] = A * HPrev[Bi * U + Row - U];
  }
}

template <typename T>
__global__ void gruOutputKernel(int64_t B, int64_t U, T *Gates, const T *HR,
                                const T *Wb, const T *Rb, const T *HPrev,
                                bool LinearBeforeReset, T *Recurrences,
                                T *Hidden) {
  const int64_t G = 3 * U;
  GRID_STRIDE(K, B * U) {
    int64_t Bi = K / U, Ui = K % U, Row = 2 * U + Ui;
    T *Gi = Gates + Bi * G;
    T Recurrent = HR[Bi * G + Row] + valueOr0(Rb, Row);
    T Z = Gi[Ui], R = Gi[U + Ui], N;
    if (LinearBeforeReset) {
      Recurrences[K] = Recurrent;
      N = tanh(Gi[Row] + valueOr0(Wb, Row) + R * Recurrent);
    } else {
      N = tanh(Gi[Row] + valueOr0(Wb, Row) + Recurrent);
    }
    Gi[Row] = N;
    Hidden[K] = (1 - Z) * N + Z * HPrev[K];
  }
}

/// One step back: DIn (input-side pre-activation gradients), DRec
/// (recurrent side), DHPrev = dh * z; without linear_before_reset the r
/// gate waits for gruResetBackwardKernel.
template <typename T>
__global__ void gruGateBackwardKernel(int64_t B, int64_t U, const T *Gates,
                                      const T *Recurrences, const T *HPrev,
                                      const T *DH, const T *DY,
                                      bool LinearBeforeReset, T *DIn, T *DRec,
                                      T *DHPrev, T *ResetHidden) {
  const int64_t G = 3 * U;
  GRID_STRIDE(K, B * U) {
    int64_t Bi = K / U, Ui = K % U;
    const T *Gi = Gates + Bi * G;
    T Dh = DH[K] + (DY ? DY[K] : T(0));
    T Z = Gi[Ui], R = Gi[U + Ui], N = Gi[2 * U + Ui], Hp = HPrev[K];
    T DAZ = Dh * (Hp - N) * Z * (1 - Z);
    T DAN = Dh * (1 - Z) * (1 - N * N);
    DIn[Bi * G + Ui] = DRec[Bi * G + Ui] = DAZ;
    DIn[Bi * G + 2 * U + Ui] = DAN;
    DHPrev[K] = Dh * Z;
    if (LinearBeforeReset) {
      T Recurrent = Recurrences[K];
      T DAR = DAN * Recurrent * R * (1 - R);
      DIn[Bi * G + U + Ui] = DRec[Bi * G + U + Ui] = DAR;
      DRec[Bi * G + 2 * U + Ui] = DAN * R;
    } else {
      DRec[Bi * G + 2 * U + Ui] = DAN;
      ResetHidden[K] = R * Hp;
    }
  }
}

/// d(r ⊙ H) = dAN · Rh feeds r and the previous H.
template <typename T>
__global__ void gruResetBackwardKernel(int64_t B, int64_t U, const T *Gates,
                                       const T *HPrev, const T *DResetHidden,
                                       T *DIn, T *DRec, T *DHPrev) {
  const int64_t G = 3 * U;
  GRID_STRIDE(K, B * U) {
    int64_t Bi = K / U, Ui = K % U;
    T R = Gates[Bi * G + U + Ui];
    T DAR = DResetHidden[K] * HPrev[K] * R * (1 - R);
    DIn[Bi * G + U + Ui] = DRec[Bi * G + U + Ui] = DAR;
    DHPrev[K] += DResetHidden[K] * R;
  }
}

#undef GRID_STRIDE

} // namespace

template <typename T>
void addInto(const Context &C, const OpCall &Call, T *Out, const T *In,
             int64_t Count) {
  if (Count == 0)
    return;
  addKernel<T>
      <<<blocksFor(Count), ThreadsPerBlock, 0, C.Stream>>>(Out, In, Count);
  checkLaunch(Call, "add kernel");
}

template <typename T>
void copyBlocks(const Context &C, const OpCall &Call, int64_t Outer,
                int64_t Inner, int64_t Width, const T *Src, int64_t SrcOuter,
                int64_t SrcInner, T *Dst, int64_t DstOuter, int64_t DstInner,
                bool Add) {
  int64_t Count = Outer * Inner * Width;
  if (Count == 0)
    return;
  copyBlocksKernel<T><<<blocksFor(Count), ThreadsPerBlock, 0, C.Stream>>>(
      Outer, Inner, Width, Src, SrcOuter, SrcInner, Dst, DstOuter, DstInner,
      Add);
  checkLaunch(Call, "layout copy kernel");
}

//===-- LSTM --------------------------------------------------------------===//

template <typename T>
void lstmForward(const Context &C, const OpCall &Call, const Shape &S,
                 const Weights<T> &P, const T *X, const T *H0, const T *C0,
                 T *Y, Tape<T> &Tp) {
  requireFullWidth(Call, S);
  const int64_t B = S.Batch, U = S.Units, H = S.Hidden, G = 4 * U;
  Tp.Gates = Scratch<T>(Call, C, S.Steps * B * G);
  Tp.Cell = Scratch<T>(Call, C, S.Steps * B * U);
  gemm<T>(C, Call, false, true, S.Steps * B, G, S.Input, 1, X, S.Input, P.W,
          S.Input, 0, Tp.Gates.get(), G);
  for (int64_t Step = 0; Step < S.Steps; ++Step) {
    int64_t Time = timeOf(S, Step), Prev = timeOf(S, Step - 1);
    const T *HPrev = Step == 0 ? H0 : Y + Prev * B * U;
    const T *CPrev = Step == 0 ? C0 : Tp.Cell.get() + Prev * B * U;
    T *Gates = Tp.Gates.get() + Time * B * G;
    gemm<T>(C, Call, false, true, B, G, H, 1, HPrev, H, P.R, H, 1, Gates, G);
    if (B == 0 || U == 0)
      continue;
    lstmGateKernel<T><<<blocksFor(B * U), ThreadsPerBlock, 0, C.Stream>>>(
        B, U, Gates, P.Wb, P.Rb, P.P, CPrev, Tp.Cell.get() + Time * B * U,
        Y + Time * B * U);
    checkLaunch(Call, "LSTM gate kernel");
  }
}

template <typename T>
void lstmBackward(const Context &C, const OpCall &Call, const Shape &S,
                  const Weights<T> &P, const T *X, const T *H0, const T *C0,
                  const T *Y, const Tape<T> &Tp, const T *DY, const T *DHLast,
                  const T *DCLast, const Grads<T> &Gr) {
  requireFullWidth(Call, S);
  const int64_t B = S.Batch, U = S.Units, H = S.Hidden, G = 4 * U;
  Scratch<T> DGates(Call, C, S.Steps * B * G);
  // DH is read as [B, U], DHPrev written as [B, H]; they swap only when
  // Units == Hidden (several steps).
  Scratch<T> DH(Call, C, B * H, true), DHPrev(Call, C, B * H, true),
      DC(Call, C, B * U, true);
  Scratch<T> DPeep;
  if (Gr.P)
    DPeep = Scratch<T>(Call, C, S.Steps * B * 3 * U);
  auto copyIn = [&](T *Dst, const T *Src) {
    if (Src && B > 0 && U > 0)
      checkCuda(Call,
                cudaMemcpyAsync(Dst, Src, B * U * sizeof(T),
                                cudaMemcpyDeviceToDevice, C.Stream),
                "cudaMemcpyAsync (LSTM final state gradient)");
  };
  copyIn(DH.get(), DHLast);
  copyIn(DC.get(), DCLast);
  T *DHCur = DH.get(), *DHNext = DHPrev.get();
  for (int64_t Step = S.Steps - 1; Step >= 0; --Step) {
    int64_t Time = timeOf(S, Step), Prev = timeOf(S, Step - 1);
    const T *HPrev = Step == 0 ? H0 : Y + Prev * B * U;
    const T *CPrev = Step == 0 ? C0 : Tp.Cell.get() + Prev * B * U;
    T *DG = DGates.get() + Time * B * G;
    if (B > 0 && U > 0) {
      lstmGateBackwardKernel<T>
          <<<blocksFor(B * U), ThreadsPerBlock, 0, C.Stream>>>(
              B, U, Tp.Gates.get() + Time * B * G, Tp.Cell.get() + Time * B * U,
              CPrev, P.P, DHCur, DY ? DY + Time * B * U : nullptr, DC.get(), DG,
              Gr.P ? DPeep.get() + Time * B * 3 * U : nullptr);
      checkLaunch(Call, "LSTM gate backward kernel");
    }
    if (Gr.R)
      gemm<T>(C, Call, true, false, G, H, B, 1, DG, G, HPrev, H, 1, Gr.R, H);
    if (Step > 0 || Gr.H0)
      gemm<T>(C, Call, false, false, B, H, G, 1, DG, G, P.R, H, 0, DHNext, H);
    if (Step > 0)
      std::swap(DHCur, DHNext); // Units == Hidden here
  }
  if (Gr.H0)
    addInto(C, Call, Gr.H0, DHNext, B * H);
  if (Gr.C0)
    addInto(C, Call, Gr.C0, DC.get(), B * U);
  if (Gr.P)
    addColumnSums(C, Call, DPeep.get(), S.Steps * B, 3 * U, Gr.P);
  if (Gr.X)
    gemm<T>(C, Call, false, false, S.Steps * B, S.Input, G, 1, DGates.get(), G,
            P.W, S.Input, 1, Gr.X, S.Input);
  if (Gr.W)
    gemm<T>(C, Call, true, false, G, S.Input, S.Steps * B, 1, DGates.get(), G,
            X, S.Input, 1, Gr.W, S.Input);
  // The recurrent bias enters every step exactly as the input bias does.
  if (Gr.Wb)
    addColumnSums(C, Call, DGates.get(), S.Steps * B, G, Gr.Wb);
  if (Gr.Rb)
    addColumnSums(C, Call, DGates.get(), S.Steps * B, G, Gr.Rb);
}

//===-- GRU ---------------------------------------------------------------===//

template <typename T>
void gruForward(const Context &C, const OpCall &Call, const Shape &S,
                const Weights<T> &P, bool LinearBeforeReset, const T *X,
                const T *H0, T *Y, Tape<T> &Tp) {
  if (S.Units != S.Hidden)
    failOp(Call, "a GRU needs all hidden units");
  const int64_t B = S.Batch, U = S.Units, G = 3 * U;
  Tp.Gates = Scratch<T>(Call, C, S.Steps * B * G);
  if (LinearBeforeReset)
    Tp.Cell = Scratch<T>(Call, C, S.Steps * B * U);
  Scratch<T> HR(Call, C, B * G), ResetHidden;
  if (!LinearBeforeReset)
    ResetHidden = Scratch<T>(Call, C, B * U);
  gemm<T>(C, Call, false, true, S.Steps * B, G, S.Input, 1, X, S.Input, P.W,
          S.Input, 0, Tp.Gates.get(), G);
  for (int64_t Step = 0; Step < S.Steps; ++Step) {
    int64_t Time = timeOf(S, Step), Prev = timeOf(S, Step - 1);
    const T *HPrev = Step == 0 ? H0 : Y + Prev * B * U;
    T *Gates = Tp.Gates.get() + Time * B * G;
    // Without linear_before_reset the h gate's recurrent product reads
    // r ⊙ H, so only the z and r rows are multiplied first.
    gemm<T>(C, Call, false, true, B, LinearBeforeReset ? G : 2 * U, U, 1, HPrev,
            U, P.R, U, 0, HR.get(), G);
    if (B == 0 || U == 0)
      continue;
    gruResetKernel<T><<<blocksFor(B * 2 * U), ThreadsPerBlock, 0, C.Stream>>>(
        B, U, Gates, HR.get(), P.Wb, P.Rb, HPrev, ResetHidden.get());
    checkLaunch(Call, "GRU reset gate kernel");
    if (!LinearBeforeReset)
      gemm<T>(C, Call, false, true, B, U, U, 1, ResetHidden.get(), U,
              P.R + 2 * U * U, U, 0, HR.get() + 2 * U, G);
    gruOutputKernel<T><<<blocksFor(B * U), ThreadsPerBlock, 0, C.Stream>>>(
        B, U, Gates, HR.get(), P.Wb, P.Rb, HPrev, LinearBeforeReset,
        LinearBeforeReset ? Tp.Cell.get() + Time * B * U : nullptr,
        Y + Time * B * U);
    checkLaunch(Call, "GRU output kernel");
  }
}

template <typename T>
void gruBackward(const Context &C, const OpCall &Call, const Shape &S,
                 const Weights<T> &P, bool LinearBeforeReset, const T *X,
                 const T *H0, const T *Y, const Tape<T> &Tp, const T *DY,
                 const T *DHLast, const Grads<T> &Gr) {
  const int64_t B = S.Batch, U = S.Units, G = 3 * U;
  // DInput: gradients of the input-side pre-activations X·Wᵀ + Wb, every
  // step; DRec: of the recurrent side H·Rᵀ + Rb, every step (its column
  // sums are the recurrent bias's gradient). They differ only in the h
  // gate.
  Scratch<T> DInput(Call, C, S.Steps * B * G), DRec(Call, C, S.Steps * B * G),
      DH(Call, C, B * U, true), DHPrev(Call, C, B * U), DResetHidden,
      ResetHidden;
  if (!LinearBeforeReset) {
    DResetHidden = Scratch<T>(Call, C, B * U);
    ResetHidden = Scratch<T>(Call, C, B * U);
  }
  if (DHLast && B > 0 && U > 0)
    checkCuda(Call,
              cudaMemcpyAsync(DH.get(), DHLast, B * U * sizeof(T),
                              cudaMemcpyDeviceToDevice, C.Stream),
              "cudaMemcpyAsync (GRU final state gradient)");
  T *DHCur = DH.get(), *DHNext = DHPrev.get();
  const int64_t HRows = LinearBeforeReset ? G : 2 * U;
  for (int64_t Step = S.Steps - 1; Step >= 0; --Step) {
    int64_t Time = timeOf(S, Step), Prev = timeOf(S, Step - 1);
    const T *HPrev = Step == 0 ? H0 : Y + Prev * B * U;
    const T *Gates = Tp.Gates.get() + Time * B * G;
    T *DIn = DInput.get() + Time * B * G, *DR = DRec.get() + Time * B * G;
    if (B > 0 && U > 0) {
      gruGateBackwardKernel<T>
          <<<blocksFor(B * U), ThreadsPerBlock, 0, C.Stream>>>(
              B, U, Gates,
              LinearBeforeReset ? Tp.Cell.get() + Time * B * U : nullptr, HPrev,
              DHCur, DY ? DY + Time * B * U : nullptr, LinearBeforeReset, DIn,
              DR, DHNext, ResetHidden.get());
      checkLaunch(Call, "GRU gate backward kernel");
    }
    if (!LinearBeforeReset) {
      gemm<T>(C, Call, false, false, B, U, U, 1, DIn + 2 * U, G,
              P.R + 2 * U * U, U, 0, DResetHidden.get(), U);
      if (B > 0 && U > 0) {
        gruResetBackwardKernel<T>
            <<<blocksFor(B * U), ThreadsPerBlock, 0, C.Stream>>>(
                B, U, Gates, HPrev, DResetHidden.get(), DIn, DR, DHNext);
        checkLaunch(Call, "GRU reset gate backward kernel");
      }
      if (Gr.R)
        gemm<T>(C, Call, true, false, U, U, B, 1, DIn + 2 * U, G,
                ResetHidden.get(), U, 1, Gr.R + 2 * U * U, U);
    }
    if (Gr.R)
      gemm<T>(C, Call, true, false, HRows, U, B, 1, DR, G, HPrev, U, 1, Gr.R,
              U);
    gemm<T>(C, Call, false, false, B, U, HRows, 1, DR, G, P.R, U, 1, DHNext, U);
    std::swap(DHCur, DHNext);
  }
  if (Gr.H0)
    addInto(C, Call, Gr.H0, DHCur, B * U);
  if (Gr.X)
    gemm<T>(C, Call, false, false, S.Steps * B, S.Input, G, 1, DInput.get(), G,
            P.W, S.Input, 1, Gr.X, S.Input);
  if (Gr.W)
    gemm<T>(C, Call, true, false, G, S.Input, S.Steps * B, 1, DInput.get(), G,
            X, S.Input, 1, Gr.W, S.Input);
  if (Gr.Wb)
    addColumnSums(C, Call, DInput.get(), S.Steps * B, G, Gr.Wb);
  if (Gr.Rb)
    addColumnSums(C, Call, DRec.get(), S.Steps * B, G, Gr.Rb);
}

#define INSTANTIATE(T)                                                         \
  template void addInto<T>(const Context &, const OpCall &, T *, const T *,    \
                           int64_t);                                           \
  template void copyBlocks<T>(const Context &, const OpCall &, int64_t,        \
                              int64_t, int64_t, const T *, int64_t, int64_t,   \
                              T *, int64_t, int64_t, bool);                    \
  template void lstmForward<T>(const Context &, const OpCall &, const Shape &, \
                               const Weights<T> &, const T *, const T *,       \
                               const T *, T *, Tape<T> &);                     \
  template void lstmBackward<T>(                                               \
      const Context &, const OpCall &, const Shape &, const Weights<T> &,      \
      const T *, const T *, const T *, const T *, const Tape<T> &, const T *,  \
      const T *, const T *, const Grads<T> &);                                 \
  template void gruForward<T>(const Context &, const OpCall &, const Shape &,  \
                              const Weights<T> &, bool, const T *, const T *,  \
                              T *, Tape<T> &);                                 \
  template void gruBackward<T>(const Context &, const OpCall &, const Shape &, \
                               const Weights<T> &, bool, const T *, const T *, \
                               const T *, const Tape<T> &, const T *,          \
                               const T *, const Grads<T> &);
INSTANTIATE(float)
INSTANTIATE(double)
#undef INSTANTIATE

} // namespace onnx2soap::rt::cuda::rnn
