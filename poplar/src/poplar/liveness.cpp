// ipuxl's Poplar: which variables are always live and how much of the
// rest is live at once, as Poplar's memory report splits "variables" into
// always-live and not-always-live data.
//
// Each program is flattened into its leaf steps (a Function expanded at
// each Call, a Repeat body once) with the variables each step reads and
// writes. A variable is always live when its value must outlive one run of
// a program: it is a constant, it is touched by more than one of the
// Engine's programs (a weight written by WeightsFromHost and read by the
// main program), its first access is a read, the host reads or writes it
// (createHostRead / createHostWrite), or no program touches it.
// Every other variable is live from a write through its last read before
// the next write (a Function's temporaries are live at each call, not
// between calls; writes in parts before any read are one definition); a
// variable a Repeat body reads before writing it is live over the whole
// body (its value crosses the back edge). The not-always-live figure of a
// tile is, as in ipuxl's PopXL model, the most that is live on it at any
// step of any program.
#include "engine_impl.hpp"

#include <algorithm>

namespace poplar {
namespace ipuxl_detail {

namespace {

struct Access {
  std::size_t step;
  bool read, write;
};

struct Flattener {
  const GraphImpl &g;
  std::size_t step = 0;
  // Per variable, its accesses in step order (a step may read and write).
  std::vector<std::vector<Access>> acc;
  // Repeat bodies: [first step, last step] and the variables read before written in them.
  std::vector<std::pair<std::size_t, std::size_t>> loops;
  std::vector<std::vector<unsigned>> loopCarried;

  void touch(const Tensor &t, bool read, bool write) {
    if (!t.valid()) return;
    for (const auto &r : t.ipuxlRep().regions) {
      auto &a = acc[r.var];
      if (!a.empty() && a.back().step == step) {
        a.back().read |= read;
        a.back().write |= write;
      } else {
        a.push_back({step, read, write});
      }
    }
  }
  void leafDone() { ++step; }

  void execute(unsigned cs) {
    for (unsigned vid : g.computeSets[cs].vertices) {
      const auto &v = g.vertices[vid];
      const auto &type = *g.vertexTypes[v.type];
      for (std::size_t f = 0; f < type.fields.size(); ++f) {
        const auto &fi = type.fields[f];
        const auto &fc = v.fields[f];
        if (!fc.set || fi.kind == FK_VALUE_SCALAR || fi.kind == FK_VALUE_VECTOR || fi.kind == FK_OPAQUE) continue;
        bool in = fi.dir == FD_IN || fi.dir == FD_INOUT, out = fi.dir == FD_OUT || fi.dir == FD_INOUT;
        touch(fc.tensor, in, out);
        for (const auto &x : fc.list) touch(x, in, out);
      }
    }
    leafDone();
  }

  void walk(const program::Program &prog) {
    const ProgramImpl &p = *prog.ipuxlImpl();
    switch (p.kind) {
    case ProgKind::Sequence:
      for (const auto &ch : p.children) walk(ch);
      return;
    case ProgKind::Execute: execute(p.cs); return;
    case ProgKind::CopyTensor:
      touch(p.src, true, false);
      touch(p.dst, false, true);
      leafDone();
      return;
    case ProgKind::CopyFromStream:
    case ProgKind::CopyFromRemote:
      touch(p.aux, true, false); // the remote buffer's offset, if any
      touch(p.dst, false, true);
      leafDone();
      return;
    case ProgKind::CopyToStream:
    case ProgKind::CopyToRemote:
    case ProgKind::PrintTensor:
      touch(p.aux, true, false);
      touch(p.src, true, false);
      leafDone();
      return;
    case ProgKind::Repeat:
    case ProgKind::RepeatWhile: {
      std::size_t first = step;
      if (p.kind == ProgKind::RepeatWhile) {
        touch(p.aux, true, false);
        leafDone();
      }
      std::vector<std::size_t> before(acc.size());
      for (std::size_t v = 0; v < acc.size(); ++v) before[v] = acc[v].size();
      for (const auto &ch : p.children) walk(ch);
      std::vector<unsigned> carried;
      for (std::size_t v = 0; v < acc.size(); ++v)
        if (acc[v].size() > before[v] && acc[v][before[v]].read) carried.push_back(static_cast<unsigned>(v));
      if (step > first) {
        loops.push_back({first, step - 1});
        loopCarried.push_back(std::move(carried));
      }
      return;
    }
    case ProgKind::If:
    case ProgKind::Switch:
      touch(p.aux, true, false);
      leafDone();
      for (const auto &ch : p.children) walk(ch);
      for (const auto &cs : p.cases) walk(cs.second);
      if (p.hasDefault) walk(p.defaultCase);
      return;
    case ProgKind::Call: walk(g.functions.at(p.cs)); return;
    case ProgKind::CrossReplica:
      for (const auto &t : p.collective->srcs) touch(t, true, false);
      for (const auto &t : p.collective->dsts) touch(t, false, true);
      leafDone();
      return;
    case ProgKind::Sync:
    case ProgKind::LoadFunction:
    case ProgKind::Abort:
    case ProgKind::WriteUndef:
    case ProgKind::Error: return;
    }
  }
};

// Live intervals [first, last] (steps) of one variable's accesses in one program.
std::vector<std::pair<std::size_t, std::size_t>> intervals(const std::vector<Access> &a) {
  std::vector<std::pair<std::size_t, std::size_t>> out;
  bool open = false, readSince = false;
  for (const auto &x : a) {
    if (x.write && !x.read && open && readSince) open = false; // a new definition: the old value is dead
    if (!open) {
      out.push_back({x.step, x.step});
      open = true;
      readSince = false;
    }
    out.back().second = x.step;
    readSince |= x.read;
  }
  return out;
}

} // namespace

Liveness liveness(const GraphImpl &g, const std::vector<program::Program> &programs) {
  unsigned tiles = g.target.getNumTiles();
  std::size_t nv = g.vars.size();
  Liveness L;
  L.alwaysLive.assign(nv, false);
  L.notAlwaysLive.assign(tiles, 0);
  std::vector<Flattener> flat;
  std::vector<unsigned> programsTouching(nv, 0);
  std::vector<bool> readFirst(nv, false), seen(nv, false);
  for (const auto &p : programs) {
    flat.push_back(Flattener{g, 0, std::vector<std::vector<Access>>(nv), {}, {}});
    flat.back().walk(p);
    for (std::size_t v = 0; v < nv; ++v) {
      const auto &a = flat.back().acc[v];
      if (a.empty()) continue;
      ++programsTouching[v];
      if (!seen[v] && a.front().read) readFirst[v] = true;
      seen[v] = true;
    }
  }
  // Tensors the host reads or writes between runs (createHostRead / createHostWrite).
  std::vector<bool> hostVisible(nv, false);
  for (const auto *m : {&g.hostWrites, &g.hostReads})
    for (const auto &kv : *m)
      for (const auto &r : kv.second.ipuxlRep().regions) hostVisible[r.var] = true;
  for (std::size_t v = 0; v < nv; ++v)
    L.alwaysLive[v] = g.vars[v].constant || programsTouching[v] != 1 || readFirst[v] || hostVisible[v];

  // Bytes of each variable per tile, for the variables that are not always live.
  std::vector<std::vector<std::pair<unsigned, std::uint64_t>>> onTile(nv);
  for (std::size_t v = 0; v < nv; ++v) {
    if (L.alwaysLive[v]) continue;
    std::map<unsigned, std::uint64_t> b;
    std::size_t sz = g.vars[v].type.ipuxlSize();
    for (auto t : g.vars[v].tile)
      if (t >= 0 && static_cast<unsigned>(t) < tiles) b[static_cast<unsigned>(t)] += sz;
    onTile[v].assign(b.begin(), b.end());
  }
  for (const auto &f : flat) {
    // +bytes at an interval's first step, -bytes after its last.
    std::vector<std::vector<std::pair<unsigned, std::int64_t>>> events(f.step + 1);
    auto add = [&](std::size_t v, std::size_t b, std::size_t e) {
      for (const auto &tb : onTile[v]) {
        events[b].push_back({tb.first, static_cast<std::int64_t>(tb.second)});
        events[e + 1].push_back({tb.first, -static_cast<std::int64_t>(tb.second)});
      }
    };
    for (std::size_t v = 0; v < nv; ++v) {
      if (L.alwaysLive[v] || f.acc[v].empty()) continue;
      auto iv = intervals(f.acc[v]);
      for (std::size_t k = 0; k < f.loops.size(); ++k)
        if (std::binary_search(f.loopCarried[k].begin(), f.loopCarried[k].end(), static_cast<unsigned>(v)))
          iv.push_back(f.loops[k]);
      // Merge overlapping intervals so that no byte is counted twice at a step.
      std::sort(iv.begin(), iv.end());
      std::vector<std::pair<std::size_t, std::size_t>> merged;
      for (const auto &x : iv) {
        if (!merged.empty() && x.first <= merged.back().second + 1)
          merged.back().second = std::max(merged.back().second, x.second);
        else
          merged.push_back(x);
      }
      for (const auto &x : merged) add(v, x.first, x.second);
    }
    std::vector<std::int64_t> cur(tiles, 0);
    for (std::size_t s = 0; s < f.step; ++s) {
      for (const auto &e : events[s]) // what died after the previous step first
        if (e.second < 0) cur[e.first] += e.second;
      for (const auto &e : events[s])
        if (e.second > 0) {
          cur[e.first] += e.second;
          L.notAlwaysLive[e.first] = std::max(L.notAlwaysLive[e.first], static_cast<std::uint64_t>(cur[e.first]));
        }
    }
  }
  return L;
}

} // namespace ipuxl_detail
} // namespace poplar
