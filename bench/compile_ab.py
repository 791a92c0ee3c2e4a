"""Two (or more) Python trees of ipuxl on the compile_scaling.py chain,
alternating in one run: CPU seconds per phase, the cyclic GC's share, and
fingerprints of everything compiling produces.

For a before/after of a compile-time change on a busy machine: each variant
is ``label=PYTHONPATH`` (e.g. a ``git archive main python`` export beside
the working tree, both on the same core build via IPUXL_CORE_DIR); every
round runs each variant once in a fresh process (the order alternating),
building the chain of ``--ops`` forward ops (build, autodiff, calls), then
``Session(ir, IpuModel(allow_out_of_memory=True))`` and one run. Printed:
per-round figures, the medians, the paired ratios of total CPU time, and
from the first round the SHA-256 (first 16 hex digits) of the Ir (graphs,
tensors, ops with attributes), of the engine's faithful and host
descriptions (``Engine.describe``), of the IPU model's saved profile and
of the run's results: an optimisation must leave all five unchanged.

``post_gc`` is one full collection after the run: the work a later
automatic collection of the objects the Session keeps alive would do.

    git archive main python | tar -x -C /tmp/main_py
    IPUXL_CORE_DIR=build/dev python3 bench/compile_ab.py --rounds 5 \\
        main=/tmp/main_py/python new=python
"""
import argparse
import gc
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PHASES = (("lowering", "lower", "lower"), ("lowering", "to_desc", "to_desc"),
          ("lowering.host_passes", "apply", "host_passes"), ("profile", "session_model", "model"))


def child(n: int, fingerprint: bool) -> dict:
    gc_cpu = [0.0, 0.0]  # total, start of the current collection

    def on_gc(phase, _info):
        if phase == "start":
            gc_cpu[1] = time.process_time()
        else:
            gc_cpu[0] += time.process_time() - gc_cpu[1]

    gc.callbacks.append(on_gc)
    sys.path.insert(0, HERE)
    import importlib

    import numpy as np

    import compile_scaling as cs
    import ipuxl as popxl
    import ipuxl.ops as ops

    phase = {}

    def timed(mod, name, key):
        f = getattr(mod, name)

        def wrapper(*a, **k):
            c = time.process_time()
            try:
                return f(*a, **k)
            finally:
                phase[key] = phase.get(key, 0.0) + time.process_time() - c
        setattr(mod, name, wrapper)

    for mod, name, key in PHASES:
        timed(importlib.import_module(f"ipuxl.{mod}"), name, key)
    x0 = np.linspace(-0.5, 0.5, 4).astype(np.float32)
    w0 = np.full(4, 0.9, np.float32)
    c0, g0 = time.process_time(), gc_cpu[0]
    ir = popxl.Ir()
    with ir.main_graph:
        spec = popxl.TensorSpec((4,), popxl.float32)
        g = ir.create_graph(cs._chain(n), spec, spec)
        x = popxl.variable(x0, name="x")
        w = popxl.variable(w0, name="w")
        c1 = time.process_time()
        info = popxl.transforms.autodiff(g)
        c2 = time.process_time()
        fwd = ops.call_with_info(g, x, w)
        (dx, _dw) = ops.call(info.graph, popxl.constant(np.ones(4, np.float32)),
                             inputs_dict=info.inputs_dict(fwd))
        streams = []
        for v in (fwd.outputs[0], dx):
            s = popxl.d2h_stream(v.shape, v.dtype)
            ops.host_store(s, v)
            streams.append(s)
    c3 = time.process_time()
    sess = popxl.Session(ir, popxl.IpuModel(allow_out_of_memory=True))
    c4, g4 = time.process_time(), gc_cpu[0]
    with sess:
        out = sess.run()
    c = time.process_time()
    gc.collect()
    r = {"build": (c1 - c0) + (c3 - c2), "autodiff": c2 - c1, "session": c4 - c3,
         "total": c4 - c0, "gc": g4 - g0, "post_gc": time.process_time() - c,
         "objects": len(gc.get_objects()), **phase}
    if fingerprint:
        def h(b):
            return hashlib.sha256(b).hexdigest()[:16]
        lines = []
        for name in sorted(ir._graphs):
            gg = ir._graphs[name]
            lines.append(f"G {name} {[t.id for t in gg._inputs]} {[t.id for t in gg._outputs]}")
            lines += [f"T {t.id} {t.shape} {t.dtype} {type(t).__name__}"
                      for t in gg._tensors.values()]
            lines += [f"O {o.name} {o.type} {sorted((k, repr(v)) for k, v in o.attrs.items())} "
                      f"{[None if t is None else t.id for t in o.inputs]} "
                      f"{[t.id for t in o.outputs]} {[c.name for c in o.called_graphs]} "
                      f"{o.aliases} {sorted(o.modified)}" for o in gg._ops]
        r["fp_ir"] = h("\n".join(lines).encode())
        r["fp_desc"] = h(sess.engine.describe().encode())
        r["fp_desc_host"] = h(sess.engine.describe(host=True).encode())
        with tempfile.TemporaryDirectory() as d:
            sess._profile.save(os.path.join(d, "p.json"))
            with open(os.path.join(d, "p.json"), "rb") as f:
                r["fp_model"] = h(f.read())
        r["fp_out"] = h(b"".join(out[s].tobytes() for s in streams))
    return r


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("variants", nargs="*", help="label=PYTHONPATH")
    ap.add_argument("--ops", type=int, default=10000, help="forward chain length")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--_child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--_fp", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args._child:
        print(json.dumps(child(args.ops, args._fp)))
        return 0
    variants = [v.split("=", 1) for v in args.variants]
    res = {k: [] for k, _ in variants}
    for r in range(args.rounds):
        for k, path in (variants if r % 2 == 0 else variants[::-1]):
            env = dict(os.environ, PYTHONPATH=os.path.abspath(path), PYTHONHASHSEED="0")
            cmd = [sys.executable, os.path.abspath(__file__), "--_child", "--ops", str(args.ops)]
            p = subprocess.run(cmd + (["--_fp"] if r == 0 else []), env=env,
                               capture_output=True, text=True)
            if p.returncode:
                sys.stderr.write(p.stderr)
                return p.returncode
            d = json.loads(p.stdout.strip().splitlines()[-1])
            res[k].append(d)
            print(k, " ".join(f"{a}={b:.3f}" if isinstance(b, float) else f"{a}={b}"
                              for a, b in d.items()), flush=True)
    print("load average", " ".join(f"{x:.1f}" for x in os.getloadavg()))
    for k, ds in res.items():
        keys = [a for a, b in ds[0].items() if isinstance(b, (int, float))]
        print(k, "median", " ".join(f"{a}={statistics.median(d[a] for d in ds):.3f}"
                                    for a in keys))
    first = variants[0][0]
    for k, ds in list(res.items())[1:]:
        ratios = [a["total"] / b["total"] for a, b in zip(res[first], ds)]
        same = all(res[first][0][f] == ds[0][f] for f in ds[0] if f.startswith("fp_"))
        print(f"{first}/{k} total CPU, per round: {' '.join(f'{x:.2f}' for x in ratios)} "
              f"(median {statistics.median(ratios):.2f}); fingerprints "
              f"{'identical' if same else 'DIFFER'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
