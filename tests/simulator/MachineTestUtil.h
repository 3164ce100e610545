//===- tests/simulator/MachineTestUtil.h - Machine helpers ----*- C++ -*-===//
//
// Helpers of the machine model's tests (MachineTest.cpp, ClusterFileTest.cpp):
// a cluster loaded or the test failed, JSON as text, a route's hops by name,
// and the checks every machine must pass (well-formed routes, the canonical
// JSON form reading back to itself).
//
//===----------------------------------------------------------------------===//
#ifndef ONNX2SOAP_TESTS_SIMULATOR_MACHINETESTUTIL_H
#define ONNX2SOAP_TESTS_SIMULATOR_MACHINETESTUTIL_H

#include "simulator/Machine.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"
#include "gtest/gtest.h"
#include <string>
#include <vector>

namespace onnx2soap::simulator::test {

inline Machine mustLoad(llvm::StringRef Name) {
  auto M = Machine::load(Name);
  if (!M) {
    ADD_FAILURE() << "cannot load " << Name.str() << ": "
                  << llvm::toString(M.takeError());
    return cantFail(Machine::preset("cpu:1"));
  }
  return std::move(*M);
}

inline std::string text(const llvm::json::Value &V) {
  std::string S;
  llvm::raw_string_ostream OS(S);
  OS << llvm::formatv("{0:2}", V);
  return OS.str();
}

/// The endpoints a route visits after its source, by name.
inline std::vector<std::string> hops(const Machine &M, DeviceId A, DeviceId B) {
  std::vector<std::string> Names;
  for (LinkId L : M.route(A, B))
    Names.push_back(M.endpoint(M.link(L).To).Name);
  return Names;
}

/// Every route starts at its source, is connected, ends at its target and
/// passes through no other device.
inline void expectWellFormedRoutes(const Machine &M) {
  for (DeviceId A = 0; A < M.numDevices(); ++A)
    for (DeviceId B = 0; B < M.numDevices(); ++B) {
      llvm::ArrayRef<LinkId> R = M.route(A, B);
      if (A == B) {
        EXPECT_TRUE(R.empty());
        continue;
      }
      ASSERT_FALSE(R.empty()) << A << "->" << B;
      EndpointId At = A;
      for (LinkId L : R) {
        ASSERT_EQ(M.link(L).From, At) << M.Name << " " << A << "->" << B;
        At = M.link(L).To;
        if (At != B) {
          EXPECT_NE(M.endpoint(At).Kind, EndpointKind::Device)
              << M.Name << ": route " << A << "->" << B << " crosses "
              << M.endpoint(At).Name;
        }
      }
      EXPECT_EQ(At, B);
    }
}

inline void expectRoundTrip(const Machine &M) {
  llvm::json::Value First = M.toJson();
  auto Back = Machine::fromJsonValue(First, "canonical");
  ASSERT_TRUE(static_cast<bool>(Back))
      << M.Name << ": " << llvm::toString(Back.takeError()) << "\n"
      << text(First);
  EXPECT_EQ(text(Back->toJson()), text(First)) << M.Name;
  ASSERT_EQ(Back->numDevices(), M.numDevices());
  ASSERT_EQ(Back->numLinks(), M.numLinks());
  for (LinkId L = 0; L < M.numLinks(); ++L)
    EXPECT_EQ(Back->link(L).Name, M.link(L).Name) << M.Name;
  for (DeviceId A = 0; A < M.numDevices(); ++A)
    for (DeviceId B = 0; B < M.numDevices(); ++B)
      EXPECT_EQ(hops(*Back, A, B), hops(M, A, B)) << M.Name;
}

} // namespace onnx2soap::simulator::test

#endif
