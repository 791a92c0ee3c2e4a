"""Two or more builds of the core (and JAX) on one training step, interleaved.

For a before/after of a core change on a busy machine: each variant runs in
its own process (a build directory of the core via IPUXL_CORE_DIR, plus any
environment settings), all build the same step of bench/transformer_step.py
(sizes small, large) or bench/mnist_step.py (mnist8, mnist128) from the same
weights and batches, and then run blocks of steps in turn (the starting
variant rotating, 0.3 s idle before each block). Prints the median ms/step
and process CPU ms/step (all threads) of each variant and the per-repetition
ratios against the first.

  cp build/dev/_core*.so /tmp/before/          # before the change
  IPUXL_CORE_DIR=build/dev PYTHONPATH=python python3 bench/ab_builds.py large \\
      before:ipuxl:IPUXL_CORE_DIR=/tmp/before after:ipuxl:IPUXL_CORE_DIR=build/dev jax:jax
  ... before:ipuxl:IPUXL_CORE_DIR=/tmp/before,IPUXL_ISA=avx2 ...   # a forced level

A variant is label:peer[:VAR=value,VAR=value]; peer is ipuxl or jax.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def serve(peer: str, size: str) -> None:
    """Worker: build the step, print "ready", then run `n` steps per stdin
    line and print wall and CPU ms/step."""
    sys.path.insert(0, HERE)
    if peer == "jax":
        os.environ.setdefault("JAX_PLATFORMS", "cpu")
    if size.startswith("mnist"):
        import mnist_step as ms
        batch = int(size[len("mnist"):])
        cls = {"ipuxl": ms.IpuxlPeer, "jax": ms.JaxPeer}[peer]
        model = cls(ms.make_weights(0), batch, {})
        pool = ms.make_batches(batch, 4, 1)
    else:
        import transformer_step as ts
        cls = ts.PEER_CLASSES[peer]
        model = cls(ts.make_weights(size, 0), size, {})
        pool = ts.make_batches(size, 4, 1)
    data = [model.prepare(x, t) for x, t in pool]
    for i in range(10):
        model.step(data[i % len(data)])
    print("ready", flush=True)
    for line in sys.stdin:
        n = int(line)
        c0, t0 = time.process_time(), time.perf_counter()
        for i in range(n):
            model.step(data[i % len(data)])
        print((time.perf_counter() - t0) / n * 1e3, (time.process_time() - c0) / n * 1e3,
              flush=True)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("size", choices=("small", "large", "mnist8", "mnist128"))
    p.add_argument("variants", nargs="+", help="label:peer[:VAR=value,...]")
    p.add_argument("--steps", type=int, default=0, help="steps per block (default by size)")
    p.add_argument("--reps", type=int, default=7)
    p.add_argument("--gap", type=float, default=0.3)
    p.add_argument("--serve", nargs=2, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    steps = args.steps or {"small": 200, "large": 30, "mnist8": 300, "mnist128": 40}[args.size]
    procs = {}
    for spec in args.variants:
        label, peer, envs = (spec.split(":", 2) + [""])[:3]
        env = dict(os.environ)
        for kv in filter(None, envs.split(",")):
            k, v = kv.split("=", 1)
            env[k] = v
        procs[label] = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), args.size, "-", "--serve", peer,
             args.size], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
        if procs[label].stdout.readline().strip() != "ready":
            raise SystemExit(f"variant {label} failed to start")
    labels = list(procs)
    wall = {k: [] for k in labels}
    cpu = {k: [] for k in labels}
    print(f"{args.size}, {steps} steps per block, {args.reps} repetitions; load average before: "
          + " ".join(f"{x:.2f}" for x in os.getloadavg()))
    for r in range(args.reps):
        for k in labels[r % len(labels):] + labels[:r % len(labels)]:
            time.sleep(args.gap)
            procs[k].stdin.write(f"{steps}\n")
            procs[k].stdin.flush()
            w, c = map(float, procs[k].stdout.readline().split())
            wall[k].append(w)
            cpu[k].append(c)
    for k in labels:
        print(f"{k:12s} median {statistics.median(wall[k]):8.2f} ms/step, CPU "
              f"{statistics.median(cpu[k]):7.2f} ms/step; per repetition "
              + " ".join(f"{x:.1f}" for x in wall[k]))
    for k in labels[1:]:
        ratios = [a / b for a, b in zip(wall[labels[0]], wall[k])]
        print(f"{labels[0]} time / {k} time: median {statistics.median(ratios):.2f}; "
              + " ".join(f"{x:.2f}" for x in ratios))
    print("load average after: " + " ".join(f"{x:.2f}" for x in os.getloadavg()))
    for proc in procs.values():
        proc.stdin.close()
        proc.wait()
    return 0


if __name__ == "__main__":
    if "--serve" in sys.argv:
        i = sys.argv.index("--serve")
        serve(sys.argv[i + 1], sys.argv[i + 2])
    else:
        sys.exit(main())
