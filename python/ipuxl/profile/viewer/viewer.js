/* The ipuxl profile viewer: the page's frame (header, tabs, the profile
 * selector of a comparison) and the helpers the views share. The data is
 * the JSON blob #ipuxl-data written by python/ipuxl/profile/page.py; its
 * schema is docs/profile.md. Views register in ipuxl.views (views.js,
 * compare.js) and are drawn the first time they are shown. */
"use strict";
var ipuxl = window.ipuxl = { views: {}, order: [], state: { current: 0 } };

(function (X) {
  X.COLORS = {
    vertexCode: "#1f77b4", vertexInstanceState: "#aec7e8", copyDescriptor: "#c5b0d5",
    controlCode: "#ff7f0e", internalExchangeCode: "#2ca02c", hostExchangeCode: "#98df8a",
    globalExchangeCode: "#bcbd22", stack: "#7f7f7f", variables: "#d62728",
    constants: "#ff9896", notAlwaysLive: "#9467bd", gaps: "#dcdcdc",
  };
  X.KIND_COLORS = {
    Execute: "#1f77b4", Copy: "#9467bd", IpuCopy: "#8c564b", StreamCopy: "#2ca02c",
    Call: "#ff7f0e", Repeat: "#e377c2", If: "#bcbd22", Collective: "#17becf",
    RemoteCopy: "#7f7f7f", compute: "#9edae5", "exchange + sync": "#d62728",
  };
  X.ALWAYS_LIVE = ["vertexCode", "vertexInstanceState", "copyDescriptor", "controlCode",
    "internalExchangeCode", "hostExchangeCode", "globalExchangeCode", "stack", "variables",
    "constants"];
  X.CODE = ["vertexCode", "controlCode", "internalExchangeCode", "hostExchangeCode",
    "globalExchangeCode"];

  // ---- formatting
  // One formatter for all numbers: toLocaleString makes one per call,
  // which is most of the time a table of a few thousand rows takes.
  const NF = new Intl.NumberFormat("en-US", { maximumFractionDigits: 0 });
  X.int = function (v) { return NF.format(Math.round(Number(v) || 0)); };
  X.bytes = function (v) {
    v = Number(v) || 0;
    const a = Math.abs(v);
    const s = a >= 1048576 ? (v / 1048576).toFixed(2) + " MiB" :
      a >= 1024 ? (v / 1024).toFixed(1) + " KiB" : Math.round(v) + " B";
    return s;
  };
  X.signed = function (v, f) {
    const s = (f || X.int)(v);
    return v > 0 ? "+" + s : s;
  };
  X.esc = function (s) {
    return String(s).replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;",
      '"': "&quot;" })[c]);
  };
  X.short = function (s, n) { s = String(s); return s.length > n ? s.slice(0, n - 1) + "…" : s; };

  // ---- DOM
  const el = X.el = function (tag, attrs, ...kids) {
    const e = document.createElement(tag);
    for (const k in attrs || {}) {
      if (k === "class") e.className = attrs[k];
      else if (k === "html") e.innerHTML = attrs[k];
      else if (k.startsWith("on")) e.addEventListener(k.slice(2), attrs[k]);
      else e.setAttribute(k, attrs[k]);
    }
    for (const c of kids) if (c !== null && c !== undefined)
      e.appendChild(typeof c === "string" ? document.createTextNode(c) : c);
    return e;
  };
  X.card = function (title, ...kids) {
    return X.el("div", { class: "card" }, title ? X.el("h2", {}, title) : null, ...kids);
  };
  X.kpi = function (k, v, cls) {
    return X.el("div", { class: "kpi " + (cls || "") }, X.el("div", { class: "k" }, k),
      X.el("div", { class: "v" }, v));
  };

  /* A sortable table. cols: [{key, label, fmt, text (left aligned)}];
   * rows: objects. opts: {limit, onclick(row, tr), id, rowClass(row)}.
   * Only `limit` rows are drawn until "show all" (a 10,000-op program). */
  X.table = function (cols, rows, opts) {
    opts = opts || {};
    const limit = opts.limit || 200;
    const wrap = X.el("div", { class: "scroll" });
    const tbl = X.el("table", opts.id ? { id: opts.id } : {});
    wrap.appendChild(tbl);
    let sortKey = null, desc = true, shown = limit;
    const more = X.el("div", { class: "more" });
    function draw() {
      let data = rows.slice();
      if (sortKey !== null) {
        data.sort((a, b) => {
          const x = a[sortKey], y = b[sortKey];
          const c = (typeof x === "number" && typeof y === "number") ? x - y :
            String(x).localeCompare(String(y));
          return desc ? -c : c;
        });
      }
      tbl.innerHTML = "";
      const head = X.el("tr");
      for (const c of cols) {
        const th = X.el("th", { class: c.text ? "t" : "", title: c.title || "sort" },
          c.label + (sortKey === c.key ? (desc ? " ▾" : " ▴") : ""));
        th.addEventListener("click", () => {
          desc = sortKey === c.key ? !desc : true;
          sortKey = c.key;
          draw();
        });
        head.appendChild(th);
      }
      tbl.appendChild(head);
      for (const r of data.slice(0, shown)) {
        const tr = X.el("tr", { class: (opts.onclick ? "click " : "") +
          (opts.rowClass ? opts.rowClass(r) : "") });
        for (const c of cols) {
          const v = r[c.key];
          const td = X.el("td", { class: c.text ? "t" : "" });
          // fmt returns HTML (or a Node); plain values are text.
          const f = c.fmt ? c.fmt(v, r) : (typeof v === "number" ? X.int(v) : (v ?? ""));
          if (f instanceof Node) td.appendChild(f);
          else if (c.fmt) td.innerHTML = String(f);
          else td.textContent = String(f);
          if (c.text && !(f instanceof Node)) td.title = td.textContent;
          tr.appendChild(td);
        }
        if (opts.onclick) tr.addEventListener("click", () => opts.onclick(r, tr));
        tbl.appendChild(tr);
      }
      more.innerHTML = "";
      if (data.length > shown) {
        more.appendChild(X.el("span", { class: "muted" },
          `${shown.toLocaleString()} of ${data.length.toLocaleString()} rows `));
        more.appendChild(X.el("button", { onclick: () => { shown = data.length; draw(); } },
          "show all"));
      }
    }
    draw();
    return X.el("div", {}, wrap, more);
  };

  /* Draws a chart (charts.js: plotly's trace and layout shapes, drawn as
   * SVG) into div; onclick: a click handler, or {event name: handler}. */
  X.plot = function (div, traces, layout, onclick) {
    layout = Object.assign({ margin: { l: 60, r: 20, t: 30, b: 50 } }, layout || {});
    const on = typeof onclick === "function" ? { plotly_click: onclick } : (onclick || {});
    X.chart(div, traces, layout, on);
    return div;
  };
  X.plotDiv = function (id, height) {
    return X.el("div", { class: "plot", id: id, style: `height:${height || 340}px` });
  };

  // ---- the profile's data
  X.data = JSON.parse(document.getElementById("ipuxl-data").textContent);
  X.profile = function () { return X.data.profiles[X.state.current]; };
  X.numTiles = function (p) { return p.target.tiles_per_ipu * p.target.num_ipus; };
  X.totalPerTile = function (p) {
    if (p._total) return p._total;
    const n = X.numTiles(p), out = new Float64Array(n);
    for (const c of p.categories) {
      const v = p.per_tile[c];
      for (let t = 0; t < n; t++) out[t] += v[t];
    }
    return (p._total = out);
  };
  /* Bytes per tile between allocations (the optional gaps_per_tile of
   * docs/profile.md), or null when the profile has none. */
  X.gaps = function (p) {
    const g = p.gaps_per_tile;
    return Array.isArray(g) && g.length === X.numTiles(p) ? g : null;
  };
  X.opRow = function (p) {
    // op index (to_desc's numbering, steps[].op) -> row of p.ops
    if (p._oprow) return p._oprow;
    const m = new Map(), idx = p.ops.index || p.ops.name.map((_, i) => i);
    idx.forEach((v, r) => m.set(v, r));
    return (p._oprow = m);
  };
  X.opLabel = function (p, r) {
    const g = p.ops.graph[r];
    return g === "main" || g === "" ? p.ops.name[r] : g + "/" + p.ops.name[r];
  };
  X.opCode = function (p, r) {
    return p.ops.state_bytes[r] + p.ops.exchange_code_bytes[r] + p.ops.control_code_bytes[r];
  };
  X.graph = function (p, name) {
    return p.graphs.find((g) => g.name === name) || null;
  };
  /* The steps of graph `name` ("main" or a Function) as row objects. */
  X.steps = function (p, name) {
    const s = name === "main" ? p.steps : (p.function_steps || {})[name];
    if (!s) return [];
    const rows = X.opRow(p), out = [];
    for (let k = 0; k < s.kind.length; k++) {
      const r = rows.has(s.op[k]) ? rows.get(s.op[k]) : -1;
      const callees = r >= 0 && p.ops.callees ? (p.ops.callees[r] || []) : [];
      out.push({ k: k, graph: name, kind: s.kind[k], label: s.label[k] || s.kind[k],
        cycles: s.cycles[k], live: s.live_bytes[k], max_tile: s.max_tile_live[k], row: r,
        callees: ["Call", "Repeat", "If"].includes(s.kind[k]) ? callees : [],
        trips: r >= 0 && p.ops.trip_count ? (p.ops.trip_count[r] || 0) : 0 });
    }
    return out;
  };
  X.alwaysLive = function (p) {
    let s = 0;
    for (const c of X.ALWAYS_LIVE) if (p.per_tile[c]) for (const v of p.per_tile[c]) s += v;
    return s;
  };

  /* The tensors with bytes on global tile `tile`, as Profile.tensors_on_tile
   * (python/ipuxl/profile/report.py): a tensor covers `tiles` consecutive
   * tiles from `first_tile`, wrapping within its tile set (IO tiles first). */
  X.tensorsOnTile = function (p, tile) {
    const tpi = p.target.tiles_per_ipu, nio = p.target.num_io_tiles || 0, t = p.tensors;
    const ipu = Math.floor(tile / tpi), local = tile % tpi, hits = [];
    for (let i = 0; i < t.name.length; i++) {
      if (t.ipu[i] !== ipu) continue;
      const first = t.first_tile[i], count = t.tiles[i];
      const [base, size] = (first >= nio || nio === 0) ? [nio, tpi - nio] : [0, nio];
      if (local < base || local >= base + size || size <= 0) continue;
      const off = (((local - first) % size) + size) % size;
      if (off < count) {
        const per = t.bytes_per_tile[i];
        const on = off + 1 < count ? per : t.bytes[i] - per * (count - 1);
        hits.push({ name: t.name[i], graph: t.graph[i], on_tile: on, bytes: t.bytes[i],
          always_live: t.always_live[i] ? "yes" : "no" });
      }
    }
    hits.sort((a, b) => b.on_tile - a.on_tile || a.name.localeCompare(b.name));
    return hits;
  };

  // ---- the frame
  X.register = function (id, title, draw, opts) {
    X.views[id] = { id, title, draw, compareOnly: !!(opts && opts.compareOnly), drawn: false };
    X.order.push(id);
  };
  X.show = function (id) {
    const v = X.views[id];
    for (const b of document.querySelectorAll("nav button"))
      b.classList.toggle("active", b.dataset.view === id);
    for (const s of document.querySelectorAll("section.view"))
      s.classList.toggle("active", s.id === "view-" + id);
    const sec = document.getElementById("view-" + id);
    if (!v.drawn) {
      const t0 = performance.now();
      sec.innerHTML = "";
      v.draw(sec, X.profile());
      v.drawn = true;
      // How long each view took to draw (the open-time test prints them).
      (window.ipuxlDrawMs = window.ipuxlDrawMs || {})[id] = performance.now() - t0;
    } else {
      // Charts drawn while the window had another width follow it.
      for (const d of sec.querySelectorAll(".chart"))
        if (d.chart && d.chart.width !== d.clientWidth) d.chart.render();
    }
    X.state.view = id;
    document.body.dataset.view = id;
  };
  X.select = function (i) {
    X.state.current = i;
    for (const id in X.views) if (!X.views[id].compareOnly) X.views[id].drawn = false;
    X.show(X.state.view);
  };

  function init() {
    const d = X.data, app = document.getElementById("app");
    const head = X.el("header", {}, X.el("h1", {}, d.title));
    if (d.mode === "compare") {
      const sel = X.el("select", { id: "profile-select", onchange: (e) => X.select(+e.target.value) });
      d.profiles.forEach((p, i) => sel.appendChild(X.el("option", { value: String(i) }, p.label)));
      head.appendChild(X.el("span", { class: "sub" }, "views of: ", sel));
    } else if (!d.title.includes(d.profiles[0].label)) {
      head.appendChild(X.el("span", { class: "sub" }, d.profiles[0].label));
    }
    if (d.links && d.links.length) {
      const l = X.el("span", { class: "sub" }, "other sessions: ");
      for (const k of d.links) l.appendChild(X.el("a", { href: k.href }, k.label));
      head.appendChild(l);
    }
    head.appendChild(X.el("span", { class: "sub" },
      "estimates of ipuxl's analytical IPU model (docs/ipu_model.md), not measurements"));
    const nav = X.el("nav"), main = X.el("main");
    for (const id of X.order) {
      const v = X.views[id];
      if (v.compareOnly && d.mode !== "compare") continue;
      nav.appendChild(X.el("button", { "data-view": id, onclick: () => X.show(id) }, v.title));
      main.appendChild(X.el("section", { class: "view", id: "view-" + id }));
    }
    app.appendChild(head);
    app.appendChild(nav);
    app.appendChild(main);
    // page.html#memory opens on that view.
    const want = location.hash.slice(1);
    X.show(X.views[want] && (!X.views[want].compareOnly || d.mode === "compare") ? want :
      d.mode === "compare" ? "compare" : "summary");
    // Milliseconds from the start of navigation to the first view drawn
    // (its charts are drawn with it), and to the frame after it painted.
    window.ipuxlReadyMs = performance.now();
    window.ipuxlReady = true;
    requestAnimationFrame(() => setTimeout(() => {
      window.ipuxlChartsMs = performance.now();
      window.ipuxlCharts = true;
    }, 0));
  }
  document.addEventListener("DOMContentLoaded", init);
})(ipuxl);
