// The IPU model: liveness and cycles over program steps (liveness.cpp).
#include "state.hpp"

#include <algorithm>
#include <cmath>

namespace ipuxl {
namespace model {

// ----------------------------------------------------- liveness + cycles
bool Model::always_live(int t) const {
  const auto k = d_.tensors[al_.root[t]].kind;
  return k == TensorKind::Variable || k == TensorKind::Constant;
}

int64_t Model::copy_cycles(int src, int dst) const {
  CopyCost cc = copy_cost(mapping(src), mapping(dst), (int64_t)d_.tensors[dst].nbytes());
  return cc.compute + cc.exchange;
}

int64_t Model::seq_cycles(const Node& n, bool callees) const {
  int64_t c = 0;
  for (const auto& ch : n.body) {
    switch (ch.kind) {
      case NodeKind::Copy: c += copy_cycles(ch.src, ch.dst); break;
      case NodeKind::Call:
        c += t_.call_cycles + (callees ? gcycles_[low_.functions[ch.fn].graph] : 0);
        break;
      case NodeKind::Carry:
        for (auto& [s, d] : ch.carry_direct) c += copy_cycles(s, d);
        for (auto& [s, d] : ch.carry_staged) c += 2 * copy_cycles(s, d);
        break;
      case NodeKind::Sequence: c += seq_cycles(ch, callees); break;
      case NodeKind::Bind:
        for (auto& [s, d] : bound_copies(ch)) c += copy_cycles(s, d);
        break;
      default: break;
    }
  }
  return c;
}

bool Model::on_io_tiles(const OpRecord& op) const {
  return t_.num_io_tiles > 0 && op.placement.tile_set == TileSet::IO;
}

void Model::storage_roots(int t, std::vector<int>& out) const {
  const int r = al_.root[t];
  if (view_parts_[r].empty()) {
    out.push_back(r);
    return;
  }
  for (int p : view_parts_[r]) storage_roots(p, out);
}

bool Model::shares_caller_storage(int root) const {
  auto f = bind_src_.find(root);
  return f != bind_src_.end() && f->second.size() == 1 && !copied_roots_.count(root);
}

// The members of one MultiExchange are consecutive steps: one exchange,
// so only the first pays the sync.
void Model::merged_sync(StepRec& s, const OpRecord& op, const std::vector<StepRec>& out) const {
  s.xgroup = op.exchange_group;
  if (s.xgroup < 0 || out.empty() || out.back().xgroup != s.xgroup) return;
  const int64_t sync = std::min(s.cycles, t_.sync_global_cycles);
  s.cycles -= sync;
  s.own -= std::min(s.own, sync);
}

// Leaf steps of a graph body, in program order; a call site's copies are
// steps of their own, its Call one step holding the callee's peak.
void Model::flatten(const Node& n, std::vector<StepRec>& out, int site_op) {
  switch (n.kind) {
    case NodeKind::Sequence: {
      int site = n.op >= 0 ? n.op : site_op;
      if (n.op >= 0) site_bound_.clear(), site_held_.clear();
      for (const auto& ch : n.body) flatten(ch, out, site);
      return;
    }
    case NodeKind::RemoteLoad:   // a leaf program like Execute: its cost is the op's
    case NodeKind::RemoteStore:
    case NodeKind::Collective:
    case NodeKind::Execute: {
      StepRec s;
      s.kind = n.kind == NodeKind::Execute      ? ProgramStep::Execute
               : n.kind == NodeKind::Collective ? ProgramStep::Collective
                                                : ProgramStep::RemoteCopy;
      s.op = n.op;
      const auto& op = d_.ops[n.op];
      const OpCost& c = cost_[n.op];
      // A matmul / convolution that rearranges operands into its plan's
      // layout runs that Copy program first (poplin's pre-arrangement),
      // then its compute sets. Poplar's liveness is per program step
      // (IPU Programmer's Guide, "Variable liveness"): during the copy the
      // operand and its copy are live and the output is not yet written;
      // afterwards only the copy is read, so an operand this op reads
      // last is dead for the compute sets.
      if (!c.rearranged.empty() && s.kind == ProgramStep::Execute) {
        StepRec pre;
        pre.kind = ProgramStep::Execute;
        pre.op = n.op;
        pre.touched = c.rearranged;
        pre.temp = c.tiles;
        pre.temp.per_tile = pre.temp.last = c.rearranged_t;
        pre.io = on_io_tiles(op);
        pre.phase = true;
        out.push_back(std::move(pre));
      }
      for (int t : op.in)
        if (std::find(c.rearranged.begin(), c.rearranged.end(), t) == c.rearranged.end())
          s.touched.push_back(t);
      s.touched.insert(s.touched.end(), op.out.begin(), op.out.end());
      s.temp = c.tiles;
      s.temp.per_tile = s.temp.last = c.temp + c.rearranged_hold_t;
      s.cycles = s.own = c.cycles();
      s.load_graph = c.code_load_graph;
      s.io = on_io_tiles(op);
      merged_sync(s, op, out);
      out.push_back(std::move(s));
      return;
    }
    case NodeKind::Copy: {
      StepRec s;
      s.kind = n.inter_ipu ? ProgramStep::IpuCopy : ProgramStep::Copy;
      s.op = n.inter_ipu ? n.op : site_op;
      s.copy_src = n.src;
      s.copy_dst = n.dst;
      s.touched = {n.src, n.dst};
      s.cycles = s.own = copy_cycles(n.src, n.dst);
      out.push_back(std::move(s));
      return;
    }
    case NodeKind::Bind: {
      // Caller tensors used in place of the callee's (no copy): live
      // while the callee runs.
      for (const auto& it : n.bind) {
        if (it.to < 0 || it.group.empty()) continue;
        auto f = bind_src_.find(al_.root[it.group[0]]);
        if (f == bind_src_.end() || f->second.size() <= 1) {
          site_bound_.push_back(it.to);
          const int cr = al_.root[it.group[0]];
          if (held_out_.count(cr) || tail_owned_.count(cr)) site_held_.push_back(it.to);
        }
      }
      auto copies = bound_copies(n);
      if (copies.empty()) return;
      StepRec s;
      s.kind = ProgramStep::Copy;
      s.op = site_op;
      for (auto& [a, b] : copies) {
        s.touched.push_back(a), s.touched.push_back(b);
        s.cycles += copy_cycles(a, b);
      }
      s.copy_src = copies[0].first;
      s.copy_dst = copies[0].second;
      s.own = s.cycles;
      out.push_back(std::move(s));
      return;
    }
    case NodeKind::Call: {
      StepRec s;
      s.kind = ProgramStep::Call;
      s.op = site_op;
      const int g = low_.functions[n.fn].graph;
      s.inner = {g};
      s.calls = {g};
      // The caller's tensors copied in or out are live at their copy steps
      // (the callee's peak holds its own parameters); those bound in
      // place are live for the call.
      if (site_op >= 0) s.touched = site_bound_, s.held = site_held_;
      s.cycles = t_.call_cycles + gcycles_[g];
      s.own = t_.call_cycles;
      out.push_back(std::move(s));
      return;
    }
    case NodeKind::Repeat: {
      StepRec s;
      s.kind = ProgramStep::Repeat;
      s.op = site_op;
      const Node& body = n.body[0];
      for (const auto& ch : body.body)
        if (ch.kind == NodeKind::Call) {
          s.inner.push_back(low_.functions[ch.fn].graph);
          s.calls.push_back(low_.functions[ch.fn].graph);
        }
      // Carried inputs are copied in before the loop and the outputs out
      // after it: only what is bound in place is live during the loop.
      if (site_op >= 0) s.touched = site_bound_, s.held = site_held_;
      s.cycles = n.count * (t_.loop_cycles + seq_cycles(body));
      s.own = n.count * (t_.loop_cycles + seq_cycles(body, false));
      out.push_back(std::move(s));
      return;
    }
    case NodeKind::If: {
      StepRec s;
      s.kind = ProgramStep::If;
      s.op = n.op;
      const auto& op = d_.ops[n.op];
      s.touched = op.in;
      s.touched.insert(s.touched.end(), op.out.begin(), op.out.end());
      int64_t best = 0, best_own = 0;
      for (const auto& br : n.body) {
        const int64_t bc = seq_cycles(br);
        if (bc >= best) best = bc, best_own = seq_cycles(br, false);
        for (const auto& ch : br.body)
          if (ch.kind == NodeKind::Call) s.inner.push_back(low_.functions[ch.fn].graph);
      }
      s.calls = s.inner;
      s.cycles = t_.if_cycles + t_.sync_internal_cycles + best;
      s.own = t_.if_cycles + t_.sync_internal_cycles + best_own;
      out.push_back(std::move(s));
      return;
    }
    case NodeKind::StreamIn:
    case NodeKind::StreamOut: {
      StepRec s;
      s.kind = ProgramStep::StreamCopy;
      s.op = n.op;
      const int t = n.kind == NodeKind::StreamIn ? n.dst : n.src;
      s.touched = {t};
      // The landing pad (a clone of the tensor) is live for the step.
      s.temp = mapping(t);
      const int64_t bytes = (int64_t)d_.tensors[t].nbytes();
      s.cycles = stream_cycles(bytes, t_.host_bytes_per_second) +
                 t_.supervisor_cycles + ceil_div(mapping(t).max_tile(), t_.memcpy_bytes_per_cycle);
      s.own = s.cycles;
      s.io = on_io_tiles(d_.ops[n.op]);
      merged_sync(s, d_.ops[n.op], out);
      out.push_back(std::move(s));
      return;
    }
    case NodeKind::Carry: {
      StepRec s;
      s.kind = ProgramStep::Copy;
      s.op = site_op;
      for (auto& [a, b] : n.carry_direct) {
        s.touched.push_back(a), s.touched.push_back(b);
        s.cycles += copy_cycles(a, b);
      }
      for (auto& [a, b] : n.carry_staged) {
        s.touched.push_back(a), s.touched.push_back(b);
        s.cycles += 2 * copy_cycles(a, b);
      }
      s.own = s.cycles;
      out.push_back(std::move(s));
      return;
    }
  }
}

// A caller tensor aliased with a callee's input (AliasZeroCopy: one Poplar
// tensor) whose last use in the caller is that call lives, as PopART's
// LivenessAnalyzer places it in the global schedule with the call
// expanded, until its last use inside the callee, not for the whole call.
// Only when the call is the tensor's one site binding it to an input and
// its last touch,
// and the tensor is a plain storage root of the caller: the callee then
// counts it from its entry to its last use, and the caller not during
// the call (the held mechanism).
void Model::find_tail_owned() {
  tail_owned_.clear();
  std::map<int, std::vector<int>> by_src;  // caller root -> callee roots aliased with it
  for (auto& [cr, srcs] : bind_src_)
    if (srcs.size() == 1 && shares_caller_storage(cr) && !held_out_.count(cr))
      by_src[*srcs.begin()].push_back(cr);
  if (by_src.empty()) return;
  std::vector<int> rs;
  for (int g : order_) {
    std::vector<StepRec> steps;
    flatten(body_of(g), steps, -1);
    std::unordered_map<int, int> last, call_touches;
    for (int s = 0; s < (int)steps.size(); ++s)
      for (int t : steps[s].touched) {
        if (t < 0) continue;
        rs.clear();
        storage_roots(t, rs);
        for (int r : rs) {
          if (d_.tensors[r].graph != g || always_live(r)) continue;
          if (g != main_ && shares_caller_storage(r) && !held_out_.count(r)) continue;
          last[r] = s;
          // Sites binding r to a callee's input (a site binding it to an
          // output, e.g. the load writing it, is its write, not a use).
          auto f = by_src.find(r);
          // Any call, loop or branch site running a graph that binds it
          // (a Repeat's body holds it throughout) counts.
          if (f != by_src.end() &&
              std::any_of(f->second.begin(), f->second.end(), [&](int cr) {
                const int cg = d_.tensors[cr].graph;
                return std::find(steps[s].calls.begin(), steps[s].calls.end(), cg) !=
                       steps[s].calls.end();
              }))
            ++call_touches[r];
        }
      }
    for (auto& [src, s] : last) {
      auto f = by_src.find(src);
      if (f == by_src.end() || call_touches[src] != 1) continue;
      const StepRec& st = steps[s];
      if (st.kind != ProgramStep::Call || st.calls.size() != 1 || !view_parts_[src].empty()) continue;
      std::vector<int> hit;
      for (int cr : f->second)
        if (d_.tensors[cr].graph == st.calls[0]) hit.push_back(cr);
      if (hit.size() != 1) continue;
      const auto& in = d_.graphs[st.calls[0]].inputs;
      if (std::none_of(in.begin(), in.end(), [&](int t) { return al_.root[t] == hit[0]; })) continue;
      tail_owned_.insert(hit[0]);
    }
  }
}

void Model::liveness_and_cycles() {
  const size_t ng = d_.graphs.size();
  peak_.assign(ng, {});
  peak_list_.assign(ng, {});
  gcycles_.assign(ng, 0);
  find_tail_owned();  // flattens (step cycles read gcycles_, not used here)
  std::vector<double> cur(T_), step(T_);
  for (int g : order_) {
    std::vector<StepRec> steps;
    flatten(body_of(g), steps, -1);
    const auto& gd = d_.graphs[g];
    // Births and deaths of this graph's not-always-live storage roots.
    std::unordered_map<int, std::pair<int, int>> span;  // root -> (first, last)
    const int S = (int)steps.size();
    std::vector<int> rs;
    auto touch = [&](int t, int s) {
      if (t < 0) return;
      rs.clear();
      storage_roots(t, rs);
      for (int r : rs) {
        if (d_.tensors[r].graph != g || always_live(r)) continue;
        if (g != main_ && shares_caller_storage(r) && !held_out_.count(r) && !tail_owned_.count(r))
          continue;
        auto it = span.find(r);
        if (it == span.end()) span.emplace(r, std::make_pair(s, s));
        else it->second.second = std::max(it->second.second, s);
      }
    };
    for (int s = 0; s < S; ++s)
      for (int t : steps[s].touched) touch(t, s);
    // A Function's parameters are allocated once and live for its whole
    // body (§4.4: "Subgraph inputs and outputs are separate tensors
    // allocated once"); an output aliased with its caller's tensor
    // (held_out_) only from the op writing it.
    if (g != main_) {
      for (int t : gd.inputs) {
        touch(t, 0);
        if (!tail_owned_.count(al_.root[t])) touch(t, std::max(0, S - 1));
      }
      for (int t : gd.outputs) {
        if (!held_out_.count(al_.root[t])) touch(t, 0);
        touch(t, std::max(0, S - 1));
      }
    }
    std::vector<std::vector<int>> births(S + 1), deaths(S + 1);
    std::vector<int> roots;
    roots.reserve(span.size());
    for (auto& kv : span) roots.push_back(kv.first);
    std::sort(roots.begin(), roots.end());
    for (int r : roots) {
      births[span[r].first].push_back(r);
      deaths[span[r].second].push_back(r);
    }
    // Loaded code: live from its load to the last step calling the graph.
    std::vector<std::pair<int, int>> code_spans;  // (graph, last step)
    std::map<int, int> load_step;
    for (int s = 0; s < S; ++s) {
      if (steps[s].load_graph >= 0 && !load_step.count(steps[s].load_graph))
        load_step[steps[s].load_graph] = s;
    }
    std::map<int, int> load_end;
    for (auto& [lg, s0] : load_step) {
      int end = s0;
      for (int s = s0; s < S; ++s)
        for (int cg : steps[s].calls)
          if (cg == lg) end = s;
      load_end[lg] = end;
    }
    std::fill(cur.begin(), cur.end(), 0.0);
    std::vector<double> peak(T_, 0.0);
    double cur_sum = 0;
    double best_live = -1;
    int best_step = -1, best_inner = -1;
    std::vector<int> best_others, best_held;
    int64_t cyc = 0;
    // IO tiles: a lane beside compute. An IO step starts once issued (and
    // the lane is free); a later step touching its tensors waits for it.
    int64_t io_free = 0;
    std::unordered_map<int, int64_t> io_ready;  // storage root -> end of its IO step
    double phase_live = 0, phase_mx = 0;  // a rearrangement step, folded into its op's
    for (int s = 0; s < S; ++s) {
      StepRec& st = steps[s];
      for (int r : births[s]) {
        add_map(cur, map_[r], 1.0);
        cur_sum += (double)map_[r].total();
      }
      for (auto& [lg, s0] : load_step)
        if (s0 == s) {
          for (int t = 0; t < T_; ++t) cur[t] += loaded_[lg][t];
          for (double b : loaded_[lg]) cur_sum += b;
        }
      std::copy(cur.begin(), cur.end(), step.begin());
      double extra = 0;
      if (st.temp.count > 0) {
        add_map(step, st.temp, 1.0);
        extra += (double)st.temp.total();
      }
      // Tensors of other graphs a step touches (a callee's parameters at
      // its call site's copies) are live for the step.
      std::vector<int> others;  // kept for the peak list
      for (int t : st.touched) {
        if (t < 0) continue;
        rs.clear();
        storage_roots(t, rs);
        for (int r : rs) {
          if (d_.tensors[r].graph == g || always_live(r) || shares_caller_storage(r)) continue;
          if (std::find(others.begin(), others.end(), r) != others.end()) continue;
          others.push_back(r);
          add_map(step, map_[r], 1.0);
          extra += (double)map_[r].total();
        }
      }
      // Caller tensors the callee's peak counts from their write (held):
      // not the caller's during the call.
      std::vector<int> held;
      for (int t : st.held) {
        rs.clear();
        storage_roots(t, rs);
        for (int r : rs) {
          auto sp = span.find(r);
          if (sp == span.end() || sp->second.first > s || sp->second.second < s) continue;
          if (std::find(held.begin(), held.end(), r) != held.end()) continue;
          held.push_back(r);
          add_map(step, map_[r], -1.0);
          extra -= (double)map_[r].total();
        }
      }
      int big_inner = -1;  // the callee whose peak list the step's stands for
      if (!st.inner.empty()) {
        // One callee runs at a time: the step holds the largest peak per
        // tile (a Repeat's body, or either branch of an If).
        std::vector<double> in(T_, 0.0);
        double big = -1;
        for (int cg : st.inner) {
          if (peak_[cg].empty()) continue;
          double sum = 0;
          for (int t = 0; t < T_; ++t) {
            in[t] = std::max(in[t], (double)peak_[cg][t]);
            sum += peak_[cg][t];
          }
          if (sum > big) big = sum, big_inner = cg;
        }
        for (int t = 0; t < T_; ++t) {
          step[t] += in[t];
          extra += in[t];
        }
      }
      if (cur_sum + extra > best_live) {
        best_live = cur_sum + extra;
        best_step = s;
        best_others = others;
        best_held = held;
        best_inner = big_inner;
      }
      // The most on one tile is reported for the main graph's steps only;
      // the other graphs' steps need just the per-tile peak (a loop the
      // compiler vectorises: these two loops run once per step per tile).
      double mx = 0;
      if (g == main_) {
        for (int t = 0; t < T_; ++t) {
          peak[t] = std::max(peak[t], step[t]);
          mx = std::max(mx, step[t]);
        }
      } else {
        double* pk = peak.data();
        const double* sp = step.data();
        for (int t = 0; t < T_; ++t) pk[t] = std::max(pk[t], sp[t]);
      }
      if (st.io) {
        const int64_t start = std::max(cyc, io_free);
        io_free = start + st.cycles;
        for (int t : st.touched)
          if (t >= 0) io_ready[al_.root[t]] = io_free;
      } else {
        int64_t start = cyc;
        if (!io_ready.empty())
          for (int t : st.touched) {
            if (t < 0) continue;
            auto it = io_ready.find(al_.root[t]);
            if (it != io_ready.end()) start = std::max(start, it->second);
          }
        cyc = start + st.cycles;
      }
      if (g == main_ && st.phase) {
        // The op's rearrangement: reported with the op's step (the larger).
        phase_live = cur_sum + extra;
        phase_mx = mx;
      } else if (g == main_) {
        Step out;
        out.kind = program_step_name(st.kind);
        out.op = st.op;
        out.cycles = st.cycles;
        out.live_bytes = (int64_t)std::max(cur_sum + extra, phase_live);
        out.max_tile_live = (int64_t)std::max(mx, phase_mx);
        phase_live = phase_mx = 0;
        if ((st.kind == ProgramStep::Copy || st.kind == ProgramStep::IpuCopy) &&
            st.copy_src >= 0)
          out.label = d_.tensors[st.copy_src].name + " -> " + d_.tensors[st.copy_dst].name;
        else if (st.op >= 0)
          out.label = d_.ops[st.op].name;
        r_.steps.push_back(std::move(out));
      }
      // Per-op cycles: Execute steps are the op; copies, calls and loops
      // of a call site belong to the site's op.
      if (st.op >= 0) opcyc_[st.op] += st.own;
      for (int r : deaths[s]) {
        add_map(cur, map_[r], -1.0);
        cur_sum -= (double)map_[r].total();
      }
      for (auto& [lg, e] : load_end)
        if (e == s) {
          for (int t = 0; t < T_; ++t) cur[t] -= loaded_[lg][t];
          for (double b : loaded_[lg]) cur_sum -= b;
        }
    }
    gcycles_[g] = std::max(cyc, io_free);
    peak_[g].assign(peak.begin(), peak.end());
    // What is live at the step of most live bytes: this graph's roots
    // whose span covers it, the other graphs' tensors and temporaries it
    // touches, and the peak list of the callee it holds.
    auto& pl = peak_list_[g];
    if (best_step >= 0) {
      for (int r : roots)
        if (span[r].first <= best_step && best_step <= span[r].second &&
            std::find(best_held.begin(), best_held.end(), r) == best_held.end())
          pl.push_back(PeakEntry{r, -1, g, map_[r].total()});
      for (int r : best_others) pl.push_back(PeakEntry{r, -1, g, map_[r].total()});
      const StepRec& bs = steps[best_step];
      if (bs.temp.count > 0 && bs.temp.total() > 0)
        pl.push_back(PeakEntry{-1, bs.op, g, bs.temp.total()});
      if (best_inner >= 0)
        pl.insert(pl.end(), peak_list_[best_inner].begin(), peak_list_[best_inner].end());
    }
    if (g == main_) main_peak_ = peak;
  }
  r_.total_cycles = gcycles_[main_];
  auto prog_cycles = [&](int p) {
    std::vector<StepRec> steps;
    flatten(low_.programs[p], steps, -1);
    int64_t c = 0;
    for (auto& s : steps) c += s.cycles;
    return c;
  };
  r_.weights_from_host_cycles = prog_cycles(kWeightsFromHostProgram);
  r_.weights_to_host_cycles = prog_cycles(kWeightsToHostProgram);
}

}  // namespace model
}  // namespace ipuxl
