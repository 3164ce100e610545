//===- bench/ImportBench.cpp - In-process import microbenchmarks ----------===//
//
// Times onnx_import::importModel (read, check, shape inference) in-process,
// without the process start-up and JSON printing that bench/run.sh's
// whole-process figures include: on the graph-only samples, and on the models
// with weights from bench/make_models.sh when they are present
// (BENCH_MODELS, default build/bench-models). A second family times
// readModelFile alone, to split reading the protobuf from building the graph.
//
//===----------------------------------------------------------------------===//
#include "onnx_import/Importer.h"
#include "onnx_import/ModelReader.h"
#include "llvm/Support/FileSystem.h"
#include <benchmark/benchmark.h>
#include <cstdlib>
#include <string>

using namespace onnx2soap;

namespace {

std::string samplePath(const char *Name) {
  return std::string(ONNX2SOAP_SOURCE_DIR) + "/samples/" + Name + ".onnx";
}

std::string benchModelPath(const char *Name) {
  const char *Dir = std::getenv("BENCH_MODELS");
  std::string Base =
      Dir ? Dir : std::string(ONNX2SOAP_SOURCE_DIR) + "/build/bench-models";
  return Base + "/" + Name + ".onnx";
}

void runImport(benchmark::State &State, const std::string &Path) {
  if (!llvm::sys::fs::exists(Path)) {
    State.SkipWithError(
        ("missing " + Path + " (bench/make_models.sh)").c_str());
    return;
  }
  onnx_import::ImportOptions Options;
  Options.Batch = 1;
  uint64_t FileSize = 0;
  for (auto _ : State) {
    auto Model = onnx_import::importModel(Path, Options);
    if (!Model) {
      State.SkipWithError(llvm::toString(Model.takeError()).c_str());
      return;
    }
    FileSize = Model->FileSize;
    benchmark::DoNotOptimize(Model->Graph.numOps());
  }
  State.counters["file_MB"] = static_cast<double>(FileSize) / 1e6;
}

void runRead(benchmark::State &State, const std::string &Path) {
  if (!llvm::sys::fs::exists(Path)) {
    State.SkipWithError(
        ("missing " + Path + " (bench/make_models.sh)").c_str());
    return;
  }
  for (auto _ : State) {
    auto File = onnx_import::readModelFile(Path);
    if (!File) {
      State.SkipWithError(llvm::toString(File.takeError()).c_str());
      return;
    }
    benchmark::DoNotOptimize(File->Initializers.size());
  }
}

void BM_ImportSample(benchmark::State &State, const char *Name) {
  runImport(State, samplePath(Name));
}
void BM_ImportWithWeights(benchmark::State &State, const char *Name) {
  runImport(State, benchModelPath(Name));
}
void BM_ReadWithWeights(benchmark::State &State, const char *Name) {
  runRead(State, benchModelPath(Name));
}

} // namespace

BENCHMARK_CAPTURE(BM_ImportSample, inception_v3, "inception_v3")
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_ImportSample, resnet101, "resnet101")
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_ImportSample, bert_encoder, "bert_encoder")
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_ImportSample, nmt, "nmt")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_ImportWithWeights, inception_v3, "inception_v3")
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_ImportWithWeights, resnet101, "resnet101")
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_ReadWithWeights, inception_v3, "inception_v3")
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_ReadWithWeights, resnet101, "resnet101")
    ->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
