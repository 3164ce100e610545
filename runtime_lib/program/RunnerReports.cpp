//===- runtime_lib/program/RunnerReports.cpp - What a Runner reports ------===//
//
// The reports a rank's Runner makes for the program: --profile-ops' profile
// (each call's median time, merged over the ranks by profile key, and the
// device's box copies timed), --trace's Chrome trace of one step, and the
// weights gathered whole on rank 0 for a checkpoint or an ONNX export.
//
//===----------------------------------------------------------------------===//
#include "../CopyTiming.h"
#include "../HostBox.h"
#include "ReportText.h"
#include "RunnerImpl.h"
#include <cstdio>
#include <map>

namespace onnx2soap::rt::program {

/// --profile-ops: timed runs of each box copy size (after a warm-up).
static constexpr unsigned CopyRepeats = 5;

std::string Runner::profileJson(int Threads) {
  const Plan &P = I->P;
  Comm &C = I->C;
  // Every call's median goes to every rank (one sum per call: each call
  // runs on one rank), then rank 0 merges calls that share a key.
  struct Times {
    std::vector<double> Forward, Backward;
    int64_t Samples = 0;
  };
  std::map<std::string, Times> ByKey;
  for (int32_t Call = 0; Call < P.Calls.Size; ++Call) {
    auto Share = [&](const std::vector<double> &Samples) {
      double Mine = Samples.empty() ? 0 : median(Samples);
      double Count = C.sumOverRanks(double(Samples.size()));
      return std::make_pair(C.sumOverRanks(Mine), Count);
    };
    auto [Forward, ForwardCount] = Share(I->ForwardSeconds[Call]);
    auto [Backward, BackwardCount] = Share(I->BackwardSeconds[Call]);
    if (ForwardCount == 0)
      continue;
    Times &T = ByKey[P.Calls[Call].ProfileKey];
    T.Forward.push_back(Forward);
    if (BackwardCount > 0)
      T.Backward.push_back(Backward);
    T.Samples += int64_t(ForwardCount);
  }
  if (I->Rank != 0)
    return "";
  // Box copies on this device (every rank's is of the plan's one device
  // type): the planner times the program's copies from them. Their two
  // buffers come on top of the plan's memory; where the device has no room
  // left, the profile goes without them.
  std::string Copies;
  try {
    Copies =
        ",\n  \"copies\": " + copyTimingJson(timeBoxCopies(I->B, CopyRepeats));
  } catch (const RuntimeError &Failure) {
    std::fprintf(stderr,
                 "train: warning: --profile-ops: box copies not timed (%s); "
                 "the profile has no copy table\n",
                 Failure.what());
  }
  std::string Out =
      "{\n  \"format\": \"onnx2soap-profile\",\n  "
      "\"version\": 1,\n  \"device_type\": " +
      jsonString(P.DeviceType) +
      ",\n  \"measured_with\": {\"backend\": " + jsonString(I->B.name()) +
      ", \"threads\": " + std::to_string(Threads) +
      ", \"program\": " + jsonString(P.ModelName) + "}" + Copies +
      ",\n  \"entries\": [";
  bool First = true;
  for (const auto &[Key, T] : ByKey) {
    Out += First ? "\n" : ",\n";
    First = false;
    Out += "    {\"key\": " + jsonString(Key) +
           ", \"forward_s\": " + jsonNumber(median(T.Forward));
    if (!T.Backward.empty())
      Out += ", \"backward_s\": " + jsonNumber(median(T.Backward));
    Out += ", \"samples\": " + std::to_string(T.Samples) + "}";
  }
  return Out + "\n  ]\n}\n";
}

/// A trace event's category: what kind of step it is.
static const char *stepKindName(StepKind Kind) {
  switch (Kind) {
  case StepKind::Forward:
    return "forward";
  case StepKind::StatsForward:
    return "statistics forward";
  case StepKind::Backward:
    return "backward";
  case StepKind::StatsBackward:
    return "statistics backward";
  case StepKind::Send:
    return "send";
  case StepKind::Recv:
    return "receive";
  case StepKind::AllReduce:
    return "all-reduce";
  case StepKind::Update:
    return "update";
  }
  return "step";
}

void Runner::traceNextStep() { I->TraceNext = true; }

bool Runner::traced() const { return I->Traced; }

std::string Runner::traceJson() {
  const Plan &P = I->P;
  Comm &C = I->C;
  Backend &B = I->B;
  // Every rank's events go to rank 0 (as backend buffers, which the Comm
  // moves), which names them from the plan: every rank holds all of it.
  std::vector<std::vector<double>> ByRank(C.size());
  for (int From = 0; From < C.size(); ++From) {
    double Mine = From == I->Rank ? double(I->TraceEvents.size()) : 0;
    size_t Count = size_t(C.sumOverRanks(Mine));
    size_t Bytes = Count * sizeof(double);
    if (Count == 0)
      continue;
    if (From == 0) {
      if (I->Rank == 0)
        ByRank[0] = I->TraceEvents;
      continue;
    }
    if (I->Rank == From) {
      DeviceBuffer Out(B, Bytes);
      B.copyFromHost(Out.data(), I->TraceEvents.data(), Bytes);
      B.synchronize();
      C.send(0, Out.data(), Bytes, "gather trace");
    } else if (I->Rank == 0) {
      DeviceBuffer In(B, Bytes);
      B.synchronize(); // its zero fill before the message lands
      C.recv(From, In.data(), Bytes, "gather trace");
      ByRank[From].resize(Count);
      B.copyToHost(ByRank[From].data(), In.data(), Bytes);
    }
  }
  if (I->Rank != 0)
    return "";
  auto Micros = [](double Seconds) {
    char Text[40];
    std::snprintf(Text, sizeof Text, "%.3f", Seconds * 1e6);
    return std::string(Text);
  };
  std::string Out = "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [";
  bool First = true;
  auto Add = [&](const std::string &Event) {
    Out += First ? "\n  " : ",\n  ";
    Out += Event;
    First = false;
  };
  Add("{\"ph\": \"M\", \"pid\": 0, \"name\": \"process_name\", "
      "\"args\": {\"name\": " +
      jsonString(std::string("train: ") + P.ModelName) + "}}");
  for (int Rank = 0; Rank < C.size(); ++Rank)
    Add("{\"ph\": \"M\", \"pid\": 0, \"tid\": " + std::to_string(Rank) +
        ", \"name\": \"thread_name\", \"args\": {\"name\": \"rank " +
        std::to_string(Rank) + "\"}}");
  for (int Rank = 0; Rank < C.size(); ++Rank) {
    const Range &Steps = P.RankSteps[Rank];
    const std::vector<double> &E = ByRank[size_t(Rank)];
    for (size_t K = 0; K + 2 < E.size(); K += 3) {
      bool Wait = E[K] < 0;
      int32_t Local = int32_t(Wait ? -1 - E[K] : E[K]);
      if (Local < 0 || Local >= Steps.Count)
        continue;
      const StepInfo &S = P.Steps[Steps.First + Local];
      std::string Label = S.Label ? S.Label : "";
      std::string Name = Wait ? "wait: " + Label : Label;
      Add("{\"ph\": \"X\", \"pid\": 0, \"tid\": " + std::to_string(Rank) +
          ", \"name\": " + jsonString(Name) +
          ", \"cat\": " + jsonString(Wait ? "wait" : stepKindName(S.Kind)) +
          ", \"ts\": " + Micros(E[K + 1]) +
          ", \"dur\": " + Micros(E[K + 2] - E[K + 1]) + "}");
    }
  }
  return Out + "\n]}\n";
}

std::vector<HostTensor> Runner::gatherWeights() {
  const Plan &P = I->P;
  Comm &C = I->C;
  std::vector<HostTensor> Result;
  if (I->Rank == 0)
    for (const TensorInfo &Info : P.Tensors) {
      if (Info.Role != TensorRole::Parameter && Info.Role != TensorRole::State)
        continue;
      HostTensor T;
      T.Name = Info.Name;
      T.Type = Info.Type;
      T.Dims.assign(Info.Dims, Info.Dims + Info.Rank);
      int64_t Elements = 1;
      for (int64_t D : T.Dims)
        Elements *= D;
      T.Bytes.assign(Elements * dtypeSize(Info.Type), 0);
      Result.push_back(std::move(T));
    }
  // Every box of every parameter and state tensor goes to rank 0, in buffer
  // order (replicas hold equal values; the last one written wins). Messages
  // travel between backend buffers, as the backend's Comm requires.
  std::vector<char> Bytes;
  for (int32_t Id = 0; Id < P.Buffers.Size; ++Id) {
    const BufferInfo &Info = P.Buffers[Id];
    if (Info.Kind != BufferKind::Parameter && Info.Kind != BufferKind::State)
      continue;
    int64_t Elements = 1;
    for (int D = 0; D < Info.Dims; ++D)
      Elements *= Info.Extent[D];
    Bytes.resize(Elements * dtypeSize(Info.Type));
    if (Info.Rank == I->Rank && I->Rank != 0)
      C.send(0, I->data(Id), Bytes.size(), "gather weights");
    if (I->Rank != 0)
      continue;
    if (Info.Rank == 0) {
      I->B.copyToHost(Bytes.data(), I->data(Id), Bytes.size());
    } else {
      DeviceBuffer Incoming(I->B, Bytes.size());
      I->B.synchronize(); // its zero fill before the message lands
      C.recv(Info.Rank, Incoming.data(), Bytes.size(), "gather weights");
      I->B.copyToHost(Bytes.data(), Incoming.data(), Bytes.size());
    }
    const std::string &Name = P.Tensors[Info.Tensor].Name;
    for (HostTensor &T : Result)
      if (T.Name == Name)
        pasteHostBox(T.Bytes.data(), Bytes.data(), T.Dims, Info.Origin,
                     Info.Extent, Info.Dims, dtypeSize(Info.Type));
  }
  return Result;
}

} // namespace onnx2soap::rt::program
