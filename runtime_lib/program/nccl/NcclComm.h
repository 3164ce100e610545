//===- runtime_lib/program/nccl/NcclComm.h - NCCL Comm ----------*- C++ -*-===//
//
// The CUDA backend's Comm: NCCL on device memory, bootstrapped over MPI.
// Built only with the CUDA backend (ONNX2SOAP_CUDA, target
// onnx2soap_runtime_nccl). It compiles and links on the development machine
// but has never run there (no GPU); see docs/generated-program.md.
//
//===----------------------------------------------------------------------===//
#ifndef ONNX2SOAP_RUNTIME_PROGRAM_NCCL_NCCLCOMM_H
#define ONNX2SOAP_RUNTIME_PROGRAM_NCCL_NCCLCOMM_H

#include "../Comm.h"

namespace onnx2soap::rt::program {

/// NCCL among all ranks of the MPI job, on CudaStream (a cudaStream_t; null
/// is the legacy default stream). Calls MPI_Init when MPI is not
/// initialized yet (and MPI_Finalize on destruction in that case). The
/// caller selects this rank's device (cudaSetDevice) first. send, recv and
/// allReduceSum take device pointers and return when the stream has
/// finished the operation; the reductions over ranks and barrier use MPI on
/// the host.
std::unique_ptr<Comm> createNcclComm(int *Argc, char ***Argv,
                                     const CommOptions &Options,
                                     void *CudaStream);

} // namespace onnx2soap::rt::program

#endif
