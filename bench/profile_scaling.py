"""How long the IPU model takes, and that it costs Session.run nothing.

1. Profiles programs of 1,000 / 10,000 ops (a chain of elementwise ops and
   matmuls, part of it in an outlined graph called several times) with
   ``ipuxl.profile.profile_ir``: lowering, the core description and the
   model. Target: under 1 s for 10,000 ops.
2. Times ``Session.run`` of one program on a ``"cpu"`` session (the model is
   never computed) and on an ``"ipu_model"`` session (computed once, at
   creation): runs are the same code path, so the medians should agree
   within noise.

    python bench/profile_scaling.py [--ops 10000]
"""
import argparse
import statistics
import time

import numpy as np

import ipuxl as popxl
import ipuxl.ops as ops
from ipuxl.lowering import lower
from ipuxl.lowering.program import to_desc
from ipuxl.profile import profile_ir
from ipuxl.profile.report import profile_program
from ipuxl.profile.model import IpuModel


def chain_ir(n_ops: int, width: int = 256):
    """About ``n_ops`` ops: blocks of (matmul, add, gelu, mul) in the main
    graph, and a 4-op graph called from every 10th block."""
    ir = popxl.Ir()
    with ir.main_graph:
        xs = popxl.h2d_stream((16, width), popxl.float32, name="x")
        x = ops.host_load(xs)
        w = popxl.variable(np.full((width, width), 0.001, np.float32), name="w")
        g = ir.create_graph(lambda a, m: ops.relu(a @ m) * 0.5 + a,
                            popxl.TensorSpec((16, width), popxl.float32),
                            popxl.TensorSpec((width, width), popxl.float32))
        made = 2
        i = 0
        while made < n_ops - 1:
            if i % 10 == 9:
                (x,) = ops.call(g, x, w)
                made += 1
            else:
                x = ops.gelu(x @ w + 0.5) * 0.5
                made += 4
            i += 1
        ys = popxl.d2h_stream(x.shape, x.dtype, name="y")
        ops.host_store(ys, x)
    return ir, xs, ys


def time_profile(n_ops: int) -> None:
    ir, _, _ = chain_ir(n_ops)
    count = sum(len(gr._ops) for gr in ir._graphs.values())
    t0 = time.perf_counter()
    prog = lower(ir)
    t1 = time.perf_counter()
    desc = to_desc(prog, with_data=False)[0]
    t2 = time.perf_counter()
    p = profile_program(prog, desc, IpuModel())
    t3 = time.perf_counter()
    total = profile_ir(ir)  # the whole public call, once more
    t4 = time.perf_counter()
    print(f"{count:>6} ops: lower {t1 - t0:.3f} s, to_desc {t2 - t1:.3f} s, model {t3 - t2:.3f} s;"
          f" profile_ir {t4 - t3:.3f} s  ({p.cycles:,} cycles, {p.totals['total']:,} B; "
          f"{len(total.steps['cycles'])} steps)")


def time_runs(repeats: int = 200) -> None:
    ir, xs, ys = chain_ir(400)
    feed = {xs: np.ones((16, 256), np.float32)}
    res = {}
    for device in ("cpu", "ipu_model"):
        s = popxl.Session(ir, device)
        with s:
            for _ in range(10):
                s.run(feed)
            ts = []
            for _ in range(repeats):
                t = time.perf_counter()
                s.run(feed)
                ts.append(time.perf_counter() - t)
        res[device] = statistics.median(ts)
        print(f"Session.run on {device:<9}: median {res[device] * 1e6:8.1f} us over {repeats} runs")
    print(f"ipu_model / cpu: {res['ipu_model'] / res['cpu']:.3f} (the model runs at creation only)")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ops", type=int, default=10000)
    ap.add_argument("--runs", type=int, default=200)
    args = ap.parse_args()
    for n in sorted({1000, args.ops}):
        time_profile(n)
    time_runs(args.runs)


if __name__ == "__main__":
    main()
