//===- tests/conformance/BackendRunTest.cpp - ONNX backend tests, values --===//
//
// Runs the ONNX backend node tests through the reference executor on the
// CPU backend (what `onnx2soap run` does) and compares every output with the
// stored reference (|got - want| <= atol + rtol |want|, rtol 1e-3, atol
// 1e-4, as `run` defaults to). Tests the importer refuses are skipped (the
// shape suite classifies them). The allowlist (run_allowlist.txt) only
// grows: every test on it must pass, and a test that passes but is not on
// it is reported so it can be added.
//
//===----------------------------------------------------------------------===//
#include "executor/Executor.h"
#include "onnx_import/ConstTensor.h"
#include "onnx_import/Importer.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "gtest/gtest.h"
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <set>

using namespace onnx2soap;

namespace {

constexpr double Rtol = 1e-3, Atol = 1e-4;

/// Test names from a list file: one per line ("name" or "name: reason"),
/// '#' comments.
std::set<std::string> readList(const char *File) {
  std::set<std::string> Names;
  std::ifstream In(std::string(ONNX2SOAP_SOURCE_DIR "/tests/conformance/") +
                   File);
  EXPECT_TRUE(In.good()) << File;
  std::string Line;
  while (std::getline(In, Line))
    if (!Line.empty() && Line[0] != '#')
      Names.insert(Line.substr(0, Line.find(':')));
  return Names;
}

std::optional<onnx::TensorProto> readProto(const std::string &Path) {
  auto Buffer = llvm::MemoryBuffer::getFile(Path);
  if (!Buffer)
    return std::nullopt;
  onnx::TensorProto T;
  if (!T.ParseFromArray((*Buffer)->getBufferStart(),
                        static_cast<int>((*Buffer)->getBufferSize())) ||
      !T.has_data_type())
    return std::nullopt;
  return T;
}

/// The values of a tensor as doubles (via the importer's decoder).
std::optional<std::vector<double>> values(const onnx::TensorProto &T) {
  auto C = onnx_import::decodeTensor(T, T.raw_data(), T.has_raw_data());
  if (!C) {
    llvm::consumeError(C.takeError());
    return std::nullopt;
  }
  std::vector<double> V;
  for (int64_t I = 0; I < C->numElements(); ++I)
    V.push_back(C->floatAt(I));
  return V;
}

/// Runs one test; "" when it passes, "skip" when the importer refuses it,
/// else what went wrong.
std::string runOne(const std::string &Dir) {
  std::string Data = Dir + "/test_data_set_0";
  auto File = onnx_import::readModelFile(Dir + "/model.onnx");
  if (!File) {
    llvm::consumeError(File.takeError());
    return "skip";
  }
  std::set<std::string> Initializers;
  for (const onnx_import::Initializer &Init : File->Initializers)
    Initializers.insert(Init.Meta.name());
  std::vector<std::string> Names;
  for (const onnx::ValueInfoProto &In : File->Model.graph().input())
    if (!Initializers.count(In.name()))
      Names.push_back(In.name());
  onnx_import::ImportOptions Options;
  std::vector<onnx::TensorProto> Inputs;
  for (size_t I = 0; I < Names.size(); ++I) {
    auto T = readProto(llvm::formatv("{0}/input_{1}.pb", Data, I));
    if (!T)
      return "skip";
    Options.InputHints[Names[I]] = *T;
    Inputs.push_back(std::move(*T));
  }
  auto Model = onnx_import::importModel(Dir + "/model.onnx", Options);
  if (!Model) {
    llvm::consumeError(Model.takeError());
    return "skip";
  }
  const ir::Graph &G = Model->Graph;
  auto Backend = rt::createCpuBackend(1);
  auto Exec = executor::Executor::create(G, *Backend);
  if (!Exec)
    return llvm::toString(Exec.takeError());
  for (size_t I = 0; I < G.inputs().size(); ++I) {
    const onnx::TensorProto &T = Inputs[I];
    std::vector<char> Bytes;
    if (T.has_raw_data()) {
      Bytes.assign(T.raw_data().begin(), T.raw_data().end());
    } else {
      auto C = onnx_import::decodeTensor(T, {}, false);
      if (!C)
        return llvm::toString(C.takeError());
      Bytes = C->toBytes();
    }
    if (auto E = (*Exec)->setInput(G.inputs()[I], Bytes))
      return llvm::toString(std::move(E));
  }
  if (auto E = (*Exec)->forward())
    return llvm::toString(std::move(E));
  for (size_t I = 0; I < G.outputs().size(); ++I) {
    auto Want = readProto(llvm::formatv("{0}/output_{1}.pb", Data, I));
    if (!Want)
      return "skip";
    const ir::Tensor &T = G.tensor(G.outputs()[I]);
    std::vector<char> Got = (*Exec)->read(T.Id);
    onnx::TensorProto GotProto = *Want;
    GotProto.clear_raw_data();
    GotProto.clear_float_data();
    GotProto.clear_int32_data();
    GotProto.clear_int64_data();
    GotProto.clear_double_data();
    GotProto.clear_uint64_data();
    GotProto.set_raw_data(std::string(Got.begin(), Got.end()));
    auto A = values(GotProto), B = values(*Want);
    if (!A || !B || A->size() != B->size())
      return llvm::formatv("output {0}: {1} values, expected {2}", I,
                           A ? A->size() : 0, B ? B->size() : 0);
    for (size_t E = 0; E < A->size(); ++E) {
      double X = (*A)[E], Y = (*B)[E];
      if (std::isnan(X) && std::isnan(Y))
        continue;
      if (X == Y)
        continue;
      if (!(std::fabs(X - Y) <= Atol + Rtol * std::fabs(Y)))
        return llvm::formatv("output {0} element {1}: {2}, expected {3}", I, E,
                             X, Y);
    }
  }
  return "";
}

TEST(BackendRunTest, NodeTestsThroughTheReferenceExecutor) {
  std::set<std::string> Allowlist = readList("run_allowlist.txt");
  std::set<std::string> Known = readList("run_known_failures.txt");
  std::string Root = ONNX2SOAP_TESTDATA_DIR "/node";
  std::vector<std::string> Tests;
  std::error_code EC;
  for (llvm::sys::fs::directory_iterator It(Root, EC), End; It != End && !EC;
       It.increment(EC))
    Tests.push_back(llvm::sys::path::filename(It->path()).str());
  std::sort(Tests.begin(), Tests.end());
  ASSERT_FALSE(Tests.empty()) << "no ONNX backend tests under " << Root;

  unsigned Passed = 0, Skipped = 0;
  std::vector<std::string> NewlyPassing, Failing;
  bool Verbose = std::getenv("ONNX2SOAP_CONFORMANCE_VERBOSE");
  for (const std::string &Name : Tests) {
    std::string Outcome = runOne(Root + "/" + Name);
    if (Outcome == "skip") {
      ++Skipped;
      continue;
    }
    if (Outcome.empty()) {
      ++Passed;
      if (!Allowlist.count(Name))
        NewlyPassing.push_back(Name);
      continue;
    }
    Failing.push_back(Name + ": " + Outcome);
    EXPECT_FALSE(Allowlist.count(Name))
        << "allowlisted test fails: " << Name << ": " << Outcome;
    EXPECT_TRUE(Known.count(Name))
        << "test of a supported op fails without a listed reason: " << Name
        << ": " << Outcome;
  }
  std::cout << llvm::formatv("node tests through `run`: {0} pass, {1} fail, "
                             "{2} not imported (see the shape suite)\n",
                             Passed, Failing.size(), Skipped)
                   .str();
  for (const std::string &F : Failing)
    if (Verbose)
      std::cout << "  fails: " << F << "\n";
  for (const std::string &N : NewlyPassing)
    std::cout << "  passes but is not allowlisted: " << N << "\n";
  EXPECT_GE(Passed, Allowlist.size());
}

// Node tests made by tests/conformance/make_node_tests.py (ONNX's reference
// implementation computes their outputs) for ops the Debian test data covers
// thinly: every one must import and pass.
TEST(BackendRunTest, OurNodeTestsThroughTheReferenceExecutor) {
  std::string Root = ONNX2SOAP_SOURCE_DIR "/tests/conformance/node";
  std::vector<std::string> Tests;
  std::error_code EC;
  for (llvm::sys::fs::directory_iterator It(Root, EC), End; It != End && !EC;
       It.increment(EC))
    Tests.push_back(llvm::sys::path::filename(It->path()).str());
  std::sort(Tests.begin(), Tests.end());
  EXPECT_GE(Tests.size(), 12u) << "node tests missing under " << Root;
  for (const std::string &Name : Tests) {
    std::string Outcome = runOne(Root + "/" + Name);
    EXPECT_EQ(Outcome, "") << Name;
  }
}

} // namespace
