//===- codegen/PlanWeights.cpp - Initial weight shards of a ProgramPlan ---===//
//
// The initial values of every distinct box of a parameter, state or
// constant some rank holds: the model's own weights, or with --init random
// PyTorch's default initialization drawn from a seeded generator defined by
// its arithmetic alone, so every platform writes the same shards.
//
//===----------------------------------------------------------------------===//
#include "codegen/PlanBuilder.h"
#include "runtime_lib/HostBox.h"
#include "llvm/ADT/STLExtras.h"
#include <cmath>
#include <cstring>
#include <optional>
#include <thread>

namespace onnx2soap::codegen::detail {

/// SplitMix64 (Steele, Lea and Flood, "Fast splittable pseudorandom number
/// generators", OOPSLA 2014): a 64-bit state stepped by the golden ratio and
/// mixed; fast enough that drawing 24 M weights costs little, and defined
/// by its arithmetic alone, so every platform draws the same values.
class SplitMix64 {
public:
  explicit SplitMix64(uint64_t Seed) : State(Seed) {}
  uint64_t operator()() {
    uint64_t Z = (State += 0x9e3779b97f4a7c15ULL);
    Z = (Z ^ (Z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    Z = (Z ^ (Z >> 27)) * 0x94d049bb133111ebULL;
    return Z ^ (Z >> 31);
  }

private:
  uint64_t State;
};

/// uniform(-1/sqrt(fan_in), 1/sqrt(fan_in)) from a seeded generator, with
/// fan_in the product of the dims after the first (PyTorch's default for
/// linear and convolution weights; biases use their own length).
static std::vector<char> randomValues(const ir::Tensor &Value,
                                      SplitMix64 &Generator) {
  const ir::Shape &Dims = Value.Type.Dims;
  int64_t FanIn = 1;
  for (size_t D = 1; D < Dims.size(); ++D)
    FanIn *= Dims[D];
  if (Dims.size() == 1)
    FanIn = Dims[0];
  double Bound = 1.0 / std::sqrt(double(std::max<int64_t>(FanIn, 1)));
  int64_t Count = Value.Type.numElements();
  std::vector<char> Bytes(Value.Type.byteSize());
  for (int64_t I = 0; I < Count; ++I) {
    // 53 random bits -> [0, 1), portable across standard libraries.
    double Unit = double(Generator() >> 11) * (1.0 / 9007199254740992.0);
    double X = (2 * Unit - 1) * Bound;
    if (Value.Type.Type == ir::DType::Float64)
      reinterpret_cast<double *>(Bytes.data())[I] = X;
    else
      reinterpret_cast<float *>(Bytes.data())[I] = float(X);
  }
  return Bytes;
}

/// The op whose output T is, looking through Reshapes; nullptr for a tensor
/// no op computes.
static const ir::Op *producerThroughReshapes(const ir::Graph &G,
                                             ir::TensorId T) {
  for (const ir::Op &O : G.ops())
    if (llvm::is_contained(O.Outputs, T))
      return O.Kind == ir::OpKind::Reshape
                 ? producerThroughReshapes(G, O.Inputs[0])
                 : &O;
  return nullptr;
}

/// The value PyTorch's modules start a normalization's tensors at: scale
/// and running variance 1, shift and running mean 0.
static std::optional<double> normalizationDefault(const ir::Graph &G,
                                                  ir::TensorId Id) {
  for (const ir::Op &O : G.ops())
    for (unsigned Slot = 0; Slot < O.Inputs.size(); ++Slot) {
      if (O.Inputs[Slot] != Id)
        continue;
      if (O.Kind == ir::OpKind::BatchNorm && Slot >= 1)
        return Slot == 1 || Slot == 4 ? 1.0 : 0.0;
      if (O.Kind == ir::OpKind::LayerNorm && Slot >= 1)
        return Slot == 1 ? 1.0 : 0.0;
      // A per-channel scale reshaped and multiplied into a LayerNorm's
      // result: InstanceNormalization and GroupNormalization, and PyTorch's
      // export of GroupNorm.
      if (O.Kind != ir::OpKind::Reshape)
        continue;
      for (ir::OpId M : G.consumers(O.Outputs[0])) {
        const ir::Op &Mul = G.op(M);
        if (Mul.Kind != ir::OpKind::Mul)
          continue;
        ir::TensorId Other =
            Mul.Inputs[0] == O.Outputs[0] ? Mul.Inputs[1] : Mul.Inputs[0];
        const ir::Op *From = producerThroughReshapes(G, Other);
        if (From && From->Kind == ir::OpKind::LayerNorm)
          return 1.0;
      }
    }
  return std::nullopt;
}

static std::vector<char> filled(const ir::Tensor &Value, double X) {
  std::vector<char> Bytes(Value.Type.byteSize());
  for (int64_t I = 0; I < Value.Type.numElements(); ++I) {
    if (Value.Type.Type == ir::DType::Float64)
      reinterpret_cast<double *>(Bytes.data())[I] = X;
    else
      reinterpret_cast<float *>(Bytes.data())[I] = float(X);
  }
  return Bytes;
}

llvm::Error Builder::makeWeights() {
  Out.Weights.clear();
  // Each held tensor's whole value: a view of the model's bytes, or values
  // made here (--init random) kept in Made.
  std::map<ir::TensorId, llvm::ArrayRef<char>> Values;
  std::map<ir::TensorId, std::vector<char>> Made;
  // (tensor, origin, extent) -> offset: replicas share one copy.
  std::map<std::tuple<int32_t, std::vector<int64_t>, std::vector<int64_t>>,
           int64_t>
      Shared;
  // Random values: each tensor from its own generator, seeded with the
  // seed and the tensor's id, so they depend on neither the strategy nor
  // the order they are drawn in (two threads draw them).
  std::vector<const ir::Tensor *> Drawn;
  for (const ir::Tensor &Value : G.tensors()) {
    if (!isHeld(Value))
      continue;
    bool Float = Value.Type.Type == ir::DType::Float32 ||
                 Value.Type.Type == ir::DType::Float64;
    if (Options.Init == InitKind::Random && Float &&
        Value.Role != ir::TensorRole::Constant) {
      // Normalizations start at 1 / 0, other vectors (biases) at 0,
      // matrices and kernels uniform in +-1/sqrt(fan_in).
      std::vector<char> &V = Made[Value.Id];
      if (std::optional<double> X = normalizationDefault(G, Value.Id))
        V = filled(Value, *X);
      else if (Value.Type.rank() <= 1 || Value.Role == ir::TensorRole::State)
        V = filled(Value, 0.0);
      else
        Drawn.push_back(&Value);
      continue;
    }
    auto Bytes = Value.Data.bytes();
    if (!Bytes) {
      llvm::consumeError(Bytes.takeError());
      continue;
    }
    Values[Value.Id] = *Bytes;
  }
  auto Draw = [&](size_t First, size_t Step) {
    for (size_t I = First; I < Drawn.size(); I += Step) {
      const ir::Tensor &Value = *Drawn[I];
      // The tensor's own stream: the seed's and the id's bits mixed.
      SplitMix64 Generator(SplitMix64(Options.Seed)() ^
                           SplitMix64(uint64_t(Value.Id) << 32)());
      Made.find(Value.Id)->second = randomValues(Value, Generator);
    }
  };
  // Made's entries exist already: each thread fills its own.
  std::thread Helper(Draw, 1, 2);
  Draw(0, 2);
  Helper.join();
  for (const auto &[Id, V] : Made)
    Values[Id] = V;
  // Offsets first, then one allocation for every distinct box.
  struct Cut {
    size_t Buffer;
    size_t Start;
  };
  std::vector<Cut> Cuts;
  size_t Total = 0;
  for (size_t Id = 0; Id < Out.Buffers.size(); ++Id) {
    const rt::program::BufferInfo &Info = Out.Buffers[Id];
    if (Info.Kind != BufferKind::Parameter && Info.Kind != BufferKind::State &&
        Info.Kind != BufferKind::Constant)
      continue;
    const rt::program::TensorInfo &Tensor = Out.Tensors[Info.Tensor];
    ir::TensorId Source = TensorOfIndex[Info.Tensor];
    auto It = Values.find(Source);
    const ir::Tensor &Value = G.tensor(Source);
    if (It == Values.end() ||
        It->second.size() != size_t(Value.Type.byteSize()))
      return fail(llvm::formatv(
          "the weights of '{0}' are needed to generate the program and are "
          "absent (external data missing?); pass --init random to start "
          "from random weights",
          Tensor.Name));
    // Cut the box out of the whole value, once per distinct box.
    rt::program::BufferInfo &Target = Out.Buffers[Id];
    auto Key = std::make_tuple(
        Info.Tensor, std::vector<int64_t>(Info.Origin, Info.Origin + Info.Dims),
        std::vector<int64_t>(Info.Extent, Info.Extent + Info.Dims));
    auto [Entry, New] = Shared.insert({Key, int64_t(Total)});
    Target.WeightOffset = Entry->second;
    if (!New)
      continue;
    int64_t Elements = 1;
    for (int D = 0; D < Info.Dims; ++D)
      Elements *= Info.Extent[D];
    Cuts.push_back({Id, Total});
    Total += Elements * ir::dtypeSize(Value.Type.Type);
  }
  Out.Weights.resize(Total);
  for (const Cut &C : Cuts) {
    const rt::program::BufferInfo &Info = Out.Buffers[C.Buffer];
    const ir::Tensor &Value = G.tensor(TensorOfIndex[Info.Tensor]);
    rt::copyHostBox(
        &Out.Weights[C.Start], Values[Value.Id].data(),
        std::vector<int64_t>(Value.Type.Dims.begin(), Value.Type.Dims.end()),
        Info.Origin, Info.Extent, Info.Dims, ir::dtypeSize(Value.Type.Type));
  }
  return llvm::Error::success();
}

} // namespace onnx2soap::codegen::detail
