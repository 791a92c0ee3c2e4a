// Storage of a program: which tensors share storage (aliases), which storage
// each graph writes, and where every storage root lives in one arena.
//
// The plan is part of the compiled program, apart from any state: each
// replica state allocates one arena of `total` bytes and places every root
// at its offset, so one plan serves any number of states.
#pragma once

#include <cstddef>
#include <set>
#include <vector>

#include "../program/program.hpp"

namespace ipuxl {

struct Aliasing {
  std::vector<int> root;                  // storage owner of each tensor
  std::vector<std::vector<int>> members;  // tensors sharing each root's storage (empty for non-roots)
};

// Outputs that alias an input share its storage (in-place and view ops).
Aliasing resolve_aliases(const ProgramDesc& desc);

// Roots each graph writes, directly or through the graphs it calls (a
// written graph input counts as a write of the caller tensor feeding it).
// `order` lists graphs callees first (ProgramDesc::validate).
std::vector<std::set<int>> written_roots(const ProgramDesc& desc, const Aliasing& al,
                                         const std::vector<int>& order);

struct MemoryPlan {
  std::vector<size_t> offset;  // per root (index = tensor id), bytes from the arena start
  size_t total = 0;            // arena bytes
  size_t unplanned = 0;        // bytes every root would need without reuse
};

// Persistent roots (variables, constants, graph inputs/outputs and their
// aliases) get their own bytes; intermediates of each graph share bytes when
// their live ranges in the graph's schedule do not overlap.
MemoryPlan plan_memory(const ProgramDesc& desc, const Aliasing& al);

inline size_t round64(size_t n) { return ((n + 63) / 64) * 64; }

}  // namespace ipuxl
