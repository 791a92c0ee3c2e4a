/* The Comparison view of two or more profiles (ipuxl profile --compare):
 * each labelled by its script, arguments and session; memory by category
 * and code per Function with deltas against the first profile, as tables
 * and charts; memory per tile and liveness on shared axes. */
"use strict";
(function (X) {
  const el = X.el;
  const PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd"];

  function deltaCell(v) {
    return `<span class="${v > 0 ? "pos" : v < 0 ? "neg" : ""}">${X.signed(v)}</span>`;
  }
  function ratio(a, b) { return a ? (b / a).toFixed(2) : "-"; }

  X.register("compare", "Comparison", function (sec) {
    const ps = X.data.profiles, a = ps[0];
    // Charts name each profile by its letter and the end of its label
    // (labels share their script and arguments, and differ at the end).
    const L = (i) => String.fromCharCode(65 + i);
    const labs = ps.map((p, i) => `${L(i)}: ${p.label.length > 48 ? "…" + p.label.slice(-47) : p.label}`);
    // Who is who.
    const heads = el("div", { class: "kpis", id: "compare-labels" });
    ps.forEach((p, i) => heads.appendChild(el("div", { class: "kpi" + (p.summary.overflow_tiles ? " bad" : ""),
      style: `border-top:4px solid ${PALETTE[i % 5]}` },
    el("div", { class: "k" }, String.fromCharCode(65 + i)), el("div", { class: "v" }, p.label),
    el("div", { class: "muted" }, `${p.target.version}, ${p.target.num_ipus} × ${p.target.tiles_per_ipu}` +
      ` tiles · total ${X.bytes(p.summary.totals.total)} · code ${X.bytes(p.summary.totals.code)} · ` +
      `${X.int(p.total_cycles)} cycles` + (p.summary.overflow_tiles ? " · OUT OF MEMORY" : "")))));
    sec.appendChild(heads);
    // Memory by category, with deltas.
    const keys = a.categories.concat(["code", "alwaysLive", "total"]);
    const rows = keys.map((k) => ({ what: k, vals: ps.map((p) => p.summary.totals[k] || 0) }));
    rows.push({ what: "max bytes on a tile", vals: ps.map((p) => p.summary.max_tile_bytes) });
    rows.push({ what: "cycles per run", vals: ps.map((p) => p.total_cycles) });
    const cols = [{ key: "what", label: "", text: true }];
    ps.forEach((p, i) => cols.push({ key: "v" + i, label: L(i), title: p.label }));
    ps.slice(1).forEach((p, i) => {
      const L = String.fromCharCode(66 + i);
      cols.push({ key: "d" + (i + 1), label: `${L} − A`, fmt: deltaCell });
      cols.push({ key: "r" + (i + 1), label: `${L} / A`, text: false });
    });
    const flat = rows.map((r) => {
      const o = { what: r.what };
      r.vals.forEach((v, i) => { o["v" + i] = v; if (i) { o["d" + i] = v - r.vals[0]; o["r" + i] = ratio(r.vals[0], v); } });
      return o;
    });
    const dCat = X.plotDiv("plot-compare-categories", 360), dDelta = X.plotDiv("plot-compare-delta", 360);
    sec.appendChild(X.card("Memory by category (bytes, all tiles)", X.table(cols, flat,
      { id: "compare-categories" })));
    sec.appendChild(el("div", { class: "grid" }, X.card("Memory by category", dCat),
      X.card("Difference to A by category (bytes)", dDelta)));
    const cats = a.categories.filter((c) => ps.some((p) => p.summary.totals[c]));
    X.plot(dCat, ps.map((p, i) => ({ type: "bar", name: labs[i], x: cats,
      y: cats.map((c) => p.summary.totals[c] / 1048576), marker: { color: PALETTE[i % 5] } })),
    { barmode: "group", yaxis: { title: "MiB" }, margin: { b: 140 } });
    X.plot(dDelta, ps.slice(1).map((p, i) => ({ type: "bar", name: `${labs[i + 1]} − ${labs[0]}`,
      x: cats, y: cats.map((c) => (p.summary.totals[c] || 0) - (a.summary.totals[c] || 0)),
      marker: { color: cats.map((c) => (p.summary.totals[c] || 0) >= (a.summary.totals[c] || 0) ?
        "#d62728" : "#2ca02c") } })), { yaxis: { title: "bytes" }, margin: { b: 140 }, showlegend: true });
    // Code per graph (main and each Function).
    const names = [];
    for (const p of ps) for (const g of p.graphs) if (!names.includes(g.name) && (g.main || g.code_instances))
      names.push(g.name);
    const fcols = [{ key: "graph", label: "graph", text: true }];
    ps.forEach((p, i) => {
      const L = String.fromCharCode(65 + i);
      fcols.push({ key: "n" + i, label: `${L} instances × call sites`, text: true });
      fcols.push({ key: "c" + i, label: `${L} code B` });
    });
    ps.slice(1).forEach((p, i) => fcols.push({ key: "d" + (i + 1),
      label: `${String.fromCharCode(66 + i)} − A`, fmt: deltaCell }));
    const frows = names.map((n) => {
      const o = { graph: n };
      ps.forEach((p, i) => {
        const g = X.graph(p, n);
        o["n" + i] = !g ? "-" : g.main ? "main" : `${g.code_instances} × ${g.call_sites + g.if_sites}`;
        o["c" + i] = g ? g.code_bytes * g.code_instances : 0;
        if (i) o["d" + i] = o["c" + i] - o.c0;
      });
      return o;
    });
    const dFn = X.plotDiv("plot-compare-functions", 340), dFnD = X.plotDiv("plot-compare-functions-delta", 340);
    sec.appendChild(X.card("Code per Function (main program and each called graph; code B of " +
      "all its instances)", X.table(fcols, frows, { id: "compare-functions" })));
    sec.appendChild(el("div", { class: "grid" }, X.card("Code per Function", dFn),
      X.card("Difference to A in code per Function (bytes)", dFnD)));
    const code = (p, n) => { const g = X.graph(p, n); return g ? g.code_bytes * g.code_instances : 0; };
    X.plot(dFnD, ps.slice(1).map((p, i) => ({ type: "bar", name: `${labs[i + 1]} − A`,
      x: names.map((n) => X.short(n, 28)), y: names.map((n) => code(p, n) - code(a, n)),
      marker: { color: names.map((n) => code(p, n) >= code(a, n) ? "#d62728" : "#2ca02c") } })),
    { yaxis: { title: "bytes" }, margin: { b: 110 }, showlegend: true });
    X.plot(dFn, ps.map((p, i) => ({ type: "bar", name: labs[i], x: names.map((n) => X.short(n, 28)),
      y: names.map((n) => { const g = X.graph(p, n); return g ? g.code_bytes * g.code_instances / 1024 : 0; }),
      marker: { color: PALETTE[i % 5] } })), { barmode: "group", yaxis: { title: "KiB" },
      margin: { b: 110 } });
    // Memory per tile and liveness, on shared axes.
    const dTiles = X.plotDiv("plot-compare-tiles", 200 + 160 * ps.length);
    sec.appendChild(X.card("Memory per tile (shared axes)", dTiles));
    // One y scale for all: the fullest tile of any, and the tile memory
    // when that is near it.
    let ymax = Math.max(...ps.map((p) => Math.max(...X.totalPerTile(p)) / 1024));
    const cap = Math.max(...ps.map((p) => p.target.memory_per_tile / 1024));
    if (cap && ymax >= 0.2 * cap) ymax = Math.max(ymax, cap);
    const tl = { grid: { rows: ps.length, columns: 1, pattern: "independent" }, shapes: [],
      margin: { l: 60, r: 20, t: 20, b: 50 }, legend: { orientation: "h", y: -0.12 } };
    const tt = ps.map((p, i) => {
      const ax = i ? String(i + 1) : "";
      tl["yaxis" + ax] = { title: "KiB", range: [0, ymax * 1.08], matches: i ? "y" : undefined };
      tl["xaxis" + ax] = { matches: i ? "x" : undefined, title: i === ps.length - 1 ? "tile" : "" };
      if (p.target.memory_per_tile) tl.shapes.push({ type: "line", xref: "x" + ax + " domain",
        yref: "y" + ax, x0: 0, x1: 1, y0: p.target.memory_per_tile / 1024,
        y1: p.target.memory_per_tile / 1024, line: { color: "#c01818", dash: "dash" } });
      return { type: "bar", name: labs[i], x: Array.from(X.totalPerTile(p).keys()),
        y: Array.from(X.totalPerTile(p), (v) => v / 1024), xaxis: "x" + ax, yaxis: "y" + ax,
        marker: { color: PALETTE[i % 5] }, hovertemplate: `${labs[i]}: tile %{x}, %{y:.1f} KiB<extra></extra>` };
    });
    X.plot(dTiles, tt, Object.assign(tl, { bargap: 0 }));
    const dLive = X.plotDiv("plot-compare-liveness", 340);
    sec.appendChild(X.card("Liveness over program steps (shared axes)", dLive));
    X.plot(dLive, ps.map((p, i) => ({ type: "scatter", mode: "lines", line: { shape: "hv", color: PALETTE[i % 5] },
      name: labs[i], x: p.steps.live_bytes.map((_, k) => k), y: p.steps.live_bytes.map((v) => v / 1048576),
      text: p.steps.label, hovertemplate: "step %{x} %{text}: %{y:.3f} MiB<extra></extra>" })),
    { xaxis: { title: "program step (main program)" }, yaxis: { title: "MiB not always live" } });
    // Cycles by op type.
    const types = [];
    for (const p of ps) for (const r of p.insights.by_type.slice(0, 15)) if (!types.includes(r.key)) types.push(r.key);
    const dCyc = X.plotDiv("plot-compare-cycles", 340);
    sec.appendChild(X.card("Cycles by op type (× runs)", dCyc));
    X.plot(dCyc, ps.map((p, i) => ({ type: "bar", name: labs[i], x: types,
      y: types.map((k) => { const r = p.insights.by_type.find((q) => q.key === k); return r ? r.cycles : 0; }),
      marker: { color: PALETTE[i % 5] } })), { barmode: "group", yaxis: { title: "cycles" } });
  }, { compareOnly: true });
  // The Comparison is the first tab of a comparison page.
  X.order.unshift(X.order.pop());
})(ipuxl);
