/* The viewer's charts: SVG drawn from a trace/layout description in the
 * shape plotly.js takes (the subset the views use), so the views read as
 * plotly figures but the page needs no 4.6 MB library to compile before
 * its charts show (bench/results/2026-12-02-viewer.md has the numbers).
 *
 * X.chart(div, traces, layout, handlers) draws into div and keeps
 * div.data (the traces), div.layout and div.chart (the Chart).
 *   traces: {type: "bar" | "scatter", name, x, y, orientation: "h",
 *     mode: "lines" | "markers" | "text", stackgroup, fill: "tozeroy",
 *     line: {shape: "linear" | "hv" | "hvh", width, color}, fillcolor,
 *     marker: {color (one or per point), symbol, size}, text, customdata,
 *     hovertemplate ("%{x}", "%{y:.1f}", "%{customdata[0]}", "%{text}"),
 *     hoverinfo: "skip", visible: true | "legendonly", showlegend,
 *     xaxis: "x2", yaxis: "y2"}
 *   layout: {barmode: "stack" | "group" | "overlay", bargap, hovermode:
 *     "x unified" | "closest", margin, showlegend, grid: {rows},
 *     xaxis / yaxis[N]: {title, range, autorange: "reversed", tickvals,
 *     ticktext, tickangle, overlaying, side, fixedrange}, shapes (lines),
 *     annotations, updatemenus (buttons that relayout "axis.range")}
 *   handlers: {plotly_click(ev), plotly_legendclick(ev)}; ev.points are
 *     [{x, y, curveNumber, pointIndex, customdata}].
 * Numeric x axes zoom by dragging; a double click resets. */
"use strict";
(function (X) {
  const NS = "http://www.w3.org/2000/svg";
  const esc = (s) => X.esc(s);

  // ---- numbers (Intl formatters made once: one per call is slow)
  const NF = {};
  const nf = (lo, hi) => NF[lo + "," + hi] || (NF[lo + "," + hi] = new Intl.NumberFormat("en-US",
    { minimumFractionDigits: lo, maximumFractionDigits: hi }));
  function fmt(v, spec) {
    if (v === null || v === undefined) return "";
    if (typeof v !== "number") return String(v);
    if (!spec) return Math.abs(v) >= 1e4 || Number.isInteger(v) ? nf(0, 3).format(v) :
      String(+v.toPrecision(6));
    const m = /^(,)?(?:\.(\d+))?f?$/.exec(spec);
    if (!m) return String(v);
    const d = m[2] !== undefined ? +m[2] : (m[1] ? 0 : 6);
    return m[1] ? nf(m[2] ? d : 0, m[2] ? d : 3).format(v) : v.toFixed(d);
  }
  function tickText(v) {
    const a = Math.abs(v), t = (x) => String(+x.toPrecision(4));
    return a >= 1e9 ? t(v / 1e9) + "G" : a >= 1e6 ? t(v / 1e6) + "M" : a >= 1e4 ? t(v / 1e3) + "k" : t(v);
  }
  function niceTicks(lo, hi, n, ints) {
    if (lo > hi) [lo, hi] = [hi, lo];
    const span = hi - lo;
    if (!(span > 0)) return [lo];
    const raw = span / n, mag = Math.pow(10, Math.floor(Math.log10(raw))), r = raw / mag;
    let step = (r < 1.5 ? 1 : r < 3 ? 2 : r < 7 ? 5 : 10) * mag;
    if (ints) step = Math.max(1, step);
    const out = [];
    for (let v = Math.ceil(lo / step - 1e-9) * step; v <= hi + step * 1e-9; v += step)
      out.push(+v.toPrecision(12));
    return out;
  }
  /* A hovertemplate filled in for one point (plotly's syntax, the subset above). */
  function fill(tpl, pt) {
    return tpl.replace(/<extra>.*?<\/extra>/g, "").replace(/%\{([^}:]+)(?::([^}]*))?\}/g,
      (_, key, spec) => {
        const m = /^customdata\[(\d+)\]$/.exec(key);
        const v = m ? (pt.customdata || [])[+m[1]] : pt[key];
        return esc(fmt(v, spec));
      });
  }

  // ---- the chart
  function Chart(div, traces, layout, on) {
    this.div = div;
    this.traces = traces;
    this.layout = layout;
    this.on = on || {};
    this.zoom = {};  // axis id -> range while zoomed
    this.render();
  }

  /* Axes, their categories and ranges, and each trace in axis units. */
  Chart.prototype.prepare = function () {
    const L = this.layout, axes = {}, tr = this.traces;
    const axis = (id) => axes[id] || (axes[id] = Object.assign({ id, letter: id[0], cats: null,
      lo: Infinity, hi: -Infinity, zero: false, pad: 0 }, L[id[0] + "axis" + id.slice(1)] || {}));
    const isCat = (a) => a && a.some((v) => typeof v === "string");
    this.items = tr.map((t, i) => {
      const xa = axis(t.xaxis || "x"), ya = axis(t.yaxis || "y");
      const n = Math.max((t.x || []).length, (t.y || []).length);
      const x = t.x || Array.from({ length: n }, (_, k) => k);
      const y = t.y || Array.from({ length: n }, (_, k) => k);
      for (const [a, vals] of [[xa, x], [ya, y]]) if (isCat(vals)) {
        a.cats = a.cats || [];
        a.catIndex = a.catIndex || new Map();
        for (const v of vals) if (v !== null && !a.catIndex.has(v)) {
          a.catIndex.set(v, a.cats.length);
          a.cats.push(v);
        }
      }
      return { t, i, xa, ya, x, y, n, horiz: t.type === "bar" && t.orientation === "h",
        shown: t.visible === undefined || t.visible === true };
    });
    const num = (a, v) => v === null || v === undefined ? null : a.cats ? a.catIndex.get(v) : +v;
    for (const a of Object.values(axes)) a.ints = true;
    for (const it of this.items) {
      it.xs = it.x.map((v) => num(it.xa, v));
      it.ys = it.y.map((v) => num(it.ya, v));
      // An axis of whole numbers (tiles, steps) gets no fractional ticks.
      for (const [a, vs] of [[it.xa, it.xs], [it.ya, it.ys]])
        if (a.ints && !vs.every((v) => v === null || Number.isInteger(v))) a.ints = false;
    }
    // Bars: slot width, grouping and stacking per position axis.
    const mode = L.barmode || "group", gap = L.bargap === undefined ? 0.2 : L.bargap;
    const groups = {};
    for (const it of this.items) if (it.t.type === "bar" && it.shown) {
      const pa = it.horiz ? it.ya : it.xa;
      (groups[pa.id] = groups[pa.id] || []).push(it);
    }
    for (const id in groups) {
      const g = groups[id], pa = axes[id];
      let slot = 1;
      if (!pa.cats) {
        const ps = [...new Set(g.flatMap((it) => it.horiz ? it.ys : it.xs))].filter((v) => v !== null)
          .sort((a, b) => a - b);
        for (let k = 1; k < ps.length; k++) slot = Math.min(k === 1 ? Infinity : slot, ps[k] - ps[k - 1]);
        if (!isFinite(slot) || slot <= 0) slot = 1;
      }
      const width = slot * (1 - gap), ng = mode === "group" ? g.length : 1;
      const pos = {}, neg = {};
      g.forEach((it, gi) => {
        const P = it.horiz ? it.ys : it.xs, V = it.horiz ? it.xs : it.ys;
        it.width = width / ng;
        it.off = mode === "group" ? -width / 2 + it.width * gi : -width / 2;
        it.base = new Float64Array(it.n);
        it.top = new Float64Array(it.n);
        for (let k = 0; k < it.n; k++) {
          const p = P[k], v = V[k] || 0;
          let b = 0;
          if (mode === "stack") {
            const acc = v >= 0 ? pos : neg;
            b = acc[p] || 0;
            acc[p] = b + v;
          }
          it.base[k] = b;
          it.top[k] = b + v;
        }
        const va = it.horiz ? it.xa : it.ya;
        va.zero = true;
        for (let k = 0; k < it.n; k++) extend(va, it.top[k]);
        for (let k = 0; k < it.n; k++) if (P[k] !== null) {
          extend(pa, P[k] + it.off);
          extend(pa, P[k] + it.off + it.width);
        }
      });
    }
    // Scatter: stack groups and fills.
    const stacks = {};
    for (const it of this.items) if (it.t.type !== "bar" && it.shown) {
      if (it.t.stackgroup) {
        const acc = stacks[it.t.stackgroup] || (stacks[it.t.stackgroup] = new Float64Array(it.n));
        it.base = Float64Array.from(acc);
        for (let k = 0; k < it.n; k++) acc[k] += it.ys[k] || 0;
        it.top = Float64Array.from(acc);
        it.ya.zero = true;
      } else if (it.t.fill === "tozeroy") {
        it.base = new Float64Array(it.n);
        it.top = Float64Array.from(it.ys, (v) => v || 0);
        it.ya.zero = true;
      }
      for (let k = 0; k < it.n; k++) {
        extend(it.xa, it.xs[k]);
        extend(it.ya, it.top ? it.top[k] : it.ys[k]);
      }
      // Markers alone get some room at the ends; lines and areas fill the axis.
      if ((it.t.mode || "lines").includes("lines")) it.xa.filled = true;
      else if ((it.t.mode || "").includes("markers") && it.n) it.xa.pad = 0.03;
    }
    // Ranges: the layout's, a zoom, else the data's (with 0 under bars).
    for (const id in axes) {
      const a = axes[id];
      let lo = a.lo, hi = a.hi;
      if (a.cats) { lo = Math.min(lo, -0.5); hi = Math.max(hi, a.cats.length - 0.5); }
      if (!isFinite(lo)) { lo = 0; hi = 1; }
      if (a.zero) { lo = Math.min(lo, 0); hi = Math.max(hi, 0); }
      if (a.letter === "y" && !a.cats) {
        const d = (hi - lo) || 1;
        hi += 0.05 * d;
        if (!a.zero) lo -= 0.05 * d;
      } else if (a.pad && !a.filled) { const d = (hi - lo) || 1; lo -= a.pad * d; hi += a.pad * d; }
      if (hi === lo) hi = lo + 1;
      a.auto = [lo, hi];
      a.range = this.zoom[id] || a.range || (a.autorange === "reversed" ? [hi, lo] : [lo, hi]);
    }
    // Shared ranges ("matches") and overlaid axes.
    for (const id in axes) {
      const a = axes[id];
      if (a.matches && axes[a.matches] && !this.zoom[id]) a.range = axes[a.matches].range;
    }
    this.axes = axes;
  };

  function extend(a, v) {
    if (v === null || v === undefined || !isFinite(v)) return;
    if (v < a.lo) a.lo = v;
    if (v > a.hi) a.hi = v;
  }

  /* Pixel boxes of the axes: rows of a grid, y2 overlaying y. */
  Chart.prototype.place = function (W, H) {
    const L = this.layout, m = Object.assign({ l: 60, r: 20, t: 30, b: 50 }, L.margin || {});
    const rows = L.grid ? L.grid.rows : 1, pw = Math.max(10, W - m.l - m.r);
    const ph = Math.max(10, H - m.t - m.b), rowGap = rows > 1 ? 30 : 0;
    const rh = (ph - rowGap * (rows - 1)) / rows;
    this.box = { l: m.l, t: m.t, w: pw, h: ph };
    for (const id in this.axes) {
      const a = this.axes[id], k = id.length > 1 ? +id.slice(1) - 1 : 0;
      const row = rows > 1 ? k : 0;
      a.y0 = m.t + row * (rh + rowGap);
      a.h = rows > 1 ? rh : ph;
      a.x0 = m.l;
      a.w = pw;
      if (a.letter === "y" && a.overlaying) {
        const b = this.axes[a.overlaying];
        if (b) { a.y0 = b.y0; a.h = b.h; }
      }
      const [lo, hi] = a.range;
      a.l2p = a.letter === "x" ? (v) => a.x0 + (v - lo) / (hi - lo) * a.w :
        (v) => a.y0 + a.h - (v - lo) / (hi - lo) * a.h;
      a.p2l = a.letter === "x" ? (p) => lo + (p - a.x0) / a.w * (hi - lo) :
        (p) => lo + (a.y0 + a.h - p) / a.h * (hi - lo);
    }
    // An x axis sits under the row of the y axis it is drawn with.
    for (const it of this.items) { it.xa.row = it.ya; }
  };

  const color = (t, k) => {
    const c = t.marker && t.marker.color;
    return Array.isArray(c) ? c[k] : c || (t.line && t.line.color) || "#1f77b4";
  };

  Chart.prototype.render = function () {
    const div = this.div, L = this.layout;
    const W = Math.max(200, div.clientWidth || 600);
    const H = parseInt(div.style.height, 10) || div.clientHeight || 340;
    this.width = div.clientWidth;
    this.prepare();
    div.innerHTML = "";
    div.classList.add("chart");
    div.style.position = "relative";
    if (L.updatemenus) for (const menu of L.updatemenus) div.appendChild(this.menu(menu));
    const legendBox = this.legend();
    const legendH = legendBox ? 24 : 0, menuH = L.updatemenus ? 28 : 0;
    const svgH = Math.max(80, H - legendH - menuH);
    this.place(W, svgH);
    const parts = [`<svg xmlns="${NS}" width="${W}" height="${svgH}" style="display:block;font-size:11px">`];
    const clipId = (id) => `clip-${div.id || "c"}-${id}`;
    parts.push("<defs>");
    for (const id in this.axes) if (id[0] === "y") {
      const a = this.axes[id];
      parts.push(`<clipPath id="${clipId(id)}"><rect x="${this.box.l}" y="${a.y0}" width="${this.box.w}" ` +
        `height="${a.h}"/></clipPath>`);
    }
    parts.push("</defs>");
    for (const id in this.axes) parts.push(this.axisSvg(this.axes[id]));
    for (const it of this.items) if (it.shown) {
      parts.push(`<g clip-path="url(#${clipId(it.ya.overlaying || it.ya.id)})">` + this.traceSvg(it) + "</g>");
    }
    for (const s of L.shapes || []) parts.push(this.shapeSvg(s));
    for (const a of L.annotations || []) {
      const xa = this.axes.x, ya = this.axes[a.yref || "y"] || this.axes.y;
      if (!xa || !ya) continue;
      const x = a.xref === "paper" ? this.box.l + a.x * this.box.w : xa.l2p(a.x);
      parts.push(`<text x="${x}" y="${ya.l2p(a.y) - 3}" text-anchor="${a.xanchor === "right" ? "end" :
        a.xanchor === "left" ? "start" : "middle"}" fill="${(a.font && a.font.color) || "#333"}">` +
        `${esc(a.text)}</text>`);
    }
    parts.push("</svg>");
    const holder = document.createElement("div");
    holder.innerHTML = parts.join("");
    this.svg = holder.firstChild;
    div.appendChild(this.svg);
    if (legendBox) div.appendChild(legendBox);
    this.tip = X.el("div", { class: "chart-tip" });
    div.appendChild(this.tip);
    this.events();
    div.data = this.traces;
    div.layout = L;
    div.chart = this;
  };

  Chart.prototype.axisSvg = function (a) {
    const out = [], horiz = a.letter === "x";
    const ya = horiz ? (this.items.find((it) => it.xa === a) || {}).ya : a;
    if (horiz && !ya) return "";
    const base = horiz ? ya.y0 + ya.h : (a.side === "right" ? a.x0 + a.w : a.x0);
    let ticks, labels;
    if (a.tickvals) { ticks = a.tickvals; labels = a.ticktext || a.tickvals.map(tickText); }
    else if (a.cats) {
      const n = a.cats.length, room = horiz ? a.w / Math.max(1, n) : a.h / Math.max(1, n);
      const every = Math.max(1, Math.ceil((horiz ? 14 : 12) / room));
      ticks = a.cats.map((_, k) => k).filter((k) => k % every === 0);
      labels = ticks.map((k) => String(a.cats[k]));
    } else {
      ticks = niceTicks(a.range[0], a.range[1], horiz ? Math.max(2, Math.floor(a.w / 90)) :
        Math.max(2, Math.floor(a.h / 45)), a.ints && !a.cats);
      labels = ticks.map(tickText);
    }
    const [lo, hi] = a.range, inR = (v) => v >= Math.min(lo, hi) - 1e-9 && v <= Math.max(lo, hi) + 1e-9;
    let angle = a.tickangle || 0;
    if (horiz && a.cats && !angle) {
      const room = a.w / Math.max(1, ticks.length);
      if (Math.max(...labels.map((s) => s.length)) * 6.2 > room) angle = -40;
    }
    ticks.forEach((v, k) => {
      if (!inR(v)) return;
      const p = a.l2p(v);
      if (horiz) {
        if (!a.cats && !a.tickvals) out.push(`<line x1="${p}" x2="${p}" y1="${ya.y0}" y2="${base}" stroke="#eef0f4"/>`);
        out.push(angle ? `<text transform="translate(${p},${base + 12}) rotate(${angle})" text-anchor="end">` +
          `${esc(labels[k])}</text>` : `<text x="${p}" y="${base + 14}" text-anchor="middle">${esc(labels[k])}</text>`);
      } else {
        if (a.side !== "right") out.push(`<line x1="${this.box.l}" x2="${this.box.l + this.box.w}" y1="${p}" ` +
          `y2="${p}" stroke="#e6e9ef"/>`);
        out.push(`<text x="${a.side === "right" ? base + 5 : base - 5}" y="${p + 4}" ` +
          `text-anchor="${a.side === "right" ? "start" : "end"}">${esc(labels[k])}</text>`);
      }
    });
    out.push(horiz ? `<line x1="${a.x0}" x2="${a.x0 + a.w}" y1="${base}" y2="${base}" stroke="#8a93a3"/>` :
      `<line x1="${base}" x2="${base}" y1="${a.y0}" y2="${a.y0 + a.h}" stroke="#8a93a3"/>`);
    const title = a.title && typeof a.title === "object" ? a.title.text : a.title;
    if (title) {
      if (horiz) out.push(`<text x="${a.x0 + a.w / 2}" y="${base + (angle ? 0 : 34)}" text-anchor="middle" ` +
        `class="axis-title"${angle ? ` dy="${(this.layout.margin && this.layout.margin.b || 50) - 6}"` : ""}>` +
        `${esc(title)}</text>`);
      else {
        const x = a.side === "right" ? base + 48 : base - 46, y = a.y0 + a.h / 2;
        out.push(`<text transform="translate(${x},${y}) rotate(-90)" text-anchor="middle" class="axis-title">` +
          `${esc(title)}</text>`);
      }
    }
    return out.join("");
  };

  Chart.prototype.traceSvg = function (it) {
    const t = it.t, xa = it.xa, ya = it.ya, out = [], n = it.n;
    const f1 = (v) => v.toFixed(1);
    if (t.type === "bar") {
      // One path per colour: thousands of bars stay one element each colour.
      const paths = {};
      const pa = it.horiz ? ya : xa, va = it.horiz ? xa : ya, P = it.horiz ? it.ys : it.xs;
      for (let k = 0; k < n; k++) {
        if (P[k] === null || it.top[k] === it.base[k]) continue;
        let a = pa.l2p(P[k] + it.off), b = pa.l2p(P[k] + it.off + it.width);
        if (Math.abs(b - a) < 1) b = a + (b >= a ? 1 : -1);
        const v0 = va.l2p(it.base[k]), v1 = va.l2p(it.top[k]);
        const c = color(t, k);
        paths[c] = (paths[c] || "") + (it.horiz ? `M${f1(v0)} ${f1(a)}H${f1(v1)}V${f1(b)}H${f1(v0)}Z` :
          `M${f1(a)} ${f1(v0)}V${f1(v1)}H${f1(b)}V${f1(v0)}Z`);
      }
      for (const c in paths) out.push(`<path d="${paths[c]}" fill="${c}"/>`);
      return out.join("");
    }
    const mode = t.mode || "lines", shape = (t.line && t.line.shape) || "linear";
    const stepPath = (ys, from, to) => {
      // The points from..to-1 as a path of `shape`.
      let d = "";
      for (let k = from; k < to; k++) {
        const x = xa.l2p(it.xs[k]), y = ya.l2p(ys[k]);
        if (k === from) { d += `M${f1(x)} ${f1(y)}`; continue; }
        const px = xa.l2p(it.xs[k - 1]);
        if (shape === "hv") d += `H${f1(x)}V${f1(y)}`;
        else if (shape === "hvh") { const m = (px + x) / 2; d += `H${f1(m)}V${f1(y)}H${f1(x)}`; }
        else d += `L${f1(x)} ${f1(y)}`;
      }
      return d;
    };
    const runs = [];  // stretches without nulls
    for (let k = 0; k < n;) {
      while (k < n && (it.xs[k] === null || it.ys[k] === null)) k++;
      const s = k;
      while (k < n && it.xs[k] !== null && it.ys[k] !== null) k++;
      if (k > s) runs.push([s, k]);
    }
    if (mode.includes("lines")) {
      if (it.top) {  // a filled area between base and top
        const fc = t.fillcolor || color(t, 0);
        let d = "";
        for (const [s, e] of runs) {
          const up = stepPath(it.top, s, e);
          let back = "";
          for (let k = e - 1; k >= s; k--) {
            const x = xa.l2p(it.xs[k]), y = ya.l2p(it.base[k]);
            if (k === e - 1) { back += `L${f1(x)} ${f1(y)}`; continue; }
            const nx = xa.l2p(it.xs[k + 1]);
            if (shape === "hv") back += `V${f1(y)}H${f1(x)}`;
            else if (shape === "hvh") { const m = (nx + x) / 2; back += `H${f1(m)}V${f1(y)}H${f1(x)}`; }
            else back += `L${f1(x)} ${f1(y)}`;
          }
          d += up + back + "Z";
        }
        out.push(`<path d="${d}" fill="${fc}" fill-opacity="${t.fill === "tozeroy" ? 0.5 : 0.9}"/>`);
      }
      const w = t.line && t.line.width !== undefined ? t.line.width : 2;
      if (w > 0) {
        const d = runs.map(([s, e]) => stepPath(it.top && !t.stackgroup ? it.top : it.top || it.ys, s, e)).join("");
        out.push(`<path d="${d}" fill="none" stroke="${(t.line && t.line.color) || color(t, 0)}" ` +
          `stroke-width="${w}"/>`);
      }
    }
    if (mode.includes("markers")) {
      const s = (t.marker && t.marker.size) || 6, tri = t.marker && /triangle-down/.test(t.marker.symbol || "");
      let d = "";
      for (let k = 0; k < n; k++) {
        if (it.xs[k] === null || it.ys[k] === null) continue;
        const x = xa.l2p(it.xs[k]), y = ya.l2p(it.ys[k]);
        d += tri ? `M${f1(x - s / 2)} ${f1(y - s)}H${f1(x + s / 2)}L${f1(x)} ${f1(y)}Z` :
          `M${f1(x - s / 2)} ${f1(y)}a${s / 2} ${s / 2} 0 1 0 ${s} 0a${s / 2} ${s / 2} 0 1 0 ${-s} 0`;
      }
      out.push(`<path d="${d}" fill="${color(t, 0)}"/>`);
    }
    if (mode === "text") {
      const c = (t.textfont && t.textfont.color) || "#222";
      for (let k = 0; k < n; k++) if (it.xs[k] !== null)
        out.push(`<text x="${xa.l2p(it.xs[k])}" y="${ya.l2p(it.ys[k]) + 4}" text-anchor="middle" ` +
          `fill="${c}" pointer-events="none">${esc((t.text || [])[k] || "")}</text>`);
    }
    return out.join("");
  };

  Chart.prototype.shapeSvg = function (s) {
    if (s.type !== "line") return "";
    const ya = this.axes[s.yref || "y"];
    if (!ya) return "";
    const xr = s.xref || "x", xa = this.axes[xr.split(" ")[0]] || this.axes.x;
    const px = (v) => xr === "paper" ? this.box.l + v * this.box.w :
      xr.endsWith("domain") ? xa.x0 + v * xa.w : xa.l2p(v);
    const ln = s.line || {};
    return `<line x1="${px(s.x0)}" x2="${px(s.x1)}" y1="${ya.l2p(s.y0)}" y2="${ya.l2p(s.y1)}" ` +
      `stroke="${ln.color || "#333"}" stroke-width="${ln.width || 1}"` +
      (ln.dash ? ` stroke-dasharray="6,4"` : "") + "/>";
  };

  Chart.prototype.legend = function () {
    const L = this.layout, named = this.items.filter((it) => it.t.name && it.t.showlegend !== false &&
      it.t.visible !== false);
    if (L.showlegend === false || !named.length || (named.length < 2 && !L.showlegend)) return null;
    const box = X.el("div", { class: "chart-legend" });
    for (const it of named) {
      const item = X.el("span", { class: "item" + (it.shown ? "" : " off"), "data-curve": String(it.i) },
        X.el("i", { style: `background:${it.t.fillcolor || color(it.t, 0)}` }), it.t.name);
      item.addEventListener("click", () => {
        if (this.on.plotly_legendclick) this.on.plotly_legendclick({ curveNumber: it.i });
        it.t.visible = it.shown ? "legendonly" : true;
        this.render();
      });
      box.appendChild(item);
    }
    return box;
  };

  Chart.prototype.menu = function (m) {
    const bar = X.el("div", { class: "chart-menu" });
    m.buttons.forEach((b, k) => {
      const btn = X.el("button", { class: (m.active || 0) === k ? "active" : "" }, b.label);
      btn.addEventListener("click", () => {
        m.active = k;
        const args = b.args[0] || {};
        for (const key in args) {
          const [ax, prop] = key.split(".");
          this.layout[ax] = Object.assign({}, this.layout[ax], { [prop]: args[key] });
          delete this.zoom[ax[0] + ax.slice(5)];
        }
        this.render();
      });
      bar.appendChild(btn);
    });
    return bar;
  };

  /* Client coordinates of data point (x, y) on axes xa, ya (tests click there). */
  Chart.prototype.pixel = function (x, y, xid, yid) {
    const xa = this.axes[xid || "x"], ya = this.axes[yid || "y"], r = this.svg.getBoundingClientRect();
    const xv = xa.cats ? xa.catIndex.get(x) : x, yv = ya.cats ? ya.catIndex.get(y) : y;
    return [r.left + xa.l2p(xv), r.top + ya.l2p(yv)];
  };

  /* The point under (px, py), in svg pixels: {it, k} or null. */
  Chart.prototype.pick = function (px, py) {
    let best = null, bestD = 40;
    const unified = this.layout.hovermode === "x unified";
    for (const it of this.items) {
      const t = it.t;
      if (!it.shown || t.hoverinfo === "skip" || t.mode === "text") continue;
      const xa = it.xa, ya = it.ya;
      if (py < ya.y0 - 5 || py > ya.y0 + ya.h + 5) continue;
      if (t.type === "bar") {
        const pa = it.horiz ? ya : xa, va = it.horiz ? xa : ya, P = it.horiz ? it.ys : it.xs;
        const pv = pa.p2l(it.horiz ? py : px), vv = va.p2l(it.horiz ? px : py);
        for (let k = 0; k < it.n; k++) {
          if (P[k] === null) continue;
          const a = P[k] + it.off, b = a + it.width;
          if (pv < Math.min(a, b) - 0.5 * Math.abs(it.width) * 0.25 || pv > Math.max(a, b)) continue;
          const lo = Math.min(it.base[k], it.top[k]), hi = Math.max(it.base[k], it.top[k]);
          const d = vv >= lo && vv <= hi ? 0 : 20;
          if (d < bestD || (d === bestD && best && best.it.t.type !== "bar")) { best = { it, k }; bestD = d; }
        }
        continue;
      }
      const wide = t.line && t.line.width > 8, xv = xa.p2l(px);
      for (let k = 0; k < it.n; k++) {
        if (it.xs[k] === null || it.ys[k] === null) continue;
        let d;
        if (wide && k + 1 < it.n && it.xs[k + 1] !== null) {  // a thick segment: its band
          const x0 = Math.min(it.xs[k], it.xs[k + 1]), x1 = Math.max(it.xs[k], it.xs[k + 1]);
          if (xv < x0 || xv > x1) continue;
          d = Math.abs(ya.l2p(it.ys[k]) - py) <= t.line.width / 2 ? 0 : 99;
        } else if (it.top) {  // an area: the stretch of x the point holds
          d = Math.abs(xa.l2p(it.xs[k]) - px);
          const v = ya.p2l(py);
          if (!(v >= it.base[k] && v <= it.top[k])) d += unified ? 0.5 : 10;
        } else {
          const dx = xa.l2p(it.xs[k]) - px, dy = unified ? 0 : ya.l2p(it.ys[k]) - py;
          d = Math.sqrt(dx * dx + dy * dy);
        }
        if (d < bestD) { best = { it, k }; bestD = d; }
      }
    }
    return best;
  };

  Chart.prototype.point = function (it, k) {
    return { x: it.x[k], y: it.y[k], curveNumber: it.i, pointIndex: k, pointNumber: k,
      customdata: it.t.customdata ? it.t.customdata[k] : undefined,
      text: Array.isArray(it.t.text) ? it.t.text[k] : it.t.text, data: it.t };
  };

  Chart.prototype.tipText = function (hit) {
    const line = (it, k) => {
      const t = it.t, pt = this.point(it, k);
      return t.hovertemplate ? fill(t.hovertemplate, pt) :
        `${t.name ? esc(t.name) + ": " : ""}${esc(fmt(it.horiz ? pt.x : pt.y))}`;
    };
    if (this.layout.hovermode !== "x unified") return line(hit.it, hit.k);
    const x = hit.it.xs[hit.k], lines = [`<b>${esc(fmt(hit.it.x[hit.k]))}</b>`];
    for (const it of this.items) {
      if (!it.shown || it.t.hoverinfo === "skip" || it.xa !== hit.it.xa) continue;
      const k = it.xs[hit.k] === x ? hit.k : it.xs.indexOf(x);
      if (k >= 0) lines.push(line(it, k));
    }
    return lines.join("<br>");
  };

  Chart.prototype.events = function () {
    const svg = this.svg, tip = this.tip, self = this;
    const at = (e) => { const r = svg.getBoundingClientRect(); return [e.clientX - r.left, e.clientY - r.top]; };
    let drag = null;
    svg.addEventListener("mousemove", (e) => {
      const [px, py] = at(e);
      if (drag) { drag.x1 = px; self.band(drag); return; }
      const hit = self.pick(px, py);
      if (!hit) { tip.style.display = "none"; return; }
      tip.innerHTML = self.tipText(hit);
      tip.style.display = "block";
      const W = svg.clientWidth || svg.getBoundingClientRect().width;
      tip.style.left = (px + 14 + 260 > W ? Math.max(0, px - 274) : px + 14) + "px";
      tip.style.top = (py + (self.div.querySelector(".chart-menu") ? 32 : 4)) + "px";
    });
    svg.addEventListener("mouseleave", () => { tip.style.display = "none"; });
    const xa = this.axes.x;
    const zoomable = xa && !xa.cats && !xa.fixedrange;
    svg.addEventListener("mousedown", (e) => {
      if (!zoomable || e.button !== 0) return;
      const [px] = at(e);
      drag = { x0: px, x1: px };
    });
    window.addEventListener("mouseup", function up(e) {
      if (!document.body.contains(svg)) { window.removeEventListener("mouseup", up); return; }
      if (!drag) return;
      const d = drag;
      drag = null;
      if (Math.abs(d.x1 - d.x0) < 6) return;
      const a = xa.p2l(Math.min(d.x0, d.x1)), b = xa.p2l(Math.max(d.x0, d.x1));
      self.zoom.x = a < b ? [a, b] : [b, a];
      self.justZoomed = true;
      self.render();
      e.preventDefault();
    });
    svg.addEventListener("click", (e) => {
      if (this.justZoomed) { this.justZoomed = false; return; }
      const [px, py] = at(e);
      const hit = self.pick(px, py);
      if (hit && self.on.plotly_click) self.on.plotly_click({ points: [self.point(hit.it, hit.k)] });
    });
    svg.addEventListener("dblclick", () => {
      if (Object.keys(self.zoom).length) { self.zoom = {}; self.render(); }
    });
  };

  Chart.prototype.band = function (d) {
    let r = this.svg.querySelector("rect.zoom");
    if (!r) {
      r = document.createElementNS(NS, "rect");
      r.setAttribute("class", "zoom");
      r.setAttribute("fill", "rgba(11,99,196,0.15)");
      this.svg.appendChild(r);
    }
    r.setAttribute("x", Math.min(d.x0, d.x1));
    r.setAttribute("width", Math.abs(d.x1 - d.x0));
    r.setAttribute("y", this.box.t);
    r.setAttribute("height", this.box.h);
  };

  X.chart = function (div, traces, layout, on) { return new Chart(div, traces, layout || {}, on); };
  // Charts follow the window's width.
  let resizeTimer = null;
  window.addEventListener("resize", () => {
    clearTimeout(resizeTimer);
    resizeTimer = setTimeout(() => {
      for (const d of document.querySelectorAll(".chart"))
        if (d.offsetParent && d.chart) d.chart.render();
    }, 150);
  });
  X.chartFormat = { fmt, fill, niceTicks };
})(ipuxl);
