"""Time ``popxl.transforms.autodiff`` on graphs of 1k, 10k and 100k ops.

Shapes of graph (all in one subgraph built with ``ir.create_graph``, so the
gradient graph stitches activations into the forward graph's outputs):

* ``chain``: x -> x*w -> +w -> tanh -> x*w -> ... (a long dependency chain,
  Tanh only if it has a gradient rule, otherwise Mul/Add/Sub);
* ``tree``: a balanced binary tree of Adds over leaves ``x*w`` (wide fan-in,
  and one gradient Sum with one partial per leaf for ``x`` and ``w``).

Only graph construction work is timed (autodiff, and separately building the
forward graph); nothing is run. The table shows seconds, microseconds per
forward op and the growth ratio of autodiff time when N grows 10x (10 means
linear). Run:

    PYTHONPATH=python python3 bench/autodiff_scaling.py [--sizes 1000 10000 100000]
"""
import argparse
import sys
import time

import ipuxl as popxl
import ipuxl.ops as ops
from ipuxl import grad as _grad
from ipuxl import transforms


def _chain(n_ops):
    has_tanh = _grad.get_grad_rule("Tanh") is not None

    def fn(x, w):
        y = x
        for i in range(n_ops):
            k = i % 3
            if k == 0:
                y = y * w
            elif k == 1:
                y = y + w
            else:
                y = ops.tanh(y) if has_tanh else y - x
        return y

    return fn


def _tree(n_ops):
    n_leaves = max(1, (n_ops + 1) // 2)

    def fn(x, w):
        level = [x * w for _ in range(n_leaves)]
        while len(level) > 1:
            nxt = [level[i] + level[i + 1] for i in range(0, len(level) - 1, 2)]
            if len(level) % 2:
                nxt.append(level[-1])
            level = nxt
        return level[0]

    return fn


def measure(kind, n_ops):
    ir = popxl.Ir()
    with ir.main_graph:
        spec = popxl.TensorSpec((4,), popxl.float32)
        t0 = time.perf_counter()
        g = ir.create_graph(_chain(n_ops) if kind == "chain" else _tree(n_ops), spec, spec)
        t1 = time.perf_counter()
        info = transforms.autodiff(g)
        t2 = time.perf_counter()
    return len(g.ops), t1 - t0, t2 - t1, len(info.graph.ops)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000, 100000])
    p.add_argument("--kinds", nargs="+", default=["chain", "tree"])
    a = p.parse_args(argv)
    sys.setrecursionlimit(1000)  # prove that nothing recurses per op
    print(f"{'graph':6} {'fwd ops':>8} {'build s':>8} {'autodiff s':>10} {'us/op':>7} "
          f"{'grad ops':>8} {'growth':>7}")
    for kind in a.kinds:
        prev = None
        for n in a.sizes:
            n_fwd, tb, ta, n_bwd = measure(kind, n)
            growth = "" if prev is None else f"{(ta / prev[1]) / (n_fwd / prev[0]) * 10:7.1f}"
            print(f"{kind:6} {n_fwd:8d} {tb:8.3f} {ta:10.3f} {ta / n_fwd * 1e6:7.1f} "
                  f"{n_bwd:8d} {growth:>7}", flush=True)
            prev = (n_fwd, ta)


if __name__ == "__main__":
    main()
