//===- executor/Executor.h - Running an IR graph on a backend --*- C++ -*-===//
//
// The in-process reference executor: runs a Graph op by op, in order, on one
// runtime_lib backend, with every tensor in its own buffer. It is what
// `onnx2soap run` and `onnx2soap train` use, and the numerical reference the
// generated programs are compared with. It links ir and runtime_lib; neither
// knows about the other.
//
//===----------------------------------------------------------------------===//
#ifndef ONNX2SOAP_EXECUTOR_EXECUTOR_H
#define ONNX2SOAP_EXECUTOR_EXECUTOR_H

#include "ir/Graph.h"
#include "runtime_lib/Backend.h"
#include "llvm/Support/Error.h"
#include <memory>
#include <vector>

namespace onnx2soap::executor {

/// The runtime's view of an IR element type / op kind / attribute set.
rt::DType toRuntime(ir::DType Type);
rt::OpKind toRuntime(ir::OpKind Kind);
rt::OpAttrs toRuntime(const ir::Attributes &Attrs);

class Executor {
public:
  /// Allocates every tensor of G on B and uploads parameters, state and
  /// constants. Fails when weight bytes are missing (external data absent)
  /// or a tensor has more dims than the runtime supports.
  static llvm::Expected<std::unique_ptr<Executor>> create(const ir::Graph &G,
                                                          rt::Backend &B);

  /// Sets graph input T from host bytes in its element type and shape.
  llvm::Error setInput(ir::TensorId T, llvm::ArrayRef<char> Bytes);
  /// Runs every op in order; kernel failures become Errors naming the op.
  llvm::Error forward(int64_t Step = 1);
  /// The bytes of tensor T.
  std::vector<char> read(ir::TensorId T) const;
  /// T's view into backend memory.
  rt::TensorView view(ir::TensorId T) const;

  const ir::Graph &graph() const { return G; }
  rt::Backend &backend() const { return B; }
  const rt::OpAttrs &attrs(ir::OpId O) const { return Attrs[O]; }
  /// The call of op O over the current buffers.
  rt::OpCall call(ir::OpId O, int64_t Step) const;

private:
  Executor(const ir::Graph &G, rt::Backend &B) : G(G), B(B) {}

  const ir::Graph &G;
  rt::Backend &B;
  std::vector<rt::DeviceBuffer> Buffers; // by tensor id
  std::vector<rt::OpAttrs> Attrs;        // by op id
};

} // namespace onnx2soap::executor

#endif
