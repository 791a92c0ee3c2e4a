"""The IPU model of an exported Poplar program beside the Session's.

:func:`exported_profiles` exports a Session's program
(:meth:`ipuxl.Session.export_poplar`), builds it with its Makefile against
ipuxl's Poplar, runs it once with Poplar's ``autoReport`` engine options
(ipuxl's Poplar then writes ``profile.json``, an ipuxl profile of the
program it ran) and returns that profile with ``Session.profile()``.
:func:`compare_rows` lines the two up: memory per PopVision category (the
sum over tiles, the largest tile and how many tiles hold exactly the same
bytes), each Function's code, and the cycles of one run of the main
program and of WeightsFromHost. :func:`format_rows` prints them
(``scripts/compare_exported_profile.py``).

The Session's figures come from ipuxl's analytical model (``cpp/model``),
the exported program's from the model of ipuxl's Poplar
(``poplar/src/poplar/profile.cpp``, ``codesize.cpp``, ``liveness.cpp``),
which accounts the vertices, edges and programs the Poplar program has.
Both read the same tile mappings, so always-live variables agree tile for
tile; the other categories are two estimates of one program.
"""
import json
import os
import runpy
import subprocess
import sys
from typing import Dict, List, Optional, Tuple

import numpy as np

__all__ = ["exported_profiles", "compare_rows", "format_rows", "ir_of_script",
           "PROGRAM_INDICES"]

#: The Engine program indices of an exported program (program.hpp).
PROGRAM_INDICES = {"weights_from_host": 0, "main": 1, "weights_to_host": 2}

CATEGORIES = ("variables", "constants", "notAlwaysLive", "vertexCode", "vertexInstanceState",
              "copyDescriptor", "controlCode", "internalExchangeCode", "hostExchangeCode",
              "globalExchangeCode", "stack")

#: Code the exported program's profile also gives per Engine program.
CODE_BY_PROGRAM = ("controlCode", "internalExchangeCode", "hostExchangeCode", "copyDescriptor")


def ir_of_script(path: str, args=()):
    """Runs a PopXL script as ``ipuxl export`` does and returns the Ir of the
    Session that ran most."""
    from .. import profile as prof

    old = sys.argv
    sys.argv = [path, *args]
    try:
        with prof.capture(prof.IpuModel(allow_out_of_memory=True)) as captured:
            try:
                runpy.run_path(path, run_name="__main__")
            except SystemExit as e:
                if e.code:
                    raise RuntimeError(f"{path} exited with {e.code}") from e
            runs = [c.finish().runs for c in captured]
    finally:
        sys.argv = old
    if not captured:
        raise RuntimeError(f"{path} created no Session: nothing to export")
    return captured[runs.index(max(runs))].ir


def _zeros_inputs(session) -> Dict[str, np.ndarray]:
    # The model's figures do not depend on the data fed.
    return {s.tensor_id: np.zeros(session._full_shape(s.shape), s.dtype.as_numpy())
            for s in session.expected_inputs()}


def exported_profiles(ir, out_dir: str, env: Optional[Dict[str, str]] = None,
                      timeout: float = 1800) -> Tuple[object, object, dict]:
    """``(session profile, exported program's profile, export summary)``
    of ``ir`` on a fresh ``ipu_model`` Session. ``out_dir`` receives the
    program, its build and ``profile.json``; ``env``: the environment of
    ``make`` and the program (default: ``ipuxl poplar-env``'s)."""
    import ipuxl

    from .. import profile as prof
    from ..poplar_env import environment

    session = ipuxl.Session(ir, "ipu_model")
    want = session.profile()
    summary = session.export_poplar(out_dir)
    env = dict(environment() if env is None else env)
    r = subprocess.run(["make", "-s", "-C", out_dir], env=env, capture_output=True, text=True,
                       timeout=timeout)
    if r.returncode:
        raise RuntimeError(f"make in {out_dir} failed:\n{r.stdout}\n{r.stderr[-4000:]}")
    inp, outp = os.path.join(out_dir, "in.npz"), os.path.join(out_dir, "out.npz")
    np.savez(inp, **_zeros_inputs(session))
    report = os.path.join(out_dir, "report")
    os.makedirs(report, exist_ok=True)
    env["POPLAR_ENGINE_OPTIONS"] = json.dumps({"autoReport.all": "true",
                                               "autoReport.directory": report})
    r = subprocess.run([os.path.join(out_dir, "program"), "--inputs", inp, "--outputs", outp,
                        "--runs", "1"], env=env, capture_output=True, text=True, timeout=timeout)
    if r.returncode:
        raise RuntimeError(f"{out_dir}/program failed ({r.returncode}):\n{r.stderr[-4000:]}")
    got = prof.load(os.path.join(report, "profile.json"))
    got.name = "exported"
    want.name = "session"
    return want, got, summary


def _program_cycles(p, index: int) -> Optional[float]:
    for e in p.raw.get("programs", []):
        if int(e["index"]) == index:
            return float(e["cycles"]) / max(1, int(e["runs"]))
    return None


def compare_rows(want, got, summary: dict) -> List[Dict]:
    """Rows ``{"what", "session", "exported", "ratio", "tiles_equal"}``:
    per memory category (``tiles_equal``: tiles whose bytes are the same,
    out of all), the largest tile of each, each Function's code (the
    Session's graphs by name; the exported Functions in
    ``graph.addFunction`` order, ``summary["function_graphs"]``), and
    cycles."""
    rows = []

    def row(what, a, b, tiles_equal=None):
        ratio = (b / a) if a else (1.0 if not b else float("inf"))
        rows.append({"what": what, "session": a, "exported": b, "ratio": ratio,
                     "tiles_equal": tiles_equal})

    n = want.num_tiles
    for c in CATEGORIES:
        a, b = want.per_tile[c], got.per_tile[c]
        eq = int(np.sum(a == b)) if a.shape == b.shape else 0
        row(c, float(a.sum()), float(b.sum()), f"{eq}/{n}")
    # The Session's model has no implicit weight streams (its WeightsFromHost
    # and WeightsToHost programs hold only ops placed there), the export
    # streams every variable in and out: its main program's code alone.
    main_code = next((e.get("code", {}) for e in got.raw.get("programs", [])
                      if int(e["index"]) == PROGRAM_INDICES["main"]), {})
    for c in CODE_BY_PROGRAM:
        if c in main_code:
            row(f"{c}, main program", float(want.per_tile[c].sum()), float(main_code[c]))
    row("total memory", float(want.total_per_tile.sum()), float(got.total_per_tile.sum()))
    row("max bytes on a tile", float(want.total_per_tile.max()), float(got.total_per_tile.max()))
    exported_fn = {int(g["index"]): g for g in got.graphs if g.get("function")}
    by_name = {name: exported_fn.get(k) for k, name in enumerate(summary.get("function_graphs", []))}
    main_w = next((g for g in want.graphs if g["main"]), None)
    main_g = next((g for g in got.graphs if g["main"]), None)
    if main_w is not None and main_g is not None:
        row("code of main (programs)", float(main_w["code_bytes"]), float(main_g["code_bytes"]))
    for g in want.functions():
        e = by_name.get(g["name"])
        row(f"code of Function {g['name']}", float(g["code_bytes"]),
            float(e["code_bytes"]) if e else 0.0)
    for what, key, idx in (("cycles: main program, one run", None, PROGRAM_INDICES["main"]),
                           ("cycles: WeightsFromHost", "weights_from_host_cycles",
                            PROGRAM_INDICES["weights_from_host"])):
        a = float(want.cycles if key is None else want.raw.get(key, 0))
        b = _program_cycles(got, idx)
        row(what, a, float(b) if b is not None else 0.0)
    return rows


def format_rows(rows: List[Dict]) -> str:
    w = max(len(r["what"]) for r in rows) + 2
    out = [f"{'':<{w}}{'session':>16}{'exported':>16}{'ratio':>9}  tiles equal"]
    for r in rows:
        ratio = f"{r['ratio']:.3f}" if np.isfinite(r["ratio"]) else "inf"
        out.append(f"{r['what']:<{w}}{int(round(r['session'])):>16,}{int(round(r['exported'])):>16,}"
                   f"{ratio:>9}  {r['tiles_equal'] or ''}")
    return "\n".join(out)
