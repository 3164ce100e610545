//===- tests/runtime_lib_cuda/KernelTypesCheck.h - Types --------*- C++ -*-===//
//
// runtime_lib/KernelTypes.h against a backend's kernels: every kernel case
// (KernelCases.h) with its typed operands (the table's TypedInput and every
// operand and output of the same type) retyped to each element type, run
// forward and, where the case has gradients, backward; and, for a kind with
// a second typed operand (Pow's exponent), that operand alone retyped. A
// kernel must take exactly the types the table lists and refuse the others
// with a RuntimeError (backward: the floating-point types). The CPU backend
// runs it in tests/runtime_lib/KernelTypesTest.cpp, the CUDA backend in
// KernelTypesTest.cpp here, where a GPU is present.
//
//===----------------------------------------------------------------------===//
#ifndef ONNX2SOAP_TESTS_RUNTIME_LIB_CUDA_KERNELTYPESCHECK_H
#define ONNX2SOAP_TESTS_RUNTIME_LIB_CUDA_KERNELTYPESCHECK_H

#include "KernelCases.h"
#include "runtime_lib/Error.h"
#include "runtime_lib/KernelTypes.h"
#include <optional>
#include <string>

namespace onnx2soap::rt::test {
namespace kerneltypes {

inline constexpr unsigned NumTypes = static_cast<unsigned>(DType::Bool) + 1;

/// T as element type To: floats keep their values, f16 and bf16 are zeros
/// (only whether a kernel takes them is checked), integers are 1, 2, 3, ...
/// in turn (no division by zero), bools are x > 0.
inline HostTensor retyped(const HostTensor &T, DType To) {
  HostTensor R(To, T.Dims);
  for (int64_t I = 0; I < R.size(); ++I) {
    switch (To) {
    case DType::Float32:
    case DType::Float64:
      R.set(I, T.at(I));
      break;
    case DType::Float16:
    case DType::BFloat16:
      break;
    case DType::Bool:
      R.set(I, T.at(I) > 0);
      break;
    default: {
      uint64_t K = I % 3 + 1;
      std::memcpy(R.Bytes.data() + I * dtypeSize(To), &K, dtypeSize(To));
    }
    }
  }
  return R;
}

/// A gradient flows only through these; backward is never called at
/// others (and some kernels' backward is then a no-op, not a refusal).
inline bool isFloat(DType Type) {
  return Type == DType::Float32 || Type == DType::Float64 ||
         Type == DType::Float16 || Type == DType::BFloat16;
}

/// Host tensors on backend B (the CPU backend reads host memory directly).
struct OnDevice {
  Backend &B;
  std::vector<void *> Buffers;
  std::vector<TensorView> Views;
  OnDevice(Backend &B, std::vector<HostTensor> &Host) : B(B) {
    for (HostTensor &T : Host) {
      void *Data = B.allocate(std::max<size_t>(T.Bytes.size(), 1));
      B.copyFromHost(Data, T.Bytes.data(), T.Bytes.size());
      Buffers.push_back(Data);
      TensorView V = T.view();
      V.Data = Data;
      Views.push_back(V);
    }
  }
  ~OnDevice() {
    for (void *Data : Buffers)
      B.deallocate(Data);
  }
};

/// Whether B's kernels take C at type Type: forward, and backward where
/// the case has gradients (nullopt: it has none).
struct Taken {
  bool Forward = false;
  std::optional<bool> Backward;
  std::string Why;
};

/// Only: retype that input alone (the table's OtherInput), not the typed
/// operands.
inline Taken tryCase(Backend &B, Case C, DType Type,
                     std::optional<unsigned> Only = std::nullopt) {
  if (Only) {
    C.Inputs[*Only] = retyped(C.Inputs[*Only], Type);
  } else {
    unsigned Typed = kernelTypes(C.Kind).TypedInput;
    DType From = C.Inputs[Typed].Type;
    for (HostTensor &T : C.Inputs)
      if (T.Type == From)
        T = retyped(T, Type);
    for (HostTensor &T : C.Outputs)
      if (T.Type == From)
        T = retyped(T, Type);
  }
  OnDevice In(B, C.Inputs), Out(B, C.Outputs);
  OpCall Call{C.Kind,    C.Attrs, C.Name,         In.Views,
              Out.Views, 1,       C.GlobalOffset, C.GlobalDims};
  Taken Result;
  try {
    B.forward(Call);
    B.synchronize();
    Result.Forward = true;
  } catch (const RuntimeError &E) {
    Result.Why = E.what();
    return Result;
  }
  if (C.GradInputs.empty())
    return Result;
  std::vector<HostTensor> OutGrads = C.Outputs, InGrads = C.Inputs;
  OnDevice OutGrad(B, OutGrads), InGrad(B, InGrads);
  std::vector<TensorView> Wanted(C.Inputs.size(), TensorView::absent());
  for (unsigned I : C.GradInputs)
    Wanted[I] = InGrad.Views[I];
  try {
    B.backward(Call, OutGrad.Views, Wanted);
    B.synchronize();
    Result.Backward = true;
  } catch (const RuntimeError &E) {
    Result.Backward = false;
    Result.Why = E.what();
  }
  return Result;
}

inline void expectTableTypes(Backend &B) {
  for (const Case &C : cases()) {
    SCOPED_TRACE(C.Name);
    const KernelTypes &Want = kernelTypes(C.Kind);
    ASSERT_NE(Want.Forward, 0) << opKindName(C.Kind) << " has no row";
    ASSERT_LT(Want.TypedInput, C.Inputs.size());
    for (unsigned T = 0; T < NumTypes; ++T) {
      DType Type = static_cast<DType>(T);
      Taken Got = tryCase(B, C, Type);
      EXPECT_EQ(Got.Forward, contains(Want.Forward, Type))
          << "forward at " << dtypeName(Type) << ": " << Got.Why;
      if (Got.Backward && isFloat(Type)) {
        EXPECT_EQ(*Got.Backward, contains(Want.Backward, Type))
            << "backward at " << dtypeName(Type) << ": " << Got.Why;
      }
    }
    if (Want.OtherInput < 0 ||
        static_cast<size_t>(Want.OtherInput) >= C.Inputs.size())
      continue;
    for (unsigned T = 0; T < NumTypes; ++T) {
      DType Type = static_cast<DType>(T);
      Taken Got = tryCase(B, C, Type, Want.OtherInput);
      EXPECT_EQ(Got.Forward, contains(Want.Other, Type))
          << "forward with input " << Want.OtherInput << " at "
          << dtypeName(Type) << ": " << Got.Why;
    }
  }
}

} // namespace kerneltypes
} // namespace onnx2soap::rt::test

#endif
