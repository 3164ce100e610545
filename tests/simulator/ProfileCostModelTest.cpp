//===- tests/simulator/ProfileCostModelTest.cpp - Measured op times -------===//
//
// The profile key is a file format shared with generated programs, so its
// exact text is pinned here; lookups hit and miss as the key says and miss
// to the fallback; profile files with mistakes are refused with the file and
// the JSON path.
//
//===----------------------------------------------------------------------===//
#include "simulator/ProfileCostModel.h"
#include "../ir/IrTestUtil.h"
#include "simulator/Strategy.h"

using namespace onnx2soap;
using namespace onnx2soap::simulator;
using namespace onnx2soap::ir::test;
using ir::OpKind;
using ir::TensorRole;

namespace {

/// Round numbers that no profile entry below has.
class FixedCost : public CostModel {
public:
  TaskTimes opTimes(const PartitionShape &, const DeviceType &) const override {
    return {7, 9};
  }
  double updateTime(OptimizerKind, double, ir::DType,
                    const DeviceType &) const override {
    return 0.5;
  }
};

/// x[8,3,32,32] -> Conv(w[16,3,3,3], b[16], pad 1) -> BatchNorm.
struct ConvGraph {
  ir::Graph G;
  ir::OpId Conv = 0, Norm = 0;
  ConvGraph() {
    ir::TensorId X = G.addTensor("x", f32({8, 3, 32, 32}), TensorRole::Input);
    G.tensor(X).BatchDim = 0;
    G.addInput(X);
    ir::TensorId W =
        G.addTensor("w", f32({16, 3, 3, 3}), TensorRole::Parameter);
    ir::TensorId B = G.addTensor("b", f32({16}), TensorRole::Parameter);
    ir::TensorId Y = add(G, OpKind::Conv, {X, W, B},
                         attrs({{"kernel_shape", ints({3, 3})},
                                {"pads", ints({1, 1, 1, 1})},
                                {"strides", ints({1, 1})},
                                {"dilations", ints({1, 1})},
                                {"group", int64_t(1)}}),
                         "conv");
    Conv = G.tensor(Y).Producer;
    ir::TensorId Scale = G.addTensor("s", f32({16}), TensorRole::Parameter);
    ir::TensorId Shift = G.addTensor("t", f32({16}), TensorRole::Parameter);
    ir::TensorId Mean = G.addTensor("m", f32({16}), TensorRole::State);
    ir::TensorId Var = G.addTensor("v", f32({16}), TensorRole::State);
    ir::TensorId Z = add(G, OpKind::BatchNorm, {Y, Scale, Shift, Mean, Var},
                         attrs({{"epsilon", 1e-5}, {"momentum", 0.9}}), "bn");
    Norm = G.tensor(Z).Producer;
    G.addOutput(Z);
  }
  /// Partition P of op Op cut Degrees ways.
  std::string key(ir::OpId Op, std::initializer_list<uint32_t> Degrees,
                  unsigned P = 0) const {
    ParallelConfig C;
    C.Degrees.assign(Degrees.begin(), Degrees.end());
    const ir::Op &O = G.op(Op);
    ir::Region Out = outputRegion(G, O, C, P);
    return profileKey({G, O, Out, reductionSlice(G, O, C, P)});
  }
};

TEST(ProfileKeyTest, ConvKeyIsPinned) {
  ConvGraph C;
  EXPECT_EQ(C.key(C.Conv, {1, 1, 1, 1}),
            "Conv|i0=f32[8,3,32,32]|i1=f32[16,3,3,3]|i2=f32[16]"
            "|o0=f32[8,16,32,32]|r=3|dilations=1,1|group=1|kernel_shape=3,3"
            "|pads=1,1,1,1|strides=1,1");
  // A batch half: the regions it reads and writes.
  EXPECT_EQ(C.key(C.Conv, {2, 1, 1, 1}, 1),
            "Conv|i0=f32[4,3,32,32]|i1=f32[16,3,3,3]|i2=f32[16]"
            "|o0=f32[4,16,32,32]|r=3|dilations=1,1|group=1|kernel_shape=3,3"
            "|pads=1,1,1,1|strides=1,1");
  // Both halves of the batch are the same shape; channel halves read half
  // the weights.
  EXPECT_EQ(C.key(C.Conv, {2, 1, 1, 1}, 0), C.key(C.Conv, {2, 1, 1, 1}, 1));
  EXPECT_THAT(C.key(C.Conv, {1, 2, 1, 1}),
              ::testing::HasSubstr("|i1=f32[8,3,3,3]|i2=f32[8]|o0=f32[8,8,"));
}

TEST(ProfileKeyTest, ValueOnlyAttributesAreLeftOut) {
  ConvGraph C;
  std::string Key = C.key(C.Norm, {1, 1, 1, 1});
  EXPECT_THAT(Key, ::testing::StartsWith("BatchNorm|i0=f32[8,16,32,32]|"));
  EXPECT_THAT(Key, ::testing::Not(::testing::HasSubstr("epsilon")));
  EXPECT_THAT(Key, ::testing::Not(::testing::HasSubstr("momentum")));
  EXPECT_TRUE(profileIgnoredAttribute("seed"));
  EXPECT_FALSE(profileIgnoredAttribute("pads"));
}

TEST(ProfileKeyTest, PlainValuesAbsentInputsAndEscapes) {
  ir::TensorType A = f32({2, 3});
  ir::TensorType Scalar = i64({});
  const ir::TensorType *Inputs[] = {&A, nullptr, &Scalar};
  ir::TensorType Outputs[] = {f32({2, 3})};
  ir::Attributes Attrs = attrs({{"mode", std::string("a|b=c,d%e f")},
                                {"scales", ir::FloatList{0.5, 1.0 / 3}},
                                {"alpha", 0.25}});
  EXPECT_EQ(profileKey("Pad", Inputs, Outputs, 0, Attrs),
            "Pad|i0=f32[2,3]|i1=-|i2=i64[]|o0=f32[2,3]|r=0"
            "|mode=a%7Cb%3Dc%2Cd%25e%20f|scales=0.5,0.333333333");
}

Profile oneEntryProfile(const std::string &Key, bool WithBackward = true) {
  Profile P;
  P.DeviceType = "cpu";
  ProfileEntry E;
  E.Key = Key;
  E.ForwardSeconds = 1e-3;
  if (WithBackward)
    E.BackwardSeconds = 2e-3;
  E.Samples = 5;
  P.Entries.push_back(E);
  return P;
}

TEST(ProfileCostModelTest, HitsMissesAndFallsBack) {
  ConvGraph C;
  FixedCost Fallback;
  ProfileCostModel Cost(Fallback);
  ASSERT_FALSE(static_cast<bool>(
      Cost.add(oneEntryProfile(C.key(C.Conv, {2, 1, 1, 1})), "p.json")));
  DeviceType Cpu, Gpu;
  Cpu.Name = "cpu";
  Gpu.Name = "P100";
  const ir::Op &O = C.G.op(C.Conv);
  ParallelConfig Halves;
  Halves.Degrees = {2, 1, 1, 1};
  for (unsigned P = 0; P < 2; ++P) {
    ir::Region Out = outputRegion(C.G, O, Halves, P);
    PartitionShape Shape{C.G, O, Out, reductionSlice(C.G, O, Halves, P)};
    TaskTimes Hit = Cost.opTimes(Shape, Cpu);
    EXPECT_EQ(Hit.Forward, 1e-3);
    EXPECT_EQ(Hit.Backward, 2e-3);
    // Another device type: no profile for it.
    EXPECT_EQ(Cost.opTimes(Shape, Gpu).Forward, 7);
  }
  // The whole op: another shape.
  ParallelConfig Whole = ParallelConfig::single(4, 0);
  ir::Region Out = outputRegion(C.G, O, Whole, 0);
  TaskTimes Miss =
      Cost.opTimes({C.G, O, Out, reductionSlice(C.G, O, Whole, 0)}, Cpu);
  EXPECT_EQ(Miss.Forward, 7);
  EXPECT_EQ(Miss.Backward, 9);
  // Another kind than any entry's.
  const ir::Op &Norm = C.G.op(C.Norm);
  Out = outputRegion(C.G, Norm, Whole, 0);
  EXPECT_EQ(
      Cost.opTimes({C.G, Norm, Out, reductionSlice(C.G, Norm, Whole, 0)}, Cpu)
          .Forward,
      7);
  EXPECT_EQ(Cost.updateTime(OptimizerKind::Adam, 10, ir::DType::Float32, Cpu),
            0.5);
  // One profile per device type.
  llvm::Error Twice = Cost.add(oneEntryProfile("Relu|x"), "q.json");
  ASSERT_TRUE(static_cast<bool>(Twice));
  EXPECT_THAT(llvm::toString(std::move(Twice)),
              ::testing::HasSubstr("q.json: a second profile for device type "
                                   "'cpu'"));
}

TEST(ProfileCostModelTest, MissingBackwardComesFromTheFallback) {
  ConvGraph C;
  FixedCost Fallback;
  ProfileCostModel Cost(Fallback);
  ASSERT_FALSE(static_cast<bool>(
      Cost.add(oneEntryProfile(C.key(C.Conv, {1, 1, 1, 1}), false), "p")));
  DeviceType Cpu;
  Cpu.Name = "cpu";
  const ir::Op &O = C.G.op(C.Conv);
  ParallelConfig Whole = ParallelConfig::single(4, 0);
  ir::Region Out = outputRegion(C.G, O, Whole, 0);
  TaskTimes T =
      Cost.opTimes({C.G, O, Out, reductionSlice(C.G, O, Whole, 0)}, Cpu);
  EXPECT_EQ(T.Forward, 1e-3);
  EXPECT_EQ(T.Backward, 9);
}

TEST(ProfileFileTest, RoundTripsSortedByKey) {
  Profile P = oneEntryProfile("Relu|i0=f32[4]|o0=f32[4]|r=0");
  ProfileEntry Second = P.Entries[0];
  Second.Key = "Conv|i0=f32[1]";
  Second.BackwardSeconds.reset();
  P.Entries.push_back(Second);
  std::string Text = llvm::formatv("{0}", P.toJson()).str();
  auto Read = Profile::fromJson(Text, "p.json");
  ASSERT_TRUE(static_cast<bool>(Read)) << llvm::toString(Read.takeError());
  EXPECT_EQ(Read->DeviceType, "cpu");
  ASSERT_EQ(Read->Entries.size(), 2u);
  EXPECT_EQ(Read->Entries[0].Key, "Conv|i0=f32[1]");
  EXPECT_FALSE(Read->Entries[0].BackwardSeconds.has_value());
  EXPECT_EQ(Read->Entries[1].Key, "Relu|i0=f32[4]|o0=f32[4]|r=0");
  EXPECT_EQ(Read->Entries[1].ForwardSeconds, 1e-3);
  EXPECT_EQ(Read->Entries[1].BackwardSeconds, 2e-3);
  EXPECT_EQ(Read->Entries[1].Samples, 5);
  EXPECT_EQ(llvm::formatv("{0}", Read->toJson()).str(), Text);
}

// Measured box copies: one copy of B bytes takes the table's time for B
// (interpolated as measured communication is), k boxes k times that of their
// mean size, adding half as long again; without a table, or on another
// device type, the fallback's.
TEST(ProfileFileTest, CopiesRoundTripAndTimeCopies) {
  Profile P = oneEntryProfile("Relu|i0=f32[4]|o0=f32[4]|r=0");
  P.Copies = CopyProfile{{1024, 1048576}, {2, 100}, 5};
  std::string Text = llvm::formatv("{0}", P.toJson()).str();
  EXPECT_THAT(Text, ::testing::HasSubstr(
                        R"("copies":{"samples":5,"sizes_bytes":[1024,1048576],)"
                        R"("times_us":[2,100]})"));
  auto Read = Profile::fromJson(Text, "p.json");
  ASSERT_TRUE(static_cast<bool>(Read)) << llvm::toString(Read.takeError());
  ASSERT_TRUE(Read->Copies.has_value());
  EXPECT_EQ(Read->Copies->Samples, 5);
  EXPECT_EQ(llvm::formatv("{0}", Read->toJson()).str(), Text);

  FixedCost Fallback;
  ProfileCostModel Cost(Fallback);
  ASSERT_FALSE(static_cast<bool>(Cost.add(std::move(*Read), "p.json")));
  DeviceType Cpu;
  Cpu.Name = "cpu";
  Cpu.MemoryBandwidth = 1e9;
  EXPECT_TRUE(Cost.timesCopies("cpu"));
  EXPECT_FALSE(Cost.timesCopies("P100"));
  // At or below the smallest size: its time; at the largest: its time.
  EXPECT_DOUBLE_EQ(Cost.copyTime(512, 1, false, Cpu), 2e-6);
  EXPECT_DOUBLE_EQ(Cost.copyTime(3 * 1048576, 3, false, Cpu), 300e-6);
  EXPECT_DOUBLE_EQ(Cost.copyTime(1048576, 1, true, Cpu), 150e-6);
  DeviceType Gpu = Cpu;
  Gpu.Name = "P100";
  EXPECT_DOUBLE_EQ(Cost.copyTime(1e6, 1, false, Gpu),
                   Fallback.copyTime(1e6, 1, false, Gpu));
}

struct BadFile {
  std::string Text;
  const char *Message;
};

TEST(ProfileFileTest, BadFiles) {
  const std::string Head =
      R"({"format":"onnx2soap-profile","version":1,"device_type":"cpu",)";
  const BadFile Cases[] = {
      {"[1,", "p.json: not valid JSON: line 1, column 3: "},
      {std::string(100000, '{'), "p.json: not valid JSON: line 1, column "
                                 "257: nested more than 256 deep"},
      {"[]", "p.json: expected a JSON object"},
      {R"({"format":"onnx2soap-strategy","version":1,"device_type":"cpu",)"
       R"("entries":[]})",
       "p.json: format: expected \"onnx2soap-profile\""},
      // Another kind of file is named as such, not by its first unknown key.
      {R"({"cluster":{},"format":"onnx2soap-strategy","model":{},"ops":{},)"
       R"("version":1})",
       "p.json: format: expected \"onnx2soap-profile\" (not a profile "
       "file?)"},
      {R"({"format":"onnx2soap-profile","version":2,"device_type":"cpu",)"
       R"("entries":[]})",
       "p.json: version: version 2 is not supported"},
      {R"({"format":"onnx2soap-profile","version":1,"entries":[]})",
       "p.json: device_type: expected the name of a device type"},
      {R"({"format":"onnx2soap-profile","version":1,"device_type":"cpu"})",
       "p.json: missing 'entries'"},
      {R"({"format":"onnx2soap-profile","version":1,"device_type":"cpu",)"
       R"("entries":[],"zeta":1,"extra":2})",
       "p.json: unknown key 'extra'"},
      {Head + R"("entries":[],"copies":[]})",
       "p.json: copies: expected an object"},
      {Head + R"("entries":[],"copies":{"sizes_bytes":[1,2],)" +
           R"("times_us":[1e-320,1],"samples":1}})",
       "p.json: copies.times_us[0]: is too small (at least 1e-12)"},
      {Head + R"("entries":[],"copies":{"sizes_bytes":[2,1],)" +
           R"("times_us":[1,1],"samples":1}})",
       "p.json: copies.sizes_bytes[1]: sizes must increase"},
      {Head + R"("entries":[],"copies":{"sizes_bytes":[1,4096.5],)" +
           R"("times_us":[1,1],"samples":1}})",
       "p.json: copies.sizes_bytes[1]: expected a whole number of bytes"},
      {Head + R"("entries":[],"copies":{"sizes_bytes":[1],)" +
           R"("times_us":[0],"samples":1}})",
       "p.json: copies.times_us[0]: expected a number greater than 0"},
      {Head + R"("entries":[],"copies":{"sizes_bytes":[1,2],)" +
           R"("times_us":[1],"samples":1}})",
       "p.json: copies.times_us: has 1 times for 2 sizes"},
      {Head + R"("entries":[],"copies":{"sizes_bytes":[1],"times_us":[1]}})",
       "p.json: copies: missing 'samples'"},
      {Head + R"("entries":[],"copies":{"sizes_bytes":[],)" +
           R"("times_us":[],"samples":1}})",
       "p.json: copies.sizes_bytes: expected 1 to "},
      {R"({"format":"onnx2soap-profile","version":"1","device_type":"cpu",)"
       R"("entries":[]})",
       "p.json: version: expected an integer"},
      {Head + R"("entries":[],"measured_with":"my laptop"})",
       "p.json: measured_with: expected an object"},
  };
  for (const BadFile &Case : Cases) {
    auto Read = Profile::fromJson(Case.Text, "p.json");
    ASSERT_FALSE(static_cast<bool>(Read)) << Case.Text;
    EXPECT_THAT(llvm::toString(Read.takeError()),
                ::testing::HasSubstr(Case.Message))
        << Case.Text;
  }
  const BadFile EntryCases[] = {
      {R"([3])", "p.json: entries[0]: expected an object"},
      {R"([{"forward_s":1,"samples":1}])", "entries[0]: missing 'key'"},
      {R"([{"key":"","forward_s":1,"samples":1}])",
       "entries[0].key: expected a non-empty string"},
      {R"([{"key":"Nope|i0=f32[1]","forward_s":1,"samples":1}])",
       "entries[0].key: unknown op kind 'Nope'"},
      {R"([{"key":"Relu","samples":1}])", "entries[0]: missing 'forward_s'"},
      {R"([{"key":"Relu","forward_s":"1","samples":1}])",
       "entries[0].forward_s: expected a number of seconds"},
      {R"([{"key":"Relu","forward_s":-1,"samples":1}])",
       "entries[0].forward_s: must be a finite, non-negative number"},
      {R"([{"key":"Relu","forward_s":1,"backward_s":true,"samples":1}])",
       "entries[0].backward_s: expected a number of seconds"},
      {R"([{"key":"Relu","forward_s":1}])", "entries[0]: missing 'samples'"},
      {R"([{"key":"Relu","forward_s":1,"samples":0}])",
       "entries[0].samples: expected a positive integer"},
      {R"([{"key":"Relu","forward_s":1,"samples":1,"fwd":2}])",
       "entries[0]: unknown key 'fwd'"},
      {R"([{"key":"Relu","forward_s":1,"samples":1},)"
       R"({"key":"Relu","forward_s":2,"samples":1}])",
       "entries[1].key: the same key as entries[0]"},
  };
  for (const BadFile &Case : EntryCases) {
    std::string Text = Head + R"("entries":)" + Case.Text + "}";
    auto Read = Profile::fromJson(Text, "p.json");
    ASSERT_FALSE(static_cast<bool>(Read)) << Text;
    EXPECT_THAT(llvm::toString(Read.takeError()),
                ::testing::HasSubstr(Case.Message))
        << Text;
  }
  auto Missing = Profile::fromFile("/nonexistent/profile.json");
  ASSERT_FALSE(static_cast<bool>(Missing));
  EXPECT_THAT(llvm::toString(Missing.takeError()),
              ::testing::HasSubstr("/nonexistent/profile.json: cannot read"));
}

} // namespace
