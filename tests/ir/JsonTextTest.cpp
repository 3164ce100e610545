//===- tests/ir/JsonTextTest.cpp - JSON as people read it -----------------===//
//
// Numbers in their shortest spelling that reads back as the same double;
// everything else (key order, layout, integers, strings) as LLVM prints it.
//
//===----------------------------------------------------------------------===//
#include "ir/JsonText.h"
#include "llvm/Support/FormatVariadic.h"
#include "gtest/gtest.h"
#include <cmath>
#include <cstdlib>

using namespace onnx2soap;

TEST(JsonText, NumbersInTheFewestDigitsThatReadBack) {
  EXPECT_EQ(ir::shortestNumber(21.2), "21.2");
  EXPECT_EQ(ir::shortestNumber(4.37), "4.37");
  EXPECT_EQ(ir::shortestNumber(0.1 + 0.2), "0.30000000000000004");
  EXPECT_EQ(ir::shortestNumber(1e-7), "1e-07");
  EXPECT_EQ(ir::shortestNumber(-2.5), "-2.5");
  for (double D : {21.2, 0.1 + 0.2, 1.0 / 3, 6.02214076e23, 5e-324, -1e308})
    EXPECT_EQ(std::strtod(ir::shortestNumber(D).c_str(), nullptr), D) << D;
}

TEST(JsonText, LaysOutAsLlvmDoesAndReadsBackTheSameValues) {
  llvm::json::Value V = llvm::json::Object{
      {"zeta", llvm::json::Array{1, 2.5, "x", nullptr, true}},
      {"alpha", llvm::json::Object{{"b", 64.0}, {"a", int64_t(1) << 40}}},
      {"peak", 21.2}};
  // LLVM's text differs only in 21.2's spelling.
  std::string Llvm = llvm::formatv("{0:2}", V).str();
  std::string Ours = ir::jsonText(V);
  EXPECT_NE(Llvm.find("21.199999999999999"), std::string::npos);
  std::string Expected = Llvm;
  Expected.replace(Expected.find("21.199999999999999"), 18, "21.2");
  EXPECT_EQ(Ours, Expected);
  EXPECT_EQ(ir::jsonText(V, 0), R"({"alpha":{"a":1099511627776,"b":64},)"
                                R"("peak":21.2,"zeta":[1,2.5,"x",null,true]})");
  auto Back = llvm::json::parse(Ours);
  ASSERT_TRUE(static_cast<bool>(Back)) << llvm::toString(Back.takeError());
  EXPECT_EQ(*Back, V);
}

// LLVM writes NaN and infinities as `nan` and `inf`, which no JSON reader
// (ours included) takes back; JSON's null stands for them, as JavaScript
// writes them.
TEST(JsonText, NumbersThatAreNotFiniteAreNull) {
  llvm::json::Value V = llvm::json::Object{
      {"nan", std::nan("")},
      {"times", llvm::json::Array{1.5, HUGE_VAL, -HUGE_VAL}}};
  std::string Text = ir::jsonText(V, 0);
  EXPECT_EQ(Text, R"({"nan":null,"times":[1.5,null,null]})");
  auto Back = llvm::json::parse(Text);
  EXPECT_TRUE(static_cast<bool>(Back)) << llvm::toString(Back.takeError());
}
