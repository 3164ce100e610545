//===- executor/Executor.cpp - Running an IR graph on a backend -----------===//
//
// Kernel failures are C++ exceptions inside runtime_lib; they stop here and
// become llvm::Errors.
//
//===----------------------------------------------------------------------===//
#include "executor/Executor.h"
#include "ir/Error.h"
#include "runtime_lib/Error.h"
#include "llvm/Support/FormatVariadic.h"

namespace onnx2soap::executor {

static_assert(static_cast<int>(ir::DType::Bool) ==
                  static_cast<int>(rt::DType::Bool),
              "ir::DType and rt::DType must list the same types in order");

rt::DType toRuntime(ir::DType Type) {
  return static_cast<rt::DType>(static_cast<uint8_t>(Type));
}

rt::OpKind toRuntime(ir::OpKind Kind) {
  // Both enums come from ir/OpKinds.def.
  return static_cast<rt::OpKind>(static_cast<uint8_t>(Kind));
}

namespace {
struct AttrConverter {
  rt::OpAttrs::Value operator()(int64_t V) const { return V; }
  rt::OpAttrs::Value operator()(double V) const { return V; }
  rt::OpAttrs::Value operator()(const ir::IntList &L) const {
    return std::vector<int64_t>(L.begin(), L.end());
  }
  rt::OpAttrs::Value operator()(const ir::FloatList &L) const {
    return std::vector<double>(L.begin(), L.end());
  }
  rt::OpAttrs::Value operator()(const std::string &S) const { return S; }
};

} // namespace

rt::OpAttrs toRuntime(const ir::Attributes &Attrs) {
  rt::OpAttrs Result;
  for (const auto &[Name, Value] : Attrs.entries())
    Result.set(Name, std::visit(AttrConverter{}, Value));
  return Result;
}

llvm::Expected<std::unique_ptr<Executor>> Executor::create(const ir::Graph &G,
                                                           rt::Backend &B) {
  std::unique_ptr<Executor> E(new Executor(G, B));
  for (const ir::Tensor &T : G.tensors()) {
    if (T.Type.rank() > static_cast<unsigned>(rt::MaxRank))
      return fail(llvm::formatv("tensor '{0}' has {1} dims; the runtime "
                                "supports at most {2}",
                                T.Name, T.Type.rank(), rt::MaxRank));
    E->Buffers.emplace_back(B, static_cast<size_t>(T.Type.byteSize()));
    bool HasValue = T.Role == ir::TensorRole::Parameter ||
                    T.Role == ir::TensorRole::State ||
                    T.Role == ir::TensorRole::Constant;
    if (!HasValue)
      continue;
    auto Bytes = T.Data.bytes();
    if (!Bytes)
      return fail(llvm::formatv("the weights of '{0}' are needed to run the "
                                "model: {1}",
                                T.Name, llvm::toString(Bytes.takeError())));
    if (Bytes->size() != static_cast<size_t>(T.Type.byteSize()))
      return fail(llvm::formatv("tensor '{0}' has {1} bytes of data, expected "
                                "{2}",
                                T.Name, Bytes->size(), T.Type.byteSize()));
    B.copyFromHost(E->Buffers.back().data(), Bytes->data(), Bytes->size());
  }
  for (const ir::Op &O : G.ops())
    E->Attrs.push_back(toRuntime(O.Attrs));
  return E;
}

rt::TensorView Executor::view(ir::TensorId T) const {
  const ir::Tensor &Tensor = G.tensor(T);
  std::vector<int64_t> Dims(Tensor.Type.Dims.begin(), Tensor.Type.Dims.end());
  return rt::TensorView::contiguous(toRuntime(Tensor.Type.Type), Dims,
                                    Buffers[T].data());
}

llvm::Error Executor::setInput(ir::TensorId T, llvm::ArrayRef<char> Bytes) {
  const ir::Tensor &Tensor = G.tensor(T);
  if (Bytes.size() != static_cast<size_t>(Tensor.Type.byteSize()))
    return fail(llvm::formatv("input '{0}' needs {1} bytes ({2} {3}), got {4}",
                              Tensor.Name, Tensor.Type.byteSize(),
                              ir::dtypeName(Tensor.Type.Type),
                              ir::formatShape(Tensor.Type.Dims), Bytes.size()));
  B.copyFromHost(Buffers[T].data(), Bytes.data(), Bytes.size());
  return llvm::Error::success();
}

rt::OpCall Executor::call(ir::OpId Id, int64_t Step) const {
  const ir::Op &O = G.op(Id);
  rt::OpCall Call{toRuntime(O.Kind), Attrs[Id], O.Name.c_str(), {}, {}, Step};
  for (ir::TensorId T : O.Inputs)
    Call.Inputs.push_back(T == ir::NoTensor ? rt::TensorView::absent()
                                            : view(T));
  for (ir::TensorId T : O.Outputs)
    Call.Outputs.push_back(view(T));
  return Call;
}

llvm::Error Executor::forward(int64_t Step) {
  try {
    for (const ir::Op &O : G.ops())
      B.forward(call(O.Id, Step));
    B.synchronize();
  } catch (const rt::RuntimeError &Failure) {
    return fail(Failure.what());
  }
  return llvm::Error::success();
}

std::vector<char> Executor::read(ir::TensorId T) const {
  std::vector<char> Bytes(G.tensor(T).Type.byteSize());
  B.copyToHost(Bytes.data(), Buffers[T].data(), Bytes.size());
  return Bytes;
}

} // namespace onnx2soap::executor
