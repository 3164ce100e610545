//===- runtime_lib/program/Main.h - A generated program's main -*- C++ -*-===//
//
// Everything a generated program's main() does, so the generated source is
// only its plan and a few lines choosing the backend: options, the batch,
// the training loop with its `step <i> loss <value>` lines, checkpoints,
// saving the trained model. Errors print one line and exit non-zero on
// every rank.
//
//===----------------------------------------------------------------------===//
#ifndef ONNX2SOAP_RUNTIME_PROGRAM_MAIN_H
#define ONNX2SOAP_RUNTIME_PROGRAM_MAIN_H

#include "Comm.h"
#include "Plan.h"
#include <functional>
#include <memory>

namespace onnx2soap::rt::program {

/// How the program gets its backend and communication: the CPU build
/// passes the oneDNN backend and MPI, the CUDA build cuDNN and NCCL.
struct Platform {
  /// The backend for this rank (LocalRank: the rank's index on its node).
  std::function<std::unique_ptr<Backend>(int LocalRank, int Threads)>
      CreateBackend;
  std::function<std::unique_ptr<Comm>(int *Argc, char ***Argv,
                                      const CommOptions &, Backend &)>
      CreateComm;
};

/// The program: parses Argv, trains, returns the exit code.
int trainMain(const Plan &P, const Platform &Platform, int Argc, char **Argv);

} // namespace onnx2soap::rt::program

#endif
