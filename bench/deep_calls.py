"""Deeply nested calls: graph building, autodiff, Session creation and a run
for 1,000 to 100,000 nested ``call``s, with time and memory per depth.

Each level is a graph ``g_k(x) = g_{k-1}(x) + 1`` around ``g_0(x) = 1.5 x``;
the main graph calls the outermost and its gradient graph. Nothing in ipuxl
recurses per call level (see docs/architecture.md), so every step should
take time linear in the depth, and all of it runs on the default Python
recursion limit and thread stack. The "cpu" device is used: tens of
thousands of functions' control code do not fit one modelled IPU.

    python bench/deep_calls.py                  # 1k, 10k, 100k
    python bench/deep_calls.py --depths 1000 5000
"""
import argparse
import gc
import resource
import sys
import threading
import time

import numpy as np

import ipuxl as popxl
import ipuxl.ops as ops


def run(depth: int) -> dict:
    t = {}
    t0 = time.perf_counter()
    ir = popxl.Ir()
    with ir.main_graph:
        spec = popxl.TensorSpec((4,), popxl.float32)
        g = ir.create_graph(lambda x: x * 1.5, spec)
        for _ in range(depth - 1):
            inner = g
            g = ir.create_graph(lambda x, inner=inner: ops.call(inner, x)[0] + 1.0, spec)
        x = popxl.variable(np.ones(4, np.float32), name="x")
        info = ops.call_with_info(g, x)
        t["build"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        gi = popxl.transforms.autodiff(g)
        t["autodiff"] = time.perf_counter() - t0
        (dx,) = ops.call(gi.graph, popxl.constant(np.ones(4, np.float32)),
                         inputs_dict=gi.inputs_dict(info))
        streams = []
        for v in (info.outputs[0], dx):
            s = popxl.d2h_stream(v.shape, v.dtype)
            ops.host_store(s, v)
            streams.append(s)
    t0 = time.perf_counter()
    sess = popxl.Session(ir, "cpu")
    t["session"] = time.perf_counter() - t0
    with sess:
        t0 = time.perf_counter()
        out = sess.run()
        t["run"] = time.perf_counter() - t0
    y, d = out[streams[0]], out[streams[1]]
    assert np.allclose(y, 1.5 + depth - 1) and np.allclose(d, 1.5), (y, d)
    t["rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    del sess, ir, out
    gc.collect()
    return t


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--depths", type=int, nargs="+", default=[1000, 10000, 100000])
    args = ap.parse_args(argv)
    print(f"recursion limit {sys.getrecursionlimit()}, thread stack "
          f"{threading.stack_size() or 'default'}")
    print(f"{'depth':>8} {'build s':>9} {'autodiff s':>11} {'session s':>10} {'run ms':>8} "
          f"{'us/level':>9} {'peak RSS MiB':>13}")
    for depth in args.depths:
        result = {}

        def work():
            result.update(run(depth))

        th = threading.Thread(target=work)  # a default-sized thread stack
        th.start()
        th.join()
        total = result["build"] + result["autodiff"] + result["session"] + result["run"]
        print(f"{depth:>8} {result['build']:>9.2f} {result['autodiff']:>11.2f} "
              f"{result['session']:>10.2f} {result['run'] * 1e3:>8.2f} "
              f"{total / depth * 1e6:>9.0f} {result['rss_mib']:>13.0f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
