/* The views of one profile's program: Program tree, Operations (by op,
 * op type and name scope) and Execution trace. */
"use strict";
(function (X) {
  const el = X.el;
  const CALLS = ["Call", "Repeat", "If"];

  // ------------------------------------------------------------- Program tree
  function stepLine(p, s) {
    const o = p.ops, r = s.row, bits = [];
    if (s.kind === "Execute" && r >= 0) {
      bits.push(o.type[r]);
      if (o.vertex[r]) bits.push(o.vertex[r]);
      bits.push(`code ${X.int(X.opCode(p, r))} B`);
      if (o.exchange_code_bytes[r]) bits.push(`exchange code ${X.int(o.exchange_code_bytes[r])} B`);
      if (o.tiles[r]) bits.push(`${X.int(o.tiles[r])} tiles`);
    } else if (s.kind === "StreamCopy") bits.push("host exchange");
    bits.push(`${X.int(s.cycles)} cycles`);
    return bits.join(" · ");
  }
  function graphCode(p, name) {
    const g = X.graph(p, name);
    return g ? g.code_bytes : 0;
  }
  /* A <details> for graph `name`'s body, filled when first opened. */
  function sequenceNode(p, name, title, open) {
    const steps = X.steps(p, name), g = X.graph(p, name);
    const cyc = steps.reduce((a, s) => a + s.cycles, 0);
    const d = el("details", { "data-graph": name });
    d.appendChild(el("summary", {}, el("span", { class: "badge" }, "Sequence"), " ",
      el("b", {}, title || name), el("span", { class: "num" }, `${steps.length} steps · code ` +
        `${X.int(graphCode(p, name))} B per instance` + (g ? ` · ${g.code_instances} instance(s)` : "") +
        ` · ${X.int(cyc)} cycles`)));
    let filled = false;
    function fill(limit) {
      while (d.children.length > 1) d.removeChild(d.lastChild);
      for (const s of steps.slice(0, limit)) d.appendChild(stepNode(p, s));
      if (steps.length > limit) d.appendChild(el("div", { class: "leaf" },
        el("button", { onclick: () => fill(steps.length) }, `show all ${steps.length} steps`)));
    }
    d.addEventListener("toggle", () => { if (d.open && !filled) { filled = true; fill(500); } });
    if (!steps.length) d.appendChild(el("div", { class: "leaf muted" },
      "(no step detail for this graph in the profile)"));
    if (open) d.open = true;
    return d;
  }
  function stepNode(p, s) {
    const head = [el("span", { class: "badge " + s.kind }, s.kind), " ", el("b", {}, s.label)];
    if (!CALLS.includes(s.kind) || !s.callees.length) {
      return el("div", { class: "leaf", "data-kind": s.kind }, ...head,
        el("span", { class: "num" }, stepLine(p, s)));
    }
    const what = s.kind === "Repeat" ? `×${s.trips || "?"} → ` : "→ ";
    const d = el("details", { "data-kind": s.kind });
    d.appendChild(el("summary", {}, ...head, ` ${what}`,
      el("b", {}, s.callees.map((f) => "Function " + f).join(" | ")),
      el("span", { class: "num" }, `code ${X.int(s.callees.reduce((a, f) => a + graphCode(p, f), 0))} B · ` +
        `${X.int(s.cycles)} cycles`)));
    let filled = false;
    d.addEventListener("toggle", () => {
      if (!d.open || filled) return;
      filled = true;
      s.callees.forEach((f, i) => d.appendChild(sequenceNode(p, f, (s.kind === "If" ?
        (i ? "else: " : "then: ") : "") + "Function " + f, true)));
    });
    return d;
  }
  X.register("tree", "Program tree", function (sec, p) {
    const root = el("div", { class: "tree", id: "program-tree" });
    root.appendChild(sequenceNode(p, "main", "main program", true));
    const fns = p.graphs.filter((g) => !g.main).map((g) => ({ name: g.name,
      kind: g.function ? "Function" : g.code_instances ? "inlined (If)" : "not compiled",
      instances: g.code_instances, calls: g.call_sites, ifs: g.if_sites, code: g.code_bytes,
      all: g.code_bytes * g.code_instances, cycles: g.cycles, runs: g.executions,
      loaded: g.code_loaded ? "yes" : "" }));
    sec.appendChild(X.card("Program tree (Sequence, Call → Function, Repeat, If, copies, " +
      "exchanges; code size per node)", root));
    sec.appendChild(X.card("Functions", X.table([{ key: "name", label: "graph", text: true },
      { key: "kind", label: "compiled as", text: true }, { key: "instances", label: "code instances" },
      { key: "calls", label: "call sites" }, { key: "ifs", label: "If sites" },
      { key: "code", label: "code B (one)" }, { key: "all", label: "code B (all)" },
      { key: "cycles", label: "cycles per run of it" }, { key: "runs", label: "runs" },
      { key: "loaded", label: "code loaded", text: true }], fns, { id: "functions" })));
  });

  // --------------------------------------------------------------- Operations
  X.register("operations", "Operations", function (sec, p) {
    const o = p.ops, rows = [];
    for (let r = 0; r < o.name.length; r++) {
      rows.push({ op: X.opLabel(p, r), type: o.type[r], cls: o.cost_class[r], vertex: o.vertex[r],
        tiles: o.tiles[r], cycles: o.cycles[r], runs: o.executions[r],
        total: o.cycles[r] * o.executions[r], compute: o.compute_cycles[r],
        exchange: o.exchange_cycles[r], flops: o.flops[r] * o.executions[r],
        code: X.opCode(p, r), temp: o.temp_bytes[r], plan: o.plan[r] });
    }
    const byType = p.insights.by_type, byScope = p.insights.by_scope;
    const d1 = X.plotDiv("plot-op-types", 340), d2 = X.plotDiv("plot-op-scopes", 340);
    sec.appendChild(el("div", { class: "grid" }, X.card("Cycles and code by op type", d1),
      X.card("Cycles by name scope (layer)", d2)));
    const top = (a, n) => a.slice(0, n);
    X.plot(d1, [{ type: "bar", name: "cycles × runs", x: top(byType, 25).map((r) => r.key),
      y: top(byType, 25).map((r) => r.cycles), marker: { color: "#2ca02c" }, offsetgroup: "1" },
    { type: "bar", name: "code bytes", x: top(byType, 25).map((r) => r.key),
      y: top(byType, 25).map((r) => r.code_bytes), yaxis: "y2", marker: { color: "#ff7f0e" },
      offsetgroup: "2" }],
    { barmode: "group", yaxis: { title: "cycles" }, yaxis2: { title: "bytes", overlaying: "y",
      side: "right" }, margin: { l: 60, r: 60, t: 20, b: 90 } });
    X.plot(d2, [{ type: "bar", orientation: "h", y: top(byScope, 25).map((r) => X.short(r.key, 40)),
      x: top(byScope, 25).map((r) => r.cycles), marker: { color: "#2ca02c" },
      hovertemplate: "%{y}: %{x:,} cycles<extra></extra>" }],
    { yaxis: { autorange: "reversed" }, xaxis: { title: "cycles × runs" }, margin: { l: 200 } });
    const aggCols = (first) => [{ key: "key", label: first, text: true }, { key: "ops", label: "ops" },
      { key: "code_bytes", label: "code B" }, { key: "cycles", label: "cycles × runs" },
      { key: "flops", label: "FLOPs × runs" }, { key: "temp_bytes", label: "max temp B" }];
    sec.appendChild(el("div", { class: "grid" },
      X.card("By op type", X.table(aggCols("op type"), byType, { id: "ops-by-type" })),
      X.card("By name scope (layer)", X.table(aggCols("scope"), byScope, { id: "ops-by-scope" }))));
    sec.appendChild(X.card(`All ops (${X.int(rows.length)})`, X.table([
      { key: "op", label: "op", text: true }, { key: "type", label: "type", text: true },
      { key: "cls", label: "class", text: true }, { key: "vertex", label: "vertex", text: true },
      { key: "tiles", label: "tiles" }, { key: "cycles", label: "cycles" }, { key: "runs", label: "runs" },
      { key: "total", label: "cycles × runs" }, { key: "compute", label: "compute" },
      { key: "exchange", label: "exchange" }, { key: "flops", label: "FLOPs × runs" },
      { key: "code", label: "code B" }, { key: "temp", label: "temp B" },
      { key: "plan", label: "plan", text: true }], rows, { id: "ops-table", limit: 300 })));
  });

  // ---------------------------------------------------------- Execution trace
  /* Segments {lane, start, cycles, kind, label} of graph `name` from cycle
   * `start`: its steps on `lane`, a called Function's steps on the lanes
   * below (a Repeat's first iteration), up to `maxLane` and `cap` segments. */
  function layout(p, name, start, lane, maxLane, out, cap, via) {
    let t = start;
    for (const s of X.steps(p, name)) {
      if (out.length >= cap) return t;
      out.push({ lane, start: t, cycles: s.cycles, kind: s.kind, label: s.label,
        fn: s.callees.join(" | "), via });
      if (s.callees.length && lane < maxLane)
        layout(p, s.callees[0], t, lane + 1, maxLane, out, cap, s.callees[0] +
          (s.kind === "Repeat" && s.trips > 1 ? ` (1st of ${s.trips})` : ""));
      t += s.cycles;
    }
    return t;
  }
  X.register("trace", "Execution trace", function (sec, p) {
    const segs = [], cap = 40000;
    const end = layout(p, "main", 0, 0, 2, segs, cap, "main");
    // BSP: each Execute step of the main program as its compute phase and
    // then its exchange and sync (the op's compute_cycles and the rest); of
    // a long program, chunks of consecutive steps, each's phases summed.
    const bspLane = segs.reduce((m, s) => Math.max(m, s.lane + 1), 1);
    const o = p.ops, rows = X.opRow(p), ms = p.steps, n = ms.kind.length;
    const chunk = Math.max(1, Math.ceil(n / 1500));
    let t0 = 0;
    for (let k0 = 0; k0 < n; k0 += chunk) {
      let comp = 0, rest = 0, span = 0;
      const k1 = Math.min(n, k0 + chunk);
      for (let k = k0; k < k1; k++) {
        const r = rows.has(ms.op[k]) ? rows.get(ms.op[k]) : -1;
        if (ms.kind[k] === "Execute" && r >= 0) {
          const c = Math.min(ms.cycles[k], o.compute_cycles[r]);
          comp += c;
          rest += ms.cycles[k] - c;
        }
        span += ms.cycles[k];
      }
      const label = chunk > 1 ? `steps ${k0}–${k1 - 1}` : ms.label[k0];
      if (comp + rest > 0) {
        segs.push({ lane: bspLane, start: t0, cycles: comp, kind: "compute", label, fn: "", via: "main" });
        segs.push({ lane: bspLane, start: t0 + comp, cycles: rest, kind: "exchange + sync", label,
          fn: "", via: "main" });
      }
      t0 += span;
    }
    const laneName = ["main program", "Functions (calls)", "Functions (nested)"];
    laneName[bspLane] = "main: BSP phases";
    // A lane of thousands of steps: consecutive steps of one kind are
    // merged into one segment (the cycles-per-step chart below has each).
    const MERGE = 3000, perLane = {};
    for (const s of segs) perLane[s.lane] = (perLane[s.lane] || 0) + 1;
    let merged = 0;
    const drawn = [];
    for (const s of segs) {
      const last = drawn.length ? drawn[drawn.length - 1] : null;
      const prev = last && last.lane === s.lane ? last : null;
      if (perLane[s.lane] > MERGE && prev && prev.kind === s.kind && !CALLS.includes(s.kind) &&
          Math.abs(prev.start + prev.cycles - s.start) < 1e-6) {
        prev.cycles += s.cycles;
        prev.n = (prev.n || 1) + 1;
        prev.label = prev.first + " … " + s.label + ` (${prev.n} steps)`;
        merged++;
      } else {
        drawn.push(Object.assign({ first: s.label }, s));
      }
    }
    segs.length = 0;
    segs.push(...drawn);
    // Calls drawn last: on top of the steps their widened span may cover.
    const kinds = [...new Set(segs.map((s) => s.kind))].sort((a, b) =>
      CALLS.includes(a) - CALLS.includes(b));
    // Each kind is one trace of thick horizontal lines (start to end of
    // each step, broken by nulls): a path per kind, not an SVG bar per step.
    const minWidth = Math.max(0.5, end / 1200);
    const traces = kinds.map((k) => {
      const x = [], y = [], cd = [];
      for (const s of segs) {
        if (s.kind !== k) continue;
        const info = [s.label, s.via, X.int(s.cycles), X.int(s.start)];
        // At least about a pixel wide at full scale, or a short step of a
        // long program does not show (the hover gives its true cycles).
        x.push(s.start, s.start + (s.lane === bspLane ? s.cycles : Math.max(s.cycles, minWidth)), null);
        y.push(s.lane, s.lane, null);
        cd.push(info, info, null);
      }
      return { type: "scatter", mode: "lines", name: k, x, y, customdata: cd,
        line: { color: X.KIND_COLORS[k] || "#999", width: 34, simplify: false }, connectgaps: false,
        hovertemplate: `${k} %{customdata[0]}<br>in %{customdata[1]}<br>%{customdata[2]} cycles ` +
          "from cycle %{customdata[3]}<extra></extra>" };
    });
    // The called Function's name on each Call / Repeat / If span.
    const spans = segs.filter((s) => CALLS.includes(s.kind) && s.cycles >= 0.02 * Math.max(1, end));
    traces.push({ type: "scatter", mode: "text", name: "Functions", showlegend: false,
      x: spans.map((s) => s.start + s.cycles / 2), y: spans.map((s) => s.lane),
      text: spans.map((s) => s.fn), hoverinfo: "skip", textfont: { color: "#222" } });
    const div = X.plotDiv("plot-trace", 120 + 70 * segs.reduce((m, s) => Math.max(m, s.lane + 1), 1));
    sec.appendChild(X.card(`Execution trace: one run of the main program, ${X.int(end)} cycles ` +
      `(${(end / p.target.clock_hz * 1e6).toFixed(1)} µs)`, div, el("p", { class: "muted" },
      "Each step's estimated cycles, in program order. Calls, Repeats and Ifs span their " +
      "Function, whose own steps are on the lane below; the last lane splits each Execute " +
      "step of the main program into its BSP phases, compute then exchange and sync. Drag " +
      "to zoom, double-click to reset." + (merged ? ` On lanes of over ${MERGE} steps, ` +
      `consecutive steps of one kind are drawn as one (${X.int(merged)} merged).` : "") +
      (segs.length >= cap ?
      ` Only the first ${cap} steps are drawn.` : ""))));
    const lanes = segs.reduce((m, s) => Math.max(m, s.lane + 1), 1);
    X.plot(div, traces, { xaxis: { title: "cycles", zeroline: false },
      yaxis: { range: [lanes - 0.5, -0.5], tickvals: laneName.slice(0, lanes).map((_, i) => i),
        ticktext: laneName.slice(0, lanes), zeroline: false, fixedrange: true },
      hovermode: "closest", margin: { l: 130, r: 20, t: 20, b: 50 } });
    // Cycles per step across the program: a bar chart of the main program's steps.
    const steps = X.steps(p, "main"), d2 = X.plotDiv("plot-step-cycles", 300);
    sec.appendChild(X.card("Cycles per step (main program)", d2));
    const bars = steps.length <= 400;
    X.plot(d2, [Object.assign({ x: steps.map((s) => s.k), y: steps.map((s) => s.cycles) }, bars ?
      { type: "bar", marker: { color: steps.map((s) => X.KIND_COLORS[s.kind] || "#999") } } :
      { type: "scatter", mode: "lines", fill: "tozeroy",
        line: { shape: "hvh", color: "#1f77b4", width: 1 } }, {
      customdata: steps.map((s) => [s.kind, s.label]),
      hovertemplate: "step %{x}: %{customdata[0]} %{customdata[1]}: %{y:,} cycles<extra></extra>" })],
    { xaxis: { title: "program step" }, yaxis: { title: "cycles" }, bargap: 0.1 });
  });
})(ipuxl);
