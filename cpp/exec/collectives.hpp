// Collectives across the replica states of one process: the math of
// all-reduce, all-gather and reduce-scatter over replica groups.
#pragma once

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

}  // namespace ipuxl
