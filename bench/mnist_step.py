"""MNIST training step: ipuxl versus hand-written NumPy, PyTorch eager and JAX jit.

Every peer trains the same model with the same step, from the same initial
weights on the same batches:

* MLP 784-512-512-512-10 with biases, GELU (tanh approximation) after each
  hidden layer, float32;
* mean softmax cross-entropy loss over the batch;
* plain SGD, learning rate 0.05, every weight updated in place each step;
* W ~ N(0, 0.02), b = 0, drawn once with NumPy (seeded) and handed to every
  peer; the batches (random normal 28x28 images, random int labels in
  [0, 10)) come from a seeded NumPy generator, a pool of ``--pool`` distinct
  batches per batch size that every peer cycles through in the same order.

The peers:

* ``ipuxl``: the popxl_addons program of Graphcore's PopXL MNIST tutorial 1
  (``examples/mnist_addons.py``): ``addons.Module`` Linear/Net,
  ``addons.autodiff``, ``addons.ops.cross_entropy_with_grad``, SGD with
  ``ops.scaled_add_`` on the variables, images and labels through host
  streams, the loss stored to a host stream; one ``Session.run`` per step.
  The Session shares the host arrays of the weights as their device storage
  (``share_host_weights=True``, the counterpart of the JAX peer's donated
  parameters); the peak RSS with PopXL's separate host copy is reported too.
* ``numpy``: forward, backward and update written by hand in NumPy.
* ``torch``: PyTorch eager, autograd, ``torch.optim.SGD``.
* ``jax``: one ``jax.jit``-compiled step (``value_and_grad`` + SGD, parameters
  donated), CPU backend.

Every step of every peer includes feeding the batch and reading the loss back
as a Python float (which also forces JAX's asynchronous dispatch to finish).

Each peer lives in its own worker process (so imports, thread pools and
memory do not mix); this process drives them one at a time, alternating,
over several repetitions, and reports medians of the steps/s and, as the
ratios, medians of each repetition's ratio to ipuxl (paired: a slow spell
of the machine falls on both blocks of a repetition alike; bench/_stats.py).
Before each timed block it
sleeps ``--gap`` seconds so the previous peer's spinning thread pools stop
competing for the cores, then runs ``--warm-ms`` of the peer's untimed
steps (``_warm_up`` says why). Peak RSS is measured in a fresh process per peer
(its VmHWM; see ``peak_rss_bytes``).

Correctness: a fresh model of every peer runs ``--check-steps`` steps;
its losses and final weights are compared with a float64 NumPy run of the
same step; the script exits with 1 if any peer is outside float32 tolerance.

    IPUXL_CORE_DIR=build/dev PYTHONPATH=python python3 bench/mnist_step.py
    ... bench/mnist_step.py --quick              # a few steps, for tests
    ... bench/mnist_step.py --json out.json      # also write the numbers
    ... bench/mnist_step.py --profile            # where ipuxl's step time goes
"""
import argparse
import json
import multiprocessing as mp
import os
import platform
import resource
import statistics
import sys
import time

import numpy as np

from _peer import Peer  # bench/ is on sys.path when a script here runs
from _stats import paired_ratio

from mnist_peers import (  # noqa: F401 - the peers are part of this script's API
    INIT_STD, INSTALL, LAYERS, LOSS_RTOL, LR, PEER_CLASSES, PEERS, W_ATOL, IpuxlPeer, JaxPeer,
    NumpyPeer, TorchPeer, make_batches, make_weights)



# --------------------------------------------------------------------------- worker

def _import_check(name):
    """None if the peer can run here, else why not."""
    try:
        if name == "ipuxl":
            import ipuxl  # noqa: F401
            import ipuxl.addons  # noqa: F401
        elif name == "torch":
            import torch  # noqa: F401
        elif name == "jax":
            os.environ.setdefault("JAX_PLATFORMS", "cpu")
            import jax  # noqa: F401
            import jaxlib  # noqa: F401
    except Exception as e:  # noqa: BLE001 - any import failure skips the peer
        return f"not available ({type(e).__name__}: {e}); install: {INSTALL[name]}"
    return None


def peak_rss_bytes() -> int:
    """This process's peak resident set size.

    Linux: VmHWM from /proc/self/status. Not ru_maxrss: a spawned worker is
    forked from the driver and then execs, and Linux carries the forked
    copy's high-water mark across the exec into ru_maxrss, so every small
    worker would report the driver's size. VmHWM belongs to the exec'd
    process's own address space. Elsewhere ru_maxrss (kB on Linux/BSD,
    bytes on macOS)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass  # no procfs: fall back to ru_maxrss below
    r = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return r if sys.platform == "darwin" else r * 1024


def _run_steps(model, data, n):
    k = len(data)
    loss = float("nan")
    t0 = time.perf_counter()
    for i in range(n):
        loss = model.step(data[i % k])
    return time.perf_counter() - t0, loss


def _warm_up(model, data, seconds):
    """Untimed steps for `seconds`, right before a timed block: on this
    project's VMs (Firecracker guests whose kernel packs lightly loaded
    threads onto one vCPU, `sched_vcpu_pack` in /proc/cmdline) a peer's
    threads come back from the idle gap sharing one vCPU for tens of
    milliseconds (bench/results/2026-11-27.md, "ninth session"); a training
    loop, which does not idle between steps, runs in the steady state."""
    i, k = 0, len(data)
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        model.step(data[i % k])
        i += 1


def worker(name, conn, opts):
    """Serve commands from the driver for one peer until "exit"."""
    note = _import_check(name)
    cls = PEER_CLASSES[name]
    conn.send({"note": note, "version": None if note else cls.version()})
    if note:
        conn.close()
        return
    weights = make_weights(opts["seed"])
    models, data = {}, {}
    while True:
        cmd, *a = conn.recv()
        try:
            if cmd == "exit":
                break
            elif cmd == "setup":
                (batch,) = a
                pool = make_batches(batch, opts["pool"], opts["seed"] + 1)
                t0 = time.perf_counter()
                m = cls(weights, batch, opts)
                d = [m.prepare(x, y) for x, y in pool]
                m.step(d[0])
                t1 = time.perf_counter()
                models[batch], data[batch] = m, d
                info = {"first_step_s": t1 - t0}
                if hasattr(m, "session_start"):
                    info["compile_s"] = t1 - m.session_start
                    info["ir_build_s"] = m.ir_build_s
                conn.send(info)
            elif cmd == "run":
                batch, n, *warm = a
                _warm_up(models[batch], data[batch], warm[0] if warm else 0.0)
                conn.send(_run_steps(models[batch], data[batch], n)[0])
            elif cmd == "check":
                # A fresh model: n steps on the pool, losses and final weights.
                batch, n = a
                pool = make_batches(batch, opts["pool"], opts["seed"] + 1)
                m = cls(weights, batch, opts)
                d = [m.prepare(x, y) for x, y in pool]
                losses = [m.step(d[i % len(d)]) for i in range(n)]
                conn.send({"losses": losses, "weights": m.weights()})
                del m
            elif cmd == "rss":
                conn.send(peak_rss_bytes())
            elif cmd == "profile":
                batch, n = a
                conn.send(_profile(models[batch], data[batch], n))
            else:
                raise ValueError(f"unknown command {cmd!r}")
        except Exception as e:  # noqa: BLE001 - reported to the driver
            import traceback
            conn.send({"error": f"{name}: {type(e).__name__}: {e}\n{traceback.format_exc()}"})
    conn.close()


def _profile(model, data, n):
    """ipuxl only: per-Execute host time over n steps, program size."""
    eng = model.session.engine
    _run_steps(model, data, 10)
    eng.set_profiling(False)
    plain, _ = _run_steps(model, data, n)
    eng.set_profiling(True)
    before = {lab: (s, c) for lab, s, c in eng.profile()}
    total, _ = _run_steps(model, data, n)
    eng.set_profiling(False)
    rows = []
    for lab, s, c in eng.profile():
        s0, c0 = before.get(lab, (0.0, 0))
        if c - c0:
            rows.append((lab, (s - s0) / n, (c - c0) / n))
    return {"steps": n, "step_s": plain / n, "profiled_step_s": total / n, "rows": rows,
            "counts": dict(eng.program_counts()), "describe": eng.describe()}


# --------------------------------------------------------------------------- driver

def check(peers, args, ctx, opts):
    """Run n steps from the same start in every peer and in float64 NumPy."""
    n = args.check_steps
    ref_model = NumpyPeer(make_weights(args.seed), args.check_batch, opts, dtype=np.float64)
    pool = make_batches(args.check_batch, args.pool, args.seed + 1)
    d = [ref_model.prepare(x, y) for x, y in pool]
    ref_losses = np.array([ref_model.step(d[i % len(d)]) for i in range(n)])
    ref_w = ref_model.weights()
    out, ok, got_w = {}, True, {}
    for p in peers:
        r = p.call("check", args.check_batch, n)
        got_w[p.name] = r["weights"]
        losses = np.array(r["losses"])
        dl = float(np.max(np.abs(losses - ref_losses) / np.abs(ref_losses)))
        dw = max(float(np.max(np.abs(a.astype(np.float64) - ref)))
                 for got, want in zip(r["weights"], ref_w) for a, ref in zip(got, want))
        good = bool(np.all(np.isfinite(losses))) and dl <= LOSS_RTOL and dw <= W_ATOL
        ok &= good
        out[p.name] = {"loss_rel_diff": dl, "weight_abs_diff": dw, "ok": good,
                       "first_loss": float(losses[0]), "last_loss": float(losses[-1])}
    # Spread among the float32 peers themselves (against NumPy float32).
    if "numpy" in got_w:
        for name, w in got_w.items():
            out[name]["weight_abs_diff_vs_numpy32"] = max(
                float(np.max(np.abs(a - b))) for x, y in zip(w, got_w["numpy"])
                for a, b in zip(x, y))
    # Weight movement, to show the tolerance is meaningful.
    w0 = make_weights(args.seed, np.float64)
    moved = max(float(np.max(np.abs(a - b))) for x, y in zip(ref_w, w0) for a, b in zip(x, y))
    return ok, out, ref_losses, moved


def measure_rss(names, args, ctx, opts):
    """Peak RSS of a fresh process per peer: import, build the batch-8
    step, run --rss-steps steps. 'python+numpy' is the bare worker."""
    out = {}
    for name in names:
        p = Peer(name, opts, ctx, worker)
        try:
            if p.note is None:
                p.call("setup", args.batch_small)
                p.call("run", args.batch_small, args.rss_steps)
                out[name] = p.call("rss")
        finally:
            p.close()
    # ipuxl again with PopXL's separate host copy of the weights (the peer
    # above shares them: Session(..., share_host_weights=True)).
    if "ipuxl" in out:
        p = Peer("ipuxl", dict(opts, share_host_weights=False), ctx, worker)
        try:
            p.call("setup", args.batch_small)
            p.call("run", args.batch_small, args.rss_steps)
            out["ipuxl host copy"] = p.call("rss")
        finally:
            p.close()
    # A worker that only holds the batch pool: the common baseline.
    conn, child = ctx.Pipe()
    proc = ctx.Process(target=_baseline_worker, args=(child, opts, args.batch_small), daemon=True)
    proc.start()
    out["python+numpy"] = conn.recv()
    proc.join(30)
    return out


def _baseline_worker(conn, opts, batch):
    make_weights(opts["seed"])
    make_batches(batch, opts["pool"], opts["seed"] + 1)
    conn.send(peak_rss_bytes())
    conn.close()


def timed_round(peers, batch, n, gap, warm, rotate):
    """Each peer in turn (rotated start) runs n timed steps after gap idle
    seconds and warm seconds of untimed steps."""
    out = {}
    order = peers[rotate % len(peers):] + peers[:rotate % len(peers)]
    for p in order:
        time.sleep(gap)
        out[p.name] = p.call("run", batch, n, warm)
    return out


def compile_bytecode():
    """Write the bytecode caches of ipuxl and this script before any worker
    starts. NumPy, PyTorch and JAX are installed packages with their caches
    written by pip; ipuxl run from a checkout (PYTHONPATH=python) would
    otherwise compile its modules from source in every worker whenever
    PYTHONDONTWRITEBYTECODE is set, and that one-off compilation (about
    1 MiB of transient parser memory) would be counted in its peak RSS."""
    import compileall
    import importlib.util
    spec = importlib.util.find_spec("ipuxl")  # locates the package without importing it
    dirs = [os.path.dirname(os.path.abspath(__file__))]
    if spec is not None and spec.submodule_search_locations:
        dirs += list(spec.submodule_search_locations)
    for d in dirs:
        if os.access(d, os.W_OK):
            compileall.compile_dir(d, quiet=1)


def fmt_bytes(b):
    return f"{b / 2**20:.1f} MiB"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--quick", action="store_true",
                    help="a few steps of everything (a smoke test, not a measurement)")
    ap.add_argument("--json", metavar="PATH", help="also write the numbers to this JSON file")
    ap.add_argument("--peers", default=",".join(PEERS), help="comma-separated subset of " +
                    ",".join(PEERS) + " (ipuxl is always included: ratios are against it)")
    ap.add_argument("--device", default="ipu_model", help="ipuxl Session device")
    ap.add_argument("--reps", type=int, default=7, help="interleaved timed repetitions")
    ap.add_argument("--steps-small", type=int, default=300, help="steps per block at batch 8")
    ap.add_argument("--steps-large", type=int, default=60, help="steps per block at batch 128")
    ap.add_argument("--warmup", type=int, default=30, help="untimed steps per peer and batch")
    ap.add_argument("--epoch-steps", type=int, default=7500,
                    help="steps of one epoch at batch 8 (60000 / 8)")
    ap.add_argument("--epoch-reps", type=int, default=3, help="interleaved epoch repetitions")
    ap.add_argument("--epoch-partial", type=int, default=1000,
                    help="steps a slow peer runs, extrapolated to the epoch")
    ap.add_argument("--epoch-full-max", type=float, default=20.0,
                    help="a peer other than ipuxl/jax whose predicted epoch takes longer (s) "
                         "runs --epoch-partial steps, extrapolated")
    ap.add_argument("--check-steps", type=int, default=40, help="steps of the correctness check")
    ap.add_argument("--check-batch", type=int, default=8, help="batch of the correctness check")
    ap.add_argument("--rss-steps", type=int, default=200, help="steps before reading peak RSS")
    ap.add_argument("--pool", type=int, default=16, help="distinct batches per batch size")
    ap.add_argument("--gap", type=float, default=0.3, help="idle seconds before each timed block")
    ap.add_argument("--warm-ms", type=float, default=100.0,
                    help="untimed steps of a peer right before each timed block")
    ap.add_argument("--threads", type=int, default=0,
                    help="threads per peer (0: each library's default, all cores). Sets "
                         "OMP/OPENBLAS/MKL_NUM_THREADS and IPUXL_NUM_THREADS for every worker, "
                         "torch.set_num_threads; jax gets XLA's single-threaded CPU flags "
                         "only for 1")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--profile", action="store_true",
                    help="also profile ipuxl's step (engine profiler) at both batch sizes")
    ap.add_argument("--profile-steps", type=int, default=200)
    args = ap.parse_args(argv)
    args.batch_small, args.batch_large = 8, 128
    if args.quick:
        args.reps, args.steps_small, args.steps_large, args.warmup = 2, 10, 3, 2
        args.epoch_steps, args.epoch_reps, args.epoch_partial = 40, 1, 20
        args.check_steps, args.rss_steps, args.pool, args.gap = 5, 5, 4, 0.05
        args.warm_ms = 0.0
        args.profile_steps = 10
    wanted = [p.strip() for p in args.peers.split(",") if p.strip()]
    bad = [p for p in wanted if p not in PEERS]
    if bad:
        ap.error(f"unknown peers {bad}; choose from {PEERS}")
    if "ipuxl" not in wanted:
        wanted.insert(0, "ipuxl")

    opts = {"seed": args.seed, "pool": args.pool, "device": args.device,
            "threads": args.threads}
    if args.threads > 0:
        # Inherited by the spawned workers before they import anything.
        for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                    "IPUXL_NUM_THREADS"):
            os.environ[var] = str(args.threads)
        if args.threads == 1:
            os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                                       " --xla_cpu_multi_thread_eigen=false"
                                       " intra_op_parallelism_threads=1").strip()
    compile_bytecode()
    ctx = mp.get_context("spawn")  # fresh interpreters: no imports shared with the driver
    peers = [Peer(n, opts, ctx, worker) for n in wanted]
    skipped = {p.name: p.note for p in peers if p.note}
    peers = [p for p in peers if p.note is None]
    names = [p.name for p in peers]
    if "ipuxl" not in names:
        print(f"ipuxl: {skipped['ipuxl']}", file=sys.stderr)
        return 2

    result = {"cores": os.cpu_count(), "load_before": os.getloadavg(),
              "threads": args.threads or "library defaults",
              "versions": {"python": platform.python_version(),
                           **{p.name: p.version for p in peers}},
              "skipped": skipped, "quick": args.quick, "device": args.device,
              "model": "784-512-512-512-10 MLP, GELU(tanh), mean softmax CE, SGD lr 0.05, float32"}
    print(f"MNIST training step: {result['model']}")
    print(f"cores: {result['cores']}; threads per peer: {result['threads']}; load average before: "
          + " ".join(f"{x:.2f}" for x in result["load_before"]))
    for k, v in result["versions"].items():
        print(f"  {k:<6} {v}")
    for k, v in skipped.items():
        print(f"  {k:<6} skipped: {v}")
    # The machine, the instruction-set level ipuxl's workers use (they
    # inherit IPUXL_ISA) and every level's FMA peak, measured here.
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from fma_peak import machine_lines  # noqa: PLC0415
    from ipuxl import _core  # noqa: PLC0415
    lines, peaks = machine_lines(_core)
    result["machine"] = {"lines": lines, "fma_peak_gflops": peaks, "isa": _core.isa()}
    for line in lines:
        print(line)
    print(flush=True)

    try:
        # ---- correctness
        ok, chk, ref_losses, moved = check(peers, args, ctx, opts)
        result["check"] = {"steps": args.check_steps, "batch": args.check_batch, "peers": chk,
                           "reference": "numpy float64", "max_weight_change": moved,
                           "loss_rtol": LOSS_RTOL, "weight_atol": W_ATOL}
        print(f"check: {args.check_steps} steps at batch {args.check_batch} from the same start, "
              f"against a float64 NumPy run (loss {ref_losses[0]:.4f} -> {ref_losses[-1]:.4f}; "
              f"weights moved up to {moved:.2e})")
        for n, c in chk.items():
            print(f"  {n:<6} max loss rel diff {c['loss_rel_diff']:.2e}  "
                  f"max weight abs diff {c['weight_abs_diff']:.2e}"
                  + (f" (vs numpy float32 {c['weight_abs_diff_vs_numpy32']:.2e})"
                     if "weight_abs_diff_vs_numpy32" in c else "") + "  "
                  f"{'ok' if c['ok'] else 'DISAGREES'}")
        print(flush=True)

        # ---- setup (ipuxl: compile) and warm-up
        setup = {}
        for b in (args.batch_small, args.batch_large):
            for p in peers:
                setup.setdefault(p.name, {})[b] = p.call("setup", b)
                p.call("run", b, args.warmup)
        result["setup"] = setup

        # ---- steps/s, interleaved
        times = {b: {n: [] for n in names} for b in (args.batch_small, args.batch_large)}
        for r in range(args.reps):
            for b, n in ((args.batch_small, args.steps_small), (args.batch_large, args.steps_large)):
                warm = args.warm_ms * 1e-3
                for name, t in timed_round(peers, b, n, args.gap, warm, r).items():
                    times[b][name].append(t / n)
        med = {b: {n: statistics.median(ts) for n, ts in per.items()} for b, per in times.items()}

        # ---- one epoch at batch 8
        epoch_plan = {}
        for p in peers:
            predicted = med[args.batch_small][p.name] * args.epoch_steps
            full = p.name in ("ipuxl", "jax") or predicted <= args.epoch_full_max
            epoch_plan[p.name] = args.epoch_steps if full else min(args.epoch_partial,
                                                                   args.epoch_steps)
        epoch = {n: [] for n in names}
        for r in range(args.epoch_reps):
            order = peers[r % len(peers):] + peers[:r % len(peers)]
            for p in order:
                time.sleep(args.gap)
                n = epoch_plan[p.name]
                epoch[p.name].append(p.call("run", args.batch_small, n, args.warm_ms * 1e-3)
                                     * args.epoch_steps / n)
        epoch_med = {n: statistics.median(ts) if ts else float("nan") for n, ts in epoch.items()}

        # ---- profile
        prof = {}
        if args.profile:
            ip = next(p for p in peers if p.name == "ipuxl")
            for b in (args.batch_small, args.batch_large):
                prof[b] = ip.call("profile", b, args.profile_steps)
    finally:
        for p in peers:
            p.close()

    # ---- peak RSS, a fresh process per peer
    rss = measure_rss(names, args, ctx, opts)
    result["load_after"] = os.getloadavg()

    # ---- report
    base8, base128 = med[args.batch_small]["ipuxl"], med[args.batch_large]["ipuxl"]
    print(f"timing: {args.reps} interleaved repetitions of {args.steps_small} steps (batch 8) and "
          f"{args.steps_large} steps (batch 128), {args.gap} s idle and {args.warm_ms:.0f} ms of "
          "untimed steps before each block; medians. "
          f"Epoch: {args.epoch_steps} steps at batch 8, {args.epoch_reps} repetitions, median.")
    print("ratio = peer time / ipuxl time (above 1: ipuxl faster), the median of the "
          "per-repetition ratios (paired: bench/_stats.py); RSS ratio = peer / ipuxl")
    print()
    hdr = (f"{'peer':<7}{'b8 steps/s':>11}{'ratio':>7}{'b128 steps/s':>13}{'ratio':>7}"
           f"{'epoch b8 (s)':>14}{'ratio':>7}{'1st step (s)':>13}{'ratio':>7}"
           f"{'peak RSS':>12}{'ratio':>7}")
    print(hdr)
    first = {n: setup[n][args.batch_small]["first_step_s"] for n in names}
    rows = {}
    for n in names:
        ext = "*" if epoch_plan[n] < args.epoch_steps else " "
        rows[n] = {
            "steps_per_s_b8": 1.0 / med[args.batch_small][n],
            "ratio_b8": paired_ratio(times[args.batch_small][n], times[args.batch_small]["ipuxl"]),
            "steps_per_s_b128": 1.0 / med[args.batch_large][n],
            "ratio_b128": paired_ratio(times[args.batch_large][n],
                                       times[args.batch_large]["ipuxl"]),
            "ratio_of_medians_b8": med[args.batch_small][n] / base8,
            "ratio_of_medians_b128": med[args.batch_large][n] / base128,
            "epoch_b8_s": epoch_med[n], "epoch_ratio": epoch_med[n] / epoch_med["ipuxl"],
            "epoch_steps_run": epoch_plan[n], "epoch_extrapolated": bool(ext.strip()),
            "first_step_s": first[n], "first_step_ratio": first[n] / first["ipuxl"],
            "peak_rss_bytes": rss.get(n), "rss_ratio": rss[n] / rss["ipuxl"] if n in rss else None,
            "samples_b8_s": times[args.batch_small][n], "samples_b128_s": times[args.batch_large][n],
            "samples_epoch_s": epoch[n],
        }
        r = rows[n]
        print(f"{n:<7}{r['steps_per_s_b8']:>11.1f}{r['ratio_b8']:>7.2f}"
              f"{r['steps_per_s_b128']:>13.1f}{r['ratio_b128']:>7.2f}"
              f"{r['epoch_b8_s']:>13.1f}{ext}{r['epoch_ratio']:>7.2f}"
              f"{r['first_step_s']:>13.3f}{r['first_step_ratio']:>7.2f}"
              f"{fmt_bytes(rss[n]):>12}{r['rss_ratio']:>7.2f}")
    print(f"{'python+numpy':<12} baseline process peak RSS {fmt_bytes(rss['python+numpy'])}")
    if "ipuxl host copy" in rss:
        print(f"ipuxl peak RSS with PopXL's separate host copy of the weights "
              f"(share_host_weights=False): {fmt_bytes(rss['ipuxl host copy'])}")
    if any(r["epoch_extrapolated"] for r in rows.values()):
        print(f"* extrapolated from {args.epoch_partial} steps")
    s8, s128 = setup["ipuxl"][args.batch_small], setup["ipuxl"][args.batch_large]
    print(f"ipuxl compile (Session(...) start to first run end): batch 8 {s8['compile_s']:.3f} s, "
          f"batch 128 {s128['compile_s']:.3f} s; IR build before it (modules, autodiff): "
          f"{s8['ir_build_s']:.3f} s / {s128['ir_build_s']:.3f} s")
    print("1st step = construct the peer's model and run its first step (ipuxl: IR build + "
          "compile; jax: trace + XLA compile); peak RSS: fresh process, batch-8 model, "
          f"{args.rss_steps} steps")
    print("load average after: " + " ".join(f"{x:.2f}" for x in result["load_after"]))
    result.update({"table": rows, "rss_baseline_bytes": rss["python+numpy"],
                   "rss_ipuxl_host_copy_bytes": rss.get("ipuxl host copy"),
                   "options": vars(args)})

    if prof:
        result["profile"] = {}
        for b, pr in prof.items():
            result["profile"][b] = {k: v for k, v in pr.items() if k != "describe"}
            print_profile(b, pr)

    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1, default=float)
        print(f"wrote {args.json}")
    print()
    print("all peers agree" if ok else "PEERS DISAGREE")
    return 0 if ok else 1


def print_profile(batch, pr, top=25):
    rows = sorted(pr["rows"], key=lambda r: -r[1])
    ex = sum(r[1] for r in rows)
    print()
    print(f"ipuxl profile, batch {batch}: {pr['step_s'] * 1e6:.0f} us/step unprofiled, "
          f"{pr['profiled_step_s'] * 1e6:.0f} us profiled, of which Execute nodes "
          f"{ex * 1e6:.0f} us; the rest ({(pr['profiled_step_s'] - ex) * 1e6:.0f} us) is "
          "Session.run, stream transfers, copies and program walking")
    print(f"program: {pr['counts']}")
    # Group by op type too.
    by_type = {}
    for lab, s, c in rows:
        t = lab.split(":", 1)[0]
        a = by_type.setdefault(t, [0.0, 0.0])
        a[0] += s
        a[1] += c
    print("  by op type (us/step, calls/step): " + ", ".join(
        f"{t} {v[0] * 1e6:.0f} ({v[1]:.0f})" for t, v in sorted(by_type.items(),
                                                                 key=lambda kv: -kv[1][0])))
    print(f"  top {top} Execute nodes:")
    for lab, s, c in rows[:top]:
        print(f"    {s * 1e6:8.1f} us {100 * s / pr['profiled_step_s']:5.1f}%  x{c:.0f}  {lab}")


if __name__ == "__main__":
    sys.exit(main())
