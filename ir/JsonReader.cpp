//===- ir/JsonReader.cpp - JSON files read with paths in errors -----------===//
//
// See JsonReader.h.
//
//===----------------------------------------------------------------------===//
#include "ir/JsonReader.h"
#include "ir/Error.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include <cmath>

namespace onnx2soap::ir {
namespace json = llvm::json;

llvm::Error JsonReader::error(const llvm::Twine &Path,
                              const llvm::Twine &Message) const {
  std::string Prefix = Where + ": ";
  std::string At = Path.str();
  if (!At.empty())
    Prefix += At + ": ";
  return fail(Prefix + Message);
}

std::string JsonReader::key(const std::string &Path, llvm::StringRef Key) {
  return Path.empty() ? Key.str() : Path + "." + Key.str();
}

std::string JsonReader::index(const std::string &Path, size_t I) {
  return Path + "[" + std::to_string(I) + "]";
}

llvm::Expected<const json::Object *>
JsonReader::object(const json::Value &V, const std::string &Path) const {
  if (const json::Object *O = V.getAsObject())
    return O;
  return error(Path, "expected an object");
}

llvm::Error JsonReader::checkKeys(const json::Object &O,
                                  const std::string &Path,
                                  llvm::ArrayRef<llvm::StringRef> Known) const {
  std::optional<std::string> Unknown;
  for (const auto &Entry : O) {
    llvm::StringRef Key = Entry.first;
    if (!llvm::is_contained(Known, Key) && (!Unknown || Key < *Unknown))
      Unknown = Key.str();
  }
  if (!Unknown)
    return llvm::Error::success();
  std::string Message = "unknown key '" + *Unknown + "'";
  llvm::StringRef Closest;
  unsigned Best = 4;
  for (llvm::StringRef K : Known) {
    unsigned Distance = llvm::StringRef(*Unknown).edit_distance(K, true, Best);
    if (Distance < Best) {
      Best = Distance;
      Closest = K;
    }
  }
  if (!Closest.empty())
    Message += " (did you mean '" + Closest.str() + "'?)";
  else
    Message += " (expected one of: " + llvm::join(Known, ", ") + ")";
  return error(Path, Message);
}

llvm::Expected<double> JsonReader::number(const json::Object &O,
                                          const std::string &Path,
                                          llvm::StringRef Key, Sign S,
                                          std::optional<double> Default) const {
  const json::Value *V = O.get(Key);
  if (!V) {
    if (Default)
      return *Default;
    return error(Path, "missing '" + Key + "'");
  }
  std::optional<double> D;
  if (auto Got = V->getAsNumber())
    D = *Got;
  if (!D || !std::isfinite(*D))
    return error(key(Path, Key), "expected a number");
  if (S == Sign::Positive && !(*D > 0))
    return error(key(Path, Key), "must be greater than 0");
  if (S == Sign::NonNegative && *D < 0)
    return error(key(Path, Key), "must not be negative");
  return *D;
}

llvm::Expected<const json::Array *> JsonReader::array(const json::Object &O,
                                                      const std::string &Path,
                                                      llvm::StringRef Key,
                                                      bool Required) const {
  const json::Value *V = O.get(Key);
  if (!V) {
    if (Required)
      return error(Path, "missing '" + Key + "'");
    return nullptr;
  }
  if (const json::Array *A = V->getAsArray())
    return A;
  return error(key(Path, Key), "expected an array");
}

} // namespace onnx2soap::ir
