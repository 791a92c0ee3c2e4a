"""Compile-time scaling: build + autodiff + ``Session(...)`` time and peak RSS
for chains of elementwise ops, with a least-squares fit of the exponent.

The program (the one that exposed quadratic compile time): a subgraph
``f(x, w)`` that is a chain of N elementwise ops (``y*w``, ``y+w``,
``tanh(y)``, repeating), its gradient graph from
``popxl.transforms.autodiff`` (which stitches about one forward activation
per op into the forward graph's outputs), and a main graph that calls
``f`` and then its gradient graph with ``inputs_dict`` and stores both
results to the host. Timed: building the forward graph and the calls,
autodiff, ``Session(ir, device)`` (lowering, host passes, the core's
program description and validation, memory plan and, on ``"ipu_model"``,
the IPU model with ``allow_out_of_memory=True``: long chains overflow a
tile's control code), and one ``run``, whose results are checked against NumPy.

Each size runs in its own process, so peak RSS is that size's alone. The
exponent is the slope of log(build + autodiff + session seconds) against
log(N) (least squares over all sizes); 1.0 is linear. ``cpu s`` is the
process CPU time of the same three steps (all threads), the figure to read
on a machine shared with other work, where wall time includes waiting; the
exponent is printed for both.

    PYTHONPATH=python python3 bench/compile_scaling.py                  # 1k, 10k, 100k
    PYTHONPATH=python python3 bench/compile_scaling.py --sizes 1000 2000 10000
    PYTHONPATH=python python3 bench/compile_scaling.py --device cpu --profile 10000

``--gptj EXAMPLES`` instead builds Graphcore's GPT-J fine-tuning program
(``nlp/gpt_j/popxl`` of a graphcore/examples checkout, through its own
``finetuning(config)``) at its ``tiny`` and 28-layer ``gptj_6B_1024_pod16``
/ ``_pod64`` configurations as abstract programs (shapes, no weights) and
models them on an IPU2, each in a fresh process
(``scripts/popxl_app_configs.py``, whose package cache it uses): the
figures are that build's wall and CPU seconds, without the imports, and
the process's peak RSS, imports included.

    PYTHONPATH=python python3 bench/compile_scaling.py --gptj /path/to/examples \
        --examples-utils /path/to/examples-utils
"""
import argparse
import json
import math
import os
import resource
import subprocess
import sys
import time

import numpy as np


def _chain(n_ops):
    import ipuxl.ops as ops

    def fn(x, w):
        y = x
        for i in range(n_ops):
            k = i % 3
            if k == 0:
                y = y * w
            elif k == 1:
                y = y + w
            else:
                y = ops.tanh(y)
        return y

    return fn


def _reference(n_ops, x, w):
    """The chain's value and d(sum y)/dx in float64 (forward, then reverse)."""
    ys = [x.astype(np.float64)]
    w = w.astype(np.float64)
    for i in range(n_ops):
        y = ys[-1]
        ys.append(y * w if i % 3 == 0 else y + w if i % 3 == 1 else np.tanh(y))
    g = np.ones_like(x, dtype=np.float64)
    for i in reversed(range(n_ops)):
        if i % 3 == 0:
            g = g * w
        elif i % 3 == 2:
            g = g * (1.0 - ys[i + 1] ** 2)
    return ys[-1], g


def measure(n_ops: int, device: str) -> dict:
    import ipuxl as popxl
    import ipuxl.ops as ops

    x0 = np.linspace(-0.5, 0.5, 4).astype(np.float32)
    w0 = np.full(4, 0.9, np.float32)
    t = {}
    c0 = time.process_time()
    t0 = time.perf_counter()
    ir = popxl.Ir()
    # CPU seconds of each phase: the figures to compare on a loaded machine.
    with ir.main_graph:
        spec = popxl.TensorSpec((4,), popxl.float32)
        g = ir.create_graph(_chain(n_ops), spec, spec)
        x = popxl.variable(x0, name="x")
        w = popxl.variable(w0, name="w")
        t1, c1 = time.perf_counter(), time.process_time()
        info = popxl.transforms.autodiff(g)
        t2, c2 = time.perf_counter(), time.process_time()
        fwd = ops.call_with_info(g, x, w)
        (dx, _dw) = ops.call(info.graph, popxl.constant(np.ones(4, np.float32)),
                             inputs_dict=info.inputs_dict(fwd))
        streams = []
        for v in (fwd.outputs[0], dx):
            s = popxl.d2h_stream(v.shape, v.dtype)
            ops.host_store(s, v)
            streams.append(s)
    t3, c3 = time.perf_counter(), time.process_time()
    # Chains this long do not fit one modelled IPU (control code): the model
    # still runs in full and reports the overflow in the profile.
    sess = popxl.Session(ir, popxl.IpuModel(allow_out_of_memory=True)
                         if device == "ipu_model" else device)
    t4 = time.perf_counter()
    c4 = time.process_time()
    with sess:
        out = sess.run()
    t5 = time.perf_counter()
    y_ref, dx_ref = _reference(n_ops, x0, w0)
    np.testing.assert_allclose(out[streams[0]], y_ref, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(out[streams[1]], dx_ref, rtol=1e-3, atol=1e-5)
    t["build"] = (t1 - t0) + (t3 - t2)
    t["autodiff"] = t2 - t1
    t["session"] = t4 - t3
    t["run"] = t5 - t4
    t["cpu"] = c4 - c0  # build + autodiff + session, CPU seconds of all threads
    t["cpu_build"] = (c1 - c0) + (c3 - c2)
    t["cpu_autodiff"] = c2 - c1
    t["cpu_session"] = c4 - c3
    t["fwd_ops"] = len(g.ops)
    t["grad_ops"] = len(info.graph.ops)
    t["grad_inputs"] = len(info.graph.inputs)
    t["rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return t


def fit_exponent(ns, ts) -> float:
    """Least-squares slope of log(t) against log(n)."""
    xs = [math.log(n) for n in ns]
    ys = [math.log(t) for t in ts]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    sxx = sum((a - mx) ** 2 for a in xs)
    return sum((a - mx) * (b - my) for a, b in zip(xs, ys)) / sxx


def _child(n: int, device: str, profile: bool) -> None:
    if profile:
        import cProfile
        import pstats

        prof = cProfile.Profile()
        res = prof.runcall(measure, n, device)
        pstats.Stats(prof, stream=sys.stderr).sort_stats("tottime").print_stats(30)
    else:
        res = measure(n, device)
    print(json.dumps(res))


#: GPT-J fine-tuning configurations --gptj builds (``finetuning.yml``).
GPTJ_CONFIGS = ("tiny", "gptj_6B_1024_pod16", "gptj_6B_1024_pod64")


def gptj(examples: str, examples_utils, cache: str, timeout: float) -> int:
    """Build and model the GPT-J configurations (see the module docstring)."""
    import tempfile
    from pathlib import Path

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts"))
    import popxl_app_configs as pac
    import popxl_apps

    rel = "nlp/gpt_j/popxl"
    print(f"{'config':<20} {'ops':>6} {'build s':>8} {'build cpu s':>11} {'peak RSS MB':>11} "
          f"{'fits':>5}")
    with tempfile.TemporaryDirectory(prefix="compile_scaling_gptj_") as tmp:
        tmp = Path(tmp)
        popxl_apps.export(Path(examples).resolve(), [rel, "utils/examples_tests"], tmp / "gpt_j")
        root = tmp / "gpt_j" / rel
        eutils = Path(examples_utils).resolve() if examples_utils else None
        target = pac.prepare_packages(root, eutils, Path(cache), tmp)
        extra = [*popxl_apps.python_paths(root), target]
        sections = {name: (yml, sec) for yml, sec, name in pac.release_configs(root)
                    if yml == "finetuning.yml"}
        for name in GPTJ_CONFIGS:
            if name not in sections:
                print(f"{name:<20} not in finetuning.yml")
                continue
            yml, sec = sections[name]
            r = pac.run_child("gpt_j", root, extra, yml, sec, name, timeout)
            if "error" in r:
                print(f"{name:<20} error: {r['error']}")
                sys.stderr.write(r.get("stderr", ""))
                return 1
            print(f"{name:<20} {r['ops']:>6} {r['build_s']:>8.2f} {r['build_only_cpu_s']:>11.2f} "
                  f"{r['max_rss_mb']:>11.0f} {'yes' if r['fits'] else 'NO':>5}", flush=True)
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000, 100000],
                    help="forward chain lengths (ops)")
    ap.add_argument("--device", default="ipu_model", choices=["ipu_model", "cpu"])
    ap.add_argument("--profile", type=int, metavar="N",
                    help="run one size under cProfile and print the top functions")
    ap.add_argument("--gptj", metavar="EXAMPLES",
                    help="build GPT-J fine-tuning (tiny, 28 layers) from this graphcore/examples "
                         "checkout instead of the chains")
    ap.add_argument("--examples-utils", help="graphcore/examples-utils checkout (with --gptj)")
    ap.add_argument("--cache", default=os.path.join(os.path.expanduser("~"), ".cache", "ipuxl",
                                                    "popxl_apps"),
                    help="package cache of scripts/popxl_apps.py (with --gptj)")
    ap.add_argument("--timeout", type=float, default=900, help="seconds per GPT-J build")
    ap.add_argument("--_one", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.gptj:
        return gptj(args.gptj, args.examples_utils, args.cache, args.timeout)
    if args._one is not None or args.profile is not None:
        _child(args._one if args._one is not None else args.profile, args.device,
               args.profile is not None)
        return 0
    print(f"device {args.device}; build = forward graph + calls, session = Session(ir, device)")
    print(f"{'fwd ops':>8} {'grad ops':>8} {'grad ins':>8} {'build s':>8} {'autodiff s':>10} "
          f"{'session s':>9} {'total s':>8} {'cpu s':>7} {'cpu b/a/s':>15} {'run ms':>8} {'us/op':>6} "
          f"{'peak RSS MiB':>12}")
    ns, ts, cs = [], [], []
    for n in args.sizes:
        cmd = [sys.executable, os.path.abspath(__file__), "--_one", str(n), "--device", args.device]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode:
            sys.stderr.write(proc.stderr)
            return proc.returncode
        r = json.loads(proc.stdout.strip().splitlines()[-1])
        total = r["build"] + r["autodiff"] + r["session"]
        ns.append(n)
        ts.append(total)
        cs.append(r["cpu"])
        print(f"{r['fwd_ops']:>8} {r['grad_ops']:>8} {r['grad_inputs']:>8} {r['build']:>8.2f} "
              f"{r['autodiff']:>10.2f} {r['session']:>9.2f} {total:>8.2f} {r['cpu']:>7.2f} "
              f"{r['cpu_build']:>5.2f}/{r['cpu_autodiff']:.2f}/{r['cpu_session']:.2f} "
              f"{r['run'] * 1e3:>8.1f} {total / n * 1e6:>6.0f} {r['rss_mib']:>12.0f}", flush=True)
    if len(set(ns)) >= 2:  # (repeats of one size have no slope)
        print(f"exponent of build + autodiff + session time over {ns[0]} -> {ns[-1]} ops "
              f"(least squares, 1.0 = linear): {fit_exponent(ns, ts):.2f} wall, "
              f"{fit_exponent(ns, cs):.2f} cpu")
    return 0


if __name__ == "__main__":
    sys.exit(main())
