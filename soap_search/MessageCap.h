//===- soap_search/MessageCap.h - Messages per tensor, bounded --*- C++ -*-===//
//
// Internal to soap_search. A tensor split one way by its producer and
// another way by a consumer crosses in a message per overlapping pair of
// partitions on different devices: with P and C partitions, up to P * C of
// them, each a transfer task and one more for its gradient. On 1,024 GPUs a
// random strategy of an unrolled RNN makes 20 to 40 million messages
// (hundreds of tensors in hundreds of thousands each): a simulator of tens
// of gigabytes; four chains, one from a random strategy, ran a 24 GiB
// machine out of memory. The search leaves out every strategy in which a
// tensor crosses in more than maxMessagesPerTensor(devices) messages: its
// random starts are drawn within the bound, its steps that would pass it
// are not taken, and a built-in strategy a chain starts from is brought
// within it. On 64 devices or fewer no strategy can pass the bound (at most
// 64 * 64 pairs), so nothing changes there.
//
//===----------------------------------------------------------------------===//
#ifndef ONNX2SOAP_SOAP_SEARCH_MESSAGECAP_H
#define ONNX2SOAP_SOAP_SEARCH_MESSAGECAP_H

#include "ir/Graph.h"
#include "simulator/Strategy.h"
#include "soap_search/ConfigSpace.h"
#include "soap_search/Random.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/SmallVector.h"
#include <vector>

namespace onnx2soap::soap_search {

/// The most messages in which one tensor may cross from its producer's
/// partitions to a consumer's, in a strategy the search considers on
/// NumDevices devices: 16 per device, and at least 4,096 (all of 64
/// devices to all). A consumer split over 16 devices may gather its input
/// from all of them (the expert strategy's fully-connected layers within a
/// node of 8 read from every device of a data-parallel cluster).
uint64_t maxMessagesPerTensor(unsigned NumDevices);

class MessageCap {
public:
  MessageCap(const ir::Graph &G, unsigned NumDevices);

  /// The bound, maxMessagesPerTensor() of the devices.
  uint64_t bound() const { return Max; }

  /// Whether giving every op of Unit config C in S makes a tensor between
  /// them and the ops around them cross in more messages than the bound.
  bool exceeded(const simulator::Strategy &S, llvm::ArrayRef<ir::OpId> Unit,
                const simulator::ParallelConfig &C) const;

  /// S with each op whose inputs pass the bound (in op order, each judged
  /// after the ops before it) given Fallback's config for it.
  simulator::Strategy within(simulator::Strategy S,
                             const simulator::Strategy &Fallback) const;

  /// A random strategy of Space within the bound (Fallback within it): in
  /// op order, each op's config drawn from Space, drawn again up to 8
  /// times while it passes the bound with the ops around it, else
  /// Fallback's. On 64 devices or fewer, one draw per op, as
  /// ConfigSpace::random gives them.
  simulator::Strategy randomWithin(const ConfigSpace &Space,
                                   simulator::Strategy Fallback, Rng &R) const;

private:
  /// Whether input Slot of Consumer passes the bound under PC and CC.
  bool tooMany(ir::OpId Consumer, unsigned Slot,
               const simulator::ParallelConfig &PC,
               const simulator::ParallelConfig &CC) const;
  /// Whether an input of Op, of config Own, passes the bound, its producers'
  /// configs as ConfigOf gives them.
  bool
  inputsExceed(ir::OpId Op, const simulator::ParallelConfig &Own,
               llvm::function_ref<const simulator::ParallelConfig &(ir::OpId)>
                   ConfigOf) const;

  const ir::Graph &G;
  uint64_t Max;
  /// Whether any pair of configs can pass the bound (NumDevices^2 > Max);
  /// nothing is checked when none can.
  bool Reachable;
  std::vector<llvm::SmallVector<ir::OpId, 2>> Consumers;
};

} // namespace onnx2soap::soap_search

#endif
