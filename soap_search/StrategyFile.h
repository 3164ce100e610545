//===- soap_search/StrategyFile.h - Strategies on disk ---------*- C++ -*-===//
//
// A strategy file (docs/strategy-format.md) records one config per op, keyed
// by op name, together with what the configs are only meaningful for: the
// model (file name and SHA-256 of its bytes), the import settings that decide
// op names and shapes (batch, bound dims, RNN unrolling, pattern fusion, the
// loss) and the cluster (name, device count, SHA-256 of its canonical JSON).
// Reading checks all of these against the model and cluster at hand and
// refuses, with a message that names the file and the difference, a strategy
// made for something else. Writing is deterministic: the same strategy and
// target give the same bytes (keys sorted, numbers as JSON prints them, one
// trailing newline).
//
//===----------------------------------------------------------------------===//
#ifndef ONNX2SOAP_SOAP_SEARCH_STRATEGYFILE_H
#define ONNX2SOAP_SOAP_SEARCH_STRATEGYFILE_H

#include "simulator/Strategy.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace onnx2soap::soap_search {

/// The "format" field of every strategy file.
constexpr llvm::StringLiteral StrategyFormatName = "onnx2soap-strategy";
/// The version this build writes and the only one it reads.
constexpr int64_t StrategyFormatVersion = 1;

/// Import settings that change the IR's op names or shapes (the CLI's
/// --batch, --dim, --unroll-rnn, --no-fuse, --loss).
struct ModelSettings {
  std::optional<int64_t> Batch;
  /// --dim bindings; compared and written sorted by name.
  std::vector<std::pair<std::string, int64_t>> Dims;
  bool UnrollRnn = false;
  bool FusePatterns = true;
  /// ir::lossKindName of the loss.
  std::string Loss = "cross-entropy";
};

/// What a strategy is made for: written into the file, and checked against
/// when one is read.
struct StrategyTarget {
  std::string ModelFile;   ///< the model's file name, without its folder
  std::string ModelSha256; ///< lowercase hex of the .onnx bytes
  ModelSettings Settings;
  std::string ClusterName;
  unsigned NumDevices = 0;
  std::string ClusterSha256; ///< of clusterText(Machine)
};

/// What the simulator predicted for the strategy; informational only (the
/// reader ignores it).
struct StrategyPrediction {
  double Time = 0;
  std::vector<double> PeakMemory; ///< bytes per device
  bool Fits = true;
  std::string Optimizer; ///< "sgd", "momentum", "adam"
  /// The model of communication simulated: "program" or "flexflow"
  /// (SimOptions::SerialCommunication).
  std::string CommModel = "program";
};

/// SHA-256 in pieces, through OpenSSL's libcrypto (which uses the CPU's SHA
/// instructions where there are any: `compile` hashes a model, its weight
/// shards and a plan of hundreds of MB, 5 x faster than LLVM's SHA256).
class Sha256 {
public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256 &) = delete;
  Sha256 &operator=(const Sha256 &) = delete;
  void update(llvm::StringRef Bytes);
  /// The 32-byte digest; the hasher is spent afterwards.
  std::array<uint8_t, 32> final();
  /// final() in lowercase hex.
  std::string finalHex();

private:
  void *Ctx; // EVP_MD_CTX
};

/// Lowercase hex SHA-256 of Bytes.
std::string sha256Hex(llvm::StringRef Bytes);
/// The canonical text of a machine that strategy files hash: its
/// Machine::toJson() printed compactly (keys sorted).
std::string clusterText(const simulator::Machine &M);
/// A target for a model file (read and hashed here), its settings and the
/// machine. The error names the file when it cannot be read.
llvm::Expected<StrategyTarget> makeTarget(llvm::StringRef ModelPath,
                                          ModelSettings Settings,
                                          const simulator::Machine &M);

/// The key of op Op in a file: its name, or, when the name is empty or
/// shared with another op, "<name>#op<id>".
std::string strategyKey(const ir::Graph &G, ir::OpId Op);

/// The file's text; GradientBucket, when given, is the gradient bucket
/// size (simulator::SimOptions::GradientBucketBytes) the strategy was
/// planned with.
std::string writeStrategy(const ir::Graph &G, const simulator::Strategy &S,
                          const StrategyTarget &Target,
                          const StrategyPrediction &Predicted,
                          std::optional<double> GradientBucket = std::nullopt);

/// Parses a strategy file's Text (Where names it in errors) and checks it
/// against the graph and target: format and version, model, settings,
/// cluster, every op present exactly once and known, every config valid
/// (simulator::checkStrategy).
/// The file's gradient bucket size, when it has one, goes to
/// *GradientBucket (when not null).
llvm::Expected<simulator::Strategy>
parseStrategy(llvm::StringRef Text, llvm::StringRef Where, const ir::Graph &G,
              const StrategyTarget &Target,
              std::optional<double> *GradientBucket = nullptr);
/// Reads the file at Path, then parseStrategy.
llvm::Expected<simulator::Strategy>
readStrategy(llvm::StringRef Path, const ir::Graph &G,
             const StrategyTarget &Target,
             std::optional<double> *GradientBucket = nullptr);

} // namespace onnx2soap::soap_search

#endif
