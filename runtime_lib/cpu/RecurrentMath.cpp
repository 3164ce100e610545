//===- runtime_lib/cpu/RecurrentMath.cpp - LSTM and GRU recurrences -------===//
//
// Loop kernels around GEMMs: the input products of all steps in one GEMM,
// then per step the recurrent product and the pointwise gate math; backward
// walks the steps in reverse, collecting the pre-activation gradients of
// every step so the input and W gradients are again one GEMM each.
//
// The f32 GEMM is oneDNN's sgemm. oneDNN's own RNN primitives were not used:
// they cannot compute a hidden-unit slice, and their gate order and weight
// layout differ from ONNX's, which would cost a reorder of every weight and
// gradient per call anyway.
//
//===----------------------------------------------------------------------===//
#include "RecurrentMath.h"
#include <cmath>

namespace onnx2soap::rt::cpu::rnn {

template <>
void gemm<float>(const OpCall &Call, bool TransA, bool TransB, int64_t M,
                 int64_t N, int64_t K, float Alpha, const float *A, int64_t Lda,
                 const float *B, int64_t Ldb, float Beta, float *C,
                 int64_t Ldc) {
  if (M == 0 || N == 0)
    return;
  dnnl::status Status = dnnl::sgemm(TransA ? 'T' : 'N', TransB ? 'T' : 'N', M,
                                    N, K, Alpha, A, Lda, B, Ldb, Beta, C, Ldc);
  if (Status != dnnl::status::success)
    failOp(Call, "sgemm failed in oneDNN (status " +
                     std::to_string(static_cast<int>(Status)) + ")");
}

template <>
void gemm<double>(const OpCall &, bool TransA, bool TransB, int64_t M,
                  int64_t N, int64_t K, double Alpha, const double *A,
                  int64_t Lda, const double *B, int64_t Ldb, double Beta,
                  double *C, int64_t Ldc) {
  for (int64_t I = 0; I < M; ++I) {
    double *Row = C + I * Ldc;
    for (int64_t J = 0; J < N; ++J)
      Row[J] = Beta == 0 ? 0 : Beta * Row[J];
    for (int64_t P = 0; P < K; ++P) {
      double AValue = Alpha * (TransA ? A[P * Lda + I] : A[I * Lda + P]);
      if (TransB)
        for (int64_t J = 0; J < N; ++J)
          Row[J] += AValue * B[J * Ldb + P];
      else
        for (int64_t J = 0; J < N; ++J)
          Row[J] += AValue * B[P * Ldb + J];
    }
  }
}

namespace {

template <typename T> T sigmoid(T X) { return T(1) / (T(1) + std::exp(-X)); }

/// Sum[j] += sum over Rows of M[r, j] (M has Columns columns).
template <typename T>
void addColumnSums(const T *M, int64_t Rows, int64_t Columns, T *Sum) {
  for (int64_t R = 0; R < Rows; ++R)
    for (int64_t J = 0; J < Columns; ++J)
      Sum[J] += M[R * Columns + J];
}

template <typename T> void addTo(T *Dst, const T *Src, int64_t N) {
  for (int64_t I = 0; I < N; ++I)
    Dst[I] += Src[I];
}

/// Time index of processing step Step.
int64_t timeOf(const Shape &S, int64_t Step) {
  return S.Reverse ? S.Steps - 1 - Step : Step;
}

void requireFullWidth(const OpCall &Call, const Shape &S) {
  if (S.Steps > 1 && S.Units != S.Hidden)
    failOp(Call, "a sequence of several steps needs all hidden units");
}

} // namespace

//===-- LSTM --------------------------------------------------------------===//

template <typename T>
void lstmForward(const OpCall &Call, const Shape &S, const Weights<T> &P,
                 const T *X, const T *H0, const T *C0, T *Y, Tape<T> &Tp) {
  requireFullWidth(Call, S);
  const int64_t B = S.Batch, U = S.Units, H = S.Hidden, G = 4 * U;
  Tp.Gates.assign(S.Steps * B * G, T(0));
  Tp.Cell.assign(S.Steps * B * U, T(0));
  gemm<T>(Call, false, true, S.Steps * B, G, S.Input, 1, X, S.Input, P.W,
          S.Input, 0, Tp.Gates.data(), G);
  for (int64_t Step = 0; Step < S.Steps; ++Step) {
    int64_t Time = timeOf(S, Step), Prev = timeOf(S, Step - 1);
    const T *HPrev = Step == 0 ? H0 : Y + Prev * B * U;
    const T *CPrev = Step == 0 ? C0 : Tp.Cell.data() + Prev * B * U;
    T *Gates = Tp.Gates.data() + Time * B * G;
    T *Cell = Tp.Cell.data() + Time * B * U;
    T *Hidden = Y + Time * B * U;
    gemm<T>(Call, false, true, B, G, H, 1, HPrev, H, P.R, H, 1, Gates, G);
    for (int64_t Bi = 0; Bi < B; ++Bi) {
      T *Gi = Gates + Bi * G;
      for (int64_t Ui = 0; Ui < U; ++Ui) {
        T Cp = CPrev[Bi * U + Ui];
        auto Pre = [&](int64_t Gate) {
          int64_t Row = Gate * U + Ui;
          return Gi[Row] + P.Wb[Row] + P.Rb[Row];
        };
        T AI = Pre(0), AO = Pre(1), AF = Pre(2), AC = Pre(3);
        if (P.P) {
          AI += P.P[Ui] * Cp;
          AF += P.P[2 * U + Ui] * Cp;
        }
        T I = sigmoid(AI), F = sigmoid(AF), C = std::tanh(AC);
        T Ct = F * Cp + I * C;
        if (P.P)
          AO += P.P[U + Ui] * Ct;
        T O = sigmoid(AO);
        Gi[Ui] = I;
        Gi[U + Ui] = O;
        Gi[2 * U + Ui] = F;
        Gi[3 * U + Ui] = C;
        Cell[Bi * U + Ui] = Ct;
        Hidden[Bi * U + Ui] = O * std::tanh(Ct);
      }
    }
  }
}

template <typename T>
void lstmBackward(const OpCall &Call, const Shape &S, const Weights<T> &P,
                  const T *X, const T *H0, const T *C0, const T *Y,
                  const Tape<T> &Tp, const T *DY, const T *DHLast,
                  const T *DCLast, const Grads<T> &Gr) {
  requireFullWidth(Call, S);
  const int64_t B = S.Batch, U = S.Units, H = S.Hidden, G = 4 * U;
  std::vector<T> DGates(S.Steps * B * G), DH(B * U, T(0)), DC(B * U, T(0)),
      DHPrev(B * H);
  if (DHLast)
    DH.assign(DHLast, DHLast + B * U);
  if (DCLast)
    DC.assign(DCLast, DCLast + B * U);
  for (int64_t Step = S.Steps - 1; Step >= 0; --Step) {
    int64_t Time = timeOf(S, Step), Prev = timeOf(S, Step - 1);
    const T *HPrev = Step == 0 ? H0 : Y + Prev * B * U;
    const T *CPrev = Step == 0 ? C0 : Tp.Cell.data() + Prev * B * U;
    const T *Gates = Tp.Gates.data() + Time * B * G;
    const T *Cell = Tp.Cell.data() + Time * B * U;
    T *DG = DGates.data() + Time * B * G;
    for (int64_t Bi = 0; Bi < B; ++Bi) {
      const T *Gi = Gates + Bi * G;
      T *DGi = DG + Bi * G;
      for (int64_t Ui = 0; Ui < U; ++Ui) {
        int64_t K = Bi * U + Ui;
        T Dh = DH[K] + (DY ? DY[Time * B * U + K] : T(0));
        T I = Gi[Ui], O = Gi[U + Ui], F = Gi[2 * U + Ui], C = Gi[3 * U + Ui];
        T Ct = Cell[K], Cp = CPrev[K], TanhC = std::tanh(Ct);
        T DAO = Dh * TanhC * O * (1 - O);
        T Dc = DC[K] + Dh * O * (1 - TanhC * TanhC);
        if (P.P)
          Dc += DAO * P.P[U + Ui];
        T DAI = Dc * C * I * (1 - I);
        T DAF = Dc * Cp * F * (1 - F);
        T DAC = Dc * I * (1 - C * C);
        T DCp = Dc * F;
        if (P.P)
          DCp += DAI * P.P[Ui] + DAF * P.P[2 * U + Ui];
        if (Gr.P) {
          Gr.P[Ui] += DAI * Cp;
          Gr.P[U + Ui] += DAO * Ct;
          Gr.P[2 * U + Ui] += DAF * Cp;
        }
        DGi[Ui] = DAI;
        DGi[U + Ui] = DAO;
        DGi[2 * U + Ui] = DAF;
        DGi[3 * U + Ui] = DAC;
        DC[K] = DCp;
      }
    }
    if (Gr.R)
      gemm<T>(Call, true, false, G, H, B, 1, DG, G, HPrev, H, 1, Gr.R, H);
    if (Gr.Rb)
      addColumnSums(DG, B, G, Gr.Rb);
    if (Step > 0 || Gr.H0)
      gemm<T>(Call, false, false, B, H, G, 1, DG, G, P.R, H, 0, DHPrev.data(),
              H);
    if (Step > 0)
      DH.assign(DHPrev.begin(), DHPrev.end()); // Units == Hidden here
  }
  if (Gr.H0)
    addTo(Gr.H0, DHPrev.data(), B * H);
  if (Gr.C0)
    addTo(Gr.C0, DC.data(), B * U);
  if (Gr.X)
    gemm<T>(Call, false, false, S.Steps * B, S.Input, G, 1, DGates.data(), G,
            P.W, S.Input, 1, Gr.X, S.Input);
  if (Gr.W)
    gemm<T>(Call, true, false, G, S.Input, S.Steps * B, 1, DGates.data(), G, X,
            S.Input, 1, Gr.W, S.Input);
  if (Gr.Wb)
    addColumnSums(DGates.data(), S.Steps * B, G, Gr.Wb);
}

//===-- GRU ---------------------------------------------------------------===//

template <typename T>
void gruForward(const OpCall &Call, const Shape &S, const Weights<T> &P,
                bool LinearBeforeReset, const T *X, const T *H0, T *Y,
                Tape<T> &Tp) {
  if (S.Units != S.Hidden)
    failOp(Call, "a GRU needs all hidden units");
  const int64_t B = S.Batch, U = S.Units, G = 3 * U;
  Tp.Gates.assign(S.Steps * B * G, T(0));
  Tp.Cell.assign(LinearBeforeReset ? S.Steps * B * U : 0, T(0));
  std::vector<T> HR(B * G), ResetHidden(LinearBeforeReset ? 0 : B * U);
  gemm<T>(Call, false, true, S.Steps * B, G, S.Input, 1, X, S.Input, P.W,
          S.Input, 0, Tp.Gates.data(), G);
  for (int64_t Step = 0; Step < S.Steps; ++Step) {
    int64_t Time = timeOf(S, Step), Prev = timeOf(S, Step - 1);
    const T *HPrev = Step == 0 ? H0 : Y + Prev * B * U;
    T *Gates = Tp.Gates.data() + Time * B * G;
    T *Hidden = Y + Time * B * U;
    // Without linear_before_reset the h gate's recurrent product reads
    // r ⊙ H, so only the z and r rows are multiplied first.
    gemm<T>(Call, false, true, B, LinearBeforeReset ? G : 2 * U, U, 1, HPrev, U,
            P.R, U, 0, HR.data(), G);
    for (int64_t Bi = 0; Bi < B; ++Bi)
      for (int64_t Row = 0; Row < 2 * U; ++Row) {
        T &A = Gates[Bi * G + Row];
        A = sigmoid(A + P.Wb[Row] + HR[Bi * G + Row] + P.Rb[Row]);
      }
    if (!LinearBeforeReset) {
      for (int64_t Bi = 0; Bi < B; ++Bi)
        for (int64_t Ui = 0; Ui < U; ++Ui)
          ResetHidden[Bi * U + Ui] =
              Gates[Bi * G + U + Ui] * HPrev[Bi * U + Ui];
      gemm<T>(Call, false, true, B, U, U, 1, ResetHidden.data(), U,
              P.R + 2 * U * U, U, 0, HR.data() + 2 * U, G);
    }
    for (int64_t Bi = 0; Bi < B; ++Bi) {
      T *Gi = Gates + Bi * G;
      for (int64_t Ui = 0; Ui < U; ++Ui) {
        int64_t Row = 2 * U + Ui;
        T Recurrent = HR[Bi * G + Row] + P.Rb[Row];
        T Z = Gi[Ui], R = Gi[U + Ui];
        T N;
        if (LinearBeforeReset) {
          Tp.Cell[(Time * B + Bi) * U + Ui] = Recurrent;
          N = std::tanh(Gi[Row] + P.Wb[Row] + R * Recurrent);
        } else {
          N = std::tanh(Gi[Row] + P.Wb[Row] + Recurrent);
        }
        Gi[Row] = N;
        Hidden[Bi * U + Ui] = (1 - Z) * N + Z * HPrev[Bi * U + Ui];
      }
    }
  }
}

template <typename T>
void gruBackward(const OpCall &Call, const Shape &S, const Weights<T> &P,
                 bool LinearBeforeReset, const T *X, const T *H0, const T *Y,
                 const Tape<T> &Tp, const T *DY, const T *DHLast,
                 const Grads<T> &Gr) {
  const int64_t B = S.Batch, U = S.Units, G = 3 * U;
  // DInput: gradients of the input-side pre-activations X·Wᵀ + Wb, every
  // step; DRec: of the recurrent side H·Rᵀ + Rb, one step. They differ only
  // in the h gate.
  std::vector<T> DInput(S.Steps * B * G), DRec(B * G), DH(B * U, T(0)),
      DHPrev(B * U), DResetHidden(LinearBeforeReset ? 0 : B * U),
      ResetHidden(LinearBeforeReset ? 0 : B * U);
  if (DHLast)
    DH.assign(DHLast, DHLast + B * U);
  for (int64_t Step = S.Steps - 1; Step >= 0; --Step) {
    int64_t Time = timeOf(S, Step), Prev = timeOf(S, Step - 1);
    const T *HPrev = Step == 0 ? H0 : Y + Prev * B * U;
    const T *Gates = Tp.Gates.data() + Time * B * G;
    T *DIn = DInput.data() + Time * B * G;
    for (int64_t Bi = 0; Bi < B; ++Bi)
      for (int64_t Ui = 0; Ui < U; ++Ui) {
        int64_t K = Bi * U + Ui;
        const T *Gi = Gates + Bi * G;
        T Dh = DH[K] + (DY ? DY[Time * B * U + K] : T(0));
        T Z = Gi[Ui], R = Gi[U + Ui], N = Gi[2 * U + Ui], Hp = HPrev[K];
        T DAZ = Dh * (Hp - N) * Z * (1 - Z);
        T DAN = Dh * (1 - Z) * (1 - N * N);
        DIn[Bi * G + Ui] = DRec[Bi * G + Ui] = DAZ;
        DIn[Bi * G + 2 * U + Ui] = DAN;
        DHPrev[K] = Dh * Z;
        if (LinearBeforeReset) {
          T Recurrent = Tp.Cell[(Time * B + Bi) * U + Ui];
          T DAR = DAN * Recurrent * R * (1 - R);
          DIn[Bi * G + U + Ui] = DRec[Bi * G + U + Ui] = DAR;
          DRec[Bi * G + 2 * U + Ui] = DAN * R;
        } else {
          DRec[Bi * G + 2 * U + Ui] = DAN;
          ResetHidden[K] = R * Hp;
        }
      }
    if (!LinearBeforeReset) {
      // d(r ⊙ H) = dAN · Rh, feeding r and the previous H.
      gemm<T>(Call, false, false, B, U, U, 1, DIn + 2 * U, G, P.R + 2 * U * U,
              U, 0, DResetHidden.data(), U);
      for (int64_t Bi = 0; Bi < B; ++Bi)
        for (int64_t Ui = 0; Ui < U; ++Ui) {
          int64_t K = Bi * U + Ui;
          T R = Gates[Bi * G + U + Ui];
          T DAR = DResetHidden[K] * HPrev[K] * R * (1 - R);
          DIn[Bi * G + U + Ui] = DRec[Bi * G + U + Ui] = DAR;
          DHPrev[K] += DResetHidden[K] * R;
        }
      if (Gr.R)
        gemm<T>(Call, true, false, U, U, B, 1, DIn + 2 * U, G,
                ResetHidden.data(), U, 1, Gr.R + 2 * U * U, U);
    }
    int64_t HRows = LinearBeforeReset ? G : 2 * U;
    if (Gr.R)
      gemm<T>(Call, true, false, HRows, U, B, 1, DRec.data(), G, HPrev, U, 1,
              Gr.R, U);
    if (Gr.Rb)
      addColumnSums(DRec.data(), B, G, Gr.Rb);
    gemm<T>(Call, false, false, B, U, HRows, 1, DRec.data(), G, P.R, U, 1,
            DHPrev.data(), U);
    DH.swap(DHPrev);
  }
  if (Gr.H0)
    addTo(Gr.H0, DH.data(), B * U);
  if (Gr.X)
    gemm<T>(Call, false, false, S.Steps * B, S.Input, G, 1, DInput.data(), G,
            P.W, S.Input, 1, Gr.X, S.Input);
  if (Gr.W)
    gemm<T>(Call, true, false, G, S.Input, S.Steps * B, 1, DInput.data(), G, X,
            S.Input, 1, Gr.W, S.Input);
  if (Gr.Wb)
    addColumnSums(DInput.data(), S.Steps * B, G, Gr.Wb);
}

#define INSTANTIATE(T)                                                         \
  template void lstmForward<T>(const OpCall &, const Shape &,                  \
                               const Weights<T> &, const T *, const T *,       \
                               const T *, T *, Tape<T> &);                     \
  template void lstmBackward<T>(                                               \
      const OpCall &, const Shape &, const Weights<T> &, const T *, const T *, \
      const T *, const T *, const Tape<T> &, const T *, const T *, const T *,  \
      const Grads<T> &);                                                       \
  template void gruForward<T>(const OpCall &, const Shape &,                   \
                              const Weights<T> &, bool, const T *, const T *,  \
                              T *, Tape<T> &);                                 \
  template void gruBackward<T>(const OpCall &, const Shape &,                  \
                               const Weights<T> &, bool, const T *, const T *, \
                               const T *, const Tape<T> &, const T *,          \
                               const T *, const Grads<T> &);
INSTANTIATE(float)
INSTANTIATE(double)
#undef INSTANTIATE

} // namespace onnx2soap::rt::cpu::rnn
