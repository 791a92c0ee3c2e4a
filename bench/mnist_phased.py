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
    # Wall-clock and CPU time (all threads) of each step; the order of the
    # programs rotates every round so that none always runs after the same one.
    times = {m: [] for m in runs}
    cpu = {m: [] for m in runs}
    names = list(runs)
    for i in range(a.warmup + a.steps):
        for j in range(len(names)):
            mode = names[(i + j) % len(names)]
            s, feeds = runs[mode]
            c0, t0 = time.process_time(), time.perf_counter()
            s.run(feeds)
            t1, c1 = time.perf_counter(), time.process_time()
            if i >= a.warmup:
                times[mode].append(t1 - t0)
                cpu[mode].append(c1 - c0)
    for s, _ in runs.values():
        s.__exit__(None, None, None)
    med = {m: float(np.median(t)) * 1e3 for m, t in times.items()}
    cpu_med = {m: float(np.median(t)) * 1e3 for m, t in cpu.items()}
    if a.program:
        for m in runs:
            print(f"{m}: {med[m]:.2f} ms/step over {a.steps} steps")
        return med
    print(f"{ga} x {mb} samples per step, io_mode={a.io_mode}, {a.steps} steps each, "
          f"interleaved")
    print(f"{'program':<15}{'ms/step':>10}{'CPU ms/step':>13}{'model cycles':>14}"
          f"{'variables on chip':>19}{'Streaming Memory':>18}")
    for m in runs:
        p = models[m]
        off = sum(b["streaming_bytes"] for b in p.remote_buffers)
        print(f"{m:<15}{med[m]:>10.2f}{cpu_med[m]:>13.2f}{p.cycles:>14,}"
              f"{p.totals['variables']:>19,}{off:>18,}")
    for m in ("phased", "phased-copies"):
        # The median over rounds of the ratio within each round: a round's
        # steps ran under about the same machine load.
        per_round = np.median(np.array(times[m]) / np.array(times["unphased"]))
        print(f"{m} / unphased time per step: {med[m] / med['unphased']:.3f} (medians), "
              f"{per_round:.3f} (median per round), "
              f"{cpu_med[m] / cpu_med['unphased']:.3f} (CPU time)")
    return med


if __name__ == "__main__":
    main()
