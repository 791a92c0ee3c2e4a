"""Per-step time of phased execution (tutorial 6) against the same model
without phasing, on the simulator.

Builds both training programs of ``examples/mnist_phased.py`` (same model,
optimizer, micro-batch and gradient accumulation; the phased one with every
weight and its Adam state in remote buffers, batch-serialised loops and the
exchanges on IO tiles), then times ``Session.run`` of one training step,
alternating the two programs step by step so that drift in machine load
affects both alike. A third program, the phased one without the host
pass ``view_remote_loads`` (every remote load and store copied), shows what
that pass saves. Prints the median per step, the ratios, and the IPU
model's estimate (cycles per step, variables on chip, Streaming Memory).

    IPUXL_CORE_DIR=build/dev PYTHONPATH=python python3 bench/mnist_phased.py [--steps 60]

``--program NAME --steps N --warmup 0`` builds and runs only that program
(phased, phased-copies or unphased), for instruction counts that do not
depend on the machine's load: the difference between
``valgrind --tool=callgrind`` totals at two step counts is the cost of the
extra steps.
"""
import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))

import ipuxl as popxl  # noqa: E402
import mnist_phased  # noqa: E402
from ipuxl.profile import profile_ir  # noqa: E402


#: phased-copies: the phased program without the host pass view_remote_loads.
PROGRAMS = ("phased", "phased-copies", "unphased")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--io-mode", default="io", choices=("io", "compute", "io_overlapped"))
    ap.add_argument("--micro-batch", type=int, default=8)
    ap.add_argument("--gradient-accumulation", type=int, default=4)
    ap.add_argument("--program", choices=PROGRAMS, action="append",
                    help="only these programs (default: all three)")
    a = ap.parse_args(argv)
    ga, mb = a.gradient_accumulation, a.micro_batch
    rng = np.random.default_rng(0)
    x = rng.standard_normal((ga, mb, 784)).astype(np.float32)
    y = rng.integers(0, 10, (ga, mb)).astype(np.int32)
    runs, models = {}, {}
    for name in a.program or PROGRAMS:
        mode = name.split("-")[0]
        opts = argparse.Namespace(mode=mode, io_mode=a.io_mode, micro_batch=mb,
                                  gradient_accumulation=ga, lr=1e-3)
        np.random.seed(0)
        build = mnist_phased.phased_program if mode == "phased" else \
            mnist_phased.unphased_program
        ir, images, labels, _, _ = build(opts)
        if not a.program:
            models[name] = profile_ir(ir, "ipu2")
        s = popxl.Session(ir, "ipu_model",
                          host_passes="-view_remote_loads" if name == "phased-copies" else None)
        s.__enter__()
        runs[name] = (s, {images: x, labels: y})
    times = {m: [] for m in runs}
    for i in range(a.warmup + a.steps):
        for mode, (s, feeds) in runs.items():
            t0 = time.perf_counter()
            s.run(feeds)
            if i >= a.warmup:
                times[mode].append(time.perf_counter() - t0)
    for s, _ in runs.values():
        s.__exit__(None, None, None)
    med = {m: float(np.median(t)) * 1e3 for m, t in times.items()}
    if a.program:
        for m in runs:
            print(f"{m}: {med[m]:.2f} ms/step over {a.steps} steps")
        return med
    print(f"{ga} x {mb} samples per step, io_mode={a.io_mode}, {a.steps} steps each, "
          f"interleaved")
    print(f"{'program':<15}{'ms/step':>10}{'model cycles':>16}{'variables on chip':>20}"
          f"{'Streaming Memory':>18}")
    for m in runs:
        p = models[m]
        off = sum(b["streaming_bytes"] for b in p.remote_buffers)
        print(f"{m:<15}{med[m]:>10.2f}{p.cycles:>16,}{p.totals['variables']:>20,}{off:>18,}")
    print(f"phased / unphased time per step: {med['phased'] / med['unphased']:.3f}")
    print(f"phased-copies / unphased time per step: "
          f"{med['phased-copies'] / med['unphased']:.3f}")
    return med


if __name__ == "__main__":
    main()
