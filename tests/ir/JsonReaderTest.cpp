//===- tests/ir/JsonReaderTest.cpp - JSON text read from users' files -----===//
//
// parseJson(): what llvm::json::parse reads, errors as "line L, column C",
// and nesting too deep for its recursive parser refused before it starts
// (100,000 brackets overflowed the stack of every command that reads a
// cluster, profile or strategy file).
//
//===----------------------------------------------------------------------===//
#include "ir/JsonReader.h"
#include "gtest/gtest.h"
#include <string>

using namespace onnx2soap;

namespace {

std::string errorOf(llvm::StringRef Text) {
  auto Value = ir::parseJson(Text, "f.json");
  if (Value)
    return "";
  return llvm::toString(Value.takeError());
}

TEST(JsonReader, ParsesWhatLlvmParses) {
  auto Value = ir::parseJson("{\"a\": [1, {\"b\": \"[{\"}]}", "f.json");
  ASSERT_TRUE(static_cast<bool>(Value)) << llvm::toString(Value.takeError());
  const llvm::json::Array *A = Value->getAsObject()->getArray("a");
  ASSERT_NE(A, nullptr);
  auto B = (*A)[1].getAsObject()->getString("b");
  ASSERT_TRUE(B.hasValue());
  EXPECT_EQ(*B, "[{");
}

TEST(JsonReader, ErrorsNameTheLineAndColumn) {
  EXPECT_EQ(errorOf(""), "f.json: not valid JSON: line 1, column 1: "
                         "Unexpected EOF");
  EXPECT_EQ(errorOf("{\n  \"a\": [1,\n  2?]}"),
            "f.json: not valid JSON: line 3, column 4: Expected , or ] after "
            "array element");
}

TEST(JsonReader, NestingDeeperThanTheLimitIsRefused) {
  unsigned Limit = ir::MaxJsonDepth;
  std::string AtLimit = std::string(Limit, '[') + std::string(Limit, ']');
  EXPECT_EQ(errorOf(AtLimit), "");
  std::string Over = "{\"a\":\n" + std::string(Limit, '[') + "]";
  EXPECT_EQ(errorOf(Over), "f.json: not valid JSON: line 2, column " +
                               std::to_string(Limit) + ": nested more than " +
                               std::to_string(Limit) + " deep");
  // Far too deep for a recursive parser: refused, not a crash.
  std::string Deep(100000, '[');
  EXPECT_NE(errorOf(Deep + std::string(100000, ']')).find("nested more than"),
            std::string::npos);
  // Brackets inside strings, escaped quotes included, are text.
  std::string InString = "[\"\\\"" + std::string(1000, '[') + "\"]";
  EXPECT_EQ(errorOf(InString), "");
}

// llvm::json keeps the last of a repeated key: a file that says one thing
// twice is refused, as an unknown key is (a pasted block must not silently
// win over the one above it).
TEST(JsonReader, ARepeatedKeyIsRefused) {
  EXPECT_EQ(errorOf("{\"a\": 1,\n \"b\": {\"a\": 2}, \"a\" : 3}"),
            "f.json: line 2, column 17: the key \"a\" again in the same "
            "object");
  // The same key in other objects, and keys' text in strings and arrays.
  EXPECT_EQ(
      errorOf("{\"a\": {\"a\": [\"a\", \"a:\"]}, \"b\": \"\\\"a\\\": 1\"}"),
      "");
}

} // namespace
