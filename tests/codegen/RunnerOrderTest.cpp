//===- tests/codegen/RunnerOrderTest.cpp - Kernels before communication ---===//
//
// On a GPU the backend queues kernels on its own stream, which does not
// order the communication library's (NCCL runs on another stream, MPI on
// the host): whatever a send or an all-reduce reads must have been written
// before it starts, so the runner waits for the backend (synchronize())
// after queuing work and before each send and all-reduce, and before a
// message lands where queued work writes (a buffer it has just allocated,
// which a GPU backend zero-fills on its stream). Checked here on the plans
// of fixtures with BatchNorm statistics all-reduced between phases,
// gradients all-reduced and activations sent, walked by the runner for rank
// 0 (two steps, then the weights gathered) over the CPU backend wrapped in
// a recorder, with a stand-in for the other ranks (the values do not
// matter, only the order). A send or gradient all-reduce runs beside the
// compute steps after it (Comm::startSend, startAllReduceSum): the stand-in
// checks that nothing touches its message buffer and nothing else is said
// until it is finished, and that compute did run beside it.
//
//===----------------------------------------------------------------------===//
#include "../soap_search/PlannerTestUtil.h"
#include "codegen/ProgramPlan.h"
#include "runtime_lib/Error.h"
#include "runtime_lib/program/Runner.h"
#include "soap_search/Builtins.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "gtest/gtest.h"
#include <fstream>
#include <optional>

using namespace onnx2soap;
using namespace onnx2soap::rt;
using namespace onnx2soap::rt::program;

namespace {

/// The send or gradient all-reduce the stand-in comm has started and not
/// finished: the bytes it reads or sums in place (null when none), what
/// broke the rules while it ran, and how much backend work was queued
/// beside it.
struct RunningAllReduce {
  const char *Begin = nullptr, *End = nullptr;
  const char *Label = "";
  std::vector<std::string> Violations;
  int Beside = 0;
};

/// The CPU backend, counting the work queued since the last synchronize(),
/// and the memory that queued work reads and writes (a GPU backend also
/// zero-fills what it allocates on its stream).
class RecordingBackend final : public Backend {
public:
  std::unique_ptr<Backend> Cpu = createCpuBackend(1);
  int Queued = 0;
  using Span = std::pair<const char *, const char *>;
  std::vector<Span> Touched;

  bool touched(const void *Data, size_t Bytes) const {
    auto *Begin = static_cast<const char *>(Data);
    for (auto [From, To] : Touched)
      if (Begin < To && From < Begin + Bytes)
        return true;
    return false;
  }
  void touch(const void *Data, size_t Bytes) {
    auto *Begin = static_cast<const char *>(Data);
    Touched.emplace_back(Begin, Begin + Bytes);
    if (Running.Begin && Begin < Running.End && Running.Begin < Begin + Bytes)
      Running.Violations.push_back(
          std::string("backend work on the buffer of the running ") +
          Running.Label);
  }
  /// The bytes a strided view covers.
  void touch(const TensorView &V) {
    if (!V.present() || V.numElements() == 0)
      return;
    int64_t Last = 0;
    for (int D = 0; D < V.Rank; ++D)
      Last += (V.Dims[D] - 1) * V.Strides[D];
    touch(V.Data, size_t(Last + 1) * dtypeSize(V.Type));
  }
  void touch(const std::vector<TensorView> &Views) {
    for (const TensorView &V : Views)
      touch(V);
  }
  void queue() {
    ++Queued;
    Running.Beside += Running.Begin != nullptr;
  }
  RunningAllReduce Running;

  /// Whether the communicators existed when the runner asked for the free
  /// memory (set through GroupsSet, which the stand-in comm sets).
  const bool *GroupsSet = nullptr;
  mutable std::optional<bool> GroupsSetAtCheck;

  const char *name() const override { return "recording"; }
  std::optional<size_t> freeMemory() const override {
    if (GroupsSet)
      GroupsSetAtCheck = *GroupsSet;
    return SIZE_MAX;
  }
  void *allocate(size_t Bytes) override {
    void *Data = Cpu->allocate(Bytes);
    queue();
    touch(Data, Bytes);
    return Data;
  }
  void deallocate(void *Pointer) override { Cpu->deallocate(Pointer); }
  // Both wait for the stream, as the CUDA backend's do.
  void copyFromHost(void *Device, const void *Host, size_t Bytes) override {
    synchronize();
    Cpu->copyFromHost(Device, Host, Bytes);
  }
  void copyToHost(void *Host, const void *Device, size_t Bytes) override {
    synchronize();
    Cpu->copyToHost(Host, Device, Bytes);
  }
  void fillZero(void *Device, size_t Bytes) override {
    queue();
    touch(Device, Bytes);
    Cpu->fillZero(Device, Bytes);
  }
  void copyOnDevice(void *To, const void *From, size_t Bytes) override {
    queue();
    touch(To, Bytes);
    touch(From, Bytes);
    Cpu->copyOnDevice(To, From, Bytes);
  }
  void copyBox(const TensorView &To, const TensorView &From,
               bool Add) override {
    queue();
    touch(To);
    touch(From);
    Cpu->copyBox(To, From, Add);
  }
  void forward(const OpCall &Call) override {
    queue();
    touch(Call.Inputs);
    touch(Call.Outputs);
    Cpu->forward(Call);
  }
  void backward(const OpCall &Call, const std::vector<TensorView> &OutputGrads,
                const std::vector<TensorView> &InputGrads) override {
    queue();
    touch(Call.Inputs);
    touch(Call.Outputs);
    touch(OutputGrads);
    touch(InputGrads);
    Cpu->backward(Call, OutputGrads, InputGrads);
  }
  void update(const OptimizerConfig &Config, int64_t Step,
              const TensorView &Parameter, const TensorView &Gradient,
              const std::vector<TensorView> &State) override {
    queue();
    touch(Parameter);
    touch(Gradient);
    touch(State);
    Cpu->update(Config, Step, Parameter, Gradient, State);
  }
  void synchronize() override {
    Queued = 0;
    Touched.clear();
    Cpu->synchronize();
  }
  void batchNormPartialStats(const OpCall &Call,
                             const TensorView &Stats) override {
    queue();
    touch(Call.Inputs);
    touch(Stats);
    Cpu->batchNormPartialStats(Call, Stats);
  }
  void batchNormForwardWithStats(const OpCall &Call, const TensorView &Stats,
                                 int64_t Count) override {
    queue();
    touch(Call.Inputs);
    touch(Call.Outputs);
    touch(Stats);
    Cpu->batchNormForwardWithStats(Call, Stats, Count);
  }
  void batchNormBackwardPartialSums(const OpCall &Call,
                                    const TensorView &OutputGrad,
                                    const TensorView &Stats, int64_t Count,
                                    const TensorView &Sums) override {
    queue();
    touch(Call.Inputs);
    touch(OutputGrad);
    touch(Stats);
    touch(Sums);
    Cpu->batchNormBackwardPartialSums(Call, OutputGrad, Stats, Count, Sums);
  }
  void batchNormBackwardWithSums(const OpCall &Call,
                                 const std::vector<TensorView> &OutputGrads,
                                 const std::vector<TensorView> &InputGrads,
                                 const TensorView &Stats,
                                 const TensorView &Sums,
                                 int64_t Count) override {
    queue();
    touch(Call.Inputs);
    touch(OutputGrads);
    touch(InputGrads);
    touch(Stats);
    touch(Sums);
    Cpu->batchNormBackwardWithSums(Call, OutputGrads, InputGrads, Stats, Sums,
                                   Count);
  }
};

/// Rank Rank of Size: messages from the others leave the buffer as it is,
/// and sums are this rank's. Records every send and all-reduce that started
/// with backend work still queued, and every receive landing where queued
/// work reads or writes.
class StandInComm final : public Comm {
public:
  StandInComm(int Of, int Ranks, RecordingBackend &B) : B(B) {
    Rank = Of;
    Size = Ranks;
  }
  std::vector<std::string> Unordered;
  int Sends = 0, AllReduces = 0, Recvs = 0;

  bool GroupsSet = false;
  int Started = 0;
  void setGroups(const std::vector<std::vector<int>> &) override {
    GroupsSet = true;
  }
  void send(int, const void *, size_t, const char *Label) override {
    ++Sends;
    check(Label);
  }
  void startSend(int, const void *Data, size_t Bytes,
                 const char *Label) override {
    ++Sends;
    ++Started;
    check(Label);
    run(Data, Bytes, Label);
  }
  /// A message may arrive while the backend still has work queued, but not
  /// work that reads or writes where it lands.
  void recv(int, void *Data, size_t Bytes, const char *Label) override {
    ++Recvs;
    idle(Label);
    if (B.touched(Data, Bytes))
      Unordered.push_back(Label);
  }
  void allReduceSum(int, void *, int64_t, DType, const char *Label) override {
    ++AllReduces;
    check(Label);
  }
  void startAllReduceSum(int, void *Data, int64_t Count, DType Type,
                         const char *Label) override {
    ++AllReduces;
    ++Started;
    check(Label);
    run(Data, size_t(Count) * dtypeSize(Type), Label);
  }
  void finishStarted() override { B.Running.Begin = B.Running.End = nullptr; }
  double sumOverRanks(double Value) override {
    idle("sum over ranks");
    return Value;
  }
  double maxOverRanks(double Value) override {
    idle("max over ranks");
    return Value;
  }
  void barrier() override { idle("barrier"); }

private:
  RecordingBackend &B;
  void check(const char *Label) {
    idle(Label);
    if (B.Queued != 0)
      Unordered.push_back(Label);
  }
  void run(const void *Data, size_t Bytes, const char *Label) {
    B.Running.Begin = static_cast<const char *>(Data);
    B.Running.End = B.Running.Begin + Bytes;
    B.Running.Label = Label;
  }
  /// Nothing is said while a started call runs.
  void idle(const char *Label) {
    if (B.Running.Begin)
      B.Running.Violations.push_back(std::string(Label) + " while " +
                                     B.Running.Label + " runs");
  }
};

/// The plan's weights as the shards file of a view whose hash is 0.
void writeShards(const std::string &Path, const codegen::ProgramPlan &Plan) {
  std::ofstream File(Path, std::ios::binary);
  File.write("O2SWGHT2", 8);
  File.write(std::string(8, '\0').data(), 8); // the view's hash, 0
  File.write(Plan.Weights.data(), std::streamsize(Plan.Weights.size()));
}

struct Case {
  const char *Fixture;
  int64_t Batch;
  soap_search::Builtin Strategy;
  unsigned Ranks;
  const char *Cluster = "cpu";
};

void PrintTo(const Case &C, std::ostream *Out) {
  *Out << C.Fixture << " " << soap_search::builtinName(C.Strategy).str()
       << " on " << C.Ranks << " ranks of " << C.Cluster;
}

class RunnerOrder : public ::testing::TestWithParam<Case> {};

TEST_P(RunnerOrder, CommunicationStartsAfterTheKernelsItReads) {
  const Case &C = GetParam();
  ir::TrainingGraph T = test::training(
      std::string("tests/fixtures/") + C.Fixture + "/model.onnx", C.Batch);
  ASSERT_GT(T.G.numOps(), 0u);
  simulator::Machine M = test::machine(C.Cluster == std::string("cpu")
                                           ? "cpu:" + std::to_string(C.Ranks)
                                           : std::string(C.Cluster),
                                       C.Ranks);
  simulator::AnalyticCostModel Cost;
  codegen::PlanOptions Options;
  Options.Init = codegen::InitKind::Random;
  auto Plan = codegen::buildProgramPlan(
      T, soap_search::builtin(C.Strategy, T.G, M, Cost), M, Cost, Options);
  ASSERT_TRUE(bool(Plan)) << llvm::toString(Plan.takeError());
  // The plan of a GPU cluster walked over the CPU backend: the same steps.
  rt::program::Plan View = Plan->view("", "", 0);

  llvm::SmallString<128> Dir;
  ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("runner-order", Dir));
  std::string Shards = std::string(Dir) + "/shards.bin";
  writeShards(Shards, *Plan);

  // Zeros (labels: class 0) of the plan's shapes.
  auto Zeros = [&](int32_t Tensor) {
    const TensorInfo &Info = View.Tensors[Tensor];
    HostTensor H;
    H.Name = Info.Name;
    H.Type = Info.Type;
    H.Dims.assign(Info.Dims, Info.Dims + Info.Rank);
    H.Bytes.assign(size_t(H.numElements()) * dtypeSize(H.Type), 0);
    return H;
  };
  std::vector<HostTensor> Inputs;
  for (int32_t Input : View.DataInputs)
    Inputs.push_back(Zeros(Input));
  std::optional<HostTensor> Labels;
  if (View.Labels >= 0)
    Labels = Zeros(View.Labels);

  int Sends = 0, Recvs = 0, AllReduces = 0, Started = 0, Beside = 0;
  for (unsigned Rank = 0; Rank < C.Ranks; ++Rank) {
    SCOPED_TRACE("rank " + std::to_string(Rank));
    RecordingBackend B;
    StandInComm Others(int(Rank), int(C.Ranks), B);
    B.GroupsSet = &Others.GroupsSet;
    {
      Runner R(View, B, Others, std::string(Dir));
      R.setBatch(Inputs, Labels ? &*Labels : nullptr);
      R.step();
      R.step();
      EXPECT_EQ(B.Running.Begin, nullptr) << "a step ended with an all-reduce "
                                             "running";
      // Rank 0 receives the other ranks' parameters.
      R.gatherWeights();
    }
    EXPECT_TRUE(B.Running.Violations.empty())
        << B.Running.Violations.size()
        << " violations, the first: " << B.Running.Violations.front();
    Started += Others.Started;
    Beside += B.Running.Beside;
    // NCCL allocates its communicators' buffers when it creates them: the
    // memory check comes after, so that it sees them.
    EXPECT_EQ(B.GroupsSetAtCheck, std::optional<bool>(true));
    Sends += Others.Sends;
    Recvs += Others.Recvs;
    AllReduces += Others.AllReduces;
    EXPECT_TRUE(Others.Unordered.empty())
        << Others.Unordered.size() << " of " << Others.Sends << " sends, "
        << Others.Recvs << " receives and " << Others.AllReduces
        << " all-reduces started before the backend work they depend on, "
           "the first: "
        << Others.Unordered.front();
  }
  llvm::sys::fs::remove(Shards);
  llvm::sys::fs::remove(Dir);
  EXPECT_GT(Sends + AllReduces, 0) << "nothing to check";
  EXPECT_GT(Recvs, 0) << "nothing to check";
  // Sends and gradient all-reduces start and return; compute runs beside
  // them (not in a model-parallel chain, where a rank that has sent its
  // activations has nothing to compute until the gradients come back).
  EXPECT_GT(Started, 0);
  if (C.Strategy != soap_search::Builtin::ModelParallel) {
    EXPECT_GT(Beside, 0);
  }
}

// cnn_bn data parallel: BatchNorm statistics and gradients all-reduced;
// model parallel: activations sent between ranks; resnet18's expert
// strategy on 4 P100s: a gradient all-reduce's unpacking followed by a
// message received into the same buffer; the transformer's: ranks with no
// weights whose first step receives into the buffer just allocated.
INSTANTIATE_TEST_SUITE_P(
    Fixtures, RunnerOrder,
    ::testing::Values(
        Case{"cnn_bn", 8, soap_search::Builtin::DataParallel, 2},
        Case{"cnn_bn", 8, soap_search::Builtin::ModelParallel, 2},
        Case{"resnet18", 4, soap_search::Builtin::Expert, 4, "paper-p100"},
        Case{"transformer", 4, soap_search::Builtin::Expert, 4, "paper-p100"}));

// A checkpoint's rank file restores every persistent buffer of the rank,
// each once: one that listed fewer (or the same twice, or a name with more
// than digits after "buffer-") resumed with the rest at their initial
// values; one that names a buffer no checkpoint holds is refused too.
TEST(RunnerRestore, EveryPersistentBufferOnce) {
  ir::TrainingGraph T = test::training("tests/fixtures/mlp/model.onnx", 8);
  simulator::Machine M = test::machine("cpu:1", 1);
  simulator::AnalyticCostModel Cost;
  codegen::PlanOptions Options;
  Options.Init = codegen::InitKind::Random;
  auto Plan = codegen::buildProgramPlan(
      T, soap_search::builtin(soap_search::Builtin::DataParallel, T.G, M, Cost),
      M, Cost, Options);
  ASSERT_TRUE(bool(Plan)) << llvm::toString(Plan.takeError());
  rt::program::Plan View = Plan->view("", "", 0);
  llvm::SmallString<128> Dir;
  ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("runner-restore", Dir));
  std::string Shards = std::string(Dir) + "/shards.bin";
  writeShards(Shards, *Plan);
  RecordingBackend B;
  StandInComm Alone(0, 1, B);
  B.GroupsSet = &Alone.GroupsSet;
  Runner R(View, B, Alone, std::string(Dir));
  std::vector<NamedBlob> State = R.persistentState();
  ASSERT_GE(State.size(), 2u);
  R.restore(3, State);
  EXPECT_EQ(R.stepsDone(), 3);
  auto Refused = [&](std::vector<NamedBlob> Broken) {
    try {
      R.restore(4, Broken);
    } catch (const rt::RuntimeError &Failure) {
      return std::string(Failure.what());
    }
    return std::string("restored");
  };
  std::vector<NamedBlob> Fewer(State.begin() + 1, State.end());
  EXPECT_EQ(Refused(Fewer),
            "checkpoint: entry '" + State[0].Name + "' is missing");
  std::vector<NamedBlob> Twice = State;
  Twice.push_back(State[1]);
  EXPECT_EQ(Refused(Twice),
            "checkpoint: entry '" + State[1].Name + "' is there twice");
  std::vector<NamedBlob> Renamed = State;
  Renamed[0].Name += "xyz";
  EXPECT_EQ(Refused(Renamed), "checkpoint: entry '" + Renamed[0].Name +
                                  "' does not belong to this plan");
  // A buffer of this rank that no checkpoint holds (an activation or a
  // gradient), of the right size: not loaded over.
  int32_t Passing = -1;
  for (int32_t Id = 0; Id < View.Buffers.Size && Passing < 0; ++Id)
    if (View.Buffers[Id].Rank == 0 &&
        (View.Buffers[Id].Kind == rt::program::BufferKind::Activation ||
         View.Buffers[Id].Kind == rt::program::BufferKind::Gradient))
      Passing = Id;
  ASSERT_GE(Passing, 0);
  std::vector<NamedBlob> Extra = State;
  Extra.push_back(
      {"buffer-" + std::to_string(Passing),
       std::vector<char>(rt::program::bufferBytes(View.Buffers[Passing]))});
  EXPECT_EQ(Refused(Extra), "checkpoint: entry '" + Extra.back().Name +
                                "' does not belong to this plan");
  llvm::sys::fs::remove(Shards);
  llvm::sys::fs::remove(Dir);
}

} // namespace
