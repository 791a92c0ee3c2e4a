"""Round trip of ``ipuxl export poplar``: export an Ir, build the program
with its own Makefile against ipuxl's Poplar (the environment ``ipuxl
poplar-env`` prints), run it on inputs, and return what it wrote beside
what ``Session.run`` gives for the same inputs from the same weights.

``Session.run`` runs ipuxl's core kernels; the exported program runs
ipuxl's Poplar, whose PopLibs calls are implemented separately (and whose
compositions, such as group norm from reductions, differ in rounding), so
the two are independent implementations of the program."""
import os
import runpy
import subprocess
import sys
from typing import Dict, Optional

import numpy as np

import ipuxl as popxl
from ipuxl import profile as prof
from ipuxl.poplar_env import environment

__all__ = ["roundtrip", "random_inputs", "main_ir_of_script", "build", "run_program"]


def random_inputs(session, seed: int = 0, int_high: int = 10) -> dict:
    """Arrays for every host-to-device stream of a Session, full shape
    ``(num_host_transfers?, replicas?, *shape)``: normal floats, integers
    in ``[0, int_high)``."""
    rng = np.random.default_rng(seed)
    out = {}
    for s in session.expected_inputs():
        shape = session._full_shape(s.shape)
        dt = s.dtype.as_numpy()
        if np.issubdtype(dt, np.floating):
            out[s] = rng.normal(size=shape).astype(dt)
        elif dt == np.bool_:
            out[s] = rng.random(size=shape) < 0.5
        else:
            out[s] = rng.integers(0, int_high, size=shape).astype(dt)
    return out


def main_ir_of_script(path: str, args=()):
    """Runs a PopXL script as ``ipuxl export`` does and returns the Ir of
    its main Session (the one that ran most)."""
    old = sys.argv
    sys.argv = [path, *args]
    try:
        with prof.capture(prof.IpuModel(allow_out_of_memory=True)) as captured:
            try:
                runpy.run_path(path, run_name="__main__")
            except SystemExit as e:
                assert not e.code, f"{path} exited with {e.code}"
            runs = [c.finish().runs for c in captured]
    finally:
        sys.argv = old
    assert captured, f"{path} created no Session"
    return captured[runs.index(max(runs))].ir


def _env(tmp) -> Dict[str, str]:
    env = environment()
    env["XDG_CACHE_HOME"] = str(tmp)  # codelets compiled for the host: a cache of its own
    return env


def build(out_dir: str, env) -> None:
    # The timeout allows for a loaded machine; unloaded, the largest program
    # here (the transformer step) builds in about 3 s of CPU.
    r = subprocess.run(["make", "-s", "-C", out_dir], env=env, capture_output=True, text=True,
                       timeout=1200)
    assert r.returncode == 0, f"make failed:\n{r.stdout}\n{r.stderr[-6000:]}"


def run_program(out_dir: str, env, inputs: dict, runs: int = 1):
    inp = os.path.join(out_dir, "in.npz")
    np.savez(inp, **{s.tensor_id: np.ascontiguousarray(a) for s, a in inputs.items()})
    outp, wp = os.path.join(out_dir, "out.npz"), os.path.join(out_dir, "final.npz")
    r = subprocess.run([os.path.join(out_dir, "program"), "--inputs", inp, "--outputs", outp,
                        "--save-weights", wp, "--runs", str(runs)],
                       env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, f"program failed ({r.returncode}):\n{r.stdout}\n{r.stderr[-6000:]}"
    with np.load(outp) as o, np.load(wp) as w:
        return {k: o[k] for k in o.files}, {k: w[k] for k in w.files}


def roundtrip(ir, tmp_path, inputs: Optional[dict] = None, runs: int = 1, seed: int = 0,
              int_high: int = 10):
    """Exports ``ir`` from a fresh ``ipu_model`` Session, builds and runs it
    ``runs`` times on ``inputs`` (default :func:`random_inputs`), and runs
    the Session as many times. Returns ``(got_outputs, got_weights,
    want_outputs, want_weights, source)``, outputs by stream name,
    weights by variable id (remote variables as ``remote/<id>``)."""
    out_dir = str(tmp_path / "exported")
    session = popxl.Session(ir, "ipu_model")
    summary = session.export_poplar(out_dir)
    if inputs is None:
        inputs = random_inputs(session, seed, int_high)
    env = _env(tmp_path / "cache")
    build(out_dir, env)
    got, got_w = run_program(out_dir, env, inputs, runs)
    want = {}
    with session:
        for _ in range(runs):
            outs = session.run(inputs)
        want = {s.tensor_id: a for s, a in outs.items()}
        variables = list(ir.main_graph.variables)
        data = session.get_tensors_data(variables) if variables else {}
    want_w = {(f"remote/{v.id}" if v._remote is not None else v.id): a for v, a in data.items()}
    with open(os.path.join(out_dir, "program.cpp")) as f:
        source = f.read()
    return got, got_w, want, want_w, source, summary
