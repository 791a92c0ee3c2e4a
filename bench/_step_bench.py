"""The driver and the peer bases of the training-step benchmarks.

Shared by ``transformer_step.py`` and ``gptj_step.py``. A benchmark
describes itself in a :class:`StepBench` (its sizes, parameters, weights and
batches, peer classes, step counts) and hands it to :func:`main`, which

* starts every peer in its own spawned worker process (``bench/_peer.py``;
  the script's ``worker(name, conn, opts)`` calls :func:`serve`),
* checks every peer against a float64 run of the benchmark's PyTorch peer
  (:func:`check`: ``--check-steps`` steps from the same start, losses and
  final weights within the benchmark's tolerances),
* times the peers in alternating blocks (the starting peer rotating, ``--gap``
  idle seconds and ``--warm-ms`` of untimed steps before each block) over
  ``--reps`` repetitions,
* prints the CPU model, its SIMD flags, the ISA level and every level's FMA
  peak, the medians and the paired ratios (``bench/_stats.py``), and returns
  1 when a peer is outside tolerance (0 otherwise, 2 without ipuxl).

A peer class takes ``(weights, size, opts)``; ``prepare(x, target)`` turns a
batch into its native form, ``step(prepared)`` runs one training step and
returns the loss as a Python float, ``weights()`` gives ``{name: array}``,
the static ``version()`` a line for the header. A class with ``optional =
True`` (torch.compile) is dropped with the reason, not a crash, when it
fails; its static ``probe()``, when present, returns a reason to skip it
before it starts. :class:`TorchStep`, :class:`JaxStep` and
:class:`IpuxlStep` carry what the benchmarks' peers of each framework share.
"""
import argparse
import importlib
import json
import multiprocessing as mp
import os
import platform
import statistics
import sys
import time
from dataclasses import dataclass
from typing import Callable, Dict, Tuple

import numpy as np

from _peer import Peer  # bench/ is on sys.path when a script here runs
from _stats import paired_ratio

INSTALL = {
    "ipuxl": "build the core (scripts/dev_build.sh build/dev) and run with "
             "IPUXL_CORE_DIR=build/dev PYTHONPATH=python, or pip install the project",
    "torch": "pip install torch==2.13.0",
    "torch.compile": "pip install torch==2.13.0 (and a C++ compiler for its CPU code)",
    "jax": "pip install jax jaxlib",
}
#: The module a peer needs (by the part of its name before a dot).
_MODULES = {"ipuxl": "ipuxl.addons", "torch": "torch", "jax": "jax"}


@dataclass(frozen=True)
class StepGroup:
    """Sizes timed with the same number of steps per block (``--steps-<option>``)."""

    option: str
    sizes: Tuple[str, ...]
    default: int
    quick: int
    help: str  # "steps per block, <help>"
    label: str  # the timing line's name of the group
    profile_div: int = 1  # profile --profile-steps // profile_div steps (at least 3)


@dataclass(frozen=True)
class StepBench:
    """What :func:`main` needs of one benchmark."""

    doc: str  # the script's docstring: its first line describes the options
    title: str
    model: str
    sizes: Tuple[str, ...]
    default_sizes: str
    sizes_help: str
    names: Tuple[str, ...]  # parameter names, shared by every peer
    peer_classes: Dict[str, type]  # the first one is ipuxl
    reference_peer: type  # a PyTorch peer taking dtype=torch.float64
    make_weights: Callable  # (size, seed) -> {name: array}
    make_batches: Callable  # (size, count, seed) -> [(x, target)]
    size_label: Callable
    size_dtype: Callable  # size -> "float32" / "float16"
    step_flops: Callable  # size -> multiply-add FLOPs of a step's matmuls
    tolerances: Dict[str, Tuple[float, float]]  # dtype -> (loss rel, weights abs)
    groups: Tuple[StepGroup, ...]
    first_step: Tuple[Tuple[str, str], ...]  # (peer, what its first step includes)
    column: int = 30  # width of a size's steps/s column

    @property
    def peers(self):
        return tuple(self.peer_classes)


def draw_weight(rng, shape, is_scale=False):
    """A float64 parameter: a matrix ~ N(0, 1/fan_in), a LayerNorm scale
    (``is_scale``) 1 + N(0, 0.1), a shift or bias N(0, 0.02) (non-trivial,
    so that a wrong gradient of any of them shows)."""
    if len(shape) == 2:
        return rng.normal(0.0, 1.0 / np.sqrt(shape[0]), shape)
    if is_scale:
        return 1.0 + rng.normal(0.0, 0.1, shape)
    return rng.normal(0.0, 0.02, shape)


# --------------------------------------------------------------------------- peer bases

class TorchStep:
    """PyTorch eager (autograd, torch.optim.SGD). A subclass sets ``name`` and
    defines ``forward(x)`` from the parameters ``self.p``; with dtype
    float64 it is the reference."""

    name = "torch"

    def __init__(self, weights, opts, dtype, lr, scale=1.0):
        import torch
        import torch.nn.functional as F
        if opts.get("threads", 0) > 0:
            torch.set_num_threads(opts["threads"])
        self.torch, self.F, self.dtype, self.scale = torch, F, dtype, scale
        self.p = {n: torch.tensor(w, dtype=dtype, requires_grad=True) for n, w in weights.items()}
        self.opt = torch.optim.SGD(list(self.p.values()), lr=lr / scale)

    @staticmethod
    def version():
        import torch
        n = int(os.environ.get("OMP_NUM_THREADS", "0")) or torch.get_num_threads()
        return f"{torch.__version__} ({n} threads)"

    def prepare(self, x, t):
        loss_dtype = self.torch.float64 if self.dtype == self.torch.float64 else \
            self.torch.float32
        return (self.torch.from_numpy(x).to(self.dtype), self.torch.from_numpy(t).to(loss_dtype))

    def loss(self, x, t):
        y = self.forward(x).to(t.dtype)
        return ((y - t) ** 2).mean()

    def step(self, batch):
        loss = self.loss(*batch)
        self.opt.zero_grad(set_to_none=True)
        (loss * self.scale).backward()
        self.opt.step()
        return loss.item()

    def weights(self):
        return {n: v.detach().numpy().copy() for n, v in self.p.items()}


class JaxStep:
    """JAX: the whole step (value_and_grad + SGD) under one jax.jit, the
    parameters donated; a subclass's __init__ calls :meth:`_jit`."""

    name = "jax"

    def _jit(self, loss_fn, weights, lr, scale=1.0):
        """Compile the step of ``loss_fn(params, x, target)`` (``scale``: a
        static loss scale) and take ``weights`` as the parameters."""
        import jax
        import jax.numpy as jnp

        def train_step(p, x, t):
            loss, g = jax.value_and_grad(lambda *a: loss_fn(*a) * scale)(p, x, t)
            return jax.tree_util.tree_map(lambda a, d: a - (lr / scale) * d, p, g), loss / scale

        self._step = jax.jit(train_step, donate_argnums=0)
        self.p = {n: jnp.asarray(w) for n, w in weights.items()}

    @staticmethod
    def version():
        import jax
        import jaxlib
        return f"{jax.__version__} (jaxlib {jaxlib.__version__}, {jax.default_backend()})"

    def prepare(self, x, t):
        return x, t  # NumPy: every call transfers them (the feed)

    def step(self, batch):
        self.p, loss = self._step(self.p, *batch)
        return float(loss)

    def weights(self):
        return {n: np.array(v) for n, v in self.p.items()}


def jax_layer_norm(x, w, b, eps):
    """LayerNorm over the last axis, in JAX."""
    import jax
    import jax.numpy as jnp
    m = jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.mean(jnp.square(x - m), axis=-1, keepdims=True)
    return (x - m) * jax.lax.rsqrt(var + eps) * w + b


class IpuxlStep:
    """A block in ipuxl's PopXL API (popxl_addons Module + autodiff), one
    Session.run per step; a subclass's __init__ calls :meth:`_build`."""

    name = "ipuxl"

    def _build(self, block, shape, dt, lr, ls, opts, names, half_partials=False):
        """The training program of the Module ``block`` of one (tokens,
        hidden) input: the batch ``shape`` (b, s, h) fed in dtype ``dt`` and
        its float32 target, the loss mean((y - target)^2) in float32 and its
        gradient in the main graph (``ls``: a static loss scale),
        ``ops.scaled_add_`` of every variable; then the session
        (``share_host_weights=True``). ``names``: the parameters, in order;
        ``half_partials``: the Ir's ``partialsTypeMatMuls`` is "half"."""
        import ipuxl as popxl
        import ipuxl.addons as addons
        import ipuxl.ops as ops

        b, s, h = shape
        n_tok = b * s
        t0 = time.perf_counter()
        ir = popxl.Ir(replication=1)
        if half_partials:
            ir._pb_ir.getSessionOptions().partialsTypeMatMuls = "half"
        with ir.main_graph:
            x_stream = popxl.h2d_stream((b, s, h), dt, "x")
            t_stream = popxl.h2d_stream((b, s, h), popxl.float32, "target")
            x = ops.reshape(ops.host_load(x_stream, "x"), (n_tok, h))
            tgt = ops.reshape(ops.host_load(t_stream, "target"), (n_tok, h))
            facts, fwd = block.create_graph(x)
            bwd = addons.autodiff(fwd)
            variables = facts.init()
            fwd_info = fwd.bind(variables).call_with_info(x)
            y = fwd_info.outputs[0]
            diff = (ops.cast(y, popxl.float32) if dt != popxl.float32 else y) - tgt
            loss = ops.mean(diff * diff)
            dy = diff * (2.0 * ls / (n_tok * h))
            if dt != popxl.float32:
                dy = ops.cast(dy, dt)
            loss_stream = popxl.d2h_stream(loss.shape, loss.dtype, "loss")
            ops.host_store(loss_stream, loss)
            acts = bwd.grad_graph_info.inputs_dict(fwd_info)
            bwd_info = bwd.call_with_info(dy, args=acts)
            grads = bwd.grad_graph_info.fwd_parent_ins_to_grad_parent_outs(fwd_info, bwd_info)
            for w in variables.tensors:
                ops.scaled_add_(w, grads[w], b=-lr / ls)
        ir.num_host_transfers = 1
        self.ir_build_s = time.perf_counter() - t0
        self.session_start = time.perf_counter()
        self.session = popxl.Session(ir, opts.get("device", "ipu_model"), share_host_weights=True)
        self.session.__enter__()
        self.x_stream, self.t_stream, self.loss_stream = x_stream, t_stream, loss_stream
        self.vars = variables.to_dict()
        self.names = names

    @staticmethod
    def version():
        import ipuxl
        from ipuxl._core_loader import blas_backend, core
        blas = blas_backend.split(" (")[0]
        half = "float16 FMAs" if core.half_partials_native() else "float32"
        return (f"{ipuxl.__version__} ({core.num_threads()} core threads, level {core.isa()}, "
                f"GEMM {blas}, half partials in {half})")

    def prepare(self, x, t):
        return {self.x_stream: x, self.t_stream: t}

    def step(self, feeds):
        return float(self.session.run(feeds)[self.loss_stream])

    def weights(self):
        data = self.session.get_tensors_data([self.vars[n] for n in self.names])
        return {n: np.array(data[self.vars[n]]) for n in self.names}


# --------------------------------------------------------------------------- worker

def _import_check(name, cls):
    try:
        base = name.split(".")[0]
        if base == "jax":
            os.environ.setdefault("JAX_PLATFORMS", "cpu")
        importlib.import_module(_MODULES[base])
    except Exception as e:  # noqa: BLE001 - any import failure skips the peer
        return f"not available ({type(e).__name__}: {e}); install: {INSTALL[name]}"
    probe = getattr(cls, "probe", None)
    return probe() if probe else None


def _run_steps(model, data, n):
    k = len(data)
    t0 = time.perf_counter()
    for i in range(n):
        model.step(data[i % k])
    return time.perf_counter() - t0


def _fresh(bench, cls, size, opts):
    """A new model of ``cls`` and its prepared batch pool."""
    pool = bench.make_batches(size, opts["pool"], opts["seed"] + 1)
    m = cls(bench.make_weights(size, opts["seed"]), size, opts)
    return m, [m.prepare(x, t) for x, t in pool]


def serve(bench, name, conn, opts):
    """Serve the driver's commands for the peer ``name`` until "exit"."""
    cls = bench.peer_classes[name]
    note = _import_check(name, cls)
    conn.send({"note": note, "version": None if note else cls.version()})
    if note:
        conn.close()
        return
    models, data = {}, {}
    while True:
        cmd, *a = conn.recv()
        try:
            if cmd == "exit":
                break
            if cmd == "setup":
                (size,) = a
                t0 = time.perf_counter()
                m, d = _fresh(bench, cls, size, opts)
                m.step(d[0])
                t1 = time.perf_counter()
                models[size], data[size] = m, d
                info = {"first_step_s": t1 - t0}
                if hasattr(m, "session_start"):
                    info["compile_s"] = t1 - m.session_start
                    info["ir_build_s"] = m.ir_build_s
                conn.send(info)
            elif cmd == "run":
                size, n, *warm = a
                from mnist_step import _warm_up  # noqa: PLC0415
                _warm_up(models[size], data[size], warm[0] if warm else 0.0)
                # Process CPU time (all threads) too: on a shared machine it
                # shows the work a peer does, whatever the others' load.
                c0 = time.process_time()
                wall = _run_steps(models[size], data[size], n)
                conn.send((wall, time.process_time() - c0))
            elif cmd == "check":
                size, n = a
                m, d = _fresh(bench, cls, size, opts)
                losses = [m.step(d[i % len(d)]) for i in range(n)]
                conn.send({"losses": losses, "weights": m.weights()})
            elif cmd == "profile":
                size, n = a
                from mnist_step import _profile  # noqa: PLC0415
                conn.send(_profile(models[size], data[size], n))
            else:
                raise ValueError(f"unknown command {cmd!r}")
        except Exception as e:  # noqa: BLE001 - reported to the driver
            import traceback
            conn.send({"error": f"{name}: {type(e).__name__}: {e}\n{traceback.format_exc()}"})
    conn.close()


# --------------------------------------------------------------------------- driver

def reference(bench, size, n, opts):
    """Losses and weights of n float64 PyTorch steps from the same start."""
    import torch
    m = bench.reference_peer(bench.make_weights(size, opts["seed"]), size, opts,
                             dtype=torch.float64)
    pool = bench.make_batches(size, opts["pool"], opts["seed"] + 1)
    d = [m.prepare(x, t) for x, t in pool]
    losses = np.array([m.step(d[i % len(d)]) for i in range(n)])
    return losses, {k: v.astype(np.float64) for k, v in m.weights().items()}


def check(bench, peers, size, n, opts):
    """Every peer's ``n`` steps against :func:`reference`. Returns (all
    within tolerance, {peer: differences}, reference losses, the largest
    weight change, dtype, {optional peer that failed: reason})."""
    ref_losses, ref_w = reference(bench, size, n, opts)
    w0 = bench.make_weights(size, opts["seed"])
    names = bench.names
    moved = max(float(np.max(np.abs(ref_w[k] - w0[k].astype(np.float64)))) for k in names)
    dtype = bench.size_dtype(size)
    out, ok, failed = {}, True, {}
    for p in peers:
        try:
            r = p.call("check", size, n)
        except RuntimeError as e:
            if not getattr(bench.peer_classes[p.name], "optional", False):
                raise
            failed[p.name] = "fails: " + str(e).strip().split("\n")[0]
            continue
        losses = np.array(r["losses"])
        dl = float(np.max(np.abs(losses - ref_losses) / np.abs(ref_losses)))
        got = {k: r["weights"][k].astype(np.float64) for k in names}
        worst = max(names, key=lambda k: float(np.max(np.abs(got[k] - ref_w[k]))))
        dw = float(np.max(np.abs(got[worst] - ref_w[worst])))
        good = bool(np.all(np.isfinite(losses))) and dl <= bench.tolerances[dtype][0] and \
            dw <= bench.tolerances[dtype][1]
        ok &= good
        out[p.name] = {"loss_rel_diff": dl, "weight_abs_diff": dw, "worst_weight": worst,
                       "ok": good}
    return ok, out, ref_losses, moved, dtype, failed


def _options(bench, argv):
    ap = argparse.ArgumentParser(description=bench.doc.split("\n")[0],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="a smoke test, not a measurement")
    ap.add_argument("--json", metavar="PATH", help="also write the numbers to this JSON file")
    ap.add_argument("--peers", default=",".join(bench.peers),
                    help="comma-separated subset of " + ",".join(bench.peers) +
                    " (ipuxl always runs)")
    ap.add_argument("--sizes", default=bench.default_sizes, help=bench.sizes_help)
    ap.add_argument("--isa", choices=("sse", "avx2", "avx512"),
                    help="force ipuxl's instruction-set level (IPUXL_ISA) in its worker "
                         "process; the peers keep their own best kernels")
    ap.add_argument("--device", default="ipu_model")
    ap.add_argument("--reps", type=int, default=7, help="interleaved timed repetitions")
    for g in bench.groups:
        ap.add_argument(f"--steps-{g.option}", type=int, default=g.default,
                        help=f"steps per block, {g.help}")
    ap.add_argument("--warmup", type=int, default=20, help="untimed steps per peer and size")
    ap.add_argument("--check-steps", type=int, default=10, help="steps of the correctness check")
    ap.add_argument("--pool", type=int, default=8, help="distinct batches per size")
    ap.add_argument("--gap", type=float, default=0.3, help="idle seconds before each block")
    ap.add_argument("--warm-ms", type=float, default=100.0,
                    help="untimed steps of a peer right before each timed block "
                         "(bench/mnist_step.py's _warm_up says why)")
    ap.add_argument("--threads", type=int, default=0,
                    help="threads per peer (0: library defaults); sets OMP/OPENBLAS/"
                         "IPUXL_NUM_THREADS, torch threads, XLA single-thread flags for 1")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--profile", action="store_true", help="also profile ipuxl's step")
    ap.add_argument("--profile-steps", type=int, default=200)
    args = ap.parse_args(argv)
    if args.quick:
        args.reps, args.warmup = 2, 1
        for g in bench.groups:
            setattr(args, f"steps_{g.option}", g.quick)
        args.check_steps, args.pool, args.gap, args.profile_steps = 3, 2, 0.0, 5
        args.warm_ms = 0.0
    wanted = [p.strip() for p in args.peers.split(",") if p.strip()]
    bad = [p for p in wanted if p not in bench.peers]
    if bad:
        ap.error(f"unknown peers {bad}; choose from {bench.peers}")
    if "ipuxl" not in wanted:
        wanted.insert(0, "ipuxl")
    sizes = [s.strip() for s in args.sizes.split(",") if s.strip()]
    if any(s not in bench.sizes for s in sizes):
        ap.error(f"sizes must be among {list(bench.sizes)}")
    return args, wanted, sizes


def _set_environment(args):
    if args.isa:
        os.environ["IPUXL_ISA"] = args.isa  # the spawned workers inherit it
    if args.threads > 0:
        for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                    "IPUXL_NUM_THREADS"):
            os.environ[var] = str(args.threads)
        if args.threads == 1:
            os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                                       " --xla_cpu_multi_thread_eigen=false"
                                       " intra_op_parallelism_threads=1").strip()


def _print_check(bench, result, skipped, chk, size, n, ref_losses, moved, dtype, w):
    tol = bench.tolerances[dtype]
    print(f"check {bench.size_label(size)}: {n} steps against float64 PyTorch "
          f"(loss {ref_losses[0]:.4f} -> {ref_losses[-1]:.4f}; weights moved up to "
          f"{moved:.2e}; tolerances loss {tol[0]:g} rel, weights {tol[1]:g} abs)")
    for name, c in chk.items():
        print(f"  {name:<{w}} max loss rel diff {c['loss_rel_diff']:.2e}  max weight abs diff "
              f"{c['weight_abs_diff']:.2e} ({c['worst_weight']})  "
              f"{'ok' if c['ok'] else 'DISAGREES'}")
    for name, why in skipped.items():
        print(f"  {name:<{w}} skipped: {why}")
    result["skipped"].update(skipped)


def _time_blocks(peers, sizes, steps, args):
    """Alternating timed blocks: {size: {peer: [s/step per repetition]}} of
    wall and of process CPU time."""
    times = {s: {p.name: [] for p in peers} for s in sizes}
    cpu = {s: {p.name: [] for p in peers} for s in sizes}
    for r in range(args.reps):
        for size in sizes:
            order = peers[r % len(peers):] + peers[:r % len(peers)]
            for p in order:
                time.sleep(args.gap)
                t, c = p.call("run", size, steps[size], args.warm_ms * 1e-3)
                times[size][p.name].append(t / steps[size])
                cpu[size][p.name].append(c / steps[size])
    return times, cpu


def _measure(bench, peers, sizes, args, opts, result, w):
    """The checks, the setups and the timed blocks. Returns (all within
    tolerance, the peers left, times, cpu, ipuxl's profile per size)."""
    ok = True
    result["check"] = {}
    for size in sizes:
        good, chk, ref_losses, moved, dtype, failed = check(bench, peers, size,
                                                            args.check_steps, opts)
        ok &= good
        for p in [p for p in peers if p.name in failed]:
            p.close()
        peers = [p for p in peers if p.name not in failed]
        result["check"][size] = {"peers": chk, "max_weight_change": moved}
        _print_check(bench, result, failed, chk, size, args.check_steps, ref_losses, moved,
                     dtype, w)
    print(flush=True)

    setup = {}
    for size in sizes:
        for p in peers:
            setup.setdefault(p.name, {})[size] = p.call("setup", size)
            p.call("run", size, args.warmup)
    result["setup"] = setup
    steps = {s: getattr(args, f"steps_{g.option}") for g in bench.groups for s in g.sizes}
    times, cpu = _time_blocks(peers, sizes, steps, args)
    prof = {}
    if args.profile:
        ip = next(p for p in peers if p.name == "ipuxl")
        div = {s: g.profile_div for g in bench.groups for s in g.sizes}
        for size in sizes:
            n_prof = args.profile_steps if div[size] == 1 else \
                max(3, args.profile_steps // div[size])
            prof[size] = ip.call("profile", size, n_prof)
    return ok, peers, times, cpu, prof



def _print_shares(label, what, rates, peak):
    """One line of a size's rates, each peer's with its share of `peak`:
    ``  label: what: peer rate (share%); ...``."""
    print(f"  {label}: {what}: " + "; ".join(
        f"{n} {r:.0f} ({100 * r / peak:.0f}%)" for n, r in rates.items()))

def _report(bench, names, sizes, times, cpu, peaks, core, result, args, w):
    """The timing table and the per-size lines; fills result["table"]."""
    med = {s: {n: statistics.median(ts) for n, ts in per.items()} for s, per in times.items()}
    label = bench.size_label
    print(f"timing: {args.reps} interleaved repetitions of " + " / ".join(
        f"{getattr(args, f'steps_{g.option}')} ({g.label})" for g in bench.groups) +
        f" steps per peer, {args.gap} s idle and "
        f"{args.warm_ms:.0f} ms of untimed steps before each block; medians; "
        "ratio = peer time / ipuxl time (above 1: ipuxl faster), median of the "
        "per-repetition ratios")
    table = {}
    col = bench.column
    print(f"{'peer':<{w + 1}}" + "".join(f"{label(s) + ' steps/s':>{col}}{'ratio':>7}"
                                         for s in sizes))
    for n in names:
        row = {}
        line = f"{n:<{w + 1}}"
        for s in sizes:
            row[s] = {"steps_per_s": 1.0 / med[s][n],
                      "ratio": paired_ratio(times[s][n], times[s]["ipuxl"]),
                      "ratio_of_medians": med[s][n] / med[s]["ipuxl"],
                      "samples_s": times[s][n]}
            sps = row[s]["steps_per_s"]
            line += f"{sps:>{col}.{1 if sps >= 10 else 3}f}{row[s]['ratio']:>7.2f}"
        table[n] = row
        print(line)
    peak = peaks[core.isa()][1]
    for s in sizes:
        gf = bench.step_flops(s) / 1e9
        _print_shares(label(s), f"{gf:.{1 if gf >= 1 else 3}f} GFLOP of matmuls a step; GFLOP/s and "
                      f"share of the {core.isa()} all-core FMA peak ({peak:.0f} GFLOP/s)",
                      {n: gf * table[n][s]["steps_per_s"] for n in names}, peak)
    for s in sizes:
        print(f"  per repetition {label(s)} steps/s: " + "; ".join(
            "/".join(f"{1.0 / times[s][n][r]:.{0 if times[s][n][r] < 0.1 else 2}f}"
                     for n in names) for r in range(args.reps))
            + f"  ({'/'.join(names)})")
    for s in sizes:
        print(f"  {label(s)} process CPU s/step (all threads, median): " + "; ".join(
            f"{n} {statistics.median(cpu[s][n]):.3f}" for n in names))
        for n in names:
            table[n][s]["cpu_s_per_step"] = statistics.median(cpu[s][n])
    from fma_peak import cpu_peaks  # noqa: PLC0415
    cpk = cpu_peaks(core)
    if cpk:
        result["machine"]["fma_peak_cpu_gflops"] = cpk
        pc = cpk[core.isa()]
        for s in sizes:
            gf = bench.step_flops(s) / 1e9
            _print_shares(label(s), f"GFLOP per process CPU-second and share of the {core.isa()} "
                          f"FMA peak per CPU-second ({pc:.0f}; descheduled time not counted)",
                          {n: gf / table[n][s]["cpu_s_per_step"] for n in names}, pc)
    for s in sizes:
        st = result["setup"]["ipuxl"][s]
        print(f"ipuxl {label(s)}: IR build {st['ir_build_s']:.3f} s, compile + first step "
              f"{st['compile_s']:.3f} s" + "".join(
                  f"; {n} first step ({what}) "
                  f"{result['setup'].get(n, {}).get(s, {}).get('first_step_s', float('nan')):.3f} s"
                  for n, what in bench.first_step))
    return table


def main(bench, argv=None, worker=None) -> int:
    """Run the benchmark (the options: ``--help``); ``worker``: the script's
    ``worker(name, conn, opts)``, which calls :func:`serve`."""
    args, wanted, sizes = _options(bench, argv)
    _set_environment(args)
    opts = {"seed": args.seed, "pool": args.pool, "device": args.device,
            "threads": args.threads}
    from mnist_step import compile_bytecode, print_profile  # noqa: PLC0415
    compile_bytecode()
    ctx = mp.get_context("spawn")
    peers = [Peer(n, opts, ctx, worker) for n in wanted]
    skipped = {p.name: p.note for p in peers if p.note}
    peers = [p for p in peers if p.note is None]
    if "ipuxl" not in [p.name for p in peers]:
        print(f"ipuxl: {skipped['ipuxl']}", file=sys.stderr)
        return 2
    w = max(6, *(len(n) for n in bench.peers))

    from fma_peak import machine_lines  # noqa: PLC0415
    from ipuxl import _core  # noqa: PLC0415 - after IPUXL_ISA is set
    lines, peaks = machine_lines(_core)
    result = {"cores": os.cpu_count(), "load_before": os.getloadavg(),
              "threads": args.threads or "library defaults",
              "versions": {"python": platform.python_version(),
                           **{p.name: p.version for p in peers}},
              "skipped": skipped, "quick": args.quick,
              "machine": {"lines": lines, "fma_peak_gflops": peaks, "isa": _core.isa()},
              "model": bench.model}
    print(f"{bench.title}: {result['model']}")
    print(f"cores: {result['cores']}; threads per peer: {result['threads']}; load average "
          "before: " + " ".join(f"{x:.2f}" for x in result["load_before"]))
    for k, v in result["versions"].items():
        print(f"  {k:<{w}} {v}")
    for k, v in skipped.items():
        print(f"  {k:<{w}} skipped: {v}")
    for line in lines:
        print(line)
    print(flush=True)

    try:
        ok, peers, times, cpu, prof = _measure(bench, peers, sizes, args, opts, result, w)
    finally:
        for p in peers:
            p.close()
    result["load_after"] = os.getloadavg()
    table = _report(bench, [p.name for p in peers], sizes, times, cpu, peaks, _core, result,
                    args, w)
    print("load average after: " + " ".join(f"{x:.2f}" for x in result["load_after"]))
    result.update({"table": table, "options": vars(args)})
    if prof:
        result["profile"] = {}
        for s, pr in prof.items():
            result["profile"][s] = {k: v for k, v in pr.items() if k != "describe"}
            print_profile(bench.size_label(s), pr)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1, default=float)
        print(f"wrote {args.json}")
    print()
    print("all peers agree" if ok else "PEERS DISAGREE")
    return 0 if ok else 1
