//===- tests/runtime_lib/KernelTestUtil.h - Running one kernel --*- C++ -*-===//
//
// Host tensors, one-op forward runs and the gradient check every op kind's
// backward kernel must pass: d(sum(W * op(x)))/dx by central differences
// against the backward kernel, for random x and random output weights W.
//
//===----------------------------------------------------------------------===//
#ifndef ONNX2SOAP_TESTS_RUNTIME_LIB_KERNELTESTUTIL_H
#define ONNX2SOAP_TESTS_RUNTIME_LIB_KERNELTESTUTIL_H

#include "runtime_lib/Backend.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include <cmath>
#include <cstring>
#include <random>

namespace onnx2soap::rt::test {

/// A tensor in host memory, doubling as device memory on the CPU backend.
struct HostTensor {
  DType Type = DType::Float32;
  std::vector<int64_t> Dims;
  std::vector<unsigned char> Bytes;

  HostTensor() = default;
  HostTensor(DType Type, std::vector<int64_t> D)
      : Type(Type), Dims(std::move(D)) {
    int64_t N = 1;
    for (int64_t X : Dims)
      N *= X;
    Bytes.assign(N * dtypeSize(Type), 0);
  }
  int64_t size() const { return Bytes.size() / dtypeSize(Type); }
  template <typename T> T *data() {
    return reinterpret_cast<T *>(Bytes.data());
  }
  template <typename T> const T *data() const {
    return reinterpret_cast<const T *>(Bytes.data());
  }
  TensorView view() { return TensorView::contiguous(Type, Dims, Bytes.data()); }
  /// Element I as double (f32, f64, i32, i64, bool).
  double at(int64_t I) const {
    switch (Type) {
    case DType::Float32:
      return data<float>()[I];
    case DType::Float64:
      return data<double>()[I];
    case DType::Int32:
      return data<int32_t>()[I];
    case DType::Int64:
      return data<int64_t>()[I];
    case DType::Bool:
    case DType::UInt8:
      return data<uint8_t>()[I];
    default:
      ADD_FAILURE() << "HostTensor::at: unsupported type";
      return 0;
    }
  }
  void set(int64_t I, double V) {
    switch (Type) {
    case DType::Float32:
      data<float>()[I] = static_cast<float>(V);
      break;
    case DType::Float64:
      data<double>()[I] = V;
      break;
    case DType::Int32:
      data<int32_t>()[I] = static_cast<int32_t>(V);
      break;
    case DType::Int64:
      data<int64_t>()[I] = static_cast<int64_t>(V);
      break;
    case DType::Bool:
    case DType::UInt8:
      data<uint8_t>()[I] = static_cast<uint8_t>(V);
      break;
    default:
      ADD_FAILURE() << "HostTensor::set: unsupported type";
    }
  }
};

inline HostTensor f32(std::vector<int64_t> Dims,
                      std::initializer_list<double> Values = {}) {
  HostTensor T(DType::Float32, std::move(Dims));
  int64_t I = 0;
  for (double V : Values)
    T.set(I++, V);
  return T;
}

inline HostTensor i64(std::vector<int64_t> Dims,
                      std::initializer_list<int64_t> Values = {}) {
  HostTensor T(DType::Int64, std::move(Dims));
  int64_t I = 0;
  for (int64_t V : Values)
    T.set(I++, static_cast<double>(V));
  return T;
}

/// Fills a float tensor with uniform values in [Low, High).
inline void randomize(HostTensor &T, std::mt19937 &Rng, double Low = -1,
                      double High = 1) {
  std::uniform_real_distribution<double> D(Low, High);
  for (int64_t I = 0; I < T.size(); ++I)
    T.set(I, D(Rng));
}

/// Runs one forward call; Outputs must have their shapes and types set.
inline void runForward(Backend &B, OpKind Kind, const OpAttrs &Attrs,
                       std::vector<HostTensor *> Inputs,
                       std::vector<HostTensor *> Outputs, int64_t Step = 1) {
  OpCall Call{Kind, Attrs, "test", {}, {}, Step};
  for (HostTensor *T : Inputs)
    Call.Inputs.push_back(T ? T->view() : TensorView::absent());
  for (HostTensor *T : Outputs)
    Call.Outputs.push_back(T->view());
  B.forward(Call);
}

/// Checks the backward kernel of one op against central differences of
/// L = sum_k sum(W_k * output_k) for every float input listed in Check.
/// Epsilon and tolerance are stated per call: float32 kernels need an
/// epsilon around 1e-2 and a relative tolerance around 1e-2.
inline void gradCheck(Backend &B, OpKind Kind, const OpAttrs &Attrs,
                      std::vector<HostTensor *> Inputs,
                      std::vector<HostTensor> OutputShapes,
                      std::vector<unsigned> Check, double Epsilon = 1e-2,
                      double Tolerance = 1e-2, unsigned Seed = 1) {
  std::mt19937 Rng(Seed);
  std::vector<HostTensor> Outputs = OutputShapes, Weights = OutputShapes;
  for (HostTensor &W : Weights)
    if (W.Type == DType::Float32 || W.Type == DType::Float64)
      randomize(W, Rng);
    else
      W.Bytes.assign(W.Bytes.size(), 0); // integer outputs carry no gradient
  auto Loss = [&]() {
    std::vector<HostTensor *> Out;
    for (HostTensor &O : Outputs)
      Out.push_back(&O);
    runForward(B, Kind, Attrs, Inputs, Out);
    double L = 0;
    for (size_t K = 0; K < Outputs.size(); ++K)
      if (Outputs[K].Type == DType::Float32 ||
          Outputs[K].Type == DType::Float64)
        for (int64_t I = 0; I < Outputs[K].size(); ++I)
          L += Weights[K].at(I) * Outputs[K].at(I);
    return L;
  };
  Loss(); // forward operands for the backward call
  OpCall Call{Kind, Attrs, "test", {}, {}, 1};
  for (HostTensor *T : Inputs)
    Call.Inputs.push_back(T ? T->view() : TensorView::absent());
  for (HostTensor &O : Outputs)
    Call.Outputs.push_back(O.view());
  std::vector<TensorView> OutGrads;
  for (HostTensor &W : Weights)
    OutGrads.push_back(W.view());
  std::vector<HostTensor> Grads;
  Grads.reserve(Inputs.size());
  std::vector<TensorView> InGrads(Inputs.size(), TensorView::absent());
  for (size_t I = 0; I < Inputs.size(); ++I)
    Grads.push_back(Inputs[I] ? HostTensor(Inputs[I]->Type, Inputs[I]->Dims)
                              : HostTensor());
  for (unsigned I : Check)
    InGrads[I] = Grads[I].view();
  B.backward(Call, OutGrads, InGrads);

  for (unsigned I : Check) {
    HostTensor &X = *Inputs[I];
    for (int64_t E = 0; E < X.size(); ++E) {
      double Saved = X.at(E);
      X.set(E, Saved + Epsilon);
      double Plus = Loss();
      X.set(E, Saved - Epsilon);
      double Minus = Loss();
      X.set(E, Saved);
      double Numeric = (Plus - Minus) / (2 * Epsilon);
      double Analytic = Grads[I].at(E);
      EXPECT_NEAR(Analytic, Numeric,
                  Tolerance * std::max(1.0, std::fabs(Numeric)))
          << opKindName(Kind) << ": d/d input " << I << " element " << E;
    }
  }
}

} // namespace onnx2soap::rt::test

#endif
