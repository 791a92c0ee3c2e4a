"""Input gradient and weight update: one fused pass over W, or two GEMMs?

For a layer with weight W [rows, cols] at batch B, the backward step
computes dX = G @ W^T and then the folded SGD update W -= lr * X^T @ G.
At small batches the lowering can run both as one MatMulInputGradUpdate
pass over W (each row of W read once); otherwise they run as two GEMMs (the
second accumulating into W). The core decides per shape and instruction-set
level (``_core.prefer_fused_input_grad_update``); this script measures the
two ways in one process (IPUXL_FUSED_UPDATE=always / never while each
Session compiles), calls alternating one by one, and prints the 20th
percentiles and time(two GEMMs) / time(fused) next to the core's decision:
above 1, fusing wins.

    IPUXL_CORE_DIR=build/dev PYTHONPATH=python python3 bench/fused_update.py
    IPUXL_ISA=avx2 ... python3 bench/fused_update.py
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np


def program(popxl, ops, b, m, n, rng):
    ir = popxl.Ir()
    with ir.main_graph:
        x = popxl.variable(rng.standard_normal((b, m)).astype(np.float32), name="x")
        g = popxl.variable(rng.standard_normal((b, n)).astype(np.float32), name="g")
        w = popxl.variable(rng.standard_normal((m, n)).astype(np.float32) * 0.01, name="w")
        dx = g @ ops.transpose(w)
        ops.scaled_add_(w, ops.transpose(x) @ g, b=-1e-6)
        s = popxl.d2h_stream(dx.shape, dx.dtype)
        ops.host_store(s, dx)
    return ir


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--block-ms", type=float, default=15.0)
    ap.add_argument("--batches", default="1,2,4,8,12,16")
    ap.add_argument("--shapes", default="784x512,512x512,512x10,128x128,64x1024,1024x64,96x96")
    args = ap.parse_args(argv)
    import ipuxl as popxl  # noqa: PLC0415
    import ipuxl.ops as ops  # noqa: PLC0415
    from ipuxl import _core as core  # noqa: PLC0415
    from ipuxl import settings  # noqa: PLC0415
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from fma_peak import cpu_model  # noqa: PLC0415
    print(f"CPU: {cpu_model()}; level {core.isa()}; threads {core.num_threads()}; load "
          + " ".join(f"{x:.2f}" for x in os.getloadavg()))
    print(f"{'B':>3s} {'rows x cols':>12s} {'fused us':>9s} {'2 GEMMs us':>11s} {'ratio':>6s} "
          f"{'core says':>9s}")
    rng = np.random.default_rng(0)
    for shape in args.shapes.split(","):
        m, n = (int(v) for v in shape.split("x"))
        for b in (int(v) for v in args.batches.split(",")):
            sessions = {}
            for mode in ("always", "never"):
                with settings.override(fused_update=mode):
                    s = popxl.Session(program(popxl, ops, b, m, n, rng), "ipu_model")
                s.__enter__()
                fused = "MatMulInputGradUpdate" in s.engine.describe()
                assert fused == (mode == "always"), (mode, b, m, n)
                sessions[mode] = s
            for s in sessions.values():
                for _ in range(5):
                    s.run()
            # Calls alternate one by one; the 20th percentile of each is
            # reported (the machine is shared: slow phases hit both alike,
            # and the low quantile is what each way costs when undisturbed).
            times = {k: [] for k in sessions}
            t_end = time.perf_counter() + args.reps * 2 * args.block_ms * 1e-3
            while time.perf_counter() < t_end or len(times["always"]) < 20:
                for k, s in sessions.items():
                    t0 = time.perf_counter()
                    s.run()
                    times[k].append(time.perf_counter() - t0)
            for s in sessions.values():
                s.__exit__(None, None, None)
            f, u = (statistics.quantiles(times[k], n=5)[0] for k in ("always", "never"))
            says = "fuse" if core.prefer_fused_input_grad_update(b, m, n) else "GEMMs"
            print(f"{b:3d} {m:>5d} x {n:<5d} {f * 1e6:9.1f} {u * 1e6:11.1f} {u / f:6.2f} "
                  f"{says:>9s}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
