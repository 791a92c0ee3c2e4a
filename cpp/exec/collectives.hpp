// Collectives across the replica states of one process: the math of
// all-reduce, all-gather and reduce-scatter over replica groups.
#pragma once

#include <functional>
#include <string>
#include <vector>

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
// of `total`. `exchange(send, bytes, recv, what)` is an all-gather of bytes
// across the instances, in instance order: recv (instances x bytes) gets
// every other instance's `bytes` in its block (this instance's own block is
// left as it was); it throws on a timeout or a dead peer.
using ExchangeFn =
    std::function<void(const uint8_t* send, size_t bytes, uint8_t* recv, const std::string& what)>;

// run_collective over global replica groups: groups inside this instance are
// computed in memory; when any group of the op crosses instances (the same
// answer in every instance, from the op alone), every instance's inputs are
// exchanged first and each instance computes its own members' outputs with
// the same arithmetic, in the same member order, as one process would.
// `send` / `recv`: scratch buffers kept by the caller across calls (grown as
// needed), so that large exchanges do not page-fault fresh memory each time.
void run_collective_distributed(const OpRecord& op, const std::vector<State*>& states,
                                int offset, int total, const ExchangeFn& exchange,
                                std::vector<uint8_t>& send, std::vector<uint8_t>& recv);

}  // namespace ipuxl
