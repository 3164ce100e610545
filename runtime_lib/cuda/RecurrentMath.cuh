//===- runtime_lib/cuda/RecurrentMath.cuh - LSTM, GRU steps --*- CUDA -*-===//
//
// The CUDA twin of runtime_lib/cpu/RecurrentMath.h: the arithmetic of one
// direction of a recurrent layer on device pointers, free of layouts and
// operand checks (Recurrent.cu does those). A time-major input sequence,
// one direction's weights in ONNX gate order, the recurrence run forward or
// backward in time; cuBLAS GEMMs on the context's stream plus fused gate
// kernels. Backward is back-propagation through time over a tape the
// forward fills (activated gates and cell states).
//
// Hidden-unit slices (cells only): weights hold Units rows per gate;
// the recurrent product still reads the whole previous hidden state.
//
//===----------------------------------------------------------------------===//
#ifndef ONNX2SOAP_RUNTIME_CUDA_RECURRENTMATH_CUH
#define ONNX2SOAP_RUNTIME_CUDA_RECURRENTMATH_CUH

#include "KernelSupport.cuh"

namespace onnx2soap::rt::cuda::rnn {

using support::Scratch;

/// Sizes of one direction's recurrence.
struct Shape {
  int64_t Steps = 0;  // T
  int64_t Batch = 0;  // B
  int64_t Input = 0;  // I
  int64_t Hidden = 0; // H: the width of the previous hidden state
  int64_t Units = 0;  // the hidden units computed (H unless a cell slice)
  bool Reverse = false;
};

/// One direction's parameters (device memory), Gates * Units rows each,
/// gates in ONNX order (LSTM i, o, f, c; GRU z, r, h). Null biases and
/// peepholes count as zeros.
template <typename T> struct Weights {
  const T *W = nullptr;  // [G*Units, Input]
  const T *R = nullptr;  // [G*Units, Hidden]
  const T *Wb = nullptr; // [G*Units] or null
  const T *Rb = nullptr; // [G*Units] or null
  const T *P = nullptr;  // LSTM peepholes [3*Units] (i, o, f), or null
};

/// Gradients to ADD into (device memory), each null when not needed.
template <typename T> struct Grads {
  T *X = nullptr; // [Steps, Batch, Input]
  T *W = nullptr;
  T *R = nullptr;
  T *Wb = nullptr;
  T *Rb = nullptr;
  T *P = nullptr;
  T *H0 = nullptr; // [Batch, Hidden]
  T *C0 = nullptr; // [Batch, Units]
};

/// What the forward records for backward.
template <typename T> struct Tape {
  Scratch<T> Gates; // [Steps, Batch, G*Units], activated
  Scratch<T> Cell;  // LSTM: [Steps, Batch, Units]; GRU with linear before
                    // reset: H·Rhᵀ + Rbh, [Steps, Batch, Units]
};

/// C[M,N] = Alpha * op(A) * op(B) + Beta * C, row-major, with cuBLAS on the
/// context's stream.
template <typename T>
void gemm(const Context &C, const OpCall &Call, bool TransA, bool TransB,
          int64_t M, int64_t N, int64_t K, T Alpha, const T *A, int64_t Lda,
          const T *B, int64_t Ldb, T Beta, T *Out, int64_t Ldc);

/// Out[i] += In[i] for I < Count.
template <typename T>
void addInto(const Context &C, const OpCall &Call, T *Out, const T *In,
             int64_t Count);

/// Dst[o * DstOuter + i * DstInner + k] (=|+=) Src[o * SrcOuter + i *
/// SrcInner + k] for o < Outer, i < Inner, k < Width: the layout moves of
/// the layers and cells (batch-first sequences, directions of a state).
template <typename T>
void copyBlocks(const Context &C, const OpCall &Call, int64_t Outer,
                int64_t Inner, int64_t Width, const T *Src, int64_t SrcOuter,
                int64_t SrcInner, T *Dst, int64_t DstOuter, int64_t DstInner,
                bool Add);

/// Runs an LSTM direction: X [Steps,Batch,Input], H0 [Batch,Hidden], C0
/// [Batch,Units]; writes Y [Steps,Batch,Units] (time order) and the tape.
template <typename T>
void lstmForward(const Context &C, const OpCall &Call, const Shape &S,
                 const Weights<T> &P, const T *X, const T *H0, const T *C0,
                 T *Y, Tape<T> &Tp);
/// Adds the gradients of an LSTM direction given dY [Steps,Batch,Units] and
/// the final states' gradients dHLast, dCLast [Batch,Units] (each may be
/// null: zero), after lstmForward filled Y and the tape.
template <typename T>
void lstmBackward(const Context &C, const OpCall &Call, const Shape &S,
                  const Weights<T> &P, const T *X, const T *H0, const T *C0,
                  const T *Y, const Tape<T> &Tp, const T *DY, const T *DHLast,
                  const T *DCLast, const Grads<T> &G);
/// GRU counterparts (no cell state).
template <typename T>
void gruForward(const Context &C, const OpCall &Call, const Shape &S,
                const Weights<T> &P, bool LinearBeforeReset, const T *X,
                const T *H0, T *Y, Tape<T> &Tp);
template <typename T>
void gruBackward(const Context &C, const OpCall &Call, const Shape &S,
                 const Weights<T> &P, bool LinearBeforeReset, const T *X,
                 const T *H0, const T *Y, const Tape<T> &Tp, const T *DY,
                 const T *DHLast, const Grads<T> &G);

} // namespace onnx2soap::rt::cuda::rnn

#endif
