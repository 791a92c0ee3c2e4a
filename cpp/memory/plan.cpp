#include "plan.hpp"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <iterator>
#include <map>
#include <memory>

namespace ipuxl {

namespace {

// Byte ranges [start, end), kept sorted and coalesced (start -> end).
class RangeSet {
 public:
  void add(size_t s, size_t e) {
    auto it = runs_.upper_bound(s);
    if (it != runs_.begin()) {
      auto p = std::prev(it);
      if (p->second >= s) {
        s = p->first;
        e = std::max(e, p->second);
        it = runs_.erase(p);
      }
    }
    while (it != runs_.end() && it->first <= e) {
      e = std::max(e, it->second);
      it = runs_.erase(it);
    }
    runs_.emplace_hint(it, s, e);
  }
  // Whether a range meets [s, e) (start < e and end > s); if so `end` is the
  // end of the last such range: nothing placed at or above s and below it fits.
  bool blocks(size_t s, size_t e, size_t* end) const {
    auto it = runs_.lower_bound(e);
    if (it == runs_.begin()) return false;
    --it;
    if (it->second <= s) return false;
    *end = it->second;
    return true;
  }

 private:
  std::map<size_t, size_t> runs_;
};

// The byte ranges of the roots placed so far in one graph, indexed by live
// range (schedule positions) in a segment tree, so that the lowest free
// offset for a new live range is found from O(log positions) range sets
// instead of a scan of every placed root. A root with live range [f, l] is
// recorded at the O(log) nodes that tile [f, l] exactly ("cover": it is
// live over their whole span) and at every node on the paths from the
// leaves f and l to the root ("part": it is live somewhere in their span).
// Every root live somewhere in a query's span is then in the part set of a
// node tiling the query, or in the cover set of that node or an ancestor.
class LiveRangeIndex {
 public:
  explicit LiveRangeIndex(size_t positions) {
    while (size_ < positions) size_ <<= 1;
    cover_.resize(2 * size_);
    part_.resize(2 * size_);
  }

  void add(int64_t first, int64_t last, size_t start, size_t end) {
    for (size_t lo = first + size_, hi = last + size_ + 1; lo < hi; lo >>= 1, hi >>= 1) {
      if (lo & 1) at(cover_, lo++).add(start, end);
      if (hi & 1) at(cover_, --hi).add(start, end);
    }
    for (size_t leaf : {size_t(first), size_t(last)})
      for (size_t v = leaf + size_; v >= 1; v >>= 1) at(part_, v).add(start, end);
  }

  // The lowest offset at which `bytes` fit beside every placed root whose
  // live range meets [first, last] (the first fit of an address-sorted scan).
  size_t first_fit(int64_t first, int64_t last, size_t bytes) const {
    std::vector<const RangeSet*> sets;
    auto want = [&](const std::vector<std::unique_ptr<RangeSet>>& v, size_t node) {
      if (v[node]) sets.push_back(v[node].get());
    };
    for (size_t lo = first + size_, hi = last + size_ + 1; lo < hi; lo >>= 1, hi >>= 1) {
      if (lo & 1) {
        want(part_, lo);
        want(cover_, lo++);
      }
      if (hi & 1) {
        want(part_, --hi);
        want(cover_, hi);
      }
    }
    for (size_t leaf : {size_t(first), size_t(last)})
      for (size_t v = (leaf + size_) >> 1; v >= 1; v >>= 1) want(cover_, v);
    size_t off = 0;
    for (bool moved = true; moved;) {
      moved = false;
      for (const RangeSet* s : sets) {
        size_t end;
        if (s->blocks(off, off + bytes, &end)) {
          off = end;
          moved = true;
        }
      }
    }
    return off;
  }

 private:
  static RangeSet& at(std::vector<std::unique_ptr<RangeSet>>& v, size_t node) {
    if (!v[node]) v[node] = std::make_unique<RangeSet>();
    return *v[node];
  }

  size_t size_ = 1;
  std::vector<std::unique_ptr<RangeSet>> cover_, part_;
};

}  // namespace

Aliasing resolve_aliases(const ProgramDesc& desc) {
  const size_t n = desc.tensors.size();
  Aliasing al;
  al.root.resize(n);
  for (size_t i = 0; i < n; ++i) al.root[i] = (int)i;
  for (const auto& op : desc.ops)
    for (auto [o, i] : op.aliases) al.root[op.out[o]] = op.in[i];
  // Follow chains to their owner (an op's input may itself be an alias made
  // by an op recorded later). A chain longer than the tensor count is a cycle.
  for (size_t t = 0; t < n; ++t) {
    int r = al.root[t];
    size_t steps = 0;
    while (al.root[r] != r) {
      r = al.root[r];
      if (++steps > n) throw Error("tensor '" + desc.tensors[t].name + "' aliases itself");
    }
    al.root[t] = r;
  }
  al.members.assign(n, {});
  for (size_t t = 0; t < n; ++t) al.members[al.root[t]].push_back((int)t);
  return al;
}

std::vector<std::set<int>> written_roots(const ProgramDesc& desc, const Aliasing& al,
                                         const std::vector<int>& order) {
  std::vector<std::set<int>> w(desc.graphs.size());
  for (int g : order) {
    auto& mine = w[g];
    for (int op_id : desc.graphs[g].ops) {
      const auto& op = desc.ops[op_id];
      for (int i : op.modified) mine.insert(al.root[op.in[i]]);
      for (size_t b = 0; b < op.graphs.size(); ++b) {
        const auto& cw = w[op.graphs[b]];  // done: callees come first
        const auto& cg = desc.graphs[op.graphs[b]];
        for (size_t k = 0; k < cg.inputs.size(); ++k)
          if (cw.count(al.root[cg.inputs[k]])) mine.insert(al.root[op.in[op.caller_input(b, k)]]);
      }
    }
  }
  return w;
}

MemoryPlan plan_memory(const ProgramDesc& desc, const Aliasing& al) {
  const auto& ts = desc.tensors;
  const size_t n = ts.size();
  const auto& root = al.root;
  // Pinned roots keep their bytes for the whole program: variables,
  // constants, graph inputs and outputs (a repeated body reads its inputs in
  // every iteration; outputs are copied out after the body), and anything
  // aliased with them.
  std::vector<char> pinned(n, 0);
  for (size_t i = 0; i < n; ++i)
    if (ts[i].kind != TensorKind::Intermediate) pinned[root[i]] = 1;
  for (const auto& g : desc.graphs) {
    for (int t : g.inputs) pinned[root[t]] = 1;
    for (int t : g.outputs) pinned[root[t]] = 1;
  }
  // Tensors an op of the weight-transfer programs touches live across
  // programs (a replica-sharded variable's shard is loaded by
  // weights_from_host, used by the main program and stored back by
  // weights_to_host): schedule positions within the main graph do not
  // order them against the main program's ops.
  for (const auto& op : desc.ops) {
    if (op.context != ExecContext::WeightsFromHost && op.context != ExecContext::WeightsToHost &&
        op.context != ExecContext::OptimizerFromHost)
      continue;
    for (int t : op.in)
      if (t >= 0) pinned[root[t]] = 1;
    for (int t : op.out)
      if (t >= 0) pinned[root[t]] = 1;
  }
  // Live range of each root: [first op that defines or uses any of its
  // aliases, last op that does], positions within its graph's schedule.
  std::vector<int64_t> first(n, INT64_MAX), last(n, -1);
  std::vector<int> graph_of(n, -1);
  for (size_t g = 0; g < desc.graphs.size(); ++g) {
    const auto& ops = desc.graphs[g].ops;
    for (size_t pos = 0; pos < ops.size(); ++pos) {
      const auto& op = desc.ops[ops[pos]];
      auto touch = [&](int t) {
        if (t < 0) return;
        int r = root[t];
        first[r] = std::min<int64_t>(first[r], (int64_t)pos);
        last[r] = std::max<int64_t>(last[r], (int64_t)pos);
        graph_of[r] = (int)g;
      };
      for (int t : op.in) touch(t);
      for (int t : op.out) touch(t);
    }
  }
  MemoryPlan plan;
  plan.offset.assign(n, 0);
  std::vector<std::vector<int>> per_graph(desc.graphs.size());
  for (size_t i = 0; i < n; ++i) {
    if (root[i] != (int)i) continue;
    size_t bytes = round64(ts[i].nbytes());
    plan.unplanned += bytes;
    if (pinned[i] || graph_of[i] < 0) {  // pinned, or never touched by an op
      plan.offset[i] = plan.total;
      plan.total += bytes;
    } else {
      per_graph[graph_of[i]].push_back((int)i);
    }
  }
  // Per graph: greedy placement, largest first, at the lowest offset that
  // does not collide with a placed tensor whose live range overlaps.
  for (size_t g = 0; g < per_graph.size(); ++g) {
    auto& roots = per_graph[g];
    if (roots.empty()) continue;
    std::sort(roots.begin(), roots.end(), [&](int a, int b) {
      size_t sa = ts[a].nbytes(), sb = ts[b].nbytes();
      return sa != sb ? sa > sb : a < b;
    });
    LiveRangeIndex placed(desc.graphs[g].ops.size());
    size_t region = 0;
    for (int r : roots) {
      size_t bytes = round64(ts[r].nbytes());
      size_t off = placed.first_fit(first[r], last[r], bytes);
      placed.add(first[r], last[r], off, off + bytes);
      plan.offset[r] = plan.total + off;  // plan.total is this region's base until the loop ends
      region = std::max(region, off + bytes);
    }
    plan.total += region;
  }
  return plan;
}

}  // namespace ipuxl
