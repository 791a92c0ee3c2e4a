"""What the viewer's Summary shows beside the totals, derived from a
:class:`~ipuxl.profile.Profile`: the fullest tiles, a histogram of memory
across tiles, the largest vertices and exchanges, the largest always-live
variables, suggested actions with estimated savings, and the operations
summed by op type and by name scope (layer).

Every figure here is computed from the profile's own columns (the schema
in docs/profile.md), so a profile written by another producer gets the
same summary."""
from collections import defaultdict
from typing import Dict, List

import numpy as np

__all__ = ["insights", "op_code_bytes", "scope_of"]


def op_code_bytes(p, i: int) -> int:
    """Code and state an op adds on its own: vertex instance state, its
    exchange code and its control code (vertex code is shared by every op
    of one vertex type and counted per type)."""
    o = p.ops
    return int(o["state_bytes"][i]) + int(o["exchange_code_bytes"][i]) + \
        int(o["control_code_bytes"][i])


def scope_of(name: str, graph: str) -> str:
    """The name scope (layer) of an op: its name up to the last ``/``,
    within its graph when that is a Function."""
    scope = name.rsplit("/", 1)[0] if "/" in name else ""
    if graph not in ("", "main"):
        return f"{graph}/{scope}" if scope else graph
    return scope or "(main, no scope)"


def _top_tiles(p, n: int = 10) -> List[Dict]:
    tot = p.total_per_tile
    tpi = int(p.target["tiles_per_ipu"])
    order = np.argsort(-tot, kind="stable")[:n]
    rows = []
    for t in order:
        ipu, local = divmod(int(t), tpi)
        cats = p.tile_categories(int(t))
        top = sorted(cats.items(), key=lambda kv: -kv[1])[:3]
        rows.append({"tile": int(t), "ipu": ipu, "local": local, "bytes": int(tot[t]),
                     "top_categories": [[c, b] for c, b in top]})
    return rows


def _histogram(p, bins: int = 40) -> Dict:
    tot = p.total_per_tile
    if not tot.size:
        return {"edges": [], "counts": []}
    # Up to the tile's memory when the fullest tile is near it, else up to
    # the fullest tile (so a small program's tiles are not one bar).
    top = max(float(tot.max()), 1.0)
    lim = float(p.memory_per_tile)
    if lim and top >= 0.2 * lim:
        top = max(top, lim)
    counts, edges = np.histogram(tot, bins=bins, range=(0.0, top))
    return {"edges": [int(e) for e in edges], "counts": [int(c) for c in counts],
            "memory_per_tile": int(lim)}


def _largest_vertices(p, n: int = 10) -> List[Dict]:
    """Vertex types by code over all their tiles, and the op with the most
    vertex instance state of each."""
    o = p.ops
    state: Dict[str, tuple] = {}
    for i, v in enumerate(o["vertex"]):
        if v and (v not in state or int(o["state_bytes"][i]) > state[v][1]):
            state[v] = (i, int(o["state_bytes"][i]))
    rows = []
    for v, info in p.vertex_types.items():
        i, sb = state.get(v, (-1, 0))
        rows.append({"vertex": v, "code_bytes": int(info["code_bytes"]),
                     "tiles": int(info["tiles"]),
                     "total_code": int(info["code_bytes"]) * int(info["tiles"]),
                     "largest_state_op": _label(p, i) if i >= 0 else "", "state_bytes": sb})
    rows.sort(key=lambda r: (-(r["total_code"] + r["state_bytes"]), r["vertex"]))
    return rows[:n]


def _label(p, i: int) -> str:
    g, name = p.ops["graph"][i], p.ops["name"][i]
    return name if g in ("", "main") else f"{g}/{name}"


def _largest_exchanges(p, n: int = 10) -> List[Dict]:
    o = p.ops
    rows = []
    for i in range(len(o["name"])):
        code, cyc = int(o["exchange_code_bytes"][i]), int(o["exchange_cycles"][i])
        if code or cyc:
            rows.append({"op": _label(p, i), "type": o["type"][i], "exchange_code_bytes": code,
                         "exchange_cycles": cyc, "executions": float(o["executions"][i]),
                         "bytes": int(o["bytes"][i]) if "bytes" in o else 0})
    rows.sort(key=lambda r: (-r["exchange_code_bytes"], -r["exchange_cycles"], r["op"]))
    return rows[:n]


def _always_live_variables(p, n: int = 15) -> List[Dict]:
    t = p.tensors
    rows = [{"name": t["name"][i], "graph": t["graph"][i], "bytes": int(t["bytes"][i]),
             "tiles": int(t["tiles"][i]), "bytes_per_tile": int(t["bytes_per_tile"][i])}
            for i in range(len(t["name"])) if int(t["always_live"][i])]
    rows.sort(key=lambda r: (-r["bytes"], r["name"]))
    return rows[:n]


def _repeated_code(p):
    """Ops of one graph with the same type, vertex, tiles and code (an
    inlined layer built again and again): ``(ops repeated, bytes of the
    repeats' own code)``."""
    o = p.ops
    groups = defaultdict(list)
    for i in range(len(o["name"])):
        if o["kind"][i] != "kernel" or not op_code_bytes(p, i):
            continue
        key = (o["graph"][i], o["type"][i], o["vertex"][i], int(o["tiles"][i]),
               int(o["state_bytes"][i]), int(o["exchange_code_bytes"][i]))
        groups[key].append(i)
    ops = saved = 0
    for members in groups.values():
        if len(members) > 1:
            ops += len(members) - 1
            saved += sum(op_code_bytes(p, i) for i in members[1:])
    return ops, saved


def _suggestions(p) -> List[Dict]:
    """Actions a user could take, each with what it would save (estimates
    of the same model; ``bytes`` of memory or ``cycles`` per run)."""
    out = []
    t = p.totals
    lim = p.memory_per_tile
    tot = p.total_per_tile
    if not p.fits:
        w = p.worst_tile()
        over = int(tot[w]) - lim
        tens = [x for x in p.tensors_on_tile(w, n=10) if x[3]]
        what = f"; the largest always-live tensor on it is '{tens[0][0]}' ({tens[0][1]:,} B " \
               "there): a remote variable in Streaming Memory frees it" if tens else ""
        out.append({"action": f"Fit tile {w}: it is {over:,} B over its {lim:,} B{what}",
                    "saving_bytes": int(tens[0][1]) if tens else over, "kind": "memory"})
    rep_ops, rep_bytes = _repeated_code(p)
    if rep_bytes and rep_bytes >= 0.02 * max(t["code"], 1):
        out.append({"action": f"Outline repeated layers into one Function (ir.create_graph + "
                              f"ops.call): {rep_ops} op(s) repeat an earlier op's code",
                    "saving_bytes": rep_bytes, "kind": "code",
                    "note": "less the control code and copies each call site adds"})
    # A call site's copies are steps whose ``op`` is the call op.
    steps = p.steps
    site_copies = defaultdict(int)
    for kind, op, cyc in zip(steps["kind"], steps["op"], steps["cycles"]):
        if kind == "Copy" and int(op) >= 0:
            site_copies[int(op)] += int(cyc)
    callees = p.ops.get("callees") or []
    op_index = p.ops.get("index", range(len(p.ops["name"])))
    for g in p.functions():
        if g["call_sites"] != 1 or g["if_sites"] or g["code_instances"] != 1:
            continue
        cyc = sum(site_copies[int(op_index[r])] for r, c in enumerate(callees)
                  if c and g["name"] in c)
        if cyc:
            out.append({"action": f"Inline Function '{g['name']}': it has one call site, so "
                                  "outlining saves no code but costs its copies",
                        "saving_cycles": cyc, "kind": "cycles"})
    o = p.ops
    if len(o["name"]):
        i = int(np.argmax(np.asarray(o["temp_bytes"], dtype=np.float64)))
        temp = int(o["temp_bytes"][i])
        nal = t["notAlwaysLive"]
        if temp and o["cost_class"][i] == "matmul" and temp >= 0.25 * max(nal, 1):
            out.append({"action": f"Lower availableMemoryProportion of '{_label(p, i)}': its "
                                  "matmul plan's temporaries set the not-always-live peak",
                        "saving_bytes": temp // 2, "kind": "memory",
                        "note": "half its temporaries at 0.3 instead of 0.6, for more cycles"})
    if t["total"] and t["variables"] >= 0.5 * t["total"]:
        out.append({"action": "Variables are over half the memory: keep optimiser state or "
                              "weights in Streaming Memory (remote variables, RTS)",
                    "saving_bytes": t["variables"] // 2, "kind": "memory",
                    "note": "up to the optimiser state, about half the variables with Adam"})
    if t["code"] and t["internalExchangeCode"] >= 0.3 * t["code"]:
        out.append({"action": "Exchange code is a large share of code: fewer, larger ops "
                              "(or outlining) reduce it",
                    "saving_bytes": 0, "kind": "code"})
    return out


def _by(p, key_of) -> List[Dict]:
    o = p.ops
    acc: Dict[str, Dict] = {}
    for i in range(len(o["name"])):
        k = key_of(i)
        r = acc.setdefault(k, {"key": k, "ops": 0, "code_bytes": 0, "cycles": 0.0,
                               "flops": 0.0, "temp_bytes": 0})
        ex = float(o["executions"][i])
        r["ops"] += 1
        r["code_bytes"] += op_code_bytes(p, i)
        r["cycles"] += float(o["cycles"][i]) * ex
        r["flops"] += float(o["flops"][i]) * ex
        r["temp_bytes"] = max(r["temp_bytes"], int(o["temp_bytes"][i]))
    rows = list(acc.values())
    for r in rows:
        r["cycles"], r["flops"] = int(round(r["cycles"])), int(round(r["flops"]))
    rows.sort(key=lambda r: (-r["cycles"], r["key"]))
    return rows


def insights(p) -> Dict:
    """The Summary's tables for profile ``p`` (plain JSON values)."""
    o = p.ops
    return {
        "top_tiles": _top_tiles(p),
        "histogram": _histogram(p),
        "largest_vertices": _largest_vertices(p),
        "largest_exchanges": _largest_exchanges(p),
        "always_live_variables": _always_live_variables(p),
        "suggestions": _suggestions(p),
        "by_type": _by(p, lambda i: o["type"][i]),
        "by_scope": _by(p, lambda i: scope_of(o["name"][i], o["graph"][i])),
    }
