//===- tests/runtime_lib/ElementwiseTestUtil.h - Helpers ------*- C++ -*-===//
//
// The fixture and helpers of the elementwise kernels' tests
// (ElementwiseTest.cpp, BroadcastTest.cpp): inputs kept away from kinks,
// the numpy-broadcast reference loop, and a relative comparison.
//
//===----------------------------------------------------------------------===//
#ifndef ONNX2SOAP_TESTS_RUNTIME_LIB_ELEMENTWISETESTUTIL_H
#define ONNX2SOAP_TESTS_RUNTIME_LIB_ELEMENTWISETESTUTIL_H

#include "KernelTestUtil.h"
#include <algorithm>
#include <cmath>
#include <functional>

namespace onnx2soap::rt::test {

class ElementwiseTest : public ::testing::Test {
protected:
  std::unique_ptr<Backend> B = createCpuBackend(1);
  std::mt19937 Rng{7};
};

inline OpAttrs noAttrs() { return OpAttrs(); }

/// A float tensor with values in [Low, High) whose magnitude is at least
/// MinAbs (so kinks at 0 stay out of reach of the finite differences).
inline HostTensor awayFromZero(std::vector<int64_t> Dims, std::mt19937 &Rng,
                               double MinAbs = 0.1, double High = 1.5) {
  HostTensor T = f32(std::move(Dims));
  std::uniform_real_distribution<double> D(MinAbs, High);
  std::bernoulli_distribution Sign(0.5);
  for (int64_t I = 0; I < T.size(); ++I)
    T.set(I, Sign(Rng) ? D(Rng) : -D(Rng));
  return T;
}

/// Numpy-broadcast reference: Out[i] = Fn(values of Ins at i).
inline void referenceBroadcast(
    const std::vector<const HostTensor *> &Ins, HostTensor &Out,
    const std::function<double(const std::vector<double> &)> &Fn) {
  int Rank = static_cast<int>(Out.Dims.size());
  std::vector<int64_t> Index(Rank, 0);
  for (int64_t Flat = 0; Flat < Out.size(); ++Flat) {
    int64_t Rest = Flat;
    for (int D = Rank - 1; D >= 0; --D) {
      Index[D] = Rest % Out.Dims[D];
      Rest /= Out.Dims[D];
    }
    std::vector<double> Values;
    for (const HostTensor *In : Ins) {
      int InRank = static_cast<int>(In->Dims.size());
      int64_t Offset = 0;
      for (int D = 0; D < InRank; ++D) {
        int64_t Dim = In->Dims[D];
        int64_t I = Dim == 1 ? 0 : Index[Rank - InRank + D];
        Offset = Offset * Dim + I;
      }
      Values.push_back(In->at(Offset));
    }
    Out.set(Flat, Fn(Values));
  }
}

inline void expectClose(const HostTensor &Actual, const HostTensor &Expected,
                        double RelTol = 1e-6) {
  ASSERT_EQ(Actual.size(), Expected.size());
  for (int64_t I = 0; I < Actual.size(); ++I)
    EXPECT_NEAR(Actual.at(I), Expected.at(I),
                RelTol * std::max(1.0, std::fabs(Expected.at(I))))
        << "element " << I;
}

} // namespace onnx2soap::rt::test

#endif
