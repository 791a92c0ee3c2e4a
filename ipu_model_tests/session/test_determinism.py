"""Determinism: the same program, run in fresh processes with different hash
seeds, builds the same graphs and names and gives bit-identical numbers
(no choice inside ipuxl may follow timing or hash order)."""
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

PROGRAM = textwrap.dedent("""
    import hashlib, json, sys
    import numpy as np
    import ipuxl as popxl, ipuxl.ops as ops

    batch = int(sys.argv[1])
    rng = np.random.default_rng(0)
    ir = popxl.Ir()
    with ir.main_graph:
        xs = popxl.h2d_stream((batch, 96), popxl.float32, name="x")
        ws = [popxl.variable(rng.standard_normal(s).astype(np.float32) * 0.1, name=f"w{i}")
              for i, s in enumerate([(96, 128), (128, 64)])]

        def fwd(x, w0, w1):
            return ops.sum(ops.gelu(x @ w0) @ w1)

        g = ir.create_graph(fwd, popxl.TensorSpec((batch, 96), popxl.float32),
                            *[w.spec for w in ws])
        info = ops.call_with_info(g, ops.host_load(xs), *ws)
        gi = popxl.transforms.autodiff(g, grads_required=g.inputs[1:])
        grads = ops.call(gi.graph, popxl.constant(np.float32(1.0)),
                         inputs_dict=gi.inputs_dict(info))
        for w, d in zip(ws, grads):
            ops.scaled_add_(w, d, b=-0.01)
    with popxl.Session(ir, "ipu_model") as s:
        data = np.random.default_rng(1).standard_normal((batch, 96)).astype(np.float32)
        for _ in range(5):
            s.run({xs: data})
        out = s.get_tensors_data(ws)
        text = s.engine.describe() + s.engine.describe(host=True)
    print(json.dumps({
        "weights": hashlib.sha256(b"".join(out[w].tobytes() for w in ws)).hexdigest(),
        "program": hashlib.sha256(text.encode()).hexdigest(),
        "names": sorted(ir._graphs)}))
""")


def _run(batch, hash_seed):
    env = dict(os.environ, PYTHONHASHSEED=str(hash_seed))
    if "IPUXL_CORE_DIR" in env:
        env["PYTHONPATH"] = str(ROOT / "python") + os.pathsep + env.get("PYTHONPATH", "")
    out = subprocess.run([sys.executable, "-c", PROGRAM, str(batch)], env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


@pytest.mark.slow  # runs the program in fresh processes
@pytest.mark.parametrize("batch", [8, 128])
def test_same_program_same_names_and_numbers(batch):
    a, b = _run(batch, 0), _run(batch, 4242)
    assert a == b
