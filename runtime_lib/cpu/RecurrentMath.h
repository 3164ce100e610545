//===- runtime_lib/cpu/RecurrentMath.h - LSTM and GRU math ------*- C++ -*-===//
//
// The arithmetic of one direction of a recurrent layer, free of layouts and
// operand checks (Recurrent.cpp does those): a time-major input sequence,
// one direction's weights in ONNX gate order, and the recurrence run
// forward in time or backward in time. Backward is back-propagation through
// time over a tape the forward fills (activated gates and cell states),
// so the kernels' backward recomputes the forward first.
//
// Hidden-unit slices: an unrolled cell may compute only Units of the layer's
// Hidden units. Its weights then hold Units rows per gate (the cells' gate-
// major layout makes that slice dense); the
// recurrent product still reads the whole previous hidden state (Hidden
// columns of R). A sequence longer than one step needs Units == Hidden.
//
//===----------------------------------------------------------------------===//
#ifndef ONNX2SOAP_RUNTIME_CPU_RECURRENTMATH_H
#define ONNX2SOAP_RUNTIME_CPU_RECURRENTMATH_H

#include "CpuKernels.h"
#include <vector>

namespace onnx2soap::rt::cpu::rnn {

/// Sizes of one direction's recurrence.
struct Shape {
  int64_t Steps = 0;  // T
  int64_t Batch = 0;  // B
  int64_t Input = 0;  // I
  int64_t Hidden = 0; // H: the width of the previous hidden state
  int64_t Units = 0;  // the hidden units computed (H unless a cell slice)
  bool Reverse = false;
};

/// One direction's parameters, Gates * Units rows each, gates in ONNX order
/// (LSTM i, o, f, c; GRU z, r, h).
template <typename T> struct Weights {
  const T *W = nullptr;  // [G*Units, Input]
  const T *R = nullptr;  // [G*Units, Hidden]
  const T *Wb = nullptr; // [G*Units]
  const T *Rb = nullptr; // [G*Units]
  const T *P = nullptr;  // LSTM peepholes [3*Units] (i, o, f), or null
};

/// Gradients to ADD into, each null when not needed; same shapes as the
/// forward operands they belong to.
template <typename T> struct Grads {
  T *X = nullptr; // [Steps, Batch, Input]
  T *W = nullptr; // like Weights
  T *R = nullptr;
  T *Wb = nullptr;
  T *Rb = nullptr;
  T *P = nullptr;
  T *H0 = nullptr; // [Batch, Hidden]
  T *C0 = nullptr; // [Batch, Units]

  bool weights() const { return W || R || Wb || Rb || P; }
};

/// What the forward records for backward; filled by the forward functions.
template <typename T> struct Tape {
  std::vector<T> Gates; // [Steps, Batch, G*Units], activated
  std::vector<T> Cell;  // LSTM: [Steps, Batch, Units]; GRU (linear before
                        // reset): H·Rhᵀ + Rbh, [Steps, Batch, Units]
};

/// C[M,N] = Alpha * op(A) * op(B) + Beta * C, row-major (oneDNN's sgemm for
/// f32, a loop for f64).
template <typename T>
void gemm(const OpCall &Call, bool TransA, bool TransB, int64_t M, int64_t N,
          int64_t K, T Alpha, const T *A, int64_t Lda, const T *B, int64_t Ldb,
          T Beta, T *C, int64_t Ldc);

/// Runs an LSTM direction: X [Steps,Batch,Input], H0 [Batch,Hidden], C0
/// [Batch,Units]; writes Y [Steps,Batch,Units] (in time order) and fills
/// the tape. The final states are Y's and the tape's last processed step.
template <typename T>
void lstmForward(const OpCall &Call, const Shape &S, const Weights<T> &P,
                 const T *X, const T *H0, const T *C0, T *Y, Tape<T> &Tp);

/// Adds the gradients of an LSTM direction given dY [Steps,Batch,Units] and
/// the final states' gradients dHLast, dCLast [Batch,Units] (each may be
/// null: zero), after lstmForward filled Y and the tape.
template <typename T>
void lstmBackward(const OpCall &Call, const Shape &S, const Weights<T> &P,
                  const T *X, const T *H0, const T *C0, const T *Y,
                  const Tape<T> &Tp, const T *DY, const T *DHLast,
                  const T *DCLast, const Grads<T> &G);

/// GRU counterparts (no cell state; LinearBeforeReset as ONNX's attribute).
template <typename T>
void gruForward(const OpCall &Call, const Shape &S, const Weights<T> &P,
                bool LinearBeforeReset, const T *X, const T *H0, T *Y,
                Tape<T> &Tp);
template <typename T>
void gruBackward(const OpCall &Call, const Shape &S, const Weights<T> &P,
                 bool LinearBeforeReset, const T *X, const T *H0, const T *Y,
                 const Tape<T> &Tp, const T *DY, const T *DHLast,
                 const Grads<T> &G);

} // namespace onnx2soap::rt::cpu::rnn

#endif
