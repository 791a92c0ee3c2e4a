"""Per-step time of data-parallel MNIST training (examples/mnist_data_parallel.py)
at R = 1, 2 and 4 replicas in one process, on the simulator.

The global batch is fixed (``--global-batch``, default 64): R replicas each
compute B / R images and mean-all-reduce their gradients, so every R does
the same arithmetic plus R - 1 more replica states and the all-reduces.
``--per-replica`` fixes each replica's batch instead (weak scaling: R times
the images per step). The programs are built and compiled once; steps are
timed alternating between them so that drift in machine load affects all
alike. Prints the CPU, the median step time of each R on the "ipu_model"
device (and R = 1 on the "cpu" device, which has no replication), the time
per image and the IPU model's estimate of one step (the collectives' share
of it) for each R.

    IPUXL_CORE_DIR=build/dev PYTHONPATH=python python3 bench/mnist_data_parallel.py
"""
import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))

import ipuxl as popxl  # noqa: E402
import mnist_data_parallel as dp  # noqa: E402
from fma_peak import cpu_model  # noqa: E402  (bench/ is on sys.path)
from ipuxl.profile import profile_ir  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--global-batch", type=int, default=64)
    ap.add_argument("--per-replica", type=int, default=None,
                    help="fix each replica's batch instead of the global batch")
    ap.add_argument("--replicas", default="1,2,4")
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--warmup", type=int, default=5)
    a = ap.parse_args(argv)
    rs = [int(r) for r in a.replicas.split(",")]
    weights = dp.init_weights(0)
    rng = np.random.default_rng(0)
    configs = [(r, "ipu_model") for r in rs] + [(1, "cpu")]
    sessions = {}
    for r, dev in configs:
        gb = a.per_replica * r if a.per_replica else a.global_batch
        ir, (xs, ls), loss_s, _ = dp.build_train_ir(r, gb, 0.01, weights)
        local = gb // r
        shape = (r, local) if r > 1 else (local,)
        feeds = {xs: rng.normal(size=shape + (784,)).astype(np.float32),
                 ls: rng.integers(0, 10, size=shape).astype(np.int32)}
        cycles = profile_ir(ir, "ipu2")
        coll = sum(int(c) for k, c in zip(cycles.steps["kind"], cycles.steps["cycles"])
                   if k == "Collective")
        s = popxl.Session(ir, dev)
        s.__enter__()
        sessions[(r, dev)] = (s, feeds, gb, cycles.cycles, coll, [])
    for _ in range(a.warmup):
        for s, feeds, *_ in sessions.values():
            s.run(feeds)
    for _ in range(a.steps):
        for s, feeds, gb, _, _, times in sessions.values():
            t0 = time.perf_counter()
            s.run(feeds)
            times.append(time.perf_counter() - t0)
    print(f"CPU: {cpu_model()}, {os.cpu_count()} logical CPUs; "
          f"load average {os.getloadavg()[0]:.1f}")
    mode = f"{a.per_replica} images per replica" if a.per_replica else \
        f"global batch {a.global_batch}"
    print(f"data-parallel MNIST MLP 784-{dp.HIDDEN}-{dp.CLASSES}, {mode}, median of "
          f"{a.steps} steps")
    print("| device | replicas | images/step | ms/step | us/image | IPU model cycles/step "
          "| of which collectives |")
    print("|---|---|---|---|---|---|---|")
    for (r, dev), (s, _, gb, cyc, coll, times) in sessions.items():
        med = float(np.median(times))
        print(f"| {dev} | {r} | {gb} | {med * 1e3:.2f} | {med / gb * 1e6:.1f} | {cyc} | {coll} |")
        s.__exit__(None, None, None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
