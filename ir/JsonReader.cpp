//===- ir/JsonReader.cpp - JSON files read with paths in errors -----------===//
//
// See JsonReader.h.
//
//===----------------------------------------------------------------------===//
#include "ir/JsonReader.h"
#include "ir/Error.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FormatVariadic.h"
#include <cmath>

namespace onnx2soap::ir {
namespace json = llvm::json;

/// No offset (StringRef::npos's value; naming npos itself where it is bound
/// to a reference defines it again in this object, which an ASan link of
/// LLVM 14's Support library refuses as a duplicate).
static constexpr size_t NotFound = ~size_t(0);

/// Where the first bracket past MaxJsonDepth is, as an offset into Text;
/// NotFound if none. Brackets in strings do not count.
static size_t tooDeep(llvm::StringRef Text) {
  unsigned Depth = 0;
  bool InString = false, Escaped = false;
  for (size_t I = 0; I < Text.size(); ++I) {
    char C = Text[I];
    if (InString) {
      if (Escaped)
        Escaped = false;
      else if (C == '\\')
        Escaped = true;
      else if (C == '"')
        InString = false;
    } else if (C == '"') {
      InString = true;
    } else if (C == '[' || C == '{') {
      if (++Depth > MaxJsonDepth)
        return I;
    } else if ((C == ']' || C == '}') && Depth > 0) {
      --Depth;
    }
  }
  return NotFound;
}

/// Where the first key that its object has already is, in Text that
/// llvm::json parsed (which keeps the last of them silently), and the key;
/// NotFound if none. Keys are compared as written.
static std::pair<size_t, std::string> repeatedKey(llvm::StringRef Text) {
  // One entry per open array (null) or object (its keys so far).
  std::vector<std::unique_ptr<llvm::StringSet<>>> Open;
  for (size_t I = 0; I < Text.size(); ++I) {
    char C = Text[I];
    if (C == '{') {
      Open.push_back(std::make_unique<llvm::StringSet<>>());
    } else if (C == '[') {
      Open.push_back(nullptr);
    } else if (C == '}' || C == ']') {
      Open.pop_back();
    } else if (C == '"') {
      size_t Start = I++;
      for (; Text[I] != '"'; ++I)
        if (Text[I] == '\\')
          ++I;
      size_t After = Text.find_first_not_of(" \t\r\n", I + 1);
      if (After != NotFound && Text[After] == ':' && !Open.empty() &&
          Open.back()) {
        llvm::StringRef Key = Text.slice(Start + 1, I);
        if (!Open.back()->insert(Key).second)
          return {Start, Key.str()};
      }
    }
  }
  return {NotFound, ""};
}

/// Offset At of Text as "line L, column C" (columns from 1).
static std::string lineAndColumn(llvm::StringRef Text, size_t At) {
  llvm::StringRef Before = Text.take_front(At);
  size_t LineStart = Before.rfind('\n');
  size_t Column = LineStart == NotFound ? At + 1 : At - LineStart;
  return llvm::formatv("line {0}, column {1}", Before.count('\n') + 1, Column);
}

/// llvm::json's "[L:C, byte=B]: what" as "line L, column C: what".
static std::string describeParseError(llvm::Error E) {
  std::string Message = llvm::toString(std::move(E));
  llvm::StringRef Rest(Message);
  llvm::StringRef Line, Column;
  if (Rest.consume_front("[")) {
    std::tie(Line, Rest) = Rest.split(':');
    std::tie(Column, Rest) = Rest.split(',');
    llvm::StringRef Byte, What;
    std::tie(Byte, What) = Rest.split("]: ");
    unsigned Col;
    // llvm::json's column is the offset just past the offending character
    // from the line's start: that character's column counted from 1, except
    // at an empty line's end.
    if (!Line.empty() && !Column.getAsInteger(10, Col) && !What.empty())
      return llvm::formatv("line {0}, column {1}: {2}", Line, std::max(Col, 1u),
                           What)
          .str();
  }
  return Message;
}

llvm::Expected<json::Value> parseJson(llvm::StringRef Text,
                                      llvm::StringRef Where) {
  size_t At = tooDeep(Text);
  if (At != NotFound)
    return fail(llvm::formatv("{0}: not valid JSON: {1}: nested more than {2} "
                              "deep",
                              Where, lineAndColumn(Text, At), MaxJsonDepth));
  auto Value = json::parse(Text);
  if (!Value)
    return fail(Where +
                ": not valid JSON: " + describeParseError(Value.takeError()));
  auto [Repeated, Key] = repeatedKey(Text);
  if (Repeated != NotFound)
    return fail(llvm::formatv("{0}: {1}: the key \"{2}\" again in the same "
                              "object",
                              Where, lineAndColumn(Text, Repeated), Key));
  return Value;
}

std::string figureProblem(double D, Sign S) {
  if (!std::isfinite(D))
    return "expected a number";
  if (S == Sign::Positive && !(D > 0))
    return "must be greater than 0";
  if (S == Sign::NonNegative && D < 0)
    return "must not be negative";
  if (D != 0 && D < MinFigure)
    return "is too small (at least 1e-12)";
  if (D > MaxFigure)
    return "is too large (at most 1e15)";
  return "";
}

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
  if (!D)
    return error(key(Path, Key), "expected a number");
  std::string Problem = figureProblem(*D, S);
  if (!Problem.empty())
    return error(key(Path, Key), Problem);
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
