//===- runtime_lib/program/Dataset.cpp - Dataset folders ------------------===//
//
// See Dataset.h. Rows of a batch are consecutive samples until the dataset
// wraps around, so a box reads at most two runs of whole rows (one pread
// each for external data) and cuts its other dims out of them.
//
//===----------------------------------------------------------------------===//
#include "Dataset.h"
#include "../Error.h"
#include "../HostBox.h"
#include <optional>

namespace onnx2soap::rt::program {

struct Dataset::Source {
  DatasetFile Spec;
  std::string Path;
  HostTensor InMemory;              ///< the whole file, when it holds data
  std::optional<FileReader> Reader; ///< else its external data file
  uint64_t Offset = 0;
  size_t RowBytes = 0; ///< one sample
};

std::vector<DatasetFile> datasetFiles(const Plan &P) {
  std::vector<DatasetFile> Files;
  auto Add = [&](std::string FileName, int32_t Tensor) {
    const TensorInfo &Info = P.Tensors[Tensor];
    if (Info.SampleDim != 0)
      fail("--data", "'" + std::string(Info.Name) + "' holds its samples " +
                         "along dim " + std::to_string(Info.SampleDim) +
                         " (time-major), a dataset folder along dim 0; give " +
                         "the batch with --inputs and --labels");
    Files.push_back({std::move(FileName), Info.Name, Info.Type,
                     std::vector<int64_t>(Info.Dims, Info.Dims + Info.Rank)});
  };
  for (int32_t K = 0; K < P.DataInputs.Size; ++K)
    Add("input_" + std::to_string(K) + ".pb", P.DataInputs[K]);
  if (P.Labels >= 0)
    Add("labels.pb", P.Labels);
  return Files;
}

namespace {

std::string describe(DType Type, const std::vector<int64_t> &Dims) {
  return std::string(dtypeName(Type)) + " " + formatDims(Dims);
}

} // namespace

Dataset::Dataset(const std::string &Dir, std::vector<DatasetFile> Files) {
  for (DatasetFile &Spec : Files) {
    auto S = std::make_unique<Source>();
    S->Path = Dir + "/" + Spec.FileName;
    if (Spec.BatchDims.empty())
      fail("--data", S->Path + ": '" + Spec.TensorName +
                         "' is a scalar; a dataset needs a batch dim");
    TensorFileRef Ref = openTensorFile(S->Path);
    const HostTensor &V = Ref.Value;
    std::vector<int64_t> Want = Spec.BatchDims;
    Want[0] = V.Dims.empty() ? 0 : V.Dims[0];
    if (V.Type != Spec.Type || V.Dims != Want || Want[0] < 1) {
      std::string Text = dtypeName(Spec.Type) + std::string(" [N");
      for (size_t I = 1; I < Spec.BatchDims.size(); ++I)
        Text += "," + std::to_string(Spec.BatchDims[I]);
      fail("--data", S->Path + ": '" + Spec.TensorName + "' must be " + Text +
                         "] with N >= 1 samples (the model takes " +
                         describe(Spec.Type, Spec.BatchDims) +
                         " per step), the file holds " +
                         describe(V.Type, V.Dims));
    }
    if (Sources.empty())
      Samples = V.Dims[0];
    else if (V.Dims[0] != Samples)
      fail("--data", S->Path + " holds " + std::to_string(V.Dims[0]) +
                         " samples, " + Sources[0]->Path + " " +
                         std::to_string(Samples));
    S->RowBytes = dtypeSize(V.Type);
    for (size_t I = 1; I < V.Dims.size(); ++I)
      S->RowBytes *= static_cast<size_t>(V.Dims[I]);
    if (Ref.External) {
      S->Reader.emplace(Ref.DataPath);
      S->Offset = Ref.Offset;
    } else {
      S->InMemory = std::move(Ref.Value);
    }
    S->Spec = std::move(Spec);
    Sources.push_back(std::move(S));
  }
}

Dataset::~Dataset() = default;

void Dataset::readBox(size_t K, int64_t First, const int64_t *Origin,
                      const int64_t *Extent, char *Out) const {
  const Source &S = *Sources[K];
  const std::vector<int64_t> &Dims = S.Spec.BatchDims;
  int Rank = static_cast<int>(Dims.size());
  size_t ElementSize = dtypeSize(S.Spec.Type);
  size_t OutRowBytes = ElementSize;
  for (int D = 1; D < Rank; ++D)
    OutRowBytes *= static_cast<size_t>(Extent[D]);
  std::vector<int64_t> RunDims = Dims, RunOrigin(Origin, Origin + Rank),
                       RunExtent(Extent, Extent + Rank);
  RunOrigin[0] = 0;
  std::vector<char> Rows;
  int64_t Done = 0;
  while (Done < Extent[0]) {
    int64_t Sample = ((First + Origin[0] + Done) % Samples + Samples) % Samples;
    int64_t Count = std::min(Extent[0] - Done, Samples - Sample);
    const char *Data;
    if (S.Reader) {
      Rows.resize(static_cast<size_t>(Count) * S.RowBytes);
      S.Reader->readAt(S.Offset + static_cast<uint64_t>(Sample) * S.RowBytes,
                       Rows.data(), Rows.size());
      Data = Rows.data();
    } else {
      Data = S.InMemory.Bytes.data() + static_cast<size_t>(Sample) * S.RowBytes;
    }
    RunDims[0] = RunExtent[0] = Count;
    copyHostBox(Out + static_cast<size_t>(Done) * OutRowBytes, Data, RunDims,
                RunOrigin.data(), RunExtent.data(), Rank, ElementSize);
    Done += Count;
  }
}

} // namespace onnx2soap::rt::program
