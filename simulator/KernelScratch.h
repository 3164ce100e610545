//===- simulator/KernelScratch.h - Scratch of one kernel call ---*- C++ -*-===//
//
// The device memory one call of the runtime's kernels takes for itself
// while it runs and frees when it ends (runtime_lib/cuda: the Scratch
// buffers, allocated in stream order from the device's pool), by op kind,
// from the partition's regions:
//
// - Conv and ConvTranspose: the convolution workspace, at most the device
//   type's ConvWorkspace (cuDNN's size depends on the algorithm and the GPU,
//   so the limit the program keeps to is counted), plus a copy of the
//   padded "big" tensor (Conv's input, ConvTranspose's output) where cuDNN's
//   symmetric padding does not fit: asymmetric pads, an output_padding the
//   stride does not absorb, or a split over space (each part's pads then
//   differ).
// - MatMul backward: the un-reduced gradient of an operand broadcast over
//   batch dims (none when B has no batch: the program folds it).
// - MaxPool backward: the recomputed output's argmax (8 bytes per output).
// - Max and Min backward: the selected value and the tie count per output.
// - BatchNorm: per-channel coefficients (16 bytes forward, 32 backward).
// - LayerNorm backward: per-row statistics and per-column weight sums.
// - SoftmaxCrossEntropyLoss: the log-sum-exp and label per position.
// - LSTM, GRU and their cells: time-major copies, the output, the
//   recurrence's tape and, backward, its gradients (every gradient
//   counted as present).
// - Gather and integer Div: a few bytes of error flags.
//
// Everything else takes none. Where the runtime allocates at least one
// element for an empty buffer, or the pool rounds sizes up, the count here
// is a few bytes short; the figures are per call, and a device's scratch is
// its largest call's (MemoryModel.h).
//
//===----------------------------------------------------------------------===//
#ifndef ONNX2SOAP_SIMULATOR_KERNELSCRATCH_H
#define ONNX2SOAP_SIMULATOR_KERNELSCRATCH_H

#include "ir/Graph.h"
#include "simulator/Machine.h"

namespace onnx2soap::simulator {

/// Bytes of scratch the forward (Backward false) or backward call of the
/// partition of O computing region Out of output 0, with slice Reduction
/// of the contraction dim, takes on a device of type Device.
double kernelScratchBytes(const ir::Graph &G, const ir::Op &O,
                          llvm::ArrayRef<ir::Interval> Out,
                          ir::Interval Reduction, bool Backward,
                          const DeviceType &Device);

} // namespace onnx2soap::simulator

#endif
