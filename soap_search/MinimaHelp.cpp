//===- soap_search/MinimaHelp.cpp - The refinements helped ----------------===//
//
// MinimaRefiner's helping threads: which walk or path each refining thread
// takes next (far minima, paused walks, relinked paths), and the help with
// the rounds of a walk open to it. See MinimaRefiner.h.
//
//===----------------------------------------------------------------------===//
#include "soap_search/MinimaRefiner.h"
#include <chrono>
#include <thread>
#include <utility>

namespace onnx2soap::soap_search {
using simulator::Simulator;
using simulator::Strategy;

// Whether minimum K is far from the first (FarFromTheFirst).
bool MinimaRefiner::far(size_t K) const {
  return MinimaTimes[K] >= FarFromTheFirst * MinimaTimes[0];
}

// Whether helping thread Helper starts far minimum K's walk: a thread
// beside the chains does; the first chain thread (Helper 0) not in
// unrolled RNNs (HelpWalks false), whose chains find the answers and
// whose far minima's walks none: each probe held that thread away from
// its chains for about 0.1 s, and NMT's answer on 32 K80s, chain 0's,
// came after 0.81-0.88 s in half the runs, 0.36-0.40 in the others; left
// to the thread that found the minima (NearFirst), 0.40-0.49 in each.
bool MinimaRefiner::startsFar(size_t K, unsigned Helper) const {
  return far(K) && (Helper > 0 || HelpWalks);
}

// The refinements (none under other objectives: the fastest minimum is
// the candidate). Which minimum refines best varies (the fourth of four
// for AlexNet on 32 K80s, the third on 64, the first for ResNet-101), and
// a walk makes its large gains early. So the thread that found the minima
// walks the first (the fastest simulated) without pause when another
// thread helps (below), else for its probe (Options.RefineProbe tries),
// and then helps itself. Helping, a thread starts the others from the
// last (the slowest simulated); a walk that leads all others started
// after its probe goes on at once, one that does not pauses. With none
// left to start, the thread that found the minima goes on with the
// paused walk ahead (ties to the earlier minimum), and so on. With two
// threads or more, the first chain thread helps between two steps of its
// chains, once the minima are known, but starts only the walks of minima
// that simulate FarFromTheFirst times the first's time or more, outside
// unrolled RNNs (startsFar()): strategies unlike the first, whose walks
// the other thread would reach last, while the first's walk covers those
// near it. On AlexNet with 32 K80s it probes the fourth minimum (74.6 ms,
// the first 26.4; 21.7 ms after 32 tries, the first then at 24.9), which
// goes on to the answer while the first walks; on ResNet-101, whose
// minima lie within 1.25 times the first's, and on RNNs, it does not
// help, and its chains find those answers as soon as before (waiting for the
// minima and helping with every walk before its chains had delayed NMT's answer
// on 8 K80s from 0.16 to 0.67-0.98 s, RNNTC's on 16 from 0.27 to 1.2 s). Both
// threads take the paths of ended walks (relinking, above) before anything
// else, the first chain thread any walk's (Inception-v3 on 8 K80s: the answer
// after 1.5 s, where the thread that found the minima, relinking each
// walk it ended before walking the next, had found it after 2.0 s; most
// RNN walks' paths are too long to relink, so their chains are seldom
// held up).
// Each walk is determined by its minimum alone, and each path by its
// walk's end, so the threads change only when their steps are found.
void MinimaRefiner::helpRefine(bool Owner, unsigned Helper) {
  for (;;) {
    size_t K = Stages.size();
    bool Start = false;
    std::optional<std::pair<size_t, size_t>> Task;
    {
      std::unique_lock<std::mutex> Lock(WalksLock);
      if (!Relinks.empty()) {
        // The path that starts fastest (ties to the earlier minimum, then
        // size) first.
        auto First = std::min_element(
            Relinks.begin(), Relinks.end(), [&](auto A, auto B) {
              double TA = Walks[A.first].SizeTimes[A.second],
                     TB = Walks[B.first].SizeTimes[B.second];
              return TA != TB ? TA < TB : A < B;
            });
        Task = *First;
        Relinks.erase(First);
      } else {
        K = nextWalk(Owner, Helper, Start);
        if (K == Stages.size()) {
          if (!Owner && Round.Open) {
            helpWalk(Lock, Helper);
            continue;
          }
          if (!Owner) {
            HelpWanted.store(false, std::memory_order_relaxed);
            return;
          }
          // The thread that found the minima ends only with every walk
          // and relinking: one the first chain thread is probing may
          // pause, and paths it relinks may leave a walk to go on.
          if (llvm::none_of(Stages, [](Stage S) {
                return S == Stage::Started || S == Stage::Relinking;
              }))
            return;
          WalkChanged.wait(Lock);
          continue;
        }
        Stages[K] = Stage::Started;
      }
    }
    if (Task) {
      runRelink(Task->first, Task->second);
      walkOn(Task->first, Task->second, Owner);
      bool Last;
      {
        std::lock_guard<std::mutex> Guard(WalksLock);
        Last = --Walks[Task->first].RelinksLeft == 0;
      }
      if (Last) {
        // The walk's simulator, should its own size's path not have taken
        // it.
        if (Walks[Task->first].Kept)
          spare(std::move(Walks[Task->first].Kept));
        std::lock_guard<std::mutex> Guard(WalksLock);
        Stages[Task->first] = Stage::Ended;
        WalkChanged.notify_all();
      }
      continue;
    }
    if (Start) {
      probe(K, Options.RefineProbe, Owner);
      if (!Walks[K].Sim) {
        endWalk(K);
        continue;
      }
      std::lock_guard<std::mutex> Guard(WalksLock);
      bool Leading = true;
      for (size_t J = 0; J < Stages.size(); ++J)
        Leading &= J == K || Stages[J] == Stage::Waiting || Leads[K] < Leads[J];
      if (!Leading) {
        Stages[K] = Stage::Paused;
        WalkChanged.notify_all();
        continue;
      }
    }
    goOn(K, RefineTries, Owner);
    endWalk(K);
  }
}

// The walk a refining thread takes next, with WalksLock held, or
// Stages.size() for none; Start: a waiting walk to start, else a paused
// one to go on with. Each thread starts the waiting walks from the last
// (the slowest simulated), a helping thread only those startsFar() gives
// it. With none of those left, the thread that found the minima goes on
// with the paused walk ahead (ties to the earlier minimum); where it is
// left the far minima too (NearFirst), it starts them last, once every
// near walk has ended.
size_t MinimaRefiner::nextWalk(bool Owner, unsigned Helper, bool &Start) const {
  size_t None = Stages.size();
  auto LastWaiting = [&](auto Takes) {
    for (size_t J = Stages.size(); J-- > 0;)
      if (Stages[J] == Stage::Waiting && Takes(J))
        return J;
    return None;
  };
  size_t K = Owner
                 ? LastWaiting([&](size_t J) { return !(NearFirst && far(J)); })
                 : LastWaiting([&](size_t J) { return startsFar(J, Helper); });
  Start = K != None;
  if (Start || !Owner)
    return K;
  for (size_t J = 0; J < Stages.size(); ++J)
    if (Stages[J] == Stage::Paused && (K == None || Leads[J] < Leads[K]))
      K = J;
  if (K == None && NearFirst) {
    K = LastWaiting([](size_t) { return true; });
    Start = K != None;
  }
  return K;
}

// A helping thread's help with the rounds of the walk open to it
// (runRound()), with WalksLock held (Lock), until the walk closes: its
// simulator (Round.Mirrors[Helper]) is brought to each round's strategy,
// and it tries the next change not yet taken, until the round has a gain
// or none is left.
void MinimaRefiner::helpWalk(std::unique_lock<std::mutex> &Lock,
                             unsigned Helper) {
  if (Round.Mirrors.size() <= Helper)
    Round.Mirrors.resize(Helper + 1);
  uint64_t Synced = 0; // the round whose strategy the mirror holds
  while (Round.Open) {
    if (Round.Tries && Synced != Round.Number) {
      uint64_t Number = Round.Number;
      Strategy At = Round.At;
      double Bytes = Round.Bucket;
      bool Undo = std::exchange(Round.Mirrors[Helper].Changed, false);
      Simulator *Sim = Round.Mirrors[Helper].Sim.get();
      Lock.unlock();
      std::unique_ptr<Simulator> New;
      if (!Sim) {
        New = simulator(Bytes);
        Sim = New.get();
      } else if (Sim->graph().options().GradientBucketBytes != Bytes) {
        Sim->setGradientBucket(Bytes);
      } else if (Undo) {
        Sim->revert();
      }
      Sim->moveTo(At);
      Lock.lock();
      if (New)
        Round.Mirrors[Helper].Sim = std::move(New);
      Synced = Number;
      continue;
    }
    if (!Round.takeable()) {
      // Nothing to take before the next round or the walk's end: waits
      // without the lock, which the walking thread takes for each try.
      uint64_t Seen = Round.Changes.load(std::memory_order_relaxed);
      Lock.unlock();
      while (Round.Changes.load(std::memory_order_acquire) == Seen)
        std::this_thread::yield();
      Lock.lock();
      continue;
    }
    size_t I = Round.Next++;
    AdditiveCost::Change C = (*Round.Tries)[I];
    double Current = Round.Current;
    Simulator &Sim = *Round.Mirrors[Helper].Sim;
    Lock.unlock();
    double Cost;
    bool Gain = tryChange(Sim, C, Current, Cost);
    Lock.lock();
    Round.Mirrors[Helper].Changed |= Gain;
    if (Round.Tries && Round.Number == Synced)
      Round.record(I, Gain, Cost, Helper + 1);
  }
}

void MinimaRefiner::helpIfWanted() {
  if (HelpWanted.load(std::memory_order_acquire))
    helpRefine(/*Owner=*/false, /*Helper=*/0);
}

void MinimaRefiner::helpUntilDone(unsigned Helper) {
  // First the costing of OptCNN's edges, from when it starts (polled: it
  // starts once the ops are costed, a few milliseconds in).
  while (!MinimaKnown.load(std::memory_order_acquire)) {
    helpFindMinima();
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  for (;;) {
    {
      std::unique_lock<std::mutex> Lock(WalksLock);
      WalkChanged.wait(Lock, [&] {
        return Finished || HelpWanted.load(std::memory_order_relaxed);
      });
      if (Finished)
        return;
    }
    helpRefine(/*Owner=*/false, Helper);
  }
}

} // namespace onnx2soap::soap_search
