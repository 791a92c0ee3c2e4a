// The matmul planner of ipuxl's IPU model, shared by the Session's model
// (cpp/model/amp.cpp) and ipuxl's poplin::matMul (poplar/src/poplin), so
// that the program the Session costs and the one ipuxl's Poplar builds
// have the same plan: the same partition of the output's rows (M),
// columns (N, in groups of the AMP's output channels) and contraction (K,
// in groups of its input channels) over the tiles, the same partials
// (float, as poplin's default partialsType) and the same reduction of
// the K split. Header-only: poplin is built without the model's library.
//
// The vertices of a plan follow PopLibs: one poplin::ConvPartial1x1Out
// supervisor vertex per tile and serial step (lib/poplin/codelets/
// ConvPartial1x1Out.cpp: `in` one edge per conv group x input-channel
// group, `weights` one per conv group x output x input group, `out` one
// per conv group x output group, a worklist of 3 entries per worker
// context, 7 unsigned short scalars); when K is split, the partials
// reduced on the output's tiles by poplin::ReduceAdd (lib/poplin/
// codelets/ReduceAdd.cpp: `partials` one edge per partial, `out`, two
// unsigned short scalars numPartials and numElems).
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "target.hpp"

namespace ipuxl {
namespace model {

struct Plan {
  int64_t pg = 1, pm = 1, pn = 1, pk = 1, ps = 1;  // ps: serial column steps
  int64_t compute = 0, exch_in = 0, exch_out = 0, reduce = 0;
  int64_t a_t = 0, b_t = 0, partial_t = 0, recv_t = 0, b_resident_t = 0;
  int64_t a_piece_t = 0;  // A's piece of a tile (b_resident_t: B's piece of one step)
  int64_t state = 0, xcode = 0;
  int64_t tiles() const { return pg * pm * pn * pk; }
  int64_t cycles() const { return compute + exch_in + exch_out + reduce; }
};

// One matmul-shaped problem: G groups (grouped: each its own [M,K]x[K,N];
// else G x M rows share B) of [M,K] x [K,N] in `half` or float elements
// of `es` bytes, on `tiles` tiles; a_resident / b_resident: the operand is
// laid out by the plan (created by the op, PopART's CanCreate); `amp` the
// availableMemoryProportion; a_reuse / b_reuse: how many of the matmul
// form's elements one stored element feeds (a convolution's kernel taps).
struct MatMulProblem {
  int64_t G = 1;
  bool grouped = false;
  int64_t M = 1, K = 1, N = 1;
  bool half = false;
  int64_t es = 4;
  int64_t tiles = 1;
  bool a_resident = true, b_resident = true;
  double amp = 0.6;
  int64_t a_reuse = 1, b_reuse = 1;
  // poplin's partialsType "half" (float16 inputs only): 2-byte partial
  // sums and the fp16-in/fp16-out conv units; else float partials.
  bool half_partials = false;
};

namespace plan_detail {
inline int64_t cdiv(int64_t a, int64_t b) { return b <= 0 ? 0 : (a + b - 1) / b; }
}  // namespace plan_detail

// Elements a tile of the plan's creator layout (the model's `spread`,
// poputil's linear mapping): ceil(n / tiles) consecutive elements a tile.
inline int64_t spread_grain(int64_t nelms, int64_t tiles) {
  return plan_detail::cdiv(nelms, std::max<int64_t>(1, std::min(tiles, nelms)));
}

// Values v in [1, x] giving distinct ceil(x / v), thinned to at most `keep`.
inline std::vector<int64_t> plan_splits(int64_t x, int64_t cap, size_t keep = 40) {
  using plan_detail::cdiv;
  std::vector<int64_t> v;
  x = std::max<int64_t>(1, x);
  int64_t last = -1;
  for (int64_t q = 1; q <= x && q <= cap;) {
    int64_t s = cdiv(x, q);
    if (s != last) {
      v.push_back(q);
      last = s;
    }
    // next q giving a smaller ceil(x/q)
    if (s <= 1) break;
    int64_t nq = cdiv(x, s - 1);
    q = std::max(q + 1, nq);
  }
  if (v.size() > keep && keep >= 2) {
    std::vector<int64_t> thin;
    for (size_t i = 0; i < keep; ++i) thin.push_back(v[i * (v.size() - 1) / (keep - 1)]);
    thin.erase(std::unique(thin.begin(), thin.end()), thin.end());
    v = thin;
  }
  return v;
}

// Cycles of an elementwise supervisor vertex over n elements of es bytes
// (§3.1 form): each worker runs a header plus per_vector cycles per vector
// of its ceil(n / workers) elements; the supervisor's launch overhead.
inline int64_t ew_vertex_cycles(const Target& t, int64_t n, int64_t es, int64_t header,
                                int64_t per_vector, int64_t unroll) {
  using plan_detail::cdiv;
  if (n <= 0) return 0;
  const int64_t nw = cdiv(n, t.workers);
  const int64_t w = unroll > 0 ? unroll : std::max<int64_t>(1, t.vector_bytes / es);
  return t.workers * (header + cdiv(nw, w) * per_vector) + t.supervisor_cycles;
}

// The AMP's channel groups for the element type (and, for float16, the
// partials type: poplin's getNumConvUnits).
inline int64_t amp_out_group(const Target& t, bool half, bool half_partials) {
  return half ? (half_partials ? t.amp_out_fp16 : t.amp_out_fp16_fp32) : t.amp_out_fp32;
}
// Bytes of one partial sum.
inline int64_t partial_bytes(const MatMulProblem& q) { return q.half_partials ? 2 : 4; }
inline int64_t amp_in_group(const Target& t, bool half) { return half ? t.amp_in_fp16 : t.amp_in_fp32; }

// The sizes of one tile's piece of a plan: conv groups, rows, columns (of
// one serial step) and contraction elements, and their channel groups.
struct PlanPiece {
  int64_t g = 1, m = 1, n = 1, k = 1;
  int64_t out_groups = 1, in_groups = 1;
};
inline PlanPiece plan_piece(const Target& t, const MatMulProblem& q, const Plan& p) {
  using plan_detail::cdiv;
  const int64_t outG = amp_out_group(t, q.half, q.half_partials), inG = amp_in_group(t, q.half);
  const int64_t ng = cdiv(q.N, outG), kg = cdiv(q.K, inG);
  PlanPiece s;
  s.g = q.grouped ? cdiv(q.G, p.pg) : 1;
  s.m = cdiv(q.grouped ? q.M : q.G * q.M, p.pm);
  s.out_groups = cdiv(cdiv(ng, p.pn), p.ps);
  s.n = std::min(q.N, s.out_groups * outG);
  s.k = std::min(q.K, cdiv(kg, p.pk) * inG);
  s.in_groups = cdiv(s.k, inG);
  return s;
}

// ConvPartial1x1Out cycles of one tile's piece (§3.1; poplin
// PerformanceEstimation.hpp): each pass (a conv group x output group x
// input group) runs the workers over their ceil(m / workers) rows, fp32
// 46 + (n-3)*8, fp16 34 + (n-3)*4 for n >= 3, the nx1 figures below
// that; plus loading the pass's weights into the AMP and 15 cycles of
// supervisor work per pass, 50 to start.
inline int64_t conv_partial_cycles(const Target& t, bool half, bool half_partials, int64_t es, int64_t passes,
                                   int64_t m) {
  using plan_detail::cdiv;
  const int64_t ec = half ? t.amp_elem_cycles_fp16 : t.amp_elem_cycles_fp32;
  const int64_t wload = amp_out_group(t, half, half_partials) * amp_in_group(t, half) * es / 8;
  const int64_t nw = cdiv(m, t.workers);
  int64_t wc;
  if (nw >= 3) wc = (half ? 34 : 46) + (nw - 3) * ec;
  else if (nw == 2) wc = half ? 33 : 44;
  else wc = half ? 29 : 33;
  return 50 + passes * (t.workers * wc + wload + 15);
}

// poplin::ReduceAdd cycles on one tile: its elements' partials (of
// `pb` bytes) summed, 2 cycles per vector after a 20-cycle header per
// worker (§3.1 form).
inline int64_t reduce_add_cycles(const Target& t, int64_t elems, int64_t partials, int64_t pb = 4) {
  return ew_vertex_cycles(t, elems * partials, pb, 20, 2, 0);
}

// Vertex state bytes of the two vertex types, one formula for both models
// (ipuxl's Poplar reads it for these types instead of its generic
// pointer-and-size rule, as PopLibs declares their edges COMPACT_PTR,
// lib/poplin/codelets/ConvPartial1x1Out.cpp): ConvPartial1x1Out 32 bytes
// of scalars and outer vectors, a 4-byte pointer per `in` and `out` edge
// (per conv group x input / output channel group) and a 4-byte worklist
// entry per worker context; ReduceAdd 32. The published §4.3 Dense
// layer's vertex state (182,272 B) holds with this form within 25%; a
// pointer per `weights` edge as well (one per input x output group) puts
// it at 5.5x, so those are not counted.
inline int64_t conv_partial_state(const Target& t, int64_t in_edges, int64_t out_edges) {
  return 32 + 4 * (in_edges + out_edges) + 4 * t.workers;
}
inline int64_t reduce_add_state() { return 32; }

// Vertex code bytes of the two types on each tile that runs them (the
// model's vertex-code figures [assumption, fitted to §4.3's vertex code]:
// the AMP vertex's assembler 1400 bytes fp32, 1200 fp16; ReduceAdd 600).
inline int64_t conv_partial_code(bool half) { return half ? 1200 : 1400; }
inline int64_t reduce_add_code() { return 600; }

// The operand bytes each tile of plan p receives (p.a_t, p.b_t) and the
// exchange bringing them (p.exch_in). Operands the plan lays out are
// spread over all its tiles (poplin maps each piece over the tiles that use
// it): with pn == 1 (A) or pm == 1 (B) each tile holds its own piece, else
// every tile of the row / column receives the whole piece but the share it
// holds itself. The AMP vertex reads its window from the tile's own memory,
// so Poplar exchanges the regions held on other tiles into the tile before
// the compute set and connects those it holds in place (a_held / b_held:
// the operand is in the plan's layout); an operand in another layout is
// copied into the plan's and its pieces received whole.
inline void place_operands(const Target& t_, Plan& p, bool a_held, bool b_held) {
  using plan_detail::cdiv;
  p.a_t = a_held && p.pn == 1 ? 0 : a_held ? p.a_piece_t - p.a_piece_t / p.pn : p.a_piece_t;
  p.b_t = b_held && p.pm == 1 && p.ps == 1 ? 0
          : b_held && p.ps == 1            ? p.b_resident_t - p.b_resident_t / p.pm
                                           : p.b_resident_t;
  // poplin's ExchangeEstimator: the output-channel groups are the
  // innermost tile dimension, so the tiles receiving the same piece of A
  // are neighbours and share a bus (twice the rate) only when the column
  // split is a multiple of the tiles per bus; B's pieces move at the
  // plain rate.
  const int64_t a_share = p.pn % t_.tiles_per_shared_exchange_bus == 0 ? 2 : 1;
  p.exch_in = t_.sync_internal_cycles * p.ps + cdiv(p.a_t, t_.exchange_bytes_per_cycle * a_share) +
              p.ps * cdiv(p.b_t, t_.exchange_bytes_per_cycle);
}

// The plan: the fewest estimated cycles whose temporaries fit the
// available memory proportion of a tile (poplin's planner minimises
// cycles under a memory constraint). Exchange code (xcode) is left to the
// caller, which knows the operands' layouts.
inline Plan plan_matmul(const Target& t_, const MatMulProblem& q) {
  using plan_detail::cdiv;
  const int64_t G = q.G, M = q.M, K = q.K, N = q.N, es = q.es, tiles = q.tiles;
  const bool grouped = q.grouped, half = q.half, a_resident = q.a_resident,
             b_resident = q.b_resident;
  const int64_t outG = amp_out_group(t_, half, q.half_partials), inG = amp_in_group(t_, half);
  const int64_t pb = partial_bytes(q);
  const int64_t ng = cdiv(N, outG), kg = cdiv(K, inG);
  const double budget = t_.unlimited() ? 1e300 : q.amp * (double)t_.bytes_per_tile;
  std::vector<int64_t> cg = grouped ? plan_splits(G, tiles) : std::vector<int64_t>{1};
  std::vector<int64_t> cm = plan_splits(grouped ? M : G * M, tiles), cn = plan_splits(ng, tiles),
                       ck = plan_splits(kg, tiles);
  const int64_t rows_all = grouped ? M : G * M;
  Plan best, small;
  bool have = false, have_small = false;
  double small_mem = 1e300;
  // One candidate: pg x pm x pn x pk tiles, the columns in ps serial
  // steps (poplin's serial output-channel split: the same tiles compute
  // one column block after the other, so B's pieces, the partials and
  // their reduction buffers are a block's).
  auto consider = [&](int64_t pg, int64_t pm, int64_t pn, int64_t pk, int64_t ps) {
    Plan p;
    p.pg = pg, p.pm = pm, p.pn = pn, p.pk = pk, p.ps = ps;
    const PlanPiece s = plan_piece(t_, q, p);
    const int64_t g = s.g, m = s.m, n = s.n, k = s.k;
    const int64_t passes = ps * g * s.out_groups * s.in_groups;
    p.compute = conv_partial_cycles(t_, half, q.half_partials, es, passes, m);
    const int64_t a_resident_t = cdiv(g * m * k * es, q.a_reuse);
    p.a_piece_t = a_resident_t;
    p.b_resident_t = cdiv(g * k * n * es, q.b_reuse);
    place_operands(t_, p, a_resident, b_resident);
    const int64_t used = p.tiles();
    if (pk > 1) {
      const int64_t E = G * M * N;
      const int64_t e_t = cdiv(cdiv(E, used), ps);
      p.partial_t = g * m * n * pb;
      p.recv_t = e_t * pk * pb;
      p.exch_out = ps * (t_.sync_internal_cycles +
                         cdiv(std::max(p.partial_t, p.recv_t), t_.exchange_bytes_per_cycle));
      p.reduce = ps * reduce_add_cycles(t_, e_t, pk, pb);
    }
    // B's share resident on each tile counts against the budget, as it did
    // for its piece before it was spread. The operand pieces and partials
    // live while the compute set runs; the received partials while the
    // reduction runs, after the pieces are dead: poplin's totalTempBytes is
    // the larger of its convTempBytes and reduceTempBytes, not their sum.
    const double mem = (double)(std::max(p.a_t + p.b_t + p.partial_t, p.recv_t) +
                                (b_resident ? cdiv(p.b_resident_t, pm) : 0) +
                                (a_resident ? cdiv(a_resident_t, pn) : 0));
    if (mem <= budget) {
      if (!have || p.cycles() < best.cycles() ||
          (p.cycles() == best.cycles() && used < best.tiles())) {
        best = p;
        have = true;
      }
    } else if (!have_small || mem < small_mem) {
      small = p;
      small_mem = mem;
      have_small = true;
    }
  };
  // Serial steps only when no parallel plan fits (poplin adds them under
  // memory pressure), doubling up to one output-channel group per step.
  for (int64_t ps = 1; ps == 1 || (!have && ps <= ng); ps *= 2)
    for (int64_t pg : cg)
      for (int64_t pm : cm)
        for (int64_t pn : cn) {
          if (pg * pm * pn > tiles || cdiv(ng, pn) < ps) continue;
          for (int64_t pk : ck) {
            if (pg * pm * pn * pk > tiles) continue;
            consider(pg, pm, pn, pk, ps);
          }
        }
  // poplin's planner searches every split; the grid above is thinned, so
  // the best plan is refined over the splits between its grid neighbours,
  // one dimension at a time.
  auto between = [&](int64_t x, const std::vector<int64_t>& grid, int64_t v) {
    std::vector<int64_t> out;
    if (grid.size() < 2) return out;
    auto it = std::lower_bound(grid.begin(), grid.end(), v);
    const int64_t lo = it == grid.begin() ? v : *(it - 1);
    const int64_t hi = (it == grid.end() || it + 1 == grid.end()) ? v : *(it + 1);
    for (int64_t s : plan_splits(x, tiles, (size_t)-1))
      if (s > lo && s < hi && s != v) out.push_back(s);
    return out;
  };
  for (int round = 0; have && round < 2; ++round) {
    const Plan b = best;
    auto fits = [&](int64_t pg, int64_t pm, int64_t pn, int64_t pk) {
      return pg * pm * pn * pk <= tiles && cdiv(ng, pn) >= b.ps;
    };
    for (int64_t s : between(rows_all, cm, b.pm))
      if (fits(b.pg, s, b.pn, b.pk)) consider(b.pg, s, b.pn, b.pk, b.ps);
    for (int64_t s : between(ng, cn, b.pn))
      if (fits(b.pg, b.pm, s, b.pk)) consider(b.pg, b.pm, s, b.pk, b.ps);
    for (int64_t s : between(kg, ck, b.pk))
      if (fits(b.pg, b.pm, b.pn, s)) consider(b.pg, b.pm, b.pn, s, b.ps);
    if (grouped)
      for (int64_t s : between(G, cg, b.pg))
        if (fits(s, b.pm, b.pn, b.pk)) consider(s, b.pm, b.pn, b.pk, b.ps);
  }
  Plan p = have ? best : small;
  // Vertex state of a tile: one ConvPartial1x1Out vertex and, when K is
  // split, the ReduceAdd vertex of its output elements. The serial steps
  // reuse them: poplin lowers a serial split as a Repeat over one body
  // (slice, compute, update; ConvProgramTree::lower in
  // lib/poplin/Convolution.cpp), so its compute sets exist once.
  const PlanPiece s = plan_piece(t_, q, p);
  p.state = conv_partial_state(t_, s.g * s.in_groups, s.g * s.out_groups) +
            (p.pk > 1 ? reduce_add_state() : 0);
  return p;
}

}  // namespace model
}  // namespace ipuxl
