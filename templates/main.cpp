// The entry point of this generated training program (onnx2soap @VERSION@):
// it picks the backend and the communication library, then hands over to
// runtime_lib/program/Main.cpp, which parses the options and walks the plan
// in plan.cpp. See README.md for building and launching.
#include "runtime_lib/program/Main.h"
#include "plan.h"

#if TRAIN_BACKEND_CUDA
#include "runtime_lib/cuda/CudaBackend.h"
#include "runtime_lib/program/nccl/NcclComm.h"
#endif

using namespace onnx2soap::rt;

int main(int argc, char **argv) {
  program::Platform Platform;
#if TRAIN_BACKEND_CUDA
  // One rank per GPU: the rank's index on its node picks the device;
  // convolutions keep to the workspace the planner counted.
  Platform.CreateBackend = [](int LocalRank, int) {
    return createCudaBackend(LocalRank,
                             size_t(trainingPlan().ConvWorkspaceBytes));
  };
  Platform.CreateComm = [](int *Argc, char ***Argv,
                           const program::CommOptions &Options, Backend &B) {
    // NCCL runs on the legacy default stream, which does not order the
    // backend's (non-blocking) stream: the runner synchronizes the backend
    // before every send and all-reduce, and waits for NCCL to finish.
    (void)B;
    return program::createNcclComm(Argc, Argv, Options, nullptr);
  };
#else
  Platform.CreateBackend = [](int, int Threads) {
    return createCpuBackend(Threads);
  };
  Platform.CreateComm = [](int *Argc, char ***Argv,
                           const program::CommOptions &Options, Backend &) {
    return program::createMpiComm(Argc, Argv, Options);
  };
#endif
  return program::trainMain(trainingPlan(), Platform, argc, argv);
}
