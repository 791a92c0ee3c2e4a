/* The views of one profile: Summary, Memory per tile, Memory by category,
 * Liveness, Program tree, Operations, Execution trace (viewer.js has the
 * frame and helpers). */
"use strict";
(function (X) {
  const el = X.el;

  // ---------------------------------------------------------------- Summary
  X.register("summary", "Summary", function (sec, p) {
    const t = p.summary.totals, ins = p.insights, lim = p.target.memory_per_tile;
    const over = p.summary.overflow_tiles;
    const tgt = p.target;
    sec.appendChild(el("div", { class: "kpis" },
      X.kpi("target", `${tgt.version}: ${tgt.num_ipus} IPU × ${X.int(tgt.tiles_per_ipu)} tiles`),
      X.kpi("memory", over ? `OUT OF MEMORY on ${X.int(over)} tile(s)` : "fits",
        over ? "bad" : "good"),
      X.kpi("total memory", X.bytes(t.total)),
      X.kpi("fullest tile", `${X.bytes(p.summary.max_tile_bytes)}` +
        (lim ? ` of ${X.bytes(lim)}` : "")),
      X.kpi("code", X.bytes(t.code)),
      X.kpi("cycles per run", X.int(p.total_cycles)),
      X.kpi("time per run", `${(p.summary.seconds * 1e6).toFixed(1)} µs`),
      X.kpi("runs", p.runs ? X.int(p.runs) : "not run")));
    for (const w of p.warnings || []) sec.appendChild(el("p", { class: "warn" }, w));
    const sugg = el("ul", { class: "sugg", id: "suggestions" });
    for (const s of ins.suggestions) {
      const save = s.saving_bytes ? `saves ~${X.bytes(s.saving_bytes)}` :
        s.saving_cycles ? `saves ~${X.int(s.saving_cycles)} cycles per run` : "";
      sugg.appendChild(el("li", {}, s.action + " ", save ? el("span", { class: "saving" }, save) :
        null, s.note ? el("span", { class: "muted" }, ` (${s.note})`) : null));
    }
    if (!ins.suggestions.length) sugg.appendChild(el("li", { class: "muted" },
      "nothing stands out: no tile over, no repeated code, no dominant temporaries"));
    const cats = p.categories.map((c) => ({ category: c, bytes: t[c],
      max_tile: Math.max(...p.per_tile[c]), share: t.total ? t[c] / t.total : 0,
      live: c === "notAlwaysLive" ? "not always live" : "always live" }));
    const grid = el("div", { class: "grid" });
    grid.appendChild(X.card("Suggested actions (estimated savings)", sugg));
    grid.appendChild(X.card("Memory by category", X.table([
      { key: "category", label: "category", text: true }, { key: "live", label: "", text: true },
      { key: "bytes", label: "bytes (all tiles)" }, { key: "max_tile", label: "max per tile" },
      { key: "share", label: "share", fmt: (v) => (100 * v).toFixed(1) + "%" }], cats)));
    const hist = X.plotDiv("plot-histogram", 260);
    grid.appendChild(X.card("Memory across tiles (histogram)", hist));
    grid.appendChild(X.card("Top tiles by memory", X.table([
      { key: "tile", label: "tile" }, { key: "ipu", label: "IPU" }, { key: "local", label: "tile on IPU" },
      { key: "bytes", label: "bytes", fmt: (v) => `${X.int(v)} (${X.bytes(v)})` },
      { key: "top_categories", label: "largest categories", text: true,
        fmt: (v) => X.esc(v.map((c) => `${c[0]} ${X.bytes(c[1])}`).join(", ")) }],
    ins.top_tiles, { id: "top-tiles", onclick: (r) => { X.show("memory"); X.selectTile(r.tile); } })));
    grid.appendChild(X.card("Largest vertices", X.table([
      { key: "vertex", label: "vertex type", text: true }, { key: "tiles", label: "tiles" },
      { key: "code_bytes", label: "code per tile" }, { key: "total_code", label: "code, all tiles" },
      { key: "largest_state_op", label: "op with most state", text: true },
      { key: "state_bytes", label: "its state B" }], ins.largest_vertices)));
    grid.appendChild(X.card("Largest exchanges", X.table([
      { key: "op", label: "op", text: true }, { key: "type", label: "type", text: true },
      { key: "exchange_code_bytes", label: "exchange code B" },
      { key: "exchange_cycles", label: "exchange cycles" }, { key: "executions", label: "runs" }],
    ins.largest_exchanges)));
    grid.appendChild(X.card("Always-live variables", X.table([
      { key: "name", label: "tensor", text: true }, { key: "graph", label: "graph", text: true },
      { key: "bytes", label: "bytes" }, { key: "tiles", label: "tiles" },
      { key: "bytes_per_tile", label: "per tile" }], ins.always_live_variables)));
    sec.appendChild(grid);
    svgHistogram(hist, ins.histogram, lim);
  });

  /* The histogram of memory across tiles as a small SVG: one rect per bin,
   * its range and count as its tooltip, the tile memory as a line. */
  function svgHistogram(box, h, lim) {
    const W = 560, H = 230, L = 50, B = 40, T = 10, R = 10, n = h.counts.length;
    if (!n) return;
    const top = Math.max(1, ...h.counts), x0 = h.edges[0], x1 = h.edges[n];
    const sx = (v) => L + (W - L - R) * (v - x0) / Math.max(1, x1 - x0);
    const sy = (c) => H - B - (H - B - T) * c / top;
    const parts = [];
    h.counts.forEach((c, i) => {
      if (!c) return;
      const a = sx(h.edges[i]), b = sx(h.edges[i + 1]);
      parts.push(`<rect class="hbar" x="${a.toFixed(1)}" y="${sy(c).toFixed(1)}" ` +
        `width="${Math.max(1, b - a - 1).toFixed(1)}" height="${(H - B - sy(c)).toFixed(1)}" fill="#1f77b4">` +
        `<title>${X.bytes(h.edges[i])} – ${X.bytes(h.edges[i + 1])}: ${c} tiles</title></rect>`);
    });
    for (let k = 0; k <= 4; k++) {  // axes ticks
      const v = x0 + (x1 - x0) * k / 4, c = Math.round(top * k / 4);
      parts.push(`<text x="${sx(v)}" y="${H - B + 14}" text-anchor="middle">${X.bytes(v)}</text>`);
      parts.push(`<text x="${L - 6}" y="${sy(c) + 4}" text-anchor="end">${c}</text>` +
        `<line x1="${L}" x2="${W - R}" y1="${sy(c)}" y2="${sy(c)}" stroke="#e6e9ef"/>`);
    }
    if (lim && lim <= x1) parts.push(`<line x1="${sx(lim)}" x2="${sx(lim)}" y1="${T}" y2="${H - B}" ` +
      `stroke="#c01818" stroke-dasharray="5,3"/><text x="${sx(lim) - 4}" y="${T + 10}" ` +
      `text-anchor="end" fill="#c01818">tile memory</text>`);
    parts.push(`<text x="${(L + W) / 2}" y="${H - 6}" text-anchor="middle">bytes on the tile ` +
      `(always live + not-always-live peak)` + (lim && lim > x1 ? `; tile memory ${X.bytes(lim)} is off to the right` : "") +
      `</text><text x="12" y="${(H - B) / 2}" transform="rotate(-90 12 ${(H - B) / 2})" ` +
      `text-anchor="middle">tiles</text>`);
    box.style.minHeight = "0";
    box.style.height = "auto";
    box.innerHTML = `<svg viewBox="0 0 ${W} ${H}" width="100%" style="max-height:${H + 40}px;font-size:11px">` +
      parts.join("") + "</svg>";
  }

  // ---------------------------------------------------------- Memory per tile
  X.selectTile = function () {};
  X.register("memory", "Memory per tile", function (sec, p) {
    const n = X.numTiles(p), lim = p.target.memory_per_tile;
    const tiles = Array.from({ length: n }, (_, i) => i);
    const gaps = X.gaps(p);
    // PopVision's "include gaps": the memory between allocations that
    // alignment and memory elements leave unused, when the profile has it.
    const withGaps = el("input", { type: "checkbox", id: "include-gaps" });
    if (!gaps) {
      withGaps.disabled = true;
      withGaps.title = "this profile has no gaps_per_tile: ipuxl's model packs each tile's " +
        "allocations without gaps (docs/profile.md)";
    }
    function figure() {
      const g = gaps && withGaps.checked, base = X.totalPerTile(p);
      const tot = g ? base.map((v, i) => v + gaps[i]) : base;
      const traces = [];
      // Stacked steps (one path per category, not one bar per tile and
      // category: 16,000 SVG bars take seconds to draw).
      for (const c of p.categories) {
        if (!p.per_tile[c].some((v) => v)) continue;
        traces.push({ type: "scatter", mode: "lines", stackgroup: "memory", name: c, x: tiles,
          y: p.per_tile[c].map((v) => v / 1024), line: { shape: "hvh", width: 0, color: X.COLORS[c] },
          fillcolor: X.COLORS[c], hovertemplate: `${c}: %{y:.1f} KiB<extra></extra>` });
      }
      if (g) traces.push({ type: "scatter", mode: "lines", stackgroup: "memory", name: "gaps",
        x: tiles, y: gaps.map((v) => v / 1024), line: { shape: "hvh", width: 0, color: X.COLORS.gaps },
        fillcolor: X.COLORS.gaps, hovertemplate: "gaps: %{y:.1f} KiB<extra></extra>" });
      const overX = [], overY = [];
      tot.forEach((v, i) => { if (lim && v > lim) { overX.push(i); overY.push(v / 1024); } });
      traces.push({ type: "scatter", mode: "markers", name: `over the tile's memory (${overX.length} tiles)`,
        x: overX, y: overY, marker: { color: "#e00000", symbol: "triangle-down", size: 9 },
        hovertemplate: "tile %{x} OVER: %{y:.1f} KiB<extra></extra>" });
      const top = Math.max(...tot) / 1024, cap = lim / 1024;
      const fitCap = lim && top >= 0.1 * cap;
      const capRange = [0, Math.max(top, cap) * 1.05], dataRange = [0, Math.max(top, 1e-3) * 1.1];
      const layout = { hovermode: "x unified",
        xaxis: { title: "tile (global index; click a tile for its tensors)" },
        yaxis: { title: "KiB", range: fitCap ? capRange : dataRange },
        shapes: lim ? [{ type: "line", xref: "paper", x0: 0, x1: 1, y0: cap, y1: cap,
          line: { color: "#c01818", dash: "dash", width: 1.5 } }] : [],
        annotations: lim ? [{ xref: "paper", x: 1, y: cap, yanchor: "bottom", xanchor: "right",
          text: `tile memory ${X.int(cap)} KiB`, showarrow: false, font: { color: "#c01818" } }] : [],
        updatemenus: lim ? [{ type: "buttons", active: fitCap ? 0 : 1,
          buttons: [{ label: "scale: tile memory", method: "relayout", args: [{ "yaxis.range": capRange }] },
            { label: "scale: data", method: "relayout", args: [{ "yaxis.range": dataRange }] }] }] : [],
        margin: { l: 60, r: 20, t: 24, b: 50 } };
      X.plot(div, traces, layout, (ev) => { if (ev.points.length) X.selectTile(ev.points[0].x); });
    }
    const div = X.plotDiv("plot-tiles", 440);
    const pick = el("input", { class: "tile", type: "number", min: "0", max: String(n - 1),
      id: "tile-input", value: String(p.insights.top_tiles.length ? p.insights.top_tiles[0].tile : 0) });
    const detail = el("div", { id: "tile-detail" });
    sec.appendChild(X.card(`Memory per tile (${X.int(n)} tiles` +
      (lim ? `, ${X.bytes(lim)} each)` : ", no limit)"), div,
    el("p", { class: "muted" }, "Each bar is a tile: always-live categories and the " +
      "not-always-live peak stacked; red markers: tiles over the tile's memory. ",
    el("label", { title: withGaps.title || "" }, withGaps, gaps ? ` include gaps (${X.bytes(
      gaps.reduce((a, v) => a + v, 0))} in all)` : " include gaps (none in this profile)"),
    ". Tile ", pick, " ", el("button", { onclick: () => X.selectTile(+pick.value) }, "show"))));
    sec.appendChild(detail);
    withGaps.addEventListener("change", () => { figure(); X.selectTile(+pick.value); });
    figure();
    X.selectTile = function (tile) {
      tile = Math.max(0, Math.min(n - 1, tile | 0));
      pick.value = String(tile);
      tileDetail(p, tile, detail, gaps && withGaps.checked ? gaps[tile] : null);
    };
    X.selectTile(+pick.value);
  });

  function tileDetail(p, tile, box, gap) {
    const tpi = p.target.tiles_per_ipu, tot = X.totalPerTile(p)[tile] + (gap || 0);
    const lim = p.target.memory_per_tile;
    const cats = p.categories.filter((c) => p.per_tile[c][tile]).map((c) =>
      ({ category: c, bytes: p.per_tile[c][tile] }));
    if (gap !== null && gap !== undefined) cats.push({ category: "gaps", bytes: gap });
    const tens = X.tensorsOnTile(p, tile);
    // Vertices on the tile: ops with a vertex whose outputs have bytes here.
    const here = new Set(tens.map((t) => t.graph + "\u0000" + t.name));
    const verts = [];
    if (p.ops.outputs) for (let r = 0; r < p.ops.name.length; r++) {
      if (!p.ops.vertex[r]) continue;
      if ((p.ops.outputs[r] || []).some((o) => here.has(p.ops.graph[r] + "\u0000" + o)))
        verts.push({ op: X.opLabel(p, r), vertex: p.ops.vertex[r], type: p.ops.type[r],
          state: Math.round(p.ops.state_bytes[r] / Math.max(1, p.ops.tiles[r])),
          cycles: p.ops.cycles[r] });
    }
    box.innerHTML = "";
    const status = lim && tot > lim ? el("span", { class: "warn" }, ` — ${X.int(tot - lim)} B OVER`) : null;
    box.appendChild(el("div", { class: "row2" },
      X.card(null, el("h2", { id: "tile-title" }, `Tile ${tile} (IPU ${Math.floor(tile / tpi)}, ` +
        `tile ${tile % tpi}): ${X.int(tot)} B`, status),
      el("h3", {}, "Categories"), X.table([{ key: "category", label: "category", text: true },
        { key: "bytes", label: "bytes" }], cats)),
      X.card(`Tensors on tile ${tile} (${tens.length})`, X.table([
        { key: "name", label: "tensor", text: true },
        { key: "on_tile", label: "bytes here" }, { key: "bytes", label: "total bytes" },
        { key: "always_live", label: "always live", text: true }], tens, { id: "tile-tensors" })),
      X.card(`Vertices on tile ${tile} (${verts.length})`, X.table([
        { key: "op", label: "op", text: true }, { key: "vertex", label: "vertex", text: true },
        { key: "state", label: "state B per tile" }, { key: "cycles", label: "cycles" }],
      verts, { id: "tile-vertices" }))));
  }

  // ------------------------------------------------------- Memory by category
  X.register("categories", "Memory by category", function (sec, p) {
    const t = p.summary.totals, cats = p.categories.filter((c) => t[c]);
    const d1 = X.plotDiv("plot-categories", 360), d2 = X.plotDiv("plot-always-live", 360);
    sec.appendChild(el("div", { class: "grid" }, X.card("Memory by category (all tiles)", d1),
      X.card("Always live vs not always live", d2)));
    X.plot(d1, [{ type: "bar", orientation: "h", y: cats, x: cats.map((c) => t[c] / 1048576),
      marker: { color: cats.map((c) => X.COLORS[c]) },
      hovertemplate: "%{y}: %{x:.3f} MiB<extra></extra>" }],
    { xaxis: { title: "MiB (all tiles)" }, yaxis: { autorange: "reversed" }, margin: { l: 150 } });
    const al = X.ALWAYS_LIVE.filter((c) => t[c]);
    const tr = al.map((c) => ({ type: "bar", name: c, x: ["always live"], y: [t[c] / 1048576],
      marker: { color: X.COLORS[c] } }));
    tr.push({ type: "bar", name: "notAlwaysLive (peak)", x: ["not always live"],
      y: [t.notAlwaysLive / 1048576], marker: { color: X.COLORS.notAlwaysLive } });
    X.plot(d2, tr, { barmode: "stack", yaxis: { title: "MiB (all tiles)" }, legend: { orientation: "v" } });
    const rows = X.ALWAYS_LIVE.concat(["notAlwaysLive"]).map((c) => ({ category: c,
      live: c === "notAlwaysLive" ? "not always live" : "always live",
      code: X.CODE.includes(c) ? "code" : "", bytes: t[c] || 0,
      max_tile: Math.max(...(p.per_tile[c] || [0])) }));
    sec.appendChild(X.card("Categories", X.table([{ key: "category", label: "category", text: true },
      { key: "live", label: "liveness", text: true }, { key: "code", label: "", text: true },
      { key: "bytes", label: "bytes" }, { key: "max_tile", label: "max per tile" }], rows),
    el("p", { class: "muted" }, `always live ${X.int(t.alwaysLive)} B + not-always-live peak ` +
      `${X.int(t.notAlwaysLive)} B = ${X.int(t.total)} B; code ${X.int(t.code)} B`)));
  });

  // ----------------------------------------------------------------- Liveness
  X.register("liveness", "Liveness", function (sec, p) {
    const base = X.alwaysLive(p);
    let rows = X.steps(p, "main").map((s) => Object.assign(s, { depth: 0, base: s.live }));
    const div = X.plotDiv("plot-liveness", 380), diff = el("div", { id: "step-diff" });
    const tableBox = el("div", { class: "scroll", style: "max-height:520px" });
    let selected = -1, shown = 500;
    // Always-live bytes are the same at every step; shown on request
    // (legend) when they would flatten the not-always-live bars.
    let showBase = base <= 4 * Math.max(1, ...rows.map((r) => r.live));
    sec.appendChild(X.card("Liveness over program steps (main program; ▸ expands a call into " +
      "its Function)", div, el("p", { class: "muted" }, `Always live: ${X.int(base)} B at every ` +
      "step (grey; click 'always live' in the legend to show or hide it) under each step's " +
      "not-always-live bytes (purple; the steps of an expanded Function in orange, with the " +
      "caller's bytes outside the call). Click a bar or a row for the step's difference to " +
      "the one before.")));
    sec.appendChild(el("div", { class: "row2 live" }, X.card("Steps", tableBox), X.card("Step diff", diff)));

    function peak(name) { return Math.max(0, ...X.steps(p, name).map((s) => s.live)); }
    function expand(i) {
      const r = rows[i];
      if (r.expanded) {  // collapse: drop the rows below deeper than r
        let j = i + 1;
        while (j < rows.length && rows[j].depth > r.depth) j++;
        rows.splice(i + 1, j - i - 1);
        r.expanded = false;
      } else {
        const add = [];
        for (const f of r.callees) {
          const outside = Math.max(0, r.live - peak(f));
          for (const s of X.steps(p, f)) {
            add.push(Object.assign(s, { depth: r.depth + 1, base: s.live,
              live: outside + s.live, via: f + (r.kind === "Repeat" && r.trips ?
                ` (×${r.trips})` : r.callees.length > 1 ? " (branch)" : "") }));
          }
        }
        rows.splice(i + 1, 0, ...add);
        r.expanded = true;
      }
      draw();
    }
    function showDiff(i) {
      selected = i;
      if (i >= shown) { shown = i + 100; draw(); }
      const r = rows[i], q = i > 0 ? rows[i - 1] : null;
      diff.innerHTML = "";
      diff.appendChild(el("p", {}, el("b", {}, `Step ${i}: `), `${r.kind} `, el("b", {}, r.label),
        r.via ? ` in ${r.via}` : ""));
      const items = [["not-always-live bytes", r.live, q ? q.live : 0],
        ["max on one tile", r.max_tile, q ? q.max_tile : 0], ["cycles", r.cycles, q ? q.cycles : 0]];
      diff.appendChild(X.table([{ key: "what", label: "", text: true }, { key: "prev", label: q ?
        `step ${i - 1}` : "before" }, { key: "cur", label: `step ${i}` },
      { key: "d", label: "difference", fmt: (v) => `<span class="${v > 0 ? "pos" : v < 0 ? "neg" : ""}">` +
        X.signed(v) + "</span>" }], items.map(([w, c, pr]) => ({ what: w, cur: c, prev: pr, d: c - pr }))));
      if (q) diff.appendChild(el("p", { class: "muted" }, `previous: ${q.kind} ${q.label}`));
      if (r.row >= 0 && p.ops.outputs) {
        const outs = p.ops.outputs[r.row] || [], t = p.tensors, made = [];
        for (let k = 0; k < t.name.length; k++)
          if (outs.includes(t.name[k]) && t.graph[k] === p.ops.graph[r.row])
            made.push({ tensor: t.name[k], bytes: t.bytes[k], always_live: t.always_live[k] ? "yes" : "no" });
        diff.appendChild(el("h3", {}, `Tensors the step's op writes (${made.length})`));
        diff.appendChild(X.table([{ key: "tensor", label: "tensor", text: true }, { key: "bytes", label: "bytes" },
          { key: "always_live", label: "always live", text: true }], made));
      }
      for (const tr of tableBox.querySelectorAll("tr[data-i]"))
        tr.classList.toggle("sel", +tr.dataset.i === i);
    }
    function draw() {
      const x = rows.map((_, i) => i);
      const labels = rows.map((r) => "  ".repeat(r.depth) + r.label);
      const few = rows.length <= 70, bars = rows.length <= 400;
      // Bars for a few hundred steps; beyond, stacked steps (one path).
      const kind = (color) => bars ? { type: "bar", marker: { color } } :
        { type: "scatter", mode: "lines", stackgroup: "live", fillcolor: Array.isArray(color) ?
          "#9467bd" : color, line: { shape: "hvh", width: 0, color: "#9467bd" } };
      X.plot(div, [
        Object.assign(kind("#c7ccd6"), { name: "always live", x: x, y: rows.map(() => base / 1048576),
          hoverinfo: "skip", visible: showBase ? true : "legendonly" }),
        Object.assign(kind(rows.map((r) => r.depth ? "#ff9f40" : "#9467bd")), {
          name: "not always live", x: x, y: rows.map((r) => r.live / 1048576),
          customdata: rows.map((r) => [r.kind, r.label, X.int(r.cycles), r.via || "main"]),
          hovertemplate: "step %{x}: %{customdata[0]} %{customdata[1]}<br>in %{customdata[3]}" +
            "<br>%{y:.3f} MiB not always live, %{customdata[2]} cycles<extra></extra>" })],
      { barmode: "stack", bargap: 0.1, yaxis: { title: "MiB (all tiles)" },
        legend: { orientation: "h", x: 1, xanchor: "right", y: 1.12 },
        xaxis: few ? { tickvals: x, ticktext: labels.map((l) => X.short(l, 22)), tickangle: -45 } :
          { title: "program step" }, margin: { l: 60, r: 20, t: 20, b: few ? 120 : 50 } },
      { plotly_click: (ev) => { if (ev.points.length) showDiff(ev.points[0].x); },
        plotly_legendclick: (ev) => { if (ev.curveNumber === 0) showBase = !showBase; } });
      const tbl = el("table", { id: "liveness-steps" });
      tbl.appendChild(el("tr", {}, ...["", "#", "kind", "step", "cycles", "not always live",
        "Δ", "max/tile"].map((h) => el("th", { class: h === "step" ? "t" : "" }, h))));
      rows.slice(0, shown).forEach((r, i) => {
        const d = i > 0 ? r.live - rows[i - 1].live : r.live;
        const exp = r.callees.length && r.callees.some((f) => X.steps(p, f).length) ?
          el("span", { class: "exp", "data-expand": String(i), title: "expand into " + r.callees.join(", "),
            onclick: (e) => { e.stopPropagation(); expand(i); } }, r.expanded ? "▾" : "▸") : "";
        const tr = el("tr", { class: "click" + (r.depth ? " inner" : ""), "data-i": String(i),
          onclick: () => showDiff(i) },
        el("td", {}, exp), el("td", {}, String(i)), el("td", { class: "t" },
          el("span", { class: "badge " + r.kind }, r.kind)),
        el("td", { class: "t", style: `padding-left:${8 + 16 * r.depth}px` }, r.label +
          (r.callees.length ? ` → ${r.callees.join(" | ")}` + (r.trips ? ` ×${r.trips}` : "") : "")),
        el("td", {}, X.int(r.cycles)), el("td", {}, X.int(r.live)),
        el("td", { class: d > 0 ? "pos" : d < 0 ? "neg" : "" }, X.signed(d)), el("td", {}, X.int(r.max_tile)));
        tbl.appendChild(tr);
      });
      tableBox.innerHTML = "";
      tableBox.appendChild(tbl);
      if (rows.length > shown) tableBox.appendChild(el("div", { class: "more" },
        `${shown.toLocaleString()} of ${rows.length.toLocaleString()} steps `,
        el("button", { onclick: () => { shown = rows.length; draw(); } }, "show all")));
      if (selected >= 0 && selected < rows.length) showDiff(selected);
    }
    X.expandStep = expand;
    draw();
    if (rows.length) showDiff(rows.reduce((b, r, i) => r.live > rows[b].live ? i : b, 0));
  });
})(ipuxl);
