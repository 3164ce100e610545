//===- runtime_lib/program/Dataset.h - Dataset folders ----------*- C++ -*-===//
//
// The training data of a real run (`train --data DIR`): one ONNX TensorProto
// file per model input (`input_0.pb`, `input_1.pb`, ...) and `labels.pb`
// when the loss takes labels, each holding N samples along dim 0: the model
// input's dims with its batch dim replaced by N. Step s (counted from 1 over
// the whole run, resumed steps included) trains on samples (s-1)*B ...
// s*B-1 modulo N, B being the global batch. A file holds its data
// (raw_data: protobuf caps a file at 2 GiB, and every rank loads it whole)
// or points at ONNX external data, from which every rank reads only the
// rows of its own boxes. docs/generated-program.md describes the format.
//
//===----------------------------------------------------------------------===//
#ifndef ONNX2SOAP_RUNTIME_PROGRAM_DATASET_H
#define ONNX2SOAP_RUNTIME_PROGRAM_DATASET_H

#include "AtomicFile.h"
#include "Plan.h"
#include "TensorFile.h"
#include <memory>
#include <string>
#include <vector>

namespace onnx2soap::rt::program {

/// One file of a dataset folder and the global batch tensor it feeds.
struct DatasetFile {
  std::string FileName;   ///< "input_0.pb", "labels.pb"
  std::string TensorName; ///< the model's name, for messages
  DType Type = DType::Float32;
  std::vector<int64_t> BatchDims; ///< [B, ...], B the global batch
};

/// The files a plan's data inputs and labels read: input_<k>.pb in the
/// order of Plan::DataInputs, then labels.pb when the plan has labels.
std::vector<DatasetFile> datasetFiles(const Plan &P);

class Dataset {
public:
  /// Opens every file in Dir and checks it against its DatasetFile: the
  /// element type, dims [N, B's sample dims...], the same N >= 1 in all.
  /// Errors are RuntimeErrors naming `--data` and the file.
  Dataset(const std::string &Dir, std::vector<DatasetFile> Files);
  ~Dataset();

  int64_t samples() const { return Samples; }
  size_t files() const { return Sources.size(); }

  /// Copies the box [Origin, Origin + Extent) of file K's global batch
  /// whose row r is sample (First + r) mod N into the dense Out.
  void readBox(size_t K, int64_t First, const int64_t *Origin,
               const int64_t *Extent, char *Out) const;

private:
  struct Source;
  std::vector<std::unique_ptr<Source>> Sources;
  int64_t Samples = 0;
};

} // namespace onnx2soap::rt::program

#endif
