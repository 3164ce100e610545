//===- ir/JsonReader.h - JSON files read with paths in errors --*- C++ -*-===//
//
// The files users write by hand (clusters, profiles, strategies) are read
// through JsonReader: every error is one line naming the file and the JSON
// path of what is wrong ("cluster.json: nodes[0].links[1]: expected a
// number"), and an unknown key names the closest known one.
//
//===----------------------------------------------------------------------===//
#ifndef ONNX2SOAP_IR_JSONREADER_H
#define ONNX2SOAP_IR_JSONREADER_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"
#include <optional>
#include <string>

namespace onnx2soap::ir {

/// How deep arrays and objects may nest in a file parseJson() reads: far
/// more than any file of ours needs, far less than llvm::json's recursive
/// parser takes before it overflows the stack.
constexpr unsigned MaxJsonDepth = 256;

/// Text parsed as JSON, or "<Where>: not valid JSON: line L, column C:
/// <what>", also for nesting deeper than MaxJsonDepth; and refused when an
/// object has a key twice (llvm::json keeps the last silently).
llvm::Expected<llvm::json::Value> parseJson(llvm::StringRef Text,
                                            llvm::StringRef Where);

/// Which numbers a field takes.
enum class Sign { Positive, NonNegative };

/// The magnitudes a figure in a user's file may have, 0 aside: within them
/// what the planner makes of the figures (bytes over a bandwidth, FLOPs
/// over a peak, their sums over an iteration) stays finite; a bandwidth of
/// 1e-320 GB/s made iteration times infinite and the JSON written invalid.
/// (figureProblem's messages spell them.)
constexpr double MinFigure = 1e-12, MaxFigure = 1e15;

/// What is wrong with D as a figure of sign S ("must be greater than 0",
/// "is too small (at least 1e-12)", ...), or "" when nothing is.
std::string figureProblem(double D, Sign S);

class JsonReader {
public:
  /// Where: the file's name, the first thing each error says.
  explicit JsonReader(llvm::StringRef Where) : Where(Where.str()) {}

  /// "<Where>: <Path>: <Message>" ("<Where>: <Message>" at the root).
  llvm::Error error(const llvm::Twine &Path, const llvm::Twine &Message) const;
  /// Path's member Key and element I ("a.b", "a[3]").
  static std::string key(const std::string &Path, llvm::StringRef Key);
  static std::string index(const std::string &Path, size_t I);

  llvm::Expected<const llvm::json::Object *>
  object(const llvm::json::Value &V, const std::string &Path) const;
  /// An error for the alphabetically first key of O that is not Known (so
  /// the message does not depend on the object's hash order), naming the
  /// known key within edit distance 3 when there is one, else all of them.
  llvm::Error checkKeys(const llvm::json::Object &O, const std::string &Path,
                        llvm::ArrayRef<llvm::StringRef> Known) const;
  /// O's finite number Key of sign S; Default when missing, if given.
  llvm::Expected<double>
  number(const llvm::json::Object &O, const std::string &Path,
         llvm::StringRef Key, Sign S,
         std::optional<double> Default = std::nullopt) const;
  /// O's array Key; null when missing and not Required.
  llvm::Expected<const llvm::json::Array *> array(const llvm::json::Object &O,
                                                  const std::string &Path,
                                                  llvm::StringRef Key,
                                                  bool Required) const;

protected:
  std::string Where;
};

} // namespace onnx2soap::ir

#endif
