"""``Profile``: the IPU model's report of one program, and how it is made.

A profile holds what PopVision's Graph and Memory reports show for a
compiled program, from ipuxl's analytical model (``cpp/model``):

* ``target``: the modelled IPU (version, tiles, memory per tile, clock);
* ``per_tile[category]``: bytes per tile in each PopVision category
  (vertexCode, vertexInstanceState, copyDescriptor, controlCode,
  internal/host/globalExchangeCode, stack, variables, constants,
  notAlwaysLive), NumPy arrays over all tiles of all IPUs;
* ``totals``: the same summed over tiles, plus ``alwaysLive``, ``code``
  and ``total``;
* ``graphs``: per graph (Function or main): code instances, call and If
  sites, code bytes of one instance, cycles, executions;
* ``ops``: per op (columns): cost class, vertex type, tiles, cycles per
  execution, executions, flops, temporaries, vertex state, exchange and
  control code, the matmul plan;
* ``steps``: the main program's steps with their cycles and
  not-always-live bytes (liveness over program steps);
* ``peak_live``: what is live at the main program's step of most
  not-always-live bytes, the peaks of the Functions it calls expanded:
  one dict per storage (``tensor`` name, ``shape``, ``graph``, ``bytes``)
  or per op's temporaries (``tensor`` None, ``op``), largest first;
* ``function_steps``: the same for each called Function (by graph name),
  and the ops' ``callees``, ``trip_count`` and ``outputs`` columns, which
  the viewer needs to expand calls (:meth:`Profile.detail`, computed on
  first use);
* ``cycles`` / ``seconds``: one run of the main program.
"""
from typing import Dict, List, Optional

import numpy as np

from .model import IpuModel, OutOfMemoryError

__all__ = ["Profile", "profile_program", "load"]

CODE = ("vertexCode", "controlCode", "internalExchangeCode", "hostExchangeCode",
        "globalExchangeCode")
ALWAYS_LIVE = CODE + ("vertexInstanceState", "copyDescriptor", "stack", "variables", "constants")


def profile_program(prog, desc, model: IpuModel, cpu: bool = False,
                    name: str = "") -> "Profile":
    """Runs the core's IPU model over ``desc`` (the core ProgramDesc of the
    faithful Program ``prog``)."""
    from .._core_loader import core

    opts = model.core_options(cpu=cpu)
    # IO tiles: the model's own setting, else the program's numIOTiles
    # (``ir._pb_ir.getSessionOptions().numIOTiles``), checked as PopART does.
    io = getattr(prog.ir, "num_io_tiles", 0) if prog.ir is not None else 0
    if io and not cpu and not model.num_io_tiles:
        from ..session_options import check_num_io_tiles

        check_num_io_tiles(io, model.tiles_per_ipu or _TILES_PER_IPU.get(model.version, 0))
        opts["num_io_tiles"] = io
    return Profile(core.ipu_model(desc, 0, opts), name=name,
                   detail=lambda: program_detail(prog, desc, opts))


def program_detail(prog, desc, opts: dict) -> dict:
    """What the viewer adds to the core's report: per op (to_desc's
    numbering) the graphs it calls, its trip count and its outputs' names,
    and the steps of every called graph, modelled as its own program (the
    core's ``main_graph`` argument)."""
    from .._core_loader import core

    callees, trips, outputs = [], [], []
    for g in prog.graphs:
        for e in prog.entries[g]:
            callees.append([cg.name or "main" for cg in e.graphs])
            trips.append(int(e.trip_count))
            outputs.append([t.id for t in e.outputs])
    steps, warnings = {}, []
    called = {cg for g in prog.graphs for e in prog.entries[g] for cg in e.graphs}
    for i, g in enumerate(prog.graphs):
        if i == 0 or g not in called:
            continue
        try:
            steps[g.name] = core.ipu_model(desc, i, opts)["steps"]
        except Exception as e:  # noqa: BLE001 - a Function the model cannot take alone
            warnings.append(f"no step detail for Function {g.name!r}: {e}")
    return {"op_callees": callees, "op_trip_count": trips, "op_outputs": outputs,
            "function_steps": steps, "detail_warnings": warnings}


#: Tiles per IPU of each modelled version (for checking numIOTiles first).
_TILES_PER_IPU = {"ipu1": 1216, "ipu2": 1472, "ipu21": 1472}


class Profile:
    """One program's profile (see the module docstring). ``Profile(d)``
    wraps the dict of ``core.ipu_model`` or of :meth:`to_dict`."""

    def __init__(self, raw: dict, name: str = "", detail=None):
        self.raw = raw
        self._detail = detail
        self.name = name or raw.get("name", "")
        self.target: Dict = dict(raw["target"])
        self.categories: List[str] = list(raw["categories"])
        self.per_tile: Dict[str, np.ndarray] = {
            c: np.asarray(raw["per_tile"][c], dtype=np.float64) for c in self.categories}
        # Another producer may leave out categories it has nothing in.
        n = int(self.target["tiles_per_ipu"]) * int(self.target["num_ipus"])
        for c in ALWAYS_LIVE + ("notAlwaysLive",):
            self.per_tile.setdefault(c, np.zeros(n))
        self.loaded_code = np.asarray(raw.get("loaded_code", []), dtype=np.float64)
        #: Bytes per tile between allocations (alignment, memory elements),
        #: PopVision's "include gaps"; None when the producer has no layout
        #: (ipuxl's model places no addresses, so it writes none).
        self.gaps_per_tile: Optional[np.ndarray] = None
        if raw.get("gaps_per_tile") is not None:
            self.gaps_per_tile = np.asarray(raw["gaps_per_tile"], dtype=np.float64)
            if self.gaps_per_tile.shape != (n,):
                raise ValueError(f"profile {self.name!r}: gaps_per_tile has "
                                 f"{self.gaps_per_tile.size} entries, expected one per tile ({n})")
        self.ops: Dict[str, list] = {k: list(v) if not isinstance(v, np.ndarray) else v
                                     for k, v in raw["ops"].items()}
        self.graphs: List[Dict] = [dict(g) for g in raw["graphs"]]
        self.steps: Dict[str, list] = dict(raw["steps"])
        self.tensors: Dict[str, list] = dict(raw["tensors"])
        self.peak_live: List[Dict] = sorted((dict(e) for e in raw.get("peak_live", [])),
                                            key=lambda e: -int(e["bytes"]))
        self.vertex_types: Dict[str, Dict] = dict(raw["vertex_types"])
        self.cycles = int(raw["total_cycles"])
        #: Remote buffers: Streaming Memory (off chip) and their landing pads.
        self.remote_buffers: List[Dict] = [dict(b) for b in raw.get("remote_buffers", [])]
        self.warnings: List[str] = list(raw.get("warnings", []))
        self.runs = int(raw.get("runs", 0))

    def detail(self) -> dict:
        """The viewer's extra columns (``ops.callees``, ``ops.trip_count``,
        ``ops.outputs``) and ``function_steps``; empty ones for a profile
        loaded from a file that has none."""
        if self._detail is not None:
            d, self._detail = self._detail(), None
            # Rows are ops in to_desc's numbering (``index``).
            idx = [int(i) for i in self.ops.get("index", range(len(self.ops["name"])))]
            for key in ("callees", "trip_count", "outputs"):
                col = d["op_" + key]
                self.ops[key] = self.raw["ops"][key] = [col[i] if 0 <= i < len(col) else None
                                                        for i in idx]
            self.raw["function_steps"] = d["function_steps"]
            self.warnings += d["detail_warnings"]
            self.raw["warnings"] = list(self.warnings)
        return {"function_steps": self.raw.get("function_steps", {})}

    # ---- derived figures
    @property
    def num_tiles(self) -> int:
        return int(self.target["tiles_per_ipu"]) * int(self.target["num_ipus"])

    @property
    def memory_per_tile(self) -> int:
        """Bytes per tile (0: no limit, the "cpu" device)."""
        return int(self.target["memory_per_tile"])

    @property
    def always_live_per_tile(self) -> np.ndarray:
        return sum(self.per_tile[c] for c in ALWAYS_LIVE)

    @property
    def code_per_tile(self) -> np.ndarray:
        return sum(self.per_tile[c] for c in CODE)

    @property
    def total_per_tile(self) -> np.ndarray:
        """Always-live bytes plus the not-always-live peak, per tile."""
        return self.always_live_per_tile + self.per_tile["notAlwaysLive"]

    @property
    def totals(self) -> Dict[str, int]:
        t = {c: int(round(self.per_tile[c].sum())) for c in self.per_tile}
        t["code"] = sum(t[c] for c in CODE)
        t["alwaysLive"] = sum(t[c] for c in ALWAYS_LIVE)
        t["total"] = t["alwaysLive"] + t["notAlwaysLive"]
        return t

    @property
    def seconds(self) -> float:
        """Time of one run of the main program at the target's clock."""
        return self.cycles / float(self.target["clock_hz"])

    @property
    def overflow_tiles(self) -> np.ndarray:
        """Global indices of tiles whose memory exceeds the tile's."""
        if self.memory_per_tile <= 0:
            return np.zeros(0, dtype=np.int64)
        return np.nonzero(self.total_per_tile > self.memory_per_tile)[0]

    @property
    def fits(self) -> bool:
        return self.overflow_tiles.size == 0

    def worst_tile(self) -> int:
        return int(np.argmax(self.total_per_tile)) if self.num_tiles else 0

    def tile_categories(self, tile: int) -> Dict[str, int]:
        return {c: int(round(self.per_tile[c][tile])) for c in self.categories
                if self.per_tile[c][tile]}

    def tensors_on_tile(self, tile: int, n: int = 5) -> List[tuple]:
        """The ``n`` largest tensors with bytes on global tile ``tile``:
        ``(name, bytes on the tile, total bytes, always live)``."""
        tpi = int(self.target["tiles_per_ipu"])
        ipu, local = divmod(tile, tpi)
        nio = int(self.target["num_io_tiles"])
        t = self.tensors
        hits = []
        for i, name in enumerate(t["name"]):
            if int(t["ipu"][i]) != ipu:
                continue
            first, count = int(t["first_tile"][i]), int(t["tiles"][i])
            # Tensors wrap within their tile set (IO tiles first, then compute).
            if first >= nio or nio == 0:
                base, size = (nio, tpi - nio)
            else:
                base, size = (0, nio)
            if not base <= local < base + size:
                continue
            off = (local - first) % size
            if off < count:
                per = int(t["bytes_per_tile"][i])
                total = int(t["bytes"][i])
                on = per if off + 1 < count else total - per * (count - 1)
                hits.append((name, on, total, bool(t["always_live"][i])))
        hits.sort(key=lambda h: (-h[1], h[0]))
        return hits[:n]

    def functions(self) -> List[Dict]:
        """Graphs compiled as Functions or inlined at If sites, with their code."""
        return [g for g in self.graphs if not g["main"] and g["code_instances"]]

    def op_table(self, sort: str = "total_cycles", n: Optional[int] = None) -> List[Dict]:
        """Ops as rows (``total_cycles`` = cycles x executions)."""
        o = self.ops
        rows = []
        for i in range(len(o["name"])):
            r = {k: (v[i].item() if isinstance(v, np.ndarray) else v[i]) for k, v in o.items()}
            r["total_cycles"] = r["cycles"] * r["executions"]
            # Ops of called graphs are named within their graph.
            main = r["graph"] in ("", "main")  # to_desc names the main graph "main"
            r["label"] = r["name"] if main else f"{r['graph']}/{r['name']}"
            rows.append(r)
        rows.sort(key=lambda r: (-r.get(sort, 0), r["name"]))
        return rows[:n] if n else rows

    # ---- several IPUs
    def per_ipu(self) -> List[Dict]:
        """One row per IPU of the target: ``ipu``, the bytes of each memory
        category summed over its tiles, ``code``, ``alwaysLive``, ``total``,
        ``max_tile`` (the fullest tile's bytes), and ``cycles``: the cycles
        of the ops placed on it (x executions, an ``ipu_copy`` counted on
        both IPUs), i.e. how busy it is in one run of the main program."""
        tpi = int(self.target["tiles_per_ipu"])
        n = int(self.target["num_ipus"])
        busy = [0.0] * n
        o = self.ops
        for i in range(len(o["name"])):
            c = float(o["cycles"][i]) * float(o["executions"][i])
            ipu = int(o["ipu"][i])
            if 0 <= ipu < n:
                busy[ipu] += c
        for c in self.ipu_copies():
            if c["destination"] != c["source"] and 0 <= c["destination"] < n:
                busy[c["destination"]] += c["cycles"] * c["executions"]
        rows = []
        for k in range(n):
            sl = slice(k * tpi, (k + 1) * tpi)
            r = {"ipu": k}
            for cat in self.categories:
                r[cat] = int(round(self.per_tile[cat][sl].sum()))
            r["code"] = sum(r[c] for c in CODE)
            r["alwaysLive"] = sum(r[c] for c in ALWAYS_LIVE)
            r["total"] = r["alwaysLive"] + r["notAlwaysLive"]
            tot = self.total_per_tile[sl]
            r["max_tile"] = int(round(tot.max())) if tot.size else 0
            r["cycles"] = int(round(busy[k]))
            rows.append(r)
        return rows

    def ipu_copies(self) -> List[Dict]:
        """The copies between IPUs (``ops.ipu_copy``): ``name``, ``graph``,
        ``source`` and ``destination`` IPU, ``bytes``, ``cycles`` per
        execution (a global exchange over the IPU-Links) and
        ``executions``."""
        o = self.ops
        out = []
        for i in range(len(o["name"])):
            if o["kind"][i] != "ipu_copy":
                continue
            out.append({"name": o["name"][i], "graph": o["graph"][i],
                        "source": int(o["ipu"][i]),
                        "destination": int(o["destination"][i]) if "destination" in o else -1,
                        "bytes": int(o["bytes"][i]) if "bytes" in o else 0,
                        "cycles": int(o["cycles"][i]), "executions": float(o["executions"][i])})
        return out

    # ---- out of memory
    def oom_error(self, what: str = "The program") -> OutOfMemoryError:
        tile = self.worst_tile()
        tpi = int(self.target["tiles_per_ipu"])
        ipu, local = divmod(tile, tpi)
        cats = self.tile_categories(tile)
        tens = self.tensors_on_tile(tile)
        used = int(self.total_per_tile[tile])
        lim = self.memory_per_tile
        over = self.overflow_tiles
        cat_text = ", ".join(f"{c} {b:,}" for c, b in sorted(cats.items(), key=lambda kv: -kv[1]))
        ten_text = "; ".join(f"'{n}' {b:,} B here of {tb:,} B" + (" (always live)" if al else "")
                             for n, b, tb, al in tens) or "none"
        msg = (f"Out of memory: {what} does not fit on the modelled {self.target['version']} "
               f"({tpi} tiles of {lim:,} B per IPU): {len(over)} tile(s) over; the worst is tile "
               f"{local} of IPU {ipu} with {used:,} B ({used - lim:,} B over). Its categories: "
               f"{cat_text}. Largest tensors on it: {ten_text}. Pass "
               "ipuxl.IpuModel(allow_out_of_memory=True) as the device (or set "
               "IPUXL_IPU_MODEL=allow_out_of_memory=1) to build and run it anyway and inspect "
               "session.profile().")
        return OutOfMemoryError(msg, self, tile, ipu, cats, tens)

    # ---- serialisation
    def to_dict(self) -> dict:
        def plain(v):
            if isinstance(v, np.ndarray):
                return v.tolist()
            if isinstance(v, dict):
                return {k: plain(x) for k, x in v.items()}
            if isinstance(v, (list, tuple)):
                return [plain(x) for x in v]
            if isinstance(v, np.generic):
                return v.item()
            return v
        self.detail()
        d = plain(self.raw)
        d["name"] = self.name
        d["runs"] = self.runs
        d["summary"] = {"totals": self.totals, "cycles": self.cycles, "seconds": self.seconds,
                        "overflow_tiles": int(self.overflow_tiles.size),
                        "max_tile_bytes": int(self.total_per_tile.max()) if self.num_tiles else 0}
        d["format"] = "ipuxl-profile-1"
        return d

    def save(self, path: str) -> None:
        import json

        with open(path, "w") as f:
            json.dump(self.to_dict(), f)

    def html(self, path: str, title: Optional[str] = None) -> str:
        """Writes the viewer's self-contained HTML page of this profile;
        returns the path."""
        from .html import write_html

        return write_html([self], path, title=title)

    # ---- text
    def summary(self) -> str:
        """A short table: memory by category, the worst tile, Functions,
        the ops with the most cycles."""
        t = self.totals
        tgt = self.target
        lines = [f"IPU model: {tgt['version']}, {tgt['num_ipus']} IPU(s) x {tgt['tiles_per_ipu']} "
                 f"tiles" + (f" of {self.memory_per_tile:,} B" if self.memory_per_tile else
                             " (no memory limit)")]
        if self.name:
            lines[0] += f"  [{self.name}]"
        lines.append(f"{'category':<24}{'bytes':>14}{'max/tile':>12}")
        for c in self.categories:
            lines.append(f"{c:<24}{t[c]:>14,}{int(self.per_tile[c].max()) if self.num_tiles else 0:>12,}")
        lines.append(f"{'always live':<24}{t['alwaysLive']:>14,}")
        lines.append(f"{'code (all kinds)':<24}{t['code']:>14,}")
        lines.append(f"{'total':<24}{t['total']:>14,}")
        w = self.worst_tile()
        lines.append(f"worst tile {w}: {int(self.total_per_tile[w]):,} B"
                     + (f" of {self.memory_per_tile:,}" if self.memory_per_tile else "")
                     + (f"  OUT OF MEMORY on {self.overflow_tiles.size} tile(s)"
                        if not self.fits else ""))
        lines.append(f"cycles: {self.cycles:,}  ({self.seconds * 1e6:,.1f} us at "
                     f"{tgt['clock_hz'] / 1e9:.3f} GHz)")
        if int(tgt["num_ipus"]) > 1:
            lines.append(f"{'ipu':<6}{'total B':>14}{'code B':>12}{'always live':>14}"
                         f"{'max/tile':>12}{'busy cycles':>14}")
            for r in self.per_ipu():
                lines.append(f"{r['ipu']:<6}{r['total']:>14,}{r['code']:>12,}"
                             f"{r['alwaysLive']:>14,}{r['max_tile']:>12,}{r['cycles']:>14,}")
        copies = self.ipu_copies()
        if copies:
            lines.append(f"copies between IPUs: {len(copies)} "
                         f"(bytes and cycles x runs, per direction)")
            ways: Dict[tuple, List[float]] = {}
            for c in copies:
                w = ways.setdefault((c["source"], c["destination"]), [0, 0.0, 0.0])
                w[0] += 1
                w[1] += c["bytes"] * c["executions"]
                w[2] += c["cycles"] * c["executions"]
            for (a, b), (n, nb, cy) in sorted(ways.items()):
                lines.append(f"  ipu {a} -> {b}: {n} copies{int(nb):>14,} B{int(cy):>12,} cycles")
        if self.remote_buffers:
            off = sum(b["streaming_bytes"] for b in self.remote_buffers)
            pads = sum(b["pad_bytes"] for b in self.remote_buffers)
            lines.append(f"Streaming Memory (off chip): {off:,} B per replica in "
                         f"{len(self.remote_buffers)} remote buffer(s); landing pads on chip: "
                         f"{pads:,} B (not always live: during each load or store)")
        fns = self.functions()
        if fns:
            lines.append(f"{'graph':<32}{'instances':>10}{'calls':>7}{'code B':>12}{'cycles':>12}")
            for g in fns[:10]:
                lines.append(f"{g['name'][:31]:<32}{g['code_instances']:>10}"
                             f"{g['call_sites'] + g['if_sites']:>7}{g['code_bytes']:>12,}"
                             f"{g['cycles']:>12,}")
        rows = self.op_table(n=8)
        if rows:
            lines.append(f"{'op':<32}{'class':<12}{'cycles x runs':>16}")
            for r in rows:
                lines.append(f"{r['label'][-31:]:<32}{r['cost_class'][:11]:<12}"
                             f"{int(r['total_cycles']):>16,}")
        for wmsg in self.warnings:
            lines.append(f"warning: {wmsg}")
        return "\n".join(lines)

    @property
    def streaming_bytes(self) -> int:
        """Streaming Memory (off chip) of one replica: the bytes of its
        remote buffers."""
        return int(sum(b["streaming_bytes"] for b in self.remote_buffers))

    def fit(self, replicas: int = 1) -> Dict:
        """Whether the program fits, in the figures a sizing question asks
        for: ``ipus_per_replica``, ``replicas``, ``ipus`` (both multiplied),
        ``per_ipu`` (each IPU's ``total`` and ``max_tile`` bytes), the
        ``peak_tile`` bytes and that as a fraction of the tile's memory
        (``peak_tile_fraction``), ``streaming_bytes`` per replica and
        ``fits``."""
        ipus = int(self.target["num_ipus"])
        rows = [{"ipu": r["ipu"], "total": r["total"], "max_tile": r["max_tile"]}
                for r in self.per_ipu()]
        peak = int(round(self.total_per_tile.max())) if self.num_tiles else 0
        lim = self.memory_per_tile
        return {"ipus_per_replica": ipus, "replicas": int(replicas), "ipus": ipus * int(replicas),
                "per_ipu": rows, "peak_tile": peak, "memory_per_tile": lim,
                "peak_tile_fraction": peak / lim if lim else 0.0,
                "streaming_bytes": self.streaming_bytes, "fits": self.fits}

    def fit_report(self, replicas: int = 1) -> str:
        """:meth:`fit` as lines of text."""
        f = self.fit(replicas)
        lim = f["memory_per_tile"]
        lines = [f"fit: {f['ipus_per_replica']} IPU(s) per replica x {f['replicas']} "
                 f"replica(s) = {f['ipus']} IPU(s); "
                 + ("FITS" if f["fits"] else
                    f"DOES NOT FIT ({self.overflow_tiles.size} tile(s) over)")]
        for r in f["per_ipu"]:
            lines.append(f"  ipu {r['ipu']}: {r['total'] / 2**20:,.1f} MiB, fullest tile "
                         f"{r['max_tile']:,} B" + (f" ({100 * r['max_tile'] / lim:.1f}% of "
                                                   f"{lim // 1024} KiB)" if lim else ""))
        lines.append(f"  peak tile {f['peak_tile']:,} B"
                     + (f" = {100 * f['peak_tile_fraction']:.1f}% of {lim // 1024} KiB" if lim
                        else "")
                     + f"; Streaming Memory per replica {f['streaming_bytes'] / 2**30:,.2f} GiB")
        return "\n".join(lines)

    def __repr__(self):
        t = self.totals
        return (f"Profile({self.name + ': ' if self.name else ''}{self.target['version']}, "
                f"total {t['total']:,} B, code {t['code']:,} B, cycles {self.cycles:,}, "
                f"{'fits' if self.fits else 'OUT OF MEMORY'})")


def load(path: str) -> Profile:
    """A profile written by :meth:`Profile.save` (``profile.json``)."""
    import json

    with open(path) as f:
        d = json.load(f)
    if d.get("format") != "ipuxl-profile-1":
        raise ValueError(f"{path}: not an ipuxl profile (no 'format': 'ipuxl-profile-1')")
    return Profile(d, name=d.get("name", ""))
