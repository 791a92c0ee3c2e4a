// Collectives across the replica states of one process: the math of
// all-reduce, all-gather and reduce-scatter over replica groups.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "exchange_abi.h"
#include "state.hpp"

namespace ipuxl {

// Members of each group, in rank order (ascending replica index).
std::vector<std::vector<int>> replica_groups(const CollectiveDesc& c, int replicas);

// Runs collective `op` over `states` (one per replica, every replica
// present): reads each member's input, writes each member's output.
// Reductions accumulate in double (floats) or 64-bit integers and round
// once, so the result does not depend on the order of the replicas.
void run_collective(const OpRecord& op, const std::vector<State*>& states);

// Several processes ("instances") run the program, each over the same number
// of replica states: this one holds global replicas [offset, offset + R),
// of `total`. `exchange(sends, recvs, what)` sends each block of `sends` to
// its peer instance and receives each block of `recvs` from its peer, then
// waits for all of them; blocks between one pair of instances match in the
// order listed (every instance lists its side of the same messages). It
// throws on a timeout or a dead peer.
using Block = ipuxl_block;
using ExchangeFn = std::function<void(const std::vector<Block>& sends,
                                      const std::vector<Block>& recvs, const std::string& what)>;

// run_collective over global replica groups: groups inside this instance are
// computed in memory. When a group of the op crosses instances (the same
// answer in every instance, from the op alone):
// * an all-reduce of at least kSplitAllReduceBytes (per replica) whose every group has
//   members on every instance is split: instance i reduces slice i of the
//   elements (ceil(n / instances) each) from every member's slice i
//   (exchanged first), then the reduced slices are exchanged (an all-gather)
//   into the outputs - a reduce-scatter then an all-gather, each element
//   reduced once, by one instance, with the arithmetic and member order of
//   one process, so the same bits;
// * anything else exchanges every instance's inputs (an all-gather) and each
//   instance computes its own members' outputs, as one process would.
// `recv`: a scratch buffer kept by the caller across calls (grown as
// needed), so that large exchanges do not page-fault fresh memory each time.
// The split costs a second round of messages and saves half the copying and
// reducing (2 instances): below about 128 KB the round trip dominates and
// one round is faster, above it the halved copying wins. The same on every
// instance (a constant), so they all pick the same messages.
constexpr size_t kSplitAllReduceBytes = 128 << 10;
void run_collective_distributed(const OpRecord& op, const std::vector<State*>& states,
                                int offset, int total, const ExchangeFn& exchange,
                                std::vector<uint8_t>& recv);

}  // namespace ipuxl
