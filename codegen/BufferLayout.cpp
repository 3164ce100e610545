//===- codegen/BufferLayout.cpp - Where each buffer lies in memory --------===//
//
// Linear-scan placement with best-fit free blocks, as register allocators
// and static memory planners of inference compilers do it: the lifetimes of
// a training step nest (forward outputs live until their backward calls,
// which run in reverse), so freeing at each step's end and placing the new
// buffers largest first leaves little fragmentation; liveBytesPeak is the
// bound it is measured against (tests/codegen/BufferLayoutTest.cpp).
//
//===----------------------------------------------------------------------===//
#include "codegen/BufferLayout.h"
#include "runtime_lib/program/BufferLifetimes.h"
#include <algorithm>
#include <cassert>
#include <map>

namespace onnx2soap::codegen {

namespace {

using rt::program::BufferAlignment;
using rt::program::Lifetime;

int64_t alignedBytes(const rt::program::BufferInfo &Info) {
  int64_t Bytes = int64_t(rt::program::bufferBytes(Info));
  return (Bytes + BufferAlignment - 1) / BufferAlignment * BufferAlignment;
}

/// Free blocks below the top of one arena.
class Arena {
public:
  int64_t place(int64_t Bytes) {
    auto Best = Free.end();
    for (auto It = Free.begin(); It != Free.end(); ++It)
      if (It->second >= Bytes &&
          (Best == Free.end() || It->second < Best->second))
        Best = It;
    if (Best == Free.end()) {
      int64_t Offset = Top;
      Top += Bytes;
      Peak = std::max(Peak, Top);
      return Offset;
    }
    auto [Offset, Size] = *Best;
    Free.erase(Best);
    if (Size > Bytes)
      Free.emplace(Offset + Bytes, Size - Bytes);
    return Offset;
  }

  void release(int64_t Offset, int64_t Bytes) {
    auto Next = Free.lower_bound(Offset);
    if (Next != Free.end() && Offset + Bytes == Next->first) {
      Bytes += Next->second;
      Next = Free.erase(Next);
    }
    if (Next != Free.begin()) {
      auto Previous = std::prev(Next);
      if (Previous->first + Previous->second == Offset) {
        Offset = Previous->first;
        Bytes += Previous->second;
        Free.erase(Previous);
      }
    }
    // A block at the top lowers it: no free block ever ends there.
    if (Offset + Bytes == Top)
      Top = Offset;
    else
      Free.emplace(Offset, Bytes);
  }

  int64_t peak() const { return Peak; }

private:
  std::map<int64_t, int64_t> Free; // offset -> bytes
  int64_t Top = 0, Peak = 0;
};

/// Each rank's buffer ids, in buffer order.
std::vector<std::vector<int32_t>> buffersByRank(const ProgramPlan &Plan) {
  std::vector<std::vector<int32_t>> ByRank(Plan.NumRanks);
  for (size_t Id = 0; Id < Plan.Buffers.size(); ++Id)
    ByRank[Plan.Buffers[Id].Rank].push_back(int32_t(Id));
  return ByRank;
}

} // namespace

void layoutBuffers(ProgramPlan &Plan) {
  rt::program::Plan View = Plan.view("", "", 0);
  std::vector<std::vector<int32_t>> ByRank = buffersByRank(Plan);
  Plan.ArenaBytes.assign(Plan.NumRanks, 0);
  for (int32_t Rank = 0; Rank < Plan.NumRanks; ++Rank) {
    std::vector<Lifetime> Live = rt::program::bufferLifetimes(View, Rank);
    std::vector<int32_t> Persistent, Starting, Ending;
    for (int32_t Id : ByRank[Rank]) {
      if (rt::program::isPersistent(Plan.Buffers[Id].Kind))
        Persistent.push_back(Id);
      else
        Starting.push_back(Id);
    }
    Ending = Starting;
    // Placed by first step, largest first; freed by last step.
    std::stable_sort(
        Starting.begin(), Starting.end(), [&](int32_t A, int32_t B) {
          if (Live[A].First != Live[B].First)
            return Live[A].First < Live[B].First;
          return alignedBytes(Plan.Buffers[A]) > alignedBytes(Plan.Buffers[B]);
        });
    std::stable_sort(Ending.begin(), Ending.end(), [&](int32_t A, int32_t B) {
      return Live[A].Last < Live[B].Last;
    });
    Arena A;
    for (int32_t Id : Persistent)
      Plan.Buffers[Id].Offset = A.place(alignedBytes(Plan.Buffers[Id]));
    size_t Freed = 0;
    for (int32_t Id : Starting) {
      int32_t Step = Live[Id].First;
      for (; Freed < Ending.size() && Live[Ending[Freed]].Last < Step; ++Freed)
        A.release(Plan.Buffers[Ending[Freed]].Offset,
                  alignedBytes(Plan.Buffers[Ending[Freed]]));
      Plan.Buffers[Id].Offset = A.place(alignedBytes(Plan.Buffers[Id]));
    }
    Plan.ArenaBytes[Rank] = A.peak();
  }
}

std::vector<int64_t> liveBytesPeak(const ProgramPlan &Plan) {
  rt::program::Plan View = Plan.view("", "", 0);
  std::vector<std::vector<int32_t>> ByRank = buffersByRank(Plan);
  std::vector<int64_t> Peak(Plan.NumRanks, 0);
  for (int32_t Rank = 0; Rank < Plan.NumRanks; ++Rank) {
    std::vector<Lifetime> Live = rt::program::bufferLifetimes(View, Rank);
    // +bytes at First, -bytes after Last, swept in step order.
    std::map<int32_t, int64_t> Change;
    for (int32_t Id : ByRank[Rank]) {
      int64_t Bytes = alignedBytes(Plan.Buffers[Id]);
      Change[Live[Id].First] += Bytes;
      Change[Live[Id].Last + 1] -= Bytes;
    }
    int64_t Held = 0;
    for (const auto &[Step, Delta] : Change) {
      Held += Delta;
      Peak[Rank] = std::max(Peak[Rank], Held);
    }
  }
  return Peak;
}

} // namespace onnx2soap::codegen
